"""Tensor parallel in the engine (engine/runtime/parallel/): TP=2 on the CPU (gloo), the
test process as rank 0 and one worker process.

Greedy tokens under pressure (chunked prefill, preemptions, prefix-cache hits) equal
transformers' generate() in float32, for vrs's decoder (Llama, Qwen3, and a wider
Llama of 8 query heads on 4 KV heads) and for the transformers backend split by the
model's own ``base_model_tp_plan`` (Mistral's sliding window, Gemma 2's soft-capping);
prompt logprobs equal TP=1's; each rank holds its slice (weights and KV heads); sizes
and plans that cannot be split are refused with the reason.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from engine import protocol as p
from engine.config import ConfigError, EngineConfig
from engine.runtime.engine import ModelEngine
from tests.engine.engine_kit import (
    build_family,
    hf_greedy,
    kv_bytes_per_block,
    make_engine,
    pressure_engine,
    pressure_workload,
    run_to_completion,
    tokens_of,
)
from tests.engine.transformers_kit import ATTENTION, build

pytestmark = pytest.mark.engine

TP = {"tensor_parallel_size": 2}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tensor-parallel")


def _wide_llama(root: Path) -> Path:
    """A Llama of another shape than engine_kit's: 8 query heads on 4 KV heads, head_dim
    16, 3 layers, an MLP of 96, untied."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(77)
    model = LlamaForCausalLM(LlamaConfig(
        vocab_size=512, hidden_size=128, intermediate_size=96, num_hidden_layers=3,
        num_attention_heads=8, num_key_value_heads=4, head_dim=16, max_position_embeddings=512,
        rms_norm_eps=1e-6, bos_token_id=1, eos_token_id=2, pad_token_id=0,
        tie_word_embeddings=False))
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() > 1:
                param.normal_(0.0, 0.08)
            else:
                param.copy_(1.0 + 0.1 * torch.randn_like(param))
    path = root / "wide-llama"
    model.eval().save_pretrained(path)
    return path


def checkpoint(name: str, root: Path) -> Path:
    path = root / name
    if path.exists():
        return path
    if name in ("llama", "qwen3", "qwen2"):
        return build_family(name, root)
    if name == "wide-llama":
        return _wide_llama(root)
    return build(name, root)


@pytest.fixture
def engines() -> Iterator[list[ModelEngine]]:
    """Engines a test started; their workers are stopped after it."""
    started: list[ModelEngine] = []
    yield started
    for engine in started:
        engine.close()


CASES = ["llama", "qwen3", "wide-llama", "mistral", "gemma2"]


@pytest.mark.parametrize("name", CASES)
def test_tp2_greedy_equals_generate_under_pressure(name: str, root: Path,
                                                   engines: list[ModelEngine]) -> None:
    from transformers import AutoModelForCausalLM

    path = checkpoint(name, root)
    features = ATTENTION.get(name)
    # The same 32 blocks as TP=1 has: a rank's block holds half the KV heads.
    budget = kv_bytes_per_block(path, 4, features) * 33 // 2
    engine = pressure_engine(path, features, kv_cache_memory_bytes=budget, **TP)
    engines.append(engine)
    assert engine.num_blocks == 32
    workload = pressure_workload(seed=11)
    outputs = run_to_completion(engine, workload)
    hf = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    for rid, prompt, params in workload:
        assert tokens_of(outputs[rid]) == hf_greedy(hf, prompt, params.max_tokens), rid
    stats = engine.stats()
    assert stats.num_preemptions > 0 and stats.prefix_cache_hits > 0


