"""Debian's Chromium for the web view's browser tests: installed with apt-get when missing
(as root, quietly), else a failure that says what to install; never skipped.

``python -m tests.browser.chromium`` installs it (scripts/test calls it); the tests call
:func:`ensure_chromium` on first use. Playwright drives it through ``executable_path``: its own
browser download is never used (it cannot work here).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["CHROMIUM", "ChromiumMissing", "ensure_chromium"]

CHROMIUM = Path("/usr/bin/chromium")
PACKAGES = ("chromium", "chromium-driver")


class ChromiumMissing(RuntimeError):
    """Chromium is not installed and could not be; the message says what to do."""


def ensure_chromium() -> Path:
    if CHROMIUM.is_file():
        return CHROMIUM
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise ChromiumMissing(
            f"the browser tests need Debian's {' and '.join(PACKAGES)} "
            f"(as root: apt-get install -y {' '.join(PACKAGES)})"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    steps = (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *PACKAGES])
    for step in steps:
        done = subprocess.run(step, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise ChromiumMissing(f"{' '.join(step)} failed:\n{done.stderr[-2000:]}")
    if not CHROMIUM.is_file():
        raise ChromiumMissing(f"apt-get installed {PACKAGES} but {CHROMIUM} is missing")
    return CHROMIUM


def main() -> int:
    try:
        print(ensure_chromium())
    except ChromiumMissing as exc:
        print(f"tests.browser.chromium: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
