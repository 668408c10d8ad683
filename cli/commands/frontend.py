"""`vrs frontend`: Python binds the sockets and supervises the Rust frontend."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from cli import options as o
from cli.serve_args import ServeOptions

console = Console(stderr=True)


def frontend(
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
    api_server_count: Annotated[int, typer.Option(
        min=1, help="Accepted for vLLM compatibility; values above 1 warn and use 1 "
                    "(vrs-rs is multi-threaded).")] = 1,
) -> None:
    """Serve MODEL with Python in charge of the sockets and processes.

    Python binds the HTTP and ZMQ sockets, starts the engine, then runs vrs-rs on the
    inherited sockets and supervises both.
    """
    options = ServeOptions.from_params(locals())
    from cli.serve_args import run_frontend

    raise typer.Exit(run_frontend(options, api_server_count, console))
