"""The options `vrs serve` and `vrs frontend` share, declared once: the signature of
[`server_options`] (types, help and checks from cli/options.py; defaults here).

typer builds a command's options from ``inspect.signature``; [`with_server_options`]
gives a command the signature "these options, then the command's own", so an option
added here is an option of both commands, in the same place of their --help. The command
receives the shared options as keyword arguments (``**shared``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TypeVar

from cli import options as o

Command = TypeVar("Command", bound=Callable[..., None])


def server_options(
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
    scheduling_policy: o.SchedulingPolicyOpt = o.SchedulingPolicy.fcfs,
    runner: o.RunnerOpt = o.Runner.auto,
    convert: o.ConvertOpt = o.Convert.auto,
    model_impl: o.ModelImplOpt = o.ModelImpl.auto,
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
    tensor_parallel_size: o.TensorParallelSize = 1,
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
    enable_responses_store: o.EnableResponsesStore = False,
    responses_store_max_entries: o.ResponsesStoreMaxEntries = 1000,
    enable_tokenizer_info_endpoint: o.EnableTokenizerInfoEndpoint = False,
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
) -> None:
    """The options of `vrs serve` and `vrs frontend`: a declaration, read through
    ``inspect.signature`` by [`with_server_options`]; calling it does nothing."""


def shared_parameters(declaration: Callable[..., None]) -> list[inspect.Parameter]:
    """The parameters of ``declaration``, their annotations evaluated (what typer reads)."""
    return list(inspect.signature(declaration, eval_str=True).parameters.values())


def with_options(declaration: Callable[..., None],
                 own_first: bool = False) -> Callable[[Command], Command]:
    """A decorator giving a command the parameters of ``declaration`` first, then its
    own (all but its ``**shared``, which receives the declared ones when typer calls it);
    ``own_first``: its own first."""
    shared = shared_parameters(declaration)

    def decorate(command: Command) -> Command:
        params = inspect.signature(command, eval_str=True).parameters.values()
        own = [p for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD]
        if len(own) == len(params):
            raise TypeError(f"{command.__name__} must take **shared (the options of "
                            f"{declaration.__name__}, by name)")
        twice = sorted({p.name for p in own} & {p.name for p in shared})
        if twice:
            raise TypeError(f"{command.__name__} declares {', '.join(twice)}, which "
                            f"{declaration.__name__} declares already; drop its own")
        ordered = [*own, *shared] if own_first else [*shared, *own]
        vars(command)["__signature__"] = inspect.Signature(ordered, return_annotation=None)
        return command

    return decorate


with_server_options = with_options(server_options)
