"""The local stand-in for KServe: every InferenceService served by ``lemon serve-model``.

For each InferenceService the operator creates, it reads the model the predictor names (the
huggingface runtime's ``--model_id=`` argument, or ``storageUri``) and the name it is served
as (``--model_name=``), and finds that model on this machine (:func:`resolve`):

- a Hugging Face id (or ``hf://`` URI) of one of the embedded tiers' models
  (``HuggingFaceTB/SmolLM2-135M-Instruct``, ``Qwen/Qwen2.5-Coder-0.5B-Instruct``,
  ``Qwen/Qwen2.5-Coder-1.5B-Instruct``), or its pinned GGUF name: that model's pinned GGUF on
  llama.cpp, once fetched (``lemon models fetch``);
- ``pvc://CLAIM/PATH`` (a policy version a training wrote): ``<state>/volumes/CLAIM/PATH``, a
  model directory served through transformers (or a ``.gguf`` file on llama.cpp);
- an absolute path on this machine: the same.

It then starts ``lemon serve-model`` for it on a free loopback port and, once the model is
loaded, marks the InferenceService Ready at ``http://127.0.0.1:PORT`` (whose ``/openai/v1``
routes are the huggingface runtime's). A model this machine lacks gets ``Ready=False`` with a
reason and a message saying what is missing; nothing else is served in its place. A new
generation naming another model (a policy rolled to a new version) replaces the server; a
deleted InferenceService stops it.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from lemon.backends.ggufs import GGUF_MODELS, ModelNotFetched, locate
from lemon.backends.packaged import PackagedModelMissing
from lemon_cluster import kube
from lemon_cluster.processes import Child, Children, free_port, script

__all__ = [
    "STAND_IN",
    "TIER_SERVERS",
    "Missing",
    "Model",
    "Servers",
    "Wanted",
    "resolve",
    "tier_threads",
    "wanted",
]

STAND_IN = "local KServe stand-in (lemon cluster)"


@dataclass(frozen=True, slots=True)
class Wanted:
    """What an InferenceService asks for."""

    namespace: str
    name: str
    generation: int
    source: str
    """The model: a hub id, an ``hf://`` or ``pvc://`` URI, a path."""
    served_as: str
    """The name requests give (``--model_name``)."""


@dataclass(frozen=True, slots=True)
class Model:
    """A model this machine has: the ``lemon serve-model`` arguments that serve it."""

    args: tuple[str, ...]
    label: str


@dataclass(frozen=True, slots=True)
class Missing:
    """A model this machine does not have, and why."""

    reason: str
    message: str


def wanted(isvc: Mapping[str, Any]) -> Wanted:
    metadata = isvc.get("metadata") or {}
    model = ((isvc.get("spec") or {}).get("predictor") or {}).get("model") or {}
    args = [str(arg) for arg in model.get("args") or []]

    def arg(name: str) -> str | None:
        return next((a.split("=", 1)[1] for a in args if a.startswith(f"--{name}=")), None)

    name = str(metadata.get("name", ""))
    return Wanted(
        namespace=str(metadata.get("namespace", "")),
        name=name,
        generation=int(metadata.get("generation") or 1),
        source=str(model.get("storageUri") or arg("model_id") or ""),
        served_as=arg("model_name") or name,
    )


def _embedded() -> str:
    return ", ".join(str(m.hf_id) for m in GGUF_MODELS.values() if m.hf_id)


