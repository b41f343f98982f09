"""The web view in a real browser (Debian's headless Chromium): live node states, the DAG's
nodes and edges, text-only rendering of model output, the token, no console errors, and the
load time of a 10,000-run list and a 1,000-item evaluation."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from lemon.events import RunStarted, read_trace
from tests.browser.conftest import Watched, lemon_run, wait_ready
from tests.conftest import ROOT, run_lemon
from tests.ui_data import DIAMOND, XSS, big_eval, many_traces, scripted_profiles, wide_spec

pytestmark = pytest.mark.browser

RESULTS = ROOT / "experiments" / "policy-on-real-runs"
# Records every state a DAG node shows, as the page changes it (no polling gaps).
OBSERVE_NODES = """
window.__states = [];
new MutationObserver((changes) => {
  for (const change of changes) {
    const node = change.target;
    if (node.classList && node.classList.contains("node")) {
      window.__states.push([node.dataset.agent, node.dataset.status]);
    }
  }
}).observe(document, { subtree: true, attributes: true, attributeFilter: ["data-status"] });
"""


def _wait_run(process: Any, timeout: float = 120) -> None:
    _, err = process.communicate(timeout=timeout)
    assert process.returncode == 0, err[-3000:]


def _page_load_s(page: Any) -> float:
    """Seconds from the start of the page's navigation to the page drawn with its data (the
    page's own clock: ``performance.now()`` when it marked itself ready)."""
    return float(page.locator("body").get_attribute("data-ready-ms") or "nan") / 1000


def _compiled_edges(spec: Path) -> list[list[str]]:
    done = run_lemon("compile", str(spec), "--json")
    assert done.returncode == 0, done.stderr
    return sorted(json.loads(done.stdout)["edges"])


def test_a_live_run_changes_its_nodes_state_in_the_page(
    tmp_path: Path, ui: Any, watched: Watched
) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    spec = tmp_path / "diamond.yaml"
    spec.write_text(DIAMOND)
    profiles = scripted_profiles(tmp_path / "profiles.yaml", latency_s=4.0)
    served = ui(runs)
    page = watched.page
    page.goto(served.url("/ui/"))
    wait_ready(page)
    run = lemon_run(
        "--spec", str(spec), "--profile", "slow", "--profiles", str(profiles),
        "--trace", str(runs / "live.jsonl"), "--task", "What is 6 times 7?",
    )  # fmt: skip
    try:
        link = page.locator("#runs a", has_text="What is 6 times 7?")
        link.wait_for(timeout=90_000)  # the list picks the new run up by itself
        page.add_init_script(OBSERVE_NODES)
        link.click()
        wait_ready(page)
        page.evaluate("window.__marker = 'no reload'")
        expect(page.locator(".node")).to_have_count(4, timeout=30_000)
        page.wait_for_selector(".node[data-agent='judge'][data-status='succeeded']", timeout=60_000)
        states: list[list[str]] = page.evaluate("window.__states")
        assert page.evaluate("window.__marker") == "no reload"
    finally:
        _wait_run(run)
    judge = [s for name, s in states if name == "judge"]
    assert "running" in judge, states
    assert judge[-1] == "succeeded", states
    # while the solvers ran, the judge waited: the page showed both at once
    first_running_solver = next(i for i, s in enumerate(states) if s == ["solver-a", "running"])
    judge_running = states.index(["judge", "running"])
    assert first_running_solver < judge_running
    # one node per agent and one edge per dependency, as `lemon compile` lists them
    edges = page.eval_on_selector_all(
        "path.edge", "paths => paths.map(p => [p.dataset.from, p.dataset.to])"
    )
    assert sorted(edges) == _compiled_edges(spec)
    names = page.eval_on_selector_all(".node", "nodes => nodes.map(n => n.dataset.agent)")
    assert sorted(names) == ["judge", "planner", "solver-a", "solver-b"]
    # the timeline and the cost beside one large agent's are shown
    assert page.locator("#timeline rect.bar").count() == 4
    assert "one large agent" in page.locator("#cost").inner_text()
    # keyboard: an agent node is a button; Enter opens its prompt and output
    page.focus(".node[data-agent='solver-b']")
    page.keyboard.press("Enter")
    details = page.locator("#agent-solver-b")
    assert details.get_attribute("open") is not None
    assert "Work backwards." in details.locator("pre.prompt").inner_text()
    assert details.locator("pre.output").inner_text() == "The answer is 42."


