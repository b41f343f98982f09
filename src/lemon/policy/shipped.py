"""The learned policy that ships with the package: ``--policy learned``.

A policy version directory (``lemon-policy/v1``: a LoRA adapter over the packaged
SmolLM2-135M-Instruct, its tokenizer and ``policy.json``) under ``lemon/policy/learned/``,
trained on the SVAMP outcome tables (``benchmarks/results/policy-tables/``, where its
numbers and the commands that made them are): ``svamp-tables@sft-cs-s0``, cost-sensitive LoRA
SFT of seed 0 (every team of each train item a row, weighted by its reward above the item's
worst team's), the best of the learned policies on the test table (0.745 at 778 tier-priced
tokens an item, its own 49 included; on the fixed teams' hull within its interval, not above).
Every file's SHA-256 is pinned here and checked before anything is loaded, so a modified or
truncated copy is refused with the file it found wrong, not run.

It is not ``lemon run``'s default: until a learned policy beats the fixed teams on the test
tables, the default is the best fixed team for the task kind (:mod:`lemon.policy.fixed`).
"""

from __future__ import annotations

from pathlib import Path

from lemon.policy.version import PolicyVersionError, file_sha256

__all__ = ["LEARNED", "MAX_BYTES", "PINNED", "SHIPPED_DIR", "shipped_policy"]

LEARNED = "learned"
"""The ``--policy`` value that names the shipped policy."""

SHIPPED_DIR = Path(__file__).with_name("learned")

MAX_BYTES = 20 * 1024 * 1024
"""The most the shipped directory may weigh (the package carries it)."""

PINNED: dict[str, str] = {
    "adapter_config.json": "f57f12b6d390376d10d1d4ca9ba004a2f9d51d664c2c07805faa492996fd0c82",
    "adapter_model.safetensors": "2f409cf1bd71ae8ff6fe6d3ef933bb151a4ac54dfde298262fcdfbc2293a14f3",
    "chat_template.jinja": "872be49dbb638044ad01b60388f48d469ff2980e5f0dccdc22ec907db54d0788",
    "metrics.jsonl": "5a889916428c4cad0287a3777b78392539466b3f1dcb8cdecbe242b9c6fea843",
    "policy.json": "c72966f7c4e66a4ab2fe446a49a21ae9a599a7fdad11e072c654d6d61540d9f9",
    "tokenizer.json": "bf346d64f6f0fbcefb4c1b6928a98241467dff36c6fbae5fe1785c4ff90667f4",
    "tokenizer_config.json": "156c41a2e14e6e6bd4286c506c38ee883a78e0f5ce165ad9bf63fe73ebf9e974",
}
"""File name -> SHA-256 of every file of the shipped version (all of them, nothing else)."""


def shipped_policy(directory: Path = SHIPPED_DIR, pinned: dict[str, str] | None = None) -> Path:
    """The shipped policy's directory, after checking its files against the pins; raises
    :class:`PolicyVersionError` naming what is missing, extra or changed."""
    pins = PINNED if pinned is None else pinned
    if not pins:
        raise PolicyVersionError("--policy learned: this build ships no learned policy")
    if not directory.is_dir():
        raise PolicyVersionError(f"--policy learned: {directory}: missing (a broken install?)")
    present = {p.name for p in directory.iterdir() if p.is_file()}
    missing = sorted(set(pins) - present)
    if missing:
        raise PolicyVersionError(f"--policy learned: {directory}: missing {', '.join(missing)}")
    extra = sorted(present - set(pins))
    if extra:
        raise PolicyVersionError(
            f"--policy learned: {directory}: files not in the pinned version: {', '.join(extra)}"
        )
    for name, want in sorted(pins.items()):
        got = file_sha256(directory / name)
        if got != want:
            raise PolicyVersionError(
                f"--policy learned: {directory / name}: sha256 {got[:16]}..., pinned "
                f"{want[:16]}... (the shipped policy was modified; reinstall the package)"
            )
    return directory
