"""Teachers: candidate generation, best-by-R_orch selection, resumable rows, LLM filtering.

Workers here are the ``scripted`` test double (the selection logic is under test); the LLM
teacher against a real model server is in tests/model/test_policy_models.py."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path

import pytest

from lemon.backends.scripted import ScriptedBackend, ScriptedConfig, ScriptedRule
from lemon.data.items import Benchmark, NumericItem
from lemon.policy.prompt import policy_messages, spec_completion
from lemon.policy.template import template_spec
from lemon.spec.models import Capacity
from lemon.spec.validation import parse_spec
from lemon.teaching import SearchSettings, candidate_specs, llm_teacher, search_teacher
from tests.conftest import run_lemon

ITEMS = [
    NumericItem(
        id=f"t-{i}",
        benchmark=Benchmark.GSM8K,
        question=f"What is {i} + 2?",
        answer=i + 2,
        answer_text=str(i + 2),
    )
    for i in range(3)
]


def backends(rules: list[ScriptedRule]) -> dict[Capacity, ScriptedBackend]:
    double = ScriptedBackend(ScriptedConfig(name="workers", rules=tuple(rules)))
    return dict.fromkeys(Capacity, double)


def test_candidates_are_distinct_valid_and_start_with_the_template() -> None:
    found = candidate_specs("What is 2 + 2?", limit=50)
    assert found[0].origin == "template"
    assert found[0].spec == template_spec("What is 2 + 2?")[1]
    texts = {c.origin for c in found}
    assert len(texts) == len(found) > 8
    assert any(c.origin.startswith("mutant:drop_dependency") for c in found)
    assert len(candidate_specs("What is 2 + 2?", limit=3)) == 3


def test_candidates_span_every_tier_with_one_agent_cheap_to_expensive() -> None:
    found = candidate_specs("What is 2 + 2?", limit=50)
    singles = [c for c in found if c.origin.startswith("topology:single:")]
    assert [c.origin for c in singles] == [
        "topology:single:small", "topology:single:medium", "topology:single:large",
    ]  # fmt: skip
    for candidate, tier in zip(singles, Capacity, strict=True):
        assert [(a.role, a.capacity) for a in candidate.spec.agents] == [("math_solver", tier)]
        assert parse_spec(spec_completion(candidate.spec, candidate.spec.output)).spec == (
            candidate.spec
        )
    # the template and its compute variant come first; the tiers before the larger teams
    origins = [c.origin for c in found]
    assert origins.index("topology:single:large") < origins.index("topology:chain")


def test_search_keeps_the_candidate_with_the_best_reward(tmp_path: Path) -> None:
    # Only a verifier answers correctly: teams with a verifier succeed, the rest fail, so the
    # cheapest team that contains a verifier must win.
    rules = [
        ScriptedRule(match="You are a verifier", output="The answer is 4."),
        ScriptedRule(output="I am not sure."),
    ]
    out = tmp_path / "sft.jsonl"
    stats = asyncio.run(
        search_teacher(
            ITEMS[2:], backends=backends(rules), out=out, settings=SearchSettings(candidates=12)
        )
    )
    assert stats.written == 1
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    provenance = row["provenance"]
    winners = [c for c in provenance["candidates"] if c["success"] == 1.0]
    assert winners, provenance
    best = max(provenance["candidates"], key=lambda c: c["reward"])
    assert provenance["chosen"] == best["origin"]
    assert best["success"] == 1.0
    spec = parse_spec(row["completion"][0]["content"]).spec
    assert any(a.role == "verifier" for a in spec.agents)
    assert row["prompt"] == policy_messages(ITEMS[2].question)
    assert stats.reused_calls > 0  # mutants reuse the template's unchanged calls


def test_search_resumes_and_skips_done_items(tmp_path: Path) -> None:
    out = tmp_path / "sft.jsonl"
    settings = SearchSettings(candidates=2)
    workers = backends([ScriptedRule(output="The answer is 3.")])
    asyncio.run(search_teacher(ITEMS[:1], backends=workers, out=out, settings=settings))
    with out.open("a") as sink:
        sink.write('{"id": "t-1", "prompt": [')  # a torn line from an interrupted run
    stats = asyncio.run(search_teacher(ITEMS, backends=workers, out=out, settings=settings))
    assert (stats.skipped_done, stats.written) == (1, 2)
    ids = []
    for line in out.read_text().splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            ids.append(json.loads(line)["id"])
    assert sorted(ids) == ["t-0", "t-1", "t-2"]


def test_llm_teacher_keeps_only_valid_specs(tmp_path: Path) -> None:
    valid = "```yaml\nagents:\n  - name: solo\n    role: math_solver\n    capacity: small\n```"
    teacher = ScriptedBackend(
        ScriptedConfig(
            name="teacher",
            rules=(
                ScriptedRule(match=r"What is 0 \+ 2", output="agents: [oops"),
                ScriptedRule(output=valid),
            ),
        )
    )
    out = tmp_path / "llm.jsonl"
    stats = asyncio.run(llm_teacher(ITEMS, backend=teacher, out=out))
    assert (stats.written, stats.rejected) == (2, 1)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["id"] for r in rows} == {"t-1", "t-2"}
    assert all(r["completion"][0]["content"].startswith("agents:\n  - name: solo") for r in rows)
    assert all(r["provenance"]["teacher"] == "llm" for r in rows)


def test_teacher_cli_with_the_scripted_profile(tmp_path: Path) -> None:
    out = tmp_path / "rows.jsonl"
    done = run_lemon(
        "teacher", "search", "--benchmark", "gsm8k", "--limit", "2", "--candidates", "3",
        "--profile", "scripted", "--out", str(out), "--json", "-q",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["written"] == 2
    bad = run_lemon("teacher", "search", "--benchmark", "nope", "--out", str(out))
    assert bad.returncode == 2
    assert "unknown benchmark 'nope'" in bad.stderr


def _search_row(item: str, chosen: str, scored: list[tuple[str, float, float, int]]) -> str:
    candidates = [
        {"origin": o, "reward": r, "success": s, "worker_tokens": t, "priced_tokens": t / 2}
        for o, r, s, t in scored
    ]
    best = next(c for c in candidates if c["origin"] == chosen)
    provenance = {"teacher": "search", "chosen": chosen, **best, "candidates": candidates}
    provenance.pop("origin")
    return json.dumps({"id": item, "provenance": provenance}) + "\n"


def test_summary_counts_wins_accuracy_cost_and_the_gap_over_the_template(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    large, template = "single:large", "template"
    rows.write_text(
        _search_row("a", large, [(template, 0.2, 0.0, 900), (large, 0.9, 1.0, 300)])
        + _search_row("b", template, [(template, 0.8, 1.0, 1000), (large, -0.1, 0.0, 200)])
        + _search_row("c", template, [(template, -0.1, 0.0, 800), (large, -0.2, 0.0, 400)])
        + '{"id": "torn", "provenance": {"teach'  # a half-written last line is skipped
    )
    done = run_lemon("teacher", "summary", str(rows), "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["items"] == 3
    assert summary["best_accuracy"] == round(2 / 3, 4)
    assert summary["chosen_accuracy"] == round(2 / 3, 4)
    assert summary["template_chosen"] == 2
    assert summary["chosen_over_template"] == round((0.7 + 0.0 + 0.0) / 3, 4)
    by_origin = {c["origin"]: c for c in summary["candidates"]}
    assert [c["origin"] for c in summary["candidates"]] == ["template", "single:large"]
    assert by_origin["single:large"] == {
        "origin": "single:large", "items": 3, "accuracy": round(1 / 3, 4),
        "mean_reward": 0.2, "mean_tokens": 300.0, "mean_priced_tokens": 150.0, "chosen": 1,
    }  # fmt: skip
    table = run_lemon("teacher", "summary", str(rows))
    assert table.returncode == 0, table.stderr
    assert "template chosen 2 times" in table.stdout


def test_summary_refuses_rows_of_another_teacher_naming_the_row(tmp_path: Path) -> None:
    rows = tmp_path / "llm.jsonl"
    rows.write_text(json.dumps({"id": "t-1", "provenance": {"teacher": "llm"}}) + "\n")
    done = run_lemon("teacher", "summary", str(rows))
    assert done.returncode == 2
    assert "row 't-1' is not a search-teacher row" in done.stderr
    missing = run_lemon("teacher", "summary", str(tmp_path / "absent.jsonl"))
    assert missing.returncode == 2
    assert "no such file" in missing.stderr


def test_select_keeps_rows_whose_chosen_team_succeeded(tmp_path: Path) -> None:
    """``lemon teacher select`` drops rows where the chosen team failed (every team failed, so
    the teacher picked the cheapest); a torn last row is skipped, a torn middle row is an error."""
    rows, out = tmp_path / "rows.jsonl", tmp_path / "kept.jsonl"
    good = _search_row("a", "single:large", [("single:large", 0.9, 1.0, 300)])
    bad = _search_row("b", "single:small", [("single:small", -0.01, 0.0, 100)])
    rows.write_text(good + bad + '{"id": "torn", "prov')
    done = run_lemon("teacher", "select", str(rows), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert out.read_text() == good
    assert "kept 1 of 2 rows" in done.stdout
    assert "skipped a half-written last row" in done.stderr
    half = run_lemon("teacher", "select", str(rows), "--out", str(out), "--min-success", "0")
    assert out.read_text() == good + bad, half.stderr
    rows.write_text(good + "{oops\n" + bad)
    broken = run_lemon("teacher", "select", str(rows), "--out", str(out))
    assert broken.returncode == 2
    assert f"{rows}:2:2: not JSON" in broken.stderr
    assert out.read_text() == good + bad  # left as it was
    rows.write_text(json.dumps({"id": "t-1", "prompt": []}) + "\n")
    other = run_lemon("teacher", "select", str(rows), "--out", str(out))
    assert other.returncode == 2
    assert f"{rows}:1: no provenance.success" in other.stderr
    same = run_lemon("teacher", "select", str(rows), "--out", str(rows))
    assert same.returncode == 2
    assert "would overwrite the rows it reads" in same.stderr


def test_select_balance_repeats_minority_choices(tmp_path: Path) -> None:
    """``--balance`` repeats each row round(most / count) times (capped by ``--max-repeat``):
    7 medium rows stay single, 3 large rows become 2 copies each, a lone pot row is capped."""
    rows, out = tmp_path / "rows.jsonl", tmp_path / "kept.jsonl"
    lines = [_search_row(f"m{i}", "medium", [("medium", 0.9, 1.0, 300)]) for i in range(7)]
    lines += [_search_row(f"l{i}", "large", [("large", 0.9, 1.0, 900)]) for i in range(3)]
    lines += [_search_row("p", "pot", [("pot", 0.9, 1.0, 100)])]
    rows.write_text("".join(lines))
    done = run_lemon("teacher", "select", str(rows), "--out", str(out), "--balance")
    assert done.returncode == 0, done.stderr
    chosen = [json.loads(x)["provenance"]["chosen"] for x in out.read_text().splitlines()]
    assert (chosen.count("medium"), chosen.count("large"), chosen.count("pot")) == (7, 6, 4)
    assert "kept 11 of 11 rows" in done.stdout
    assert "17 after balancing" in done.stdout
    capped = run_lemon(*("teacher", "select", str(rows), "--out", str(out), "--balance"),
                       *("--max-repeat", "1"))  # fmt: skip
    assert capped.returncode == 0, capped.stderr
    assert len(out.read_text().splitlines()) == 11
    bad = run_lemon("teacher", "select", str(rows), "--out", str(out), "--max-repeat", "0")
    assert bad.returncode == 2
    assert "--max-repeat must be at least 1" in bad.stderr


def test_the_teacher_tries_one_team_once_whatever_its_names() -> None:
    """The template's compute variant and ``plan-pot`` are one team under two sets of names."""
    from lemon.teaching.search import team_shape

    task = "Tom has 3 apples and buys 4 more. How many apples does he have?"
    candidates = candidate_specs(task, 32)
    shapes = [team_shape(c.spec) for c in candidates]
    assert len(shapes) == len(set(shapes))
    origins = [c.origin for c in candidates]
    assert "template:compute" in origins
    assert "topology:plan-pot" not in origins


