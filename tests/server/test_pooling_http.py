"""The pooling routes over HTTP (the Python server in-process, a pooling mock engine):
/v1/embeddings (every input form, base64, the OpenAI SDK), /pooling, /classify, /score and
/rerank (a cross-encoder, and cosine similarity on an embedding model), their errors, the
runner mismatch both ways, request ids, the queue and /metrics. The expected vectors are
the mock's documented formulas (engine/mock/pooling.py) over ids tokenized independently."""

from __future__ import annotations

import base64
import math
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from engine import protocol as p
from engine.mock.pooling import answer, features
from tests.server.server_kit import MAX_MODEL_LEN, MODEL, PythonServer

pytestmark = pytest.mark.server

CHAT = [{"role": "user", "content": "hello there"}]


@pytest.fixture(scope="module")
def embed_server(demo_model: Path, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[PythonServer]:
    server = PythonServer(demo_model, tmp_path_factory.mktemp("embed") / "server.log",
                          engine={"runner": "pooling", "convert": "embed"},
                          max_num_queued_reqs=4, http={"enable_request_id_headers": True})
    yield server
    assert server.stop() == 0, server.log()


@pytest.fixture(scope="module")
def score_server(demo_model: Path, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[PythonServer]:
    server = PythonServer(demo_model, tmp_path_factory.mktemp("score") / "server.log",
                          engine={"runner": "pooling", "convert": "score"})
    yield server
    assert server.stop() == 0, server.log()


def ids_of(server: PythonServer, body: dict[str, Any]) -> list[int]:
    answer_ = server.post("/tokenize", body)
    assert answer_.status_code == 200, answer_.text
    return list(answer_.json()["tokens"])


def embedding(ids: list[int], **params: Any) -> list[float]:
    return answer(p.PoolingParams("embed", **params), ids)


def post_ok(server: PythonServer, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = server.post(path, {"model": MODEL, **body})
    assert response.status_code == 200, response.text
    return dict(response.json())


def error_of(server: PythonServer, path: str, body: dict[str, Any]) -> str:
    """The 400's message (checked to be vLLM's error body)."""
    response = server.post(path, body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["type"], error["code"]) == ("BadRequestError", 400)
    return str(error["message"])


def test_embeddings_shape_and_vector(embed_server: PythonServer) -> None:
    answer_ = post_ok(embed_server, "/v1/embeddings", {"input": "the cat sat"})
    assert re.fullmatch(r"embd-[0-9a-f]{32}", answer_["id"])
    assert (answer_["object"], answer_["model"]) == ("list", MODEL)
    assert isinstance(answer_["created"], int)
    ids = ids_of(embed_server, {"prompt": "the cat sat"})
    [item] = answer_["data"]
    assert (item["index"], item["object"]) == (0, "embedding")
    assert item["embedding"] == pytest.approx(embedding(ids), abs=1e-6)
    assert math.isclose(float(np.linalg.norm(item["embedding"])), 1.0, rel_tol=1e-5)
    assert answer_["usage"] == {"prompt_tokens": len(ids), "total_tokens": len(ids),
                                "completion_tokens": 0, "prompt_tokens_details": None,
                                "completion_tokens_details": None}


def test_every_input_form(embed_server: PythonServer) -> None:
    texts = ["one two", "three"]
    ids = [ids_of(embed_server, {"prompt": t}) for t in texts]
    expected = [embedding(i) for i in ids]
    for form in (texts, ids):
        data = post_ok(embed_server, "/v1/embeddings", {"input": form})["data"]
        assert [d["index"] for d in data] == [0, 1]
        for got, want in zip(data, expected, strict=True):
            assert got["embedding"] == pytest.approx(want, abs=1e-6)
    single = post_ok(embed_server, "/v1/embeddings", {"input": ids[0]})
    assert single["data"][0]["embedding"] == pytest.approx(expected[0], abs=1e-6)
    assert single["usage"]["prompt_tokens"] == len(ids[0])


def test_chat_messages_are_rendered_with_the_template(embed_server: PythonServer) -> None:
    chat_ids = ids_of(embed_server, {"messages": CHAT, "add_generation_prompt": False})
    want = embedding(chat_ids)
    for body in ({"messages": CHAT}, {"input": CHAT}):
        got = post_ok(embed_server, "/v1/embeddings", body)
        assert got["data"][0]["embedding"] == pytest.approx(want, abs=1e-6)
        assert got["usage"]["prompt_tokens"] == len(chat_ids)
    other = [{"role": "user", "content": "bye"}]
    other_ids = ids_of(embed_server, {"messages": other, "add_generation_prompt": False})
    for body in ({"messages": [CHAT, other]}, {"input": [CHAT, other]}):
        both = post_ok(embed_server, "/v1/embeddings", body)["data"]
        assert [d["index"] for d in both] == [0, 1]
        assert both[0]["embedding"] == pytest.approx(want, abs=1e-6)
        assert both[1]["embedding"] == pytest.approx(embedding(other_ids), abs=1e-6)


def test_dimensions_and_use_activation(embed_server: PythonServer) -> None:
    ids = ids_of(embed_server, {"prompt": "matryoshka"})
    cut = post_ok(embed_server, "/v1/embeddings", {"input": "matryoshka", "dimensions": 8})
    assert cut["data"][0]["embedding"] == pytest.approx(embedding(ids, dimensions=8), abs=1e-6)
    raw = post_ok(embed_server, "/v1/embeddings", {"input": "matryoshka",
                                                    "use_activation": False})
    assert raw["data"][0]["embedding"] == pytest.approx(list(features(ids)), abs=1e-6)


def test_base64_decodes_to_the_float_vector(embed_server: PythonServer) -> None:
    body = {"input": ["a b c", "d"]}
    floats = post_ok(embed_server, "/v1/embeddings", body)["data"]
    b64 = post_ok(embed_server, "/v1/embeddings", {**body, "encoding_format": "base64"})["data"]
    for plain, encoded in zip(floats, b64, strict=True):
        assert isinstance(encoded["embedding"], str)
        vector = np.frombuffer(base64.b64decode(encoded["embedding"]), dtype="<f4")
        assert vector.tolist() == pytest.approx(plain["embedding"], abs=1e-7)
    big = post_ok(embed_server, "/v1/embeddings", {**body, "encoding_format": "base64",
                                                    "endianness": "big"})["data"][0]
    assert np.frombuffer(base64.b64decode(big["embedding"]), dtype=">f4").tolist() == \
        pytest.approx(floats[0]["embedding"], abs=1e-7)


def test_the_openai_sdk_reads_both_encodings(embed_server: PythonServer) -> None:
    import openai

    client = openai.OpenAI(base_url=f"{embed_server.url}/v1", api_key="none")
    want = post_ok(embed_server, "/v1/embeddings", {"input": ["x y", "z"]})["data"]
    got = client.embeddings.create(model=MODEL, input=["x y", "z"], encoding_format="float")
    assert [d.index for d in got.data] == [0, 1]
    for item, plain in zip(got.data, want, strict=True):
        assert item.embedding == pytest.approx(plain["embedding"], abs=1e-7)
    assert got.usage.prompt_tokens == got.usage.total_tokens > 0
    # Asked for base64 by name, the SDK hands the string over as it came.
    b64 = client.embeddings.create(model=MODEL, input="x y", encoding_format="base64")
    encoded = b64.data[0].embedding
    assert isinstance(encoded, str)
    assert np.frombuffer(base64.b64decode(encoded), dtype="<f4").tolist() == pytest.approx(
        want[0]["embedding"], abs=1e-7)
    # Unasked, the SDK asks for base64 and decodes it as float32 itself.
    default = client.embeddings.create(model=MODEL, input="x y")
    assert default.data[0].embedding == pytest.approx(want[0]["embedding"], abs=1e-7)


@pytest.mark.parametrize(("body", "words"), [
    ({"input": ""}, "must not contain an empty prompt"),
    ({"input": []}, "`input` must not be empty"),
    ({}, "`input` is required"),
    ({"input": [1, "a"]}, "`input` must be a string, a list of strings"),
    ({"input": list(range(3, MAX_MODEL_LEN + 4))},
     f"maximum context length is {MAX_MODEL_LEN} tokens"),
    ({"input": "x", "encoding_format": "bytes"}, "`encoding_format` must be `float` or"),
    ({"input": "x", "embed_dtype": "int8"}, "`embed_dtype` must be one of"),
    ({"input": "x", "bogus": 1}, "unknown field `bogus`"),
    ({"input": "x", "normalize": False}, "`normalize` was removed; use `use_activation`"),
    ({"input": "x", "dimensions": 100}, "dimensions 100 is not supported"),
    ({"input": "x", "dimensions": 0}, "`dimensions` must be at least 1"),
    ({"input": "x", "truncate_prompt_tokens": -2}, "`truncate_prompt_tokens` must be -1"),
    ({"input": [[1], [2], [3], [4], [5]]}, "makes 5 engine requests"),
    ({"input": "x", "truncate_prompt_tokens": MAX_MODEL_LEN + 1},
     f"cannot be greater than max_model_len = {MAX_MODEL_LEN}"),
    ({"input": "x", "priority": 1}, "Priority scheduling is not enabled"),
    ({"input": "x", "cache_salt": ""}, "'cache_salt' must be a non-empty string"),
])
def test_embeddings_errors(embed_server: PythonServer, body: dict[str, Any],
                           words: str) -> None:
    assert words in error_of(embed_server, "/v1/embeddings", body)


def test_truncation_brings_a_long_prompt_within_the_context(embed_server: PythonServer) -> None:
    long = list(range(3, MAX_MODEL_LEN + 4))
    for keep, side, want in ((10, None, long[:10]), (10, "left", long[-10:]),
                             (-1, None, long[:MAX_MODEL_LEN])):
        body: dict[str, Any] = {"input": long, "truncate_prompt_tokens": keep}
        if side:
            body["truncation_side"] = side
        got = post_ok(embed_server, "/v1/embeddings", body)
        assert got["usage"]["prompt_tokens"] == len(want)
        assert got["data"][0]["embedding"] == pytest.approx(embedding(want), abs=1e-6)


def test_a_wrong_model_is_404(embed_server: PythonServer) -> None:
    response = embed_server.post("/v1/embeddings", {"model": "other", "input": "x"})
    assert response.status_code == 404


def test_request_ids_and_metrics(embed_server: PythonServer) -> None:
    def count() -> int:
        text = httpx.get(f"{embed_server.url}/metrics").text
        found = re.search(r'^vrs:http_requests_total\{endpoint="/v1/embeddings",'
                          r'status="200"\} (\d+)$', text, re.M)
        return int(found[1]) if found else 0

    before = count()
    response = httpx.post(f"{embed_server.url}/v1/embeddings", json={"input": "x"},
                          headers={"x-request-id": "mine-7"})
    assert response.json()["id"] == "embd-mine-7"
    assert response.headers["x-request-id"] == "mine-7"
    post_ok(embed_server, "/v1/embeddings", {"input": ["a", "b"]})
    assert count() == before + 2


def test_pooling_route(embed_server: PythonServer, score_server: PythonServer) -> None:
    ids = ids_of(embed_server, {"prompt": "pool me"})
    got = post_ok(embed_server, "/pooling", {"input": "pool me"})
    assert re.fullmatch(r"pooling-[0-9a-f]{32}", got["id"])
    assert got["data"][0]["object"] == "pooling"
    assert got["data"][0]["data"] == pytest.approx(embedding(ids), abs=1e-6)
    probs = post_ok(score_server, "/pooling", {"input": "pool me", "task": "classify"})
    assert probs["data"][0]["data"] == pytest.approx(
        answer(p.PoolingParams("classify"), ids), abs=1e-6)
    assert "`task` must be one of" in error_of(score_server, "/pooling",
                                               {"input": "x", "task": "plugin"})
    assert "does not serve the `classify` task" in error_of(
        embed_server, "/pooling", {"input": "x", "task": "classify"})


def test_classify(score_server: PythonServer) -> None:
    texts = ["good", "bad movie"]
    got = post_ok(score_server, "/classify", {"input": texts})
    assert re.fullmatch(r"classify-[0-9a-f]{32}", got["id"])
    for item, text in zip(got["data"], texts, strict=True):
        want = answer(p.PoolingParams("classify"), ids_of(score_server, {"prompt": text}))
        assert item["probs"] == pytest.approx(want, abs=1e-6)
        assert item["num_classes"] == 2
        assert item["label"] == f"LABEL_{int(np.argmax(want))}"
    raw = post_ok(score_server, "/classify", {"input": "good", "use_activation": False})
    logits = raw["data"][0]["probs"]
    assert sum(np.exp(logits) / np.exp(logits).sum()) == pytest.approx(1.0)
    assert got["usage"]["prompt_tokens"] == sum(
        len(ids_of(score_server, {"prompt": t})) for t in texts)


def pair_score(demo_model: Path, query: str, document: str) -> tuple[float, int]:
    """The cross-encoder's score of a pair tokenized as transformers does, and its tokens."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(demo_model))
    encoding = tokenizer(query, document)
    start = encoding.sequence_ids().index(1)
    ids = list(encoding["input_ids"])
    return answer(p.PoolingParams("score", token_type_start=start), ids)[0], len(ids)


def test_score_on_a_cross_encoder(score_server: PythonServer, demo_model: Path) -> None:
    docs = ["the sky is blue", "what is the sky"]
    want = [pair_score(demo_model, "what is the sky", d) for d in docs]
    for path, body in (("/score", {"queries": "what is the sky", "documents": docs}),
                       ("/v1/score", {"text_1": "what is the sky", "text_2": docs}),
                       ("/score", {"data_1": ["what is the sky"] * 2, "data_2": docs})):
        got = post_ok(score_server, path, body)
        assert re.fullmatch(r"score-[0-9a-f]{32}", got["id"])
        assert [d["object"] for d in got["data"]] == ["score", "score"]
        assert [d["score"] for d in got["data"]] == pytest.approx([s for s, _ in want],
                                                                  abs=1e-6)
        assert got["usage"]["prompt_tokens"] == sum(n for _, n in want)
    assert "1:1, 1:N or N:N" in error_of(score_server, "/score",
                                         {"queries": ["a", "b"], "documents": ["c", "d", "e"]})
    assert "At least one text element" in error_of(score_server, "/score",
                                                   {"queries": "a", "documents": []})
    assert "`documents` is required" in error_of(score_server, "/score", {"queries": "a"})


def test_score_on_an_embedding_model_is_cosine(embed_server: PythonServer) -> None:
    texts = ["alpha beta", "gamma", "alpha beta"]
    vectors = [d["embedding"] for d in
               post_ok(embed_server, "/v1/embeddings", {"input": texts})["data"]]
    got = post_ok(embed_server, "/score", {"queries": texts[0], "documents": texts[1:]})

    def cosine(a: list[float], b: list[float]) -> float:
        return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))

    assert [d["score"] for d in got["data"]] == pytest.approx(
        [cosine(vectors[0], vectors[1]), cosine(vectors[0], vectors[2])], abs=1e-5)
    assert got["data"][1]["score"] == pytest.approx(1.0, abs=1e-5)


def test_rerank_orders_cuts_and_hides_documents(score_server: PythonServer,
                                                demo_model: Path) -> None:
    docs = ["blue sky", "what is the sky", "green grass", "sky"]
    scores = [pair_score(demo_model, "what is the sky", d)[0] for d in docs]
    order = sorted(range(len(docs)), key=lambda i: scores[i], reverse=True)
    body = {"query": "what is the sky", "documents": docs}
    for path in ("/rerank", "/v1/rerank", "/v2/rerank"):
        got = post_ok(score_server, path, body)
        assert [r["index"] for r in got["results"]] == order
        assert [r["document"] for r in got["results"]] == [
            {"text": docs[i], "multi_modal": None} for i in order]
        assert [r["relevance_score"] for r in got["results"]] == pytest.approx(
            [scores[i] for i in order], abs=1e-6)
        assert set(got["usage"]) == {"prompt_tokens", "total_tokens"}
    top = post_ok(score_server, "/rerank", {**body, "top_n": 2, "return_documents": False})
    assert [r["index"] for r in top["results"]] == order[:2]
    assert all("document" not in r for r in top["results"])
    assert "`query` must be a string" in error_of(score_server, "/rerank",
                                                  {"query": ["a"], "documents": ["b"]})
    assert "`top_n` must be at least 0" in error_of(score_server, "/rerank",
                                                    {**body, "top_n": -1})


def test_a_task_the_model_does_not_serve(embed_server: PythonServer,
                                         score_server: PythonServer) -> None:
    assert "does not serve the `embed` task" in error_of(score_server, "/v1/embeddings",
                                                         {"input": "x"})
    assert "does not serve the `classify` task" in error_of(embed_server, "/classify",
                                                            {"input": "x"})


@pytest.mark.parametrize(("path", "body"), [
    ("/v1/chat/completions", {"messages": CHAT}),
    ("/v1/chat/completions/batch", {"messages": [CHAT]}),
    ("/v1/completions", {"prompt": "x"}),
    ("/v1/responses", {"input": "x"}),
    ("/v1/messages", {"messages": CHAT, "max_tokens": 4}),
])
def test_a_generation_route_on_a_pooling_model(embed_server: PythonServer, path: str,
                                               body: dict[str, Any]) -> None:
    response = embed_server.post(path, {"model": MODEL, **body})
    assert response.status_code == 400, response.text
    assert "this model serves pooling requests: embed" in response.text


def _unstamped(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in ("id", "created")}


def test_invocations_on_a_pooling_model(embed_server: PythonServer,
                                        score_server: PythonServer) -> None:
    """vLLM's SageMaker entry point routes a pooling body by its keys: ``query`` rerank,
    ``text_1`` score, ``input`` the model's task; anything else is a 400 naming them."""
    rerank = {"model": MODEL, "query": "q", "documents": ["a b", "c"]}
    cases = [(embed_server, {"model": MODEL, "input": ["one", "two three"]}, "/v1/embeddings"),
             (embed_server, rerank, "/rerank"),
             (score_server, {"model": MODEL, "text_1": "q", "text_2": ["a", "b"]}, "/score"),
             (score_server, rerank, "/rerank")]
    for server, body, path in cases:
        got, want = post_ok(server, "/invocations", body), post_ok(server, path, body)
        assert _unstamped(got) == _unstamped(want), path
    message = error_of(embed_server, "/invocations", {"model": MODEL, "prompt": "x"})
    assert "Cannot find suitable handler" in message and "`query`" in message


@pytest.mark.parametrize("path", ["/v1/embeddings", "/pooling", "/classify", "/score",
                                  "/rerank"])
def test_a_pooling_route_on_a_generation_model(python_server: PythonServer,
                                               path: str) -> None:
    message = error_of(python_server, path, {"input": "x"})
    assert "this model generates text: it does not serve pooling requests" in message


def test_a_client_gone_aborts_its_engine_requests(
        demo_model: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """One request runs at a time and each engine step takes 1.5 s: a client that gives up
    after 0.3 s on three inputs has the two still waiting aborted, so the engine is idle
    after the first step (without the aborts it would run the second until 3 s)."""
    server = PythonServer(demo_model, tmp_path_factory.mktemp("slow") / "server.log",
                          engine={"runner": "pooling", "convert": "embed", "max_num_seqs": 1,
                                  "mock_step_delay_ms": 1500})
    try:
        def engine_load() -> int:
            text = httpx.get(f"{server.url}/metrics").text
            counts = re.findall(r"^vllm:num_requests_(?:running|waiting)\{[^}]*\} (\S+)$",
                                text, re.M)
            assert counts, text
            return int(sum(float(c) for c in counts))

        start = time.monotonic()
        with pytest.raises(httpx.TimeoutException):
            httpx.post(f"{server.url}/v1/embeddings", json={"input": ["a", "b", "c"]},
                       timeout=0.3)
        # The engine reports its load with its outputs: the first step's come at 1.5 s.
        time.sleep(max(0.0, start + 1.7 - time.monotonic()))
        while engine_load() and time.monotonic() < start + 2.8:
            time.sleep(0.05)
        assert engine_load() == 0, "the waiting requests were not aborted"
        assert time.monotonic() < start + 2.8
        assert httpx.get(f"{server.url}/load").json() == {
            "server_load": 0, "engines": [{"engine_index": 0, "ranks": []}]}
    finally:
        assert server.stop() == 0, server.log()
