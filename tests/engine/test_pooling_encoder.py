"""EncoderEngine (engine/runtime/pooling/) driven through add_request / step, against
sentence-transformers' encode() and transformers' own classification forward."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from engine import protocol as p
from engine.runtime.pooling.encoder_engine import EncoderEngine
from tests.engine.encoder_kit import (
    build_bert_st,
    build_classifier,
    build_modernbert_st,
    build_xlmr_st,
    make_encoder_engine,
    texts,
)

pytestmark = pytest.mark.engine

EMBED = p.PoolingParams(task="embed")
DUMMY = p.SamplingParams(max_tokens=1)


@pytest.fixture(scope="module")
def dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("encoders")
    made = {"bert": build_bert_st(root), "xlmr": build_xlmr_st(root, matryoshka=[16, 32]),
            "modernbert": build_modernbert_st(root)}
    for kind in ("bert", "xlmr"):
        for labels in (1, 3):
            made[f"{kind}-cls{labels}"] = build_classifier(root, kind, labels)
    return made


def run(engine: EncoderEngine, requests: list[tuple[str, list[int], p.PoolingParams | None]]
        ) -> dict[str, p.EngineCoreOutput]:
    """Add the requests, step until done; each request's one output by id."""
    outputs: dict[str, p.EngineCoreOutput] = {}
    for rid, prompt, params in requests:
        for out in engine.add_request(p.EngineCoreRequest(rid, prompt, DUMMY, 0.0,
                                                          pooling_params=params)):
            outputs[out.request_id] = out
    steps = 0
    while engine.has_unfinished_requests():
        for out in engine.step():
            assert out.request_id not in outputs, "a second output for one request"
            outputs[out.request_id] = out
        steps += 1
        assert steps < 1000, "no progress"
    return outputs


def tokenize(model_dir: Path, items: list[str]) -> list[list[int]]:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir)(items)["input_ids"]  # type: ignore[no-any-return]


def answers(outputs: dict[str, p.EngineCoreOutput], count: int) -> torch.Tensor:
    for out in outputs.values():
        assert out.finish_reason == "stop" and out.new_token_ids == [], out
    return torch.tensor([outputs[str(i)].pooling_output for i in range(count)])


def assert_same_vectors(got: torch.Tensor, want: torch.Tensor, min_cos: float = 0.9999) -> None:
    assert got.shape == want.shape
    cos = F.cosine_similarity(got, want.float(), dim=-1)
    assert bool((cos >= min_cos).all()), f"cosine {cos.min().item():.6f}"
    torch.testing.assert_close(got, want.float(), atol=1e-4, rtol=1e-3)


@pytest.mark.parametrize("kind", ["bert", "xlmr", "modernbert"])
def test_embeddings_equal_sentence_transformers(dirs: dict[str, Path], kind: str) -> None:
    from sentence_transformers import SentenceTransformer

    items = texts(24, seed=3)
    reference = SentenceTransformer(str(dirs[kind]), device="cpu").encode(
        items, convert_to_tensor=True)
    # A small token budget: several steps, several padded forwards per step.
    engine = make_encoder_engine(dirs[kind], max_num_batched_tokens=160)
    prompts = tokenize(dirs[kind], items)
    outputs = run(engine, [(str(i), ids, EMBED) for i, ids in enumerate(prompts)])
    assert_same_vectors(answers(outputs, len(items)), reference)
    assert all(out.queue_time is not None and out.prefill_time is not None
               for out in outputs.values())


