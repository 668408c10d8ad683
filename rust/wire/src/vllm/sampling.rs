//! vLLM's `SamplingParams`: a msgspec struct with `omit_defaults`, sent as a map.

use rmpv::Value;
use serde::{Deserialize, Serialize};

use super::array::NdArray;
use super::msgpack::{opt_value, str_values, u32_values, Any, OrderedMap};
pub use super::structured::{RepetitionDetectionParams, StructuredOutputsParams};

/// `RequestOutputKind`: how the frontend aggregates outputs (carried, not used, by the engine).
pub type RequestOutputKind = i64;

/// vLLM's `SamplingParams`, field for field in declaration order. Python's class defaults
/// are [`Default`]; the values `__post_init__` fills in (`stop: []`, the stop-token set,
/// `output_text_buffer_length`...) are the sender's to set, see [`SamplingParams::normalize`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct SamplingParams {
    pub n: i64,
    pub presence_penalty: f64,
    pub frequency_penalty: f64,
    pub repetition_penalty: f64,
    pub temperature: f64,
    pub watermarking: Option<bool>,
    pub top_p: f64,
    pub top_k: i64,
    pub min_p: f64,
    pub seed: Option<i64>,
    pub stop: Option<Vec<String>>,
    pub stop_token_ids: Option<Vec<u32>>,
    pub ignore_eos: bool,
    pub max_tokens: Option<i64>,
    pub min_tokens: i64,
    pub logprobs: Option<i64>,
    pub prompt_logprobs: Option<i64>,
    pub prompt_logprob_token_ids: Option<NdArray>,
    pub prompt_logprob_start: Option<i64>,
    pub logprob_token_ids: Option<Vec<u32>>,
    pub flat_logprobs: bool,
    pub detokenize: bool,
    pub skip_special_tokens: bool,
    pub spaces_between_special_tokens: bool,
    pub include_stop_str_in_output: bool,
    pub output_kind: RequestOutputKind,
    pub stream_interval: Option<i64>,
    pub skip_clone: bool,
    pub output_text_buffer_length: i64,
    #[serde(rename = "_eos_token_id")]
    pub eos_token_id: Option<u32>,
    /// A Python set: written in the order given here (Python writes its set order; the
    /// engine reads a set, so order carries no meaning).
    #[serde(rename = "_all_stop_token_ids")]
    pub all_stop_token_ids: Vec<u32>,
    #[serde(rename = "_watermarking_skipped")]
    pub watermarking_skipped: bool,
    pub structured_outputs: Option<StructuredOutputsParams>,
    pub logit_bias: Option<OrderedMap<i64, f64>>,
    pub allowed_token_ids: Option<Vec<u32>>,
    pub extra_args: Option<Any>,
    pub bad_words: Option<Vec<String>>,
    #[serde(rename = "_bad_words_token_ids")]
    pub bad_words_token_ids: Option<Vec<Vec<u32>>>,
    pub skip_reading_prefix_cache: Option<bool>,
    pub thinking_token_budget: Option<i64>,
    pub repetition_detection: Option<RepetitionDetectionParams>,
    pub routed_experts_prompt_start: i64,
    pub trace_decode_token_ids: Option<Vec<u32>>,
}

impl Default for SamplingParams {
    fn default() -> Self {
        Self {
            n: 1,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            repetition_penalty: 1.0,
            temperature: 1.0,
            watermarking: None,
            top_p: 1.0,
            top_k: 0,
            min_p: 0.0,
            seed: None,
            stop: None,
            stop_token_ids: None,
            ignore_eos: false,
            max_tokens: Some(16),
            min_tokens: 0,
            logprobs: None,
            prompt_logprobs: None,
            prompt_logprob_token_ids: None,
            prompt_logprob_start: None,
            logprob_token_ids: None,
            flat_logprobs: false,
            detokenize: true,
            skip_special_tokens: true,
            spaces_between_special_tokens: true,
            include_stop_str_in_output: false,
            output_kind: 0,
            stream_interval: None,
            skip_clone: false,
            output_text_buffer_length: 0,
            eos_token_id: None,
            all_stop_token_ids: Vec::new(),
            watermarking_skipped: false,
            structured_outputs: None,
            logit_bias: None,
            allowed_token_ids: None,
            extra_args: None,
            bad_words: None,
            bad_words_token_ids: None,
            skip_reading_prefix_cache: None,
            thinking_token_budget: None,
            repetition_detection: None,
            routed_experts_prompt_start: 0,
            trace_decode_token_ids: None,
        }
    }
}

