"""The learned policy that ships with the package: ``--policy learned``.

A policy version directory (``lemon-policy/v1``: a LoRA adapter over the packaged
SmolLM2-135M-Instruct, its tokenizer and ``policy.json``) under ``lemon/policy/learned/``, trained
on the SVAMP outcome tables (the policy-tables experiment of the source checkout, where its numbers
and the commands that made them are): ``svamp-tables@grpo-credit-cs-s0-to20``: 20 steps of GRPO with
two-way counterfactual credit on the train table from the cost-sensitive LoRA SFT of seed 0 (every
team of each train item a row, weighted by its reward above the item's worst team's), composed with
it into one adapter (``python -m lemon_train.compose``): the best of the learned policies on the
test table (0.760 at 490 tier-priced tokens an item, its own 53 included; on the fixed teams' hull,
not above: it writes program-of-thought on large for 197 of the 200 items). Every file's SHA-256 is
pinned here and checked before anything is loaded, so a modified or truncated copy is refused with
the file it found wrong, not run.

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
    "adapter_config.json": "c4448d344e5bf7bec4eb82e69cafdb0c71cb4f554af0f664aa3714502a0c4259",
    "adapter_model.safetensors": "a9e62158b2fd162d209c2309b63bdbb38bdda4003ce8ea79a1860d24e88eca03",
    "chat_template.jinja": "872be49dbb638044ad01b60388f48d469ff2980e5f0dccdc22ec907db54d0788",
    "metrics.jsonl": "9732a8f53fb46418b5a99887cd8bf7d5453eaed631990fa385a74c3b59c38d4a",
    "policy.json": "a80ed385b8c0b015fe583b063bd86cf7b2daa0a100f0feb0f297f74975b6cbfa",
    "tokenizer.json": "a8660be8c8667fc665df92d2f6595ac023120e3e886328e6597138d337e9259d",
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
