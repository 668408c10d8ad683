"""Tensor parallel served end to end: `vrs serve CHECKPOINT --tensor-parallel-size 2`.

Both frontends (vrs-rs and the Python server) serve TP=2 engines on the CPU (gloo): the
greedy tokens of concurrent completions equal transformers' generate(), for vrs's
decoder (Llama, Qwen3) and for a transformers-backend family split by its own plan
(Gemma 2); GET /load reports each rank's memory. Two data-parallel engines of two ranks
each (four processes) share a burst of requests. Killing one worker takes the engine
down: the open stream ends with a 503 error, the server exits within 5 s, and no
process of it is left.
"""

from __future__ import annotations

import os
import random
import re
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch

from tests.e2e.servers import MODEL, REAL_ENGINE_ARGS, ROUTE_MODES, Server, cmdline, wait_until
from tests.e2e.test_lifecycle import Stream
from tests.e2e.test_transformers_families import checkpoint as family_checkpoint
from tests.engine.engine_kit import build_family, hf_greedy
from tests.engine.transformers_kit import build

pytestmark = pytest.mark.e2e

MAX_TOKENS = 8
WORKER = "engine.runtime.parallel.worker"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tp-models")


def checkpoint(name: str, root: Path, demo_model: Path) -> Path:
    builder = build_family if name in ("llama", "qwen3") else build
    return family_checkpoint(name, root, demo_model, builder)


def prompts() -> list[list[int]]:
    rng = random.Random(35)
    return [[rng.randrange(3, 512) for _ in range(n)] for n in (6, 21, 40)]


def start(mode: str, path: Path, log: Path, tp: int, dp: int = 1) -> Server:
    return Server(mode, path, log, mock=False, max_model_len=512, engine_count=dp * tp,
                  cli_args=(*REAL_ENGINE_ARGS, "--tensor-parallel-size", str(tp),
                            "--data-parallel-size", str(dp)))


def complete(server: Server, ids: list[int]) -> dict[str, Any]:
    reply = httpx.post(f"{server.url}/v1/completions", timeout=120, json={
        "model": MODEL, "prompt": ids, "max_tokens": MAX_TOKENS, "temperature": 0,
        "ignore_eos": True, "return_token_ids": True})
    assert reply.status_code == 200, reply.text
    body: dict[str, Any] = reply.json()
    return body


def workers(server: Server) -> list[int]:
    return [pid for pid in server.tree() if WORKER in cmdline(pid)]


@pytest.mark.parametrize("mode", ROUTE_MODES)
@pytest.mark.parametrize("name", ["llama", "qwen3", "gemma2"])
def test_tp2_greedy_equals_generate(mode: str, name: str, root: Path, demo_model: Path,
                                    tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    path = checkpoint(name, root, demo_model)
    hf = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    expected = [hf_greedy(hf, ids, MAX_TOKENS) for ids in prompts()]
    server = start(mode, path, tmp_path / "server.log", tp=2)
    try:
        assert len(workers(server)) == 1
        with ThreadPoolExecutor(len(expected)) as pool:
            replies = list(pool.map(lambda ids: complete(server, ids), prompts()))
        for ids, want, body in zip(prompts(), expected, replies, strict=True):
            assert body["choices"][0]["token_ids"] == want, f"{len(ids)}-token prompt"
        load = httpx.get(f"{server.url}/load", timeout=10).json()
        (engine,) = load["engines"]
        ranks = engine["ranks"]
        assert [r["rank"] for r in ranks] == [0, 1]
        assert all(r["device"] == "cpu" and r["kv_cache_bytes"] > 0 for r in ranks)
        # vrs's decoder: rank 0 holds the LM head besides its slice, rank 1 its slice only;
        # the transformers backend keeps the whole module tree but the split linears.
        zero, first = ranks[0]["weight_bytes"], ranks[1]["weight_bytes"]
        assert (zero > first > 0) if name in ("llama", "qwen3") else (zero == first > 0)
        assert "tensor parallel: 2 ranks on cpu" in server.log()
    finally:
        assert server.stop() == 0, server.log()
        server.assert_all_gone()


def test_tp_times_dp_serves_and_balances(root: Path, demo_model: Path, tmp_path: Path) -> None:
    path = checkpoint("llama", root, demo_model)
    server = start("rust-serve", path, tmp_path / "server.log", tp=2, dp=2)
    try:
        assert len(server.engines()) == 2 and len(workers(server)) == 2
        batch = [ids for _ in range(3) for ids in prompts()]
        with ThreadPoolExecutor(len(batch)) as pool:
            replies = list(pool.map(lambda ids: complete(server, ids), batch))
        tokens = [r["choices"][0]["token_ids"] for r in replies]
        assert tokens[:3] == tokens[3:6] == tokens[6:]  # whichever engine ran it
        text = httpx.get(f"{server.url}/metrics", timeout=10).text
        routed = {int(i): float(n) for i, n in re.findall(
            r'^vrs:engine_requests_routed_total\{engine="(\d+)"\} (\S+)$', text, re.MULTILINE)}
        assert sorted(routed) == [0, 1] and all(n > 0 for n in routed.values()), routed
        engines = httpx.get(f"{server.url}/load", timeout=10).json()["engines"]
        assert [e["engine_index"] for e in engines] == [0, 1]
        assert all(len(e["ranks"]) == 2 for e in engines)
    finally:
        assert server.stop() == 0, server.log()
        server.assert_all_gone()


@pytest.mark.parametrize("mode", ROUTE_MODES)
def test_a_dead_worker_takes_the_engine_down(mode: str, root: Path, demo_model: Path,
                                             tmp_path: Path) -> None:
    path = checkpoint("llama", root, demo_model)
    server = start(mode, path, tmp_path / "server.log", tp=2)
    try:
        stream = Stream(server, 400, prompts()[0], ignore_eos=True)
        assert wait_until(lambda: stream.events, 30)
        (victim,) = workers(server)
        killed = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        events = stream.result()
        error = events[-1]["error"]
        assert (error["code"], error["type"]) == (503, "ServiceUnavailableError"), error
        code = server.wait_exit(30)
        took = time.monotonic() - killed
    finally:
        server.stop()
    assert code != 0
    assert took < 5.0, f"the server exited {took:.1f} s after the worker's death"
    assert re.search(r"tensor-parallel worker rank 1 \(pid \d+\) exited with code -9",
                     server.log()), server.log()[-3000:]
    server.assert_all_gone()