def test_each_rank_holds_its_slice(root: Path, engines: list[ModelEngine]) -> None:
    path = checkpoint("wide-llama", root)
    whole = make_engine(path, kv_cache_memory_bytes=1 << 22)
    split = make_engine(path, kv_cache_memory_bytes=1 << 21, **TP)
    engines.append(split)
    (one,) = whole.rank_memory
    zero, first = split.rank_memory
    assert (zero.rank, first.rank, first.device) == (0, 1, "cpu")
    assert split.num_blocks == whole.num_blocks  # half the bytes: half the heads per block
    assert zero.kv_cache_bytes == first.kv_cache_bytes == one.kv_cache_bytes // 2
    assert split.model.config.num_kv_heads == 2 and split.model.config.num_heads == 4
    # Layers split in two; embeddings and norms whole on both; the LM head on rank 0 only.
    cfg = json.loads((path / "config.json").read_text())
    hidden, vocab = cfg["hidden_size"], cfg["vocab_size"]
    embed = vocab * hidden * 4
    layers = one.weight_bytes - 2 * embed - hidden * 4  # less embed, LM head, final norm
    norms = cfg["num_hidden_layers"] * 2 * hidden * 4
    assert first.weight_bytes == embed + hidden * 4 + norms + (layers - norms) // 2
    assert zero.weight_bytes == first.weight_bytes + embed


def test_prompt_logprobs_equal_tp1(root: Path, engines: list[ModelEngine]) -> None:
    path = checkpoint("qwen3", root)
    params = p.SamplingParams(max_tokens=4, temperature=0.0, logprobs=3, prompt_logprobs=3)
    prompt = pressure_workload(seed=2)[6][1]
    whole = run_to_completion(make_engine(path), [("a", prompt, params)])["a"]
    split_engine = make_engine(path, **TP)
    engines.append(split_engine)
    split = run_to_completion(split_engine, [("a", prompt, params)])["a"]
    assert tokens_of(split) == tokens_of(whole)
    want, got = whole[0].prompt_logprobs, split[0].prompt_logprobs
    assert want is not None and got is not None and len(got) == len(want) == len(prompt) - 1
    for w, g in zip(want, got, strict=True):
        assert (g.token_id, g.top_token_ids) == (w.token_id, w.top_token_ids)
        # A prompt token far down the distribution may swap places with a neighbour whose
        # logit differs in the last bits: the all-reduce sums in another order.
        assert abs(g.rank - w.rank) <= 1
        assert [g.logprob, *g.top_logprobs] == pytest.approx([w.logprob, *w.top_logprobs],
                                                             abs=1e-4)


def _refusal(path: Path, **settings: Any) -> str:
    from engine.process.handshake import build_backend

    config = EngineConfig(model=str(path), device="cpu", dtype="float32", enforce_eager=True,
                          **settings)
    with pytest.raises(ConfigError) as caught:
        build_backend(config)
    return " ".join(str(caught.value).split())


def test_what_cannot_be_split_is_refused(root: Path, tmp_path: Path) -> None:
    # Qwen2's tiny model has one KV head.
    assert ("tensor_parallel_size=2 does not divide this model (num_attention_heads=4, "
            "num_key_value_heads=1, intermediate_size=160); allowed: 1") in _refusal(
        checkpoint("qwen2", root), **TP)
    assert ("tensor_parallel_size=3 does not divide this model (num_attention_heads=8, "
            "num_key_value_heads=4, intermediate_size=96); allowed: 1, 2, 4") in _refusal(
        checkpoint("wide-llama", root), tensor_parallel_size=3)
    # transformers' plans: none at all (StableLM), or a style the backend does not split.
    assert ("StableLmConfig has no base_model_tp_plan to split it by; allowed: 1"
            in _refusal(checkpoint("stablelm", root), **TP))
    assert ("Phi3Config's base_model_tp_plan uses colwise_gather_output, "
            "rowwise_split_input; the transformers backend splits colwise, rowwise, "
            "replicated_with_grad_allreduce only") in _refusal(checkpoint("phi3", root), **TP)
    with pytest.raises(ConfigError, match="tensor_parallel_size=2; allowed: 1 with --mock"):
        EngineConfig(model="m", mock=True, **TP).validate()


def test_an_encoder_is_not_split(tmp_path: Path) -> None:
    from tests.engine.encoder_kit import build_bert_st

    path = build_bert_st(tmp_path)
    assert "tensor_parallel_size=2; allowed: 1 for an encoder" in _refusal(path, **TP)