def test_unnormalized_and_matryoshka(dirs: dict[str, Path]) -> None:
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(dirs["xlmr"]), device="cpu")
    items = texts(6, seed=5)
    features = st.tokenize(items)
    with torch.inference_mode():
        for module in list(st)[:-1]:  # all but Normalize
            features = module(features)
    raw = features["sentence_embedding"]
    truncated = st.encode(items, convert_to_tensor=True, truncate_dim=16,
                          normalize_embeddings=True)
    engine = make_encoder_engine(dirs["xlmr"])
    prompts = tokenize(dirs["xlmr"], items)
    unnormalized = p.PoolingParams(task="embed", normalize=False)
    outputs = run(engine, [(str(i), ids, unnormalized) for i, ids in enumerate(prompts)])
    assert_same_vectors(answers(outputs, len(items)), raw)
    short = p.PoolingParams(task="embed", dimensions=16)
    outputs = run(engine, [(str(i), ids, short) for i, ids in enumerate(prompts)])
    assert_same_vectors(answers(outputs, len(items)), truncated)
    refused = run(engine, [("x", prompts[0], p.PoolingParams(task="embed", dimensions=20))])
    assert refused["x"].error_message == (
        "Model 'xlmr-st' only supports Matryoshka dimensions [16, 32], got 20.")


def hf_scores(model_dir: Path, pairs: list[tuple[str, str]], activation: bool) -> torch.Tensor:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, dtype=torch.float32)
    batch = tokenizer([q for q, _ in pairs], [d for _, d in pairs], padding=True,
                      return_tensors="pt")
    with torch.inference_mode():
        logits = model.eval()(**batch).logits
    if not activation:
        return logits
    return torch.sigmoid(logits) if logits.shape[-1] == 1 else torch.softmax(logits, dim=-1)


@pytest.mark.parametrize("name", ["bert-cls1", "bert-cls3", "xlmr-cls1", "xlmr-cls3"])
def test_classify_and_score_equal_transformers(dirs: dict[str, Path], name: str) -> None:
    from transformers import AutoTokenizer

    engine = make_encoder_engine(dirs[name], max_num_batched_tokens=128)
    one = name.endswith("cls1")
    ready = engine.ready(0)
    assert ready.runner == "pooling"
    assert ready.pooling_tasks == (["classify", "score"] if one else ["classify"])
    assert ready.classify_labels == (["LABEL_0"] if one else ["class_0", "class_1", "class_2"])
    queries, docs = texts(10, seed=8, high=8), texts(10, seed=9, high=30)
    pairs = list(zip(queries, docs, strict=True))
    tokenizer = AutoTokenizer.from_pretrained(dirs[name])
    task = "score" if one else "classify"
    for activation in (True, False):
        requests = []
        for i, (query, doc) in enumerate(pairs):
            encoded = tokenizer(query, doc)
            start = len(tokenizer(query)["input_ids"]) if name.startswith("bert") else None
            if start is not None:  # where BERT's token types turn to 1
                assert encoded["token_type_ids"].index(1) == start
            params = p.PoolingParams(task=task, token_type_start=start,
                                     use_activation=None if activation else False)
            requests.append((str(i), encoded["input_ids"], params))
        got = answers(run(engine, requests), len(pairs))
        torch.testing.assert_close(got, hf_scores(dirs[name], pairs, activation),
                                   atol=1e-5, rtol=1e-4)


def test_refusals(dirs: dict[str, Path]) -> None:
    embedder = make_encoder_engine(dirs["bert"])
    classifier = make_encoder_engine(dirs["bert-cls3"])
    ids = tokenize(dirs["bert"], ["the cat sat"])[0]
    out = run(embedder, [
        ("generate", ids, None),
        ("score", ids, p.PoolingParams(task="score")),
        ("dims", ids, p.PoolingParams(task="embed", dimensions=8)),
        ("long", ids * 50, EMBED),
        ("vocab", [*ids, 10_000], EMBED),
        ("empty", [], EMBED),
    ])
    assert {rid: o.error_kind for rid, o in out.items()} == dict.fromkeys(out, "invalid_request")
    assert all(o.finish_reason == "error" for o in out.values())
    assert "is a pooling model (embed): it does not generate text" in str(
        out["generate"].error_message)
    assert out["score"].error_message == "Unsupported task: 'score' Supported tasks: ['embed']"
    assert out["dims"].error_message == (
        "Model 'bert-st' does not support Matryoshka embeddings; dimensions must be unset "
        "(received dimensions=8).")
    assert out["long"].error_message == "prompt (250 tokens) exceeds max_model_len (128)"
    assert out["vocab"].error_message == "prompt token id 10000 is out of range 0..50"
    assert out["empty"].error_message == "the prompt is empty"
    refused = run(classifier, [("e", ids, EMBED), ("s", ids, p.PoolingParams(task="score"))])
    assert refused["e"].error_message == (
        "Unsupported task: 'embed' Supported tasks: ['classify']")
    assert refused["s"].error_kind == "invalid_request"


