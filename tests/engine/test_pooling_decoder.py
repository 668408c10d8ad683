"""Decoder pooling models in the real engine: Qwen3-Embedding's layout (last token,
sentence-transformers Normalize, Matryoshka), a Qwen3ForSequenceClassification and a
causal LM converted to a yes/no reranker; each answer equal to sentence-transformers'
``encode()`` or transformers' own forward; chunked prefill, prefix caching, refusals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from engine import protocol as p
from tests.engine.engine_kit import make_engine
from tests.engine.pooling_kit import KINDS, build_pooling_model

pytestmark = pytest.mark.engine

TEXTS = ["hello world", "The quick brown fox jumps over the lazy dog. " * 6,
         "向量检索 🚀 rerank me", "a"]


@pytest.fixture(scope="module")
def pooling_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("pooling")
    return {kind: build_pooling_model(kind, root) for kind in KINDS}


def _tokenizer(model_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir)


def _pool(engine: Any, prompts: list[list[int]], params: list[p.PoolingParams],
          ) -> list[p.EngineCoreOutput]:
    """Each prompt's one output, in order."""
    outputs: dict[str, p.EngineCoreOutput] = {}
    for i, (ids, param) in enumerate(zip(prompts, params, strict=True)):
        request = p.EngineCoreRequest(f"r{i}", ids, p.SamplingParams(max_tokens=1), 0.0,
                                      pooling_params=param)
        for out in engine.add_request(request):
            outputs[out.request_id] = out
    steps = 0
    while engine.has_unfinished_requests():
        for out in engine.step():
            assert out.request_id not in outputs, "a pooling request has one output"
            outputs[out.request_id] = out
        steps += 1
        assert steps < 1000
    return [outputs[f"r{i}"] for i in range(len(prompts))]


def _cosine(a: Any, b: Any) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.mark.parametrize("budget", [2048, 16])
def test_embeddings_equal_sentence_transformers(pooling_dirs: dict[str, Path],
                                                budget: int) -> None:
    from sentence_transformers import SentenceTransformer

    model_dir = pooling_dirs["embed"]
    st = SentenceTransformer(str(model_dir), device="cpu")
    expected = st.encode(TEXTS, convert_to_numpy=True)
    prompts = [st.tokenizer(text)["input_ids"] for text in TEXTS]
    engine = make_engine(model_dir, max_num_batched_tokens=budget)
    ready = engine.ready(0)
    assert (ready.runner, ready.pooling_tasks) == ("pooling", ["embed"])
    outs = _pool(engine, prompts, [p.PoolingParams("embed")] * len(prompts))
    for out, want in zip(outs, expected, strict=True):
        assert (out.finish_reason, out.new_token_ids) == ("stop", [])
        assert out.pooling_output is not None and len(out.pooling_output) == 64
        assert _cosine(out.pooling_output, want) >= 0.9999
        assert abs(np.linalg.norm(out.pooling_output) - 1.0) < 1e-5
    assert engine.kv_cache.num_free_blocks == engine.kv_cache.num_blocks


def test_matryoshka_normalize_and_prefix_cache(pooling_dirs: dict[str, Path]) -> None:
    from sentence_transformers import SentenceTransformer

    model_dir = pooling_dirs["embed"]
    st = SentenceTransformer(str(model_dir), device="cpu")
    text = TEXTS[1]
    prompt = st.tokenizer(text)["input_ids"]
    engine = make_engine(model_dir)
    full, cut, raw = _pool(engine, [prompt] * 3, [
        p.PoolingParams("embed"), p.PoolingParams("embed", dimensions=16),
        p.PoolingParams("embed", normalize=False)])
    want = st.encode([text], truncate_dim=16, normalize_embeddings=True)[0]
    assert cut.pooling_output is not None and len(cut.pooling_output) == 16
    assert _cosine(cut.pooling_output, want) >= 0.9999
    assert raw.pooling_output is not None and full.pooling_output is not None
    assert _cosine(raw.pooling_output, full.pooling_output) >= 0.9999
    assert abs(np.linalg.norm(raw.pooling_output) - 1.0) > 1e-3  # not normalized
    again = _pool(engine, [prompt], [p.PoolingParams("embed")])[0]
    assert again.num_cached_tokens > 0  # the first request's blocks, cached
    assert _cosine(again.pooling_output, full.pooling_output) >= 0.99999


