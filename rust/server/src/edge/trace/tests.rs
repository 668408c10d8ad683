use super::*;

#[test]
fn an_endpoint_without_a_path_gets_the_traces_path() {
    let url = |s: &str| traces_url(s).unwrap();
    assert_eq!(
        url("http://127.0.0.1:4318"),
        "http://127.0.0.1:4318/v1/traces"
    );
    assert_eq!(
        url("http://collector:4318/"),
        "http://collector:4318/v1/traces"
    );
    assert_eq!(url("http://c:4318/v1/traces"), "http://c:4318/v1/traces");
    assert_eq!(
        url("http://c:4318/custom/path"),
        "http://c:4318/custom/path"
    );
}

#[test]
fn an_endpoint_that_is_not_http_is_refused() {
    for bad in ["grpc://c:4317", "c:4318", "", "http://", "https://"] {
        let err = traces_url(bad).unwrap_err();
        assert!(err.contains("--otlp-traces-endpoint"), "{bad}: {err}");
        assert!(err.contains("https://"), "{bad}: {err}");
    }
}

#[test]
fn an_https_endpoint_is_taken() {
    assert_eq!(
        traces_url("https://collector.example:4318").unwrap(),
        "https://collector.example:4318/v1/traces"
    );
    assert_eq!(
        traces_url("https://c/otlp/v1/traces").unwrap(),
        "https://c/otlp/v1/traces"
    );
}

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/tls/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn vars(pairs: &[(&str, String)]) -> impl Fn(&str) -> Option<String> {
    let pairs: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    move |var| pairs.iter().find(|(k, _)| k == var).map(|(_, v)| v.clone())
}

#[test]
fn the_collector_tls_takes_the_ca_file_of_the_first_variable_set() {
    let ca = fixture("ca.pem");
    assert!(
        super::export::collector_tls(vars(&[("OTEL_EXPORTER_OTLP_CERTIFICATE", ca.clone())]))
            .is_ok()
    );
    // The traces variable comes first: its (missing) file is the error, not the other's.
    let err = super::export::collector_tls(vars(&[
        (
            "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
            "/nonexistent/ca.pem".into(),
        ),
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", ca.clone()),
    ]))
    .unwrap_err();
    assert!(
        err.contains("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE"),
        "{err}"
    );
    assert!(err.contains("/nonexistent/ca.pem"), "{err}");
    // An empty variable counts as unset; a file without certificates is an error.
    assert!(super::export::collector_tls(vars(&[
        ("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", String::new()),
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", ca.clone()),
    ]))
    .is_ok());
    let err = super::export::collector_tls(vars(&[(
        "OTEL_EXPORTER_OTLP_CERTIFICATE",
        fixture("client.key"),
    )]))
    .unwrap_err();
    assert!(err.contains("no PEM certificate"), "{err}");
}

#[test]
fn a_client_certificate_needs_its_key() {
    let ca = ("OTEL_EXPORTER_OTLP_CERTIFICATE", fixture("ca.pem"));
    let cert = (
        "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
        fixture("client.pem"),
    );
    let key = (
        "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY",
        fixture("client.key"),
    );
    assert!(super::export::collector_tls(vars(&[ca.clone(), cert.clone(), key.clone()])).is_ok());
    let err = super::export::collector_tls(vars(&[ca.clone(), cert])).unwrap_err();
    assert!(
        err.contains("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE is set but not its pair"),
        "{err}"
    );
    let err = super::export::collector_tls(vars(&[ca, key])).unwrap_err();
    assert!(
        err.contains("OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY is set but not its pair"),
        "{err}"
    );
}

#[test]
fn a_valid_traceparent_is_the_parent() {
    let mut headers = HeaderMap::new();
    headers.insert(
        "traceparent",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
            .parse()
            .unwrap(),
    );
    let cx = parent_context(&headers);
    use opentelemetry::trace::TraceContextExt;
    let parent = cx.span().span_context().clone();
    assert!(parent.is_valid() && parent.is_remote());
    assert_eq!(
        parent.trace_id().to_string(),
        "4bf92f3577b34da6a3ce929d0e0e4736"
    );
    assert_eq!(parent.span_id().to_string(), "00f067aa0ba902b7");
    headers.insert("traceparent", "00-zz-00f067aa0ba902b7-01".parse().unwrap());
    assert!(!parent_context(&headers).span().span_context().is_valid());
}

mod export {
    use std::time::Duration;

    use axum::body::{Body, Bytes};
    use axum::http::StatusCode;
    use axum::routing::post;
    use http_body_util::BodyExt;
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
    use opentelemetry_proto::tonic::trace::v1::Span;
    use prost::Message;
    use tokio::sync::mpsc;
    use tower::ServiceExt;
    use vrs_engine_client::fake::{DECODE_TIME, PREFILL_TIME, QUEUE_TIME};

    use super::super::*;
    use crate::testutil::{json_of, Harness};

