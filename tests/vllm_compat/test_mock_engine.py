"""The vLLM-wire mock engine on the real wire, driven by mock_probe.py (a minimal frontend
on vLLM's own encoder): handshake, utility calls, tokens, stops, logprobs, abort, death.

Runs where vllm 0.33.0 has its venv ($VRS_VLLM_PYTHON, default
~/.cache/vrs-vllm-venv/bin/python; scripts/vllm_compat.sh makes it).
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from tests.vllm_compat.live_servers import HERE, VLLM_PYTHON

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not VLLM_PYTHON.exists(), reason=f"no vllm interpreter at {VLLM_PYTHON} "
                       "(scripts/vllm_compat.sh installs one)"),
]


@pytest.fixture(scope="module")
def seen() -> dict[str, Any]:
    proc = subprocess.run(
        [str(VLLM_PYTHON), str(HERE / "mock_probe.py"), "--", "--vocab-size", "8",
         "--seed", "1", "--step-ms", "1", "--die-after-requests", "3", "--log-requests"],
        capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_handshake(seen: dict[str, Any]) -> None:
    assert seen["identity"] == [0, 0]
    assert seen["hello"] == {"status": "HELLO", "local": False, "headless": True}
    assert seen["ready"] == {"status": "READY", "local": False, "headless": True}
    assert seen["ready_response"] == {"max_model_len": 8192, "data_parallel_rank": 0,
                                      "vllm_version": "0.33.0"}


def test_utility_calls(seen: dict[str, Any]) -> None:
    assert seen["get_supported_tasks"] == {"call_id": 7, "failure": None,
                                           "result": ["generate"]}
    failed = seen["no_such_method"]
    assert failed["call_id"] == 8 and failed["result"] is None
    assert failed["failure"] == ("Call to no_such_method method failed: 'EngineCoreProc' "
                                 "object has no attribute 'no_such_method'")


def test_length_logprobs_and_prompt_logprobs(seen: dict[str, Any]) -> None:
    plain = seen["requests"]["plain"]
    assert len(plain["tokens"]) == 5 and all(0 <= t < 8 for t in plain["tokens"])
    assert plain["finish"] == "length" and plain["stop_reason"] is None
    # One [sampled, top-1, top-2] row per token; prompt logprobs for tokens 2..4, once.
    assert plain["logprob_shapes"] == [[1, 3]] * 5
    assert plain["prompt_logprob_shapes"] == [[3, 2]]
    assert plain["stats"] == 5  # SchedulerStats ride along every step


def test_stop_token_after_min_tokens(seen: dict[str, Any]) -> None:
    stops = seen["requests"]["stops"]
    assert stops["finish"] == "stop" and stops["stop_reason"] == 3
    assert stops["tokens"][-1] == 3 and len(stops["tokens"]) > 4
    assert not {3, 5} & set(stops["tokens"][:4])  # min_tokens masks stop ids and eos


def test_abort(seen: dict[str, Any]) -> None:
    aborted = seen["requests"]["aborted"]
    assert aborted["finish"] == "abort" and aborted["tokens"]


def test_death(seen: dict[str, Any]) -> None:
    assert seen["dead"] == "ENGINE_CORE_DEAD"
    assert seen["exit_code"] == 1
