"""The mock engine's pooling runner (engine/mock/pooling.py): its Ready, the deterministic
answers of each task, the runner mismatch both ways, refusals and aborts, driven through
the EngineBackend calls the engine core makes."""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest

from engine import protocol as p
from engine.config import EngineConfig
from engine.mock.engine import MockEngine
from engine.mock.pooling import EMBED_DIMS, answer, features

pytestmark = pytest.mark.unit

PROMPT = [11, 12, 13, 14, 15]


@pytest.fixture(scope="module")
def demo_model() -> Path:
    from engine.mock.demo_model import ensure_demo_model

    return ensure_demo_model()


def mock(tasks: list[str] | None) -> MockEngine:
    return MockEngine("m", 1000, [2], 64, pooling_tasks=tasks)


def request(rid: str, ids: list[int], pooling: p.PoolingParams | None) -> p.EngineCoreRequest:
    return p.EngineCoreRequest(rid, ids, p.SamplingParams(max_tokens=1), time.time(),
                               pooling_params=pooling)


def run(engine: MockEngine, *requests: p.EngineCoreRequest) -> dict[str, p.EngineCoreOutput]:
    """The final output of each request."""
    done: dict[str, p.EngineCoreOutput] = {}
    for req in requests:
        for out in engine.add_request(req):
            done[out.request_id] = out
    for _ in range(10):
        for out in engine.step():
            assert out.finish_reason is not None, "a pooling request ends in one step"
            done[out.request_id] = out
    assert not engine.has_unfinished_requests()
    return done


@pytest.mark.parametrize(("convert", "tasks", "labels"), [
    ("embed", ["embed"], []), ("auto", ["embed"], []),
    ("classify", ["classify"], ["LABEL_0", "LABEL_1"]),
    ("score", ["classify", "score"], ["LABEL_0", "LABEL_1"]),
])
def test_ready_says_pooling_and_its_tasks(demo_model: Path, convert: str, tasks: list[str],
                                          labels: list[str]) -> None:
    config = EngineConfig(str(demo_model), mock=True, runner="pooling", convert=convert)
    ready = MockEngine.from_config(config.validate()).ready(0)
    assert (ready.runner, ready.pooling_tasks, ready.classify_labels) == ("pooling", tasks,
                                                                          labels)


def test_a_generating_mock_says_generate(demo_model: Path) -> None:
    ready = MockEngine.from_config(EngineConfig(str(demo_model), mock=True)).ready(0)
    assert (ready.runner, ready.pooling_tasks, ready.classify_labels) == ("generate", [], [])


def test_embed_is_deterministic_normalized_and_matryoshka() -> None:
    engine = mock(["embed"])
    out = run(engine, request("a", PROMPT, p.PoolingParams("embed")),
              request("b", PROMPT, p.PoolingParams("embed")),
              request("c", [7, 8], p.PoolingParams("embed")),
              request("raw", PROMPT, p.PoolingParams("embed", normalize=False)),
              request("cut", PROMPT, p.PoolingParams("embed", dimensions=8)))
    a = out["a"]
    assert (a.finish_reason, a.new_token_ids) == ("stop", [])
    assert a.pooling_output is not None and len(a.pooling_output) == EMBED_DIMS
    assert math.isclose(float(np.linalg.norm(a.pooling_output)), 1.0, rel_tol=1e-5)
    assert out["b"].pooling_output == a.pooling_output
    assert out["c"].pooling_output != a.pooling_output
    raw = features(PROMPT)
    assert np.allclose(out["raw"].pooling_output, raw, atol=1e-6)
    cut = out["cut"].pooling_output
    assert cut is not None and len(cut) == 8
    assert np.allclose(cut, raw[:8] / np.linalg.norm(raw[:8]), atol=1e-6)


def test_classify_is_a_softmax_or_the_logits() -> None:
    out = run(mock(["classify"]), request("p", PROMPT, p.PoolingParams("classify")),
              request("l", PROMPT, p.PoolingParams("classify", use_activation=False)))
    probs, logits = out["p"].pooling_output, out["l"].pooling_output
    assert probs is not None and logits is not None and len(probs) == len(logits) == 2
    assert math.isclose(sum(probs), 1.0, rel_tol=1e-6)
    expected = np.exp(logits) / np.exp(logits).sum()
    assert np.allclose(probs, expected, atol=1e-6)


def test_score_of_a_pair_is_the_sigmoid_of_its_parts_similarity() -> None:
    query, doc = [5, 6, 7], [5, 6, 7]
    out = run(mock(["classify", "score"]),
              request("same", query + doc, p.PoolingParams("score", token_type_start=3)),
              request("other", query + [90, 91], p.PoolingParams("score", token_type_start=3)),
              request("raw", query + doc, p.PoolingParams("score", token_type_start=3,
                                                          use_activation=False)))
    same = out["same"].pooling_output
    assert same is not None and len(same) == 1
    assert math.isclose(same[0], 1 / (1 + math.exp(-4.0)), rel_tol=1e-5)  # cosine 1
    other = out["other"].pooling_output
    assert other is not None and other[0] < same[0]
    assert out["raw"].pooling_output == pytest.approx([4.0], rel=1e-5)
    assert answer(p.PoolingParams("score"), query)[0] == pytest.approx(
        1 / (1 + math.exp(-4 * features(query)[0])), rel=1e-5)


@pytest.mark.parametrize(("tasks", "pooling", "words"), [
    (["embed"], None, "serves pooling requests (embed): it does not generate text"),
    (None, p.PoolingParams("embed"), "generates text: it does not serve pooling requests"),
    (["embed"], p.PoolingParams("classify"), "does not serve pooling task 'classify'"),
    (["embed"], p.PoolingParams("embed", dimensions=65), "dimensions 65 is not supported"),
    (["embed"], p.PoolingParams("embed", dimensions=0), "dimensions 0 is not supported"),
])
def test_what_the_mock_refuses_is_an_invalid_request(
        tasks: list[str] | None, pooling: p.PoolingParams | None, words: str) -> None:
    out = mock(tasks).add_request(request("x", PROMPT, pooling))
    assert len(out) == 1
    assert (out[0].finish_reason, out[0].error_kind) == ("error", "invalid_request")
    assert words in (out[0].error_message or "")


def test_a_pooling_prompt_may_fill_the_context_but_not_pass_it() -> None:
    engine = mock(["embed"])
    assert engine.add_request(request("full", list(range(3, 67)), p.PoolingParams("embed"))) == []
    over = engine.add_request(request("over", list(range(3, 68)), p.PoolingParams("embed")))
    assert over[0].finish_reason == "error"
    assert "max_model_len is 64" in (over[0].error_message or "")


def test_an_aborted_pooling_request_ends_as_aborted() -> None:
    engine = MockEngine("m", 1000, [2], 64, max_num_seqs=1, pooling_tasks=["embed"])
    assert engine.add_request(request("a", PROMPT, p.PoolingParams("embed"))) == []
    assert engine.add_request(request("b", PROMPT, p.PoolingParams("embed"))) == []
    assert engine.stats().num_waiting == 2
    aborted = engine.abort_requests(["b"])
    assert [(o.request_id, o.finish_reason) for o in aborted] == [("b", "abort")]
    outputs = engine.step()
    assert [(o.request_id, o.finish_reason) for o in outputs] == [("a", "stop")]
    assert outputs[0].queue_time is not None
    assert not engine.has_unfinished_requests()
