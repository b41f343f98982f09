"""The local stand-in for the Kubeflow training operator (and the kubelet's part in a job).

For each PyTorchJob that has not run yet, it does what a cluster would with the job's Master
replica, on this machine:

- mounts the pod's volumes as directories (:func:`plan`): a ConfigMap volume becomes a folder
  holding the ConfigMap's files, a PersistentVolumeClaim ``<state>/volumes/<claim>/``, an
  emptyDir a fresh folder; every mount path in the ConfigMap's files, the command line and the
  environment is rewritten to where that directory is (what a bind mount does), and so is the
  container's termination message path;
- runs the Master container's own command (``lemon train sft --config /etc/lemon/train.yaml``)
  as a local process, with the environment the training operator gives a single-replica job
  (``WORLD_SIZE=1``, ``RANK=0``, ``MASTER_ADDR``/``MASTER_PORT`` on loopback); Worker replicas
  are not started (the job's conditions say so) and the image is not used;
- reports the job as the training operator does: ``Created`` and ``Running``, then
  ``Succeeded`` or ``Failed``; and the Master pod as the kubelet does, terminated with the
  container's exit code and its termination message (the run's ``result.json``), which is
  where the operator reads what the job produced before it publishes the policy version.
"""

from __future__ import annotations

import datetime as dt
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lemon_cluster import kube
from lemon_cluster.processes import Child, Children, free_port, script

__all__ = ["STAND_IN", "LocalJob", "Trainings", "plan"]

STAND_IN = "local Kubeflow training operator stand-in (lemon cluster)"
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
TERMINATION_LIMIT = 4096  # bytes of a termination message the kubelet keeps


@dataclass(frozen=True, slots=True)
class LocalJob:
    """How one PyTorchJob's Master runs here."""

    argv: tuple[str, ...]
    env: dict[str, str]
    files: dict[Path, str]
    """Files to write first (the ConfigMaps' contents, paths rewritten)."""
    folders: tuple[Path, ...]
    """Directories to create first (claims and emptyDirs)."""
    termination_log: Path
    container: str
    image: str
    workers: int


class JobRefused(ValueError):
    """A job this stand-in cannot run; the message says why."""


def _master(job: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any], int]:
    replicas = (job.get("spec") or {}).get("pytorchReplicaSpecs") or {}
    master = replicas.get("Master")
    if not master:
        raise JobRefused("the job has no Master replica")
    pod = (master.get("template") or {}).get("spec") or {}
    containers = pod.get("containers") or []
    if not containers:
        raise JobRefused("the Master's pod template has no container")
    container = next((c for c in containers if c.get("name") == "pytorch"), containers[0])
    workers = int((replicas.get("Worker") or {}).get("replicas") or 0)
    return pod, container, workers


def plan(
    job: Mapping[str, Any],
    *,
    config_maps: Callable[[str], dict[str, str] | None],
    volumes: Path,
    workdir: Path,
) -> LocalJob:
    """How to run ``job``'s Master here (pure but for ``config_maps``, which reads a ConfigMap's
    data by name); JobRefused for a job that cannot run on this machine."""
    pod, container, workers = _master(job)
    by_name = {v.get("name"): v for v in pod.get("volumes") or []}
    mounts: dict[str, Path] = {}
    sources: dict[Path, dict[str, str]] = {}
    folders: list[Path] = []
    for mount in container.get("volumeMounts") or []:
        volume = by_name.get(mount.get("name"))
        if volume is None:
            raise JobRefused(f"volumeMount {mount.get('name')} names no volume of the pod")
        local = _volume(volume, volumes=volumes, workdir=workdir, config_maps=config_maps)
        if isinstance(local, tuple):
            local, data = local
            sources[local] = data
        else:
            folders.append(local)
        mounts[str(mount["mountPath"])] = local
    termination = workdir / "termination-log"
    mounts[str(container.get("terminationMessagePath") or "/dev/termination-log")] = termination

    def rewrite(text: str) -> str:
        for mount_path in sorted(mounts, key=len, reverse=True):
            text = text.replace(mount_path, str(mounts[mount_path]))
        return text

    command = [*(container.get("command") or []), *(container.get("args") or [])]
    if not command:
        raise JobRefused("the Master container names no command (the image's entrypoint)")
    argv = [rewrite(str(part)) for part in command]
    try:
        argv[0] = str(script(argv[0])) if "/" not in argv[0] else argv[0]
    except FileNotFoundError as exc:
        raise JobRefused(f"the command {argv[0]!r} is not on this machine ({exc})") from None
    env = {
        str(e["name"]): rewrite(str(e["value"])) for e in container.get("env") or [] if "value" in e
    }
    env |= {
        "WORLD_SIZE": "1",
        "RANK": "0",
        "LOCAL_RANK": "0",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "PYTHONWARNINGS": "ignore",
    }
    files = {
        folder / key: rewrite(value)
        for folder, data in sources.items()
        for key, value in data.items()
    }
    return LocalJob(
        argv=tuple(argv),
        env=env,
        files=files,
        folders=tuple(folders),
        termination_log=termination,
        container=str(container.get("name") or "pytorch"),
        image=str(container.get("image") or ""),
        workers=workers,
    )


