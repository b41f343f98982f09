"""grpcurl and ghz — generic gRPC clients nobody here wrote — built through the Go module
proxy into ``~/.cache/lemon/tools/bin`` (a no-op once built).

``python -m lemon_testing.tools`` builds both (scripts/test calls it); tests call
:func:`ensure_tool` on first use and fail with the build's error, never skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["TOOLS", "ToolError", "ensure_tool", "tools_dir"]

TOOLS = {
    "grpcurl": ("github.com/fullstorydev/grpcurl/cmd/grpcurl", "v1.9.3"),
    "ghz": ("github.com/bojand/ghz/cmd/ghz", "v0.121.0"),
}


class ToolError(RuntimeError):
    """A tool could not be built; the message says why and what to install."""


def tools_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "lemon" / "tools" / "bin"


def ensure_tool(name: str) -> Path:
    """The path of the built tool ``name`` (building it first if needed)."""
    package, version = TOOLS[name]
    out = tools_dir()
    binary = out / name
    stamp = out / f".{name}.version"
    if binary.is_file() and stamp.is_file() and stamp.read_text().strip() == version:
        return binary
    if shutil.which("go") is None:
        raise ToolError(f"building {name} needs the Go toolchain (`go`) on PATH")
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, GOBIN=str(out), CGO_ENABLED="0", GOFLAGS="-buildvcs=false")
    done = subprocess.run(
        ["go", "install", f"{package}@{version}"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0 or not binary.is_file():
        raise ToolError(
            f"go install {package}@{version} failed ({done.returncode}):\n{done.stderr[-3000:]}"
        )
    stamp.write_text(version + "\n")
    return binary


def main(argv: list[str] | None = None) -> int:
    for name in argv or list(TOOLS):
        print(ensure_tool(name), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
