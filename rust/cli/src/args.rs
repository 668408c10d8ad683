//! The flags of `vrs-rs serve` and `vrs-rs render`, mapped onto the server's settings
//! ([`vrs_server::args`], the `--args-json` contract of docs/internals.md). `--args-json`
//! (what the `vrs` app passes) and the individual flags (standalone use) are exclusive.

use clap::Args;
use serde_json::{Map, Value};
use vrs_server::args::{
    CommandArgs, HttpArgs, RenderArgs, RenderSpecific, ServeArgs, ServeSpecific, Specific,
};

/// The flags `serve` and `render` share (keys of [`CommandArgs`]).
#[derive(Debug, Args)]
pub struct CommonCli {
    /// Model directory (HF layout: config.json, tokenizer.json, tokenizer_config.json;
    /// `render` reads no weights).
    #[arg(required_unless_present = "args_json")]
    pub model: Option<String>,

    /// Address to bind the HTTP server to.
    #[arg(long)]
    pub host: Option<String>,

    /// HTTP port (0 picks a free one; the log line "serving ... on http://" tells which).
    #[arg(long)]
    pub port: Option<u16>,

    /// Model name reported by /v1/models and accepted in requests (default: MODEL).
    #[arg(long)]
    pub served_model_name: Option<String>,

    /// debug, info, warning or error.
    #[arg(long)]
    pub log_level: Option<String>,

    /// A chat template file overriding the model's.
    #[arg(long)]
    pub chat_template: Option<String>,

    /// A tokenizer directory (tokenizer.json, tokenizer_config.json) used instead of
    /// MODEL's.
    #[arg(long)]
    pub tokenizer: Option<String>,

    /// How message content reaches the chat template: string (text parts joined with
    /// newlines), openai (a list of text parts) or auto (openai when the template loops
    /// over message content; default).
    #[arg(long, value_name = "FORMAT")]
    pub chat_template_content_format: Option<String>,
}

impl CommonCli {
    /// The settings of these flags with the command's own (`specific`), checked.
    pub fn into_args<T: Specific>(self, specific: T) -> Result<CommandArgs<T>, String> {
        let args = CommandArgs {
            model: self.model.ok_or("MODEL is required")?,
            served_model_name: self.served_model_name,
            host: self.host,
            port: self.port,
            log_level: self.log_level,
            chat_template: self.chat_template,
            tokenizer: self.tokenizer,
            chat_template_content_format: self.chat_template_content_format,
            http: HttpArgs::default(),
            specific,
        };
        args.check()?;
        Ok(args)
    }
}

