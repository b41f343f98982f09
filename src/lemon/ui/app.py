"""The web view's HTTP side: a WSGI application over a :class:`~lemon.ui.sources.Source`.

Every path lives under ``/ui/`` so that the orchestration service can mount the same
application beside its ``/metrics`` on one port. Pages are static shells (HTML, CSS and
JavaScript shipped in ``lemon/ui/static``, no CDN, no network) that read JSON from
``/ui/api/...``; a run's live events come as server-sent events
(``/ui/api/runs/ID/events?from=N``: the trace's own JSON lines, :func:`lemon.events.encode_event`).

**Read-only.** Only ``GET`` and ``HEAD`` are served, and ``POST /ui/login``, which checks a
token and sets a cookie; nothing changes anything.

**Access.** With a token (the service's bearer token, or ``lemon ui --token``) every page and
API call needs ``Authorization: Bearer TOKEN`` or the session cookie that ``/ui/login`` sets
(an HMAC of the token, ``HttpOnly``, ``SameSite=Strict``); pages without either redirect to
the login form, API calls answer 401. The static files hold no data and stay open.

**Text only.** The scripts build the page with DOM text nodes, never HTML from data, and the
``Content-Security-Policy`` allows scripts from this origin only; a model output that reads
``<script>`` shows as those characters.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import json
import mimetypes
import re
import socketserver
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, quote
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from lemon.events import encode_event
from lemon.ui.evaluations import ITEM_FILTERS, evaluation_view, summary_line
from lemon.ui.runs import run_view
from lemon.ui.sources import Source
from lemon.ui.trainings import training_view

__all__ = ["PAGES", "UIApp", "serve"]

Environ = dict[str, Any]
StartResponse = Callable[..., Any]
WSGIApp = Callable[[Environ, StartResponse], Iterable[bytes]]

PAGES = {
    "runs": "Runs",
    "run": "Run",
    "evals": "Evaluations",
    "eval": "Evaluation",
    "trainings": "Training runs",
    "training": "Training run",
}
"""Each page's shell: its script (``static/NAME.js``) and title."""

SECURITY_HEADERS = [
    (
        "Content-Security-Policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    ),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
]
COOKIE = "lemon_ui"
POLL_S = 0.2
"""How often a live stream looks for new events."""
KEEPALIVE_S = 10.0
STREAM_MAX_S = 3600.0
_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
_STATIC = {
    entry.name: entry
    for entry in resources.files("lemon.ui").joinpath("static").iterdir()
    if entry.is_file()
}


def _session(token: str) -> str:
    return hmac.new(token.encode(), b"lemon-ui-session", hashlib.sha256).hexdigest()


def _shell(page: str) -> bytes:
    title = html.escape(f"LEMON · {PAGES[page]}")
    nav = "".join(
        f'<a href="/ui/{href}" data-nav="{name}">{html.escape(label)}</a>'
        for name, href, label in (
            ("runs", "", "Runs"),
            ("evals", "evals", "Evaluations"),
            ("trainings", "training", "Training"),
        )
    )
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{title}</title>"
        '<link rel="icon" href="/ui/static/icon.svg" type="image/svg+xml">'
        '<link rel="stylesheet" href="/ui/static/style.css">'
        '<link rel="modulepreload" href="/ui/static/common.js">'
        f'<script type="module" src="/ui/static/{page}.js"></script></head>'
        f'<body data-page="{page}"><a class="skip" href="#main">Skip to content</a>'
        f'<header><span class="brand">LEMON</span><nav aria-label="Pages">{nav}</nav>'
        '<span id="source" class="source"></span></header>'
        '<main id="main" tabindex="-1"><p class="muted">Loading…</p></main></body></html>\n'
    ).encode()


def _login_page(*, next_path: str, failed: bool) -> bytes:
    message = '<p class="error" role="alert">That token is not right.</p>' if failed else ""
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        "<title>LEMON · Sign in</title>"
        '<link rel="icon" href="/ui/static/icon.svg" type="image/svg+xml">'
        '<link rel="stylesheet" href="/ui/static/style.css"></head><body>'
        '<main id="main" class="login"><h1>LEMON</h1>'
        "<p>This view needs the server's bearer token.</p>"
        f'{message}<form method="post" action="/ui/login">'
        f'<input type="hidden" name="next" value="{html.escape(next_path, quote=True)}">'
        '<label for="token">Token</label>'
        '<input id="token" name="token" type="password" autocomplete="current-password" '
        'required autofocus><button type="submit">Sign in</button></form></main></body></html>\n'
    ).encode()


def _int(query: dict[str, list[str]], name: str, default: int, *, top: int) -> int:
    try:
        value = int(query.get(name, [str(default)])[0])
    except ValueError:
        return default
    return max(0, min(value, top))


def _text(query: dict[str, list[str]], name: str) -> str:
    return query.get(name, [""])[0][:200]


class _Response(Exception):
    """A response decided early (a redirect, an error)."""

    def __init__(self, status: str, body: bytes, headers: list[tuple[str, str]]) -> None:
        self.status, self.body, self.headers = status, body, headers


