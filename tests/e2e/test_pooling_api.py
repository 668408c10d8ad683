"""Pooling models served end to end, on the real engine, by both frontends: a Qwen3
embedding model, a causal LM as a yes/no reranker, and BERT embeddings, cross-encoder and
classifier. The openai SDK's ``embeddings.create`` unchanged (float, and its default
base64) against sentence-transformers' ``encode()``; rerank, score and classify against
transformers' own forward; both frontends answering alike; the runner refusing the other
kind of request; and a load of 512 concurrent requests, a third of them cancelled, after
which every answer was right, the load is back to 0 and memory is flat."""

from __future__ import annotations

import asyncio
import base64
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import torch

from tests.e2e.servers import MODEL, ROUTE_MODES, Server, wait_until
from tests.engine.encoder_kit import build_bert_st, build_classifier
from tests.engine.encoder_kit import texts as encoder_texts
from tests.engine.pooling_kit import build_pooling_model

pytestmark = pytest.mark.e2e

TEXTS = ["hello world", "The quick brown fox jumps over the lazy dog. " * 5,
         "向量检索 🚀 embeddings", "a", "Retrieval is half of what people run."]
ARGS = ("--dtype", "float32", "--max-num-batched-tokens", "512")


@pytest.fixture(scope="module")
def pooling_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("pooling-models")
    dirs = {kind: build_pooling_model(kind, root) for kind in ("embed", "rerank")}
    dirs["bert-st"] = build_bert_st(root)
    dirs["cross-encoder"] = build_classifier(root, "bert", 1)
    dirs["classifier"] = build_classifier(root, "bert", 3)
    return dirs


def _start(kind: str, model_dir: Path, root: Path, *extra: str) -> dict[str, Server]:
    return {mode: Server(mode, model_dir, root / f"{kind}-{mode}.log", mock=False,
                         max_model_len=None, cli_args=(*ARGS, *extra))
            for mode in ROUTE_MODES}


def _stop(servers: dict[str, Server]) -> None:
    for server in servers.values():
        assert server.stop() == 0, server.log()
        server.assert_all_gone()


@pytest.fixture(scope="module")
def embed_servers(pooling_dirs: dict[str, Path],
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Server]]:
    servers = _start("embed", pooling_dirs["embed"], tmp_path_factory.mktemp("embed"))
    yield servers
    _stop(servers)


@pytest.fixture(scope="module")
def rerank_servers(pooling_dirs: dict[str, Path],
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Server]]:
    servers = _start("rerank", pooling_dirs["rerank"], tmp_path_factory.mktemp("rerank"),
                     "--convert", "score")
    yield servers
    _stop(servers)


@pytest.fixture(scope="module")
def expected(pooling_dirs: dict[str, Path]) -> dict[str, list[float]]:
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(pooling_dirs["embed"]), device="cpu")
    return {text: vector.tolist() for text, vector in zip(TEXTS, st.encode(TEXTS),
                                                           strict=True)}


def _cosine(a: Any, b: Any) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.mark.parametrize("mode", ROUTE_MODES)
def test_openai_sdk_embeddings(embed_servers: dict[str, Server],
                               expected: dict[str, list[float]], mode: str) -> None:
    client = embed_servers[mode].client()
    for fmt in ("float", None):  # None: the SDK asks for base64 and decodes it itself
        kwargs: dict[str, Any] = {} if fmt is None else {"encoding_format": fmt}
        answer = client.embeddings.create(model=MODEL, input=TEXTS, **kwargs)
        assert [d.index for d in answer.data] == list(range(len(TEXTS)))
        for item, text in zip(answer.data, TEXTS, strict=True):
            assert _cosine(item.embedding, expected[text]) >= 0.9999, (fmt, text)
        assert answer.usage.prompt_tokens == answer.usage.total_tokens > len(TEXTS)
    single = client.embeddings.create(model=MODEL, input=TEXTS[2], dimensions=16,
                                      encoding_format="float")
    assert len(single.data[0].embedding) == 16


def _plain(value: Any, packed: bool) -> Any:
    """``value`` without ids and timestamps, base64 vectors (``packed``) decoded."""
    if isinstance(value, dict):
        return {k: (np.frombuffer(base64.b64decode(v), dtype="<f4").tolist()
                    if packed and k == "embedding" else _plain(v, packed))
                for k, v in value.items() if k not in ("id", "created")}
    if isinstance(value, list):
        return [_plain(v, packed) for v in value]
    return value