/// Flags of `vrs-rs serve`. `--args-json` (what the `vrs` app passes) and the individual
/// flags (standalone use) are mutually exclusive.
#[derive(Debug, Args)]
pub struct ServeCli {
    /// Every setting as one JSON object (keys: model, served_model_name, host, port,
    /// log_level, shutdown_timeout, python_executable, chat_template,
    /// chat_template_content_format, tokenizer, engine_config,
    /// api_key, max_request_body, max_concurrent_requests, request_timeout,
    /// tool_call_parser, reasoning_parser, scheduling_policy, data_parallel_size,
    /// data_parallel_size_local, data_parallel_address, data_parallel_rpc_port,
    /// max_batch_prompts, sse_keep_alive_interval, max_num_queued_reqs,
    /// max_num_queued_tokens, max_queue_wait, otlp_traces_endpoint,
    /// collect_detailed_traces, enable_responses_store, responses_store_max_entries,
    /// enable_tokenizer_info_endpoint, engine, vllm_python, vllm_engine_command,
    /// vllm_engine_args, and `http` (TLS, Unix socket, CORS, request ids, connection
    /// limits: only here); see docs/internals.md).
    #[arg(long, value_name = "JSON", conflicts_with_all = [
        "model", "host", "port", "served_model_name", "log_level", "shutdown_timeout",
        "python_executable", "chat_template", "chat_template_content_format", "tokenizer", "mock", "max_model_len", "engine_config",
        "api_key", "max_request_body", "max_concurrent_requests", "request_timeout",
        "tool_call_parser", "reasoning_parser", "scheduling_policy", "data_parallel_size",
        "data_parallel_size_local", "data_parallel_address", "data_parallel_rpc_port",
        "max_batch_prompts", "engine", "vllm_python", "vllm_engine_command",
        "vllm_engine_args",
    ])]
    pub args_json: Option<String>,

    #[command(flatten)]
    pub common: CommonCli,

    /// Seconds to let in-flight requests finish after SIGINT/SIGTERM.
    #[arg(long)]
    pub shutdown_timeout: Option<f64>,

    /// Interpreter that runs `python -m engine --headless`.
    #[arg(long)]
    pub python_executable: Option<String>,

    /// Run the mock engine (random tokens, no weights).
    #[arg(long)]
    pub mock: bool,

    /// Longest prompt + output in tokens (default: the model's).
    #[arg(long)]
    pub max_model_len: Option<u64>,

    /// Extra engine settings as a JSON object (see engine/config.py), merged into the
    /// engine config.
    #[arg(long, value_name = "JSON")]
    pub engine_config: Option<String>,

    /// Require `Authorization: Bearer KEY` (or `x-api-key: KEY`) on /v1/* (default:
    /// $VRS_API_KEY, else none).
    #[arg(long, value_name = "KEY")]
    pub api_key: Option<String>,

    /// Largest request body in bytes (413 above it).
    #[arg(long, value_name = "BYTES")]
    pub max_request_body: Option<usize>,

    /// Generation requests in flight at most (429 with Retry-After above it).
    #[arg(long, value_name = "N")]
    pub max_concurrent_requests: Option<usize>,

    /// Seconds a generation request may take (504, or an SSE error event, after it).
    #[arg(long, value_name = "SECONDS")]
    pub request_timeout: Option<f64>,

    /// Tool-call format: auto (default: from the chat template, then config.json's
    /// model_type), none, demo, hermes, llama3_json, mistral, deepseek_v3, qwen3_coder,
    /// pythonic or granite.
    #[arg(long, value_name = "NAME")]
    pub tool_call_parser: Option<String>,

    /// Split reasoning into reasoning_content: auto (default: from the chat template),
    /// none, deepseek_r1, qwen3, granite or mistral.
    #[arg(long, value_name = "NAME")]
    pub reasoning_parser: Option<String>,

    /// Engines to start (data parallel; requests go to the least loaded).
    #[arg(long, value_name = "N")]
    pub data_parallel_size: Option<u16>,

    /// Engines of --data-parallel-size started here (default: all); the others join
    /// over tcp:// (`vrs serve --headless --handshake-address tcp://ADDRESS:PORT`).
    #[arg(long, value_name = "K")]
    pub data_parallel_size_local: Option<u16>,

    /// Address the engine sockets bind to when engines join from elsewhere.
    #[arg(long, value_name = "HOST")]
    pub data_parallel_address: Option<String>,

    /// Handshake port remote engines connect to.
    #[arg(long, value_name = "PORT")]
    pub data_parallel_rpc_port: Option<u16>,

    /// Most prompts in one /v1/completions request (400 above it; default 256).
    #[arg(long, value_name = "N")]
    pub max_batch_prompts: Option<usize>,

    /// fcfs or priority: the engine's queue order (vLLM's; default fcfs).
    #[arg(long, value_name = "POLICY")]
    pub scheduling_policy: Option<String>,

    /// Whose engine to front: vrs (default) or vllm (vLLM 0.33's engine-core processes:
    /// `PY -m vllm.entrypoints.cli.main serve MODEL --headless ...` started here, or
    /// remote ones with --data-parallel-size-local 0).
    #[arg(long, value_name = "ENGINE")]
    pub engine: Option<String>,

    /// Interpreter where vllm is installed, for --engine vllm (default: python3).
    #[arg(long, value_name = "PY")]
    pub vllm_python: Option<String>,

    /// A command (one shell-quoted string) run instead of `PY -m
    /// vllm.entrypoints.cli.main serve MODEL --headless`, e.g. a mock vLLM engine; it gets
    /// the same --data-parallel-* flags and engine args.
    #[arg(long, value_name = "COMMAND")]
    pub vllm_engine_command: Option<String>,

    /// vLLM engine arguments (after `--`), passed to vLLM's headless engine unchanged.
    #[arg(last = true, value_name = "VLLM_ENGINE_ARGS")]
    pub vllm_engine_args: Vec<String>,
}

/// `--vllm-engine-command`'s words.
fn engine_command(text: Option<&str>) -> Result<Option<Vec<String>>, String> {
    let Some(text) = text else {
        return Ok(None);
    };
    match shlex::split(text) {
        Some(words) if !words.is_empty() => Ok(Some(words)),
        _ => Err(format!(
            "--vllm-engine-command {text:?}: expected a command line (quotes balanced)"
        )),
    }
}

/// The `serve` settings of the standalone flags (or of `--args-json` when given).
pub fn serve_args(mut cli: ServeCli) -> Result<ServeArgs, String> {
    if let Some(text) = &cli.args_json {
        return ServeArgs::from_json(text);
    }
    let (engine_config, vllm_engine_args) = if cli.engine.as_deref() == Some("vllm") {
        (None, vllm_engine_args(&mut cli)?)
    } else {
        (Some(vrs_engine_config(&cli)?), None)
    };
    let specific = ServeSpecific {
        shutdown_timeout: cli.shutdown_timeout,
        python_executable: cli.python_executable,
        engine_config,
        api_key: cli.api_key,
        max_request_body: cli.max_request_body,
        max_concurrent_requests: cli.max_concurrent_requests,
        request_timeout: cli.request_timeout,
        tool_call_parser: cli.tool_call_parser,
        reasoning_parser: cli.reasoning_parser,
        scheduling_policy: cli.scheduling_policy,
        data_parallel_size: cli.data_parallel_size,
        data_parallel_size_local: cli.data_parallel_size_local,
        data_parallel_address: cli.data_parallel_address,
        data_parallel_rpc_port: cli.data_parallel_rpc_port,
        max_batch_prompts: cli.max_batch_prompts,
        sse_keep_alive_interval: None,
        max_num_queued_reqs: None,
        max_num_queued_tokens: None,
        max_queue_wait: None,
        otlp_traces_endpoint: None,
        collect_detailed_traces: false,
        enable_responses_store: false,
        responses_store_max_entries: None,
        enable_tokenizer_info_endpoint: false,
        engine: cli.engine,
        vllm_python: cli.vllm_python,
        vllm_engine_command: engine_command(cli.vllm_engine_command.as_deref())?,
        vllm_engine_args,
    };
    cli.common.into_args(specific)
}