/// Below this temperature vLLM samples greedily (`_SAMPLING_EPS`).
const SAMPLING_EPS: f64 = 1e-5;

impl SamplingParams {
    /// Applies what `SamplingParams.__post_init__` does to user-facing values, so that the
    /// params are what vLLM's own frontend would send: `seed -1` to none, absent stop
    /// lists to empty lists (deduplicated), `output_text_buffer_length`, greedy resets,
    /// stop token ids into the stop-token set, `skip_reading_prefix_cache`.
    pub fn normalize(&mut self) {
        if self.seed == Some(-1) {
            self.seed = None;
        }
        let stop = self.stop.get_or_insert_with(Vec::new);
        let ids = dedup(self.stop_token_ids.take().unwrap_or_default());
        self.stop_token_ids = Some(ids.clone());
        self.bad_words = Some(dedup(self.bad_words.take().unwrap_or_default()));
        if !stop.is_empty() && !self.include_stop_str_in_output {
            let longest = stop.iter().map(|s| s.chars().count()).max().unwrap_or(1);
            self.output_text_buffer_length = longest as i64 - 1;
        }
        if self.temperature < SAMPLING_EPS {
            self.top_p = 1.0;
            self.top_k = 0;
            self.min_p = 0.0;
        }
        for id in ids {
            if !self.all_stop_token_ids.contains(&id) {
                self.all_stop_token_ids.push(id);
            }
        }
        if self.skip_reading_prefix_cache.is_none() {
            self.skip_reading_prefix_cache =
                Some(self.prompt_logprobs.is_some() || self.prompt_logprob_token_ids.is_some());
        }
    }

