"""Option declarations shared by the commands that start a server (serve, frontend).

Each user-facing flag is declared once here; the commands' signatures use these
aliases, so help text, defaults, validation and completions have one source.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from engine.sizes import parse_size


class Device(StrEnum):
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


class DType(StrEnum):
    auto = "auto"
    float32 = "float32"
    bfloat16 = "bfloat16"
    float16 = "float16"


class LogLevel(StrEnum):
    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"


class ContentFormat(StrEnum):
    auto = "auto"
    string = "string"
    openai = "openai"


class SchedulingPolicy(StrEnum):
    fcfs = "fcfs"
    priority = "priority"


class Runner(StrEnum):
    auto = "auto"
    generate = "generate"
    pooling = "pooling"


class Convert(StrEnum):
    auto = "auto"
    none = "none"
    embed = "embed"
    classify = "classify"
    score = "score"


class ModelImpl(StrEnum):
    auto = "auto"
    vrs = "vrs"
    transformers = "transformers"


class FrontendKind(StrEnum):
    rust = "rust"
    python = "python"


class EngineKind(StrEnum):
    vrs = "vrs"
    vllm = "vllm"


def size_or_none(value: str | None) -> int | None:
    """Parse a memory size option (``2GiB``) or pass None through."""
    if value is None:
        return None
    try:
        return parse_size(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc


Model = Annotated[str | None, typer.Argument(
    help="Model directory (or a hub id already in the local HF cache). "
         "Default: the built-in demo model (tiny, random weights).")]
ModelOpt = Annotated[str | None, typer.Option(
    "--model", help="MODEL as an option (vLLM's spelling); give it or the argument.")]
Tokenizer = Annotated[str | None, typer.Option(
    help="Tokenizer directory (tokenizer.json, tokenizer_config.json) or cached hub id "
         "to use instead of MODEL's. Default: MODEL.")]
TrustRemoteCode = Annotated[bool, typer.Option(
    "--trust-remote-code",
    help="Accepted for vLLM compatibility: vrs never runs code from a model repository, "
         "so models that need it are refused either way.")]
Host = Annotated[str, typer.Option(help="Address to bind the HTTP server to.")]
Port = Annotated[int, typer.Option(min=0, max=65535, help="HTTP port.")]
ServedModelName = Annotated[str | None, typer.Option(
    help="Model name clients send and /v1/models lists. Default: MODEL.")]
Mock = Annotated[bool, typer.Option(
    "--mock", help="Run the mock engine (instant prefill, random tokens): measures the "
                   "frontend alone; only MODEL's tokenizer and config are read.")]
MaxModelLen = Annotated[int | None, typer.Option(
    min=1, help="Context length limit (prompt + output). Default: the model's.")]
LogLevelOpt = Annotated[LogLevel, typer.Option(help="Log verbosity.")]
ShutdownTimeout = Annotated[float, typer.Option(
    min=0, help="Seconds to let in-flight requests finish on SIGINT/SIGTERM.")]
ChatTemplate = Annotated[Path | None, typer.Option(
    exists=True, dir_okay=False, help="Jinja chat template file overriding the model's.")]
ChatTemplateContentFormat = Annotated[ContentFormat, typer.Option(
    help="How a message's content reaches the chat template: string (text parts joined "
         "with newlines), openai (a list of text parts; a string becomes one part) or auto "
         "(openai when the template loops over message content, as vLLM detects it; else "
         "string).")]
DeviceOpt = Annotated[Device, typer.Option(help="Where the engine runs.")]
DTypeOpt = Annotated[DType, typer.Option(
    help="Weight and activation dtype (auto: bfloat16 on CUDA and on CPUs with AMX or "
         "AVX-512 BF16, else float32).")]
BlockSize = Annotated[int, typer.Option(help="Tokens per KV-cache block.")]
MaxNumSeqs = Annotated[int, typer.Option(min=1, help="Most requests in one engine step.")]
SchedulingPolicyOpt = Annotated[SchedulingPolicy, typer.Option(
    help="vLLM's: fcfs (first come, first served) or priority (requests with a lower "
         "`priority` field first, then by arrival; the lowest-priority running request is "
         "preempted first). With fcfs a non-zero `priority` is refused.")]
RunnerOpt = Annotated[Runner, typer.Option(
    help="vLLM's: what the model is served for. generate: the chat / completions routes. "
         "pooling: prefill only, the /v1/embeddings, /pooling, /classify, /score and "
         "/rerank routes. auto: pooling for an encoder-only or *ForSequenceClassification "
         "checkpoint, or with a --convert task; else generate.")]
ConvertOpt = Annotated[Convert, typer.Option(
    help="vLLM's: the task a pooling model serves. embed: sentence embeddings (its "
         "sentence-transformers pooling config, else last token for a decoder, CLS for an "
         "encoder). classify: its classification head. score: a cross-encoder, or a "
         "decoder's yes/no reranker (Qwen3-Reranker). auto: read from the checkpoint; "
         "none: no conversion.")]
ModelImplOpt = Annotated[ModelImpl, typer.Option(
    help="vLLM's: which implementation runs the model. vrs: vrs's own decoder (Llama, "
         "Qwen2, Qwen3). transformers: the model class transformers ships, on vrs's paged "
         "KV cache and attention (any text decoder-only causal LM; never code from the "
         "model repository). auto: vrs's decoder where it has the family, else "
         "transformers.")]
MaxNumBatchedTokens = Annotated[int, typer.Option(
    min=1, help="Token budget of one engine step (long prompts are chunked).")]
KvCacheMemory = Annotated[str | None, typer.Option(
    help="Memory for K/V, e.g. 2GiB (on the CPU half holds the decoding sequences' resident "
    "rows). Default: sized for the device.")]
GpuMemoryUtilization = Annotated[float, typer.Option(
    min=0.01, max=1.0, help="On CUDA: fraction of GPU memory the engine may use.")]
EnablePrefixCaching = Annotated[bool, typer.Option(
    "--enable-prefix-caching/--no-enable-prefix-caching",
    help="Reuse KV blocks of shared prompt prefixes.")]
Seed = Annotated[int, typer.Option(help="Engine random seed.")]
EnforceEager = Annotated[bool, typer.Option(
    "--enforce-eager",
    help="Never compile (torch.compile), even with VRS_COMPILE=on. By default the decoder "
         "runs eager on CPU and CUDA (see docs/internals.md, 'Compiled decoder').")]
StructuredOutputsCompileTimeout = Annotated[float, typer.Option(
    min=0.001,
    help="Seconds a structured-output grammar (JSON schema, regex, choice, grammar) may "
         "take to compile; a request whose grammar takes longer gets a 400.")]
MockStepDelayMs = Annotated[float, typer.Option(
    min=0, help="Mock engine: sleep per step, to imitate a model's step time.")]
Frontend = Annotated[FrontendKind, typer.Option(
    help="rust: vrs-rs serves HTTP (default). python: the Python (uvicorn) frontend, "
         "the baseline.")]
Engine = Annotated[EngineKind, typer.Option(
    help="Whose engine vrs-rs fronts. vrs: vrs's own (default). vllm: vLLM 0.33's "
         "engine-core processes over vLLM's wire: vrs-rs starts `PY -m "
         "vllm.entrypoints.cli.main serve MODEL --headless ...` (vLLM engine flags after "
         "`--`), or with --data-parallel-size-local 0 waits for remote `vllm serve "
         "--headless` engines at --data-parallel-address/--data-parallel-rpc-port.")]
VllmPython = Annotated[str | None, typer.Option(
    help="--engine vllm: the interpreter where vllm is installed. Default: this "
         "interpreter if it has vllm, else python3 on PATH if it has.")]
VllmEngineCommand = Annotated[str | None, typer.Option(
    help="--engine vllm: a command (one shell-quoted string) run instead of `PY -m "
         "vllm.entrypoints.cli.main serve MODEL --headless`, e.g. a mock vLLM engine; it "
         "gets the same --data-parallel-* flags and engine flags.")]
ApiKey = Annotated[str | None, typer.Option(
    envvar="VRS_API_KEY", show_envvar=True,
    help="Require `Authorization: Bearer KEY` (or `x-api-key: KEY`) on /v1/* and "
         "/invocations (401 without it). Passed to the frontend through the environment, "
         "never on a command line.")]
MaxRequestBody = Annotated[str, typer.Option(
    help="Largest request body, e.g. 32MiB (413 above it).")]
MaxConcurrentRequests = Annotated[int | None, typer.Option(
    min=1, help="Generation requests in flight at most; more get 429 with Retry-After. "
                "Default: no limit.")]
MaxBatchPrompts = Annotated[int, typer.Option(
    min=1, help="Prompts one /v1/completions request may batch in `prompt` at most; more "
                "get 400.")]
RequestTimeout = Annotated[float | None, typer.Option(
    min=0.001, help="Seconds a generation request may take; then it is aborted (504, or an "
                    "error event when streaming). Default: no limit.")]
ToolCallParser = Annotated[str, typer.Option(
    help="Tool-call format: auto (from the chat template's markers, then config.json's "
         "model_type; logged at start-up), none, demo, hermes, llama3_json, mistral, "
         "deepseek_v3, qwen3_coder, pythonic or granite.")]
ReasoningParser = Annotated[str, typer.Option(
    help="Split reasoning out of chat answers into reasoning_content: auto (from the chat "
         "template: [THINK] mistral, <think> qwen3 or deepseek_r1, 'thought process' "
         "granite; logged at start-up), none, deepseek_r1, qwen3, granite or mistral.")]
TensorParallelSize = Annotated[int, typer.Option(
    "--tensor-parallel-size", "-tp", min=1, max=64,
    help="vLLM's: processes that each hold a slice of the model (its attention heads and "
         "MLP split column- and row-parallel, all-reduced through torch.distributed: gloo "
         "on the CPU, NCCL on CUDA device 0..N-1), per engine: with --data-parallel-size "
         "D there are D x N processes. Each rank's weight and KV memory is logged at "
         "start-up and reported by GET /load.")]
DataParallelSize = Annotated[int, typer.Option(
    min=1, max=65535,
    help="Engines to run (data parallel, engine index 0..N-1); each request goes to the "
         "least-loaded engine.")]
DataParallelSizeLocal = Annotated[int | None, typer.Option(
    min=0, max=65535,
    help="Engines of --data-parallel-size started here (default: all); engines K..N-1 join "
         "over tcp:// with `vrs serve MODEL --headless --handshake-address "
         "tcp://ADDRESS:RPC_PORT --engine-index I`. Rust frontend only.")]
DataParallelAddress = Annotated[str, typer.Option(
    help="Address the engine sockets bind to, and remote engines connect to, when engines "
         "join from other hosts.")]
DataParallelRpcPort = Annotated[int, typer.Option(
    min=1, max=65535, help="Handshake port remote engines connect to.")]
Headless = Annotated[bool, typer.Option(
    "--headless", help="Start only an engine, which joins the frontend at "
                       "--handshake-address (another host's `vrs serve "
                       "--data-parallel-size-local`).")]
HandshakeAddress = Annotated[str | None, typer.Option(
    help="With --headless: the frontend's handshake address, tcp://HOST:PORT.")]
EngineIndex = Annotated[int, typer.Option(
    min=0, max=65535, help="With --headless: this engine's index in the deployment.")]
MockReplies = Annotated[Path | None, typer.Option(
    exists=True, dir_okay=False,
    help="Mock engine: a JSON file [{\"when\": TEXT, \"reply\": TEXT}, ...]; a prompt "
         "containing `when` is answered with `reply`, then EOS (for testing parsers); "
         "optional \"cuts\": [OFFSET, ...] break the streamed pieces there.")]

# --------------------------------------------------------------- the production edge (#17)
# TLS, Unix socket, CORS, request ids and connection limits: `serve`, `frontend`, `render`.
SslKeyfile = Annotated[Path | None, typer.Option(
    dir_okay=False, help="TLS private key (PEM). Default: the key in --ssl-certfile.")]
SslCertfile = Annotated[Path | None, typer.Option(
    dir_okay=False, help="TLS certificate chain (PEM): serve HTTPS instead of HTTP.")]
SslCaCerts = Annotated[Path | None, typer.Option(
    dir_okay=False, help="CA certificates (PEM) that client certificates must chain to "
                         "(mTLS, with --ssl-cert-reqs 1 or 2).")]
SslCertReqs = Annotated[int, typer.Option(
    min=0, max=2, help="Client certificates: 0 not asked for, 1 optional (verified when "
                       "sent), 2 required (mTLS). Python's ssl.CERT_* values.")]
Uds = Annotated[Path | None, typer.Option(
    dir_okay=False, help="Serve HTTP on this Unix domain socket instead of --host/--port "
                         "(a stale socket file is replaced; removed at exit).")]
AllowedOrigins = Annotated[str, typer.Option(
    help='CORS: JSON list of origins allowed to call the API, e.g. \'["https://app.example"]\' '
         '("*": any).')]
AllowedMethods = Annotated[str, typer.Option(help="CORS: JSON list of allowed methods.")]
AllowedHeaders = Annotated[str, typer.Option(help="CORS: JSON list of allowed request headers.")]
AllowCredentials = Annotated[bool, typer.Option(
    "--allow-credentials", help="CORS: allow credentials (cookies, Authorization).")]
EnableTokenizerInfoEndpoint = Annotated[bool, typer.Option(
    "--enable-tokenizer-info-endpoint",
    help="Serve GET /tokenizer_info (vLLM's flag): the tokenizer's configuration and the chat "
         "template. Off by default, as in vLLM: it shows the template and the tokenizer's "
         "settings to any client.")]
EnableRequestIdHeaders = Annotated[bool, typer.Option(
    "--enable-request-id-headers",
    help="Use the client's X-Request-Id (at most 128 visible ASCII characters; else a fresh "
         "id) in logs and the engine, and echo the id in an X-Request-Id response header.")]
H11MaxIncompleteEventSize = Annotated[int, typer.Option(
    min=1024, help="Largest request head (request line + headers) in bytes; a larger one "
                   "gets 431.")]
HeaderReadTimeout = Annotated[float, typer.Option(
    min=0.001, help="Seconds a client may take to send a request's headers; then the "
                    "connection is closed (slow clients never hold the server).")]
HttpTimeoutKeepAlive = Annotated[float, typer.Option(
    min=0.001, help="Seconds an idle keep-alive connection stays open.")]
MaxConnections = Annotated[int | None, typer.Option(
    min=1, help="Open HTTP connections at most; more wait in the kernel's backlog. "
                "Default: no limit.")]

# ------------------------------------------------------ streams, queue and traces (#17)
# `serve` and `frontend` only.
SseKeepAliveInterval = Annotated[float | None, typer.Option(
    min=0.001, help="Seconds of silence after which a stream gets an SSE comment frame "
                    "(`: keep-alive`), e.g. while queued or prefilling. Default: off.")]
MaxNumQueuedReqs = Annotated[int | None, typer.Option(
    min=0, help="Requests waiting for their first token at most; a request beyond it gets "
                "503 with Retry-After. Default: no limit.")]
MaxNumQueuedTokens = Annotated[int | None, typer.Option(
    min=0, help="Prompt tokens of the requests waiting for their first token at most; a "
                "request beyond it gets 503 with Retry-After. Default: no limit.")]
MaxQueueWait = Annotated[float | None, typer.Option(
    min=0.001, help="Seconds a request may wait for its first token; then it gets 503 (or "
                    "an SSE error event) and is aborted in the engine. Default: no limit.")]
OtlpTracesEndpoint = Annotated[str | None, typer.Option(
    help="Export one OpenTelemetry span per request over OTLP/HTTP to this URL (e.g. "
         "http://localhost:4318; https:// checks the collector against the system's CAs or "
         "the file in OTEL_EXPORTER_OTLP_CERTIFICATE). Default: no traces.")]
EnableResponsesStore = Annotated[bool, typer.Option(
    "--enable-responses-store",
    help="Keep Responses API responses in memory (store, previous_response_id, background, "
         "GET / cancel / DELETE /v1/responses/ID), as vLLM's "
         "VLLM_ENABLE_RESPONSES_API_STORE=1 (also honoured). Default: off (stateless).")]
ResponsesStoreMaxEntries = Annotated[int, typer.Option(
    min=1, help="Responses kept at most with --enable-responses-store; the least recently "
                "used is dropped first.")]
CollectDetailedTraces = Annotated[str | None, typer.Option(
    help="Comma-separated: all, model, worker (vLLM's values; each adds the engine's "
         "per-request queue, prefill and decode times to the span). Needs "
         "--otlp-traces-endpoint.")]
