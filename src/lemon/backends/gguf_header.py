"""What a GGUF file says it is: its header metadata, read with the standard library.

A GGUF file starts with ``GGUF``, a version, the tensor count and key/value metadata
(``general.architecture``, ``general.name``, ``general.file_type``: the quantization, ...), see
https://github.com/ggml-org/ggml/blob/master/docs/gguf.md. :func:`read_header` reads the
metadata up to the keys asked for (arrays such as the tokenizer's vocabulary are skipped over),
so a pinned model's file can be checked against what the pin says before llama.cpp loads it: a
swapped or damaged file is refused with a clear error instead of loading as another model.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

__all__ = ["FILE_TYPES", "GgufHeader", "GgufHeaderError", "read_header"]

FILE_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 15: "Q4_K_M", 17: "Q5_K_M"}
"""``general.file_type`` values (llama.cpp's ``llama_ftype``) of the quantizations used here."""

_SCALARS = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}
_STRING, _ARRAY = 8, 9


class GgufHeaderError(ValueError):
    """A file that is not a readable GGUF (the message names the file and what is wrong)."""


@dataclass(frozen=True, slots=True)
class GgufHeader:
    version: int
    tensors: int
    metadata: dict[str, Any]

    @property
    def architecture(self) -> str | None:
        value = self.metadata.get("general.architecture")
        return None if value is None else str(value)

    @property
    def name(self) -> str | None:
        value = self.metadata.get("general.name")
        return None if value is None else str(value)

    @property
    def quantization(self) -> str | None:
        value = self.metadata.get("general.file_type")
        return None if value is None else FILE_TYPES.get(int(value), f"file_type {value}")


def _read(handle: BinaryIO, size: int, where: Path) -> bytes:
    data = handle.read(size)
    if len(data) != size:
        raise GgufHeaderError(f"{where}: the GGUF header ends early (a truncated file)")
    return data


def _string(handle: BinaryIO, where: Path) -> str:
    (length,) = struct.unpack("<Q", _read(handle, 8, where))
    if length > 1 << 24:
        raise GgufHeaderError(f"{where}: a {length}-byte string in the header (not a GGUF)")
    return _read(handle, length, where).decode("utf-8", "replace")


def _value(handle: BinaryIO, kind: int, where: Path, *, keep: bool) -> Any:
    if kind in _SCALARS:
        code = _SCALARS[kind]
        (value,) = struct.unpack("<" + code, _read(handle, struct.calcsize(code), where))
        return value
    if kind == _STRING:
        return _string(handle, where)
    if kind == _ARRAY:
        item, count = struct.unpack("<IQ", _read(handle, 12, where))
        if item in _SCALARS and not keep:  # skip fixed-size elements in one seek
            handle.seek(count * struct.calcsize(_SCALARS[item]), 1)
            return None
        values = [_value(handle, item, where, keep=keep) for _ in range(count)]
        return values if keep else None
    raise GgufHeaderError(f"{where}: metadata value type {kind} is not GGUF's")


def read_header(path: Path | str, *, keys: tuple[str, ...] | None = None) -> GgufHeader:
    """The header of the GGUF at ``path``: every scalar and string metadata value (arrays are
    skipped), stopping early once all of ``keys`` are read."""
    where = Path(path)
    with where.open("rb") as handle:
        if _read(handle, 4, where) != b"GGUF":
            raise GgufHeaderError(f"{where}: not a GGUF file (no GGUF magic)")
        version, tensors, count = struct.unpack("<IQQ", _read(handle, 20, where))
        metadata: dict[str, Any] = {}
        for _ in range(count):
            key = _string(handle, where)
            (kind,) = struct.unpack("<I", _read(handle, 4, where))
            value = _value(handle, kind, where, keep=False)
            if value is not None:
                metadata[key] = value
            if keys is not None and all(k in metadata for k in keys):
                break
    return GgufHeader(version=version, tensors=tensors, metadata=metadata)
