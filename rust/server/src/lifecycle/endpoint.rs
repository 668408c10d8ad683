//! The HTTP endpoint from the `http` settings: TLS files loaded first (a bad one fails
//! before anything is bound or started), then `--uds PATH` or TCP `host:port` bound, or
//! the parent's listening socket adopted (`vrs-rs frontend`).

use std::path::Path;

use vrs_engine_client::adopt::HttpListener;

use crate::args::HttpArgs;
use crate::edge::listener::tls::{self, TlsFiles};
use crate::edge::listener::{Endpoint, Listener, ServeOptions};

/// The TLS files `http` names; `None` when it serves plain HTTP.
pub fn tls_files(http: &HttpArgs) -> Option<TlsFiles<'_>> {
    Some(TlsFiles {
        certfile: Path::new(http.ssl_certfile.as_deref()?),
        keyfile: http.ssl_keyfile.as_deref().map(Path::new),
        ca_certs: http.ssl_ca_certs.as_deref().map(Path::new),
        client_certs: http.client_certs(),
    })
}

/// How connections are served under `http`; a TLS file that does not load is the error.
pub fn serve_options(http: &HttpArgs) -> Result<ServeOptions, String> {
    let tls = match tls_files(http) {
        Some(files) => Some(tls::acceptor(files)?),
        None => None,
    };
    Ok(ServeOptions {
        tls,
        header_read_timeout: Some(http.header_read_timeout()),
        keep_alive: http.http_timeout_keep_alive(),
        max_connections: http.max_connections,
        max_header_size: http.h11_max_incomplete_event_size,
    })
}

/// Loads the TLS files, then binds `http.uds`, else TCP on `host:port`.
pub async fn bind(http: &HttpArgs, host: &str, port: u16) -> anyhow::Result<Endpoint> {
    let options = serve_options(http).map_err(anyhow::Error::msg)?;
    let listener = Listener::bind(http.uds.as_deref(), host, port).await?;
    Ok(Endpoint { listener, options })
}

/// The inherited listening socket (`--listen-fd`: TCP or AF_UNIX), served as `http` says.
pub fn adopt(adopted: HttpListener, http: &HttpArgs) -> anyhow::Result<Endpoint> {
    let options = serve_options(http).map_err(anyhow::Error::msg)?;
    Ok(Endpoint {
        listener: adopted.into(),
        options,
    })
}
