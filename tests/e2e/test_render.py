"""`vrs render` parity: Rust render == Python render == transformers, on a corpus.

Both render services run as real processes started through the `vrs` CLI on free
loopback ports (the Rust binary: VRS_RUST_FRONTEND_PATH, else the newest
$CARGO_TARGET_DIR or rust/target build), once with the demo model's own template and
once with ``--chat-template tests/render_corpus/qwen3_style.jinja``. The ground truth is
computed here with transformers directly: ``apply_chat_template(tokenize=False)`` then
encoding without special tokens (chat), or encoding with them (completions).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "render_corpus"
QWEN3_STYLE = CORPUS / "qwen3_style.jinja"
MODEL = "demo"
MAX_MODEL_LEN = 8192  # the demo model's max_position_embeddings


def rust_binary() -> Path:
    setting = os.environ.get("VRS_RUST_FRONTEND_PATH", "auto").strip() or "auto"
    if setting != "auto":
        return Path(setting)
    dirs = [ROOT / "rust" / "target"]
    if os.environ.get("CARGO_TARGET_DIR"):
        dirs.insert(0, Path(os.environ["CARGO_TARGET_DIR"]))
    found = [d / p / "vrs-rs" for d in dirs for p in ("release", "debug")]
    found = [p for p in found if p.is_file()]
    if not found:
        subprocess.run(["cargo", "build", "-p", "vrs-rs"], cwd=ROOT / "rust", check=True,
                       timeout=1800)
        return rust_binary()
    return max(found, key=lambda p: p.stat().st_mtime)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def load(name: str) -> list[dict[str, Any]]:
    with open(CORPUS / name, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


REQUESTS = load("requests.jsonl")
ERRORS = load("errors.jsonl")
CHATS = [r for r in REQUESTS if r["endpoint"] == "chat"]
# what the override template renders too (it needs every tool's `parameters`)
OVERRIDE_CHATS = [r for r in CHATS if r.get("template_override", True)]
PATHS = {"chat": "/v1/chat/completions/render", "completions": "/v1/completions/render"}


class RenderServer:
    """`vrs render [MODEL] [EXTRA_ARGS] --frontend F --port P [--chat-template T]` as a
    child process."""

    def __init__(self, frontend: str, model_dir: Path | None, log: Path,
                 template: Path | None = None, extra_args: tuple[str, ...] = ()) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        argv = [sys.executable, "-c", "from cli.main import main; main()", "render",
                *([str(model_dir)] if model_dir is not None else []), *extra_args,
                "--frontend", frontend, "--port", str(port),
                "--served-model-name", MODEL, "--log-level", "warning"]
        if template is not None:
            argv += ["--chat-template", str(template)]
        env = {**os.environ, "VRS_RUST_FRONTEND_PATH": str(rust_binary()),
               "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false"}
        self._log = open(log, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=self._log,
                                     stderr=subprocess.STDOUT)
        self.client = httpx.Client(base_url=self.url, timeout=60)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, log.read_text()
            try:
                if self.client.get("/health").status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.1)
        raise AssertionError(f"{frontend} render did not start: {log.read_text()}")

    def post(self, endpoint: str, body: Any) -> httpx.Response:
        content = body if isinstance(body, str) else json.dumps(body)
        return self.client.post(PATHS[endpoint], content=content,
                                headers={"content-type": "application/json"})

    def stop(self) -> int:
        self.client.close()
        self.proc.terminate()
        code = self.proc.wait(timeout=30)
        self._log.close()
        return code


@pytest.fixture(scope="module")
def model_dir() -> Path:
    from engine.mock.demo_model import ensure_demo_model

    return Path(ensure_demo_model())


@pytest.fixture(scope="module")
def tokenizer(model_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(model_dir))


def _servers(model_dir: Path, tmp: Path, template: Path | None) -> Iterator[dict[str, Any]]:
    servers: dict[str, RenderServer] = {}
    try:
        for frontend in ("rust", "python"):
            servers[frontend] = RenderServer(frontend, model_dir, tmp / f"{frontend}.log",
                                             template)
        yield servers
    finally:
        codes = {name: server.stop() for name, server in servers.items()}
        assert codes == dict.fromkeys(servers, 0), codes


@pytest.fixture(scope="module")
def servers(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    yield from _servers(model_dir, tmp_path_factory.mktemp("render"), None)


@pytest.fixture(scope="module")
def override_servers(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    yield from _servers(model_dir, tmp_path_factory.mktemp("render-override"), QWEN3_STYLE)


# --------------------------------------------------------------------------- ground truth


# The content format (docs/api.md) of each template, as vLLM detects it: the demo template
# loops over its `render_content(content)` macro's parameter (`openai`), the override
# template only tests `message.content is string` (`string`).
DEMO_FORMAT = "openai"
QWEN3_STYLE_FORMAT = "string"


def template_arguments(arguments: Any) -> dict[str, Any]:
    """A tool call's ``arguments`` as vLLM's ``_postprocess_messages`` hands them to the
    template: an object kept, a JSON object's text parsed, anything else ``{}``."""
    if isinstance(arguments, str) and arguments:
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return {}
    return arguments if isinstance(arguments, dict) else {}