def test_teacher_rows_from_a_table(tmp_path: Path) -> None:
    """Per item the best team by R_orch at full cost: on the hand-made table medium solves the
    'how many' questions (100 priced tokens), large the rest but every tenth (300); items no
    team solves are dropped; --shuffle keeps the teams but pairs them with other items."""
    from collections import Counter

    from tests.conftest import run_lemon
    from tests.unit.test_table_report import _medium_solves, _table

    table = _table(tmp_path / "svamp-train", "train", 40, samples=False)
    out = tmp_path / "rows.jsonl"
    done = run_lemon("teacher", "tables", str(table.path), "--out", str(out),
                     "--prompt-format", "lemon-policy-prompt/v2")  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    by_id = {r["id"]: r for r in rows}
    from lemon.data import Benchmark
    from lemon.scoring import item_index

    index = item_index(Benchmark.SVAMP)
    dropped = 0
    for k, item_id in enumerate(table.items):
        medium = _medium_solves(index[item_id].question)
        if not medium and k % 10 == 0:
            assert item_id not in by_id  # no team solved it
            dropped += 1
            continue
        chosen = by_id[item_id]["provenance"]["chosen"]
        assert chosen == ("single-medium" if medium else "single-large")
        assert "capacity: medium" in by_id[item_id]["completion"][0]["content"] or not medium
    assert f"({dropped} where no team succeeded dropped)" in done.stdout
    assert rows[0]["prompt"][0]["content"].startswith("Write a YAML spec of AI agents")
    shuffled = tmp_path / "shuffled.jsonl"
    run_lemon("teacher", "tables", str(table.path), "--out", str(shuffled), "--shuffle", "1")
    mixed = [json.loads(line) for line in shuffled.read_text().splitlines()]
    assert Counter(r["provenance"]["chosen"] for r in mixed) == Counter(
        r["provenance"]["chosen"] for r in rows
    )
    assert [r["id"] for r in mixed] == [r["id"] for r in rows]
    assert any(a["completion"] != b["completion"] for a, b in zip(mixed, rows, strict=True))


