"""vLLM's model flags through the real CLI: `--model` as MODEL, and `--tokenizer DIR`
(a separate tokenizer directory) in `vrs serve`, `vrs frontend` and `vrs render`, on
both frontends.

The model directory here is a copy of the demo model without its tokenizer files
(tokenizer.json, tokenizer_config.json): a server started on it alone cannot load a
tokenizer, so one that answers proves the tokenizer came from `--tokenizer` (a copy of
the demo model's tokenizer files), and the prompt ids must equal the demo model's own.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.servers import Server
from tests.e2e.test_render import RenderServer

pytestmark = pytest.mark.e2e

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
PROMPT = "The quick brown fox jumps over the lazy dog"
CHAT = {"model": "demo", "messages": [{"role": "user", "content": PROMPT}]}


@pytest.fixture(scope="module")
def split_model(demo_model: Path, tmp_path_factory: pytest.TempPathFactory
                ) -> tuple[Path, Path]:
    """(the demo model without tokenizer files, a directory with only those files)."""
    root = tmp_path_factory.mktemp("split")
    weights, tokenizer = root / "model", root / "tokenizer"
    shutil.copytree(demo_model, weights)
    tokenizer.mkdir()
    for name in TOKENIZER_FILES:
        (weights / name).unlink()
        shutil.copy(demo_model / name, tokenizer / name)
    return weights, tokenizer


@pytest.mark.parametrize("mode", ["rust-serve", "rust-frontend", "python"])
def test_model_flag_and_tokenizer_dir_serve(mode: str, split_model: tuple[Path, Path],
                                            tokenizer: Any, tmp_path: Path) -> None:
    weights, tokenizer_dir = split_model
    server = Server(mode, weights, tmp_path / "server.log", model_flag=True,
                    cli_args=("--tokenizer", str(tokenizer_dir)))
    try:
        reply = httpx.post(f"{server.url}/v1/completions", timeout=60, json={
            "model": "demo", "prompt": PROMPT, "max_tokens": 2})
        assert reply.status_code == 200, reply.text
        assert reply.json()["usage"]["prompt_tokens"] == len(tokenizer(PROMPT).input_ids)
        chat = httpx.post(f"{server.url}/v1/chat/completions", timeout=60,
                          json={**CHAT, "max_tokens": 2})
        assert chat.status_code == 200, chat.text
        expected = tokenizer.apply_chat_template(CHAT["messages"], tokenize=False,
                                                 add_generation_prompt=True)
        ids = tokenizer(expected, add_special_tokens=False).input_ids
        assert chat.json()["usage"]["prompt_tokens"] == len(ids)
    finally:
        assert server.stop() == 0, server.log()


def test_model_dir_without_tokenizer_fails_without_the_flag(split_model: tuple[Path, Path],
                                                            tmp_path: Path) -> None:
    """The control of the test above: the same directory alone has no tokenizer."""
    weights, _ = split_model
    server = Server("rust-serve", weights, tmp_path / "server.log", wait=False)
    try:
        assert server.wait_exit(120) == 1
        assert "tokenizer" in server.log()
    finally:
        server.stop()


@pytest.mark.parametrize("frontend", ["rust", "python"])
def test_render_with_tokenizer_dir_gives_the_models_ids(
        frontend: str, demo_model: Path, split_model: tuple[Path, Path],
        tmp_path: Path) -> None:
    weights, tokenizer_dir = split_model
    plain = RenderServer(frontend, demo_model, tmp_path / "plain.log")
    split = RenderServer(frontend, None, tmp_path / "split.log",
                         extra_args=("--model", str(weights), "--tokenizer",
                                     str(tokenizer_dir)))
    try:
        for endpoint, body in (("chat", CHAT), ("completions",
                                                {"model": "demo", "prompt": PROMPT})):
            expected, got = plain.post(endpoint, body), split.post(endpoint, body)
            assert expected.status_code == got.status_code == 200, got.text
            assert got.json()["prompt_token_ids"] == expected.json()["prompt_token_ids"]
            assert got.json()["prompt"] == expected.json()["prompt"]
    finally:
        assert plain.stop() == 0
        assert split.stop() == 0


@pytest.mark.parametrize("trust", [False, True], ids=["plain", "trust-remote-code"])
def test_model_needing_its_own_code_is_refused(trust: bool, demo_model: Path,
                                               tmp_path: Path) -> None:
    """An architecture vrs does not implement, whose config.json's auto_map points at the
    repository's code: the real engine refuses it, flag or not, naming what vrs has."""
    model = tmp_path / "custom"
    shutil.copytree(demo_model, model)
    config = json.loads((model / "config.json").read_text())
    config.update(architectures=["FooForCausalLM"], model_type="foo",
                  auto_map={"AutoModelForCausalLM": "modeling_foo.FooForCausalLM"})
    (model / "config.json").write_text(json.dumps(config))
    server = Server("rust-serve", model, tmp_path / "server.log", wait=False, mock=False,
                    cli_args=("--trust-remote-code",) if trust else ())
    try:
        assert server.wait_exit(300) == 1
        log = " ".join(server.log().split())
        assert "FooForCausalLM, model_type 'foo'" in log
        assert "vrs does not run model-repository code" in log
        assert ("vrs's own decoder serves LlamaForCausalLM, LlamaForSequenceClassification, "
                "LlamaModel, Qwen2ForCausalLM") in log
        assert "transformers ships no causal LM named FooForCausalLM" in log
        assert "the encoders BERT, RoBERTa, XLM-RoBERTa and ModernBERT" in log
    finally:
        server.stop()