def _volume(
    volume: Mapping[str, Any],
    *,
    volumes: Path,
    workdir: Path,
    config_maps: Callable[[str], dict[str, str] | None],
) -> Path | tuple[Path, dict[str, str]]:
    """A volume as a local directory (with the files to put in it, for a ConfigMap)."""
    name = str(volume.get("name"))
    if "configMap" in volume:
        config_map = str(volume["configMap"].get("name"))
        data = config_maps(config_map)
        if data is None:
            raise JobRefused(f"volume {name}: ConfigMap {config_map} does not exist")
        return workdir / "volumes" / name, data
    if "persistentVolumeClaim" in volume:
        claim = str(volume["persistentVolumeClaim"].get("claimName"))
        if not claim or "/" in claim or claim.startswith("."):
            raise JobRefused(f"volume {name}: {claim!r} is not a claim name")
        return volumes / claim
    if "emptyDir" in volume:
        return workdir / "volumes" / name
    kinds = ", ".join(key for key in volume if key != "name")
    raise JobRefused(
        f"volume {name} is a {kinds} volume; the {STAND_IN} mounts configMap, "
        "persistentVolumeClaim and emptyDir volumes"
    )


def _now() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _condition(kind: str, status: bool, reason: str, message: str) -> dict[str, str]:
    stamp = _now()
    return {
        "type": kind,
        "status": "True" if status else "False",
        "reason": reason,
        "message": message,
        "lastUpdateTime": stamp,
        "lastTransitionTime": stamp,
    }


@dataclass(eq=False)
class _Running:
    job: Mapping[str, Any]
    local: LocalJob
    child: Child
    started: str
    note: str