def template_messages(messages: list[dict[str, Any]], fmt: str) -> list[dict[str, Any]]:
    """The documented mapping of OpenAI messages to template messages (vLLM's
    ``_parse_chat_message_content`` and ``_postprocess_messages``): null fields left out;
    with ``string`` text parts joined with newlines, with ``openai`` the content a list of
    ``{"type": "text", "text": ...}`` parts (a string one part, null an empty list); an
    assistant's tool calls' ``arguments`` objects (an empty ``tool_calls`` left out)."""
    out = []
    for message in messages:
        item = {k: v for k, v in message.items() if v is not None and k != "content"}
        if message["role"] == "assistant" and "tool_calls" in item:
            item["tool_calls"] = [
                {**call, "function": {**call["function"], "arguments": template_arguments(
                    call["function"].get("arguments"))}} for call in item["tool_calls"]]
            if not item["tool_calls"]:
                del item["tool_calls"]
        content = message.get("content")
        if fmt == "string":
            if isinstance(content, list):
                content = "\n".join(part["text"] for part in content)
            if content is not None:
                item["content"] = content
        elif isinstance(content, str):
            item["content"] = [{"type": "text", "text": content}]
        else:
            item["content"] = [{"type": "text", "text": p["text"]} for p in content or []]
        out.append(item)
    return out


# The tool-call markers of the templates' formats (docs/api.md): a forcing tool_choice
# appends the begin marker (and, naming a function, the start of its call) to the prompt.
MARKERS = ("<｜tool▁call▁begin｜>", "<tool_call>")


def forced_prefill(body: dict[str, Any], template: str) -> str:
    """What a forcing ``tool_choice`` appends to the rendered prompt ("" when none)."""
    choice = body.get("tool_choice")
    if choice != "required" and not isinstance(choice, dict):
        return ""
    begin = next(marker for marker in MARKERS if marker in template)
    if choice == "required":
        return begin
    name = json.dumps(choice["function"]["name"], ensure_ascii=False)
    return f'{begin}{{"name": {name}, "arguments": '


def truth(tokenizer: Any, entry: dict[str, Any], template: str | None = None,
          fmt: str = DEMO_FORMAT) -> dict[str, Any]:
    """Prompt text and ids by transformers itself (plus a forced call's prefill), or
    {"error": message}."""
    body = entry["body"]
    if entry["endpoint"] == "completions":
        prompt = body["prompt"]
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], str):
            prompt = prompt[0]
        if isinstance(prompt, str):
            return {"prompt": prompt, "ids": tokenizer(prompt)["input_ids"]}
        ids = prompt[0] if isinstance(prompt[0], list) else prompt
        return {"prompt": None, "ids": ids}
    continue_final = body.get("continue_final_message", False)
    try:
        text = tokenizer.apply_chat_template(
            template_messages(body["messages"], fmt), tools=body.get("tools"), tokenize=False,
            chat_template=template,
            add_generation_prompt=body.get("add_generation_prompt", not continue_final),
            continue_final_message=continue_final, **body.get("chat_template_kwargs", {}))
    except Exception as exc:  # noqa: BLE001 - the template's own error is the expectation
        return {"error": str(exc)}
    text += forced_prefill(body, template or tokenizer.chat_template)
    return {"prompt": text, "ids": tokenizer(text, add_special_tokens=False)["input_ids"]}


def rendered(server: RenderServer, entry: dict[str, Any]) -> dict[str, Any]:
    response = server.post(entry["endpoint"], entry["body"])
    assert response.status_code == 200, (entry["name"], response.text)
    return response.json()


# --------------------------------------------------------------------------- tests


