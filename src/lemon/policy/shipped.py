"""The learned policy that ships with the package: ``--policy learned``.

A policy version directory (``lemon-policy/v1``: a LoRA adapter over the packaged
SmolLM2-135M-Instruct, its tokenizer and ``policy.json``) under ``lemon/policy/learned/``,
trained on the SVAMP outcome tables (``benchmarks/results/policy-tables/``, where its
numbers and the commands that made them are). Every file's SHA-256 is pinned here and checked
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
    "adapter_config.json": "d9c9e98257a38c6f62e864ea87f44b483de5882b22ccb0d902ea9d07f11022a6",
    "adapter_model.safetensors": "b945f733f5c976668c92e734490520a7e67eda15580397fd85e0554f7d66e1bc",
    "chat_template.jinja": "872be49dbb638044ad01b60388f48d469ff2980e5f0dccdc22ec907db54d0788",
    "metrics.jsonl": "c54a253cb199b31bbb66a2fe834d70cf6e6b71cfc54f975e5e07c024537397a5",
    "policy.json": "03f3c3eeda805f50b89841d990fd79e76e76a55f3a3a41dc2e4afd782b8d0d06",
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
