//! The bounded queue in front of the engine (`--max-num-queued-reqs`,
//! `--max-num-queued-tokens`, `--max-queue-wait`). Mirrors `server/edge/queue.py`: a
//! generation request enters whole before anything reaches the engine, and each engine
//! request holds a [`Ticket`] that leaves the queue when dropped (at its first output, or when
//! it ends without one) and carries its wait deadline. With none of the three flags set the
//! queue is off and costs nothing. Behaviour: docs/api.md, "Queue limits".

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::edge::error::ApiError;
use crate::edge::metrics::Rejection;

/// The three settings; all `None`: no queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueLimits {
    pub max_reqs: Option<usize>,
    pub max_tokens: Option<usize>,
    pub max_wait: Option<Duration>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Counts {
    reqs: usize,
    tokens: usize,
}

/// Engine requests queued and their prompt tokens, under the limits.
#[derive(Debug, Default)]
pub struct Queue {
    limits: QueueLimits,
    counts: Mutex<Counts>,
}

/// One queued engine request: leaves the queue when dropped.
#[derive(Debug)]
pub struct Ticket {
    queue: Arc<Queue>,
    tokens: usize,
    deadline: Option<Instant>,
}

impl Ticket {
    /// When the request stops waiting (`--max-queue-wait` after it entered), if ever.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// The error of a request still queued at its deadline (503, `Retry-After`).
    pub fn timeout_error(&self) -> ApiError {
        let wait = self.queue.limits.max_wait.unwrap_or_default();
        ApiError::QueueTimeout(format!("{}", wait.as_secs_f64()))
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if let Ok(mut counts) = self.queue.counts.lock() {
            counts.reqs = counts.reqs.saturating_sub(1);
            counts.tokens = counts.tokens.saturating_sub(self.tokens);
        }
    }
}

impl Queue {
    pub fn new(limits: QueueLimits) -> Arc<Self> {
        Arc::new(Self {
            limits,
            counts: Mutex::new(Counts::default()),
        })
    }

    /// Whether any of the three settings is on.
    pub fn is_on(&self) -> bool {
        self.limits != QueueLimits::default()
    }

    /// Enters the engine requests whose prompts have `prompt_tokens` tokens each: one
    /// ticket per engine request, in order (none when the queue is off), or the 503
    /// (a bound would be passed) or 400 (the request alone passes one).
    pub fn enter(self: &Arc<Self>, prompt_tokens: &[usize]) -> Result<Vec<Ticket>, ApiError> {
        if !self.is_on() {
            return Ok(Vec::new());
        }
        let reqs = prompt_tokens.len();
        let tokens: usize = prompt_tokens.iter().sum();
        let QueueLimits {
            max_reqs,
            max_tokens,
            max_wait,
        } = self.limits;
        if let Some(limit) = max_reqs.filter(|&limit| limit > 0 && reqs > limit) {
            return Err(ApiError::bad_request(format!(
                "this request makes {reqs} engine requests (prompts × n) and the server \
                 queues at most {limit} (--max-num-queued-reqs); send fewer prompts or a \
                 smaller n"
            )));
        }
        if let Some(limit) = max_tokens.filter(|&limit| limit > 0 && tokens > limit) {
            return Err(ApiError::bad_request(format!(
                "this request's prompts have {tokens} tokens (each counted once per choice) \
                 and the server queues at most {limit} (--max-num-queued-tokens); send a \
                 shorter prompt"
            )));
        }
        {
            let mut counts = self
                .counts
                .lock()
                .map_err(|_| ApiError::Internal("the queue's lock is poisoned".into()))?;
            if let Some(limit) = max_reqs.filter(|&limit| counts.reqs + reqs > limit) {
                return Err(ApiError::QueueFull {
                    reason: Rejection::QueueFullRequests,
                    message: format!(
                        "the server's queue is full: {} requests wait for the engine and \
                         it queues at most {limit} (--max-num-queued-reqs); retry later",
                        counts.reqs
                    ),
                });
            }
            if let Some(limit) = max_tokens.filter(|&limit| counts.tokens + tokens > limit) {
                return Err(ApiError::QueueFull {
                    reason: Rejection::QueueFullTokens,
                    message: format!(
                        "the server's queue is full: {} prompt tokens wait for the engine, \
                         this request has {tokens} and it queues at most {limit} \
                         (--max-num-queued-tokens); retry later",
                        counts.tokens
                    ),
                });
            }
            counts.reqs += reqs;
            counts.tokens += tokens;
        }
        let deadline = max_wait.map(|wait| Instant::now() + wait);
        Ok(prompt_tokens
            .iter()
            .map(|&tokens| Ticket {
                queue: Arc::clone(self),
                tokens,
                deadline,
            })
            .collect())
    }

