"""`vrs serve`: an OpenAI-compatible server for MODEL (Rust frontend + Python engine)."""

from __future__ import annotations

from rich.console import Console

from cli import options as o
from cli.serve_args import ServeOptions, run_serve

console = Console(stderr=True)


def serve(
    model: o.Model = None,
    model_option: o.ModelOpt = None,
    tokenizer: o.Tokenizer = None,
    trust_remote_code: o.TrustRemoteCode = False,
    host: o.Host = "127.0.0.1",
    port: o.Port = 8000,
    served_model_name: o.ServedModelName = None,
    mock: o.Mock = False,
    max_model_len: o.MaxModelLen = None,
    log_level: o.LogLevelOpt = o.LogLevel.info,
    shutdown_timeout: o.ShutdownTimeout = 30.0,
    chat_template: o.ChatTemplate = None,
    chat_template_content_format: o.ChatTemplateContentFormat = o.ContentFormat.auto,
    device: o.DeviceOpt = o.Device.auto,
    dtype: o.DTypeOpt = o.DType.auto,
    block_size: o.BlockSize = 16,
    max_num_seqs: o.MaxNumSeqs = 256,
    max_num_batched_tokens: o.MaxNumBatchedTokens = 2048,
    kv_cache_memory: o.KvCacheMemory = None,
    gpu_memory_utilization: o.GpuMemoryUtilization = 0.9,
    enable_prefix_caching: o.EnablePrefixCaching = True,
    seed: o.Seed = 0,
    enforce_eager: o.EnforceEager = False,
    structured_outputs_compile_timeout: o.StructuredOutputsCompileTimeout = 5.0,
    mock_step_delay_ms: o.MockStepDelayMs = 0.0,
    mock_replies: o.MockReplies = None,
    api_key: o.ApiKey = None,
    max_request_body: o.MaxRequestBody = "32MiB",
    max_concurrent_requests: o.MaxConcurrentRequests = None,
    max_batch_prompts: o.MaxBatchPrompts = 256,
    request_timeout: o.RequestTimeout = None,
    tool_call_parser: o.ToolCallParser = "auto",
    reasoning_parser: o.ReasoningParser = "auto",
    data_parallel_size: o.DataParallelSize = 1,
    data_parallel_size_local: o.DataParallelSizeLocal = None,
    data_parallel_address: o.DataParallelAddress = "127.0.0.1",
    data_parallel_rpc_port: o.DataParallelRpcPort = 29550,
    sse_keep_alive_interval: o.SseKeepAliveInterval = None,
    max_num_queued_reqs: o.MaxNumQueuedReqs = None,
    max_num_queued_tokens: o.MaxNumQueuedTokens = None,
    max_queue_wait: o.MaxQueueWait = None,
    otlp_traces_endpoint: o.OtlpTracesEndpoint = None,
    collect_detailed_traces: o.CollectDetailedTraces = None,
    ssl_keyfile: o.SslKeyfile = None,
    ssl_certfile: o.SslCertfile = None,
    ssl_ca_certs: o.SslCaCerts = None,
    ssl_cert_reqs: o.SslCertReqs = 0,
    uds: o.Uds = None,
    allowed_origins: o.AllowedOrigins = '["*"]',
    allowed_methods: o.AllowedMethods = '["*"]',
    allowed_headers: o.AllowedHeaders = '["*"]',
    allow_credentials: o.AllowCredentials = False,
    enable_request_id_headers: o.EnableRequestIdHeaders = False,
    h11_max_incomplete_event_size: o.H11MaxIncompleteEventSize = 65536,
    header_read_timeout: o.HeaderReadTimeout = 10.0,
    http_timeout_keep_alive: o.HttpTimeoutKeepAlive = 5.0,
    max_connections: o.MaxConnections = None,
    headless: o.Headless = False,
    handshake_address: o.HandshakeAddress = None,
    engine_index: o.EngineIndex = 0,
    frontend: o.Frontend = o.FrontendKind.rust,
) -> None:
    """Serve MODEL over an OpenAI-compatible HTTP API.

    The Rust frontend (vrs-rs) binds the port and spawns a headless Python engine;
    --frontend python runs the Python (uvicorn) frontend instead.
    """
    options = ServeOptions.from_params(locals())
    run_serve(options, frontend.value, console)