def test_classifier_equals_transformers(pooling_dirs: dict[str, Path]) -> None:
    from transformers import AutoModelForSequenceClassification

    model_dir = pooling_dirs["classify"]
    tokenizer = _tokenizer(model_dir)
    hf = AutoModelForSequenceClassification.from_pretrained(model_dir, dtype=torch.float32)
    engine = make_engine(model_dir)
    ready = engine.ready(0)
    assert (ready.runner, ready.pooling_tasks) == ("pooling", ["classify"])
    assert ready.classify_labels == ["LABEL_0", "LABEL_1", "LABEL_2"]
    prompts = [tokenizer(text)["input_ids"] for text in TEXTS]
    outs = _pool(engine, prompts, [p.PoolingParams("classify")] * 3
                 + [p.PoolingParams("classify", use_activation=False)])
    for i, (out, ids) in enumerate(zip(outs, prompts, strict=True)):
        with torch.no_grad():
            logits = hf(torch.tensor([ids])).logits[0]
        want = logits if i == 3 else torch.softmax(logits, -1)
        assert out.pooling_output == pytest.approx(want.tolist(), abs=1e-5)


def test_reranker_scores_with_yes_no_logits(pooling_dirs: dict[str, Path]) -> None:
    from transformers import AutoModelForCausalLM

    model_dir = pooling_dirs["rerank"]
    tokenizer = _tokenizer(model_dir)
    hf = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    yes, no = tokenizer.convert_tokens_to_ids("yes"), tokenizer.convert_tokens_to_ids("no")
    engine = make_engine(model_dir, convert="score")
    ready = engine.ready(0)
    assert (ready.runner, ready.pooling_tasks) == ("pooling", ["classify", "score"])
    pairs = [("what is a fox?", TEXTS[1]), ("rerank", TEXTS[2])]
    prompts = [tokenizer(q, d)["input_ids"] for q, d in pairs]
    outs = _pool(engine, prompts, [p.PoolingParams("score")] * len(prompts))
    for out, ids in zip(outs, prompts, strict=True):
        with torch.no_grad():
            last = hf(torch.tensor([ids])).logits[0, -1]
        want = torch.softmax(torch.stack([last[no], last[yes]]), -1)[1].item()
        assert out.pooling_output == pytest.approx([want], abs=1e-5)


def test_refusals(pooling_dirs: dict[str, Path]) -> None:
    engine = make_engine(pooling_dirs["classify"])
    generate = p.EngineCoreRequest("g", [5, 6], p.SamplingParams(max_tokens=4), 0.0)
    (out,) = engine.add_request(generate)
    assert out.finish_reason == "error" and out.error_kind == "invalid_request"
    assert "pooling" in (out.error_message or "")
    for params, needle in [
        (p.PoolingParams("embed"), "Unsupported task"),
        (p.PoolingParams("classify", dimensions=8), "only supports"),
    ]:
        request = p.EngineCoreRequest("x", [5, 6], p.SamplingParams(max_tokens=1), 0.0,
                                      pooling_params=params)
        (out,) = engine.add_request(request)
        assert out.error_kind == "invalid_request" and needle in (out.error_message or "")
    too_long = p.EngineCoreRequest("l", [5] * (engine.max_model_len + 1),
                                   p.SamplingParams(max_tokens=1), 0.0,
                                   pooling_params=p.PoolingParams("classify"))
    (out,) = engine.add_request(too_long)
    assert f"({engine.max_model_len} tokens)" in (out.error_message or "")
    assert not engine.has_unfinished_requests()


def test_generation_engine_refuses_pooling(model_dirs: dict[str, Path]) -> None:
    engine = make_engine(model_dirs["qwen3"])
    assert engine.ready(0).runner == "generate"
    request = p.EngineCoreRequest("e", [5, 6], p.SamplingParams(max_tokens=1), 0.0,
                                  pooling_params=p.PoolingParams("embed"))
    (out,) = engine.add_request(request)
    assert out.error_kind == "invalid_request" and "--runner pooling" in (out.error_message or "")


def test_bidirectional_decoder_is_refused(pooling_dirs: dict[str, Path], tmp_path: Path) -> None:
    import json
    import shutil

    from engine.runtime.models import UnsupportedArchitectureError

    model_dir = tmp_path / "bidirectional"
    shutil.copytree(pooling_dirs["embed"], model_dir)
    config = json.loads((model_dir / "config.json").read_text())
    config["is_causal"] = False
    (model_dir / "config.json").write_text(json.dumps(config))
    with pytest.raises(UnsupportedArchitectureError, match="bidirectional"):
        make_engine(model_dir)