def test_corpus_covers_the_issue() -> None:
    names = {r["name"] for r in REQUESTS}
    assert len(REQUESTS) >= 30
    assert {"short", "long", "tools", "tool_round_trip", "thinking_on", "thinking_off",
            "empty_content", "whitespace_content", "emoji", "cjk_chinese",
            "continue_final", "no_generation_prompt", "rf_json_object", "rf_json_schema",
            "so_json_object_schema", "so_json_text", "so_regex", "so_choice", "so_grammar",
            "so_json_object", "so_structural_tag", "forced_tool_required",
            "forced_tool_required_one_call", "forced_tool_named", "tool_call_arguments_not_json",
            "tool_call_arguments_not_an_object", "tool_calls_empty_list"} <= names
    long_turns = next(r for r in REQUESTS if r["name"] == "long")["body"]["messages"]
    assert sum(m["role"] == "user" for m in long_turns) == 8
    assert len(next(r for r in REQUESTS if r["name"] == "tools")["body"]["tools"]) == 8


@pytest.mark.parametrize("entry", REQUESTS, ids=[r["name"] for r in REQUESTS])
def test_rust_equals_python_equals_transformers(servers: dict[str, RenderServer],
                                                 tokenizer: Any, entry: dict[str, Any]) -> None:
    want = truth(tokenizer, entry)
    rust, python = rendered(servers["rust"], entry), rendered(servers["python"], entry)
    assert rust["prompt"] == python["prompt"] == want["prompt"]
    assert rust["prompt_token_ids"] == python["prompt_token_ids"] == want["ids"]
    assert rust["sampling_params"] == python["sampling_params"]
    # the structured-output constraint, field by field (null: free text)
    assert python["sampling_params"]["structured_outputs"] == entry.get("structured_outputs")
    assert rust["model"] == python["model"] == MODEL
    prefix = "chatcmpl-" if entry["endpoint"] == "chat" else "cmpl-"
    assert rust["request_id"].startswith(prefix) and python["request_id"].startswith(prefix)
    body = entry["body"]
    requested = body.get("max_completion_tokens", body.get("max_tokens"))
    expected_max = requested if requested is not None else MAX_MODEL_LEN - len(want["ids"])
    assert rust["sampling_params"]["max_tokens"] == expected_max


def test_sampling_params_are_lowered_like_serving(servers: dict[str, RenderServer]) -> None:
    entry = next(r for r in REQUESTS if r["name"] == "sampling_params")
    params = rendered(servers["rust"], entry)["sampling_params"]
    assert params == {
        "max_tokens": 100, "min_tokens": 5, "temperature": 0.0, "top_p": 0.9, "top_k": 50,
        "min_p": 0.05, "seed": 42, "stop_token_ids": [1, 2], "ignore_eos": True,
        "presence_penalty": 0.5, "frequency_penalty": -0.25, "repetition_penalty": 1.1,
        "logprobs": None, "prompt_logprobs": None, "logit_bias": [],
        "allowed_token_ids": None, "bad_words_token_ids": [], "structured_outputs": None,
        "thinking_budget": None, "extra_args": None,
    }
    from engine import protocol

    assert list(params) == list(protocol.SamplingParams.__struct_fields__)


def test_engine_fields_are_lowered_like_serving(servers: dict[str, RenderServer],
                                                tokenizer: Any) -> None:
    """The thinking budget with the reasoning parser's markers tokenized (``auto`` picks
    qwen3 for the demo template), the extra args as vLLM builds them; the same from both."""
    entry = next(r for r in REQUESTS if r["name"] == "engine_fields")
    params = rendered(servers["rust"], entry)["sampling_params"]
    ids = [tokenizer.convert_tokens_to_ids(marker) for marker in ("<think>", "</think>")]
    assert params["thinking_budget"] == {"budget": 64, "start_token_ids": [[ids[0]]],
                                         "end_token_ids": [[ids[1]]]}
    assert params["extra_args"] == {
        "a": [1, "b", 2.5], "t": 1, "f": 0.5,
        "kv_transfer_params": {"do_remote_prefill": False, "ids": [1, 2], "none": None}}
    assert params == rendered(servers["python"], entry)["sampling_params"]


@pytest.mark.parametrize("entry", OVERRIDE_CHATS, ids=[r["name"] for r in OVERRIDE_CHATS])
def test_chat_template_override(override_servers: dict[str, RenderServer], tokenizer: Any,
                                entry: dict[str, Any]) -> None:
    want = truth(tokenizer, entry, QWEN3_STYLE.read_text(encoding="utf-8"), QWEN3_STYLE_FORMAT)
    rust = rendered(override_servers["rust"], entry)
    python = rendered(override_servers["python"], entry)
    assert rust["prompt"] == python["prompt"] == want["prompt"]
    assert rust["prompt_token_ids"] == python["prompt_token_ids"] == want["ids"]
    assert want["prompt"].startswith("<|meta|>roles=")  # the override is in force


