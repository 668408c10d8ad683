//! CORS (`--allowed-origins`, `--allowed-methods`, `--allowed-headers`,
//! `--allow-credentials`) with tower-http's [`CorsLayer`], the flags read as vLLM (Starlette)
//! reads them. [`cors`] is the middleware: it answers a preflight itself, before the API key
//! is checked, and adds the CORS headers to every other response to a request with an
//! `Origin`. Mirrors `server/edge/cors.py`. Behaviour: docs/api.md, "CORS".

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, HeaderName, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::Response;
use tower::{Layer, ServiceExt};
use tower_http::cors::{AllowHeaders, AllowOrigin, CorsLayer};

/// What `*` among the methods allows (Starlette's list).
pub const ALL_METHODS: [&str; 7] = ["DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT"];
/// Headers a browser may always send; a header list allows them too.
pub const SAFELISTED_HEADERS: [&str; 4] = [
    "accept",
    "accept-language",
    "content-language",
    "content-type",
];
/// How long a browser may cache a preflight's answer (Starlette's default).
pub const MAX_AGE: Duration = Duration::from_secs(600);

/// The CORS settings, as the flags give them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorsSettings {
    pub allowed_origins: Vec<String>,
    pub allowed_methods: Vec<String>,
    pub allowed_headers: Vec<String>,
    pub allow_credentials: bool,
    /// Expose `X-Request-Id` (request ids are on).
    pub expose_request_id: bool,
}

impl Default for CorsSettings {
    /// vLLM's defaults: any origin, method and header; no credentials.
    fn default() -> Self {
        let any = || vec!["*".to_owned()];
        Self {
            allowed_origins: any(),
            allowed_methods: any(),
            allowed_headers: any(),
            allow_credentials: false,
            expose_request_id: false,
        }
    }
}

/// The checked CORS policy the middleware applies.
#[derive(Debug, Clone)]
pub struct Cors {
    layer: CorsLayer,
}