def test_close_stops_the_workers(root: Path) -> None:
    engine = make_engine(checkpoint("llama", root), **TP)
    assert engine.workers is not None
    procs = list(engine.workers.processes.values())
    assert all(proc.poll() is None for proc in procs)
    engine.close()
    assert [proc.returncode for proc in procs] == [0]  # it stopped on Stop, not a kill


def test_a_missing_checkpoint_file_fails_both_ranks_cleanly(root: Path, tmp_path: Path) -> None:
    """Rank 0 fails before any collective; its workers are gone when the error surfaces."""
    broken = tmp_path / "broken"
    shutil.copytree(checkpoint("llama", root), broken)
    (broken / "model.safetensors").unlink()
    before = _workers()
    message = " ".join(_any_refusal(broken, **TP).split())
    assert "no *.safetensors weights" in message
    assert _workers() == before


def _any_refusal(path: Path, **settings: Any) -> str:
    with pytest.raises(Exception) as caught:  # noqa: PT011 - the message is what is checked
        make_engine(path, **settings)
    return str(caught.value)


def _workers() -> set[int]:
    """Worker processes of this test process still alive."""
    import os

    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if ppid == os.getpid() and b"engine.runtime.parallel.worker" in cmd:
            found.add(int(entry))
    return found


def test_a_model_that_fits_only_when_split(root: Path, engines: list[ModelEngine],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Each rank's device holds less than the whole model (VRS_DEVICE_MEMORY): TP=1 is
    refused with the numbers and the size that fits; TP=2 is served."""
    path = checkpoint("wide-llama", root)
    from engine.runtime.parallel.memory import human, rank_weights

    whole, = rank_weights(path, "vrs", torch.float32, 1)
    halves = rank_weights(path, "vrs", torch.float32, 2)
    assert halves[0] > halves[1] and max(halves) < whole
    loaded = make_engine(path, kv_cache_memory_bytes=1 << 21)
    assert whole == loaded.rank_memory[0].weight_bytes  # the estimate is what loading takes
    monkeypatch.setenv("VRS_DEVICE_MEMORY", str(max(halves) + 1024))
    message = " ".join(_refusal(path).split())
    assert (f"the model's weights need {human(whole)} on a rank at tensor_parallel_size=1, "
            f"more than the {human(max(halves) + 1024)} a rank may use (VRS_DEVICE_MEMORY="
            ) in message
    assert f"; at tensor_parallel_size=2 a rank needs {human(max(halves))}" in message
    split = make_engine(path, kv_cache_memory_bytes=1 << 21, **TP)
    engines.append(split)
    assert [r.weight_bytes for r in split.rank_memory] == halves


def test_embeddings_equal_tp1(tmp_path: Path, engines: list[ModelEngine]) -> None:
    """A decoder's pooling (Qwen3 embeddings, last-token) reads rank 0's all-reduced hidden
    states: the vectors equal TP=1's."""
    from tests.engine.pooling_kit import build_pooling_model

    path = build_pooling_model("embed", tmp_path)

    def embed(engine: ModelEngine) -> dict[str, list[float]]:
        assert engine.pooler is not None
        task = engine.pooler.spec.tasks[0]
        vectors: dict[str, list[float]] = {}
        for i in range(3):
            request = p.EngineCoreRequest(f"q{i}", list(range(3, 8 + 9 * i)),
                                          p.SamplingParams(max_tokens=1), 0.0,
                                          pooling_params=p.PoolingParams(task=task))
            assert engine.add_request(request) == []
        while engine.has_unfinished_requests():
            for out in engine.step():
                assert out.pooling_output is not None, out
                vectors[out.request_id] = list(out.pooling_output)
        return vectors

    whole = embed(make_engine(path))
    split_engine = make_engine(path, **TP)
    engines.append(split_engine)
    split = embed(split_engine)
    assert sorted(split) == ["q0", "q1", "q2"]
    for rid, vector in whole.items():
        assert split[rid] == pytest.approx(vector, abs=1e-5), rid
