"""The web view without a browser: runs read from real traces, the evaluation and training
views, the files it finds, and its HTTP rules (token, read-only, headers)."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from lemon.events import read_trace
from lemon.pricing import DEFAULT_TIER_PRICES
from lemon.ui.app import UIApp
from lemon.ui.evaluations import evaluation_view
from lemon.ui.files import LocalFiles, credit_file
from lemon.ui.runs import run_view, split_runs, summarise
from lemon.ui.trainings import read_credit, training_view
from tests.conftest import ROOT, run_lemon
from tests.ui_data import DIAMOND, big_eval, many_traces, scripted_profiles

STATIC = ROOT / "src" / "lemon" / "ui" / "static"
RESULTS = ROOT / "experiments" / "policy-on-real-runs" / "pipeline"


@pytest.fixture(scope="module")
def diamond_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real `lemon run` of a four-agent diamond on the scripted profile, traced."""
    tmp = tmp_path_factory.mktemp("run")
    spec = tmp / "diamond.yaml"
    spec.write_text(DIAMOND)
    profiles = scripted_profiles(tmp / "profiles.yaml", latency_s=0.05)
    trace = tmp / "trace.jsonl"
    done = run_lemon(
        "run", "--spec", str(spec), "--profile", "slow", "--profiles", str(profiles),
        "--trace", str(trace), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return trace


def test_a_run_view_has_the_spec_agents_states_and_costs(diamond_trace: Path) -> None:
    (events,) = split_runs(read_trace(diamond_trace))
    view = run_view(events, id="x", source="trace.jsonl")
    names = [a["name"] for a in view["agents"]]
    assert names == ["planner", "solver-a", "solver-b", "judge"]
    assert sorted(map(tuple, view["edges"])) == sorted(
        [("planner", "solver-a"), ("planner", "solver-b"), ("planner", "judge"),
         ("solver-a", "judge"), ("solver-b", "judge")]
    )  # fmt: skip
    assert view["levels"] == [["planner"], ["solver-a", "solver-b"], ["judge"]]
    by_name = {a["name"]: a for a in view["agents"]}
    assert by_name["solver-b"]["duties"] == "Work backwards."
    assert by_name["solver-b"]["capacity"] == "large"
    assert all(a["status"] == "succeeded" for a in view["agents"])
    assert "List the quantities." in by_name["planner"]["prompt"]  # the prompt as sent
    assert "--- planner (planner) ---" in by_name["judge"]["prompt"]
    assert view["answer"] == "The answer is 42."
    # cost: each agent's tokens at its tier's price (the scripted profile: the defaults)
    for agent in view["agents"]:
        tokens = agent["prompt_tokens"] + agent["completion_tokens"]
        assert agent["cost"] == pytest.approx(
            DEFAULT_TIER_PRICES.price(agent["capacity"]) * tokens, abs=1e-3
        )
    # one large agent: the smallest task-only prompt and the output agent's answer, at large
    large = view["one_large"]
    assert large["prompt_tokens"] == by_name["planner"]["prompt_tokens"]
    assert large["completion_tokens"] == by_name["judge"]["completion_tokens"]
    assert large["cost"] == pytest.approx(
        DEFAULT_TIER_PRICES.large * (large["prompt_tokens"] + large["completion_tokens"]), abs=0.1
    )
    # the critical path ends at the output and goes back through the last-finishing input
    path = view["critical_path"]
    assert path[0] == "planner"
    assert path[-1] == "judge"
    assert path[1] in ("solver-a", "solver-b")


def test_a_running_run_and_a_file_of_several_runs(diamond_trace: Path) -> None:
    events = read_trace(diamond_trace)
    half = events[: len(events) // 2]
    view = run_view(half, id="x", source="s")
    assert view["status"] == "running"
    assert {a["status"] for a in view["agents"]} - {"succeeded"}  # someone not done yet
    assert view["answer"] is None
    twice = split_runs([*events, *events])
    assert len(twice) == 2
    assert all(summarise(run, id="i", when=0, source="s").agents == 4 for run in twice)


def test_lemon_run_records_the_sample_verdict_with_its_run(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    done = run_lemon("run", "--profile", "scripted", "--trace", str(trace), "--json")
    assert done.returncode == 0, done.stderr
    (run,) = split_runs(read_trace(trace))
    view = run_view(run, id="x", source="s")
    assert view["verdict"]["item"] == json.loads(done.stdout)["sample"]["id"]
    assert view["verdict"]["correct"] is False  # the double answers 42


def test_the_scripts_never_build_html_from_data() -> None:
    scripts = sorted(STATIC.glob("*.js"))
    assert {p.name for p in scripts} >= {"run.js", "runs.js", "eval.js", "training.js"}
    for path in scripts:
        text = path.read_text()
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
            assert sink not in text, f"{path.name} uses {sink}"
        assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")
        assert "https://" not in text  # no CDN, no network
    css = (STATIC / "style.css").read_text()
    assert "@import" not in css
    assert "url(http" not in css


def _luminance(hex_colour: str) -> float:
    channels = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def _contrast(a: str, b: str) -> float:
    la, lb = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def test_text_colours_pass_wcag_aa_and_tiers_differ_by_more_than_hue() -> None:
    css = (STATIC / "style.css").read_text()
    colours = dict(re.findall(r"--([a-z-]+): (#[0-9a-f]{6});", css))
    pairs = [
        (fg, bg)
        for fg in ("text", "muted", "small", "medium", "large", "pending", "running",
                   "succeeded", "failed", "skipped", "pos", "neg", "focus")
        for bg in ("bg", "panel")
    ] + [("text", "pos-bg"), ("text", "neg-bg"), ("pos", "pos-bg"), ("neg", "neg-bg")]  # fmt: skip
    for fg, bg in pairs:
        ratio = _contrast(colours[fg], colours[bg])
        assert ratio >= 4.5, f"--{fg} on --{bg}: {ratio:.2f}:1"
    assert _contrast("#ffffff", colours["text"]) >= 4.5  # the tooltip
    styles = {t: re.search(rf"\.tier-{t} {{[^}}]*border: \d+px (\w+)", css) for t in
              ("small", "medium", "large")}  # fmt: skip
    kinds = {t: m.group(1) for t, m in styles.items() if m}
    assert len(set(kinds.values())) == 3, kinds  # dotted, dashed, double: not hue alone
    common = (STATIC / "common.js").read_text()
    assert 'small: "S", medium: "M", large: "L"' in common  # and a letter on every badge


def test_an_evaluation_view_places_the_run_among_its_siblings() -> None:
    folder = RESULTS / "gsm8k-single-large"
    view = evaluation_view(folder, label="l", ids={folder: "me"}, item_filter="correct")
    assert view["summary"]["n"] == 30
    assert view["summary"]["accuracy"] == pytest.approx(14 / 30)
    assert view["items"]["matched"] == 14
    assert all(item["correct"] for item in view["items"]["page"])
    runs = {p["run"]: p for p in view["points"]}
    assert "gsm8k-single-small" in runs
    assert "multiarith-single-small" not in runs  # another benchmark
    assert runs["gsm8k-single-large"]["current"]
    assert runs["gsm8k-single-large"]["folder"] == "me"
    assert runs["gsm8k-grpo-real"]["kind"] == "learned policy"
    bound = [p for p in view["points"] if p["kind"] == "oracle (bound)"]
    assert len(bound) == 1
    assert not bound[0]["pareto"]
    assert bound[0]["accuracy"] >= max(
        p["accuracy"] for p in view["points"] if p["kind"] == "fixed team"
    )


def test_a_big_evaluation_is_paged(tmp_path: Path) -> None:
    folder = big_eval(tmp_path / "big", 1000)
    view = evaluation_view(folder, label="big", ids={}, item_filter="failed", offset=5, limit=3)
    assert view["items"]["total"] == 1000
    assert view["items"]["matched"] == 11
    assert len(view["items"]["page"]) == 3
    assert view["items"]["page"][0]["id"] == "gsm8k:485"


CREDITS = [
    {"step": 1, "samples": [{"completion": "abc", "reward": 0.1, "credit": []}]},
    {"step": 2, "samples": [{"completion": "old", "reward": 0.0, "credit": []}]},
    {"step": 2, "samples": [{"completion": "more", "reward": 0.0, "credit": []}]},
    {"step": 2, "samples": [{"completion": "again", "reward": 0.5, "credit": [
        {"kind": "capacity", "agent": "a", "delta": -0.2, "spans": [[0, 3], [9, 99]]}]}]},
]  # fmt: skip


def test_training_view_series_and_credit_with_the_resume_rule(tmp_path: Path) -> None:
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text(
        "".join(
            json.dumps({"step": s, "loss": 0.1, "reward": 0.1 * s, "validity": 1.0}) + "\n"
            for s in (1, 2)
        )
        + json.dumps({"step": 2, "train_runtime": 3.0})
        + "\n"
    )
    credit = credit_file(metrics)
    assert credit == tmp_path / "credit.jsonl"
    assert credit_file(tmp_path / "metrics-grpo.jsonl").name == "credit-grpo.jsonl"
    # step 2 logged, then (a resume) step 1 and step 2 again: the later lines win
    rows = [CREDITS[0], CREDITS[1], CREDITS[0], CREDITS[2], CREDITS[3]]
    credit.write_text("".join(json.dumps(r) + "\n" for r in rows))
    by_step = read_credit(credit)
    assert [s["completion"] for s in by_step[2]] == ["more", "again"]
    view = training_view(metrics, credit=credit, label="t")
    assert view["series"]["reward"] == [[1.0, 0.1], [2.0, 0.2]]
    assert "worker_calls" in view["missing"]
    step2 = view["credit"][1]
    assert step2["credited"] == 1
    assert step2["samples"][1]["credit"][0]["spans"] == [[0, 3]]  # out-of-text spans dropped


def test_local_files_find_runs_evals_and_trainings_and_see_new_runs(
    tmp_path: Path, diamond_trace: Path
) -> None:
    shutil.copy(diamond_trace, tmp_path / "a.jsonl")
    big_eval(tmp_path / "evals" / "gsm8k-single", 5)
    train = tmp_path / "train"
    train.mkdir()
    (train / "metrics.jsonl").write_text(json.dumps({"step": 1, "loss": 1.0}) + "\n")
    (train / "credit.jsonl").write_text(json.dumps(CREDITS[0]) + "\n")
    (tmp_path / ".hidden").mkdir()
    shutil.copy(diamond_trace, tmp_path / ".hidden" / "b.jsonl")
    files = LocalFiles([tmp_path], watch=False)
    assert len(files.run_summaries()) == 1
    assert [r.label.endswith("gsm8k-single") for r in files.evaluations().values()] == [True]
    (training,) = files.trainings().values()
    assert training.credit == train / "credit.jsonl"
    with (tmp_path / "a.jsonl").open("a") as handle:  # a second run appended to the file
        handle.write(diamond_trace.read_text())
    files.scan()
    summaries = files.run_summaries()
    assert len(summaries) == 2
    assert summaries[0].source.endswith("#2")  # newest first
    found = files.run(summaries[0].id)
    assert found is not None
    assert found.over


def _call(
    app: UIApp, path: str, *, method: str = "GET", headers: dict[str, str] | None = None,
    body: bytes = b"",
) -> tuple[str, dict[str, str], bytes]:  # fmt: skip
    route, _, query = path.partition("?")
    environ: dict[str, Any] = {
        "REQUEST_METHOD": method,
        "PATH_INFO": route,
        "QUERY_STRING": query,
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
        **{f"HTTP_{k.upper().replace('-', '_')}": v for k, v in (headers or {}).items()},
    }
    seen: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        seen["status"], seen["headers"] = status, dict(headers)

    chunks = app(environ, start_response)
    data = b"".join(chunks) if not seen["headers"].get("Content-Type", "").startswith(
        "text/event-stream") else b""  # fmt: skip
    return seen["status"], seen["headers"], data


def test_the_app_needs_the_token_and_changes_nothing(tmp_path: Path) -> None:
    many_traces(tmp_path, 3)
    app = UIApp(LocalFiles([tmp_path], watch=False), token="s3cret")
    status, headers, _ = _call(app, "/ui/api/runs")
    assert status.startswith("401")
    status, headers, _ = _call(app, "/ui/runs/abc")
    assert status.startswith("303")
    assert headers["Location"] == "/ui/login?next=/ui/runs/abc"
    status, _, body = _call(app, "/ui/api/runs", headers={"Authorization": "Bearer s3cret"})
    assert status.startswith("200")
    assert json.loads(body)["total"] == 3
    assert _call(app, "/ui/api/runs", headers={"Authorization": "Bearer nope"})[0][:3] == "401"
    status, _, _ = _call(app, "/ui/login", method="POST", body=b"token=nope&next=/ui/")
    assert status.startswith("401")
    status, headers, _ = _call(
        app, "/ui/login", method="POST", body=b"token=s3cret&next=//evil.example/"
    )
    assert status.startswith("303")
    assert headers["Location"] == "/ui/"  # never a redirect off the view
    cookie = headers["Set-Cookie"].split(";")[0]
    assert "s3cret" not in cookie
    assert "HttpOnly" in headers["Set-Cookie"]
    assert "SameSite=Strict" in headers["Set-Cookie"]
    status, _, body = _call(app, "/ui/api/runs", headers={"Cookie": cookie})
    assert status.startswith("200")
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        assert _call(app, "/ui/api/runs", method=method, headers={"Cookie": cookie})[0][:3] == (
            "405"
        )
    status, headers, body = _call(app, "/ui/static/run.js")  # no data: open
    assert status.startswith("200")
    assert headers["Content-Type"].startswith("text/javascript")
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert _call(app, "/ui/static/../app.py")[0][:3] == "404"
    assert _call(app, "/ui/api/runs/../../etc", headers={"Cookie": cookie})[0][:3] == "404"


def test_the_runs_api_pages_and_filters(tmp_path: Path) -> None:
    many_traces(tmp_path, 120)
    app = UIApp(LocalFiles([tmp_path], watch=False))
    data = json.loads(_call(app, "/ui/api/runs?offset=100&limit=50")[2])
    assert data["total"] == 120
    assert len(data["runs"]) == 20
    failed = json.loads(_call(app, "/ui/api/runs?status=failed&limit=500")[2])
    assert failed["total"] == len([i for i in range(120) if i % 7 == 0])
    found = json.loads(_call(app, "/ui/api/runs?q=task%20number%2042:")[2])
    assert [r["task"] for r in found["runs"]] == ["task number 42: what is 42 + 1?"]
    run = json.loads(_call(app, f"/ui/api/runs/{found['runs'][0]['id']}")[2])
    assert run["over"] is True
    assert run["answer"] == "The answer is 43."


def test_lemon_ui_has_help_and_refuses_a_missing_path() -> None:
    assert run_lemon("ui", "--help").returncode == 0
    done = run_lemon("ui", "/no/such/folder", "--port", "0")
    assert done.returncode == 2
    assert "no such file or folder: /no/such/folder" in done.stderr
