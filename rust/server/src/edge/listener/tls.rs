//! TLS for the listener (rustls, ring provider): the server certificate and key from PEM
//! files, and client certificates (mTLS) checked against `--ssl-ca-certs` as Python's
//! `ssl` does for `--ssl-cert-reqs` 0 (not asked for), 1 (optional: a presented one
//! must verify) or 2 (required).

use std::path::Path;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio_rustls::TlsAcceptor;

/// Client certificates under TLS (`ssl_cert_reqs`, Python's `ssl.CERT_*` values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientCerts {
    /// 0: not asked for.
    None,
    /// 1: asked for; one that is presented must verify.
    Optional,
    /// 2: required (mTLS).
    Required,
}

/// The TLS files of one listener.
#[derive(Debug, Clone, Copy)]
pub struct TlsFiles<'a> {
    /// PEM certificate chain (leaf first); may hold the key too.
    pub certfile: &'a Path,
    /// PEM private key; `None`: read from `certfile`.
    pub keyfile: Option<&'a Path>,
    /// PEM CA certificates that client certificates must chain to.
    pub ca_certs: Option<&'a Path>,
    pub client_certs: ClientCerts,
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Reads every certificate of a PEM file (at least one).
pub fn read_certs(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let bad = |e: String| format!("cannot read the {what} {}: {e}", path.display());
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| bad(pem_error(e)))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(pem_error(e)))?;
    if certs.is_empty() {
        return Err(bad(
            "no PEM certificate (-----BEGIN CERTIFICATE-----) in it".into(),
        ));
    }
    Ok(certs)
}

pub(crate) fn pem_error(e: rustls::pki_types::pem::Error) -> String {
    match e {
        rustls::pki_types::pem::Error::Io(io) => io.to_string(),
        other => format!("not valid PEM ({other:?})"),
    }
}

/// The CA certificates of a PEM file as a root store.
pub fn read_roots(path: &Path, what: &str) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    for cert in read_certs(path, what)? {
        roots
            .add(cert)
            .map_err(|e| format!("the {what} {}: {e}", path.display()))?;
    }
    Ok(roots)
}

/// The rustls server configuration for `files` (HTTP/1.1 by ALPN).
pub fn server_config(files: TlsFiles<'_>) -> Result<ServerConfig, String> {
    let certs = read_certs(files.certfile, "TLS certificate file (--ssl-certfile)")?;
    let key_path = files.keyfile.unwrap_or(files.certfile);
    let key = PrivateKeyDer::from_pem_file(key_path).map_err(|e| {
        format!(
            "cannot read a private key from {} ({}): {}",
            key_path.display(),
            if files.keyfile.is_some() {
                "--ssl-keyfile"
            } else {
                "--ssl-certfile, as no --ssl-keyfile was given"
            },
            match e {
                rustls::pki_types::pem::Error::NoItemsFound => {
                    "no PEM private key (-----BEGIN PRIVATE KEY-----) in it".to_string()
                }
                other => pem_error(other),
            }
        )
    })?;
    let provider = provider();
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup: {e}"))?;
    let builder = match files.client_certs {
        ClientCerts::None => builder.with_no_client_auth(),
        ClientCerts::Optional | ClientCerts::Required => {
            let Some(ca) = files.ca_certs else {
                return Err(
                    "--ssl-cert-reqs 1 or 2 needs --ssl-ca-certs (the CA certificates \
                            that client certificates must chain to)"
                        .into(),
                );
            };
            let roots = read_roots(ca, "CA certificates file (--ssl-ca-certs)")?;
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if files.client_certs == ClientCerts::Optional {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier
                .build()
                .map_err(|e| format!("--ssl-ca-certs {}: {e}", ca.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_single_cert(certs, key).map_err(|e| {
        format!(
            "the TLS certificate {} and key {} do not go together: {e}",
            files.certfile.display(),
            key_path.display()
        )
    })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// [`server_config`] as a tokio acceptor.
pub fn acceptor(files: TlsFiles<'_>) -> Result<TlsAcceptor, String> {
    Ok(TlsAcceptor::from(Arc::new(server_config(files)?)))
}
