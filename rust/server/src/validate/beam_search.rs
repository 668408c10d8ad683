//! What may go with `use_beam_search`: the fields a beam search cannot honour are a 400
//! naming the field. Mirrors `server/validate/beam_search.py`, check for check, in the
//! same order. The search itself: [`crate::output::beam_search`]. Behaviour: docs/api.md,
//! "Beam search".
//!
//! A search step asks the engine for the top `2 × n` log-probabilities of each beam's
//! next token, the model's raw ones: so `n` is at most half the engine's logprobs cap, and
//! what reshapes the distribution (penalties, biases, masks, grammars) or the output (stop
//! strings and tokens, `min_tokens`, logprobs) cannot apply. `temperature`, `top_p`,
//! `top_k`, `min_p` pick a sampled token, which a search has none of: they are accepted
//! and change nothing, as in vLLM (`seed` seeds the steps: [`crate::output::beam_search`]).

use crate::edge::error::ApiError;
use crate::logprobs::MAX_LOGPROBS;
use crate::validate::params::{Endpoint, Settings};

/// The widest search: each step asks for `2 × width` logprobs, at most the engine's cap.
pub const MAX_WIDTH: i64 = MAX_LOGPROBS / 2;
/// The render service's refusal (vLLM's words).
pub const RENDER_REFUSAL: &str = "Beam search is not supported by the render endpoint";
/// The field that asks for a search.
pub const PARAM: &str = "use_beam_search";

fn refused(field: &str) -> ApiError {
    ApiError::bad(
        field,
        format!("`{field}` is not supported with beam search"),
    )
}

/// Refuses what cannot go with the search `settings` asks for (none: nothing to check).
/// Runs after every field's own check (chat: after `logprobs`; completions: after
/// `logprobs` and `echo`), before the model.
pub fn check(settings: &Settings, endpoint: Endpoint) -> Result<(), ApiError> {
    let Some(beam) = settings.beam_search else {
        return Ok(());
    };
    if endpoint == Endpoint::Completions && settings.stream {
        return Err(ApiError::bad(
            "stream",
            "Streaming is not currently supported with beam search",
        ));
    }
    if i64::from(beam.width) > MAX_WIDTH {
        return Err(ApiError::bad(
            "n",
            format!(
                "`n` must be in [1, {MAX_WIDTH}] with beam search (each step asks the engine \
                 for the top 2 × n log-probabilities, at most {MAX_LOGPROBS}), got {}",
                beam.width
            ),
        ));
    }
    if settings.echo_only {
        let field = settings.max_tokens_field;
        return Err(ApiError::bad(
            field,
            format!("`{field}` must be at least 1 with beam search"),
        ));
    }
    let sampling = &settings.sampling;
    let asks = [
        ("logprobs", sampling.logprobs.is_some()),
        ("prompt_logprobs", settings.prompt_logprobs.is_some()),
        ("stop", !settings.stop.is_empty()),
        ("stop_token_ids", !sampling.stop_token_ids.is_empty()),
        ("min_tokens", sampling.min_tokens > 0),
        ("presence_penalty", sampling.presence_penalty != 0.0),
        ("frequency_penalty", sampling.frequency_penalty != 0.0),
        ("repetition_penalty", sampling.repetition_penalty != 1.0),
        ("logit_bias", !sampling.logit_bias.is_empty()),
        ("allowed_token_ids", sampling.allowed_token_ids.is_some()),
        ("bad_words", !sampling.bad_words_token_ids.is_empty()),
    ];
    if let Some((field, _)) = asks.iter().find(|(_, asked)| *asked) {
        return Err(refused(field));
    }
    match settings.constraint {
        Some(field) => Err(refused(field)),
        None => Ok(()),
    }
}

/// A `tool_choice` that forces a call (`forcing`: how the messages name it) needs a
/// grammar and a stop string: refused with beam search.
pub fn check_tools(settings: &Settings, forcing: Option<&str>) -> Result<(), ApiError> {
    match (settings.beam_search, forcing) {
        (Some(_), Some(choice)) => Err(ApiError::bad(
            "tool_choice",
            format!("`tool_choice` {choice} is not supported with beam search"),
        )),
        _ => Ok(()),
    }
}

/// The render service answers what one engine request would get: a search is many
/// (vLLM's render endpoint refuses it too).
pub fn check_render(settings: &Settings) -> Result<(), ApiError> {
    match settings.beam_search {
        Some(_) => Err(ApiError::bad(PARAM, RENDER_REFUSAL)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests;
