"""The persistent call cache: keys, what is cached, and real concurrent processes on one file."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from lemon.backends.base import Decoding, GenerationRequest, LarkGrammar, Message
from lemon.backends.callcache import (
    CachedBackend,
    PersistentCallCache,
    cacheable,
    default_cache_path,
    request_key,
    wrap_backends,
)
from lemon.backends.scripted import ScriptedBackend, ScriptedConfig, ScriptedRule
from lemon.engine.executor import CallCache, execute
from lemon.spec import Capacity, load_spec
from tests.conftest import EXAMPLES, ROOT, run_lemon

DIGEST = ScriptedConfig(rules=(ScriptedRule(output="answer {digest}"),))


def _request(text: str = "hi", **decoding: object) -> GenerationRequest:
    return GenerationRequest((Message("user", text),), Decoding(**decoding))  # type: ignore[arg-type]


def test_only_deterministic_calls_are_cacheable() -> None:
    assert cacheable(_request())
    assert cacheable(_request(temperature=0.7, seed=3))
    assert not cacheable(_request(temperature=0.7))


def test_the_key_covers_model_decoding_prompt_prefill_and_constraint() -> None:
    base = _request()
    keys = {
        request_key("m", base),
        request_key("other-model", base),
        request_key("m", _request(max_tokens=10)),
        request_key("m", _request(stop=("\n",))),
        request_key("m", _request("hi!")),
        request_key("m", GenerationRequest(base.messages, base.decoding, prefill="x")),
        request_key("m", GenerationRequest(base.messages, base.decoding, raw_prompt="hi")),
        request_key(
            "m", GenerationRequest(base.messages, base.decoding, constraint=LarkGrammar("start: A"))
        ),
    }
    assert len(keys) == 8
    assert request_key("m", _request()) == request_key("m", base)


def test_a_constrained_key_names_the_code_that_applies_the_constraint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The grammar's key hashes the grammar's module; the masks come from guided.py, whose
    change must not serve answers decoded under the old masks (an unconstrained key stays)."""
    from lemon.backends import guided

    constrained = GenerationRequest(
        (Message("user", "hi"),), Decoding(), constraint=LarkGrammar("start: A")
    )
    before = (request_key("m", constrained), request_key("m", _request()))
    monkeypatch.setattr(guided, "guided_code", lambda: "another version")
    after = (request_key("m", constrained), request_key("m", _request()))
    assert after[0] != before[0]
    assert after[1] == before[1]


def test_cached_backend_answers_from_disk(tmp_path: Path) -> None:
    async def go() -> None:
        inner = ScriptedBackend(DIGEST)
        cache = PersistentCallCache(tmp_path / "c.sqlite")
        backend = CachedBackend(inner, cache)
        first = await backend.generate(_request())
        again = await backend.generate(_request())
        assert (first.cached, again.cached) == (False, True)
        assert (again.text, again.prompt_tokens, again.completion_tokens) == (
            first.text,
            first.prompt_tokens,
            first.completion_tokens,
        )
        assert inner.calls == 1
        await backend.generate(_request(temperature=0.9))  # unseeded sampling: never cached
        await backend.generate(_request(temperature=0.9))
        assert inner.calls == 3
        assert cache.stats().entries == 1
        # a new process (a new connection) sees the entry
        reopened = CachedBackend(
            ScriptedBackend(DIGEST), PersistentCallCache(tmp_path / "c.sqlite")
        )
        assert (await reopened.generate(_request())).cached

    asyncio.run(go())


def test_runs_report_hits_and_keep_their_costs(tmp_path: Path) -> None:
    async def go() -> None:
        parsed = load_spec(EXAMPLES[0])
        cache = PersistentCallCache(tmp_path / "c.sqlite")
        tiers = {t: ScriptedBackend(DIGEST, tier=t.value) for t in Capacity}
        cold = await execute(parsed.spec, task="t", backends=wrap_backends(tiers, cache))
        warm = await execute(
            parsed.spec, task="t", backends=wrap_backends(tiers, cache), cache=CallCache()
        )
        assert cold.cache_hits == 0
        assert warm.cache_hits == len(parsed.spec.agents)
        assert warm.calls == 0
        assert warm.answer == cold.answer
        assert warm.tokens() == cold.tokens()
        assert warm.to_json()["cache_hits"] == warm.cache_hits

    asyncio.run(go())


