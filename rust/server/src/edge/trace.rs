//! OpenTelemetry traces (`--otlp-traces-endpoint`): one span per generation request
//! ([`begin`], [`RequestTrace`]), ended once the response is out and every choice's engine
//! request has ended. Export never blocks a request: finished spans go into the SDK's bounded
//! batch queue and a batch thread sends them through the `hyper` client on a one-thread
//! runtime of its own. Mirrors `server/edge/trace.py`. Behaviour: docs/api.md, "Traces".

use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, SystemTime};

use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::Router;
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{Span as _, SpanKind, Status, Tracer as _, TracerProvider as _};
use opentelemetry::{Context, KeyValue, StringValue, Value};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{BatchSpanProcessor, SdkTracer, SdkTracerProvider, Span};
use opentelemetry_sdk::Resource;
use vrs_wire::EngineCoreOutput;

pub use export::{traces_url, TRACES_PATH};

/// How long the exit waits for the last spans to go out.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(3);

/// The trace exporter of a serving vrs-rs.
pub struct Traces {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    /// `--collect-detailed-traces`: the engine's queue / prefill / decode times.
    detailed: bool,
    model: Arc<str>,
}

impl Traces {
    /// Starts exporting to `endpoint` (see [`traces_url`]); spans name `model`.
    pub fn start(endpoint: &str, detailed: bool, model: Arc<str>) -> Result<Arc<Self>, String> {
        let url = traces_url(endpoint)?;
        let exporter = export::exporter(&url)?;
        let mut resource = Resource::builder();
        if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name("vrs");
        }
        let provider = SdkTracerProvider::builder()
            .with_span_processor(BatchSpanProcessor::builder(exporter).build())
            .with_resource(resource.build())
            .build();
        let tracer = provider.tracer("vrs");
        tracing::info!(
            "traces: one span per generation request to {url} (OTLP/HTTP){}",
            if detailed {
                ", with the engine's queue, prefill and decode times"
            } else {
                ""
            }
        );
        Ok(Arc::new(Self {
            provider,
            tracer,
            detailed,
            model,
        }))
    }

    /// Sends the spans still queued (bounded by a few seconds; off the async threads).
    pub async fn shutdown(self: Arc<Self>) {
        let done = tokio::task::spawn_blocking(move || {
            self.provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT)
        })
        .await;
        if let Ok(Err(e)) = done {
            tracing::warn!("traces: the last spans were not exported: {e}");
        }
    }

    fn begin(&self, slot: &Slot) -> RequestTrace {
        let span = self
            .tracer
            .span_builder(slot.name.clone())
            .with_kind(SpanKind::Server)
            .with_start_time(slot.start)
            .start_with_context(&self.tracer, &slot.parent);
        RequestTrace {
            detailed: self.detailed,
            start: slot.start,
            inner: Mutex::new(Progress {
                span: Some(span),
                model: Arc::clone(&self.model),
                ..Progress::default()
            }),
        }
    }
}

/// `app` with a span for each generation request when `traces` is on.
pub fn layer(app: Router, traces: Option<&Arc<Traces>>) -> Router {
    match traces {
        Some(traces) => app.layer(middleware::from_fn_with_state(Arc::clone(traces), traced)),
        None => app,
    }
}

tokio::task_local! {
    /// The request being handled, while its handler runs.
    static SLOT: Arc<Slot>;
}

/// A request that may become a traced generation request (see [`begin`]).
struct Slot {
    traces: Arc<Traces>,
    parent: Context,
    name: String,
    start: SystemTime,
    trace: OnceLock<Arc<RequestTrace>>,
}

async fn traced(State(traces): State<Arc<Traces>>, request: Request, next: Next) -> Response {
    let slot = Arc::new(Slot {
        traces,
        parent: parent_context(request.headers()),
        name: format!("{} {}", request.method(), request.uri().path()),
        start: SystemTime::now(),
        trace: OnceLock::new(),
    });
    let response = SLOT.scope(Arc::clone(&slot), next.run(request)).await;
    if let Some(trace) = slot.trace.get() {
        trace.status(response.status().as_u16());
    }
    response
}

/// The trace of the generation request being handled: started on the first call, the
/// same one after; `None` when traces are off.
pub fn begin() -> Option<Arc<RequestTrace>> {
    SLOT.try_with(|slot| Arc::clone(slot.trace.get_or_init(|| Arc::new(slot.traces.begin(slot)))))
        .ok()
}

/// The remote parent named by a valid W3C `traceparent` (with its `tracestate`).
fn parent_context(headers: &HeaderMap) -> Context {
    struct Headers<'a>(&'a HeaderMap);
    impl Extractor for Headers<'_> {
        fn get(&self, key: &str) -> Option<&str> {
            self.0.get(key).and_then(|v| v.to_str().ok())
        }
        fn keys(&self) -> Vec<&str> {
            self.0.keys().map(|k| k.as_str()).collect()
        }
    }
    TraceContextPropagator::new().extract(&Headers(headers))
}

/// One generation request's span and what it has learnt so far; the span ends when the
/// last holder (the response, each choice) lets go.
pub struct RequestTrace {
    detailed: bool,
    start: SystemTime,
    inner: Mutex<Progress>,
}

