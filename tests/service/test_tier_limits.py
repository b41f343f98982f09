"""A tier's ``max_concurrency`` bounds the requests in flight to its endpoint: measured on a real
HTTP server (tests/service/openai_server.py), whose log records each call's start and answer."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from lemon.backends.base import Decoding, GenerationRequest, Message
from lemon.capacity import CapacityProfile, TierBackend, build_backends, close_backends
from tests.service.conftest import OpenAIServer


def _most_in_flight(events: list[str]) -> int:
    in_flight = most = 0
    for line in events:
        kind = line.split(" ", 1)[0]
        if kind == "start":
            in_flight += 1
            most = max(most, in_flight)
        elif kind in ("answered", "disconnected"):
            in_flight -= 1
    return most


@pytest.mark.parametrize("limit", [2, 8])
def test_openai_tier_keeps_at_most_max_concurrency_in_flight(tmp_path: Path, limit: int) -> None:
    server = OpenAIServer(tmp_path, latency=0.3)
    try:
        tier = TierBackend(type="openai", url=server.url, model="test", max_concurrency=limit)
        profile = CapacityProfile(
            name="limited", tiers=dict.fromkeys(("small", "medium", "large"), tier)
        )
        backends = build_backends(profile)
        request = GenerationRequest(
            messages=(Message(role="user", content="hello"),), decoding=Decoding(max_tokens=8)
        )

        async def burst() -> None:
            backend = next(iter(backends.values()))
            try:
                answers = await asyncio.gather(*(backend.generate(request) for _ in range(6)))
                assert all(answer.text for answer in answers)
            finally:
                await close_backends(backends)

        asyncio.run(burst())
        assert server.count("answered") == 6
        # 6 calls at once: the limit holds them to 2, and a limit of 8 lets all 6 through
        assert _most_in_flight(server.events()) == min(limit, 6)
    finally:
        server.kill()


def test_in_process_tier_rejects_max_concurrency() -> None:
    with pytest.raises(ValueError, match="max_concurrency bounds the requests in flight"):
        TierBackend(type="llamacpp", model="smollm2-135m-instruct", max_concurrency=4)
