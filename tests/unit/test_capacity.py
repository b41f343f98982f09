"""Capacity profiles: built-ins, user files with located errors, and the backends they build."""

from __future__ import annotations

from pathlib import Path

import pytest

from lemon.backends.local import LocalBackend
from lemon.backends.openai import OpenAIBackend
from lemon.backends.scripted import ScriptedBackend
from lemon.capacity import BUILTIN_PROFILES, build_backends, load_profiles, resolve_profile
from lemon.spec import Capacity, SpecError

PROFILE_FILE = """\
profiles:
  - name: mixed
    description: a local small tier and two remote tiers
    tiers:
      small: {type: embedded}
      medium: {type: openai, url: "http://127.0.0.1:9/v1", model: mid}
      large: {type: openai, url: "http://127.0.0.1:9/v1", model: big, mode: completions}
"""


def test_embedded_is_one_shared_model() -> None:
    profile = resolve_profile("embedded")
    assert profile.shared_model
    backends = build_backends(profile)
    assert len({id(b) for b in backends.values()}) == 1
    (backend,) = {id(b): b for b in backends.values()}.values()
    assert isinstance(backend, LocalBackend)
    assert "SmolLM2-135M-Instruct" in backend.label


def test_scripted_tiers_are_distinct_and_labelled() -> None:
    backends = build_backends(BUILTIN_PROFILES["scripted"])
    assert all(isinstance(b, ScriptedBackend) for b in backends.values())
    assert len({b.model_id for b in backends.values()}) == 3
    assert all("test double" in b.label for b in backends.values())


def test_user_profile_file(tmp_path: Path) -> None:
    path = tmp_path / "profiles.yaml"
    path.write_text(PROFILE_FILE)
    profile = resolve_profile("mixed", files=[path])
    backends = build_backends(profile)
    assert isinstance(backends[Capacity.SMALL], LocalBackend)
    medium, large = backends[Capacity.MEDIUM], backends[Capacity.LARGE]
    assert isinstance(medium, OpenAIBackend)
    assert isinstance(large, OpenAIBackend)
    assert (medium.model, large.mode) == ("mid", "completions")


def test_bad_profile_file_is_located(tmp_path: Path) -> None:
    path = tmp_path / "profiles.yaml"
    path.write_text(PROFILE_FILE.replace("      large: {type: openai", "      lrge: {type: openai"))
    with pytest.raises(SpecError) as info:
        load_profiles(path)
    rendered = info.value.render()
    assert f"{path}:7:7:" in rendered
    path.write_text(PROFILE_FILE.replace(', url: "http://127.0.0.1:9/v1", model: mid', ""))
    with pytest.raises(SpecError, match="an openai tier needs 'url' and 'model'"):
        load_profiles(path)


def test_endpoints_need_urls(monkeypatch: pytest.MonkeyPatch) -> None:
    for tier in ("SMALL", "MEDIUM", "LARGE"):
        monkeypatch.delenv(f"LEMON_{tier}_URL", raising=False)
    with pytest.raises(KeyError, match="LEMON_<TIER>_URL"):
        resolve_profile("endpoints")
    for tier in ("SMALL", "MEDIUM", "LARGE"):
        monkeypatch.setenv(f"LEMON_{tier}_URL", f"http://127.0.0.1:9/{tier.lower()}/v1")
    backends = build_backends(resolve_profile("endpoints"))
    assert {b.model_id for b in backends.values()} == {
        f"openai:http://127.0.0.1:9/{t}/v1#default" for t in ("small", "medium", "large")
    }


def test_unknown_profile() -> None:
    with pytest.raises(KeyError, match="unknown capacity profile 'nope'"):
        resolve_profile("nope")
