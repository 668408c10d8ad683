//! What handlers share: the serving state ([`AppState`]: engine client, text assets,
//! limits, metrics) and the render service's ([`RenderState`]); both give the prompt
//! builder its model through [`TextModel`].

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use vrs_engine_client::EngineClient;
use vrs_text::Tokenizer;
use vrs_wire::{PoolingTask, Ready, Runner};

use crate::args::{HttpArgs, ServeArgs};
use crate::edge::admission::Admission;
use crate::edge::cors::CorsSettings;
use crate::edge::error::ApiError;
use crate::edge::metrics::{Histogram, Metrics};
use crate::edge::middleware::Middleware;
use crate::edge::queue::{Queue, QueueLimits};
use crate::logprobs::TokenTexts;
use crate::parsers::select::Choice;
use crate::text::Template;
use crate::validate::prompt::{TextModel, DEFAULT_MAX_BATCH_PROMPTS};

/// Everything a handler needs.
pub struct AppState {
    pub client: Arc<EngineClient>,
    pub tokenizer: Tokenizer,
    pub template: Option<Template>,
    pub model_name: Arc<str>,
    pub model_root: String,
    pub created: u64,
    pub max_model_len: u64,
    pub vocab_size: u64,
    /// The engine's EOS token ids (from its READY): what ends a beam search's beam.
    pub eos_token_ids: Vec<u32>,
    /// What the engine's model serves (from its READY): generation or pooling tasks.
    pub serves: Serves,
    /// Every engine's READY, by engine index (`/load` reports each one's ranks).
    pub readies: Vec<Ready>,
    pub options: HttpOptions,
    pub metrics: Arc<Metrics>,
    /// Generation requests in flight (`/load`), bounded by `--max-concurrent-requests`.
    pub admission: Arc<Admission>,
    /// Engine requests waiting for their first output, under `options.queue`.
    pub queue: Arc<Queue>,
    pub token_texts: Arc<TokenTexts>,
}

/// Responses kept at most by default (`--responses-store-max-entries`).
pub const DEFAULT_STORE_ENTRIES: usize = 1000;

/// The HTTP settings of a serving vrs-rs (from its args; the parsers as
/// [`crate::parsers::select`] chose them).
#[derive(Debug, Clone)]
pub struct HttpOptions {
    pub api_key: Option<String>,
    pub max_request_body: usize,
    pub max_concurrent_requests: Option<usize>,
    pub request_timeout: Option<std::time::Duration>,
    /// `--max-num-queued-reqs`, `--max-num-queued-tokens`, `--max-queue-wait`.
    pub queue: QueueLimits,
    pub tool_call_parser: Option<&'static str>,
    pub reasoning_parser: Option<&'static str>,
    /// `--scheduling-policy`: `fcfs` or `priority`.
    pub scheduling_policy: &'static str,
    /// The most prompts in one completions request (`--max-batch-prompts`).
    pub max_batch_prompts: usize,
    /// CORS and request ids.
    pub middleware: Middleware,
    /// `--sse-keep-alive-interval`.
    pub sse_keep_alive: Option<std::time::Duration>,
    /// `--responses-store-max-entries` with `--enable-responses-store` (`None`: off).
    pub responses_store: Option<usize>,
    /// `GET /tokenizer_info`'s body (`--enable-tokenizer-info-endpoint`; `None`: no
    /// such route).
    pub tokenizer_info: Option<bytes::Bytes>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            api_key: None,
            max_request_body: 0,
            max_concurrent_requests: None,
            request_timeout: None,
            queue: QueueLimits::default(),
            tool_call_parser: None,
            reasoning_parser: None,
            scheduling_policy: "fcfs",
            max_batch_prompts: DEFAULT_MAX_BATCH_PROMPTS,
            middleware: Middleware::default(),
            sse_keep_alive: None,
            responses_store: None,
            tokenizer_info: None,
        }
    }
}

impl HttpOptions {
    /// `tools` and `reasoning`: the parsers chosen (see [`crate::parsers::select`]); a
    /// bad CORS value is an error naming its flag.
    pub fn from_args(args: &ServeArgs, tools: &Choice, reasoning: &Choice) -> Result<Self, String> {
        Ok(Self {
            api_key: args.api_key(),
            max_request_body: args.max_request_body(),
            max_concurrent_requests: args.specific.max_concurrent_requests,
            request_timeout: args.request_timeout(),
            queue: QueueLimits {
                max_reqs: args.max_num_queued_reqs(),
                max_tokens: args.max_num_queued_tokens(),
                max_wait: args.max_queue_wait(),
            },
            tool_call_parser: tools.name,
            reasoning_parser: reasoning.name,
            scheduling_policy: args.scheduling_policy(),
            max_batch_prompts: args
                .specific
                .max_batch_prompts
                .unwrap_or(DEFAULT_MAX_BATCH_PROMPTS),
            middleware: middleware(&args.http)?,
            sse_keep_alive: args.sse_keep_alive_interval(),
            responses_store: args.specific.enable_responses_store.then(|| {
                args.specific
                    .responses_store_max_entries
                    .unwrap_or(DEFAULT_STORE_ENTRIES)
            }),
            tokenizer_info: None,
        })
    }
}

/// The middleware of a service's `http` args (`--allowed-origins`, …,
/// `--enable-request-id-headers`); a bad CORS value is an error naming its flag.
pub fn middleware(http: &HttpArgs) -> Result<Middleware, String> {
    let cors = CorsSettings {
        allowed_origins: http.allowed_origins.clone(),
        allowed_methods: http.allowed_methods.clone(),
        allowed_headers: http.allowed_headers.clone(),
        allow_credentials: http.allow_credentials,
        expose_request_id: http.enable_request_id_headers,
    };
    Middleware::new(&cors, http.enable_request_id_headers)
}

