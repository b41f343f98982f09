"""The same pages on `lemon serve`'s HTTP port, for the runs it keeps (SubmitRun): behind the
server's bearer token, live while the run executes, and /metrics still served beside them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Watched, wait_ready
from tests.service.conftest import ServeProcess, free_port
from tests.ui_data import DIAMOND, scripted_profiles

pytestmark = pytest.mark.browser

TOKEN = "service-token"


def _off_the_page_loop(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run ``call`` in a thread: Playwright's sync API keeps an event loop in this one, and the
    gRPC client needs its own (asyncio.run)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(call, *args, **kwargs).result()


def _submit(target: str, run_id: str, *, task: str) -> None:
    from lemon_api.client import ClientConfig, LemonClient
    from lemon_api.v1 import orchestrator_pb2 as pb

    async def go() -> None:
        async with LemonClient(ClientConfig(target=target, token=TOKEN)) as client:
            request = pb.SubmitRunRequest(
                run_id=run_id, task=task, spec=DIAMOND, source=f"LemonRun default/{run_id}"
            )
            state = await client.submit_run(request, timeout=30)
            assert state.created

    asyncio.run(go())


def test_the_service_serves_its_runs_live_behind_its_token(
    tmp_path: Path, watched: Watched
) -> None:
    profiles = scripted_profiles(tmp_path / "profiles.yaml", latency_s=3.0)
    port = free_port()
    token = tmp_path / "token"
    token.write_text(TOKEN)
    server = _off_the_page_loop(
        ServeProcess,
        "--profile", "slow", "--profiles", str(profiles), "--metrics-port", str(port),
        "--token-file", str(token), log_dir=tmp_path,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        assert "lemon_service_runs_in_flight" in httpx.get(f"{base}/metrics", timeout=10).text
        assert httpx.get(f"{base}/ui/api/runs", timeout=10).status_code == 401
        _off_the_page_loop(_submit, server.target, "run-1", task="What is 6 times 7?")
        listed = httpx.get(
            f"{base}/ui/api/runs", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
        ).json()
        assert [r["id"] for r in listed["runs"]] == ["run-1"]
        page = watched.page
        page.goto(f"{base}/ui/runs/run-1")
        assert "/ui/login" in page.url
        page.fill("#token", TOKEN)
        page.keyboard.press("Enter")
        wait_ready(page)
        page.evaluate("window.__marker = 'no reload'")
        expect(page.locator(".node")).to_have_count(4, timeout=60_000)  # once the run starts
        assert page.locator("path.edge").count() == 5
        page.wait_for_selector(".node[data-agent='planner'][data-status='running']")
        assert page.locator(".node[data-agent='judge'][data-status='pending']").count() == 1
        page.wait_for_selector(".node[data-agent='judge'][data-status='succeeded']", timeout=90_000)
        page.wait_for_selector("#answer:has-text('The answer is 42.')", timeout=30_000)
        assert page.evaluate("window.__marker") == "no reload"
        page.goto(f"{base}/ui/")
        wait_ready(page)
        row = page.locator("#runs tbody tr")
        assert row.count() == 1
        assert "LemonRun default/run-1" in row.inner_text()
        assert "succeeded" in row.inner_text()
    finally:
        watched.page.goto("about:blank")  # nothing left polling a server that stops
        server.stop()
