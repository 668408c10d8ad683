//! The exporter behind [`super::Traces`]: the collector's URL, and the OTLP/HTTP
//! exporter (protobuf, the `hyper` client) running on a one-thread runtime of its own.

use std::sync::Arc;
use std::time::Duration;

use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use opentelemetry_sdk::Resource;

/// The OTLP/HTTP path of traces, added to an endpoint given without a path.
pub const TRACES_PATH: &str = "/v1/traces";

/// The URL spans are posted to: `endpoint` as given when it has a path (the OTel
/// convention for a traces endpoint), else the collector's base + `/v1/traces`.
/// Only `http://` collectors are supported.
pub fn traces_url(endpoint: &str) -> Result<String, String> {
    let uri: axum::http::Uri = endpoint.parse().map_err(|e| {
        format!("--otlp-traces-endpoint {endpoint:?} is not a URL ({e}); give e.g. http://127.0.0.1:4318")
    })?;
    match uri.scheme_str() {
        Some("http") if uri.authority().is_some() => {}
        Some("https") => {
            return Err(format!(
                "--otlp-traces-endpoint {endpoint:?}: https collectors are not supported; \
                 give an http:// OTLP/HTTP endpoint (e.g. a local collector's http://127.0.0.1:4318)"
            ))
        }
        _ => {
            return Err(format!(
                "--otlp-traces-endpoint {endpoint:?} is not an http:// URL; give an OTLP/HTTP \
                 endpoint such as http://127.0.0.1:4318 or http://127.0.0.1:4318/v1/traces"
            ))
        }
    }
    if matches!(uri.path(), "" | "/") && uri.query().is_none() {
        Ok(format!("{}{TRACES_PATH}", endpoint.trim_end_matches('/')))
    } else {
        Ok(endpoint.to_owned())
    }
}

/// The OTLP/HTTP exporter posting to `url`.
pub(super) fn exporter(url: &str) -> Result<impl SpanExporter + 'static, String> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(url)
        .build()
        .map_err(|e| format!("cannot set up the OTLP exporter to {url}: {e}"))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("vrs-otlp")
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the OTLP export thread: {e}"))?;
    Ok(OnRuntime {
        inner: Arc::new(exporter),
        runtime,
    })
}

/// An exporter that runs `inner`'s exports on a runtime of its own: the SDK's batch
/// thread has none, and the `hyper` client needs one.
#[derive(Debug)]
struct OnRuntime<E> {
    inner: Arc<E>,
    runtime: tokio::runtime::Runtime,
}

impl<E: SpanExporter + 'static> SpanExporter for OnRuntime<E> {
    fn export(
        &self,
        batch: Vec<SpanData>,
    ) -> impl std::future::Future<Output = OTelSdkResult> + Send {
        let inner = Arc::clone(&self.inner);
        let task = self.runtime.spawn(async move { inner.export(batch).await });
        async move {
            task.await
                .unwrap_or_else(|e| Err(OTelSdkError::InternalFailure(e.to_string())))
        }
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.set_resource(resource);
        }
    }
}
