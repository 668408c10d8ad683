//! The browser-facing middleware of a service (serve and render): CORS
//! ([`crate::edge::cors`]), outermost so that a preflight is answered before the API
//! key is checked, then request ids ([`crate::edge::request_id`]) when they are on.

use std::sync::Arc;

use axum::Router;

use crate::edge::cors::{self, Cors, CorsSettings};
use crate::edge::request_id;

/// What wraps a service's routes.
#[derive(Debug, Clone, Default)]
pub struct Middleware {
    /// `None`: no CORS headers at all (unit tests; the flags always give a policy).
    pub cors: Option<Arc<Cors>>,
    /// `--enable-request-id-headers`.
    pub request_ids: bool,
}

impl Middleware {
    /// The middleware of these settings; a bad CORS value is an error naming its flag.
    pub fn new(cors: &CorsSettings, request_ids: bool) -> Result<Self, String> {
        let settings = CorsSettings {
            expose_request_id: request_ids,
            ..cors.clone()
        };
        Ok(Self {
            cors: Some(Arc::new(Cors::new(&settings)?)),
            request_ids,
        })
    }

    /// `router` behind this middleware.
    pub fn apply(&self, mut router: Router) -> Router {
        if self.request_ids {
            router = router.layer(axum::middleware::from_fn(request_id::echo));
        }
        if let Some(policy) = &self.cors {
            router = router.layer(axum::middleware::from_fn_with_state(
                Arc::clone(policy),
                cors::cors,
            ));
        }
        router
    }
}
