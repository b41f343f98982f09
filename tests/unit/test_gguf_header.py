"""A pinned model's file is checked against what its GGUF header says before it is used."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from lemon.backends.gguf_header import GgufHeaderError, read_header
from lemon.backends.ggufs import QWEN_CODER_05B, ModelNotFetched, locate


def _gguf(path: Path, metadata: dict[str, object], *, tensors: int, size: int) -> None:
    """A GGUF header with ``metadata`` (strings and uint32s, a uint32 array), padded (sparse)
    to ``size`` bytes."""
    body = b""
    for key, value in metadata.items():
        name = key.encode()
        body += struct.pack("<Q", len(name)) + name
        if isinstance(value, str):
            text = value.encode()
            body += struct.pack("<IQ", 8, len(text)) + text
        elif isinstance(value, list):
            body += struct.pack("<IIQ", 9, 4, len(value)) + struct.pack(f"<{len(value)}I", *value)
        else:
            body += struct.pack("<II", 4, int(value))  # type: ignore[call-overload]
    with path.open("wb") as handle:
        handle.write(b"GGUF" + struct.pack("<IQQ", 3, tensors, len(metadata)) + body)
        handle.truncate(size)


def test_the_header_is_read_and_arrays_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    meta = {"tokenizer.ggml.scores": [1, 2, 3], "general.architecture": "qwen2",
            "general.name": "X", "general.file_type": 15}  # fmt: skip
    _gguf(path, meta, tensors=7, size=4096)
    header = read_header(path)
    assert (header.architecture, header.name, header.quantization, header.tensors) == (
        "qwen2", "X", "Q4_K_M", 7,
    )  # fmt: skip
    assert "tokenizer.ggml.scores" not in header.metadata
    (tmp_path / "bad.gguf").write_bytes(b"PK\x03\x04 not a gguf")
    with pytest.raises(GgufHeaderError, match="no GGUF magic"):
        read_header(tmp_path / "bad.gguf")
    (tmp_path / "cut.gguf").write_bytes(path.read_bytes()[:30])
    with pytest.raises(GgufHeaderError, match="ends early"):
        read_header(tmp_path / "cut.gguf")


def test_a_swapped_file_of_the_pinned_size_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The size check alone trusted any file of the right size; the header says otherwise."""
    monkeypatch.setenv("LEMON_CACHE_DIR", str(tmp_path))
    models = tmp_path / "models"
    models.mkdir()
    assert QWEN_CODER_05B.wheels is not None
    assert QWEN_CODER_05B.header is not None
    target = models / QWEN_CODER_05B.filename
    size = QWEN_CODER_05B.wheels.size
    other = {"general.architecture": "llama", "general.name": "Smollm2", "general.file_type": 3}
    _gguf(target, other, tensors=272, size=size)
    with pytest.raises(ModelNotFetched, match=r"architecture 'llama' \(pinned 'qwen2'\)"):
        locate(QWEN_CODER_05B)
    pin = QWEN_CODER_05B.header
    right = {"general.architecture": pin.architecture, "general.name": pin.name,
             "general.file_type": 15}  # fmt: skip
    _gguf(target, right, tensors=pin.tensors, size=size)
    assert locate(QWEN_CODER_05B) == target
