"""The API key (``--api-key``, ``VRS_API_KEY``): which paths need it and whether a request
carries it. Rust: rust/server/src/edge/auth.rs."""

from __future__ import annotations

import hmac

from server.edge import Scope


def authorized(scope: Scope, api_key: bytes) -> bool:
    """Whether the request carries ``Authorization: Bearer <api_key>`` or, as Anthropic's
    clients send it, ``x-api-key: <api_key>`` (constant time)."""
    bearer = given = b""
    for name, value in scope["headers"]:
        if name == b"authorization" and not bearer:
            bearer = value
        elif name == b"x-api-key" and not given:
            given = value
    by_bearer = hmac.compare_digest(bearer, b"Bearer " + api_key)
    by_header = hmac.compare_digest(given, api_key)
    return by_bearer | by_header


def protected(path: str) -> bool:
    """Whether ``path`` needs the API key: ``/v1/*``, and ``/invocations`` (it generates;
    vLLM guards it too). As ``protected`` in ``rust/server/src/edge/auth.rs``."""
    return path.startswith("/v1/") or path == "/invocations"
