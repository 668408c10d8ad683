//! The fake engine's synthetic, deterministic logprobs.

use vrs_wire::TokenLogprobs;

use super::VOCAB_SIZE;

/// The synthetic prompt logprobs of `prompt` with the top `k`: entry i (prompt token
/// i+1) has logprob `-(i + 1)`, rank `k + 1`, and as its top the `k` ids after the
/// token (mod the vocabulary) with logprobs -0.1, -0.2, ...
pub fn prompt_logprobs(prompt: &[u32], k: u32) -> Vec<TokenLogprobs> {
    prompt
        .iter()
        .skip(1)
        .enumerate()
        .map(|(i, &token)| TokenLogprobs {
            token_id: token,
            logprob: -(i as f64 + 1.0),
            rank: k + 1,
            top_token_ids: (0..k)
                .map(|t| (token + 1 + t) % VOCAB_SIZE as u32)
                .collect(),
            top_logprobs: (0..k).map(|t| -0.1 * f64::from(t + 1)).collect(),
        })
        .collect()
}

/// The synthetic logprobs of a generated `token` with the top `k`: logprob -0.5, rank
/// 1, and as its top the token then the ids after it, logprobs -0.5, -1.5, ...
pub fn token_logprobs(token: u32, k: u32) -> TokenLogprobs {
    TokenLogprobs {
        token_id: token,
        logprob: -0.5,
        rank: 1,
        top_token_ids: (0..k).map(|t| (token + t) % VOCAB_SIZE as u32).collect(),
        top_logprobs: (0..k).map(|t| -0.5 - f64::from(t)).collect(),
    }
}
