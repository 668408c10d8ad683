"""OpenTelemetry traces (``otlp_traces_endpoint``), as ``rust/server/src/edge/trace.rs``:
one span per generation request (:func:`begin`, :class:`RequestTrace`), exported over
OTLP/HTTP by the SDK's batch processor on its own thread, so that export never blocks a
request. Behaviour: docs/api.md, "Traces".
"""

from __future__ import annotations

import contextvars
import logging
import os
import threading
import time
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from engine import protocol as p
from server.edge import Handler, Receive, Scope, Send

if TYPE_CHECKING:
    from opentelemetry.trace import Span

logger = logging.getLogger("vrs.frontend")

TRACES_PATH = "/v1/traces"
SHUTDOWN_TIMEOUT_S = 3.0  # how long the exit waits for the last spans to go out


# OTel's variables of a client certificate for an https:// collector (mTLS): the traces
# one of each pair first. Either both of a pair's files are named, or neither.
CLIENT_CERTIFICATE_VARS = ("OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE",
                           "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE")
CLIENT_KEY_VARS = ("OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY", "OTEL_EXPORTER_OTLP_CLIENT_KEY")


def traces_url(endpoint: str) -> str:
    """The URL spans are posted to: ``endpoint`` as given when it has a path (the OTel
    convention for a traces endpoint), else the collector's base + ``/v1/traces``.
    ``http://`` and ``https://`` collectors (ValueError otherwise)."""
    parsed = urllib.parse.urlsplit(endpoint)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError(f"--otlp-traces-endpoint {endpoint!r} is not an http:// or https:// "
                         "URL; give an OTLP/HTTP endpoint such as http://127.0.0.1:4318 or "
                         "https://collector.example:4318/v1/traces")
    if parsed.path in ("", "/") and not parsed.query:
        return endpoint.rstrip("/") + TRACES_PATH
    return endpoint


def check_client_certificate(environ: Mapping[str, str]) -> None:
    """ValueError when OTel's variables name a client certificate without its key or a
    key without its certificate (the exporter's TLS files for an https:// collector; the
    CA file is OTEL_EXPORTER_OTLP_[TRACES_]CERTIFICATE)."""
    def first(names: tuple[str, str]) -> str | None:
        return next((name for name in names if environ.get(name)), None)

    cert, key = first(CLIENT_CERTIFICATE_VARS), first(CLIENT_KEY_VARS)
    if (cert is None) != (key is None):
        raise ValueError(f"{cert or key} is set but not its pair: a client certificate for the "
                         f"collector needs both {CLIENT_CERTIFICATE_VARS[1]} and "
                         f"{CLIENT_KEY_VARS[1]}")


def _collector_session() -> Any:
    """The exporter's ``requests`` session. requests lets REQUESTS_CA_BUNDLE and
    CURL_CA_BUNDLE replace a session's own ``verify`` on every request (where the
    environment sets them, often to the system bundle), so the CA file OTel's variables
    name for an https:// collector would never be used: this session keeps it."""
    import requests

    class CollectorSession(requests.Session):
        def merge_environment_settings(self, url: Any, proxies: Any, stream: Any,
                                       verify: Any, cert: Any) -> dict[str, Any]:
            settings = super().merge_environment_settings(url, proxies, stream, verify, cert)
            if verify is None:  # the request named none: the session's own wins
                settings["verify"] = self.verify
            return settings

    return CollectorSession()


