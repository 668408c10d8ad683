"""CORS (``--allowed-origins``, ``--allowed-methods``, ``--allowed-headers``,
``--allow-credentials``) as plain ASGI middleware: it answers a preflight itself, before the
API key is checked, and adds the CORS headers to every other response to a request with an
``Origin``; the same headers as tower-http's CORS layer in ``rust/server/src/edge/cors.rs``.
Behaviour: docs/api.md, "CORS".
"""

from __future__ import annotations

import re
from collections.abc import Awaitable
from typing import Any

import msgspec

from server.edge import Handler, Receive, Scope, Send

ALL_METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")
SAFELISTED_HEADERS = ("accept", "accept-language", "content-language", "content-type")
MAX_AGE_S = 600
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_HEADER_VALUE = re.compile(r"[\t -~]*")


class CorsSettings(msgspec.Struct, kw_only=True):
    """The CORS settings, as the flags give them (vLLM's defaults)."""

    allowed_origins: list[str] = msgspec.field(default_factory=lambda: ["*"])
    allowed_methods: list[str] = msgspec.field(default_factory=lambda: ["*"])
    allowed_headers: list[str] = msgspec.field(default_factory=lambda: ["*"])
    allow_credentials: bool = False
    expose_request_id: bool = False  # request ids are on


def method_names(methods: list[str]) -> list[str]:
    """The methods a list allows, ``*`` expanded."""
    return list(ALL_METHODS) if "*" in methods else list(methods)


def header_names(headers: list[str]) -> list[str]:
    """The headers a list (without ``*``) allows: the list and the safelisted ones, lower
    case, sorted, once each."""
    return sorted({h.lower() for h in headers} | set(SAFELISTED_HEADERS))


def check(settings: CorsSettings) -> None:
    """ValueError naming the flag of a value that cannot be an origin, method or header."""
    for origin in settings.allowed_origins:
        if not _HEADER_VALUE.fullmatch(origin):
            raise ValueError(f"--allowed-origins: {origin!r} is not a valid origin")
    for method in settings.allowed_methods:
        if method != "*" and not _TOKEN.fullmatch(method):
            raise ValueError(f"--allowed-methods: {method!r} is not an HTTP method")
    for name in settings.allowed_headers:
        if name != "*" and not _TOKEN.fullmatch(name):
            raise ValueError(f"--allowed-headers: {name!r} is not a header name")


def _header(scope: Scope, name: bytes) -> bytes | None:
    key: bytes
    value: bytes  # ASGI: a header is a [name, value] pair of byte strings
    for key, value in scope["headers"]:
        if key == name:
            return value
    return None


class Cors:
    """The middleware around ``app`` (see the module docstring); ``settings`` checked
    (:func:`check`)."""

    def __init__(self, app: Handler, settings: CorsSettings) -> None:
        check(settings)
        self.app = app
        self._any_origin = "*" in settings.allowed_origins
        self._mirror = self._any_origin and settings.allow_credentials
        self._origins = {o.encode() for o in settings.allowed_origins}
        self._credentials = settings.allow_credentials
        self._methods = ",".join(method_names(settings.allowed_methods)).encode()
        self._mirror_headers = "*" in settings.allowed_headers
        self._headers = ",".join(header_names(settings.allowed_headers)).encode()
        self._expose = settings.expose_request_id
        varies = [b"origin"] * (not self._any_origin or self._mirror)
        varies += [b"access-control-request-headers"] * self._mirror_headers
        self._vary = [(b"vary", b", ".join(varies))] if varies else []

    def _common(self, origin: bytes) -> list[tuple[bytes, bytes]]:
        """The headers of every CORS response: credentials, vary, the allowed origin."""
        headers = [(b"access-control-allow-credentials", b"true")] if self._credentials else []
        headers += self._vary
        if self._mirror or (not self._any_origin and origin in self._origins):
            headers.append((b"access-control-allow-origin", origin))
        elif self._any_origin:
            headers.append((b"access-control-allow-origin", b"*"))
        return headers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        origin = _header(scope, b"origin") if scope["type"] == "http" else None
        if origin is None:
            await self.app(scope, receive, send)
            return
        headers = self._common(origin)
        if scope["method"] == "OPTIONS":
            headers.append((b"access-control-allow-methods", self._methods))
            asked = _header(scope, b"access-control-request-headers")
            if not self._mirror_headers:
                headers.append((b"access-control-allow-headers", self._headers))
            elif asked is not None:
                headers.append((b"access-control-allow-headers", asked))
            headers += [(b"access-control-max-age", str(MAX_AGE_S).encode()),
                        (b"content-length", b"0")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return
        if self._expose:
            headers.append((b"access-control-expose-headers", b"x-request-id"))
        names = {name for name, _ in headers if name != b"vary"}

        def send_with_cors(message: dict[str, Any]) -> Awaitable[None]:
            # No coroutine of its own: a body message goes straight to ``send``.
            if message["type"] == "http.response.start":
                kept = [h for h in message.get("headers", ()) if h[0].lower() not in names]
                message = {**message, "headers": [*kept, *headers]}
            return send(message)

        await self.app(scope, receive, send_with_cors)
