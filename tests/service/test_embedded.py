"""`lemon serve` on the tiny profile: the packaged SmolLM2-135M-Instruct in-process on llama.cpp,
loaded once by the server and shared by concurrent calls."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from lemon_api.client import ClientConfig, LemonClient, run_options
from tests.service.conftest import ServeProcess
from tests.service.test_rpcs import TASK

pytestmark = pytest.mark.model


def test_embedded_profile_serves_real_model_runs(service_logs: Path) -> None:
    server = ServeProcess("--profile", "tiny", log_dir=service_logs)
    try:

        async def two_runs() -> list[Any]:
            async with LemonClient(ClientConfig(target=server.target)) as client:
                options = run_options(max_tokens=12)
                return list(
                    await asyncio.gather(
                        client.orchestrate(TASK, options=options, timeout=600),
                        client.orchestrate(TASK, options=options, timeout=600),
                    )
                )

        first, second = asyncio.run(two_runs())
        for response in (first, second):
            assert response.status == "succeeded", response.error
            assert response.answer
            assert "SmolLM2-135M-Instruct" in response.profile_note
            for agent in response.agents:
                if agent.model.startswith("tool:"):  # the default team's program runner
                    continue
                assert 0 < agent.completion_tokens <= 12
                assert agent.prompt_tokens > 50
        assert first.request_id != second.request_id
    finally:
        server.stop()
