//! The `http` object of the `--args-json` contract: TLS, the Unix socket, CORS, request
//! ids and connection limits, taken by `serve`, `frontend` and `render` alike. Keys,
//! defaults and checks as in `server/http_args.py` (the `vrs` app builds it in
//! `cli/http_args.py`).

use std::fmt;
use std::path::Path;
use std::time::Duration;

use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

pub const DEFAULT_H11_MAX_INCOMPLETE_EVENT_SIZE: usize = 64 * 1024;
pub const MIN_H11_MAX_INCOMPLETE_EVENT_SIZE: usize = 1024;
pub const DEFAULT_HEADER_READ_TIMEOUT_S: f64 = 10.0;
pub const DEFAULT_HTTP_TIMEOUT_KEEP_ALIVE_S: f64 = 5.0;

/// Client certificates under TLS (`ssl_cert_reqs`): defined with the listener's TLS.
pub use crate::edge::listener::tls::ClientCerts;

fn any() -> Vec<String> {
    vec!["*".to_owned()]
}

fn default_event_size() -> usize {
    DEFAULT_H11_MAX_INCOMPLETE_EVENT_SIZE
}

fn default_header_read_timeout() -> f64 {
    DEFAULT_HEADER_READ_TIMEOUT_S
}

fn default_keep_alive() -> f64 {
    DEFAULT_HTTP_TIMEOUT_KEEP_ALIVE_S
}

/// The listener's and the edge's settings (absent keys: their defaults); the keys of
/// `HttpArgs` in `server/contracts/args.schema.json` (see `args/tests/schema.rs`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(deny_unknown_fields)]
pub struct HttpArgs {
    /// The private key (PEM); `None`: the key is in `ssl_certfile`.
    #[serde(default)]
    pub ssl_keyfile: Option<String>,
    /// The certificate chain (PEM); `None`: plain HTTP.
    #[serde(default)]
    pub ssl_certfile: Option<String>,
    /// CA certificates client certificates must chain to.
    #[serde(default)]
    pub ssl_ca_certs: Option<String>,
    /// 0, 1 or 2 (see [`ClientCerts`]).
    #[serde(default)]
    pub ssl_cert_reqs: u8,
    /// A Unix socket path served instead of host:port.
    #[serde(default)]
    pub uds: Option<String>,
    #[serde(default = "any")]
    pub allowed_origins: Vec<String>,
    #[serde(default = "any")]
    pub allowed_methods: Vec<String>,
    #[serde(default = "any")]
    pub allowed_headers: Vec<String>,
    #[serde(default)]
    pub allow_credentials: bool,
    #[serde(default)]
    pub enable_request_id_headers: bool,
    /// The largest request head in bytes (431 above it).
    #[serde(default = "default_event_size")]
    pub h11_max_incomplete_event_size: usize,
    /// Seconds a client may take to send a request's headers.
    #[serde(default = "default_header_read_timeout")]
    pub header_read_timeout: f64,
    /// Seconds an idle keep-alive connection stays open.
    #[serde(default = "default_keep_alive")]
    pub http_timeout_keep_alive: f64,
    /// Open connections at most (`None`: no limit).
    #[serde(default)]
    pub max_connections: Option<usize>,
}

impl Default for HttpArgs {
    fn default() -> Self {
        Self {
            ssl_keyfile: None,
            ssl_certfile: None,
            ssl_ca_certs: None,
            ssl_cert_reqs: 0,
            uds: None,
            allowed_origins: any(),
            allowed_methods: any(),
            allowed_headers: any(),
            allow_credentials: false,
            enable_request_id_headers: false,
            h11_max_incomplete_event_size: DEFAULT_H11_MAX_INCOMPLETE_EVENT_SIZE,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT_S,
            http_timeout_keep_alive: DEFAULT_HTTP_TIMEOUT_KEEP_ALIVE_S,
            max_connections: None,
        }
    }
}

/// `http` as the JSON object the contract says it is (`deserialize_with`): serde's
/// derive alone would also take an array of the values in field order, which the schema
/// (`server/contracts/args.schema.json`) and the Python services refuse.
pub fn object<'de, D: Deserializer<'de>>(deserializer: D) -> Result<HttpArgs, D::Error> {
    struct Object;

    impl<'de> Visitor<'de> for Object {
        type Value = HttpArgs;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("the http object")
        }

        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<HttpArgs, A::Error> {
            HttpArgs::deserialize(serde::de::value::MapAccessDeserializer::new(map))
        }
    }

    deserializer.deserialize_map(Object)
}

