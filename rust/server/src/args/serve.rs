//! What a `serve` run's settings resolve to ([`ServeArgs`]'s accessors): defaults filled
//! in, seconds as durations, the engine config sent in INIT.

use serde_json::{Map, Value};

use super::{
    ServeArgs, API_KEY_ENV, DEFAULT_DATA_PARALLEL_RPC_PORT, DEFAULT_HOST, DEFAULT_MAX_REQUEST_BODY,
    DEFAULT_PYTHON, DEFAULT_SHUTDOWN_TIMEOUT_S, SCHEDULING_POLICIES,
};

impl ServeArgs {
    /// `--scheduling-policy` (checked; default fcfs).
    pub fn scheduling_policy(&self) -> &'static str {
        let wanted = self.specific.scheduling_policy.as_deref();
        SCHEDULING_POLICIES
            .into_iter()
            .find(|p| Some(*p) == wanted)
            .unwrap_or(SCHEDULING_POLICIES[0])
    }

    /// Silence after which a stream gets a `: keep-alive` comment (`None`: never).
    pub fn sse_keep_alive_interval(&self) -> Option<std::time::Duration> {
        self.specific
            .sse_keep_alive_interval
            .map(std::time::Duration::from_secs_f64)
    }

    pub fn max_num_queued_reqs(&self) -> Option<usize> {
        self.specific.max_num_queued_reqs
    }

    pub fn max_num_queued_tokens(&self) -> Option<usize> {
        self.specific.max_num_queued_tokens
    }

    /// How long a request may wait for its first token (`None`: no limit).
    pub fn max_queue_wait(&self) -> Option<std::time::Duration> {
        self.specific
            .max_queue_wait
            .map(std::time::Duration::from_secs_f64)
    }

    pub fn otlp_traces_endpoint(&self) -> Option<&str> {
        self.specific.otlp_traces_endpoint.as_deref()
    }

    pub fn collect_detailed_traces(&self) -> bool {
        self.specific.collect_detailed_traces
    }

    /// The API key: `api_key`, else `$VRS_API_KEY`; empty means none.
    pub fn api_key(&self) -> Option<String> {
        self.specific
            .api_key
            .clone()
            .or_else(|| std::env::var(API_KEY_ENV).ok())
            .filter(|k| !k.is_empty())
    }

    /// Engines `serve` starts (1 unless data parallel).
    pub fn data_parallel_size(&self) -> u16 {
        self.specific.data_parallel_size.unwrap_or(1)
    }

    /// Engines `serve` starts itself (the rest join over tcp://).
    pub fn data_parallel_size_local(&self) -> u16 {
        self.specific
            .data_parallel_size_local
            .unwrap_or_else(|| self.data_parallel_size())
    }

    /// Where remote engines reach the engine sockets (default 127.0.0.1).
    pub fn data_parallel_address(&self) -> &str {
        self.specific
            .data_parallel_address
            .as_deref()
            .unwrap_or(DEFAULT_HOST)
    }

    /// The handshake port remote engines connect to.
    pub fn data_parallel_rpc_port(&self) -> u16 {
        self.specific
            .data_parallel_rpc_port
            .unwrap_or(DEFAULT_DATA_PARALLEL_RPC_PORT)
    }

    pub fn max_request_body(&self) -> usize {
        self.specific
            .max_request_body
            .unwrap_or(DEFAULT_MAX_REQUEST_BODY)
    }

    pub fn request_timeout(&self) -> Option<std::time::Duration> {
        self.specific
            .request_timeout
            .map(std::time::Duration::from_secs_f64)
    }

    pub fn shutdown_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs_f64(
            self.specific
                .shutdown_timeout
                .unwrap_or(DEFAULT_SHUTDOWN_TIMEOUT_S),
        )
    }

    pub fn python_executable(&self) -> &str {
        self.specific
            .python_executable
            .as_deref()
            .unwrap_or(DEFAULT_PYTHON)
    }

    /// The map sent in INIT: `engine_config` as given, with `model` and
    /// `scheduling_policy` filled in when absent.
    pub fn engine_config(&self) -> Map<String, Value> {
        let mut map = self.specific.engine_config.clone().unwrap_or_default();
        map.entry("model")
            .or_insert_with(|| Value::String(self.model.clone()));
        map.entry("scheduling_policy")
            .or_insert_with(|| Value::from(self.scheduling_policy()));
        map
    }
}
