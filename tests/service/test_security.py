"""Bearer token, TLS and mTLS against real `lemon serve` processes (certificates made here
with openssl)."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from lemon_api.client import ClientConfig, LemonClient
from tests.conftest import run_lemon
from tests.service.conftest import ServeProcess
from tests.service.test_rpcs import TASK

TOKEN = "s3cret-token-for-tests"


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _issue(cwd: Path, name: str, *, ext: str) -> None:
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", f"{name}.key", cwd=cwd)
    _openssl("req", "-new", "-key", f"{name}.key", "-subj", f"/CN={name}", "-out", "x.csr", cwd=cwd)
    (cwd / "x.ext").write_text(ext)
    _openssl(
        *("x509", "-req", "-in", "x.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial"),
        *("-days", "2", "-sha256", "-extfile", "x.ext", "-out", f"{name}.crt"),
        cwd=cwd,
    )


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, a server certificate for 127.0.0.1/localhost and a client certificate."""
    cwd = tmp_path_factory.mktemp("certs")
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "ca.key", cwd=cwd)
    _openssl(
        *("req", "-x509", "-new", "-key", "ca.key", "-subj", "/CN=lemon-test-ca"),
        *("-days", "2", "-out", "ca.crt"),
        cwd=cwd,
    )
    _issue(cwd, "server", ext="subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _issue(cwd, "client", ext="extendedKeyUsage=clientAuth\n")
    _issue_other_ca(cwd)
    return cwd


def _issue_other_ca(cwd: Path) -> None:
    """A client certificate from a CA the server does not trust."""
    other = cwd / "other"
    other.mkdir()
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "ca.key", cwd=other)
    _openssl(
        *("req", "-x509", "-new", "-key", "ca.key", "-subj", "/CN=other-ca", "-days", "2"),
        *("-out", "ca.crt"),
        cwd=other,
    )
    _issue(other, "client", ext="extendedKeyUsage=clientAuth\n")


def orchestrate(target: str, **config: Any) -> Any:
    async def go() -> Any:
        async with LemonClient(ClientConfig(target=target, **config)) as client:
            return await client.orchestrate(TASK, timeout=20)

    return asyncio.run(go())


def failure(target: str, **config: Any) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        orchestrate(target, **config)
    return info.value


@pytest.fixture(scope="module")
def token_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    logs = tmp_path_factory.mktemp("token")
    (logs / "token").write_text(TOKEN + "\n")
    server = ServeProcess(
        "--profile", "scripted", "--token-file", str(logs / "token"), log_dir=logs
    )  # fmt: skip
    yield server
    server.stop()


def test_token_is_required(token_server: ServeProcess) -> None:
    assert failure(token_server.target).code() == grpc.StatusCode.UNAUTHENTICATED
    wrong = failure(token_server.target, token="not-it")
    assert wrong.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "bearer token" in wrong.details()
    assert orchestrate(token_server.target, token=TOKEN).status == "succeeded"


def test_streams_and_validation_need_the_token_too(token_server: ServeProcess) -> None:
    async def stream() -> None:
        async with LemonClient(ClientConfig(target=token_server.target)) as client:
            async for _ in client.stream(TASK, timeout=20):
                pass

    async def validate() -> None:
        async with LemonClient(ClientConfig(target=token_server.target)) as client:
            await client.validate("agents: []\n", timeout=20)

    for call in (stream, validate):
        with pytest.raises(grpc.aio.AioRpcError) as info:
            asyncio.run(call())
        assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_health_stays_open_for_probes(token_server: ServeProcess) -> None:
    result = run_lemon("client", "--target", token_server.target, "health")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "SERVING"


def test_cli_reads_the_token_from_the_environment(
    token_server: ServeProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the template team answers the scripted double's text as it is
    args = ("client", "--target", token_server.target, "orchestrate", "--task", TASK)
    args += ("--template", "default")  # type: ignore[assignment]  # a longer tuple
    denied = run_lemon(*args)
    assert denied.returncode == 1
    assert "UNAUTHENTICATED" in denied.stderr
    monkeypatch.setenv("LEMON_TOKEN", TOKEN)
    allowed = run_lemon(*args)
    assert allowed.returncode == 0, allowed.stderr
    assert allowed.stdout.strip() == "The answer is 42."


def test_tls(certs: Path) -> None:
    server = ServeProcess(
        "--profile", "scripted",
        "--tls-cert", str(certs / "server.crt"), "--tls-key", str(certs / "server.key"),
        log_dir=certs, tls={"tls_ca": certs / "ca.crt"},
    )  # fmt: skip
    try:
        assert orchestrate(server.target, tls_ca=certs / "ca.crt").status == "succeeded"
        plain = failure(server.target)  # a plaintext client cannot talk to a TLS server
        assert plain.code() == grpc.StatusCode.UNAVAILABLE
        untrusted = failure(server.target, tls_ca=certs / "other" / "ca.crt")
        assert untrusted.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        server.stop()


def test_mtls_requires_a_client_certificate_from_the_ca(certs: Path) -> None:
    client_tls = {
        "tls_ca": certs / "ca.crt",
        "tls_cert": certs / "client.crt",
        "tls_key": certs / "client.key",
    }
    server = ServeProcess(
        "--profile", "scripted",
        "--tls-cert", str(certs / "server.crt"), "--tls-key", str(certs / "server.key"),
        "--tls-client-ca", str(certs / "ca.crt"),
        log_dir=certs, tls=client_tls,
    )  # fmt: skip
    try:
        assert orchestrate(server.target, **client_tls).status == "succeeded"
        anonymous = failure(server.target, tls_ca=certs / "ca.crt")
        assert anonymous.code() == grpc.StatusCode.UNAVAILABLE
        stranger = failure(
            server.target,
            tls_ca=certs / "ca.crt",
            tls_cert=certs / "other" / "client.crt",
            tls_key=certs / "other" / "client.key",
        )
        assert stranger.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        server.stop()