impl HttpArgs {
    /// Checks files exist and values are in range; the error names the key.
    pub fn check(&self) -> Result<(), String> {
        for (key, path) in [
            ("ssl_keyfile", &self.ssl_keyfile),
            ("ssl_certfile", &self.ssl_certfile),
            ("ssl_ca_certs", &self.ssl_ca_certs),
        ] {
            if let Some(path) = path {
                if !Path::new(path).is_file() {
                    return Err(format!("http.{key} {path:?} does not exist"));
                }
            }
        }
        if self.ssl_cert_reqs > 2 {
            return Err(format!(
                "http.ssl_cert_reqs must be 0, 1 or 2; got {}",
                self.ssl_cert_reqs
            ));
        }
        if self.ssl_certfile.is_none()
            && (self.ssl_keyfile.is_some() || self.ssl_ca_certs.is_some() || self.ssl_cert_reqs > 0)
        {
            return Err(
                "http.ssl_keyfile, ssl_ca_certs and ssl_cert_reqs need ssl_certfile".into(),
            );
        }
        if self.ssl_cert_reqs > 0 && self.ssl_ca_certs.is_none() {
            return Err("http.ssl_cert_reqs 1 or 2 needs ssl_ca_certs".into());
        }
        if self.h11_max_incomplete_event_size < MIN_H11_MAX_INCOMPLETE_EVENT_SIZE {
            return Err(format!(
                "http.h11_max_incomplete_event_size must be >= {MIN_H11_MAX_INCOMPLETE_EVENT_SIZE} bytes; got {}",
                self.h11_max_incomplete_event_size
            ));
        }
        for (key, seconds) in [
            ("header_read_timeout", self.header_read_timeout),
            ("http_timeout_keep_alive", self.http_timeout_keep_alive),
        ] {
            if !(seconds.is_finite() && seconds > 0.0) {
                return Err(format!("http.{key} must be > 0 seconds; got {seconds}"));
            }
        }
        if self.max_connections == Some(0) {
            return Err("http.max_connections must be >= 1; got 0".into());
        }
        Ok(())
    }

    /// Whether the server speaks TLS.
    pub fn tls(&self) -> bool {
        self.ssl_certfile.is_some()
    }

    /// The private key's file: `ssl_keyfile`, else the certificate file (a PEM bundle).
    pub fn ssl_keyfile(&self) -> Option<&str> {
        self.ssl_keyfile.as_deref().or(self.ssl_certfile.as_deref())
    }

    pub fn client_certs(&self) -> ClientCerts {
        match self.ssl_cert_reqs {
            0 => ClientCerts::None,
            1 => ClientCerts::Optional,
            _ => ClientCerts::Required,
        }
    }

    pub fn header_read_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.header_read_timeout)
    }

    pub fn http_timeout_keep_alive(&self) -> Duration {
        Duration::from_secs_f64(self.http_timeout_keep_alive)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> HttpArgs {
        serde_json::from_str(json).expect("valid http args")
    }

    #[test]
    fn absent_keys_take_the_python_defaults() {
        let args = parse("{}");
        assert_eq!(args, HttpArgs::default());
        assert_eq!(args.allowed_origins, ["*"]);
        assert_eq!(args.h11_max_incomplete_event_size, 65536);
        assert_eq!(args.header_read_timeout(), Duration::from_secs(10));
        assert_eq!(args.http_timeout_keep_alive(), Duration::from_secs(5));
        assert!(!args.tls());
        assert!(args.check().is_ok());
    }

    #[test]
    fn bad_values_name_their_key() {
        let err = |json: &str| parse(json).check().unwrap_err();
        assert!(err(r#"{"ssl_certfile": "/no/such.pem"}"#).contains("http.ssl_certfile"));
        assert!(err(r#"{"ssl_cert_reqs": 3}"#).contains("0, 1 or 2"));
        assert!(err(r#"{"ssl_cert_reqs": 1}"#).contains("need ssl_certfile"));
        assert!(err(r#"{"h11_max_incomplete_event_size": 10}"#).contains(">= 1024"));
        assert!(err(r#"{"header_read_timeout": 0}"#).contains("header_read_timeout"));
        assert!(err(r#"{"max_connections": 0}"#).contains("max_connections"));
        assert!(serde_json::from_str::<HttpArgs>(r#"{"ssl_keyfle": "x"}"#).is_err());
    }

    #[test]
    fn the_key_defaults_to_the_certificate_file() {
        let dir = std::env::temp_dir();
        let cert = dir.join(format!("vrs-http-args-{}.pem", std::process::id()));
        std::fs::write(&cert, "pem").expect("write");
        let path = cert.to_string_lossy().into_owned();
        let args = parse(&format!(
            r#"{{"ssl_certfile": {path:?}, "ssl_cert_reqs": 2}}"#
        ));
        assert!(args.check().unwrap_err().contains("needs ssl_ca_certs"));
        let args = parse(&format!(
            r#"{{"ssl_certfile": {path:?}, "ssl_ca_certs": {path:?}, "ssl_cert_reqs": 2}}"#
        ));
        args.check().expect("valid");
        assert!(args.tls());
        assert_eq!(args.ssl_keyfile(), Some(path.as_str()));
        assert_eq!(args.client_certs(), ClientCerts::Required);
        std::fs::remove_file(cert).ok();
    }
}
