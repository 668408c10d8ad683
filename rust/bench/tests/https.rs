//! The client over https against a loopback TLS server with a test CA: trusted through
//! `--ca-cert`, refused on the system's trust store, taken with `--insecure`.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use vrs_bench::args::Backend;
use vrs_bench::client::connect::{tls_config, ServerTrust};
use vrs_bench::client::HttpClient;

/// The server's test certificates (shared with the server crate's listener tests).
fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../server/tests/fixtures/tls")
        .join(name)
}

/// An https server (a thread per connection) answering every request with a model list.
fn https_server() -> String {
    let certs = CertificateDer::pem_file_iter(fixture("server.pem"))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(fixture("server.key")).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    let config = Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for socket in listener.incoming().flatten() {
            let config = Arc::clone(&config);
            std::thread::spawn(move || {
                let conn = rustls::ServerConnection::new(config).unwrap();
                let mut tls = rustls::StreamOwned::new(conn, socket);
                let mut buf = vec![0u8; 8192];
                let mut head = Vec::new();
                while !head.ends_with(b"\r\n\r\n") {
                    match tls.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let body = r#"{"object":"list","data":[{"id":"m"}]}"#;
                let _ = write!(
                    tls,
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = tls.flush();
                tls.conn.send_close_notify();
                let _ = tls.flush();
            });
        }
    });
    format!("https://localhost:{port}/v1/models")
}

async fn models(url: &str, trust: &ServerTrust) -> Result<serde_json::Value, String> {
    let client = HttpClient::for_backend(Backend::OpenaiCompletions, Some(tls_config(trust)?));
    client.get_json(url).await
}

#[tokio::test]
async fn https_with_the_test_ca_succeeds() {
    let url = https_server();
    let ca = fixture("ca.pem").display().to_string();
    let list = models(&url, &ServerTrust::CaFile(ca)).await.unwrap();
    assert_eq!(list["data"][0]["id"], "m");
}

#[tokio::test]
async fn https_with_insecure_takes_an_unknown_ca() {
    let url = https_server();
    let list = models(&url, &ServerTrust::Insecure).await.unwrap();
    assert_eq!(list["data"][0]["id"], "m");
}

#[tokio::test]
async fn https_refuses_a_certificate_no_trusted_ca_signed() {
    let url = https_server();
    // The other test CA did not sign the server's certificate.
    let other = fixture("other-ca.pem").display().to_string();
    let err = models(&url, &ServerTrust::CaFile(other)).await.unwrap_err();
    assert!(err.contains("cannot reach"), "{err}");
    assert!(err.to_lowercase().contains("certificate"), "{err}");
}

#[test]
fn a_missing_ca_file_is_named() {
    let err = tls_config(&ServerTrust::CaFile("/no/such/ca.pem".into())).unwrap_err();
    assert!(err.starts_with("--ca-cert /no/such/ca.pem"), "{err}");
}
