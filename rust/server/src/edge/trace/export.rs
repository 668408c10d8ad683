//! The exporter behind [`super::Traces`]: the collector's URL, and the OTLP/HTTP
//! exporter (protobuf, the `hyper` client; `https://` collectors through rustls) running
//! on a one-thread runtime of its own.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hyper_rustls::HttpsConnectorBuilder;
use hyper_util::client::legacy::connect::HttpConnector;
use opentelemetry_http::hyper::HyperClient;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use opentelemetry_sdk::Resource;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::PrivateKeyDer;

/// The OTLP/HTTP path of traces, added to an endpoint given without a path.
pub const TRACES_PATH: &str = "/v1/traces";
/// OTel's variables naming a PEM file of the CA certificates an `https://` collector's
/// certificate must chain to (instead of the system's roots), the traces one first.
pub const CERTIFICATE_VARS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
    "OTEL_EXPORTER_OTLP_CERTIFICATE",
];
/// OTel's variables naming the client certificate (PEM chain) and its key that vrs
/// presents to an `https://` collector that asks for one (mTLS).
pub const CLIENT_CERTIFICATE_VARS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE",
    "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
];
pub const CLIENT_KEY_VARS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY",
    "OTEL_EXPORTER_OTLP_CLIENT_KEY",
];
/// How long one export may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The URL spans are posted to: `endpoint` as given when it has a path (the OTel
/// convention for a traces endpoint), else the collector's base + `/v1/traces`.
/// `http://` and `https://` collectors.
pub fn traces_url(endpoint: &str) -> Result<String, String> {
    let uri: axum::http::Uri = endpoint.parse().map_err(|e| {
        format!(
            "--otlp-traces-endpoint {endpoint:?} is not a URL ({e}); give e.g. \
             http://127.0.0.1:4318 or https://collector.example:4318"
        )
    })?;
    match uri.scheme_str() {
        Some("http" | "https") if uri.authority().is_some() => {}
        _ => {
            return Err(format!(
                "--otlp-traces-endpoint {endpoint:?} is not an http:// or https:// URL; give an \
                 OTLP/HTTP endpoint such as http://127.0.0.1:4318 or \
                 https://collector.example:4318/v1/traces"
            ))
        }
    }
    if matches!(uri.path(), "" | "/") && uri.query().is_none() {
        Ok(format!("{}{TRACES_PATH}", endpoint.trim_end_matches('/')))
    } else {
        Ok(endpoint.to_owned())
    }
}

/// The first of `vars` that is set and not empty, with its value.
fn first_set(
    vars: &[&'static str],
    lookup: &impl Fn(&str) -> Option<String>,
) -> Option<(&'static str, String)> {
    vars.iter()
        .find_map(|var| lookup(var).filter(|v| !v.is_empty()).map(|v| (*var, v)))
}

/// The TLS client settings for an `https://` collector from OTel's variables (`lookup`
/// reads one): the roots are the CA file of the first of [`CERTIFICATE_VARS`] that is
/// set, else the system's; a client certificate and key when both are named.
pub fn collector_tls(
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<rustls::ClientConfig, String> {
    use crate::edge::listener::tls::{pem_error, read_certs, read_roots};

    let roots = match first_set(&CERTIFICATE_VARS, &lookup) {
        Some((var, path)) => read_roots(Path::new(&path), &format!("CA file of {var}"))?,
        None => {
            let mut roots = rustls::RootCertStore::empty();
            roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
            if roots.is_empty() {
                return Err(format!(
                    "no CA certificate to check an https:// collector with: the system has \
                     none; name a PEM file in {}",
                    CERTIFICATE_VARS[1]
                ));
            }
            roots
        }
    };
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| format!("cannot set up TLS for the OTLP exporter: {e}"))?
    .with_root_certificates(roots);
    let cert = first_set(&CLIENT_CERTIFICATE_VARS, &lookup);
    let key = first_set(&CLIENT_KEY_VARS, &lookup);
    match (cert, key) {
        (None, None) => Ok(builder.with_no_client_auth()),
        (Some((cert_var, cert_path)), Some((key_var, key_path))) => {
            let chain = read_certs(
                Path::new(&cert_path),
                &format!("client certificate of {cert_var}"),
            )?;
            let key = PrivateKeyDer::from_pem_file(&key_path).map_err(|e| {
                format!(
                    "cannot read a private key from {key_path} ({key_var}): {}",
                    pem_error(e)
                )
            })?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("the client certificate of {cert_var}: {e}"))
        }
        (Some((var, _)), None) | (None, Some((var, _))) => Err(format!(
            "{var} is set but not its pair: a client certificate for the collector needs both \
             {} and {}",
            CLIENT_CERTIFICATE_VARS[1], CLIENT_KEY_VARS[1]
        )),
    }
}

/// The OTLP/HTTP exporter posting to `url`.
pub(super) fn exporter(url: &str) -> Result<impl SpanExporter + 'static, String> {
    let exporter = if url.starts_with("https://") {
        let config = collector_tls(|var| std::env::var(var).ok())?;
        let mut http = HttpConnector::new();
        http.enforce_http(false); // the TLS layer above takes https:// URLs
        let connector = HttpsConnectorBuilder::new()
            .with_tls_config(config)
            .https_only()
            .enable_http1()
            .wrap_connector(http);
        otlp_exporter(url, HyperClient::new(connector, EXPORT_TIMEOUT, None))?
    } else {
        let connector = HttpConnector::new();
        otlp_exporter(url, HyperClient::new(connector, EXPORT_TIMEOUT, None))?
    };
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

/// OTel's exporter posting protobuf to `url` through `client`.
fn otlp_exporter(
    url: &str,
    client: impl opentelemetry_http::HttpClient + 'static,
) -> Result<opentelemetry_otlp::SpanExporter, String> {
    opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(client)
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(url)
        .build()
        .map_err(|e| format!("cannot set up the OTLP exporter to {url}: {e}"))
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
