"""The built-in demo model: deterministic, loadable by transformers, template works."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from engine.mock.demo_model import DEMO_MODEL_CONFIG, build_demo_model, ensure_demo_model

pytestmark = pytest.mark.unit


def _digest(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.iterdir())}


def test_build_is_deterministic(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    build_demo_model(first)
    build_demo_model(second)
    assert _digest(first) == _digest(second)


def test_ensure_builds_once_into_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VRS_CACHE_DIR", str(tmp_path))
    path = ensure_demo_model()
    assert path.is_relative_to(tmp_path)
    stamp = (path / "model.safetensors").stat().st_mtime_ns
    assert ensure_demo_model() == path
    assert (path / "model.safetensors").stat().st_mtime_ns == stamp, "rebuilt on second call"


def test_transformers_loads_it_and_template_renders(tmp_path: Path) -> None:
    import torch
    import transformers

    build_demo_model(tmp_path)
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path)
    assert type(model).__name__ == "Qwen3ForCausalLM"
    assert model.config.vocab_size == DEMO_MODEL_CONFIG["vocab_size"]
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path)
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "天气 🌧️?"},
        {"role": "assistant", "content": "",
         "tool_calls": [{"type": "function",
                         "function": {"name": "weather", "arguments": '{"city": "北京"}'}}]},
        {"role": "tool", "content": "rain"},
    ]
    tools = [{"type": "function", "function": {"name": "weather", "parameters": {}}}]
    text = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False,
                                         add_generation_prompt=True, enable_thinking=True)
    assert text.startswith("<｜begin▁of▁sentence｜><｜begin▁sys｜>Be brief.\n\n# Tools")
    assert '{"name": "weather", "arguments": {"city": "北京"}}' in text
    assert text.endswith("<｜tool▁output▁begin｜>rain<｜tool▁output▁end｜><｜Assistant｜><think>")
    no_think = tokenizer.apply_chat_template(messages[1:2], tokenize=False,
                                             add_generation_prompt=True)
    assert no_think.endswith("<｜Assistant｜></think>")
    ids = tokenizer(text, add_special_tokens=False).input_ids
    assert tokenizer.decode(ids) == text
    with torch.inference_mode():
        logits = model(torch.tensor([ids])).logits
    assert logits.shape == (1, len(ids), DEMO_MODEL_CONFIG["vocab_size"])
    with pytest.raises(Exception, match="unknown role: robot"):
        tokenizer.apply_chat_template([{"role": "robot", "content": "x"}], tokenize=False)
