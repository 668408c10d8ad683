"""server/edge/trace.py without a server: the collector URL an endpoint names (the same table as
``rust/server/src/edge/trace/tests.rs``), and traces off outside a traced request."""

from __future__ import annotations

import pytest

from server.edge.trace import begin, check_client_certificate, traces_url

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("endpoint", "url"), [
    ("http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/traces"),
    ("http://collector:4318/", "http://collector:4318/v1/traces"),
    ("http://c:4318/v1/traces", "http://c:4318/v1/traces"),
    ("http://c:4318/custom/path", "http://c:4318/custom/path"),
])
def test_an_endpoint_without_a_path_gets_the_traces_path(endpoint: str, url: str) -> None:
    assert traces_url(endpoint) == url


@pytest.mark.parametrize("endpoint", ["grpc://c:4317", "c:4318", "", "http://", "https://"])
def test_an_endpoint_that_is_not_http_is_refused(endpoint: str) -> None:
    with pytest.raises(ValueError, match="--otlp-traces-endpoint") as error:
        traces_url(endpoint)
    assert "https://" in str(error.value)


@pytest.mark.parametrize(("endpoint", "url"), [
    ("https://collector.example:4318", "https://collector.example:4318/v1/traces"),
    ("https://c/otlp/v1/traces", "https://c/otlp/v1/traces"),
])
def test_an_https_endpoint_is_taken(endpoint: str, url: str) -> None:
    assert traces_url(endpoint) == url


def test_a_client_certificate_needs_its_key() -> None:
    check_client_certificate({})
    check_client_certificate({"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": "c.pem",
                              "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY": "k.pem"})
    with pytest.raises(ValueError, match="OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE is set but"):
        check_client_certificate({"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": "c.pem",
                                  "OTEL_EXPORTER_OTLP_CLIENT_KEY": ""})
    with pytest.raises(ValueError, match="OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY is set but"):
        check_client_certificate({"OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY": "k.pem"})


def test_no_trace_outside_a_traced_request() -> None:
    assert begin() is None
