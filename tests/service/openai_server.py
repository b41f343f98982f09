"""A small real OpenAI-compatible HTTP server (uvicorn, raw ASGI) with a fixed latency, run as a
subprocess by the service tests: ``python -m tests.service.openai_server --port P --latency S
--log FILE``.

It answers ``/v1/chat/completions`` (and ``/openai/v1/chat/completions``, KServe's path) after
``--latency`` seconds with ``--answer`` and appends one line per event to ``--log`` (``start N``,
``answered N``, ``disconnected N``, ``usage PROMPT COMPLETION N`` (the tokens it reported, so
a test can count at the tier what was spent), and ``traceparent VALUE N`` when the call carried
one): the
tests read it to see that a cancelled gRPC call really drops the server's in-flight HTTP calls
and starts no new ones, and that traces reach the tier. With ``--log-calls`` it also writes
``call RUN DIGEST N``: the ``[run NAME]`` tag the prompt carries (``-`` if none) and a digest
of the messages, so a benchmark can count each distinct call a run made, and repeats of one.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
from pathlib import Path
from typing import Any

Scope = dict[str, Any]


_RUN_TAG = re.compile(r"\[run ([\w.:-]+)\]")


def make_app(
    *,
    latency: float,
    log: Path,
    answer: str,
    log_calls: bool = False,
    ignore_max_tokens: bool = False,
) -> Any:
    counter = 0

    def note(event: str, number: int) -> None:
        with log.open("a", encoding="utf-8") as f:
            f.write(f"{event} {number}\n")

    async def send_json(send: Any, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": data})

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        nonlocal counter
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["path"] == "/health":
            await send_json(send, 200, {"status": "ok"})
            return
        if scope["path"] not in ("/v1/chat/completions", "/openai/v1/chat/completions"):
            await send_json(send, 404, {"error": "not found"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        counter += 1
        number = counter
        note("start", number)
        headers = dict(scope.get("headers") or [])
        if b"traceparent" in headers:  # sent only with tracing on
            note(f"traceparent {headers[b'traceparent'].decode()}", number)
        request = json.loads(body)
        if log_calls:
            text = json.dumps(request.get("messages"), sort_keys=True)
            tag = _RUN_TAG.search(text)
            digest = hashlib.sha256(text.encode()).hexdigest()[:16]
            note(f"call {tag.group(1) if tag else '-'} {digest}", number)
        sleep = asyncio.ensure_future(asyncio.sleep(latency))
        gone = asyncio.ensure_future(receive())  # completes with http.disconnect if dropped
        done, _ = await asyncio.wait({sleep, gone}, return_when=asyncio.FIRST_COMPLETED)
        if gone in done:
            sleep.cancel()
            note("disconnected", number)
            return
        gone.cancel()
        prompt = " ".join(m["content"] for m in request["messages"])
        # tokens are whitespace words; max_tokens is honoured, as a real server does
        words, finish = answer.split(), "stop"
        limit = None if ignore_max_tokens else request.get("max_tokens")
        text = answer
        if isinstance(limit, int) and len(words) > limit:
            words, finish = words[:limit], "length"
            text = " ".join(words)
        usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": len(words)}
        await send_json(
            send,
            200,
            {"choices": [{"message": {"content": text}, "finish_reason": finish}], "usage": usage},
        )
        note(f"usage {usage['prompt_tokens']} {usage['completion_tokens']}", number)
        note("answered", number)

    return app


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--answer", default="The answer is 42.")
    parser.add_argument("--log-calls", action="store_true", help="log each call's run and digest")
    parser.add_argument(
        "--ignore-max-tokens", action="store_true", help="answer whole, past max_tokens"
    )
    args = parser.parse_args()
    app = make_app(
        latency=args.latency,
        log=args.log,
        answer=args.answer,
        log_calls=args.log_calls,
        ignore_max_tokens=args.ignore_max_tokens,
    )
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", lifespan="on")


if __name__ == "__main__":
    main()