def test_weighted_copies_by_hand() -> None:
    """round(max_repeat * w / max w): weights 0.9, 0.45, 0.1, 0 and -0.2 at max_repeat 4 give
    4, round(2.0) = 2, round(0.44) = 0, 0 and 0 (no negative weight)."""
    from lemon.teaching.from_tables import weighted_copies

    assert weighted_copies([0.9, 0.45, 0.1, 0.0, -0.2], max_repeat=4) == [4, 2, 0, 0, 0]
    assert weighted_copies([0.3, 0.6], max_repeat=1) == [0, 1]  # round(0.5) is 0
    assert weighted_copies([0.0, 0.0], max_repeat=4) == [0, 0]
    assert weighted_copies([], max_repeat=4) == []
    with pytest.raises(ValueError, match="at least 1"):
        weighted_copies([0.5], max_repeat=0)


def test_cost_sensitive_rows_are_every_team_weighted_by_reward(tmp_path: Path) -> None:
    """``teacher tables --cost-sensitive``: every team of a kept item is a row whose weight is
    its reward above the item's worst team's, written weighted_copies times (so the worst team
    not at all); rebuilt here from the plain rows' candidate rewards. With --shuffle each item's
    rows move, whole, under another item's prompt; --balance with it is a usage error."""
    from collections import Counter

    from lemon.teaching.from_tables import weighted_copies
    from tests.conftest import run_lemon
    from tests.unit.test_table_report import _table

    table = _table(tmp_path / "svamp-train", "train", 40, samples=False)
    plain, weighted = tmp_path / "plain.jsonl", tmp_path / "weighted.jsonl"
    assert run_lemon("teacher", "tables", str(table.path), "--out", str(plain)).returncode == 0
    done = run_lemon("teacher", "tables", str(table.path), "--out", str(weighted),
                     "--cost-sensitive", "--max-repeat", "3")  # fmt: skip
    assert done.returncode == 0, done.stderr
    pairs, weights = [], []
    for row in map(json.loads, plain.read_text().splitlines()):
        candidates = row["provenance"]["candidates"]
        for team, reward in candidates.items():
            pairs.append((row["id"], team, row["provenance"]["chosen"]))
            weights.append(reward - min(candidates.values()))
    copies = weighted_copies(weights, max_repeat=3)
    expected = [pair for pair, n in zip(pairs, copies, strict=True) for _ in range(n)]
    rows = [json.loads(line) for line in weighted.read_text().splitlines()]
    assert [(r["id"], r["provenance"]["chosen"], r["provenance"]["best"]) for r in rows] == expected
    assert 0 in copies  # the worst team of an item is not written
    assert max(copies) == 3
    for row in rows:
        prov = row["provenance"]
        assert prov["reward"] == prov["candidates"][prov["chosen"]]
        assert f"capacity: {prov['chosen'].split('-')[-1]}" in row["completion"][0]["content"]
    assert f"; {len(rows)} rows of every team weighted by reward" in done.stdout
    shuffled = tmp_path / "shuffled.jsonl"
    run_lemon("teacher", "tables", str(table.path), "--out", str(shuffled), "--cost-sensitive",
              "--max-repeat", "3", "--shuffle", "1")  # fmt: skip
    moved = [json.loads(line) for line in shuffled.read_text().splitlines()]
    prompt_of = {r["id"]: r["prompt"] for r in rows}
    assert all(r["prompt"] == prompt_of[r["id"]] for r in moved)
    assert Counter((r["provenance"]["best"], r["provenance"]["chosen"]) for r in moved) == Counter(
        (r["provenance"]["best"], r["provenance"]["chosen"]) for r in rows
    )
    assert sum(a["id"] != b["id"] for a, b in zip(moved, rows, strict=True)) > len(rows) // 2
    both = run_lemon("teacher", "tables", str(table.path), "--out", str(weighted),
                     "--cost-sensitive", "--balance")  # fmt: skip
    assert both.returncode == 2
    assert "not allowed with" in both.stderr


