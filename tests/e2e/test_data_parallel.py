"""Data parallel: N local engines behind one frontend, in each launch mode.

Who got what is read from the engines' own debug log lines (``engine I: add ID`` and
``engine I: abort ID``), so the routing is observed where the work lands.
"""

from __future__ import annotations

import os
import re
import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.e2e.servers import MODEL, MODES, ROUTE_MODES, Pool, Server, cmdline, wait_until

pytestmark = pytest.mark.e2e

ADD = re.compile(r"engine (\d+): add (\S+)")
ABORT = re.compile(r"engine (\d+): abort (.+)$", re.MULTILINE)


def start(mode: str, model: Path, tmp_path: Path, engines: int) -> Server:
    return Server(mode, model, tmp_path / f"{mode}-dp{engines}.log", engine_count=engines,
                  cli_args=("--data-parallel-size", str(engines),
                            "--mock-step-delay-ms", "20"))


def owners(log: str) -> dict[str, int]:
    """Request id -> the engine that was given it."""
    return {request_id: int(index) for index, request_id in ADD.findall(log)}


def complete(server: Server, body: dict) -> dict:
    response = httpx.post(f"{server.url}/v1/completions", json={"model": MODEL, **body},
                          timeout=60)
    assert response.status_code == 200, response.text
    return response.json()


def stream_first_chunk(server: Server, index: int) -> str:
    """Opens a long stream, reads its first event, hangs up; returns the request id."""
    body = {"model": MODEL, "prompt": f"abort me {index}", "max_tokens": 1500,
            "ignore_eos": True, "stream": True}
    with httpx.stream("POST", f"{server.url}/v1/completions", json=body, timeout=60) as r:
        for line in r.iter_lines():
            if line.startswith("data: {"):
                return re.search(r'"id":\s*"([^"]+)"', line).group(1)
    raise AssertionError("the stream sent no event")


def per_engine(server: Server, name: str, extra: str = "") -> dict[int, float]:
    """``name`` by its ``engine`` label (the vllm:* series; ``extra``: more labels)."""
    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    tail = f",{extra}" if extra else ""
    pattern = rf'^{name}\{{model_name="{MODEL}",engine="(\d+)"{tail}\}} (\S+)$'
    return {int(i): float(n) for i, n in re.findall(pattern, text, re.MULTILINE)}


# Two engines in each launch mode (who starts them differs); three in the request modes
# (rust-frontend routes with the same vrs-rs code as rust-serve).
@pytest.mark.parametrize(("mode", "engines"),
                         [(m, 2) for m in MODES] + [(m, 3) for m in ROUTE_MODES],
                         ids=[f"{m}-2" for m in MODES] + [f"{m}-3" for m in ROUTE_MODES])
def test_engines_share_work_and_aborts_reach_the_owner(
        mode: str, engines: int, demo_model: Path, tmp_path: Path, pool: Pool) -> None:
    server = start(mode, demo_model, tmp_path, engines)
    try:
        assert len(server.engines()) == engines
        # /load lists every engine by index (the mock engines report no ranks).
        load = httpx.get(f"{server.url}/load", timeout=10).json()
        assert load["engines"] == [{"engine_index": i, "ranks": []} for i in range(engines)]
        # A burst: every engine receives work (before and after stats arrive).
        bodies = [{"prompt": f"burst {i}", "max_tokens": 20, "ignore_eos": True}
                  for i in range(8 * engines)]
        with ThreadPoolExecutor(len(bodies)) as threads:
            answers = list(threads.map(lambda b: complete(server, b), bodies))
        assert all(a["usage"]["completion_tokens"] == 20 for a in answers)
        assert wait_until(lambda: all(a["id"] in owners(server.log()) for a in answers), 10)
        given = owners(server.log())
        counts = [sum(given[a["id"]] == i for a in answers) for i in range(engines)]
        assert all(n > 0 for n in counts), counts
        # /metrics counts the routing per engine (the health checks are not routed).
        text = httpx.get(f"{server.url}/metrics", timeout=10).text
        routed = {int(i): float(n) for i, n in
                  re.findall(r'^vrs:engine_requests_routed_total\{engine="(\d+)"\} (\S+)$', text,
                             re.MULTILINE)}
        assert routed == {i: float(n) for i, n in enumerate(counts)}, text
        # The vllm:* series are labelled with the engine that ran the request.
        assert wait_until(lambda: per_engine(server, "vllm:request_success_total",
                                             'finished_reason="length"')
                          == {i: float(n) for i, n in enumerate(counts)}, 10)
        assert per_engine(server, "vllm:generation_tokens_total") == {
            i: 20.0 * n for i, n in enumerate(counts)}

        # Seeded sampling gives what one engine gives, whichever engine runs it.
        single = pool.get(mode)
        for seed in range(2 * engines):
            body = {"prompt": "Once upon a time", "max_tokens": 12, "seed": seed,
                    "temperature": 1.0}
            assert complete(server, body)["choices"] == complete(single, body)["choices"]

        # Hung-up streams are aborted in the engine that runs them.
        with ThreadPoolExecutor(2 * engines) as threads:
            ids = list(threads.map(lambda i: stream_first_chunk(server, i), range(2 * engines)))

        def aborted() -> dict[str, int]:
            return {rid: int(index) for index, rids in ABORT.findall(server.log())
                    for rid in rids.split()}

        assert wait_until(lambda: set(ids) <= set(aborted()), 10), server.log()[-3000:]
        given, taken = owners(server.log()), aborted()
        assert {rid: given[rid] for rid in ids} == {rid: taken[rid] for rid in ids}
        assert len({given[rid] for rid in ids}) > 1, "the streams all went to one engine"
    finally:
        server.signal(signal.SIGTERM)
        code = server.stop()
    assert code == 0, server.log()[-3000:]
    server.assert_all_gone()


@pytest.mark.parametrize("mode", MODES)
def test_one_engine_dying_takes_the_deployment_down(
        mode: str, demo_model: Path, tmp_path: Path) -> None:
    server = start(mode, demo_model, tmp_path, 2)
    try:
        victim = next(pid for pid in server.engines()
                      if cmdline(pid)[-2:] == ["--engine-index", "1"])
        os.kill(victim, signal.SIGKILL)
        code = server.wait_exit(30)
    finally:
        server.stop()
    assert code != 0
    said = [line for line in server.log().splitlines() if "engine 1" in line and "exited" in line]
    assert said, server.log()[-3000:]
    server.assert_all_gone()