def test_model_output_and_tasks_show_as_text(tmp_path: Path, ui: Any, watched: Watched) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    spec = tmp_path / "diamond.yaml"
    spec.write_text(DIAMOND.replace("Work backwards.", "<i>Work</i> backwards."))
    profiles = scripted_profiles(tmp_path / "profiles.yaml", output=XSS)
    task = "<b>bold</b> <script>window.__pwned = 3</script> task"
    _wait_run(
        lemon_run(
            "--spec",
            str(spec),
            "--profile",
            "slow",
            "--profiles",
            str(profiles),
            "--trace",
            str(runs / "x.jsonl"),
            "--task",
            task,
        )
    )
    served = ui(runs)
    page = watched.page
    page.goto(served.url("/ui/"))
    wait_ready(page)
    assert page.locator("#runs a").inner_text() == task
    page.locator("#runs a").click()
    wait_ready(page)
    assert page.locator("#answer").inner_text() == XSS
    assert page.locator("#task").inner_text() == task
    page.locator(".node[data-agent='planner']").click()
    assert page.locator("#agent-planner pre.output").inner_text() == XSS
    duties = page.locator(".node[data-agent='solver-b'] .duties").inner_text()
    assert duties == "<i>Work</i> backwards."
    assert page.evaluate("window.__pwned") is None
    assert page.locator("main script, main img, main b, main i").count() == 0


def test_the_token_guards_pages_and_api(tmp_path: Path, ui: Any, watched: Watched) -> None:
    many_traces(tmp_path / "runs", 3)
    served = ui(tmp_path / "runs", token="open-sesame")
    assert served.get("/ui/api/runs").status_code == 401
    assert served.get("/ui/api/runs", headers={"Authorization": "Bearer wrong"}).status_code == 401
    ok = served.get("/ui/api/runs", headers={"Authorization": "Bearer open-sesame"})
    assert ok.json()["total"] == 3
    page = watched.page
    watched.expected.append(r"HTTP 401: .*/ui/login")  # the refused token's answer
    watched.expected.append(r"console error: Failed to load resource: .* 401")
    page.goto(served.url("/ui/"))
    assert "/ui/login" in page.url
    assert page.locator("#runs").count() == 0
    page.fill("#token", "wrong")
    page.keyboard.press("Enter")
    page.wait_for_selector("[role=alert]")
    page.fill("#token", "open-sesame")
    page.keyboard.press("Enter")
    wait_ready(page)
    assert page.url.endswith("/ui/")
    assert page.locator("#runs tbody tr").count() == 3
    cookie = {c["name"]: c for c in page.context.cookies()}["lemon_ui"]
    assert cookie["httpOnly"]
    assert "open-sesame" not in cookie["value"]


def test_ten_thousand_runs_list_in_under_a_second(
    tmp_path: Path, ui: Any, watched: Watched
) -> None:
    many_traces(tmp_path / "runs", 10_000)
    served = ui(tmp_path / "runs")
    page = watched.page
    started = time.perf_counter()
    page.goto(served.url("/ui/"))
    wait_ready(page)
    load_s = _page_load_s(page)
    print(
        f"10,000-run list: the page drawn {load_s:.3f} s after its navigation started "
        f"({time.perf_counter() - started:.3f} s with the test driver's round trips)"
    )
    assert page.locator("#runs tbody tr").count() == 50
    assert "of 10,000 runs" in page.locator(".pager").inner_text()
    assert load_s < 1.0
    started = time.perf_counter()
    page.fill("#q", "task number 9876:")
    expect(page.locator("#runs tbody tr")).to_have_count(1)
    print(f"10,000-run list: filtered in {time.perf_counter() - started:.3f} s")


def test_a_thousand_item_evaluation_in_under_a_second(
    tmp_path: Path, ui: Any, watched: Watched
) -> None:
    big_eval(tmp_path / "evals" / "gsm8k-single-big", 1000)
    served = ui(tmp_path / "evals")
    (ref,) = served.get("/ui/api/evals").json()["evals"]
    page = watched.page
    started = time.perf_counter()
    page.goto(served.url(f"/ui/evals/{ref['id']}"))
    wait_ready(page)
    load_s = _page_load_s(page)
    print(
        f"1,000-item evaluation: the page drawn {load_s:.3f} s after its navigation started "
        f"({time.perf_counter() - started:.3f} s with the test driver's round trips)"
    )
    assert page.locator("#items tbody tr").count() == 50
    assert "of 1,000 items" in page.locator("#items-box .pager").inner_text()
    assert load_s < 1.0
    page.select_option("#filter", "failed")
    expect(page.locator("#items tbody tr")).to_have_count(11)


