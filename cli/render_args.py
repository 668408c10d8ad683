"""Turning `vrs render` options into the args-json both render services read.

Keys: ``server.args_json.RenderArgs`` (docs/internals.md), every one written. Rust:
`vrs-rs render --args-json`; Python: ``server.lifecycle.render.serve_render`` in this process.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import Enum
from pathlib import Path
from typing import Any

from rich.console import Console

from cli.http_args import HttpOptions
from cli.serve_args import (
    note_trust_remote_code,
    pick_model,
    resolve_model,
    resolve_tokenizer,
)
from server.args_json import RenderArgs, encode


@dataclass
class RenderOptions:
    model: str | None
    host: str
    port: int
    served_model_name: str | None
    max_model_len: int | None
    chat_template: Path | None
    log_level: str
    chat_template_content_format: str = "auto"
    tokenizer: str | None = None
    trust_remote_code: bool = False
    tool_call_parser: str = "auto"
    reasoning_parser: str = "auto"
    http: HttpOptions = field(default_factory=HttpOptions)

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> RenderOptions:
        """From the command's ``locals()``: enums to values, other parameters ignored."""
        values = {f.name: params[f.name] for f in fields(cls) if f.name in params}
        values["model"] = pick_model(params["model"], params.get("model_option"))
        values = {k: v.value if isinstance(v, Enum) else v for k, v in values.items()}
        return cls(**values, http=HttpOptions.from_params(params))


def build_args(options: RenderOptions, console: Console) -> dict[str, Any]:
    """The args-json dict of `vrs-rs render` and the Python render service."""
    model_dir, default_name = resolve_model(options.model, console)
    tokenizer_dir = resolve_tokenizer(options.tokenizer)
    return encode(RenderArgs(
        model=str(model_dir),
        served_model_name=options.served_model_name or default_name,
        host=options.host,
        port=options.port,
        log_level=options.log_level,
        chat_template=str(options.chat_template.resolve()) if options.chat_template else None,
        chat_template_content_format=options.chat_template_content_format,
        tokenizer=str(tokenizer_dir) if tokenizer_dir else None,
        max_model_len=options.max_model_len,
        tool_call_parser=options.tool_call_parser,
        reasoning_parser=options.reasoning_parser,
        http=options.http.to_args(),
    ))


def run_render(options: RenderOptions, frontend: str, console: Console) -> None:
    """Resolve and hand over to the chosen render service (does not return on Rust)."""
    if frontend == "rust":
        from cli.binary import find_rust_frontend
        from cli.launch import exec_rust

        binary = find_rust_frontend()
        args = build_args(options, console)
        _banner(args, "rust", console)
        note_trust_remote_code(options.trust_remote_code, console)
        exec_rust(binary, "render", args)
        return
    from server.lifecycle.render import serve_render

    args = build_args(options, console)
    _banner(args, "python", console)
    note_trust_remote_code(options.trust_remote_code, console)
    raise SystemExit(serve_render(args))


def _banner(args: dict[str, Any], frontend: str, console: Console) -> None:
    console.print(f"[bold]vrs render[/bold] ({frontend}) for [cyan]{args['served_model_name']}"
                  f"[/cyan] on http://{args['host']}:{args['port']} (template + tokenizer only)")
