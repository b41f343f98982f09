"""Opening a channel to ``lemon serve``: plaintext, TLS or mTLS, the way every client dials.

Hand-written (like :mod:`lemon_api.client`, which opens its channels here); imports only grpc.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc

__all__ = ["open_channel"]


def open_channel(
    target: str,
    *,
    tls_ca: Path | None = None,
    tls_cert: Path | None = None,
    tls_key: Path | None = None,
    server_name: str | None = None,
    max_message_bytes: int = 64 << 20,
) -> grpc.aio.Channel:
    """A grpc.aio channel to ``target``: TLS when a CA or a client certificate is given (mTLS
    with both certificate and key), plaintext otherwise."""
    options: list[tuple[str, Any]] = [
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.max_send_message_length", max_message_bytes),
    ]
    if tls_ca is None and tls_cert is None:
        return grpc.aio.insecure_channel(target, options=options)
    if (tls_cert is None) != (tls_key is None):
        raise ValueError("a client certificate needs both --tls-cert and --tls-key")
    credentials = grpc.ssl_channel_credentials(
        root_certificates=tls_ca.read_bytes() if tls_ca else None,
        private_key=tls_key.read_bytes() if tls_key else None,
        certificate_chain=tls_cert.read_bytes() if tls_cert else None,
    )
    if server_name:
        options.append(("grpc.ssl_target_name_override", server_name))
    return grpc.aio.secure_channel(target, credentials, options=options)
