"""The browser-facing middleware of a service (serve and render): CORS
(``server/cors.py``), outermost so that a preflight is answered before the API key is
checked, then request ids (``server/request_id.py``) when they are on. As
``rust/server/src/edge/middleware.rs``."""

from __future__ import annotations

from server.cors import Cors, CorsSettings
from server.edge import Handler
from server.request_id import RequestIds


def wrap(app: Handler, cors: CorsSettings, request_ids: bool) -> Handler:
    """``app`` behind CORS (``cors``) and, when ``request_ids``, request ids."""
    inner: Handler = RequestIds(app) if request_ids else app
    settings = CorsSettings(allowed_origins=cors.allowed_origins,
                            allowed_methods=cors.allowed_methods,
                            allowed_headers=cors.allowed_headers,
                            allow_credentials=cors.allow_credentials,
                            expose_request_id=request_ids)
    return Cors(inner, settings)