    /// An OTLP/HTTP collector on a loopback port: its base URL, and the spans it gets.
    async fn collector() -> (String, mpsc::UnboundedReceiver<Span>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = mpsc::unbounded_channel();
        let app = Router::new().route(
            TRACES_PATH,
            post(move |body: Bytes| {
                let request = ExportTraceServiceRequest::decode(body).unwrap();
                for span in request
                    .resource_spans
                    .into_iter()
                    .flat_map(|r| r.scope_spans)
                    .flat_map(|s| s.spans)
                {
                    tx.send(span).unwrap();
                }
                async { StatusCode::OK }
            }),
        );
        tokio::spawn(async move { axum::serve(listener, app).await });
        (format!("http://{addr}"), rx)
    }

    async fn chat(app: Router, headers: &[(&str, &str)], body: &str) -> (StatusCode, Bytes) {
        let mut request =
            Request::post("/v1/chat/completions").header("content-type", "application/json");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = app
            .oneshot(request.body(Body::from(body.to_owned())).unwrap())
            .await
            .unwrap();
        let status = response.status();
        (
            status,
            response.into_body().collect().await.unwrap().to_bytes(),
        )
    }

    fn attribute<'a>(span: &'a Span, key: &str) -> &'a Any {
        span.attributes
            .iter()
            .find(|kv| kv.key == key)
            .and_then(|kv| kv.value.as_ref())
            .and_then(|v| v.value.as_ref())
            .unwrap_or_else(|| panic!("no {key} in {:?}", span.attributes))
    }

    #[tokio::test]
    async fn a_span_per_request_reaches_the_collector() {
        let (url, mut spans) = collector().await;
        let h = Harness::start(vec![5, 6], Duration::ZERO);
        let traces = Traces::start(&url, true, Arc::from("tiny")).unwrap();
        let app = layer(crate::routes::router(Arc::clone(&h.state)), Some(&traces));
        let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let body = r#"{"messages": [{"role": "user", "content": "hello"}], "max_tokens": 2}"#;
        let (status, bytes) = chat(app.clone(), &[("traceparent", parent)], body).await;
        assert_eq!(status, StatusCode::OK);
        let reply = json_of(&bytes);
        let (status, _) = chat(app, &[], r#"{"messages": []}"#).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        Arc::clone(&traces).shutdown().await;

        let span = spans.recv().await.unwrap();
        assert_eq!(span.name, "POST /v1/chat/completions");
        assert_eq!(hex(&span.trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(hex(&span.parent_span_id), "00f067aa0ba902b7");
        let int = |key| match attribute(&span, key) {
            Any::IntValue(v) => *v,
            other => panic!("{key}: {other:?}"),
        };
        let float = |key| match attribute(&span, key) {
            Any::DoubleValue(v) => *v,
            other => panic!("{key}: {other:?}"),
        };
        assert_eq!(
            int("gen_ai.usage.input_tokens"),
            reply["usage"]["prompt_tokens"]
        );
        assert_eq!(int("gen_ai.usage.output_tokens"), 2);
        assert_eq!(int("gen_ai.usage.cached_tokens"), 0);
        assert_eq!(int("http.response.status_code"), 200);
        assert_eq!(float("gen_ai.latency.time_in_queue"), QUEUE_TIME);
        assert_eq!(float("gen_ai.latency.time_in_model_prefill"), PREFILL_TIME);
        assert_eq!(float("gen_ai.latency.time_in_model_decode"), DECODE_TIME);
        assert!(
            matches!(attribute(&span, "gen_ai.request.model"), Any::StringValue(m) if m == "tiny")
        );
        assert!(
            matches!(attribute(&span, "gen_ai.request.id"), Any::StringValue(id) if *id == reply["id"])
        );
        match attribute(&span, "gen_ai.response.finish_reasons") {
            Any::ArrayValue(list) => assert_eq!(list.values.len(), 1),
            other => panic!("{other:?}"),
        }
        let events: Vec<&str> = span.events.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(events, ["queued", "first_token", "finished"]);

        let refused = spans.recv().await.unwrap();
        assert!(
            refused.parent_span_id.is_empty(),
            "no traceparent: a root span"
        );
        assert!(matches!(
            attribute(&refused, "http.response.status_code"),
            Any::IntValue(400)
        ));
        assert!(refused.events.is_empty());
    }

    #[tokio::test]
    async fn requests_succeed_with_the_collector_down() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", closed.local_addr().unwrap());
        drop(closed);
        let h = Harness::start(vec![5, 6], Duration::ZERO);
        let traces = Traces::start(&url, false, Arc::from("tiny")).unwrap();
        let app = layer(crate::routes::router(Arc::clone(&h.state)), Some(&traces));
        let body = r#"{"messages": [{"role": "user", "content": "hello"}], "max_tokens": 2}"#;
        for _ in 0..20 {
            let (status, _) = chat(app.clone(), &[], body).await;
            assert_eq!(status, StatusCode::OK);
        }
        let started = std::time::Instant::now();
        traces.shutdown().await;
        assert!(started.elapsed() < SHUTDOWN_TIMEOUT + Duration::from_secs(2));
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }
}
