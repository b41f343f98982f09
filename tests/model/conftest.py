"""Real small models for the model tier: a tiny random Llama with SmolLM2's real tokenizer,
and `lemon serve-model` running it as a real HTTP server process."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx
import pytest

from tests.conftest import LEMON, ROOT


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer random Llama (float32) saved with the packaged SmolLM2 tokenizer; untied, so
    that it writes words rather than echoing newlines."""
    from lemon_testing.tiny_models import tiny_test_model

    return tiny_test_model(tmp_path_factory.mktemp("models") / "tiny-llama", tie_embeddings=False)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ModelServer:
    """``lemon serve-model`` on a free loopback port: the model in ``model_dir`` (float32, on
    transformers), or what ``model_args`` name (e.g. ``--profile tiny --tier small``, a GGUF on
    llama.cpp), under the names ``served``."""

    def __init__(
        self,
        model_dir: Path | None = None,
        *,
        served: Sequence[str] = ("tiny",),
        model_args: Sequence[str] = (),
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        model = ["--model", str(model_dir), "--dtype", "float32"] if model_dir else [*model_args]
        self.process = subprocess.Popen(
            [
                str(LEMON),
                "serve-model",
                *model,
                "--served-model-name",
                *served,
                "--port",
                str(self.port),
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"serve-model exited: {self.process.stderr.read()}")  # type: ignore[union-attr]
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        self.kill()
        raise RuntimeError("serve-model did not become healthy in 180 s")

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)


@pytest.fixture
def model_server(tiny_model_dir: Path) -> Iterator[ModelServer]:
    server = ModelServer(tiny_model_dir)
    try:
        yield server
    finally:
        server.kill()


__all__ = ["ModelServer", "free_port", "sys"]
