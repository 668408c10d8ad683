//! Admission: generation requests in flight (what `/load` reports), bounded by
//! `--max-concurrent-requests`; over the bound a request is refused with 429 and
//! `Retry-After` instead of queueing. A [`Permit`] is held for the request's whole life
//! (a stream's included) and released when dropped.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::edge::error::ApiError;

#[derive(Debug, Default)]
pub struct Admission {
    active: AtomicUsize,
    limit: Option<usize>,
}

/// One admitted request.
#[derive(Debug)]
pub struct Permit(Arc<Admission>);

impl Drop for Permit {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Admission {
    pub fn new(limit: Option<usize>) -> Arc<Self> {
        Arc::new(Self {
            active: AtomicUsize::new(0),
            limit,
        })
    }

    /// A permit, or 429 when `limit` requests are in flight.
    pub fn enter(self: &Arc<Self>) -> Result<Permit, ApiError> {
        let before = self.active.fetch_add(1, Ordering::SeqCst);
        let permit = Permit(Arc::clone(self));
        match self.limit {
            Some(limit) if before >= limit => Err(ApiError::TooManyRequests(limit)),
            _ => Ok(permit),
        }
    }

    /// Requests in flight.
    pub fn active(&self) -> usize {
        self.active.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_and_released_on_drop() {
        let admission = Admission::new(Some(2));
        let a = admission.enter().unwrap();
        let b = admission.enter().unwrap();
        assert_eq!(admission.enter().unwrap_err(), ApiError::TooManyRequests(2));
        assert_eq!(admission.active(), 2, "a refused request holds nothing");
        drop(a);
        let c = admission.enter().unwrap();
        drop((b, c));
        assert_eq!(admission.active(), 0);
        let open = Admission::new(None);
        let permits: Vec<_> = (0..100).map(|_| open.enter().unwrap()).collect();
        assert_eq!(open.active(), 100);
        drop(permits);
        assert_eq!(open.active(), 0);
    }
}