def test_cost_weighted_rows_state_their_weight_and_trade_accuracy_for_cost(
    tmp_path: Path,
) -> None:
    """v3 rows, once per cost weight: at 0.02 the large team (300 priced tokens) is taught
    where medium fails; at 4 per 1,000 tokens a correct large answer loses more than it earns
    (1 - 1.2 < 0), so no row teaches large and only medium's items are kept. The train table's
    fit and validation parts split its items by template, with nothing in both."""
    from tests.conftest import run_lemon
    from tests.unit.test_table_report import _table

    table = _table(tmp_path / "svamp-train", "train", 40, samples=False)
    out = tmp_path / "rows.jsonl"
    v3 = ("--prompt-format", "lemon-policy-prompt/v3", "--cost-weights", "0.02,4")
    done = run_lemon("teacher", "tables", str(table.path), "--out", str(out), *v3)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    by_weight: dict[float, set[str]] = {}
    for row in rows:
        weight = row["provenance"]["cost_weight"]
        assert (
            f"Cost weight: {weight:g} per 1,000 tier-priced tokens." in row["prompt"][1]["content"]
        )
        by_weight.setdefault(weight, set()).add(row["provenance"]["chosen"])
    assert by_weight[0.02] == {"single-medium", "single-large"}
    assert by_weight[4.0] == {"single-medium"}
    parts = {}
    for part in ("fit", "validation"):
        path = tmp_path / f"{part}.jsonl"
        assert run_lemon("teacher", "tables", str(table.path), "--out", str(path),
                         "--part", part).returncode == 0  # fmt: skip
        parts[part] = {json.loads(line)["id"] for line in path.read_text().splitlines()}
    assert parts["fit"]
    assert parts["validation"]
    assert not parts["fit"] & parts["validation"]
    bad = run_lemon("teacher", "tables", str(table.path), "--out", str(out), "--cost-weights", "1")
    assert bad.returncode == 2
    assert "needs --prompt-format lemon-policy-prompt/v3" in bad.stderr