_WORKER = """
import asyncio, json, sys
from lemon.backends.base import Decoding, GenerationRequest, Message
from lemon.backends.callcache import CachedBackend, PersistentCallCache
from lemon.backends.scripted import ScriptedBackend, ScriptedConfig, ScriptedRule

async def main() -> None:
    path, worker = sys.argv[1], int(sys.argv[2])
    # each process answers in its own words: only a shared cache makes them agree
    rule = ScriptedRule(output=f"answer {{digest}} from worker {worker}")
    inner = ScriptedBackend(ScriptedConfig(rules=(rule,)))
    backend = CachedBackend(inner, PersistentCallCache(path), identity="one-shared-model")
    texts = {}
    for i in range(60):
        prompt = f"task {(i * 7 + worker) % 40}"
        request = GenerationRequest((Message("user", prompt),), Decoding(max_tokens=8))
        texts[prompt] = (await backend.generate(request)).text
    print(json.dumps({"calls": inner.calls, "texts": texts}))

asyncio.run(main())
"""


def test_real_processes_share_one_cache(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    script = tmp_path / "worker.py"
    script.write_text(_WORKER, encoding="utf-8")
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(path), str(w)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for w in range(6)
    ]
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        outputs.append(json.loads(out))
    merged: dict[str, str] = {}
    for output in outputs:
        for prompt, text in output["texts"].items():
            assert merged.setdefault(prompt, text) == text  # every process saw the same answer
    assert len(merged) == 40
    cache = PersistentCallCache(path)
    assert cache.stats().entries == 40
    # without sharing, each process would compute its 40 prompts (240 calls) and the answers
    # would disagree above; shared, a prompt is computed once, or twice when two processes
    # race for it (the loser then reads the winner's answer)
    calls = sum(o["calls"] for o in outputs)
    assert 40 <= calls < 6 * 40


def test_location_and_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEMON_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("LEMON_CALL_CACHE", raising=False)
    assert default_cache_path() == tmp_path / "calls.sqlite"
    monkeypatch.setenv("LEMON_CALL_CACHE", "off")
    assert default_cache_path() is None
    monkeypatch.setenv("LEMON_CALL_CACHE", str(tmp_path / "x.sqlite"))
    assert default_cache_path() == tmp_path / "x.sqlite"

    path = tmp_path / "cli.sqlite"
    cache = PersistentCallCache(path)
    backend = CachedBackend(ScriptedBackend(DIGEST), cache)
    for text in ("a", "b", "c"):
        asyncio.run(backend.generate(_request(text)))
    stats = run_lemon("cache", "stats", "--path", str(path), "--json")
    assert stats.returncode == 0, stats.stderr
    data = json.loads(stats.stdout)
    assert data["entries"] == 3
    (identity,) = data["models"]
    assert identity == ScriptedBackend(DIGEST).content_id(cache)
    assert data["models"] == {identity: 3}
    cleared = run_lemon("cache", "clear", "--path", str(path), "--json")
    assert json.loads(cleared.stdout)["removed"] == 3
    assert PersistentCallCache(path).stats().entries == 0


def test_the_scripted_doubles_identity_covers_its_rules(tmp_path: Path) -> None:
    """Two scripted configs of one name answer differently: their cached answers never mix
    (the old identity, ``scripted:{name}:{tier}``, was the same for both)."""
    cache = PersistentCallCache(tmp_path / "c.sqlite")
    one = ScriptedBackend(ScriptedConfig(rules=(ScriptedRule(output="one"),)))
    two = ScriptedBackend(ScriptedConfig(rules=(ScriptedRule(output="two"),)))
    assert one.model_id == two.model_id
    assert one.content_id(cache) != two.content_id(cache)
    first = asyncio.run(CachedBackend(one, cache).generate(_request("q")))
    second = asyncio.run(CachedBackend(two, cache).generate(_request("q")))
    assert (first.text, second.text) == ("one", "two")


def test_the_llamacpp_identity_covers_the_settings_that_change_outputs(tmp_path: Path) -> None:
    """``context`` decides where "length" cuts and ``repack`` how greedy near-ties break."""
    from tests.conftest import require_extra

    require_extra("llama", "llama_cpp")
    from lemon.backends.llamacpp import LlamaBackend

    weights = tmp_path / "m.gguf"
    weights.write_bytes(b"GGUF not really")
    cache = PersistentCallCache(tmp_path / "c.sqlite")
    base = LlamaBackend(str(weights)).content_id(cache)
    assert base == LlamaBackend(str(weights)).content_id(cache)
    assert base != LlamaBackend(str(weights), context=2048).content_id(cache)
    assert base != LlamaBackend(str(weights), repack=False).content_id(cache)
    assert LlamaBackend(str(weights), slots=16).content_id(cache) == base  # slots: no


