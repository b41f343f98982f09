"""The web view on ``lemon serve``'s HTTP port: the pages of ``lemon ui`` (:mod:`lemon.ui.app`)
for the runs this server keeps by id (``SubmitRun``: LemonRuns and any other client's), under
``/ui/`` beside ``/metrics``.

A thin adapter: :class:`ServiceRuns` reads the :class:`~lemon_service.run_store.RunStore`'s
records (their trace events as the engine emits them, their phase), and :func:`http_app`
sends ``/ui`` to the view and every other path to the Prometheus exposition, as before. The
view needs the server's bearer token when it has one (the header, or the cookie its login form
sets). Runs of ``Orchestrate``, ``ExecuteSpec`` and ``StreamOrchestrate`` are answered in the
call and not kept, so they are not listed.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, make_wsgi_app

from lemon.ui.app import Environ, StartResponse, UIApp, WSGIApp
from lemon.ui.files import EvalRef, TrainingRef
from lemon.ui.runs import RunSummary, summarise
from lemon.ui.sources import RunEvents
from lemon_service.run_store import FINISHED, RunStore
from lemon_service.status_codes import RunNotFound

__all__ = ["ServiceRuns", "http_app"]


class ServiceRuns:
    """The web view's source over a run store (see the module docstring)."""

    label = "this lemon serve's runs (kept by id, in memory)"

    def __init__(self, store: RunStore) -> None:
        self.store = store
        self._summaries: dict[str, tuple[tuple[int, str], RunSummary]] = {}

    def run_summaries(self) -> list[RunSummary]:
        wall, mono = time.time(), time.monotonic()
        out: list[RunSummary] = []
        kept: dict[str, tuple[tuple[int, str], RunSummary]] = {}
        for record in self.store.records():
            events = list(record.trace.events)
            key = (len(events), record.phase.value)
            known = self._summaries.get(record.run_id)
            if known is None or known[0] != key:
                summary = summarise(
                    events, id=record.run_id, when=wall - (mono - record.accepted),
                    source=record.source,
                )  # fmt: skip
                known = (key, dataclasses.replace(summary, status=record.phase.value))
            kept[record.run_id] = known
            out.append(known[1])
        self._summaries = kept
        out.sort(key=lambda summary: summary.when, reverse=True)
        return out

    def run(self, run_id: str) -> RunEvents | None:
        try:
            record = self.store.get(run_id)
        except RunNotFound:
            return None
        return RunEvents(
            list(record.trace.events),
            record.phase in FINISHED,
            record.source,
            status=record.phase.value,
        )

    def evaluations(self) -> dict[str, EvalRef]:
        return {}

    def trainings(self) -> dict[str, TrainingRef]:
        return {}


def http_app(*, registry: CollectorRegistry, store: RunStore, token: str | None) -> WSGIApp:
    """The HTTP port's application: ``/ui`` and below the web view, anything else metrics."""
    metrics = make_wsgi_app(registry)
    view = UIApp(ServiceRuns(store), token=token)

    def app(environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/ui" or path.startswith("/ui/"):
            return view(environ, start_response)
        served: Iterable[bytes] = metrics(environ, start_response)
        return served

    return app
