//! `vrs-rs bench serve` settings: the `--args-json` document the `vrs bench serve` app
//! builds (keys in docs/internals.md), parsed and checked once, here.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::dataset::{prefix, sonnet};

mod backend;
mod dataset;
mod metric;
pub use backend::Backend;
pub use dataset::{DatasetChoice, DatasetKeys, CUSTOM_OUTPUT_LEN, DATASETS};
pub use metric::Metric;

/// How an https server's certificate is checked.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ServerTrust {
    /// The system's trust store.
    #[default]
    System,
    /// The CA certificates of this PEM file (`--ca-cert`).
    CaFile(String),
    /// Not at all (`--insecure`).
    Insecure,
}

fn default_backend() -> Backend {
    Backend::OpenaiCompletions
}
fn default_dataset() -> String {
    "random".into()
}
fn default_custom_output_len() -> i64 {
    CUSTOM_OUTPUT_LEN
}
fn default_prefix_len() -> usize {
    prefix::DEFAULT_PREFIX_LEN
}
fn default_suffix_len() -> usize {
    prefix::DEFAULT_SUFFIX_LEN
}
fn default_num_prefixes() -> usize {
    prefix::DEFAULT_NUM_PREFIXES
}
fn default_prefix_output_len() -> usize {
    prefix::DEFAULT_OUTPUT_LEN
}
fn default_sonnet_input_len() -> usize {
    sonnet::DEFAULT_INPUT_LEN
}
fn default_sonnet_output_len() -> usize {
    sonnet::DEFAULT_OUTPUT_LEN
}
fn default_sonnet_prefix_len() -> usize {
    sonnet::DEFAULT_PREFIX_LEN
}
fn default_input_len() -> usize {
    1024
}
fn default_output_len() -> usize {
    128
}
fn default_num_prompts() -> usize {
    1000
}
fn default_metric_percentiles() -> Vec<f64> {
    vec![99.0]
}

/// The document as sent. `request_rate: null` means infinite (all requests at once).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawArgs {
    base_url: String,
    #[serde(default)]
    endpoint: Option<String>,
    #[serde(default = "default_backend")]
    backend: Backend,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    tokenizer: Option<String>,
    #[serde(default = "default_dataset")]
    dataset: String,
    #[serde(default)]
    dataset_path: Option<String>,
    #[serde(default)]
    sharegpt_output_len: Option<usize>,
    #[serde(default = "default_custom_output_len")]
    custom_output_len: i64,
    #[serde(default)]
    skip_chat_template: bool,
    #[serde(default = "default_prefix_len")]
    prefix_repetition_prefix_len: usize,
    #[serde(default = "default_suffix_len")]
    prefix_repetition_suffix_len: usize,
    #[serde(default = "default_num_prefixes")]
    prefix_repetition_num_prefixes: usize,
    #[serde(default = "default_prefix_output_len")]
    prefix_repetition_output_len: usize,
    #[serde(default = "default_sonnet_input_len")]
    sonnet_input_len: usize,
    #[serde(default = "default_sonnet_output_len")]
    sonnet_output_len: usize,
    #[serde(default = "default_sonnet_prefix_len")]
    sonnet_prefix_len: usize,
    #[serde(default)]
    conversation_output_len: Option<usize>,
    /// Seconds between a turn's answer and the next turn of its conversation.
    #[serde(default)]
    conversation_think_time: f64,
    #[serde(default = "default_input_len")]
    random_input_len: usize,
    #[serde(default = "default_output_len")]
    random_output_len: usize,
    #[serde(default)]
    random_range_ratio: f64,
    #[serde(default)]
    random_prefix_len: usize,
    #[serde(default)]
    seed: u64,
    #[serde(default = "default_num_prompts")]
    num_prompts: usize,
    #[serde(default)]
    max_concurrency: Option<usize>,
    #[serde(default)]
    request_rate: Option<f64>,
    #[serde(default)]
    ignore_eos: bool,
    #[serde(default)]
    save_detailed: bool,
    #[serde(default)]
    warmup_requests: usize,
    /// null: every metric the backend measures.
    #[serde(default)]
    percentile_metrics: Option<Vec<String>>,
    #[serde(default = "default_metric_percentiles")]
    metric_percentiles: Vec<f64>,
    #[serde(default)]
    goodput: Option<BTreeMap<String, f64>>,
    #[serde(default)]
    label: Option<String>,
    #[serde(default)]
    insecure: bool,
    #[serde(default)]
    ca_cert: Option<String>,
}

