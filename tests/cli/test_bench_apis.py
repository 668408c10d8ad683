"""`vrs bench serve --backend openai-responses | anthropic-messages` end to end: the typer
app running the vrs-rs load generator against `vrs-rs serve --mock` (the real routes,
typed Responses events and Anthropic's message/content-block events), the mock engine
paced at STEP_MS per token and guarded by an API key, so TTFT, ITL, the token counts and
each API's key header can be checked.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_bench import MockServer, demo_model, one_line_error, run_vrs  # noqa: F401

pytestmark = pytest.mark.e2e

STEP_MS = 2.0
KEY = "k-right"
APIS = [("openai-responses", "/v1/responses"), ("anthropic-messages", "/v1/messages")]


@pytest.fixture(scope="module")
def keyed_server(demo_model: Path,  # noqa: F811 - the imported fixture
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = MockServer(demo_model, tmp_path_factory.mktemp("vrs-rs") / "serve.log",
                        "--api-key", KEY, "--engine-config",
                        json.dumps({"mock_step_delay_ms": STEP_MS}))
    yield server.url
    server.stop()


def bench(url: str, backend: str, result_file: Path, *extra: str) -> tuple[int, str]:
    out = run_vrs("bench", "serve", "--base-url", url, "--backend", backend,
                  "--result-file", str(result_file), "--random-input-len", "16",
                  "--random-output-len", "4", "--metric-percentiles", "50", *extra)
    return out.returncode, out.stdout + out.stderr


@pytest.mark.parametrize(("backend", "path"), APIS)
def test_bench_streams_each_api(keyed_server: str, backend: str, path: str,
                                tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    result_file = tmp_path / "r.json"
    code, out = bench(keyed_server, backend, result_file, "--num-prompts", "6",
                      "--max-concurrency", "3", "--warmup-requests", "2")
    assert code == 0, out
    result = json.loads(result_file.read_text())
    assert result["backend"] == backend and result["endpoint"] == path
    assert result["completed"] == 6 and result["failed"] == 0, result.get("error_samples")
    # The mock never ends early: the API's own usage counts every requested token.
    assert result["total_output_tokens"] == 6 * 4
    assert result["total_input_tokens"] == 6 * 16
    # One token per paced step: the deltas come a step apart, the first after a step.
    assert result["median_itl_ms"] >= STEP_MS * 0.8
    assert STEP_MS * 0.8 <= result["median_ttft_ms"] <= result["median_e2el_ms"]


def test_anthropic_key_is_preferred(keyed_server: str, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """x-api-key carries ANTHROPIC_API_KEY when set (else OPENAI_API_KEY): the server
    answers 401 to the wrong one."""
    result_file = tmp_path / "r.json"
    args = ("--num-prompts", "2", "--warmup-requests", "0")
    monkeypatch.setenv("OPENAI_API_KEY", "k-wrong")
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    code, out = bench(keyed_server, "anthropic-messages", result_file, *args)
    assert code == 0, out
    assert json.loads(result_file.read_text())["completed"] == 2
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k-wrong")
    code, out = bench(keyed_server, "anthropic-messages", result_file, *args)
    assert code != 0 and "401" in out, out


@pytest.mark.parametrize("backend", [api for api, _ in APIS])
def test_ignore_eos_is_refused_for_apis_without_it(keyed_server: str, backend: str) -> None:
    out = run_vrs("bench", "serve", "--base-url", keyed_server, "--backend", backend,
                  "--ignore-eos", "--num-prompts", "1")
    line = one_line_error(out)
    assert "ignore_eos" in line and backend in line, line