@pytest.mark.parametrize("entry", ERRORS, ids=[r["name"] for r in ERRORS])
def test_errors_are_the_same(servers: dict[str, RenderServer], tokenizer: Any,
                             entry: dict[str, Any]) -> None:
    rust = servers["rust"].post(entry["endpoint"], entry["body"])
    python = servers["python"].post(entry["endpoint"], entry["body"])
    assert rust.status_code == python.status_code == entry["status"], (rust.text, python.text)
    rust_error, python_error = rust.json()["error"], python.json()["error"]
    prefix = entry.get("message_prefix")
    if prefix is not None:  # the JSON parsers word their complaints differently
        assert rust_error["message"].startswith(prefix)
        assert python_error["message"].startswith(prefix)
        rust_error["message"] = python_error["message"] = prefix
    assert rust_error == python_error
    assert rust_error["param"] == entry["param"]
    assert rust_error["code"] == entry["status"]
    if entry["message"] is not None:
        assert rust_error["message"] == entry["message"]


@pytest.mark.parametrize("name", ["unknown_role", "system_not_first"])
def test_template_errors_carry_the_templates_message(servers: dict[str, RenderServer],
                                                     tokenizer: Any, name: str) -> None:
    entry = next(e for e in ERRORS if e["name"] == name)
    want = truth(tokenizer, {"endpoint": "chat", "body": entry["body"]})
    assert "error" in want
    for server in servers.values():
        response = server.post("chat", entry["body"])
        assert response.status_code == 400
        assert response.json()["error"]["message"] == want["error"]


def test_override_template_error(override_servers: dict[str, RenderServer]) -> None:
    body = {"messages": [{"role": "user", "content": "x"}, {"role": "robot", "content": "y"}]}
    for server in override_servers.values():
        response = server.post("chat", body)
        assert response.status_code == 400
        assert response.json()["error"]["message"] == "Unexpected message role: robot"


def test_models_health_and_unknown_routes(servers: dict[str, RenderServer],
                                          model_dir: Path) -> None:
    cards = []
    for server in servers.values():
        models = server.client.get("/v1/models")
        assert models.status_code == 200
        card = models.json()["data"][0]
        cards.append({k: v for k, v in card.items() if k != "created"})
        assert server.client.get("/health").status_code == 200
        assert server.client.get("/v1/chat/completions/render").status_code == 405
        missing = server.client.post("/v1/chat/completions", json={})
        assert missing.status_code == 404 and missing.json()["error"]["code"] == 404
    assert cards[0] == cards[1]
    assert cards[0] == {"id": MODEL, "object": "model", "owned_by": "vrs",
                        "root": str(model_dir), "parent": None, "max_model_len": MAX_MODEL_LEN}


def test_render_help_lists_its_flags() -> None:
    result = subprocess.run([sys.executable, "-c", "from cli.main import main; main()",
                             "render", "--help"], cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, "COLUMNS": "200"}, timeout=60)
    assert result.returncode == 0, result.stderr
    for flag in ("--host", "--port", "--frontend", "--chat-template", "--served-model-name",
                 "--max-model-len", "--tool-call-parser", "--reasoning-parser"):
        assert flag in result.stdout


def test_tool_call_parser_flag_renders_tools_a_template_has_no_markers_for(
        model_dir: Path, tmp_path: Path) -> None:
    """A template without tool markers (mine): `--tool-call-parser demo` renders a forced
    call with demo's prefill; `none` refuses any tool_choice but `none`."""
    template = tmp_path / "plain.jinja"
    template.write_text("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n"
                        "{% endfor %}assistant:", encoding="utf-8")
    tool = {"type": "function", "function": {"name": "f", "parameters": {}}}
    body = {"messages": [{"role": "user", "content": "hi"}], "tools": [tool],
            "tool_choice": "required"}
    prompts = []
    for frontend in ("rust", "python"):
        for parser, status in (("demo", 200), ("none", 400)):
            server = RenderServer(frontend, model_dir, tmp_path / f"{frontend}-{parser}.log",
                                  template, ("--tool-call-parser", parser))
            try:
                response = server.post("chat", body)
                assert response.status_code == status, response.text
                if status == 200:
                    prompts.append(response.json()["prompt"])
                else:
                    assert response.json()["error"]["param"] == "tool_choice"
            finally:
                server.stop()
    assert prompts[0] == prompts[1] == "user: hi\nassistant:<｜tool▁call▁begin｜>"