def resolve(source: str, *, volumes: Path) -> Model | Missing:
    """Where this machine has the model ``source`` names, or why it has not."""
    bare = source.removeprefix("hf://")
    for model in GGUF_MODELS.values():
        if bare == model.name or (model.hf_id is not None and bare.lower() == model.hf_id.lower()):
            try:
                locate(model)
            except (ModelNotFetched, PackagedModelMissing) as exc:
                return Missing("ModelNotFetched", f"{source} is {model.title}: {exc}")
            return Model(("--model", model.name, *_threads()), f"{model.title} on llama.cpp")
    if source.startswith("pvc://"):
        claim, _, path = source.removeprefix("pvc://").partition("/")
        root = (volumes / claim).resolve()
        local = (root / path).resolve()
        if not claim or not local.is_relative_to(root):
            return Missing("InvalidStorageUri", f"{source} names no path on a claim")
        return _local(source, local)
    if "://" in source:
        scheme = source.split("://", 1)[0]
        return Missing(
            "StorageNotOnThisMachine",
            f"{source}: the {STAND_IN} reads no {scheme}:// storage; it serves the embedded "
            f"tiers' models ({_embedded()}), pvc://CLAIM/PATH on the local claims and local paths",
        )
    if source.startswith("/"):
        return _local(source, Path(source))
    return Missing(
        "ModelNotOnThisMachine",
        f"{source or '(no model)'} is not a model this machine has: the {STAND_IN} serves the "
        f"embedded tiers' models ({_embedded()}, or their GGUF names), policy versions on the "
        "local claims (pvc://CLAIM/PATH) and local paths",
    )


TIER_SERVERS = 3
"""How many llama.cpp servers the stand-in expects to decode at once: the capacity tiers."""