impl Cors {
    /// The policy of `settings`; an origin, method or header that cannot be an HTTP
    /// header value or name is an error naming its flag.
    pub fn new(settings: &CorsSettings) -> Result<Self, String> {
        let credentials = settings.allow_credentials;
        let origins = &settings.allowed_origins;
        let origin = if origins.iter().any(|o| o == "*") {
            if credentials {
                AllowOrigin::mirror_request()
            } else {
                AllowOrigin::any()
            }
        } else {
            let list = origins
                .iter()
                .map(|o| {
                    HeaderValue::from_str(o)
                        .map_err(|_| format!("--allowed-origins: {o:?} is not a valid origin"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            AllowOrigin::list(list)
        };
        let methods = method_names(&settings.allowed_methods)
            .into_iter()
            .map(|m| {
                Method::from_bytes(m.as_bytes())
                    .map_err(|_| format!("--allowed-methods: {m:?} is not an HTTP method"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let headers = if settings.allowed_headers.iter().any(|h| h == "*") {
            AllowHeaders::mirror_request()
        } else {
            let names = header_names(&settings.allowed_headers)
                .into_iter()
                .map(|h| {
                    HeaderName::from_bytes(h.as_bytes())
                        .map_err(|_| format!("--allowed-headers: {h:?} is not a header name"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            AllowHeaders::list(names)
        };
        let mut layer = CorsLayer::new()
            .allow_origin(origin)
            .allow_methods(methods)
            .allow_headers(headers)
            .allow_credentials(credentials)
            .max_age(MAX_AGE);
        if settings.expose_request_id {
            layer = layer.expose_headers([super::request_id::HEADER]);
        }
        Ok(Self { layer })
    }
}

/// The methods a list allows, `*` expanded.
pub fn method_names(methods: &[String]) -> Vec<String> {
    if methods.iter().any(|m| m == "*") {
        return ALL_METHODS.iter().map(|m| (*m).to_owned()).collect();
    }
    methods.to_vec()
}

/// The headers a list (without `*`) allows: the list and the safelisted ones, lower
/// case, sorted, once each.
pub fn header_names(headers: &[String]) -> Vec<String> {
    let mut names: Vec<String> = headers
        .iter()
        .map(|h| h.to_ascii_lowercase())
        .chain(SAFELISTED_HEADERS.iter().map(|h| (*h).to_owned()))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The middleware: a request with an `Origin` goes through the CORS layer (a preflight
/// is answered there), any other straight on.
pub async fn cors(State(policy): State<Arc<Cors>>, request: Request, next: Next) -> Response {
    if !request.headers().contains_key(header::ORIGIN) {
        return next.run(request).await;
    }
    match policy.layer.layer(next).oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::routing::post;
    use axum::Router;

    fn app(settings: CorsSettings) -> Router {
        let policy = Arc::new(Cors::new(&settings).unwrap());
        Router::new()
            .route("/v1/x", post(|| async { "ok" }))
            .layer(axum::middleware::from_fn_with_state(policy, cors))
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    async fn call(app: &Router, request: Request<Body>) -> Response {
        app.clone().oneshot(request).await.unwrap()
    }

    fn preflight(origin: &str) -> Request<Body> {
        Request::builder()
            .method("OPTIONS")
            .uri("/v1/x")
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "authorization,content-type",
            )
            .body(Body::empty())
            .unwrap()
    }

    fn get(response: &Response, name: &str) -> Option<String> {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    }

    #[tokio::test]
    async fn defaults_allow_any_origin() {
        let app = app(CorsSettings::default());
        let r = call(&app, preflight("https://a.example")).await;
        assert_eq!(r.status(), 200);
        assert_eq!(get(&r, "access-control-allow-origin").as_deref(), Some("*"));
        assert_eq!(
            get(&r, "access-control-allow-methods").as_deref(),
            Some("DELETE,GET,HEAD,OPTIONS,PATCH,POST,PUT")
        );
        assert_eq!(
            get(&r, "access-control-allow-headers").as_deref(),
            Some("authorization,content-type")
        );
        assert_eq!(get(&r, "access-control-max-age").as_deref(), Some("600"));
        assert_eq!(get(&r, "access-control-allow-credentials"), None);
        let simple = Request::post("/v1/x")
            .header("origin", "https://a.example")
            .body(Body::empty())
            .unwrap();
        let r = call(&app, simple).await;
        assert_eq!(get(&r, "access-control-allow-origin").as_deref(), Some("*"));
        // `*` does not vary with the origin; the mirrored headers do.
        assert_eq!(
            get(&r, "vary").as_deref(),
            Some("access-control-request-headers")
        );
        // No Origin: not a CORS request, no CORS headers; OPTIONS is the route's 405.
        let plain = Request::post("/v1/x").body(Body::empty()).unwrap();
        let r = call(&app, plain).await;
        assert_eq!(r.status(), 200);
        assert!(r
            .headers()
            .keys()
            .all(|k| !k.as_str().starts_with("access-control")));
        let options = Request::builder()
            .method("OPTIONS")
            .uri("/v1/x")
            .body(Body::empty())
            .unwrap();
        assert_eq!(call(&app, options).await.status(), 405);
    }

    #[tokio::test]
    async fn a_list_allows_its_origins_only() {
        let app = app(CorsSettings {
            allowed_origins: strings(&["https://good.example"]),
            allowed_methods: strings(&["GET", "POST"]),
            allowed_headers: strings(&["Authorization"]),
            allow_credentials: true,
            expose_request_id: true,
        });
        let r = call(&app, preflight("https://good.example")).await;
        assert_eq!(
            get(&r, "access-control-allow-origin").as_deref(),
            Some("https://good.example")
        );
        assert_eq!(
            get(&r, "access-control-allow-methods").as_deref(),
            Some("GET,POST")
        );
        assert_eq!(
            get(&r, "access-control-allow-headers").as_deref(),
            Some("accept,accept-language,authorization,content-language,content-type")
        );
        assert_eq!(
            get(&r, "access-control-allow-credentials").as_deref(),
            Some("true")
        );
        let r = call(&app, preflight("https://evil.example")).await;
        assert_eq!(get(&r, "access-control-allow-origin"), None);
        let simple = Request::post("/v1/x")
            .header("origin", "https://good.example")
            .body(Body::empty())
            .unwrap();
        let r = call(&app, simple).await;
        assert_eq!(
            get(&r, "access-control-allow-origin").as_deref(),
            Some("https://good.example")
        );
        assert_eq!(
            get(&r, "access-control-expose-headers").as_deref(),
            Some("x-request-id")
        );
        assert_eq!(get(&r, "vary").as_deref(), Some("origin"));
    }

    #[tokio::test]
    async fn any_origin_with_credentials_mirrors_it() {
        let app = app(CorsSettings {
            allow_credentials: true,
            ..CorsSettings::default()
        });
        let r = call(&app, preflight("https://a.example")).await;
        assert_eq!(
            get(&r, "access-control-allow-origin").as_deref(),
            Some("https://a.example")
        );
        assert_eq!(
            get(&r, "access-control-allow-credentials").as_deref(),
            Some("true")
        );
        assert_eq!(
            get(&r, "access-control-allow-headers").as_deref(),
            Some("authorization,content-type")
        );
    }

    #[test]
    fn bad_values_name_their_flag() {
        let bad = |settings: CorsSettings| Cors::new(&settings).unwrap_err();
        let base = CorsSettings::default();
        let e = bad(CorsSettings {
            allowed_origins: strings(&["https://a\nb"]),
            ..base.clone()
        });
        assert!(e.starts_with("--allowed-origins"), "{e}");
        let e = bad(CorsSettings {
            allowed_methods: strings(&["PO ST"]),
            ..base.clone()
        });
        assert!(e.starts_with("--allowed-methods"), "{e}");
        let e = bad(CorsSettings {
            allowed_headers: strings(&["bad header"]),
            ..base
        });
        assert!(e.starts_with("--allowed-headers"), "{e}");
    }
}