def test_the_local_identity_covers_the_chat_template(tmp_path: Path) -> None:
    """A model directory's chat template (``chat_template.jinja``) decides the prompt the model
    sees; editing it must change the identity (the old hash read only weight and json files)."""
    from lemon.backends.local import LocalBackend, ModelSource

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"weights")
    (model / "chat_template.jinja").write_text("{{ messages }}")
    cache = PersistentCallCache(tmp_path / "c.sqlite")

    def identity() -> str:
        return LocalBackend(ModelSource(str(model), "float32")).content_id(cache)

    before = identity()
    (model / "chat_template.jinja").write_text("{{ messages | reverse }}")
    assert identity() != before
    (model / "README.md").write_text("notes")  # not part of what the model computes
    after = identity()
    assert identity() == after


def test_the_identity_is_computed_off_the_event_loop(tmp_path: Path) -> None:
    """A content id hashes the model's files and touches SQLite: the first call computes it in
    a worker thread, not on the loop's thread, and later calls reuse it."""
    import threading

    threads: list[threading.Thread] = []

    class Recording(ScriptedBackend):
        def content_id(self, cache: PersistentCallCache) -> str:
            threads.append(threading.current_thread())
            return super().content_id(cache)

    backend = CachedBackend(Recording(DIGEST), PersistentCallCache(tmp_path / "c.sqlite"))

    async def go() -> threading.Thread:
        await backend.generate(_request("one"))
        await backend.generate(_request("two"))
        return threading.current_thread()

    loop_thread = asyncio.run(go())
    assert len(threads) == 1
    assert threads[0] is not loop_thread


def test_a_hub_ids_identity_is_its_local_snapshot(tmp_path: Path) -> None:
    """A Hugging Face id is keyed by the files of its snapshot in the local hub cache (a new
    revision there is a new identity), not by its name; an id the cache lacks keeps its name."""
    hub = tmp_path / "hub"
    repo = hub / "models--example-org--tiny"
    snapshot = repo / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abcd")
    (snapshot / "config.json").write_text("{}")
    (snapshot / "model.safetensors").write_bytes(b"weights v1")
    code = (
        "import sys; from lemon.backends.callcache import PersistentCallCache; "
        "from lemon.backends.local import LocalBackend, ModelSource; "
        "cache = PersistentCallCache(sys.argv[2]); "
        "print(LocalBackend(ModelSource(sys.argv[1], 'float32', 'cpu')).content_id(cache))"
    )
    env = {"HF_HUB_CACHE": str(hub), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}

    def identity(name: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", code, name, str(tmp_path / "c.sqlite")],
            capture_output=True, text=True, env=env, check=True, timeout=120,
        )  # fmt: skip
        return done.stdout.strip()

    first = identity("example-org/tiny")
    assert first.startswith("local:")
    assert "name:" not in first
    (snapshot / "model.safetensors").write_bytes(b"weights, the second revision")
    assert identity("example-org/tiny") != first
    assert identity("example-org/not-cached") == "local:name:example-org/not-cached@float32:cpu"


def test_an_agent_carries_the_key_of_the_call_that_answered_it(tmp_path: Path) -> None:
    """The executor's agent result names its call by the content key the cache computed: the
    key of the very request it sent (what a table cell records), fresh or from disk; an
    unseeded sample and a tool carry none."""
    from lemon.engine.executor import ExecutionOptions, build_request
    from lemon.spec.roles import default_roles

    parsed = load_spec(ROOT / "examples" / "specs" / "02-plan-solve-verify.yaml")
    cache = PersistentCallCache(tmp_path / "c.sqlite")
    tiers = wrap_backends({t: ScriptedBackend(DIGEST, tier=t.value) for t in Capacity}, cache)

    def run() -> object:
        return asyncio.run(execute(parsed.spec, task="What is 6 * 7?", backends=tiers))

    for attempt in range(2):
        result = run()
        results = {a.name: a for a in result.agents}  # type: ignore[attr-defined]
        for agent in parsed.spec.agents:
            request = build_request(
                agent, spec=parsed.spec, task="What is 6 * 7?", roles=default_roles(),
                results=results, options=ExecutionOptions(),
            )  # fmt: skip
            identity = tiers[agent.capacity].identity()  # type: ignore[attr-defined]
            assert results[agent.name].call_key == request_key(identity, request), attempt
            assert results[agent.name].cached == (attempt == 1)
    sampled = asyncio.run(
        execute(parsed.spec, task="t", backends=tiers,
                options=ExecutionOptions(decoding=Decoding(temperature=0.9)))
    )  # fmt: skip
    assert all(a.call_key is None for a in sampled.agents)
