"""How `vrs serve`, `vrs frontend` and `vrs render` take MODEL: the argument or vLLM's
`--model` (both given must agree), `--tokenizer`, `--trust-remote-code`, and what a model
that is neither a directory nor in the local Hugging Face cache says. Real CLI
subprocesses; the Hugging Face cache is an empty temporary one, offline."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = ["serve", "frontend", "render"]


def run_vrs(*args: str, hf_home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200", "PYTHONPATH": str(ROOT), "HF_HOME": str(hf_home),
           "HF_HUB_OFFLINE": "1", "VRS_RUST_FRONTEND_PATH": sys.executable}
    return subprocess.run([sys.executable, "-c", "from cli.main import main; main()", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)


@pytest.fixture
def demo_copy(tmp_path: Path) -> Path:
    from engine.mock.demo_model import ensure_demo_model

    copy = tmp_path / "model"
    shutil.copytree(ensure_demo_model(), copy)
    return copy


@pytest.mark.parametrize("command", COMMANDS)
def test_model_argument_and_option_must_agree(command: str, tmp_path: Path) -> None:
    result = run_vrs(command, "org/one", "--model", "org/two", hf_home=tmp_path)
    assert result.returncode == 2
    message = " ".join(result.stderr.split())
    assert "--model" in message and "differ" in message
    assert "org/one" in message and "org/two" in message


@pytest.mark.parametrize("command", COMMANDS)
def test_missing_hub_model_says_how_to_get_it(command: str, tmp_path: Path) -> None:
    for args in (("acme/not-a-model",), ("--model", "acme/not-a-model")):
        result = run_vrs(command, *args, "--port", "0", hf_home=tmp_path)
        assert result.returncode == 1
        message = " ".join(result.stderr.split())
        assert "`hf download acme/not-a-model`" in message
        assert "local model directory" in message
        assert "Traceback" not in result.stderr


def test_missing_local_path_is_no_such_directory(tmp_path: Path) -> None:
    result = run_vrs("serve", str(tmp_path / "nowhere" / "model"), hf_home=tmp_path)
    assert result.returncode == 1
    assert "no such directory" in result.stderr
    assert "hf download" not in result.stderr


def test_missing_tokenizer_says_how_to_get_it(demo_copy: Path, tmp_path: Path) -> None:
    result = run_vrs("render", str(demo_copy), "--tokenizer", "acme/no-tokenizer",
                     hf_home=tmp_path)
    assert result.returncode == 1
    message = " ".join(result.stderr.split())
    assert "--tokenizer 'acme/no-tokenizer'" in message
    assert "`hf download acme/no-tokenizer`" in message


def test_tokenizer_dir_needs_tokenizer_json(demo_copy: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run_vrs("serve", str(demo_copy), "--mock", "--tokenizer", str(empty),
                     hf_home=tmp_path)
    assert result.returncode == 1
    assert "has no tokenizer.json" in result.stderr


def test_model_option_and_tokenizer_reach_the_args_json(demo_copy: Path,
                                                        tmp_path: Path) -> None:
    """`--model` and `--tokenizer` end up as the args-json's model and tokenizer keys, the
    same ones with the argument; `--trust-remote-code` adds a note and nothing else."""
    from rich.console import Console

    from cli.render_args import RenderOptions
    from cli.render_args import build_args as render_args
    from cli.serve_args import ServeOptions, build_args

    console = Console(stderr=True)
    base = {"host": "127.0.0.1", "port": 0, "served_model_name": None, "mock": True,
            "max_model_len": None, "log_level": "info", "shutdown_timeout": 1.0,
            "chat_template": None, "device": "auto", "dtype": "auto", "block_size": 16,
            "max_num_seqs": 8, "max_num_batched_tokens": 256, "kv_cache_memory": None,
            "gpu_memory_utilization": 0.9, "enable_prefix_caching": True, "seed": 0,
            "mock_step_delay_ms": 0.0, "trust_remote_code": True}
    by_option = build_args(ServeOptions.from_params(
        {**base, "model": None, "model_option": str(demo_copy),
         "tokenizer": str(demo_copy)}), console)
    by_argument = build_args(ServeOptions.from_params(
        {**base, "model": str(demo_copy), "model_option": None, "tokenizer": None}), console)
    assert by_option["model"] == by_argument["model"] == str(demo_copy.resolve())
    assert by_option["tokenizer"] == str(demo_copy.resolve())
    assert by_argument["tokenizer"] is None
    render = render_args(RenderOptions.from_params(
        {**base, "model": str(demo_copy), "model_option": str(demo_copy),
         "tokenizer": str(demo_copy)}), console)
    assert render["tokenizer"] == str(demo_copy.resolve())
    assert json.loads(json.dumps(render)) == render


def test_trust_remote_code_is_accepted_with_a_note(demo_copy: Path, tmp_path: Path) -> None:
    """Accepted and explained; the run then goes on (here to a host it cannot bind)."""
    result = run_vrs("render", str(demo_copy), "--trust-remote-code", "--frontend", "python",
                     "--host", "256.0.0.1", hf_home=tmp_path)
    message = " ".join(result.stderr.split())
    assert "--trust-remote-code changes nothing" in message
    assert "never runs code from a model repository" in message
    assert result.returncode == 1 and "cannot listen on 256.0.0.1" in message


def test_max_batch_prompts_and_the_engine_tokenizer_reach_the_args_json(demo_copy: Path,
                                                                      tmp_path: Path) -> None:
    """`--max-batch-prompts` is the args-json's max_batch_prompts (default 256), for
    `vrs serve` and `vrs frontend` alike; `--tokenizer` also reaches the engine config as
    tokenizer, so that `--mock-replies` are encoded with the frontend's tokenizer."""
    import inspect

    from rich.console import Console

    from cli.commands.frontend import frontend
    from cli.commands.serve import serve
    from cli.serve_args import ServeOptions, build_args

    for command in (serve, frontend):
        default = inspect.signature(command).parameters["max_batch_prompts"].default
        assert default == 256, command
    console = Console(stderr=True)
    base = {"host": "127.0.0.1", "port": 0, "served_model_name": None, "mock": True,
            "max_model_len": None, "log_level": "info", "shutdown_timeout": 1.0,
            "chat_template": None, "device": "auto", "dtype": "auto", "block_size": 16,
            "max_num_seqs": 8, "max_num_batched_tokens": 256, "kv_cache_memory": None,
            "gpu_memory_utilization": 0.9, "enable_prefix_caching": True, "seed": 0,
            "mock_step_delay_ms": 0.0, "model": str(demo_copy), "model_option": None}
    given = build_args(ServeOptions.from_params(
        {**base, "max_batch_prompts": 7, "tokenizer": str(demo_copy)}), console)
    assert given["max_batch_prompts"] == 7
    assert given["engine_config"]["tokenizer"] == str(demo_copy.resolve())
    default = build_args(ServeOptions.from_params({**base, "tokenizer": None}), console)
    assert default["max_batch_prompts"] == 256
    assert default["engine_config"]["tokenizer"] is None


