"""The production-edge options (TLS, Unix socket, CORS, request ids, connection limits)
as the ``http`` object of the args-json every server command passes, checked here so a
bad certificate or a malformed list is one error line before anything starts.

Keys and defaults: ``server/http_args.py`` (``HttpArgs``, built here) and
``rust/server/src/args/http.rs``.
"""

from __future__ import annotations

import json
import ssl
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from server.http_args import HttpArgs

DEFAULT_CORS = '["*"]'
DEFAULT_H11_MAX_INCOMPLETE_EVENT_SIZE = 64 * 1024
DEFAULT_HEADER_READ_TIMEOUT = 10.0
DEFAULT_HTTP_TIMEOUT_KEEP_ALIVE = 5.0
TRACE_MODULES = ("all", "model", "worker")


@dataclass
class HttpOptions:
    ssl_keyfile: Path | None = None
    ssl_certfile: Path | None = None
    ssl_ca_certs: Path | None = None
    ssl_cert_reqs: int = 0
    uds: Path | None = None
    allowed_origins: str = DEFAULT_CORS
    allowed_methods: str = DEFAULT_CORS
    allowed_headers: str = DEFAULT_CORS
    allow_credentials: bool = False
    enable_request_id_headers: bool = False
    h11_max_incomplete_event_size: int = DEFAULT_H11_MAX_INCOMPLETE_EVENT_SIZE
    header_read_timeout: float = DEFAULT_HEADER_READ_TIMEOUT
    http_timeout_keep_alive: float = DEFAULT_HTTP_TIMEOUT_KEEP_ALIVE
    max_connections: int | None = None

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> HttpOptions:
        """From a command's parameters (its ``locals()``); absent ones keep the default."""
        from dataclasses import fields

        return cls(**{f.name: params[f.name] for f in fields(cls) if f.name in params})

    def to_args(self) -> HttpArgs:
        """The checked ``http`` object of the args-json (raises ConfigError)."""
        _check_tls(self)
        _check_uds(self.uds)
        return HttpArgs(
            ssl_keyfile=_absolute(self.ssl_keyfile),
            ssl_certfile=_absolute(self.ssl_certfile),
            ssl_ca_certs=_absolute(self.ssl_ca_certs),
            ssl_cert_reqs=self.ssl_cert_reqs,
            uds=_absolute(self.uds),
            allowed_origins=_json_list("--allowed-origins", self.allowed_origins),
            allowed_methods=_json_list("--allowed-methods", self.allowed_methods),
            allowed_headers=_json_list("--allowed-headers", self.allowed_headers),
            allow_credentials=self.allow_credentials,
            enable_request_id_headers=self.enable_request_id_headers,
            h11_max_incomplete_event_size=self.h11_max_incomplete_event_size,
            header_read_timeout=self.header_read_timeout,
            http_timeout_keep_alive=self.http_timeout_keep_alive,
            max_connections=self.max_connections,
        )


def traces_endpoint(value: str | None) -> str | None:
    """``--otlp-traces-endpoint``, checked: an http:// or https:// OTLP/HTTP URL, and OTel's
    client-certificate variables in pairs."""
    import os

    from engine.config import ConfigError
    from server.edge.trace import check_client_certificate, traces_url

    if value is not None:
        try:
            traces_url(value)
            check_client_certificate(os.environ)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    return value


def detailed_traces(value: str | None, endpoint: str | None) -> bool:
    """``--collect-detailed-traces`` (vLLM's comma list of all/model/worker) as the one
    switch vrs has: the engine's per-request timings on the span."""
    from engine.config import ConfigError

    if value is None:
        return False
    modules = [m.strip() for m in value.split(",") if m.strip()]
    unknown = [m for m in modules if m not in TRACE_MODULES]
    if not modules or unknown:
        raise ConfigError(f"--collect-detailed-traces {value!r}: expected a comma-separated "
                          f"list of {', '.join(TRACE_MODULES)}")
    if endpoint is None:
        raise ConfigError("--collect-detailed-traces needs --otlp-traces-endpoint (the spans "
                          "it adds to go somewhere)")
    return True


def _absolute(path: Path | None) -> str | None:
    return str(path.expanduser().absolute()) if path is not None else None


def _json_list(flag: str, text: str) -> list[str]:
    from engine.config import ConfigError

    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{flag} {text!r} is not JSON ({exc}); pass a JSON list such as "
                          '\'["https://app.example"]\'') from None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{flag} {text!r}: expected a JSON list of strings")
    return value


def _check_tls(options: HttpOptions) -> None:
    """Certificates load as the servers will load them (Python's ssl module reads the
    same PEM files rustls does)."""
    from engine.config import ConfigError

    certfile, keyfile, ca_certs = options.ssl_certfile, options.ssl_keyfile, options.ssl_ca_certs
    if certfile is None:
        given = [flag for flag, value in (("--ssl-keyfile", keyfile),
                                          ("--ssl-ca-certs", ca_certs)) if value is not None]
        if options.ssl_cert_reqs:
            given.append("--ssl-cert-reqs")
        if given:
            raise ConfigError(f"{' and '.join(given)} need --ssl-certfile (the server's "
                              "certificate) to serve HTTPS")
        return
    if options.ssl_cert_reqs and ca_certs is None:
        raise ConfigError(f"--ssl-cert-reqs {options.ssl_cert_reqs} needs --ssl-ca-certs (the "
                          "CA client certificates must chain to)")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(certfile, keyfile)
    except (OSError, ssl.SSLError) as exc:
        key = f" with --ssl-keyfile {keyfile}" if keyfile else ""
        raise ConfigError(f"cannot load --ssl-certfile {certfile}{key}: {_reason(exc)}; pass "
                          "a PEM certificate chain and its private key") from None
    if ca_certs is not None:
        try:
            context.load_verify_locations(cafile=ca_certs)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"cannot load --ssl-ca-certs {ca_certs}: {_reason(exc)}; pass a "
                              "PEM file of CA certificates") from None


def _reason(exc: OSError) -> str:
    """An ssl error's own text; a file error's reason without the errno prefix."""
    if isinstance(exc, ssl.SSLError) or not exc.strerror:
        return str(exc)
    return exc.strerror


def _check_uds(path: Path | None) -> None:
    """The socket's directory exists, and the path is free or a socket (a live socket is
    found, and refused, when the server binds it)."""
    from engine.config import ConfigError

    if path is None:
        return
    path = path.expanduser()
    if not path.parent.is_dir():
        raise ConfigError(f"--uds {path}: directory {path.parent} does not exist")
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise ConfigError(f"--uds {path} exists and is not a socket; remove it or pick "
                          "another path")