def test_sixty_four_agents_stay_legible(tmp_path: Path, ui: Any, watched: Watched) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    spec = tmp_path / "wide.yaml"
    spec.write_text(wide_spec(64))
    profiles = scripted_profiles(tmp_path / "profiles.yaml")
    _wait_run(
        lemon_run(
            "--spec",
            str(spec),
            "--profile",
            "slow",
            "--profiles",
            str(profiles),
            "--trace",
            str(runs / "wide.jsonl"),
            "--task",
            "sixty-four",
        )
    )
    served = ui(runs)
    page = watched.page
    page.goto(served.url("/ui/"))
    wait_ready(page)
    page.locator("#runs a").click()
    wait_ready(page)
    assert page.locator(".node").count() == 64
    assert page.locator("path.edge").count() == len(_compiled_edges(spec)) == 117
    boxes = page.eval_on_selector_all(
        ".node",
        """nodes => nodes.map(n => {
          const r = n.getBoundingClientRect();
          const name = n.querySelector('.name');
          return {x: r.x, y: r.y, w: r.width, h: r.height,
                  clipped: name.scrollWidth > name.clientWidth,
                  font: parseFloat(getComputedStyle(n).fontSize)};
        })""",
    )
    for i, a in enumerate(boxes):
        assert not a["clipped"]
        assert a["font"] >= 12
        for b in boxes[i + 1 :]:
            apart = (
                a["x"] + a["w"] <= b["x"]
                or b["x"] + b["w"] <= a["x"]
                or a["y"] + a["h"] <= b["y"]
                or b["y"] + b["h"] <= a["y"]
            )
            assert apart, (a, b)
    # tiers differ by their border's style too, not by hue alone
    styles = page.evaluate(
        """() => Object.fromEntries(['small', 'medium', 'large'].map(t =>
          [t, getComputedStyle(document.querySelector('.node.tier-' + t)).borderTopStyle]))"""
    )
    assert len(set(styles.values())) == 3, styles


def test_the_four_pages_over_this_repositorys_results(
    tmp_path: Path, ui: Any, watched: Watched
) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    _wait_run(lemon_run("--profile", "scripted", "--trace", str(runs / "sample.jsonl")))
    (started,) = [e for e in read_trace(runs / "sample.jsonl") if isinstance(e, RunStarted)]
    team = sum(len(level) for level in started.levels)
    training = tmp_path / "training"
    training.mkdir()
    (training / "metrics.jsonl").write_text(
        "".join(
            json.dumps(
                {
                    "step": s,
                    "loss": 0.5,
                    "reward": 0.1 * s,
                    "validity": 0.5 + 0.1 * s,
                    "cf/span_share": 0.2,
                    "worker_calls": 10 - s,
                }
            )
            + "\n"
            for s in (1, 2, 3)
        )
    )
    text = "agents:\n  - name: solver\n    role: math_solver\n    capacity: large\noutput: solver\n"
    large = text.index("large")
    sample = {
        "completion": text,
        "reward": 0.4,
        "credit": [{"kind": "capacity", "agent": "solver", "delta": -0.25,
                    "spans": [[large, large + 5]]}],
    }  # fmt: skip
    (training / "credit.jsonl").write_text(json.dumps({"step": 3, "samples": [sample]}) + "\n")
    shutil.copytree(RESULTS / "pipeline", tmp_path / "results" / "pipeline")
    served = ui(tmp_path / "results", runs, training)
    page = watched.page
    page.goto(served.url("/ui/"))
    wait_ready(page)
    page.locator("#runs a").first.click()
    wait_ready(page)
    assert page.locator("#verdict").inner_text().startswith("✗ wrong")
    assert page.locator(".node").count() == team
    page.goto(served.url("/ui/evals"))
    wait_ready(page)
    page.locator("#evals a", has_text="gsm8k-single-large").click()
    wait_ready(page)
    assert "0.467" in page.locator("#accuracy").inner_text()
    point = page.locator(".point[data-run='gsm8k-single-small']")
    point.hover()
    assert "gsm8k-single-small" in page.locator(".tooltip").inner_text()
    assert page.locator("#plot > svg .point.kind-oracle").count() == 1
    page.goto(served.url("/ui/training"))
    wait_ready(page)
    page.locator("#trainings a", has_text=str(training.name)).click()
    wait_ready(page)
    assert page.locator(".chart[data-series='reward'] polyline").count() == 1
    mark = page.locator("#credit-text mark.credit")
    assert mark.count() == 1
    assert mark.inner_text() == "large"
    assert "neg" in (mark.get_attribute("class") or "")
    assert "−0.250 capacity" in page.locator("#credit-text").inner_text()
