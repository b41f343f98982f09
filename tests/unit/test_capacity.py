"""Capacity profiles: built-ins, user files with located errors, and the backends they build."""

from __future__ import annotations

from pathlib import Path

import pytest

from lemon.backends.llamacpp import LlamaBackend
from lemon.backends.local import LocalBackend
from lemon.backends.openai import OpenAIBackend
from lemon.backends.scripted import ScriptedBackend
from lemon.capacity import BUILTIN_PROFILES, build_backends, load_profiles, resolve_profile
from lemon.pricing import DEFAULT_TIER_PRICES, UNIT_PRICES, profile_prices, resolve_prices
from lemon.spec import Capacity, SpecError

PROFILE_FILE = """\
profiles:
  - name: mixed
    description: a local small tier and two remote tiers
    tiers:
      small: {type: transformers, model: packaged:smollm2-135m-instruct}
      medium: {type: openai, url: "http://127.0.0.1:9/v1", model: mid}
      large: {type: openai, url: "http://127.0.0.1:9/v1", model: big, mode: completions}
"""


def test_embedded_has_three_real_tiers() -> None:
    profile = resolve_profile("embedded")
    assert not profile.shared_model
    backends = build_backends(profile)
    assert all(isinstance(b, LlamaBackend) for b in backends.values())
    assert {t.value: b.model_id for t, b in backends.items()} == {
        "small": "llamacpp:smollm2-135m-instruct",
        "medium": "llamacpp:qwen2.5-coder-0.5b-instruct",
        "large": "llamacpp:qwen2.5-coder-1.5b-instruct",
    }
    assert "Qwen2.5-Coder-1.5B-Instruct" in backends[Capacity.LARGE].label
    # priced through lemon.pricing, in proportion to parameter count: 135M, 494M, 1.54B
    prices = resolve_prices(profile=profile)
    assert prices == DEFAULT_TIER_PRICES
    assert prices.medium == 1.0
    assert prices.large / prices.small == pytest.approx(1_543_714_304 / 134_515_008)


def test_tiny_and_transformers_are_one_shared_model() -> None:
    for name, kind in (("tiny", LlamaBackend), ("transformers", LocalBackend)):
        profile = resolve_profile(name)
        assert profile.shared_model
        assert resolve_prices(profile=profile) == UNIT_PRICES  # one model: one price
        backends = build_backends(profile)
        assert len({id(b) for b in backends.values()}) == 1
        (backend,) = {id(b): b for b in backends.values()}.values()
        assert isinstance(backend, kind)
        assert "SmolLM2-135M-Instruct" in backend.label


def test_llamacpp_tiers_name_a_pinned_model_or_a_file(tmp_path: Path) -> None:
    path = tmp_path / "profiles.yaml"
    path.write_text(
        "profiles:\n  - name: local\n    tiers:\n"
        "      small: {type: llamacpp, model: smollm2-135m-instruct, cost_per_token: 0.5}\n"
        "      medium: {type: llamacpp, model: /models/mine.gguf}\n"
        "      large: {type: llamacpp, model: qwen-9000}\n"
    )
    with pytest.raises(SpecError, match="a llamacpp tier needs 'model'") as info:
        load_profiles(path)
    assert f"{path}:6:14:" in info.value.render()
    path.write_text(path.read_text().replace("qwen-9000", "qwen2.5-coder-1.5b-instruct"))
    (profile,) = load_profiles(path)
    assert profile.tiers[Capacity.SMALL].cost_per_token == 0.5
    assert profile.tiers[Capacity.MEDIUM].parameters is None  # a file of unknown size
    # only one tier priced and one of unknown size: the profile says nothing, defaults apply
    assert profile_prices(profile) is None
    assert resolve_prices(profile=profile) == DEFAULT_TIER_PRICES
    backends = build_backends(profile)
    assert backends[Capacity.MEDIUM].model_id == "llamacpp:/models/mine.gguf"


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


def test_tier_type_embedded_of_older_files_is_transformers_on_the_packaged_model(
    tmp_path: Path,
) -> None:
    path = tmp_path / "profiles.yaml"
    path.write_text(
        PROFILE_FILE.replace(
            "{type: transformers, model: packaged:smollm2-135m-instruct}", "{type: embedded}"
        )
    )
    with pytest.warns(DeprecationWarning, match="tier type 'embedded' is 'transformers'"):
        profile = resolve_profile("mixed", files=[path])
    small = profile.tiers[Capacity.SMALL]
    assert (small.type, small.model) == ("transformers", "packaged:smollm2-135m-instruct")
    assert small.parameters == resolve_profile("tiny").tiers[Capacity.SMALL].parameters


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