/// Checked settings of one benchmark run.
#[derive(Debug, Clone)]
pub struct BenchArgs {
    /// `http://host:port`, no trailing slash.
    pub base_url: String,
    /// Path appended to `base_url` for the generation requests.
    pub endpoint: String,
    pub backend: Backend,
    pub model: Option<String>,
    pub tokenizer: Option<String>,
    /// Where the prompts come from.
    pub dataset: DatasetChoice,
    /// Conversation dataset: seconds between a turn's answer and the next turn.
    pub think_time: f64,
    pub random_input_len: usize,
    pub random_output_len: usize,
    pub random_range_ratio: f64,
    /// Tokens every random prompt starts with (the same ones), before its own.
    pub random_prefix_len: usize,
    pub seed: u64,
    pub num_prompts: usize,
    pub max_concurrency: Option<usize>,
    /// Requests per second; `None` is infinite.
    pub request_rate: Option<f64>,
    pub ignore_eos: bool,
    /// Add vLLM's per-request lists (`--save-detailed`) to the result.
    pub save_detailed: bool,
    pub warmup_requests: usize,
    pub percentile_metrics: Vec<Metric>,
    pub metric_percentiles: Vec<f64>,
    /// SLOs in milliseconds (ttft, tpot, e2el; e2el only for a pooling backend), vLLM's
    /// `--goodput`.
    pub goodput: Option<Vec<(Metric, f64)>>,
    pub label: Option<String>,
    /// How an https server's certificate is checked (`--ca-cert`, `--insecure`).
    pub trust: ServerTrust,
}

impl BenchArgs {
    /// Parses and checks an `--args-json` document; errors name the offending key.
    pub fn from_json(text: &str) -> Result<Self, String> {
        let raw: RawArgs =
            serde_json::from_str(text).map_err(|e| format!("invalid --args-json: {e}"))?;
        Self::check(raw)
    }

