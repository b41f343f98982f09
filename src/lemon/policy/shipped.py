"""The learned policy that ships with the package: ``--policy learned``.

A policy version directory (``lemon-policy/v1``: a LoRA adapter over the packaged
SmolLM2-135M-Instruct, its tokenizer and ``policy.json``) under ``lemon/policy/learned/``,
trained on the SVAMP outcome tables (``benchmarks/results/policy-tables/``, where its
numbers and the commands that made them are): ``svamp-tables@grpo-credit-s1``, 40 steps of
GRPO with two-way counterfactual credit from the seed-1 SFT warm start, the two adapters
summed into one (:mod:`lemon_train.compose`). Every file's SHA-256 is pinned here and checked
before anything is loaded, so a modified or truncated copy is refused with the file it found
wrong, not run.

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
    "adapter_model.safetensors": "48ae5f742e0a27c83b664073a19bc918b2c2fa82772640d752340a76bbce0016",
    "chat_template.jinja": "872be49dbb638044ad01b60388f48d469ff2980e5f0dccdc22ec907db54d0788",
    "metrics.jsonl": "e5b96e2070595afd5ed031549871670907149d0633858ac12583a6cc24780038",
    "policy.json": "39050245d4d2a774a46fa343d423c150b9efbd71efe0bccfb0db86d5860ff1db",
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
