"""`vrs bench serve` end to end: the typer app running the vrs-rs load generator against a
small OpenAI-compatible SSE server written here (stdlib, on loopback) and against a live
`vrs-rs serve --mock`, plus the option parsing, the plain result block and completions.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import typer
from rich.console import Console

from cli.bench_args import parse_goodput, parse_percentiles
from cli.bench_display import BenchDisplay, live_stats, plain_result
from tests.processes import terminate, wait_healthy

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
TOKEN_GAP_S = 0.002


def rust_binary() -> Path:
    """vrs-rs: $VRS_RUST_FRONTEND_PATH, the installed one, else the cargo build."""
    from cli.binary import BinaryNotFoundError, find_rust_frontend

    try:
        return find_rust_frontend()
    except BinaryNotFoundError:
        target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "rust" / "target"))
        for build in ("release", "debug"):
            if (target / build / "vrs-rs").is_file():
                return target / build / "vrs-rs"
    pytest.skip("vrs-rs is not built (pip install . or cargo build -p vrs-rs)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_vrs(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "VRS_RUST_FRONTEND_PATH": str(rust_binary()), "COLUMNS": "200",
           "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", "from cli.main import main; main()", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture(scope="session")
def demo_model() -> Path:
    from engine.mock.demo_model import ensure_demo_model

    return ensure_demo_model()


class FakeServer(BaseHTTPRequestHandler):
    """A quiet stdlib handler whose GET /v1/models lists one model, MODEL_ID, rooted at
    `model_root` (its tokenizer makes the prompts); JSON answers through `_json`."""

    MODEL_ID = "fake-model"
    model_root = ""

    def log_message(self, *args: Any) -> None:
        pass

    def _json(self, status: int, value: Any) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path != "/v1/models":
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        self._json(200, {"object": "list", "data": [
            {"id": self.MODEL_ID, "object": "model", "root": self.model_root}]})


class FakeOpenAI(FakeServer):
    """Streams `max_tokens` one-word chunks, TOKEN_GAP_S apart, then usage and [DONE]."""

    bodies: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        chat = self.path == "/v1/chat/completions"
        if self.path != "/v1/completions" and not chat:
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        FakeOpenAI.bodies.append(body)
        count = body["max_completion_tokens" if chat else "max_tokens"]
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        if chat:  # a role-only first chunk, as OpenAI sends: not content, not TTFT
            self._event({"choices": [{"index": 0, "delta": {"role": "assistant"}}]})
        for i in range(count):
            time.sleep(TOKEN_GAP_S)
            piece = {"delta": {"content": f" w{i}"}} if chat else {"text": f" w{i}"}
            self._event({"choices": [{"index": 0, **piece}]})
        self._event({"choices": [], "usage": {"completion_tokens": count}})
        self.wfile.write(b"data: [DONE]\n\n")

    def _event(self, value: Any) -> None:
        self.wfile.write(f"data: {json.dumps(value)}\n\n".encode())
        self.wfile.flush()


@pytest.fixture(scope="module")
def fake_server(demo_model: Path) -> Iterator[str]:
    FakeOpenAI.model_root = str(demo_model)
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeOpenAI)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def bench(url: str, result_file: Path, *extra: str) -> dict[str, Any]:
    out = run_vrs("bench", "serve", "--base-url", url, "--result-file", str(result_file),
                  *extra)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Serving Benchmark Result" in out.stdout, "plain result block when not a terminal"
    return json.loads(result_file.read_text())


def test_bench_against_a_stdlib_sse_server(fake_server: str, tmp_path: Path) -> None:
    FakeOpenAI.bodies.clear()
    result = bench(fake_server, tmp_path / "out" / "r.json", "--num-prompts", "12",
                   "--random-input-len", "32", "--random-output-len", "5", "--ignore-eos",
                   "--max-concurrency", "4", "--metric-percentiles", "50,99",
                   "--goodput", "ttft:60000 e2el:60000", "--label", "fake")
    assert result["completed"] == 12 and result["failed"] == 0
    assert result["total_output_tokens"] == 12 * 5
    assert result["total_input_tokens"] == 12 * 32
    assert result["model"] == "fake-model" and result["label"] == "fake"
    assert result["request_goodput"] == pytest.approx(result["request_throughput"])
    assert result["request_rate"] == "inf" and result["max_concurrency"] == 4
    for metric in ("ttft", "tpot", "itl", "e2el"):
        for stat in ("mean", "median", "std", "p50", "p99"):
            assert f"{stat}_{metric}_ms" in result
    assert 0 < result["mean_ttft_ms"] <= result["mean_e2el_ms"]
    # Tokens come TOKEN_GAP_S apart: TPOT and ITL see the gaps, TTFT sees one.
    assert result["median_tpot_ms"] >= TOKEN_GAP_S * 1000 * 0.8
    assert result["median_itl_ms"] >= TOKEN_GAP_S * 1000 * 0.8
    assert result["duration"] > 0 and result["request_throughput"] > 0
    # 12 measured + 1 initial probe; every request streamed, with usage and ignore_eos.
    assert len(FakeOpenAI.bodies) == 13
    for body in FakeOpenAI.bodies:
        assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
        assert body["ignore_eos"] is True and body["max_tokens"] == 5


def test_chat_backend_skips_role_only_chunks(fake_server: str, tmp_path: Path) -> None:
    FakeOpenAI.bodies.clear()
    result = bench(fake_server, tmp_path / "r.json", "--backend", "openai-chat",
                   "--num-prompts", "4", "--random-input-len", "8", "--random-output-len", "3",
                   "--request-rate", "50", "--warmup-requests", "2")
    assert result["completed"] == 4 and result["total_output_tokens"] == 12
    assert result["endpoint"] == "/v1/chat/completions" and result["request_rate"] == 50
    assert len(FakeOpenAI.bodies) == 1 + 2 + 4, "probe, warm-up, measured"
    assert FakeOpenAI.bodies[0]["messages"][0]["role"] == "user"
    # The first content chunk comes one token gap after the role chunk.
    assert result["median_ttft_ms"] >= TOKEN_GAP_S * 1000 * 0.8


def one_line_error(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode != 0
    assert "Traceback" not in out.stderr and "Traceback" not in out.stdout
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, out.stderr
    return lines[0]


def test_unreachable_server_is_one_line() -> None:
    out = run_vrs("bench", "serve", "--port", str(free_port()), "--num-prompts", "2")
    line = one_line_error(out)
    assert "cannot reach" in line and "/v1/models" in line, line


def test_wrong_endpoint_is_one_line(fake_server: str, demo_model: Path) -> None:
    out = run_vrs("bench", "serve", "--base-url", fake_server, "--endpoint", "/v1/nope",
                  "--tokenizer", str(demo_model), "--model", "m", "--num-prompts", "2",
                  "--random-input-len", "4")
    line = one_line_error(out)
    assert "404" in line and "/v1/nope" in line, line


def test_missing_tokenizer_asks_for_one(fake_server: str,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(FakeOpenAI, "model_root", "/not/a/local/dir")
    out = run_vrs("bench", "serve", "--base-url", fake_server, "--num-prompts", "2")
    line = one_line_error(out)
    assert "fake-model" in line and "--tokenizer" in line, line


def test_bad_values_are_one_line(fake_server: str) -> None:
    out = run_vrs("bench", "serve", "--base-url", fake_server, "--percentile-metrics", "ttft,x")
    assert "percentile_metrics" in one_line_error(out)
    out = run_vrs("bench", "serve", "--base-url", fake_server, "--random-range-ratio", "1")
    assert "random_range_ratio" in one_line_error(out)


def test_tls_options_need_an_https_url(fake_server: str, tmp_path: Path) -> None:
    out = run_vrs("bench", "serve", "--base-url", fake_server, "--insecure")
    assert "apply to https://" in one_line_error(out)
    ca = tmp_path / "ca.pem"
    ca.write_text("not a certificate\n")
    https = fake_server.replace("http://", "https://")
    out = run_vrs("bench", "serve", "--base-url", https, "--ca-cert", str(ca))
    line = one_line_error(out)
    assert "--ca-cert" in line and "ca.pem" in line, line


def test_option_parsing() -> None:
    assert parse_percentiles("50, 90,99.9") == [50.0, 90.0, 99.9]
    assert parse_goodput(["ttft:500 tpot:50", "e2el:1e3"]) == {
        "ttft": 500.0, "tpot": 50.0, "e2el": 1000.0}
    assert parse_goodput([]) is None
    with pytest.raises(typer.BadParameter):
        parse_goodput(["ttft=500"])
    with pytest.raises(typer.BadParameter):
        parse_percentiles("p99")


def test_plain_result_block() -> None:
    text = plain_result({"completed": 3, "failed": 0, "max_concurrency": None,
                         "request_rate": "inf", "duration": 1.5, "request_throughput": 2.0,
                         "mean_ttft_ms": 1.0, "median_ttft_ms": 1.0, "std_ttft_ms": 0.0,
                         "p99.9_ttft_ms": 2.25})
    lines = text.splitlines()
    assert lines[0].strip("= ") == "Serving Benchmark Result" and lines[-1] == "=" * 50
    assert "Successful requests:                     3" in lines
    assert any(line.startswith("P99.9 TTFT (ms):") and line.endswith("2.25") for line in lines)
    assert not any("TPOT" in line for line in lines), "only reported metrics are shown"


def test_terminal_summary_fits_one_screen_of_80_columns() -> None:
    result = {"label": "rust", "completed": 64, "failed": 2, "max_concurrency": 16,
              "request_rate": "inf", "duration": 12.5, "total_input_tokens": 65536,
              "total_output_tokens": 8192, "request_throughput": 5.12,
              "request_goodput": 4.0, "output_throughput": 655.36,
              "max_output_tokens_per_s": 900.0, "max_concurrent_requests": 16,
              "total_token_throughput": 5898.24, "num_conversations": 8,
              "turns": [{"turn": k, "completed": 8, "mean_ttft_ms": 10.0 * k,
                         "mean_input_tokens": 100.0 * k, "mean_cached_tokens": 96.0 * k - 96}
                        for k in (1, 2, 3)]}
    for metric in ("ttft", "tpot", "itl", "e2el"):
        for stat, value in (("mean", 12.345), ("median", 11.0), ("std", 3.5),
                            ("p50", 11.0), ("p90", 20.25), ("p99", 1234.5)):
            result[f"{stat}_{metric}_ms"] = value
    console = Console(width=200, force_terminal=True, record=True)
    display = BenchDisplay(console, live=True)
    display.result(result)
    lines = console.export_text().splitlines()
    assert max(len(line) for line in lines) <= 80 and len(lines) <= 40, lines
    text = "\n".join(lines)
    for needle in ("Request goodput (req/s)", "TPOT", "p99", "1234.50", "Turn 3 (8 done)",
                   "30.00 ms / 300 / 192"):
        assert needle in text, needle
    # the live line: the rate so far and the current percentiles
    stats = live_stats({"completed": 30, "elapsed_s": 3.0, "p50_ttft_ms": 12.4,
                        "p99_ttft_ms": 80.0, "p50_e2el_ms": None, "p99_e2el_ms": None})
    assert stats == "10.0 req/s  TTFT p50 12 p99 80 ms"


def test_bash_completion_reaches_nested_commands() -> None:
    script = ROOT / "completions" / "vrs.bash"
    probe = (f'source {script}; c() {{ COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _vrs; '
             'echo "${COMPREPLY[*]}"; }; c vrs bench ""; c vrs bench serve --backend ""; '
             'c vrs bench serve --port 80 --ignore; c vrs serve --dev; '
             'c vrs bench sweep --stop')
    out = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["plot serve sweep --help",
                                       "openai-completions openai-chat openai-responses "
                                       "anthropic-messages openai-embeddings vllm openai",
                                       "--ignore-eos", "--device", "--stop-at-slo"]


class MockServer:
    """`vrs-rs serve MODEL --mock` on a free loopback port."""

    def __init__(self, model: Path, log_path: Path, *args: str) -> None:
        self.url = f"http://127.0.0.1:{free_port()}"
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.log_path = log_path
        env = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false"}
        self.proc = subprocess.Popen(
            [str(rust_binary()), "serve", str(model), "--mock", "--host", "127.0.0.1",
             "--port", self.url.rsplit(":", 1)[1], "--python-executable", sys.executable,
             *args],
            cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT)
        wait_healthy(self.proc, self.url, log_path)

    def stop(self) -> None:
        terminate(self.proc)
        self._log.close()


@pytest.fixture(scope="module")
def mock_server(demo_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = MockServer(demo_model, tmp_path_factory.mktemp("vrs-rs") / "serve.log")
    yield server.url
    server.stop()


@pytest.mark.parametrize("backend", ["openai-completions", "openai-chat"])
def test_bench_against_vrs_rs_mock(mock_server: str, backend: str, tmp_path: Path) -> None:
    result = bench(mock_server, tmp_path / "r.json", "--backend", backend,
                   "--num-prompts", "40", "--random-input-len", "64",
                   "--random-output-len", "16", "--ignore-eos", "--max-concurrency", "8",
                   "--warmup-requests", "4")
    assert result["completed"] == 40 and result["failed"] == 0, result["error_samples"]
    assert result["total_output_tokens"] == 40 * 16
    assert result["total_input_tokens"] == 40 * 64
    assert result["mean_ttft_ms"] <= result["mean_e2el_ms"]
    assert result["median_ttft_ms"] <= result["median_e2el_ms"]
    assert result["p99_ttft_ms"] <= result["p99_e2el_ms"]
    assert Path(result["tokenizer"]) == Path(result["model"]), "the served dir's tokenizer"


TLS_FIXTURES = ROOT / "rust" / "server" / "tests" / "fixtures" / "tls"


def test_bench_over_https_with_the_test_ca(demo_model: Path, tmp_path: Path) -> None:
    port = free_port()
    log_path = tmp_path / "serve.log"
    env = {**os.environ, "VRS_RUST_FRONTEND_PATH": str(rust_binary()),
           "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false"}
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", "from cli.main import main; main()", "serve",
             str(demo_model), "--mock", "--port", str(port),
             "--ssl-certfile", str(TLS_FIXTURES / "server.pem"),
             "--ssl-keyfile", str(TLS_FIXTURES / "server.key")],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"https://localhost:{port}"
    trust = ssl.create_default_context(cafile=str(TLS_FIXTURES / "ca.pem"))
    try:
        wait_healthy(proc, url, log_path, verify=trust)
        assert f"on https://127.0.0.1:{port}" in log_path.read_text(errors="replace")
        result = bench(url, tmp_path / "r.json", "--ca-cert", str(TLS_FIXTURES / "ca.pem"),
                       "--num-prompts", "8", "--random-input-len", "16",
                       "--random-output-len", "4", "--ignore-eos", "--max-concurrency", "4")
        assert result["completed"] == 8 and result["failed"] == 0, result["error_samples"]
        # The system's trust store does not know the test CA.
        out = run_vrs("bench", "serve", "--base-url", url, "--num-prompts", "1")
        assert "certificate" in one_line_error(out).lower()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