pub type SharedState = Arc<AppState>;

/// The routes of each pooling task, for the 400 of a generation request.
fn task_routes(task: PoolingTask) -> &'static [&'static str] {
    match task {
        PoolingTask::Embed => &["/v1/embeddings", "/pooling", "/score", "/rerank"],
        PoolingTask::Classify => &["/classify", "/pooling"],
        PoolingTask::Score => &["/score", "/rerank"],
    }
}

/// What the engine's model serves, from its READY: its runner, and a pooling model's
/// tasks and class labels (by class index).
#[derive(Debug, Clone, PartialEq)]
pub struct Serves {
    pub runner: Runner,
    pub tasks: Vec<PoolingTask>,
    pub labels: Vec<String>,
}

impl Default for Serves {
    fn default() -> Self {
        Self {
            runner: Runner::Generate,
            tasks: Vec::new(),
            labels: Vec::new(),
        }
    }
}

impl Serves {
    /// The tasks' names, comma-separated.
    pub fn task_names(&self) -> String {
        let names: Vec<&str> = self.tasks.iter().map(|t| t.as_str()).collect();
        names.join(", ")
    }

    /// A generation route on a pooling engine: a 400 that says so, naming the routes
    /// its tasks serve.
    pub fn refuse_generation(&self) -> Result<(), ApiError> {
        if self.runner != Runner::Pooling {
            return Ok(());
        }
        let mut routes: Vec<&str> = self
            .tasks
            .iter()
            .flat_map(|&t| task_routes(t).iter().copied())
            .collect();
        routes.sort_unstable();
        routes.dedup();
        Err(ApiError::bad_request(format!(
            "this model serves pooling requests: {} (use {}); it does not generate text",
            self.task_names(),
            routes.join(", ")
        )))
    }

    /// A pooling route on a generation engine: a 400 that says so.
    pub fn refuse_pooling(&self) -> Result<(), ApiError> {
        if self.runner == Runner::Pooling {
            return Ok(());
        }
        Err(ApiError::bad_request(
            "this model generates text: it does not serve pooling requests (embeddings, \
             classify, score, rerank); use /v1/chat/completions, /v1/completions, \
             /v1/responses or /v1/messages",
        ))
    }

    /// What `ready` announces (a runner other than "pooling" generates; task strings this
    /// frontend does not know are left out).
    pub fn of(ready: &Ready) -> Self {
        let runner = if ready.runner == Runner::Pooling.as_str() {
            Runner::Pooling
        } else {
            Runner::Generate
        };
        Self {
            runner,
            tasks: ready
                .pooling_tasks
                .iter()
                .filter_map(|t| PoolingTask::from_wire(t))
                .collect(),
            labels: ready.classify_labels.clone(),
        }
    }
}

/// 404 unless `model` is absent, `""` (vLLM's rule: both mean the served model) or
/// `served`.
pub fn check_model(served: &str, model: Option<&str>) -> Result<(), ApiError> {
    match model {
        Some(m) if !m.is_empty() && m != served => Err(ApiError::ModelNotFound(m.to_owned())),
        _ => Ok(()),
    }
}

impl TextModel for AppState {
    fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    fn template(&self) -> Option<&Template> {
        self.template.as_ref()
    }

    fn check_model(&self, model: Option<&str>) -> Result<(), ApiError> {
        check_model(&self.model_name, model)
    }

    fn vocab_size(&self) -> u64 {
        self.vocab_size
    }

    fn max_model_len(&self) -> u64 {
        self.max_model_len
    }

    fn tool_parser(&self) -> Option<&'static str> {
        self.options.tool_call_parser
    }

    fn reasoning_parser(&self) -> Option<&'static str> {
        self.options.reasoning_parser
    }

    fn scheduling_policy(&self) -> Option<&'static str> {
        Some(self.options.scheduling_policy)
    }

    fn max_batch_prompts(&self) -> usize {
        self.options.max_batch_prompts
    }

    fn tokenize_latency(&self) -> Option<&Histogram> {
        Some(&self.metrics.tokenize)
    }
}

pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl AppState {
    /// The served model name, shared by every response.
    pub fn model_name(&self) -> Arc<str> {
        Arc::clone(&self.model_name)
    }
}

/// The render service's state: the model's text assets and limits.
pub struct RenderState {
    pub tokenizer: Tokenizer,
    pub template: Option<Template>,
    pub model_name: String,
    pub model_root: String,
    pub created: u64,
    pub max_model_len: u64,
    pub vocab_size: u64,
    /// `--tool-call-parser` (auto: [`crate::parsers::select`]'s choice).
    pub tool_parser: Option<&'static str>,
    /// `--reasoning-parser` (auto: as the tool-call parser).
    pub reasoning_parser: Option<&'static str>,
    /// CORS and request ids.
    pub middleware: Middleware,
}

impl TextModel for RenderState {
    fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    fn template(&self) -> Option<&Template> {
        self.template.as_ref()
    }

    fn check_model(&self, model: Option<&str>) -> Result<(), ApiError> {
        check_model(&self.model_name, model)
    }

    fn vocab_size(&self) -> u64 {
        self.vocab_size
    }

    fn max_model_len(&self) -> u64 {
        self.max_model_len
    }

    fn tool_parser(&self) -> Option<&'static str> {
        self.tool_parser
    }

    fn reasoning_parser(&self) -> Option<&'static str> {
        self.reasoning_parser
    }
}