/// The engine config of vrs's engine, from `--engine-config` and the engine flags.
fn vrs_engine_config(cli: &ServeCli) -> Result<Map<String, Value>, String> {
    let model = cli.common.model.as_deref().ok_or("MODEL is required")?;
    let mut engine_config = match &cli.engine_config {
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => map,
            Ok(_) => return Err("--engine-config must be a JSON object".into()),
            Err(e) => return Err(format!("invalid --engine-config: {e}")),
        },
        None => Map::new(),
    };
    engine_config.insert("model".into(), Value::String(model.to_owned()));
    if cli.mock {
        engine_config.insert("mock".into(), Value::Bool(true));
    }
    if let Some(len) = cli.max_model_len {
        engine_config.insert("max_model_len".into(), Value::from(len));
    }
    if let Some(name) = &cli.common.served_model_name {
        engine_config.insert("served_model_name".into(), Value::String(name.clone()));
    }
    if let Some(level) = &cli.common.log_level {
        engine_config.insert("log_level".into(), Value::String(level.clone()));
    }
    Ok(engine_config)
}

/// `--engine vllm`: vLLM's engine arguments (after `--`), with `--max-model-len` in front
/// (forwarded, as `vllm-rs serve` does); the flags of vrs's own engine are refused.
fn vllm_engine_args(cli: &mut ServeCli) -> Result<Option<Vec<String>>, String> {
    for (flag, given) in [
        ("--mock", cli.mock),
        ("--engine-config", cli.engine_config.is_some()),
        ("--python-executable", cli.python_executable.is_some()),
    ] {
        if given {
            return Err(format!(
                "{flag} is for vrs's engine; with --engine vllm pass vLLM engine flags after \
                 `--` (a stand-in engine: --vllm-engine-command)"
            ));
        }
    }
    let mut args = Vec::new();
    if let Some(len) = cli.max_model_len {
        args.extend(["--max-model-len".to_owned(), len.to_string()]);
    }
    args.append(&mut cli.vllm_engine_args);
    Ok((!args.is_empty()).then_some(args))
}

/// Flags of `vrs-rs render`; `--args-json` and the individual flags are exclusive.
#[derive(Debug, Args)]
pub struct RenderCli {
    /// Every setting as one JSON object (keys: model, served_model_name, host, port,
    /// log_level, chat_template, chat_template_content_format, tokenizer, max_model_len,
    /// tool_call_parser, reasoning_parser, and `http` (TLS, Unix socket, CORS, request
    /// ids, connection limits: only here)).
    #[arg(long, value_name = "JSON", conflicts_with_all = [
        "model", "host", "port", "served_model_name", "log_level", "chat_template",
        "chat_template_content_format", "tokenizer", "max_model_len", "tool_call_parser",
        "reasoning_parser",
    ])]
    pub args_json: Option<String>,

    #[command(flatten)]
    pub common: CommonCli,

    /// Longest prompt + output in tokens (default: config.json's max_position_embeddings).
    #[arg(long)]
    pub max_model_len: Option<u64>,

    /// Tool-call format the forced-call prefill follows: auto (default: from the chat
    /// template, then config.json), none, demo, hermes, llama3_json, mistral,
    /// deepseek_v3, qwen3_coder, pythonic or granite.
    #[arg(long, value_name = "NAME")]
    pub tool_call_parser: Option<String>,

    /// Reasoning format: auto (default: from the chat template), none, deepseek_r1,
    /// qwen3, granite or mistral.
    #[arg(long, value_name = "NAME")]
    pub reasoning_parser: Option<String>,
}

/// The `render` settings of the standalone flags (or of `--args-json` when given).
pub fn render_args(cli: RenderCli) -> Result<RenderArgs, String> {
    if let Some(text) = &cli.args_json {
        return RenderArgs::from_json(text);
    }
    let specific = RenderSpecific {
        max_model_len: cli.max_model_len,
        tool_call_parser: cli.tool_call_parser,
        reasoning_parser: cli.reasoning_parser,
    };
    cli.common.into_args(specific)
}

#[cfg(test)]
mod tests;