def test_convert_embed_on_a_classifier_and_bad_converts(dirs: dict[str, Path]) -> None:
    from engine.runtime.loader import ModelLoadError

    engine = make_encoder_engine(dirs["xlmr-cls3"], convert="embed")
    assert engine.ready(0).pooling_tasks == ["embed"]
    ids = tokenize(dirs["xlmr-cls3"], ["the cat sat"])[0]
    vector = run(engine, [("a", ids, EMBED)])["a"].pooling_output
    assert vector is not None and len(vector) == 64
    assert abs(sum(v * v for v in vector) - 1.0) < 1e-5  # vLLM's default: normalized
    with pytest.raises(ModelLoadError, match="needs a classification head"):
        make_encoder_engine(dirs["bert"], convert="classify")
    with pytest.raises(ModelLoadError, match="num_labels 1"):
        make_encoder_engine(dirs["bert-cls3"], convert="score")


def test_abort_stats_and_utility(dirs: dict[str, Path]) -> None:
    engine = make_encoder_engine(dirs["bert"])
    ids = tokenize(dirs["bert"], ["the cat sat on the mat"])[0]
    for rid in ("a", "b", "c"):
        assert engine.add_request(p.EngineCoreRequest(rid, ids, DUMMY, 0.0,
                                                      pooling_params=EMBED)) == []
    dup = engine.add_request(p.EngineCoreRequest("a", ids, DUMMY, 0.0, pooling_params=EMBED))
    assert dup[0].error_message == "request id 'a' is already in use"
    assert engine.stats().num_waiting == 3
    aborted = engine.abort_requests(["b", "zzz"])
    assert [(o.request_id, o.finish_reason) for o in aborted] == [("b", "abort")]
    done = engine.step()
    assert sorted(o.request_id for o in done) == ["a", "c"]
    assert not engine.has_unfinished_requests() and engine.stats().num_waiting == 0
    assert engine.utility("ping", []) == "pong"
    info: dict[str, Any] = engine.utility("get_model_info", [])
    assert (info["runner"], info["pooling_method"], info["dtype"]) == ("pooling", "mean",
                                                                       "float32")
    if torch.backends.mkldnn.is_available():  # the linears run on the packed oneDNN matmul
        assert info["matmuls"].startswith("onednn-packed"), info
    with pytest.raises(ValueError, match="unknown utility method"):
        engine.utility("nope", [])


def test_auto_dtype_stays_close(dirs: dict[str, Path]) -> None:
    """dtype auto (bf16 on a CPU with native bf16, else float32) is near float32's answer."""
    from sentence_transformers import SentenceTransformer

    items = texts(8, seed=11)
    reference = SentenceTransformer(str(dirs["bert"]), device="cpu").encode(
        items, convert_to_tensor=True)
    engine = make_encoder_engine(dirs["bert"], dtype="auto")
    outputs = run(engine, [(str(i), ids, EMBED)
                           for i, ids in enumerate(tokenize(dirs["bert"], items))])
    cos = F.cosine_similarity(answers(outputs, len(items)), reference, dim=-1)
    assert bool((cos >= 0.99).all()), cos


def test_generate_runner_is_refused(dirs: dict[str, Path]) -> None:
    from engine.runtime.loader import ModelLoadError

    with pytest.raises(ModelLoadError, match="cannot generate: serve it with --runner pooling"):
        make_encoder_engine(dirs["bert"], runner="generate")