def _json_error(status: str, message: str) -> _Response:
    body = json.dumps({"error": message}).encode()
    return _Response(status, body, [("Content-Type", "application/json")])


class UIApp:
    """The WSGI application (see the module docstring); ``token`` None: open access."""

    def __init__(self, source: Source, *, token: str | None = None) -> None:
        self.source = source
        self.token = token
        self._session = _session(token) if token else None

    # -- WSGI -------------------------------------------------------------------------------
    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        try:
            status, headers, body = self._route(environ)
        except _Response as early:
            status, headers, body = early.status, early.headers, [early.body]
        headers = [*headers, *SECURITY_HEADERS]
        start_response(status, headers)
        if environ.get("REQUEST_METHOD") == "HEAD":
            return []
        return body

    def _authorized(self, environ: Environ) -> bool:
        if self.token is None or self._session is None:
            return True
        given = environ.get("HTTP_AUTHORIZATION", "")
        if given and hmac.compare_digest(given.encode(), f"Bearer {self.token}".encode()):
            return True
        for part in environ.get("HTTP_COOKIE", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == COOKIE and hmac.compare_digest(value.encode(), self._session.encode()):
                return True
        return False

    def _route(self, environ: Environ) -> tuple[str, list[tuple[str, str]], Iterable[bytes]]:
        method = environ.get("REQUEST_METHOD", "GET")
        path = environ.get("PATH_INFO", "") or "/"
        query = parse_qs(environ.get("QUERY_STRING", ""))
        if path in ("/", "/ui"):
            return "302 Found", [("Location", "/ui/")], [b""]
        if path == "/ui/login":
            return self._login(environ, method, query)
        if method not in ("GET", "HEAD"):
            raise _Response("405 Method Not Allowed", b"read-only view\n", [("Allow", "GET, HEAD")])
        if path.startswith("/ui/static/"):
            return self._static(path.removeprefix("/ui/static/"))
        if not self._authorized(environ):
            if path.startswith("/ui/api/"):
                raise _json_error("401 Unauthorized", "missing or invalid bearer token")
            target = quote(
                path + ("?" + environ["QUERY_STRING"] if environ.get("QUERY_STRING") else ""),
                safe="/?=&",
            )
            raise _Response("303 See Other", b"", [("Location", f"/ui/login?next={target}")])
        if path.startswith("/ui/api/"):
            return self._api(path.removeprefix("/ui/api/"), query)
        page = self._page(path)
        if page is None:
            raise _Response("404 Not Found", b"no such page\n", [("Content-Type", "text/plain")])
        return "200 OK", [("Content-Type", "text/html; charset=utf-8")], [_shell(page)]

    @staticmethod
    def _page(path: str) -> str | None:
        parts = [p for p in path.removeprefix("/ui/").split("/") if p]
        if not parts:
            return "runs"
        if len(parts) == 1 and parts[0] in ("evals", "training"):
            return "evals" if parts[0] == "evals" else "trainings"
        if len(parts) == 2 and _ID.match(parts[1]):
            return {"runs": "run", "evals": "eval", "training": "training"}.get(parts[0])
        return None

    def _login(
        self, environ: Environ, method: str, query: dict[str, list[str]]
    ) -> tuple[str, list[tuple[str, str]], Iterable[bytes]]:
        html_type = [("Content-Type", "text/html; charset=utf-8"), ("Cache-Control", "no-store")]
        next_path = _text(query, "next")
        if method == "POST":
            size = min(int(environ.get("CONTENT_LENGTH") or 0), 8192)
            form = parse_qs(environ["wsgi.input"].read(size).decode("utf-8", "replace"))
            next_path = form.get("next", ["/ui/"])[0]
            given = form.get("token", [""])[0]
            if self.token is None or hmac.compare_digest(given.encode(), self.token.encode()):
                if not next_path.startswith("/ui/") or next_path.startswith("//"):
                    next_path = "/ui/"
                cookie = f"{COOKIE}={self._session or ''}; HttpOnly; SameSite=Strict; Path=/ui"
                return "303 See Other", [("Location", next_path), ("Set-Cookie", cookie)], [b""]
            return "401 Unauthorized", html_type, [_login_page(next_path=next_path, failed=True)]
        if method not in ("GET", "HEAD"):
            raise _Response("405 Method Not Allowed", b"", [("Allow", "GET, HEAD, POST")])
        return "200 OK", html_type, [_login_page(next_path=next_path or "/ui/", failed=False)]

    @staticmethod
    def _static(name: str) -> tuple[str, list[tuple[str, str]], Iterable[bytes]]:
        entry = _STATIC.get(name)
        if entry is None:
            raise _Response("404 Not Found", b"", [("Content-Type", "text/plain")])
        kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
        if name.endswith(".js"):
            kind = "text/javascript"
        headers = [("Content-Type", f"{kind}; charset=utf-8"), ("Cache-Control", "no-cache")]
        return "200 OK", headers, [entry.read_bytes()]

    # -- the API ----------------------------------------------------------------------------
    def _api(
        self, path: str, query: dict[str, list[str]]
    ) -> tuple[str, list[tuple[str, str]], Iterable[bytes]]:
        parts = [p for p in path.split("/") if p]
        if parts and len(parts) <= 3 and not all(_ID.match(p) for p in parts):
            raise _json_error("404 Not Found", "no such resource")
        if parts == ["info"]:
            data: Any = {
                "source": self.source.label,
                "evaluations": len(self.source.evaluations()),
                "trainings": len(self.source.trainings()),
                "auth": self.token is not None,
            }
        elif parts == ["runs"]:
            data = self._runs(query)
        elif len(parts) == 2 and parts[0] == "runs":
            found = self.source.run(parts[1])
            if found is None:
                raise _json_error("404 Not Found", f"no run {parts[1]}")
            data = run_view(found.events, id=parts[1], source=found.source, status=found.status)
            data["over"] = found.over
        elif len(parts) == 3 and parts[0] == "runs" and parts[2] == "events":
            return self._stream(parts[1], _int(query, "from", 0, top=10**9))
        elif parts == ["evals"]:
            refs = self.source.evaluations()
            data = {
                "evals": [
                    {"id": i, "label": r.label, **summary_line(r.path)} for i, r in refs.items()
                ]
            }
        elif len(parts) == 2 and parts[0] == "evals":
            refs = self.source.evaluations()
            ref = refs.get(parts[1])
            if ref is None:
                raise _json_error("404 Not Found", f"no evaluation {parts[1]}")
            flt = _text(query, "filter") or "all"
            data = evaluation_view(
                ref.path,
                label=ref.label,
                ids={r.path: i for i, r in refs.items()},
                item_filter=flt if flt in ITEM_FILTERS else "all",
                query=_text(query, "q"),
                offset=_int(query, "offset", 0, top=10**7),
                limit=_int(query, "limit", 50, top=500) or 50,
            )
        elif parts == ["training"]:
            data = {
                "trainings": [
                    {"id": i, "label": r.label, "credit": r.credit is not None}
                    for i, r in self.source.trainings().items()
                ]
            }
        elif len(parts) == 2 and parts[0] == "training":
            training = self.source.trainings().get(parts[1])
            if training is None:
                raise _json_error("404 Not Found", f"no training run {parts[1]}")
            data = training_view(training.metrics, credit=training.credit, label=training.label)
        else:
            raise _json_error("404 Not Found", "no such resource")
        body = json.dumps(data, ensure_ascii=False).encode()
        headers = [("Content-Type", "application/json"), ("Cache-Control", "no-store")]
        return "200 OK", headers, [body]

    def _runs(self, query: dict[str, list[str]]) -> dict[str, Any]:
        runs = self.source.run_summaries()
        text, status, tier = _text(query, "q"), _text(query, "status"), _text(query, "tier")
        if text or status or tier:
            runs = [r for r in runs if r.matches(query=text, status=status, tier=tier)]
        offset = _int(query, "offset", 0, top=10**7)
        limit = _int(query, "limit", 50, top=500) or 50
        return {
            "total": len(runs),
            "offset": offset,
            "limit": limit,
            "runs": [r.to_json() for r in runs[offset : offset + limit]],
        }

    def _stream(
        self, run_id: str, start: int
    ) -> tuple[str, list[tuple[str, str]], Iterable[bytes]]:
        if self.source.run(run_id) is None:
            raise _json_error("404 Not Found", f"no run {run_id}")
        headers = [
            ("Content-Type", "text/event-stream; charset=utf-8"),
            ("Cache-Control", "no-store"),
            ("X-Accel-Buffering", "no"),
        ]
        return "200 OK", headers, self._events(run_id, start)

    def _events(self, run_id: str, sent: int) -> Iterator[bytes]:
        """The run's events from index ``sent`` on, as they are written; ends with an ``end``
        event once the run is over."""
        began = last = time.monotonic()
        yield b"retry: 2000\n\n"
        while time.monotonic() - began < STREAM_MAX_S:
            found = self.source.run(run_id)
            if found is None:
                break
            fresh = found.events[sent:]
            for offset, event in enumerate(fresh):
                line = json.dumps(encode_event(event), ensure_ascii=False)
                yield f"id: {sent + offset + 1}\ndata: {line}\n\n".encode()
            if fresh:
                sent += len(fresh)
                last = time.monotonic()
            if found.over:
                status = json.dumps({"status": found.status})
                yield f"event: end\ndata: {status}\n\n".encode()
                return
            if time.monotonic() - last > KEEPALIVE_S:
                yield b": keepalive\n\n"
                last = time.monotonic()
            time.sleep(POLL_S)


class _Server(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return


def serve(app: WSGIApp, *, host: str, port: int) -> tuple[WSGIServer, threading.Thread]:
    """Serve ``app`` on ``host:port`` from a daemon thread (one thread per request, so a live
    stream holds only its own); the server's ``server_port`` is the bound port."""
    server = make_server(host, port, app, server_class=_Server, handler_class=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, name="lemon-ui-http", daemon=True)
    thread.start()
    return server, thread