    fn check(raw: RawArgs) -> Result<Self, String> {
        let base_url = raw.base_url.trim_end_matches('/').to_string();
        let https = base_url.starts_with("https://");
        let scheme = if https { "https://" } else { "http://" };
        if !base_url.starts_with(scheme) || base_url.len() <= scheme.len() {
            return Err(format!(
                "base_url must look like http://HOST:PORT or https://HOST:PORT, got {base_url:?}"
            ));
        }
        let trust = match (raw.insecure, raw.ca_cert) {
            (true, Some(_)) => {
                return Err(
                    "give --insecure or --ca-cert, not both (--insecure checks no \
                            certificate)"
                        .into(),
                )
            }
            (true, None) => ServerTrust::Insecure,
            (false, Some(path)) => ServerTrust::CaFile(path),
            (false, None) => ServerTrust::System,
        };
        if !https && trust != ServerTrust::System {
            return Err(format!(
                "--insecure and --ca-cert apply to https:// servers; base_url is {base_url}"
            ));
        }
        let endpoint = raw
            .endpoint
            .unwrap_or_else(|| raw.backend.default_endpoint().into());
        if !endpoint.starts_with('/') {
            return Err(format!("endpoint must start with '/', got {endpoint:?}"));
        }
        let dataset_name = raw.dataset.clone();
        let dataset = dataset::dataset_choice(DatasetKeys {
            dataset: raw.dataset,
            dataset_path: raw.dataset_path,
            sharegpt_output_len: raw.sharegpt_output_len,
            custom_output_len: raw.custom_output_len,
            skip_chat_template: raw.skip_chat_template,
            sonnet: [
                raw.sonnet_input_len,
                raw.sonnet_output_len,
                raw.sonnet_prefix_len,
            ],
            prefix_repetition: [
                raw.prefix_repetition_prefix_len,
                raw.prefix_repetition_suffix_len,
                raw.prefix_repetition_num_prefixes,
                raw.prefix_repetition_output_len,
            ],
            conversation_output_len: raw.conversation_output_len,
        })?;
        let think_time = raw.conversation_think_time;
        if !(think_time.is_finite() && think_time >= 0.0) {
            return Err(format!(
                "conversation_think_time must be a number of seconds >= 0, got {think_time}"
            ));
        }
        let conversation = matches!(dataset, DatasetChoice::Conversation { .. });
        if think_time > 0.0 && !conversation {
            return Err(format!(
                "conversation_think_time (--conversation-think-time) is for the conversation \
                 dataset, not {dataset_name}"
            ));
        }
        if conversation && raw.backend != Backend::OpenaiChat {
            return Err(format!(
                "the conversation dataset sends each turn with the chat history, which needs \
                 the chat completions API: use --backend openai-chat (not {})",
                raw.backend.name()
            ));
        }
        if raw.random_prefix_len > 0 && dataset != DatasetChoice::Random {
            return Err(format!(
                "random_prefix_len (--random-prefix-len) is for the random dataset; use \
                 --dataset-name random, or drop it (the {dataset_name} dataset makes its \
                 own prompts)"
            ));
        }
        if raw.random_output_len == 0 {
            return Err("random_output_len must be at least 1".into());
        }
        let ratio = raw.random_range_ratio;
        if !(0.0..1.0).contains(&ratio) {
            return Err(format!("random_range_ratio must be in [0, 1), got {ratio}"));
        }
        if raw.num_prompts == 0 {
            return Err("num_prompts must be at least 1".into());
        }
        if raw.max_concurrency == Some(0) {
            return Err("max_concurrency must be at least 1".into());
        }
        if let Some(rate) = raw.request_rate {
            if rate.is_nan() || rate <= 0.0 {
                return Err(format!(
                    "request_rate must be > 0 (or null for inf), got {rate}"
                ));
            }
        }
        if raw.ignore_eos && !raw.backend.takes_ignore_eos() {
            return Err(format!(
                "ignore_eos: the {} API has no such field; drop --ignore-eos for backend {} \
                 (or use openai-completions / openai-chat)",
                raw.backend.api(),
                raw.backend.name()
            ));
        }
        let request_rate = raw.request_rate.filter(|r| r.is_finite());
        let percentile_metrics =
            metric::percentile_metrics(raw.percentile_metrics.as_deref(), raw.backend)?;
        for p in &raw.metric_percentiles {
            if !(0.0..=100.0).contains(p) {
                return Err(format!("metric_percentiles must be within 0..100, got {p}"));
            }
        }
        let goodput = match raw.goodput {
            None => None,
            Some(slos) if slos.is_empty() => None,
            Some(slos) => Some(metric::goodput(slos, raw.backend)?),
        };
        Ok(Self {
            base_url,
            endpoint,
            backend: raw.backend,
            model: raw.model.filter(|m| !m.is_empty()),
            tokenizer: raw.tokenizer.filter(|t| !t.is_empty()),
            dataset,
            think_time,
            random_input_len: raw.random_input_len,
            random_output_len: raw.random_output_len,
            random_range_ratio: ratio,
            random_prefix_len: raw.random_prefix_len,
            seed: raw.seed,
            num_prompts: raw.num_prompts,
            max_concurrency: raw.max_concurrency,
            request_rate,
            ignore_eos: raw.ignore_eos,
            save_detailed: raw.save_detailed,
            warmup_requests: raw.warmup_requests,
            percentile_metrics,
            metric_percentiles: raw.metric_percentiles,
            goodput,
            label: raw.label,
            trust,
        })
    }

    /// Whether the server is reached over TLS.
    pub fn https(&self) -> bool {
        self.base_url.starts_with("https://")
    }

    /// The generation URL.
    pub fn url(&self) -> String {
        format!("{}{}", self.base_url, self.endpoint)
    }

    /// The model list URL (`GET`).
    pub fn models_url(&self) -> String {
        format!("{}/v1/models", self.base_url)
    }
}

#[cfg(test)]
mod tests;