    /// The entries of the map vLLM writes: declaration order, fields at their default
    /// left out. msgspec gives this map a map16 header whatever its size
    /// ([`write_map16`](super::msgpack::write_map16)).
    pub(crate) fn to_entries(&self, aux: &mut Vec<Vec<u8>>) -> Vec<(Value, Value)> {
        let d = Self::default();
        let mut m: Vec<(Value, Value)> = Vec::with_capacity(16);
        let mut put = |key: &str, is_default: bool, v: &dyn Fn() -> Value| {
            if !is_default {
                m.push((Value::from(key), v()));
            }
        };
        let i = |x: i64| Value::from(x);
        let oi = |x: &Option<i64>| opt_value(x, |&n| Value::from(n));
        let ou = |x: &Option<u32>| opt_value(x, |&n| Value::from(n));
        let ob = |x: &Option<bool>| opt_value(x, |&b| Value::from(b));
        let oids = |x: &Option<Vec<u32>>| opt_value(x, |v| u32_values(v));
        let ostrs = |x: &Option<Vec<String>>| opt_value(x, |v| str_values(v));
        put("n", self.n == d.n, &|| i(self.n));
        put(
            "presence_penalty",
            self.presence_penalty == d.presence_penalty,
            &|| self.presence_penalty.into(),
        );
        put(
            "frequency_penalty",
            self.frequency_penalty == d.frequency_penalty,
            &|| self.frequency_penalty.into(),
        );
        put(
            "repetition_penalty",
            self.repetition_penalty == d.repetition_penalty,
            &|| self.repetition_penalty.into(),
        );
        put("temperature", self.temperature == d.temperature, &|| {
            self.temperature.into()
        });
        put("watermarking", self.watermarking.is_none(), &|| {
            ob(&self.watermarking)
        });
        put("top_p", self.top_p == d.top_p, &|| self.top_p.into());
        put("top_k", self.top_k == d.top_k, &|| i(self.top_k));
        put("min_p", self.min_p == d.min_p, &|| self.min_p.into());
        put("seed", self.seed.is_none(), &|| oi(&self.seed));
        put("stop", self.stop.is_none(), &|| ostrs(&self.stop));
        put("stop_token_ids", self.stop_token_ids.is_none(), &|| {
            oids(&self.stop_token_ids)
        });
        put("ignore_eos", !self.ignore_eos, &|| self.ignore_eos.into());
        put("max_tokens", self.max_tokens == d.max_tokens, &|| {
            oi(&self.max_tokens)
        });
        put("min_tokens", self.min_tokens == 0, &|| i(self.min_tokens));
        put("logprobs", self.logprobs.is_none(), &|| oi(&self.logprobs));
        put("prompt_logprobs", self.prompt_logprobs.is_none(), &|| {
            oi(&self.prompt_logprobs)
        });
        // Written below (it may add an aux frame, which needs `aux`).
        let plti = self
            .prompt_logprob_token_ids
            .as_ref()
            .map(|a| a.to_value(aux));
        if let Some(v) = plti {
            m.push(("prompt_logprob_token_ids".into(), v));
        }
        let mut put = |key: &str, is_default: bool, v: &dyn Fn() -> Value| {
            if !is_default {
                m.push((Value::from(key), v()));
            }
        };
        put(
            "prompt_logprob_start",
            self.prompt_logprob_start.is_none(),
            &|| oi(&self.prompt_logprob_start),
        );
        put(
            "logprob_token_ids",
            self.logprob_token_ids.is_none(),
            &|| oids(&self.logprob_token_ids),
        );
        put("flat_logprobs", !self.flat_logprobs, &|| {
            self.flat_logprobs.into()
        });
        put("detokenize", self.detokenize, &|| self.detokenize.into());
        put("skip_special_tokens", self.skip_special_tokens, &|| {
            self.skip_special_tokens.into()
        });
        put(
            "spaces_between_special_tokens",
            self.spaces_between_special_tokens,
            &|| self.spaces_between_special_tokens.into(),
        );
        put(
            "include_stop_str_in_output",
            !self.include_stop_str_in_output,
            &|| self.include_stop_str_in_output.into(),
        );
        put(
            "output_kind",
            self.output_kind == 0,
            &|| i(self.output_kind),
        );
        put("stream_interval", self.stream_interval.is_none(), &|| {
            oi(&self.stream_interval)
        });
        put("skip_clone", !self.skip_clone, &|| self.skip_clone.into());
        put(
            "output_text_buffer_length",
            self.output_text_buffer_length == 0,
            &|| i(self.output_text_buffer_length),
        );
        put("_eos_token_id", self.eos_token_id.is_none(), &|| {
            ou(&self.eos_token_id)
        });
        put(
            "_all_stop_token_ids",
            self.all_stop_token_ids.is_empty(),
            &|| u32_values(&self.all_stop_token_ids),
        );
        put("_watermarking_skipped", !self.watermarking_skipped, &|| {
            self.watermarking_skipped.into()
        });
        put(
            "structured_outputs",
            self.structured_outputs.is_none(),
            &|| opt_value(&self.structured_outputs, StructuredOutputsParams::to_value),
        );
        put("logit_bias", self.logit_bias.is_none(), &|| {
            opt_value(&self.logit_bias, |b| {
                Value::Map(
                    b.0.iter()
                        .map(|&(k, v)| (Value::from(k), Value::F64(v)))
                        .collect(),
                )
            })
        });
        put(
            "allowed_token_ids",
            self.allowed_token_ids.is_none(),
            &|| oids(&self.allowed_token_ids),
        );
        put("extra_args", self.extra_args.is_none(), &|| {
            opt_value(&self.extra_args, |a| a.0.clone())
        });
        put("bad_words", self.bad_words.is_none(), &|| {
            ostrs(&self.bad_words)
        });
        put(
            "_bad_words_token_ids",
            self.bad_words_token_ids.is_none(),
            &|| {
                opt_value(&self.bad_words_token_ids, |w| {
                    Value::Array(w.iter().map(|x| u32_values(x)).collect())
                })
            },
        );
        put(
            "skip_reading_prefix_cache",
            self.skip_reading_prefix_cache.is_none(),
            &|| ob(&self.skip_reading_prefix_cache),
        );
        put(
            "thinking_token_budget",
            self.thinking_token_budget.is_none(),
            &|| oi(&self.thinking_token_budget),
        );
        put(
            "repetition_detection",
            self.repetition_detection.is_none(),
            &|| {
                opt_value(&self.repetition_detection, |r| {
                    Value::Map(vec![
                        ("max_pattern_size".into(), r.max_pattern_size.into()),
                        ("min_pattern_size".into(), r.min_pattern_size.into()),
                        ("min_count".into(), r.min_count.into()),
                    ])
                })
            },
        );
        put(
            "routed_experts_prompt_start",
            self.routed_experts_prompt_start == 0,
            &|| i(self.routed_experts_prompt_start),
        );
        put(
            "trace_decode_token_ids",
            self.trace_decode_token_ids.is_none(),
            &|| oids(&self.trace_decode_token_ids),
        );
        m
    }
}

fn dedup<T: PartialEq>(items: Vec<T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::with_capacity(items.len());
    for x in items {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}
