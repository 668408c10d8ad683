"""`vrs render`: template + tokenize only (no engine, no weights), over HTTP."""

from __future__ import annotations

from rich.console import Console

from cli import options as o
from cli.render_args import RenderOptions, run_render

console = Console(stderr=True)


def render(
    model: o.Model = None,
    model_option: o.ModelOpt = None,
    tokenizer: o.Tokenizer = None,
    trust_remote_code: o.TrustRemoteCode = False,
    host: o.Host = "127.0.0.1",
    port: o.Port = 8000,
    served_model_name: o.ServedModelName = None,
    max_model_len: o.MaxModelLen = None,
    chat_template: o.ChatTemplate = None,
    tool_call_parser: o.ToolCallParser = "auto",
    reasoning_parser: o.ReasoningParser = "auto",
    chat_template_content_format: o.ChatTemplateContentFormat = o.ContentFormat.auto,
    log_level: o.LogLevelOpt = o.LogLevel.info,
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
    frontend: o.Frontend = o.FrontendKind.rust,
) -> None:
    """Serve MODEL's chat template and tokenizer only (no engine, no weights).

    Answers with the prompt, token ids and sampling parameters the engine would
    receive, from the tokenizer and config files alone. --tool-call-parser decides the
    prefill of forced tool calls (a template without tool markers renders tools with it).

    Routes: POST /v1/chat/completions/render, POST /v1/completions/render,
    POST /v1/responses/render, POST /v1/messages/render, GET /v1/models, GET /health.
    """
    run_render(RenderOptions.from_params(locals()), frontend.value, console)