class Traces:
    """The trace exporter of a serving Python frontend."""

    def __init__(self, endpoint: str, detailed: bool, model: str) -> None:
        # The SDK loads only when traces are on.
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.trace.propagation.tracecontext import (
            TraceContextTextMapPropagator,
        )

        url = traces_url(endpoint)
        self._propagator = TraceContextTextMapPropagator()
        attributes = {} if "OTEL_SERVICE_NAME" in os.environ else {"service.name": "vrs"}
        self._provider = TracerProvider(resource=Resource.create(attributes))
        exporter = OTLPSpanExporter(endpoint=url, session=_collector_session())
        self._provider.add_span_processor(BatchSpanProcessor(exporter))
        self._tracer = self._provider.get_tracer("vrs")
        self.detailed = detailed
        self.model = model
        logger.info("traces: one span per generation request to %s (OTLP/HTTP)%s", url,
                    ", with the engine's queue, prefill and decode times" if detailed else "")

    async def handle(self, scope: Scope, receive: Receive, send: Send, app: Handler) -> None:
        """Runs ``app`` on the request; a generation request (one that calls
        :func:`begin`) gets its span, ended with the response's status."""
        slot = _Slot(self, scope)
        status = 0

        async def watched(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        token = _SLOT.set(slot)
        try:
            await app(scope, receive, watched)
        finally:
            _SLOT.reset(token)
            if slot.trace is not None:
                slot.trace.end(status)

    def start(self, slot: _Slot) -> RequestTrace:
        from opentelemetry.trace import SpanKind

        carrier = {}
        for name, value in slot.scope["headers"]:
            if name in (b"traceparent", b"tracestate"):
                carrier[name.decode("latin-1")] = value.decode("latin-1")
        parent = self._propagator.extract(carrier) if carrier else None
        name = f"{slot.scope['method']} {slot.scope['path']}"
        span = self._tracer.start_span(name, context=parent, kind=SpanKind.SERVER,
                                       start_time=slot.start)
        return RequestTrace(span, self.model, self.detailed, slot.start)

    def shutdown(self) -> None:
        """Sends the spans still queued, waiting a few seconds at most."""
        worker = threading.Thread(target=self._provider.shutdown, name="vrs-otlp-shutdown",
                                  daemon=True)
        worker.start()
        worker.join(SHUTDOWN_TIMEOUT_S)


class _Slot:
    """A request that may become a traced generation request (see :func:`begin`)."""

    __slots__ = ("traces", "scope", "start", "trace")

    def __init__(self, traces: Traces, scope: Scope) -> None:
        self.traces = traces
        self.scope = scope
        self.start = time.time_ns()
        self.trace: RequestTrace | None = None


_SLOT: contextvars.ContextVar[_Slot | None] = contextvars.ContextVar("vrs_trace", default=None)


def begin() -> RequestTrace | None:
    """The trace of the generation request being handled: started on the first call, the
    same one after; None when traces are off."""
    slot = _SLOT.get()
    if slot is None:
        return None
    if slot.trace is None:
        slot.trace = slot.traces.start(slot)
    return slot.trace


class RequestTrace:
    """One generation request's span and what it has learnt so far."""

    __slots__ = ("_span", "_model", "_detailed", "_start", "_request_id", "_prompt_tokens",
                 "_output_tokens", "_cached", "_finish_reasons", "_queued", "_first_token",
                 "_queue", "_prefill", "_decode")

    def __init__(self, span: Span, model: str, detailed: bool, start_ns: int) -> None:
        self._span = span
        self._model = model
        self._detailed = detailed
        self._start = start_ns
        self._request_id: str | None = None
        self._prompt_tokens = 0
        self._output_tokens = 0
        self._cached: list[int] = []  # per prompt: the most any of its choices saw
        self._finish_reasons: list[str] = []
        self._queued = False
        self._first_token: int | None = None
        self._queue: float | None = None
        self._prefill: float | None = None
        self._decode: float | None = None

    def queued(self, request_id: str, prompt_tokens: Iterable[int]) -> None:
        """Its engine requests went out: ``request_id``, and each prompt's token count."""
        self._request_id = request_id
        counts = list(prompt_tokens)
        self._prompt_tokens = sum(counts)
        self._cached = [0] * len(counts)
        self._queued = True
        self._span.add_event("queued")

    def first_token(self) -> None:
        """A choice's first token came (the request's first token, the first time)."""
        if self._first_token is None:
            self._first_token = time.time_ns()
            self._span.add_event("first_token", timestamp=self._first_token)

    def output(self, prompt: int, output: p.EngineCoreOutput) -> None:
        """An engine output of a choice of prompt ``prompt``: cached tokens and timings."""
        if output.num_cached_tokens and prompt < len(self._cached):
            self._cached[prompt] = max(self._cached[prompt], output.num_cached_tokens)
        if self._detailed:
            self._queue = _max(self._queue, output.queue_time)
            self._prefill = _max(self._prefill, output.prefill_time)
            self._decode = _max(self._decode, output.decode_time)

    def finished(self, reason: str, output_tokens: int) -> None:
        """A choice ended with ``reason`` (``abort``, ``error`` too) after
        ``output_tokens``."""
        self._output_tokens += output_tokens
        self._finish_reasons.append(reason)

    def end(self, status: int) -> None:
        """The request is over: its attributes, the ``finished`` event, the span's end."""
        now = time.time_ns()
        span = self._span
        attributes: dict[str, Any] = {
            "gen_ai.request.model": self._model,
            "gen_ai.latency.e2e": (now - self._start) / 1e9,
        }
        if status:
            attributes["http.response.status_code"] = status
        if self._queued:
            span.add_event("finished", timestamp=now)
            attributes.update({
                "gen_ai.usage.input_tokens": self._prompt_tokens,
                "gen_ai.usage.output_tokens": self._output_tokens,
                "gen_ai.usage.cached_tokens": sum(self._cached),
                "gen_ai.response.finish_reasons": list(self._finish_reasons),
            })
        if self._request_id is not None:
            attributes["gen_ai.request.id"] = self._request_id
        if self._first_token is not None:
            attributes["gen_ai.latency.time_to_first_token"] = (
                (self._first_token - self._start) / 1e9)
        for name, value in (("gen_ai.latency.time_in_queue", self._queue),
                            ("gen_ai.latency.time_in_model_prefill", self._prefill),
                            ("gen_ai.latency.time_in_model_decode", self._decode)):
            if value is not None:
                attributes[name] = value
        span.set_attributes(attributes)
        if status >= 500 or p.FinishReason.ERROR.value in self._finish_reasons:
            from opentelemetry.trace import Status, StatusCode

            span.set_status(Status(StatusCode.ERROR, "the request failed"))
        span.end(end_time=now)


def _max(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    return a if b is None else max(a, b)