def test_max_batch_prompts_is_checked_by_the_cli(tmp_path: Path) -> None:
    result = run_vrs("serve", "--mock", "--max-batch-prompts", "0", hf_home=tmp_path)
    assert result.returncode == 2
    assert "--max-batch-prompts" in result.stderr


def test_chat_template_content_format_reaches_the_args_json(demo_copy: Path) -> None:
    """`--chat-template-content-format` (default auto) is the args-json's
    chat_template_content_format for serve, frontend and render alike; both services
    refuse other values."""
    import inspect

    from rich.console import Console

    from cli.commands.frontend import frontend
    from cli.commands.render import render
    from cli.commands.serve import serve
    from cli.render_args import RenderOptions
    from cli.render_args import build_args as render_args
    from cli.serve_args import ServeOptions, build_args
    from server.args import parse_args, parse_render_args

    for command in (serve, frontend, render):
        default = inspect.signature(command).parameters["chat_template_content_format"].default
        assert default == "auto", command
    console = Console(stderr=True)
    base = {"host": "127.0.0.1", "port": 0, "served_model_name": None, "mock": True,
            "max_model_len": None, "log_level": "info", "shutdown_timeout": 1.0,
            "chat_template": None, "device": "auto", "dtype": "auto", "block_size": 16,
            "max_num_seqs": 8, "max_num_batched_tokens": 256, "kv_cache_memory": None,
            "gpu_memory_utilization": 0.9, "enable_prefix_caching": True, "seed": 0,
            "mock_step_delay_ms": 0.0, "model": str(demo_copy), "model_option": None,
            "tokenizer": None}
    serve_json = build_args(ServeOptions.from_params(
        {**base, "chat_template_content_format": "openai"}), console)
    assert serve_json["chat_template_content_format"] == "openai"
    assert parse_args(serve_json).content_format == "openai"
    render_json = render_args(RenderOptions.from_params(base), console)
    assert render_json["chat_template_content_format"] == "auto"
    assert parse_render_args(render_json).chat_template_content_format == "auto"
    with pytest.raises(ValueError, match="one of auto, string, openai; got 'list'"):
        parse_render_args({**render_json, "chat_template_content_format": "list"})