#[derive(Default)]
struct Progress {
    span: Option<Span>,
    model: Arc<str>,
    request_id: Option<String>,
    prompt_tokens: u64,
    output_tokens: u64,
    /// Per prompt: prompt tokens served from the prefix cache (the most any choice saw).
    cached: Vec<u64>,
    finish_reasons: Vec<StringValue>,
    status: Option<u16>,
    queued: bool,
    first_token: Option<SystemTime>,
    queue: Option<f64>,
    prefill: Option<f64>,
    decode: Option<f64>,
}

impl RequestTrace {
    fn progress(&self) -> MutexGuard<'_, Progress> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Its engine requests went out: `request_id`, and each prompt's token count.
    pub fn queued(&self, request_id: &str, prompt_tokens: impl Iterator<Item = usize>) {
        let mut p = self.progress();
        p.request_id = Some(request_id.to_owned());
        p.cached.clear();
        for tokens in prompt_tokens {
            p.prompt_tokens += tokens as u64;
            p.cached.push(0);
        }
        p.queued = true;
        if let Some(span) = &mut p.span {
            span.add_event("queued", Vec::new());
        }
    }

    /// A choice's first token came (the request's first token, the first time).
    pub fn first_token(&self) {
        let mut p = self.progress();
        if p.first_token.is_none() {
            let now = SystemTime::now();
            p.first_token = Some(now);
            if let Some(span) = &mut p.span {
                span.add_event_with_timestamp("first_token", now, Vec::new());
            }
        }
    }

    /// An engine output of a choice of prompt `prompt`: its cached tokens and timings.
    pub fn output(&self, prompt: usize, output: &EngineCoreOutput) {
        let detailed = self.detailed;
        let has_times = output.queue_time.is_some()
            || output.prefill_time.is_some()
            || output.decode_time.is_some();
        if output.num_cached_tokens == 0 && !(detailed && has_times) {
            return;
        }
        let mut p = self.progress();
        if let Some(cached) = p.cached.get_mut(prompt) {
            *cached = (*cached).max(output.num_cached_tokens);
        }
        if detailed {
            p.queue = max(p.queue, output.queue_time);
            p.prefill = max(p.prefill, output.prefill_time);
            p.decode = max(p.decode, output.decode_time);
        }
    }

    /// A choice ended with `reason` (`abort` when the client went away, `error`),
    /// having generated `output_tokens`.
    pub fn finished(&self, reason: &'static str, output_tokens: u32) {
        let mut p = self.progress();
        p.output_tokens += u64::from(output_tokens);
        p.finish_reasons.push(StringValue::from(reason));
    }

    fn status(&self, code: u16) {
        self.progress().status = Some(code);
    }
}

fn max(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

fn seconds(from: SystemTime, to: SystemTime) -> f64 {
    to.duration_since(from).map_or(0.0, |d| d.as_secs_f64())
}

impl Drop for RequestTrace {
    fn drop(&mut self) {
        let p = self.inner.get_mut().unwrap_or_else(PoisonError::into_inner);
        let Some(mut span) = p.span.take() else {
            return;
        };
        let now = SystemTime::now();
        let mut attributes = vec![
            KeyValue::new("gen_ai.request.model", p.model.to_string()),
            KeyValue::new("gen_ai.latency.e2e", seconds(self.start, now)),
        ];
        if let Some(code) = p.status {
            attributes.push(KeyValue::new("http.response.status_code", i64::from(code)));
        }
        if p.queued {
            span.add_event_with_timestamp("finished", now, Vec::new());
            let cached: u64 = p.cached.iter().sum();
            attributes.extend([
                KeyValue::new("gen_ai.usage.input_tokens", p.prompt_tokens as i64),
                KeyValue::new("gen_ai.usage.output_tokens", p.output_tokens as i64),
                KeyValue::new("gen_ai.usage.cached_tokens", cached as i64),
                KeyValue::new(
                    "gen_ai.response.finish_reasons",
                    Value::Array(std::mem::take(&mut p.finish_reasons).into()),
                ),
            ]);
        }
        if let Some(id) = p.request_id.take() {
            attributes.push(KeyValue::new("gen_ai.request.id", id));
        }
        if let Some(first) = p.first_token {
            attributes.push(KeyValue::new(
                "gen_ai.latency.time_to_first_token",
                seconds(self.start, first),
            ));
        }
        for (name, value) in [
            ("gen_ai.latency.time_in_queue", p.queue),
            ("gen_ai.latency.time_in_model_prefill", p.prefill),
            ("gen_ai.latency.time_in_model_decode", p.decode),
        ] {
            if let Some(value) = value {
                attributes.push(KeyValue::new(name, value));
            }
        }
        span.set_attributes(attributes);
        let failed = p.status.is_some_and(|code| code >= 500)
            || p.finish_reasons.iter().any(|r| r.as_str() == "error");
        if failed {
            span.set_status(Status::error("the request failed"));
        }
        span.end_with_timestamp(now);
    }
}

mod export;
#[cfg(test)]
mod tests;
