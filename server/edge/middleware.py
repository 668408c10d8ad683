"""The browser-facing middleware of a service (serve and render): CORS
(``server/edge/cors.py``), outermost so that a preflight is answered before the API key is
checked, then request ids (``server/edge/request_id.py``) when they are on. As
``rust/server/src/edge/middleware.rs``."""

from __future__ import annotations

from server.edge import Handler, cors
from server.edge.cors import Cors, CorsSettings
from server.edge.request_id import RequestIds
from server.http_args import HttpArgs


def cors_settings(http: HttpArgs) -> CorsSettings:
    """The CORS settings of a service's ``http`` args."""
    return CorsSettings(allowed_origins=http.allowed_origins,
                        allowed_methods=http.allowed_methods,
                        allowed_headers=http.allowed_headers,
                        allow_credentials=http.allow_credentials,
                        expose_request_id=http.enable_request_id_headers)


def check(http: HttpArgs) -> None:
    """ValueError naming the flag of a CORS value that cannot be an origin, method or
    header name."""
    cors.check(cors_settings(http))


def wrap(app: Handler, settings: CorsSettings, request_ids: bool) -> Handler:
    """``app`` behind CORS (``settings``) and, when ``request_ids``, request ids."""
    inner: Handler = RequestIds(app) if request_ids else app
    exposed = CorsSettings(allowed_origins=settings.allowed_origins,
                           allowed_methods=settings.allowed_methods,
                           allowed_headers=settings.allowed_headers,
                           allow_credentials=settings.allow_credentials,
                           expose_request_id=request_ids)
    return Cors(inner, exposed)


def for_http(app: Handler, http: HttpArgs) -> Handler:
    """``app`` behind the middleware of a service's ``http`` args."""
    return wrap(app, cors_settings(http), http.enable_request_id_headers)
