"""`vrs bench serve --backend openai-embeddings` end to end: the typer app running the
vrs-rs load generator against a small OpenAI embeddings server written here (stdlib, on
loopback). The server records every body, answers after ANSWER_DELAY_S, and reports
`usage.prompt_tokens` as the words of the input plus EXTRA_TOKENS (a CLS and a SEP token),
so the result's input tokens show they are the server's count, as in vLLM's bench."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_bench import (  # noqa: F401
    FakeServer,
    MockServer,
    bench,
    demo_model,
    one_line_error,
    run_vrs,
)

pytestmark = pytest.mark.e2e

FIXTURES = Path(__file__).parent / "fixtures"
ANSWER_DELAY_S = 0.005
EXTRA_TOKENS = 2


def server_tokens(text: str) -> int:
    return len(text.split()) + EXTRA_TOKENS


class FakeEmbeddings(FakeServer):
    """GET /v1/models lists one model rooted at the demo model (its tokenizer makes the
    prompts); POST /v1/embeddings answers each input with a 4-dim vector. The POSTs whose
    index is in `fail_status` get that status, those in `no_data` a body without `data`."""

    MODEL_ID = "fake-embed"
    bodies: list[dict[str, Any]] = []
    answered_ok: list[bool] = []
    fail_status: dict[int, int] = {}
    no_data: set[int] = set()
    lock = threading.Lock()

    def do_POST(self) -> None:
        if self.path != "/v1/embeddings":
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        with self.lock:
            index = len(FakeEmbeddings.bodies)
            FakeEmbeddings.bodies.append(body)
        time.sleep(ANSWER_DELAY_S)
        tokens = server_tokens(body["input"])
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        ok = index not in self.fail_status and index not in self.no_data
        with self.lock:
            FakeEmbeddings.answered_ok.append(ok)
        if index in self.fail_status:
            self._json(self.fail_status[index],
                       {"error": {"message": f"refused input {index}", "code": 400}})
        elif index in self.no_data:
            self._json(200, {"object": "list", "model": "fake-embed", "usage": usage})
        else:
            vector = {"object": "embedding", "index": 0, "embedding": [0.5, 0.5, 0.5, 0.5]}
            self._json(200, {"object": "list", "model": "fake-embed", "data": [vector],
                             "usage": usage})


@pytest.fixture(scope="module")
def embeddings_server(demo_model: Path) -> Iterator[str]:  # noqa: F811 - imported fixture
    FakeEmbeddings.model_root = str(demo_model)
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeEmbeddings)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def fresh_server(embeddings_server: str, monkeypatch: pytest.MonkeyPatch) -> str:
    FakeEmbeddings.bodies.clear()
    FakeEmbeddings.answered_ok.clear()
    monkeypatch.setattr(FakeEmbeddings, "fail_status", {})
    monkeypatch.setattr(FakeEmbeddings, "no_data", set())
    return embeddings_server


def embed(url: str, tmp_path: Path, *extra: str) -> dict[str, Any]:
    return bench(url, tmp_path / "r.json", "--backend", "openai-embeddings", *extra)


def test_random_prompts_are_embedded_and_timed(fresh_server: str, demo_model: Path,  # noqa: F811
                                               tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    result = embed(fresh_server, tmp_path, "--num-prompts", "8", "--random-input-len", "16",
                   "--max-concurrency", "4", "--warmup-requests", "2",
                   "--metric-percentiles", "50,99")
    bodies = FakeEmbeddings.bodies
    assert len(bodies) == 1 + 2 + 8, "probe, warm-up, measured"
    # vLLM's openai-embeddings body: the prompt text, truncation to the model's length.
    tokenizer = AutoTokenizer.from_pretrained(str(demo_model))
    for body in bodies:
        assert sorted(body) == ["input", "model", "truncate_prompt_tokens"], body
        assert body["model"] == "fake-embed" and body["truncate_prompt_tokens"] == -1
        assert len(tokenizer(body["input"], add_special_tokens=False).input_ids) == 16
    measured = bodies[3:]
    assert result["backend"] == "openai-embeddings" and result["endpoint"] == "/v1/embeddings"
    assert (result["completed"], result["failed"]) == (8, 0), result["error_samples"]
    assert result["total_input_sequences"] == 8 and result["total_output_tokens"] == 0
    # the server's usage, not the dataset's 16 a prompt
    assert result["total_input_tokens"] == sum(server_tokens(b["input"]) for b in measured)
    duration = result["duration"]
    assert result["request_throughput"] == pytest.approx(8 / duration)
    assert result["input_sequence_throughput"] == pytest.approx(8 / duration)
    assert result["total_token_throughput"] == pytest.approx(
        result["total_input_tokens"] / duration)
    for key in ("mean_e2el_ms", "median_e2el_ms", "p50_e2el_ms", "p99_e2el_ms"):
        assert result[key] >= ANSWER_DELAY_S * 1000, key
    assert result["std_e2el_ms"] >= 0
    for key in ("mean_ttft_ms", "mean_tpot_ms", "mean_itl_ms", "output_throughput",
                "max_output_tokens_per_s", "max_concurrent_requests"):
        assert key not in result, key


def test_the_summary_is_an_embeddings_block(fresh_server: str, tmp_path: Path) -> None:
    out = run_vrs("bench", "serve", "--base-url", fresh_server, "--backend",
                  "openai-embeddings", "--num-prompts", "3", "--random-input-len", "8")
    assert out.returncode == 0, out.stdout + out.stderr
    block = out.stdout[out.stdout.index("Serving Benchmark Result"):]
    for line in ("Successful requests:", "Total input tokens:", "Request throughput (req/s):",
                 "Input throughput (inputs/s):", "Total token throughput (tok/s):",
                 "End-to-end Latency", "Mean E2EL (ms):", "P99 E2EL (ms):"):
        assert line in block, (line, block)
    for absent in ("TTFT", "TPOT", "ITL", "generated", "Output token", "Peak"):
        assert absent not in block, (absent, block)


def test_failed_requests_count_with_their_errors(fresh_server: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # POST 0 is the probe; of the 6 measured (sent one at a time), 2 fail, one each way.
    monkeypatch.setattr(FakeEmbeddings, "fail_status", {2: 400})
    monkeypatch.setattr(FakeEmbeddings, "no_data", {5})
    out = run_vrs("bench", "serve", "--base-url", fresh_server, "--backend",
                  "openai-embeddings", "--num-prompts", "6", "--random-input-len", "8",
                  "--max-concurrency", "1", "--result-file", str(tmp_path / "r.json"))
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads((tmp_path / "r.json").read_text())
    assert (result["completed"], result["failed"]) == (4, 2)
    measured = list(zip(FakeEmbeddings.bodies, FakeEmbeddings.answered_ok, strict=True))[1:]
    assert result["total_input_tokens"] == sum(
        server_tokens(body["input"]) for body, ok in measured if ok)
    errors = result["error_samples"]
    assert len(errors) == 2, errors
    assert any("HTTP 400" in e and "refused input 2" in e for e in errors), errors
    assert any('no "data" list' in e for e in errors), errors
    assert "errors of failed requests" in out.stdout


@pytest.mark.parametrize("dataset", [
    ("sharegpt", "--dataset-path", str(FIXTURES / "sharegpt_sample.json")),
    ("custom", "--dataset-path", str(FIXTURES / "custom_sample.jsonl"),
     "--skip-chat-template"),
    ("prefix_repetition", "--prefix-repetition-prefix-len", "8",
     "--prefix-repetition-suffix-len", "4", "--prefix-repetition-num-prefixes", "2"),
], ids=lambda d: d[0])
def test_every_dataset_sends_its_prompts(fresh_server: str, tmp_path: Path,
                                         dataset: tuple[str, ...]) -> None:
    name, *options = dataset
    result = embed(fresh_server, tmp_path, "--dataset-name", name, "--num-prompts", "4",
                   *options)
    assert (result["completed"], result["failed"]) == (4, 0), result["error_samples"]
    measured = FakeEmbeddings.bodies[1:]
    assert len(measured) == 4
    assert result["total_input_tokens"] == sum(server_tokens(b["input"]) for b in measured)
    if name == "custom":
        lines = [json.loads(line)["prompt"]
                 for line in (FIXTURES / "custom_sample.jsonl").read_text().splitlines()]
        assert {b["input"] for b in measured} <= set(lines)


def test_generation_only_options_are_refused(fresh_server: str) -> None:
    for extra in (("--percentile-metrics", "ttft,e2el"), ("--ignore-eos",),
                  ("--goodput", "tpot:50")):
        out = run_vrs("bench", "serve", "--base-url", fresh_server, "--backend",
                      "openai-embeddings", "--num-prompts", "2", *extra)
        line = one_line_error(out)
        assert "openai-embeddings" in line or "embeddings API" in line, (extra, line)
    assert FakeEmbeddings.bodies == [], "refused before any request"


def test_against_vrs_pooling_routes(demo_model: Path, tmp_path: Path) -> None:  # noqa: F811
    """The backend against vrs-rs's own /v1/embeddings (the mock engine as a pooling
    model): every request answered, the input tokens the server's count."""
    server = MockServer(demo_model, tmp_path / "serve.log", "--engine-config",
                        json.dumps({"runner": "pooling"}))
    try:
        result = embed(server.url, tmp_path, "--num-prompts", "24", "--random-input-len",
                       "32", "--max-concurrency", "8")
    finally:
        server.stop()
    assert (result["completed"], result["failed"]) == (24, 0), result["error_samples"]
    # the demo tokenizer adds no special tokens: the server counts each prompt's 32 tokens
    # (a random prompt re-tokenized may come out a token or two longer or shorter)
    assert abs(result["total_input_tokens"] - 24 * 32) <= 24 * 2
    assert result["median_e2el_ms"] > 0
