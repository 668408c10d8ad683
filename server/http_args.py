"""The ``http`` object of the args-json (TLS, Unix socket, CORS, request ids, connection
limits), shared by the serving and the render service; keys, defaults and checks as in
``rust/server/src/args/http.rs`` (the ``vrs`` app builds it in ``cli/http_args.py``)."""

from __future__ import annotations

import math
import os

import msgspec

DEFAULT_H11_MAX_INCOMPLETE_EVENT_SIZE = 64 * 1024
DEFAULT_HEADER_READ_TIMEOUT = 10.0
DEFAULT_HTTP_TIMEOUT_KEEP_ALIVE = 5.0
MIN_H11_MAX_INCOMPLETE_EVENT_SIZE = 1024


class HttpArgs(msgspec.Struct, forbid_unknown_fields=True):
    ssl_keyfile: str | None = None  # None: the key is in ssl_certfile
    ssl_certfile: str | None = None  # None: plain HTTP
    ssl_ca_certs: str | None = None
    ssl_cert_reqs: int = 0  # 0 none, 1 optional, 2 required (ssl.CERT_* values)
    uds: str | None = None  # a Unix socket path instead of host:port
    allowed_origins: list[str] = msgspec.field(default_factory=lambda: ["*"])
    allowed_methods: list[str] = msgspec.field(default_factory=lambda: ["*"])
    allowed_headers: list[str] = msgspec.field(default_factory=lambda: ["*"])
    allow_credentials: bool = False
    enable_request_id_headers: bool = False
    h11_max_incomplete_event_size: int = DEFAULT_H11_MAX_INCOMPLETE_EVENT_SIZE
    header_read_timeout: float = DEFAULT_HEADER_READ_TIMEOUT
    http_timeout_keep_alive: float = DEFAULT_HTTP_TIMEOUT_KEEP_ALIVE
    max_connections: int | None = None


def check_http_args(http: HttpArgs) -> None:
    """Raises ValueError naming the first bad value (files must exist; the ``vrs`` app has
    loaded them already, a direct caller learns here)."""
    for key in ("ssl_keyfile", "ssl_certfile", "ssl_ca_certs"):
        path = getattr(http, key)
        if path is not None and not os.path.isfile(path):
            raise ValueError(f"http.{key} {path!r} does not exist")
    if http.ssl_cert_reqs not in (0, 1, 2):
        raise ValueError(f"http.ssl_cert_reqs must be 0, 1 or 2; got {http.ssl_cert_reqs}")
    if http.ssl_certfile is None and (http.ssl_keyfile or http.ssl_ca_certs
                                      or http.ssl_cert_reqs):
        raise ValueError("http.ssl_keyfile, ssl_ca_certs and ssl_cert_reqs need ssl_certfile")
    if http.ssl_cert_reqs and http.ssl_ca_certs is None:
        raise ValueError("http.ssl_cert_reqs 1 or 2 needs ssl_ca_certs")
    if http.h11_max_incomplete_event_size < MIN_H11_MAX_INCOMPLETE_EVENT_SIZE:
        raise ValueError(f"http.h11_max_incomplete_event_size must be >= "
                         f"{MIN_H11_MAX_INCOMPLETE_EVENT_SIZE} bytes; got "
                         f"{http.h11_max_incomplete_event_size}")
    for key in ("header_read_timeout", "http_timeout_keep_alive"):
        value = getattr(http, key)
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"http.{key} must be > 0 seconds; got {value}")
    if http.max_connections is not None and http.max_connections < 1:
        raise ValueError(f"http.max_connections must be >= 1; got {http.max_connections}")
