"""`vrs bench serve --dataset-name conversation` end to end, on
tests/cli/fixtures/conversation_sample.json (three conversations of three turns, written for
this project, in both of the shapes vLLM's multi-turn benchmark reads): against the
recording server of tests/cli/test_bench.py (each turn is sent with the history and the
server's own earlier answers), against `vrs-rs serve --mock` (the request count, the
asked output lengths, the prompts growing turn by turn) and against the real engine on the
demo model (the cached prompt tokens growing with the turn)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_bench import (  # noqa: F401 - fixtures
    ROOT,
    FakeOpenAI,
    MockServer,
    bench,
    demo_model,
    fake_server,
    free_port,
    run_vrs,
    rust_binary,
)
from tests.e2e.servers import REAL_ENGINE_ARGS
from tests.processes import terminate, wait_healthy

pytestmark = pytest.mark.e2e

SAMPLE = Path(__file__).parent / "fixtures" / "conversation_sample.json"
CONVERSATION = ("--dataset-name", "conversation", "--dataset-path", str(SAMPLE),
                "--backend", "openai-chat")


def sample_turns() -> list[list[tuple[str, str]]]:
    """Each conversation's (user, answer) turns, in file order."""
    out = []
    for entry in json.loads(SAMPLE.read_text()):
        if "messages" in entry:
            texts = [(m["role"], m["content"]) for m in entry["messages"]]
        else:
            texts = [(m["from"], m["value"]) for m in entry["conversations"]]
        texts = [t for t in texts if t[0] != "system"]
        out.append([(texts[i][1], texts[i + 1][1]) for i in range(0, len(texts), 2)])
    return out


@pytest.fixture(scope="module")
def mock_server(demo_model: Path,  # noqa: F811 - the imported fixture
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = MockServer(demo_model, tmp_path_factory.mktemp("vrs-rs") / "serve.log")
    yield server.url
    server.stop()


def test_each_turn_carries_the_servers_own_answers(fake_server: str,  # noqa: F811
                                                   tmp_path: Path) -> None:
    FakeOpenAI.bodies.clear()
    result = bench(fake_server, tmp_path / "r.json", *CONVERSATION, "--num-prompts", "3",
                   "--max-concurrency", "3", "--conversation-output-len", "3")
    assert (result["completed"], result["failed"]) == (9, 0), result["error_samples"]
    bodies = FakeOpenAI.bodies[1:]  # the first is the probe
    assert len(bodies) == 9
    users = {user for turns in sample_turns() for user, _ in turns}
    for body in bodies:
        messages = body["messages"]
        assert messages[-1]["role"] == "user" and messages[-1]["content"] in users
        asked = [m for m in messages if m["role"] == "user"]
        answers = [m for m in messages if m["role"] == "assistant"]
        assert len(answers) == len(asked) - 1
        # the recording server's answers, not the file's
        assert all(a["content"] == " w0 w1 w2" for a in answers), messages
        assert body["max_completion_tokens"] == 3 and body["stream"] is True
    depth = sorted(len([m for m in b["messages"] if m["role"] == "user"]) for b in bodies)
    assert depth == [1, 1, 1, 2, 2, 2, 3, 3, 3]
    system = [b for b in bodies if b["messages"][0]["role"] == "system"]
    assert len(system) == 3, "the garden conversation's system message starts each turn"


def test_mock_runs_every_turn_with_growing_prompts(mock_server: str, demo_model: Path,  # noqa: F811
                                                   tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(demo_model))
    asked = sum(len(tokenizer(answer, add_special_tokens=False).input_ids)
                for turns in sample_turns() for _, answer in turns)
    started = time.monotonic()
    result = bench(mock_server, tmp_path / "r.json", *CONVERSATION, "--num-prompts", "3",
                   "--max-concurrency", "3", "--ignore-eos",
                   "--conversation-think-time", "0.3")
    assert (result["completed"], result["failed"]) == (9, 0), result["error_samples"]
    # with --ignore-eos the mock answers exactly the file's answer lengths
    assert result["total_output_tokens"] == asked
    assert result["num_conversations"] == 3 and result["turns_not_sent"] == 0
    turns = result["turns"]
    assert [t["turn"] for t in turns] == [1, 2, 3]
    assert all(t["completed"] == 3 for t in turns)
    inputs = [t["mean_input_tokens"] for t in turns]
    assert inputs[0] < inputs[1] < inputs[2], inputs
    assert result["total_input_tokens"] == round(sum(inputs) * 3)
    assert [t["mean_cached_tokens"] for t in turns] == [0, 0, 0], "the mock has no cache"
    # two think times of 0.3 s in each conversation
    assert result["duration"] >= 0.6 and time.monotonic() - started >= 0.6


def test_a_bad_conversation_file_names_the_file_and_the_line(mock_server: str,
                                                             tmp_path: Path) -> None:
    bad = tmp_path / "conv.json"
    bad.write_text('[\n  {"messages": [\n    {"role": "user", "content": "a"},\n  ]}\n]\n')
    out = run_vrs("bench", "serve", "--base-url", mock_server, "--dataset-name",
                  "conversation", "--dataset-path", str(bad), "--backend", "openai-chat",
                  "--num-prompts", "1")
    text = out.stdout + out.stderr
    assert out.returncode != 0 and f"{bad} line 4" in text, text
    wrong = run_vrs("bench", "serve", "--base-url", mock_server, *CONVERSATION[:4],
                    "--num-prompts", "1")
    assert wrong.returncode != 0
    assert "use --backend openai-chat" in wrong.stdout + wrong.stderr


class RealServer:
    """`vrs serve DEMO` (vrs-rs in front) on the real engine: CPU, float32, KV blocks of
    4 tokens (the e2e suite's engine settings)."""

    def __init__(self, model: Path, log_path: Path) -> None:
        self.url = f"http://127.0.0.1:{free_port()}"
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        env = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false",
               "VRS_RUST_FRONTEND_PATH": str(rust_binary())}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from cli.main import main; main()", "serve", str(model),
             "--host", "127.0.0.1", "--port", self.url.rsplit(":", 1)[1],
             *REAL_ENGINE_ARGS],
            cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT)
        wait_healthy(self.proc, self.url, log_path)

    def stop(self) -> None:
        terminate(self.proc)
        self._log.close()


def test_real_engine_caches_more_of_the_prompt_each_turn(demo_model: Path,  # noqa: F811
                                                         tmp_path: Path) -> None:
    server = RealServer(demo_model, tmp_path / "serve.log")
    try:
        result = bench(server.url, tmp_path / "r.json", *CONVERSATION, "--num-prompts", "3",
                       "--max-concurrency", "1", "--conversation-output-len", "4")
    finally:
        server.stop()
    assert (result["completed"], result["failed"]) == (9, 0), result["error_samples"]
    turns: list[dict[str, Any]] = result["turns"]
    cached = [t["mean_cached_tokens"] for t in turns]
    inputs = [t["mean_input_tokens"] for t in turns]
    # turn k's prompt starts with turn k-1's prompt and answer, which the engine cached
    assert cached[0] < cached[1] < cached[2], (cached, inputs)
    assert cached[1] >= inputs[0] - 4 - 1, "at least turn 1's prompt, in whole blocks"
    assert all(c < i for c, i in zip(cached, inputs, strict=True))
