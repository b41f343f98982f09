"""``--policy learned``: the policy version shipped with the package, checked against its pins."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from lemon.policy.inference import load_policy
from lemon.policy.shipped import MAX_BYTES, PINNED, SHIPPED_DIR, shipped_policy
from lemon.policy.version import PolicyVersionError, read_policy


def test_the_shipped_policy_is_a_pinned_adapter_over_the_packaged_model() -> None:
    directory = shipped_policy()
    assert sorted(p.name for p in directory.iterdir()) == sorted(PINNED)
    assert sum(p.stat().st_size for p in directory.iterdir()) <= MAX_BYTES
    meta = read_policy(directory)
    assert meta.adapter
    assert meta.base_model == "packaged"
    assert meta.prompt_format == "lemon-policy-prompt/v2"
    policy = load_policy("learned")  # lazily: no weights are loaded until it writes a spec
    assert f"{meta.policy}@{meta.version}" in policy.label


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    target = tmp_path / "learned"
    shutil.copytree(SHIPPED_DIR, target)
    return target


def test_a_changed_file_is_refused_and_named(copy: Path) -> None:
    adapter = copy / "adapter_model.safetensors"
    data = bytearray(adapter.read_bytes())
    data[-1] ^= 0xFF
    adapter.write_bytes(bytes(data))
    with pytest.raises(PolicyVersionError, match=r"adapter_model\.safetensors: sha256 .* pinned"):
        shipped_policy(copy)


def test_a_missing_or_extra_file_is_refused(copy: Path) -> None:
    (copy / "notes.txt").write_text("not shipped")
    with pytest.raises(PolicyVersionError, match=r"files not in the pinned version: notes\.txt"):
        shipped_policy(copy)
    (copy / "notes.txt").unlink()
    (copy / "adapter_config.json").unlink()
    with pytest.raises(PolicyVersionError, match=r"missing adapter_config\.json"):
        shipped_policy(copy)


def test_no_pins_means_no_shipped_policy(copy: Path) -> None:
    with pytest.raises(PolicyVersionError, match="ships no learned policy"):
        shipped_policy(copy, pinned={})
