"""``serve_render(args)``: the engine-less render service (``vrs render --frontend python``):
the model's tokenizer and config files loaded (no weights, no engine), its routes
(``server/routes/render.py``) served until SIGINT/SIGTERM (exit 0); a model that cannot be
loaded or a port that cannot be bound exits 1, bad arguments 2. Rust:
rust/server/src/lifecycle/render.rs. Behaviour: docs/api.md, "Routes"; the service:
docs/internals.md, "render (typer -> vrs-rs render)".
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from server.args import DEFAULT_HOST, DEFAULT_PORT, parse_render_args
from server.edge.listener import ListenError, bind_listener, ssl_context
from server.edge.middleware import for_http
from server.lifecycle import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    checked_args,
    http_server,
    setup_logging,
    text_executor,
)
from server.parsers.select import choose, model_config
from server.routes import RenderApp
from server.state import Limits, RenderState
from server.text import ModelText, TextError

logger = logging.getLogger("vrs.render")

DEFAULT_MAX_POSITION_EMBEDDINGS = 4096  # as engine/mock/engine.py


def model_limits(model_dir: str, max_model_len: int | None, tokenizer_vocab: int) -> Limits:
    """vocab size and context length of ``model_dir`` (raises TextError)."""
    path = Path(model_dir) / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TextError(f"cannot read {path}: {exc}") from exc
    if not isinstance(config, dict):
        raise TextError(f"{path} is not a JSON object")
    vocab = config.get("vocab_size") or tokenizer_vocab
    native = config.get("max_position_embeddings") or DEFAULT_MAX_POSITION_EMBEDDINGS
    if not isinstance(vocab, int) or not isinstance(native, int):
        raise TextError(f"{path}: vocab_size and max_position_embeddings must be integers")
    return Limits(vocab_size=vocab, max_model_len=max_model_len or native)


def serve_render(args: dict[str, Any]) -> int:
    """Run the render service until SIGINT/SIGTERM; returns the process exit code."""
    config = checked_args("render", parse_render_args, args)
    if config is None:
        return EXIT_USAGE
    level = (config.log_level or "info").lower()
    setup_logging(level)
    try:
        text = ModelText(config.tokenizer or config.model, config.chat_template,
                         config.chat_template_content_format or "auto")
        limits = model_limits(config.model, config.max_model_len, text.vocab_size)
    except TextError as exc:
        logger.error("%s", exc)
        return EXIT_FAILURE
    host = config.host or DEFAULT_HOST
    port = DEFAULT_PORT if config.port is None else config.port
    try:
        tls = ssl_context(config.http)
        listener = bind_listener(config.http, host, port)
    except ListenError as exc:
        logger.error("%s", exc)
        return EXIT_FAILURE
    executor = text_executor()
    name = config.served_model_name or config.model
    parsers = choose(config.tool_call_parser, config.reasoning_parser, text.chat_template_source,
                     model_config(config.model))
    app = RenderApp(RenderState(text, name, config.model, limits, executor, parsers))
    logger.info("render service for %s (max_model_len %d%s) on %s", name,
                limits.max_model_len, "" if text.has_chat_template else "; no chat template",
                listener.address())
    logger.info("%s", text.content_format_line())
    server = http_server(for_http(app, config.http), level, 5, config.http, tls)
    import uvloop

    try:
        uvloop.run(server.serve(sockets=[listener.sock]))
    finally:
        listener.close()
        executor.shutdown(wait=False, cancel_futures=True)
    return EXIT_OK