def test_router_rows_distil_a_cross_fitted_router(tmp_path: Path) -> None:
    """``teacher tables --router logistic``: one row per item and weight, the team a logistic
    router fitted on the other folds picks. In the hand-made world medium solves the 'how many'
    questions and large nine in ten of all: at 0.5 per 1,000 tier-priced tokens (large 300,
    medium 100) medium is worth its price exactly where the question asks 'how many', so the
    router, which reads only the text, teaches medium there and large elsewhere; the rows are
    not the per-item oracle (an item large fails is still taught large). --router with
    --cost-sensitive is a usage error, as is --folds 1."""
    from collections import Counter

    from lemon.data import Benchmark
    from lemon.scoring import item_index
    from lemon.tasks import task_text
    from tests.unit.test_table_report import _medium_solves, _table

    table = _table(tmp_path / "svamp-train", "train", 120, samples=False)
    out = tmp_path / "rows.jsonl"
    v3 = ("--prompt-format", "lemon-policy-prompt/v3", "--cost-weights", "0.5")
    done = run_lemon("teacher", "tables", str(table.path), "--out", str(out), *v3,
                     "--router", "logistic")  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["id"] for r in rows) == sorted(table.items)
    index = item_index(Benchmark.SVAMP)
    picked: dict[bool, Counter[str]] = {True: Counter(), False: Counter()}
    for row in rows:
        p = row["provenance"]
        assert p["teacher"] == "router:logistic"
        assert p["cost_weight"] == 0.5
        assert 0 <= p["fold"] < 5
        assert p["candidates"].keys() == {"single-small", "single-medium", "single-large"}
        picked[_medium_solves(task_text(index[row["id"]]))][p["chosen"]] += 1
    asks, other = picked[True], picked[False]
    assert asks["single-medium"] >= 0.8 * sum(asks.values()), asks
    assert other["single-large"] >= 0.8 * sum(other.values()), other
    failed_large = [r for r in rows if r["provenance"]["chosen"] == "single-large"
                    and not r["provenance"]["success"]]  # fmt: skip
    assert failed_large  # taught by what the router expects, not by what happened
    both = run_lemon("teacher", "tables", str(table.path), "--out", str(out), "--router",
                     "logistic", "--cost-sensitive")  # fmt: skip
    assert both.returncode == 2
    assert "not allowed with argument" in both.stderr
    folds = run_lemon("teacher", "tables", str(table.path), "--out", str(out), "--router",
                      "knn", "--folds", "1")  # fmt: skip
    assert folds.returncode == 2
    assert "--folds must be at least 2" in folds.stderr
