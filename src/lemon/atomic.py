"""Files and directories that appear complete or not at all: write beside, then rename.

The content goes to a temporary sibling that ``os.replace`` renames over the target in one step
(atomic within one file system), so a reader, or a process killed mid-write, never sees half a
file. Nothing here knows what the files hold.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["staged_directory", "write_json", "write_text"]


def write_text(
    path: str | os.PathLike[str], text: str, *, encoding: str = "utf-8", newline: str | None = None
) -> Path:
    """Write ``text`` to ``path`` through a temporary sibling and one rename."""
    target = Path(path)
    temp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    try:
        with temp.open("w", encoding=encoding, newline=newline) as handle:
            handle.write(text)
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return target


def write_json(path: str | os.PathLike[str], payload: Any, *, indent: int | None = 2) -> Path:
    """``payload`` as JSON (and a final newline), written like :func:`write_text`."""
    return write_text(path, json.dumps(payload, indent=indent) + "\n")


@contextlib.contextmanager
def staged_directory(
    target: str | os.PathLike[str], *, marker: str | None = None
) -> Iterator[Path]:
    """A fresh temporary sibling of ``target`` to fill; renamed to ``target`` when the block
    ends, removed when it raises.

    With ``marker`` (a file a complete directory holds, e.g. ``config.json``), a concurrent
    writer that put a complete ``target`` in place first wins: its directory is kept and this
    one dropped, whatever went wrong here.
    """
    final = Path(target)
    final.parent.mkdir(parents=True, exist_ok=True)
    temp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        yield temp
        os.replace(temp, final)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        if marker is None or not (final / marker).is_file():
            raise