def tier_threads() -> int:
    """The llama.cpp threads of each served model: ``$LEMON_CLUSTER_THREADS``, else this
    machine's CPUs split between the :data:`TIER_SERVERS` tiers' servers, at least one. With
    every core each (``serve-model``'s default), ggml's threads spin at barriers across the
    processes: on two cores a team's medium and large calls decoding at once each ran past the
    service's 120 s call timeout, four times over."""
    configured = int(os.environ.get("LEMON_CLUSTER_THREADS", "") or 0)
    return configured or max(1, _cpus() // TIER_SERVERS)


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _threads() -> tuple[str, ...]:
    return ("--threads", str(tier_threads()))


def _local(source: str, path: Path) -> Model | Missing:
    if path.is_file() and path.suffix == ".gguf":
        return Model(("--model", str(path), *_threads()), f"{path.name} on llama.cpp")
    if path.is_dir() and (path / "config.json").is_file():
        return Model(("--model", str(path)), f"{path} on transformers")
    what = "a directory without config.json" if path.is_dir() else "nothing"
    return Missing("ModelNotFound", f"{source}: {path} holds {what}, not a model")


def _now() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _status(want: Wanted, *, ready: bool, reason: str, message: str, url: str | None) -> Any:
    condition = {
        "type": "Ready",
        "status": "True" if ready else "False",
        "reason": reason,
        "message": message[:1000],
        "lastTransitionTime": _now(),
    }
    return {
        "url": url,
        "address": {"url": url} if url else None,
        "observedGeneration": want.generation,
        "conditions": [condition],
    }


@dataclass(eq=False)
class _Server:
    want: Wanted
    model: Model
    child: Child
    port: int
    ready: bool = False
    failed: bool = False
    reported: tuple[int, str] | None = None
    """The (generation, state) last written to the InferenceService's status."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass(eq=False)
class Servers:
    """The stand-in's state: one ``lemon serve-model`` per served InferenceService."""

    api: kube.Kube
    children: Children
    volumes: Path
    say: Callable[[str], None]
    on_change: Callable[[list[dict[str, Any]]], None] = lambda _: None
    servers: dict[tuple[str, str], _Server] = field(default_factory=dict)
    missing: dict[tuple[str, str], tuple[int, str]] = field(default_factory=dict)

    def reconcile(self) -> None:
        """One pass over every InferenceService."""
        found = {(w.namespace, w.name): w for w in map(wanted, self.api.list_all(kube.ISVC))}
        for key in [key for key in self.servers if key not in found]:
            self.say(f"kserve stand-in: {key[0]}/{key[1]} deleted: stopping its server")
            self.children.stop(self.servers.pop(key).child)
        for key in [key for key in self.missing if key not in found]:
            del self.missing[key]
        for key, want in found.items():
            self._one(key, want)
        self.on_change(self.table())

    def _one(self, key: tuple[str, str], want: Wanted) -> None:
        server = self.servers.get(key)
        if server is not None and (server.want.source, server.want.served_as) == (
            want.source,
            want.served_as,
        ):
            server.want = want
            self._progress(server)
            return
        if server is not None:
            self.say(f"kserve stand-in: {key[0]}/{key[1]} now names {want.source}: replacing")
            self.children.stop(self.servers.pop(key).child)
        model = resolve(want.source, volumes=self.volumes)
        if isinstance(model, Missing):
            self._not_served(key, want, model)
            return
        self.missing.pop(key, None)
        self._start(key, want, model)

    def _not_served(self, key: tuple[str, str], want: Wanted, missing: Missing) -> None:
        if self.missing.get(key) == (want.generation, missing.message):
            return
        self.missing[key] = (want.generation, missing.message)
        self.say(f"kserve stand-in: {key[0]}/{key[1]} NOT served: {missing.message}")
        status = _status(
            want, ready=False, reason=missing.reason, message=missing.message, url=None
        )
        self.api.patch_status(kube.ISVC, namespace=want.namespace, name=want.name, status=status)

    def _start(self, key: tuple[str, str], want: Wanted, model: Model) -> None:
        port = free_port()
        argv = [str(script("lemon")), "serve-model", *model.args]
        argv += ["--served-model-name", want.served_as, "--host", "127.0.0.1", "--port", str(port)]
        log = self.children.logs / f"isvc-{want.namespace}-{want.name}.log"
        child = self.children.start(f"serve-model {want.namespace}/{want.name}", argv, log=log)
        server = _Server(want, model, child, port)
        self.servers[key] = server
        self.say(
            f"kserve stand-in: {key[0]}/{key[1]}: loading {model.label} as "
            f"{want.served_as!r} (lemon serve-model, pid {child.pid}, log {log})"
        )
        self._report(
            server,
            "Loading",
            False,
            f"{STAND_IN}: lemon serve-model is loading {model.label} (pid {child.pid})",
        )

    def _progress(self, server: _Server) -> None:
        if server.failed:
            return
        if not server.child.alive():
            server.failed = True
            tail = server.child.tail()[-600:]
            self.say(
                f"kserve stand-in: {server.want.namespace}/{server.want.name}: "
                f"lemon serve-model exited ({server.child.process.returncode}): {tail}"
            )
            self._report(
                server,
                "ServerExited",
                False,
                f"{STAND_IN}: lemon serve-model for {server.model.label} exited: {tail}",
            )
            return
        if not server.ready:
            server.ready = _healthy(server.url)
            if server.ready:
                self.say(
                    f"kserve stand-in: {server.want.namespace}/{server.want.name}: Ready at "
                    f"{server.url} ({server.model.label} as {server.want.served_as!r})"
                )
        if server.ready:
            self._report(
                server,
                "ServedLocally",
                True,
                f"{STAND_IN}: lemon serve-model serves "
                f"{server.model.label} at {server.url} (pid {server.child.pid})",
            )

    def _report(self, server: _Server, reason: str, ready: bool, message: str) -> None:
        if server.reported == (server.want.generation, reason):
            return
        status = _status(
            server.want,
            ready=ready,
            reason=reason,
            message=message,
            url=server.url if ready else None,
        )
        if self.api.patch_status(
            kube.ISVC, namespace=server.want.namespace, name=server.want.name, status=status
        ):
            server.reported = (server.want.generation, reason)

    def table(self) -> list[dict[str, Any]]:
        """What is served and what is not, for ``lemon cluster status``."""
        rows: list[dict[str, Any]] = []
        for (namespace, name), server in sorted(self.servers.items()):
            state = "failed" if server.failed else "ready" if server.ready else "loading"
            rows.append(
                {
                    "inferenceService": f"{namespace}/{name}",
                    "model": server.model.label,
                    "servedAs": server.want.served_as,
                    "state": state,
                    "url": server.url,
                    "pid": server.child.pid,
                }
            )
        for (namespace, name), (_, message) in sorted(self.missing.items()):
            rows.append(
                {
                    "inferenceService": f"{namespace}/{name}",
                    "state": "not served",
                    "message": message,
                }
            )
        return rows


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False
