"""OpenTelemetry traces (``--otlp-traces-endpoint``, ``--collect-detailed-traces``) in the
request modes and through ``vrs frontend`` (whose supervisor hands vrs-rs the flags): a
local OTLP/HTTP receiver (decoding with ``opentelemetry-proto``) gets one span per
generation request with its attributes, events and the parent from the request's
``traceparent``; once the receiver is gone, requests still succeed.

One server per mode, its spans batched every 100 ms (``OTEL_BSP_SCHEDULE_DELAY``)."""

from __future__ import annotations

import http.server
import queue
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tests.e2e.certs import make_certs
from tests.e2e.servers import MODEL, ROUTE_MODES, Server, free_port

pytestmark = pytest.mark.e2e

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "hello traces"}],
        "max_tokens": 5, "ignore_eos": True}


class Receiver:
    """An OTLP/HTTP collector on a loopback port (HTTPS with ``tls``): each POST to
    /v1/traces is decoded, its spans queued."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.port = free_port()
        self.spans: queue.Queue[Span] = queue.Queue()
        self.paths: list[str] = []
        spans, paths = self.spans, self.paths

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server hook's name
                body = self.rfile.read(int(self.headers["content-length"]))
                paths.append(self.path)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                for resource in request.resource_spans:
                    for scope in resource.scope_spans:
                        for span in scope.spans:
                            spans.put(span)
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def take(self, count: int, timeout: float = 20.0) -> list[Span]:
        """The next ``count`` spans (fails if they do not come within ``timeout``)."""
        deadline = time.monotonic() + timeout
        out = []
        while len(out) < count:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"got {len(out)} of {count} spans"
            out.append(self.spans.get(timeout=remaining))
        return out

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module", params=(*ROUTE_MODES, "rust-frontend"))
def traced(request: pytest.FixtureRequest, demo_model: Path,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Receiver]]:
    receiver = Receiver()
    log = tmp_path_factory.mktemp("traces") / f"{request.param}.log"
    # The base URL: the server adds /v1/traces (the OTel convention for a base endpoint).
    server = Server(request.param, demo_model, log,
                    cli_args=("--otlp-traces-endpoint", f"http://127.0.0.1:{receiver.port}",
                              "--collect-detailed-traces", "all"),
                    env={"OTEL_BSP_SCHEDULE_DELAY": "100"})
    try:
        yield server, receiver
    finally:
        receiver.close()
        assert server.stop() == 0, server.log()
        server.assert_all_gone()


def attributes(span: Span) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in span.attributes:
        value = kv.value
        kind = value.WhichOneof("value")
        if kind == "array_value":
            out[kv.key] = [getattr(v, v.WhichOneof("value")) for v in value.array_value.values]
        else:
            out[kv.key] = getattr(value, kind)
    return out


def test_a_span_per_request_with_the_parent_and_usage(traced: tuple[Server, Receiver]) -> None:
    server, receiver = traced
    headers = {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"}
    r = httpx.post(f"{server.url}/v1/chat/completions", json=CHAT, headers=headers, timeout=30)
    assert r.status_code == 200, r.text
    usage = r.json()["usage"]
    [span] = receiver.take(1)
    assert receiver.paths[-1] == "/v1/traces"
    assert span.trace_id.hex() == TRACE_ID and span.parent_span_id.hex() == PARENT_ID
    assert span.name == "POST /v1/chat/completions"
    assert span.kind == Span.SpanKind.SPAN_KIND_SERVER
    attrs = attributes(span)
    assert attrs["gen_ai.request.model"] == MODEL
    assert attrs["gen_ai.request.id"] == r.json()["id"]
    assert attrs["gen_ai.usage.input_tokens"] == usage["prompt_tokens"]
    assert attrs["gen_ai.usage.output_tokens"] == usage["completion_tokens"] == 5
    assert attrs["gen_ai.usage.cached_tokens"] == 0, "the mock engine caches nothing"
    assert attrs["gen_ai.response.finish_reasons"] == ["length"]
    assert attrs["http.response.status_code"] == 200
    # --collect-detailed-traces: the engine's own times.
    for name in ("gen_ai.latency.time_in_queue", "gen_ai.latency.time_in_model_prefill",
                 "gen_ai.latency.time_in_model_decode", "gen_ai.latency.time_to_first_token",
                 "gen_ai.latency.e2e"):
        assert 0 <= attrs[name] < 30, (name, attrs)
    events = [(event.name, event.time_unix_nano) for event in span.events]
    assert [name for name, _ in events] == ["queued", "first_token", "finished"]
    times = [t for _, t in events]
    assert span.start_time_unix_nano <= times[0] <= times[1] <= times[2] \
        <= span.end_time_unix_nano


def test_streams_and_choices_end_one_span(traced: tuple[Server, Receiver]) -> None:
    server, receiver = traced
    body = {"model": MODEL, "prompt": ["one", "two two"], "n": 2, "max_tokens": 3,
            "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
    with httpx.stream("POST", f"{server.url}/v1/completions", json=body, timeout=30) as r:
        assert r.status_code == 200
        lines = [line for line in r.iter_lines() if line.startswith("data: {")]
    usage = httpx.Response(200, content=lines[-1][6:]).json()["usage"]
    [span] = receiver.take(1)
    attrs = attributes(span)
    assert span.name == "POST /v1/completions"
    assert len(span.trace_id) == 16 and not span.parent_span_id, "no traceparent: a root"
    assert attrs["gen_ai.usage.input_tokens"] == usage["prompt_tokens"]
    assert attrs["gen_ai.usage.output_tokens"] == usage["completion_tokens"] == 12
    assert attrs["gen_ai.response.finish_reasons"] == ["length"] * 4
    assert [event.name for event in span.events] == ["queued", "first_token", "finished"]


def test_a_refused_request_has_its_status(traced: tuple[Server, Receiver]) -> None:
    server, receiver = traced
    r = httpx.post(f"{server.url}/v1/chat/completions",
                   json={**CHAT, "max_tokens": -1}, timeout=30)
    assert r.status_code == 400
    [span] = receiver.take(1)
    attrs = attributes(span)
    assert attrs["http.response.status_code"] == 400
    assert "gen_ai.usage.output_tokens" not in attrs
    assert [event.name for event in span.events] == []
    # Not a generation request: no span.
    assert httpx.get(f"{server.url}/v1/models", timeout=10).status_code == 200
    with pytest.raises(queue.Empty):
        receiver.spans.get(timeout=1.0)


def test_requests_succeed_with_the_collector_down(traced: tuple[Server, Receiver]) -> None:
    server, receiver = traced
    receiver.close()
    client = server.client(timeout=30)
    started = time.monotonic()
    for _ in range(8):
        reply = client.chat.completions.create(model=MODEL, messages=CHAT["messages"],
                                               max_tokens=4)
        assert reply.usage.completion_tokens >= 1
        stream = client.completions.create(model=MODEL, prompt="down", max_tokens=4,
                                           stream=True)
        assert "".join(chunk.choices[0].text for chunk in stream if chunk.choices)
    assert time.monotonic() - started < 20, "export never holds a request up"


@pytest.mark.parametrize("mode", ROUTE_MODES)
def test_an_https_collector_that_asks_for_a_client_certificate_gets_the_spans(
        mode: str, demo_model: Path, tmp_path: Path) -> None:
    certs = make_certs(tmp_path)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(certs.server_cert, certs.server_key)
    tls.load_verify_locations(certs.ca)
    tls.verify_mode = ssl.CERT_REQUIRED
    receiver = Receiver(tls)
    server = Server(mode, demo_model, tmp_path / f"{mode}.log",
                    cli_args=("--otlp-traces-endpoint", f"https://127.0.0.1:{receiver.port}"),
                    env={"OTEL_BSP_SCHEDULE_DELAY": "100",
                         "OTEL_EXPORTER_OTLP_CERTIFICATE": str(certs.ca),
                         "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": str(certs.client_cert),
                         "OTEL_EXPORTER_OTLP_CLIENT_KEY": str(certs.client_key)})
    try:
        response = httpx.post(f"{server.url}/v1/chat/completions", json=CHAT, timeout=60)
        assert response.status_code == 200, response.text
        (span,) = receiver.take(1)
        assert span.name == "POST /v1/chat/completions"
        assert receiver.paths == ["/v1/traces"]
    finally:
        receiver.close()
        assert server.stop() == 0, server.log()


@pytest.mark.parametrize("mode", ROUTE_MODES)
def test_a_pooling_request_has_its_span(demo_model: Path, tmp_path: Path, mode: str) -> None:
    """An embeddings request of two inputs: one span, the route's name, the request id
    and both inputs' prompt tokens."""
    receiver = Receiver()
    server = Server(mode, demo_model, tmp_path / f"{mode}.log",
                    cli_args=("--runner", "pooling", "--otlp-traces-endpoint",
                              f"http://127.0.0.1:{receiver.port}"),
                    env={"OTEL_BSP_SCHEDULE_DELAY": "100"})
    try:
        headers = {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"}
        r = httpx.post(f"{server.url}/v1/embeddings", headers=headers, timeout=30,
                       json={"model": MODEL, "input": ["one two", "three"]})
        assert r.status_code == 200, r.text
        [span] = receiver.take(1)
    finally:
        receiver.close()
        assert server.stop() == 0, server.log()
    assert span.name == "POST /v1/embeddings"
    assert span.trace_id.hex() == TRACE_ID and span.parent_span_id.hex() == PARENT_ID
    attrs = attributes(span)
    assert attrs["gen_ai.request.id"] == r.json()["id"]
    assert attrs["gen_ai.usage.input_tokens"] == r.json()["usage"]["prompt_tokens"]
    assert attrs["http.response.status_code"] == 200
