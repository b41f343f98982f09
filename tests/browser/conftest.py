"""The browser tier: Debian's headless Chromium driven by Playwright, against real `lemon ui`
(and `lemon serve`) processes. Every page a test opens fails the test on a console error, an
uncaught exception or a failed request, unless the test says it expects that one."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser.chromium import ChromiumMissing, ensure_chromium
from tests.conftest import LEMON, ROOT, require_extra

require_extra("dev", "playwright")

from playwright.sync_api import Browser, Page, sync_playwright  # noqa: E402

pytestmark = pytest.mark.browser


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    # package, not session: Playwright's sync API keeps an event loop running in the main thread
    # while it is open, and every later asyncio.run there (the service, k8s and model tiers' tests
    # and fixtures) would refuse to start
    try:
        chromium = ensure_chromium()
    except ChromiumMissing as exc:
        pytest.fail(str(exc), pytrace=False)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(chromium), headless=True)
        yield launched
        launched.close()


@dataclass
class Watched:
    """A page and what went wrong on it."""

    page: Page
    problems: list[str] = field(default_factory=list)
    expected: list[str] = field(default_factory=list)
    """Patterns of problems this test causes on purpose (a refused token's 401)."""

    def unexpected(self) -> list[str]:
        return [p for p in self.problems if p and not any(re.search(e, p) for e in self.expected)]


def _failed(url: str, failure: str) -> str:
    """A failed request, or an empty string for one the page itself called off (a live stream
    it closed, a list refresh still in flight when a link was followed): nothing a person
    sees fails there."""
    if "ERR_ABORTED" in failure:
        return ""
    return f"request failed: {url} ({failure})"


@pytest.fixture
def watched(browser: Browser) -> Iterator[Watched]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    seen = Watched(page)
    page.on(
        "console",
        lambda m: (
            seen.problems.append(f"console {m.type}: {m.text}")
            if m.type in ("error", "warning")
            else None
        ),
    )
    page.on("pageerror", lambda e: seen.problems.append(f"page error: {e}"))
    page.on(
        "response",
        lambda r: seen.problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None,
    )
    page.on("requestfailed", lambda r: seen.problems.append(_failed(r.url, r.failure or "")))
    yield seen
    context.close()
    assert not seen.unexpected(), seen.unexpected()


@dataclass
class Served:
    """A `lemon ui` (or `lemon serve`) process and its web view's address."""

    process: subprocess.Popen[str]
    base: str
    log: Path

    def url(self, path: str) -> str:
        return self.base + path

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return httpx.get(self.base + path, timeout=30, **kwargs)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_ui(*paths: Path, log: Path, token: str | None = None, timeout: float = 120) -> Served:
    """`lemon ui PATHS --port 0`, waited for until it prints its address."""
    args = [str(LEMON), "ui", *map(str, paths), "--port", "0"]
    if token:
        args += ["--token", token]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    handle = log.open("w")
    process = subprocess.Popen(args, cwd=ROOT, stdout=handle, stderr=handle, text=True, env=env)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(r"http://127\.0\.0\.1:(\d+)/ui/", log.read_text())
        if found:
            return Served(process, f"http://127.0.0.1:{found.group(1)}", log)
        if process.poll() is not None:
            break
        time.sleep(0.1)
    process.kill()
    raise AssertionError(f"lemon ui did not start:\n{log.read_text()[-3000:]}")


@pytest.fixture
def ui(tmp_path: Path) -> Iterator[Any]:
    """Start `lemon ui` processes (stopped after the test)."""
    started: list[Served] = []

    def start(*paths: Path, token: str | None = None) -> Served:
        served = start_ui(*paths, log=tmp_path / f"ui-{len(started)}.log", token=token)
        started.append(served)
        return served

    yield start
    for served in started:
        served.stop()


def lemon_run(*args: str, cwd: Path = ROOT) -> subprocess.Popen[str]:
    """`lemon run ...` in the background (its output discarded: the trace is what is read)."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.Popen(
        [str(LEMON), "run", *args],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def wait_ready(page: Page, *, timeout_ms: float = 20_000) -> None:
    page.wait_for_selector("body[data-ready='1']", timeout=timeout_ms)
