//! One pooling request (`--backend openai-embeddings`): sent, its one JSON answer read
//! whole, and timed as vLLM's bench times it (E2EL = send -> the whole body; TTFT is the
//! same instant; nothing is generated).

use std::time::Instant;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::Uri;

use super::{describe, HttpClient};
use crate::metrics::RequestRecord;
use crate::payload::embeddings;

/// Inputs of one request: the prompt, as one string.
const INPUTS: usize = 1;

impl HttpClient {
    /// Sends one pooling request. Input tokens are the answer's `usage.prompt_tokens`
    /// (vLLM's count for pooling runs: the server's tokens), else `prompt_len` (the
    /// dataset's). A non-success status, or an answer without its `data`, is a failure.
    pub(super) async fn send_pooling(
        &self,
        uri: &Uri,
        body: Bytes,
        prompt_len: usize,
    ) -> RequestRecord {
        let start = Instant::now();
        let mut record = RequestRecord {
            prompt_len,
            ..Default::default()
        };
        let answer = match self.post(uri, body, &mut record.retries).await {
            Ok(answer) => answer
                .collect()
                .await
                .map_err(|e| format!("POST {uri}: the answer broke off: {}", describe(&e))),
            Err(message) => Err(message),
        };
        let latency = start.elapsed().as_secs_f64();
        let embedded = answer.and_then(|answer| {
            embeddings::parse(&answer.to_bytes(), INPUTS).map_err(|e| format!("POST {uri}: {e}"))
        });
        match embedded {
            Ok(embedded) => {
                record.success = true;
                record.ttft = latency;
                record.latency = latency;
                if let Some(tokens) = embedded.prompt_tokens {
                    record.prompt_len = usize::try_from(tokens).unwrap_or(usize::MAX);
                }
            }
            Err(message) => record.error = Some(message),
        }
        record
    }
}