@dataclass(eq=False)
class Trainings:
    """The stand-in's state: the Master process of each PyTorchJob that runs here."""

    api: kube.Kube
    children: Children
    volumes: Path
    jobs: Path
    say: Callable[[str], None]
    running: dict[tuple[str, str], _Running] = field(default_factory=dict)
    done: set[tuple[str, str]] = field(default_factory=set)

    def reconcile(self) -> None:
        found = {_key(job): job for job in self.api.list_all(kube.PYTORCHJOBS)}
        for key in [key for key in self.running if key not in found]:
            self.say(f"training stand-in: {key[0]}/{key[1]} deleted: stopping its Master")
            self.children.stop(self.running.pop(key).child)
        self.done &= set(found)
        for key, job in found.items():
            if key in self.running:
                self._progress(key, self.running[key])
            elif key not in self.done and not _finished(job):
                self._start(key, job)

    def _start(self, key: tuple[str, str], job: Mapping[str, Any]) -> None:
        namespace, name = key
        workdir = self.jobs / namespace / name
        try:
            local = plan(
                job,
                config_maps=lambda cm: self.api.config_map(namespace=namespace, name=cm),
                volumes=self.volumes,
                workdir=workdir,
            )
        except JobRefused as exc:
            self.done.add(key)
            self.say(f"training stand-in: {namespace}/{name} cannot run here: {exc}")
            failed = _condition("Failed", True, "NotRunnableLocally", f"{STAND_IN}: {exc}")
            self._status(key, [failed], completion=True)
            return
        for folder in (*local.folders, local.termination_log.parent):
            folder.mkdir(parents=True, exist_ok=True)
        for path, text in local.files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        local.termination_log.write_text("", encoding="utf-8")  # the kubelet creates it
        log = self.children.logs / f"pytorchjob-{namespace}-{name}.log"
        child = self.children.start(
            f"pytorchjob {namespace}/{name}", local.argv, env=local.env, cwd=workdir, log=log
        )
        note = (
            f"{STAND_IN}: the Master's command runs here as pid {child.pid} "
            f"({shlex.join(local.argv)}; log {log}); image {local.image or '-'} not used"
        )
        if local.workers:
            note += f"; {local.workers} Worker replica(s) not started (WORLD_SIZE=1)"
        self.say(f"training stand-in: {namespace}/{name}: {note}")
        self.running[key] = _Running(job, local, child, _now(), note)
        self._status(
            key,
            [
                _condition("Created", True, "PyTorchJobCreated", note),
                _condition("Running", True, "PyTorchJobRunning", note),
            ],
        )

    def _progress(self, key: tuple[str, str], run: _Running) -> None:
        code = run.child.process.poll()
        if code is None:
            return
        code = 128 - code if code < 0 else code  # killed by a signal: as a shell reports it
        del self.running[key]
        self.done.add(key)
        namespace, name = key
        message = run.local.termination_log.read_bytes()[:TERMINATION_LIMIT].decode(
            "utf-8", "replace"
        )
        self.api.record_pod(
            _master_pod(run, namespace, name), status=_pod_status(run, code, message)
        )
        ok = code == 0
        word = "Succeeded" if ok else "Failed"
        detail = f"the Master exited with {code}" + ("" if ok else f": {run.child.tail()[-400:]}")
        self.say(f"training stand-in: {namespace}/{name}: {word} ({detail})")
        self._status(
            key,
            [
                _condition("Created", True, "PyTorchJobCreated", run.note),
                _condition("Running", False, "PyTorchJobRunning", run.note),
                _condition(word, True, f"PyTorchJob{word}", f"{STAND_IN}: {detail}"),
            ],
            completion=True,
            started=run.started,
            replica={"succeeded" if ok else "failed": 1},
        )

    def _status(
        self,
        key: tuple[str, str],
        conditions: list[dict[str, str]],
        *,
        completion: bool = False,
        started: str | None = None,
        replica: dict[str, int] | None = None,
    ) -> None:
        status: dict[str, Any] = {"conditions": conditions, "startTime": started or _now()}
        if completion:
            status["completionTime"] = _now()
        status["replicaStatuses"] = {"Master": replica or {"active": 1}}
        self.api.patch_status(kube.PYTORCHJOBS, namespace=key[0], name=key[1], status=status)


def _key(job: Mapping[str, Any]) -> tuple[str, str]:
    metadata = job.get("metadata") or {}
    return str(metadata.get("namespace", "")), str(metadata.get("name", ""))


def _finished(job: Mapping[str, Any]) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(
        c.get("type") in ("Succeeded", "Failed") and c.get("status") == "True" for c in conditions
    )


def _master_pod(run: _Running, namespace: str, name: str) -> dict[str, Any]:
    metadata = run.job.get("metadata") or {}
    owner = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "name": name,
        "uid": metadata.get("uid", ""),
        "controller": True,
    }
    labels = {JOB_NAME_LABEL: name, REPLICA_TYPE_LABEL: "master", REPLICA_INDEX_LABEL: "0"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-master-0",
            "namespace": namespace,
            "labels": labels,
            "ownerReferences": [owner],
        },
        "spec": {
            "containers": [{"name": run.local.container, "image": run.local.image or "local"}],
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
        },
    }


def _pod_status(run: _Running, code: int, message: str) -> dict[str, Any]:
    terminated = {
        "exitCode": code,
        "reason": "Completed" if code == 0 else "Error",
        "message": message,
        "startedAt": run.started,
        "finishedAt": _now(),
    }
    return {
        "phase": "Succeeded" if code == 0 else "Failed",
        "containerStatuses": [
            {
                "name": run.local.container,
                "ready": False,
                "restartCount": 0,
                "image": run.local.image or "local",
                "imageID": "",
                "state": {"terminated": terminated},
            }
        ],
    }