def test_encoder_through_the_handshake_and_zmq_loop(dirs: dict[str, Path],
                                                    tmp_path: Path) -> None:
    """engine/process/handshake.py builds an EncoderEngine for an encoder checkpoint; its
    answers come back over the real sockets."""
    import time

    import zmq

    from tests.engine_threads import start_engine_threads

    input_addr, output_addr = f"ipc://{tmp_path}/in", f"ipc://{tmp_path}/out"
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    router, pull = ctx.socket(zmq.ROUTER), ctx.socket(zmq.PULL)
    router.bind(input_addr)
    pull.bind(output_addr)
    engines = start_engine_threads(
        {"model": str(dirs["bert-cls1"]), "device": "cpu", "dtype": "float32"},
        input_addr, output_addr)
    try:
        ready = engines.readies[0]
        assert (ready.runner, ready.pooling_tasks) == ("pooling", ["classify", "score"])
        identity, kind, _ = router.recv_multipart()
        assert kind[0] == p.HandshakeKind.READY
        ids = tokenize(dirs["bert-cls1"], ["the cat sat", "a red bird"])
        score = p.PoolingParams(task="score")
        requests = [p.EngineCoreRequest("s0", ids[0], DUMMY, time.time(), pooling_params=score),
                    p.EngineCoreRequest("s1", ids[1], DUMMY, time.time(), pooling_params=score),
                    p.EngineCoreRequest("gen", ids[0], DUMMY, time.time())]
        for request in requests:
            router.send_multipart([identity, bytes([p.RequestType.ADD]), p.encode(request)])
        finished: dict[str, p.EngineCoreOutput] = {}
        deadline = time.monotonic() + 60
        while len(finished) < 3:
            assert time.monotonic() < deadline, f"timed out; finished {sorted(finished)}"
            if pull.poll(1000):
                for out in p.OUTPUTS_DECODER.decode(pull.recv()).outputs:
                    finished[out.request_id] = out
        got = torch.tensor([finished[rid].pooling_output for rid in ("s0", "s1")])
        assert got.shape == (2, 1)
        assert finished["gen"].error_kind == "invalid_request"
        single = hf_single(dirs["bert-cls1"], ["the cat sat", "a red bird"])
        torch.testing.assert_close(got, single, atol=1e-5, rtol=1e-4)
    finally:
        engines.stop()
        ctx.destroy(linger=0)


def hf_single(model_dir: Path, items: list[str]) -> torch.Tensor:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, dtype=torch.float32)
    with torch.inference_mode():
        logits = model.eval()(**tokenizer(items, padding=True, return_tensors="pt")).logits
    return torch.sigmoid(logits)


def test_a_checkpoint_missing_weights_is_refused(dirs: dict[str, Path], tmp_path: Path) -> None:
    """A classifier without its head's weights would answer random scores: a load error."""
    import shutil

    from safetensors.torch import load_file, save_file

    from engine.runtime.loader import ModelLoadError

    broken = tmp_path / "headless"
    shutil.copytree(dirs["bert-cls3"], broken)
    weights = load_file(broken / "model.safetensors")
    save_file({k: v for k, v in weights.items() if not k.startswith("classifier.")},
              broken / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ModelLoadError, match="classifier.bias, classifier.weight"):
        make_encoder_engine(broken)


def test_a_config_without_architectures_is_read_by_its_model_type(dirs: dict[str, Path],
                                                                  tmp_path: Path) -> None:
    """Older BERT checkpoints name no ``architectures``: the model_type picks the family."""
    import json
    import shutil

    from sentence_transformers import SentenceTransformer

    model_dir = tmp_path / "bert-no-architectures"
    shutil.copytree(dirs["bert"], model_dir)
    config = json.loads((model_dir / "config.json").read_text())
    config.pop("architectures", None)
    (model_dir / "config.json").write_text(json.dumps(config))
    items = texts(4, seed=9)
    reference = SentenceTransformer(str(model_dir), device="cpu").encode(
        items, convert_to_tensor=True)
    engine = make_encoder_engine(model_dir)
    outputs = run(engine, [(str(i), ids, EMBED)
                           for i, ids in enumerate(tokenize(model_dir, items))])
    assert_same_vectors(answers(outputs, len(items)), reference)