def _close(value: Any) -> Any:
    """A plain value with its floats wrapped for a close comparison: each frontend's
    engine batches the requests its own way, and a float32 matmul's rounding depends on
    the batch."""
    if isinstance(value, dict):
        return {k: _close(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_close(v) for v in value]
    if isinstance(value, float):
        return pytest.approx(value, rel=1e-5, abs=1e-6)
    return value


BODIES = [
    ("/v1/embeddings", {"model": MODEL, "input": TEXTS}),
    ("/v1/embeddings", {"model": MODEL, "input": [[5, 6, 7], [8, 9]], "dimensions": 8}),
    ("/v1/embeddings", {"model": MODEL, "input": TEXTS[1], "encoding_format": "base64",
                        "truncate_prompt_tokens": 7}),
    ("/v1/embeddings", {"model": MODEL, "input": "x", "use_activation": False}),
    ("/pooling", {"model": MODEL, "input": TEXTS[:2]}),
    ("/score", {"model": MODEL, "text_1": TEXTS[0], "text_2": TEXTS[1:3]}),
    ("/rerank", {"model": MODEL, "query": TEXTS[0], "documents": TEXTS, "top_n": 3}),
    ("/invocations", {"model": MODEL, "input": TEXTS[:2]}),
    ("/invocations", {"model": MODEL, "query": TEXTS[0], "documents": TEXTS[1:3]}),
]


def test_frontends_answer_alike(embed_servers: dict[str, Server]) -> None:
    for path, body in BODIES:
        answers = {mode: httpx.post(f"{server.url}{path}", json=body, timeout=60)
                   for mode, server in embed_servers.items()}
        rust, python = (answers[m] for m in ROUTE_MODES)
        assert rust.status_code == python.status_code == 200, (path, rust.text, python.text)
        packed = body.get("encoding_format") == "base64"
        assert _close(_plain(rust.json(), packed)) == _plain(python.json(), packed), (
            path, body)


REFUSED = [
    ("/v1/embeddings", {"model": MODEL, "input": []}),
    ("/v1/embeddings", {"model": MODEL, "input": "x", "encoding_format": "hex"}),
    ("/v1/embeddings", {"model": MODEL, "input": "x", "normalize": True}),
    ("/v1/embeddings", {"model": MODEL, "input": "x", "dimensions": 100}),
    ("/v1/embeddings", {"model": MODEL, "input": [[1, 2]] * 2 + [list(range(600))]}),
    ("/classify", {"model": MODEL, "input": "x"}),
    ("/rerank", {"model": MODEL, "query": "q"}),
]


def test_frontends_refuse_alike(embed_servers: dict[str, Server]) -> None:
    for path, body in REFUSED:
        answers = [httpx.post(f"{embed_servers[m].url}{path}", json=body, timeout=60)
                   for m in ROUTE_MODES]
        assert answers[0].status_code == answers[1].status_code == 400, (path, body)
        rust, python = (a.json()["error"] for a in answers)
        assert rust == python, (path, body)


def test_base64_is_float32_le(embed_servers: dict[str, Server]) -> None:
    for server in embed_servers.values():
        floats = httpx.post(f"{server.url}/v1/embeddings", timeout=60, json={
            "model": MODEL, "input": TEXTS[0], "encoding_format": "float"}).json()
        packed = httpx.post(f"{server.url}/v1/embeddings", timeout=60, json={
            "model": MODEL, "input": TEXTS[0], "encoding_format": "base64"}).json()
        raw = base64.b64decode(packed["data"][0]["embedding"])
        decoded = np.frombuffer(raw, dtype="<f4").tolist()
        assert decoded == pytest.approx(floats["data"][0]["embedding"], abs=0)


@pytest.mark.parametrize("mode", ROUTE_MODES)
def test_runner_refuses_generation(embed_servers: dict[str, Server], mode: str) -> None:
    url = embed_servers[mode].url
    chat = httpx.post(f"{url}/v1/chat/completions", timeout=30, json={
        "model": MODEL, "messages": [{"role": "user", "content": "hi"}]})
    assert chat.status_code == 400 and "pooling" in chat.json()["error"]["message"]
    too_long = httpx.post(f"{url}/v1/embeddings", timeout=30, json={
        "model": MODEL, "input": [list(range(5, 600))]})
    assert too_long.status_code == 400 and "512" in too_long.json()["error"]["message"]


@pytest.mark.parametrize("mode", ROUTE_MODES)
def test_rerank_equals_transformers(rerank_servers: dict[str, Server],
                                    pooling_dirs: dict[str, Path], mode: str) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_dir = pooling_dirs["rerank"]
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    hf = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    yes, no = tokenizer.convert_tokens_to_ids("yes"), tokenizer.convert_tokens_to_ids("no")
    query, documents = "what is a fox?", TEXTS[:4]
    answer = httpx.post(f"{rerank_servers[mode].url}/rerank", timeout=60, json={
        "model": MODEL, "query": query, "documents": documents, "return_documents": True})
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    scores = [r["relevance_score"] for r in results]
    assert scores == sorted(scores, reverse=True)
    for result in results:
        ids = tokenizer(query, documents[result["index"]])["input_ids"]
        with torch.no_grad():
            last = hf(torch.tensor([ids])).logits[0, -1]
        want = torch.softmax(torch.stack([last[no], last[yes]]), -1)[1].item()
        assert result["relevance_score"] == pytest.approx(want, abs=1e-5)
        assert result["document"]["text"] == documents[result["index"]]


def _rss_kib(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        total += next(int(line.split()[1]) for line in status.splitlines()
                      if line.startswith("VmRSS:"))
    return total


async def _round(url: str, expected: dict[str, list[float]], seed: int) -> tuple[int, int]:
    """512 concurrent embedding requests, every third cancelled by its client; returns
    (answered, cancelled). Every answer is checked against sentence-transformers'."""
    rng = random.Random(seed)
    limits = httpx.Limits(max_connections=600, max_keepalive_connections=0)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        async def one(i: int) -> bool:
            text = TEXTS[i % len(TEXTS)]
            request = client.post(f"{url}/v1/embeddings",
                                  json={"model": MODEL, "input": text})
            if i % 3 == 0:
                task = asyncio.ensure_future(request)
                await asyncio.sleep(rng.uniform(0.0, 0.05))
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    return False
                response = task.result()
            else:
                response = await request
            assert response.status_code == 200, response.text
            vector = response.json()["data"][0]["embedding"]
            assert _cosine(vector, expected[text]) >= 0.9999, text
            return True

        done = await asyncio.gather(*(one(i) for i in range(512)))
    return sum(done), len(done) - sum(done)


@pytest.mark.parametrize("mode", ROUTE_MODES)
def test_load_with_cancellations(embed_servers: dict[str, Server],
                                 expected: dict[str, list[float]], mode: str) -> None:
    server = embed_servers[mode]

    def idle() -> bool:
        load = httpx.get(f"{server.url}/load", timeout=10).json()["server_load"]
        metrics = httpx.get(f"{server.url}/metrics", timeout=10).text
        gauges = [line for line in metrics.splitlines()
                  if line.startswith(("vllm:num_requests_running", "vllm:num_requests_waiting"))]
        return load == 0 and len(gauges) == 2 and all(
            float(line.rsplit(" ", 1)[1]) == 0 for line in gauges)

    rss: list[int] = []
    for seed in range(3):
        answered, cancelled = asyncio.run(_round(server.url, expected, seed))
        assert answered >= 2 * 512 // 3 and answered + cancelled == 512
        assert wait_until(idle, 20), "the load goes back to 0"
        rss.append(_rss_kib(server.tree()))
    growth_mib = (rss[-1] - rss[0]) / 1024
    assert growth_mib < 64, f"memory grew {growth_mib:.0f} MiB over two rounds: {rss}"


@pytest.fixture(scope="module")
def encoder_servers(pooling_dirs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory,
                    ) -> Iterator[dict[str, dict[str, Server]]]:
    root = tmp_path_factory.mktemp("encoders")
    servers = {kind: _start(kind, pooling_dirs[kind], root)
               for kind in ("bert-st", "cross-encoder", "classifier")}
    yield servers
    for group in servers.values():
        _stop(group)


@pytest.mark.parametrize("mode", ROUTE_MODES)
def test_encoders_equal_their_references(encoder_servers: dict[str, dict[str, Server]],
                                         pooling_dirs: dict[str, Path], mode: str) -> None:
    """A BERT sentence-transformers model (mean pooling, Dense, Normalize) against
    ``encode()``; a BERT cross-encoder's /rerank and /score (the pair tokenized together,
    token_type_ids from the document on) and a 3-class /classify against transformers."""
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    sentences = encoder_texts(6, seed=5)
    st = SentenceTransformer(str(pooling_dirs["bert-st"]), device="cpu")
    client = encoder_servers["bert-st"][mode].client()
    answer = client.embeddings.create(model=MODEL, input=sentences)
    for item, want in zip(answer.data, st.encode(sentences), strict=True):
        assert _cosine(item.embedding, want) >= 0.9999

    model_dir = pooling_dirs["cross-encoder"]
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    hf = AutoModelForSequenceClassification.from_pretrained(model_dir, dtype=torch.float32)
    query, documents = sentences[0], sentences[1:]
    url = encoder_servers["cross-encoder"][mode].url
    reranked = httpx.post(f"{url}/rerank", timeout=60, json={
        "model": MODEL, "query": query, "documents": documents, "top_n": 2}).json()
    assert len(reranked["results"]) == 2
    scored = httpx.post(f"{url}/score", timeout=60, json={
        "model": MODEL, "text_1": query, "text_2": documents}).json()
    with torch.no_grad():
        batch = tokenizer([query] * len(documents), documents, padding=True,
                          return_tensors="pt")
        want = torch.sigmoid(hf(**batch).logits[:, 0]).tolist()
    assert [d["score"] for d in scored["data"]] == pytest.approx(want, abs=1e-5)
    best = sorted(range(len(want)), key=lambda i: -want[i])[:2]
    assert [r["index"] for r in reranked["results"]] == best

    model_dir = pooling_dirs["classifier"]
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    hf = AutoModelForSequenceClassification.from_pretrained(model_dir, dtype=torch.float32)
    url = encoder_servers["classifier"][mode].url
    classified = httpx.post(f"{url}/classify", timeout=60, json={
        "model": MODEL, "input": sentences}).json()
    with torch.no_grad():
        probs = torch.softmax(hf(**tokenizer(sentences, padding=True,
                                             return_tensors="pt")).logits, -1)
    for item, row in zip(classified["data"], probs.tolist(), strict=True):
        assert item["probs"] == pytest.approx(row, abs=1e-5)
        assert item["label"] == f"class_{max(range(3), key=lambda i: row[i])}"