    /// Engine requests queued and their prompt tokens.
    pub fn queued(&self) -> (usize, usize) {
        self.counts
            .lock()
            .map(|c| (c.reqs, c.tokens))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(max_reqs: Option<usize>, max_tokens: Option<usize>) -> Arc<Queue> {
        Queue::new(QueueLimits {
            max_reqs,
            max_tokens,
            max_wait: None,
        })
    }

    #[test]
    fn off_without_limits_and_hands_out_no_tickets() {
        let q = Queue::new(QueueLimits::default());
        assert!(!q.is_on());
        assert!(q.enter(&[10, 20]).unwrap().is_empty());
        assert_eq!(q.queued(), (0, 0));
    }

    #[test]
    fn request_bound_refuses_with_503_and_tickets_release_on_drop() {
        let q = queue(Some(3), None);
        let a = q.enter(&[5, 5]).unwrap();
        assert_eq!(q.queued(), (2, 10));
        let err = q.enter(&[1, 1]).unwrap_err();
        assert!(
            matches!(
                err,
                ApiError::QueueFull {
                    reason: Rejection::QueueFullRequests,
                    ..
                }
            ),
            "{err:?}"
        );
        assert_eq!(err.status().as_u16(), 503);
        assert_eq!(q.queued(), (2, 10), "a refused request takes nothing");
        let b = q.enter(&[1]).unwrap();
        assert_eq!(q.queued(), (3, 11));
        drop(a);
        assert_eq!(q.queued(), (1, 1));
        let mut c = q.enter(&[2, 3]).unwrap();
        c.pop();
        assert_eq!(q.queued(), (2, 3), "each ticket leaves on its own");
        drop((b, c));
        assert_eq!(q.queued(), (0, 0));
    }

    #[test]
    fn token_bound_counts_prompt_tokens() {
        let q = queue(None, Some(100));
        let a = q.enter(&[60]).unwrap();
        let err = q.enter(&[20, 21]).unwrap_err();
        assert!(
            matches!(
                &err,
                ApiError::QueueFull {
                    reason: Rejection::QueueFullTokens,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("--max-num-queued-tokens"), "{err}");
        let b = q.enter(&[20, 20]).unwrap();
        assert_eq!(q.queued(), (3, 100));
        drop((a, b));
        assert_eq!(q.queued(), (0, 0));
    }

    #[test]
    fn a_request_that_can_never_fit_is_a_400() {
        let q = queue(Some(2), Some(50));
        let err = q.enter(&[1, 1, 1]).unwrap_err();
        assert_eq!(err.status().as_u16(), 400);
        assert!(err.to_string().contains("--max-num-queued-reqs"), "{err}");
        let err = q.enter(&[51]).unwrap_err();
        assert_eq!(err.status().as_u16(), 400);
        assert!(err.to_string().contains("--max-num-queued-tokens"), "{err}");
        assert_eq!(q.queued(), (0, 0));
        let drain = queue(Some(0), None);
        assert_eq!(drain.enter(&[1]).unwrap_err().status().as_u16(), 503);
    }

    #[tokio::test]
    async fn wait_limit_sets_each_tickets_deadline() {
        let q = Queue::new(QueueLimits {
            max_wait: Some(Duration::from_millis(1500)),
            ..QueueLimits::default()
        });
        assert!(q.is_on());
        let before = Instant::now();
        let tickets = q.enter(&[4, 4]).unwrap();
        assert_eq!(q.queued(), (2, 8));
        for ticket in &tickets {
            let deadline = ticket.deadline().unwrap();
            assert!(deadline >= before + Duration::from_millis(1500));
            assert!(deadline <= Instant::now() + Duration::from_millis(1500));
            let err = ticket.timeout_error();
            assert_eq!(err.status().as_u16(), 503);
            assert!(err.to_string().contains("1.5 s"), "{err}");
        }
    }
}
