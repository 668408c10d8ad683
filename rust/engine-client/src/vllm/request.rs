//! vrs's [`EngineCoreRequest`] as vLLM's, with the sampling parameters vLLM's own
//! frontend would send for it.
//!
//! The split is vLLM's: the frontend detokenizes and matches stop strings, so the engine
//! gets `stop: []` (vrs-rs matches them itself); the engine stops on EOS and stop token
//! ids. `n` is 1: like vLLM's frontend, vrs fans `n > 1` out into separate requests.
//! The model's EOS ids are added as `SamplingParams.update_from_generation_config` does.
//! A thinking budget travels as `thinking_token_budget`: vLLM's engine takes the markers
//! from its own `--reasoning-config`, not from the request.

use vrs_wire::vllm::{self as v, Any, OrderedMap};
use vrs_wire::{EngineCoreRequest, SamplingParams, StructuredOutputs};

use crate::error::EngineError;

/// `request` as vLLM's `EngineCoreRequest`; `eos_token_ids` are the model's (the first is
/// the primary). A setting vLLM's engine cannot take is [`EngineError::Unsupported`].
pub fn to_vllm(
    request: &EngineCoreRequest,
    eos_token_ids: &[u32],
) -> Result<v::EngineCoreRequest, EngineError> {
    if request.pooling_params.is_some() {
        return Err(EngineError::Unsupported(
            "pooling_params: vLLM's engine-core wire carries generation requests only in \
             vrs-rs; serve pooling models with vrs's own engine"
                .into(),
        ));
    }
    let params = sampling(&request.sampling_params, eos_token_ids);
    let mut out = v::EngineCoreRequest::new(
        request.request_id.clone(),
        request.prompt_token_ids.clone(),
        params,
    );
    out.arrival_time = request.arrival_time;
    out.priority = request.priority;
    out.cache_salt.clone_from(&request.cache_salt);
    Ok(out)
}

/// vrs's sampling parameters as vLLM's, normalized as `SamplingParams.__post_init__`
/// and `update_from_generation_config` leave them.
pub fn sampling(p: &SamplingParams, eos_token_ids: &[u32]) -> v::SamplingParams {
    let mut s = v::SamplingParams {
        n: 1,
        presence_penalty: p.presence_penalty,
        frequency_penalty: p.frequency_penalty,
        repetition_penalty: p.repetition_penalty,
        temperature: p.temperature,
        top_p: p.top_p,
        top_k: p.top_k,
        min_p: p.min_p,
        seed: p.seed,
        stop: Some(Vec::new()),
        stop_token_ids: Some(p.stop_token_ids.clone()),
        ignore_eos: p.ignore_eos,
        max_tokens: Some(i64::from(p.max_tokens)),
        min_tokens: i64::from(p.min_tokens),
        logprobs: p.logprobs.map(i64::from),
        prompt_logprobs: p.prompt_logprobs.map(i64::from),
        logit_bias: (!p.logit_bias.is_empty()).then(|| {
            OrderedMap(
                p.logit_bias
                    .iter()
                    .map(|&(id, bias)| (i64::from(id), bias))
                    .collect(),
            )
        }),
        allowed_token_ids: p.allowed_token_ids.clone(),
        bad_words_token_ids: (!p.bad_words_token_ids.is_empty())
            .then(|| p.bad_words_token_ids.clone()),
        structured_outputs: p.structured_outputs.as_ref().and_then(structured),
        thinking_token_budget: p.thinking_budget.as_ref().map(|b| i64::from(b.budget)),
        extra_args: p.extra_args.clone().map(Any),
        ..v::SamplingParams::default()
    };
    s.normalize();
    add_eos(&mut s, eos_token_ids);
    s
}

/// What `update_from_generation_config` does with the model's EOS ids: the primary is
/// `_eos_token_id` (unless `ignore_eos`), every one a stop token of `_all_stop_token_ids`,
/// the others also `stop_token_ids` (unless `ignore_eos`).
fn add_eos(s: &mut v::SamplingParams, eos_token_ids: &[u32]) {
    let Some((&primary, others)) = eos_token_ids.split_first() else {
        return;
    };
    if !s.ignore_eos {
        s.eos_token_id = Some(primary);
    }
    for &id in eos_token_ids {
        if !s.all_stop_token_ids.contains(&id) {
            s.all_stop_token_ids.push(id);
        }
    }
    if !s.ignore_eos {
        let stop = s.stop_token_ids.get_or_insert_with(Vec::new);
        for &id in others.iter().filter(|&&id| id != primary) {
            if !stop.contains(&id) {
                stop.push(id);
            }
        }
    }
}

/// vrs's grammar as vLLM's `StructuredOutputsParams`; `None` when it sets nothing.
fn structured(g: &StructuredOutputs) -> Option<v::StructuredOutputsParams> {
    let params = v::StructuredOutputsParams {
        json: g
            .json
            .as_ref()
            .map(|schema| Any(rmpv::Value::from(schema.as_str()))),
        regex: g.regex.clone(),
        choice: g.choice.clone(),
        grammar: g.grammar.clone(),
        json_object: g.json_object.then_some(true),
        structural_tag: g.structural_tag.clone(),
        ..v::StructuredOutputsParams::default()
    };
    let any = params.json.is_some()
        || params.regex.is_some()
        || params.choice.is_some()
        || params.grammar.is_some()
        || params.json_object.is_some()
        || params.structural_tag.is_some();
    any.then_some(params)
}
