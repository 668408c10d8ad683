"""`vrs bench sweep` end to end: four concurrencies against the Rust frontend (`vrs-rs serve
--mock`) and the Python one (`vrs serve --frontend python --mock`), the result files and
the summary CSV, resuming (nothing run again), and the early stops (an impossible SLO, a
server that cannot be reached)."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_bench import ROOT, MockServer, free_port, run_vrs
from tests.cli.test_bench import demo_model as demo_model  # the fixture
from tests.processes import terminate, wait_healthy

pytestmark = pytest.mark.e2e

CONCURRENCIES = (1, 2, 4, 8)
NUM_PROMPTS, INPUT_LEN, OUTPUT_LEN = 8, 32, 4
# a mock engine step of 1 ms: the tokens of an answer come in chunks of their own, so the
# plot has inter-token latencies to draw
# (vrs-rs takes it in --engine-config, `vrs serve` as --mock-step-delay-ms)
STEP = ("--engine-config", json.dumps({"mock_step_delay_ms": 1.0}))


class PythonMockServer:
    """`vrs serve MODEL --frontend python --mock` on a free loopback port."""

    def __init__(self, model: Path, log_path: Path) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        env = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false"}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from cli.main import main; main()", "serve", str(model),
             "--frontend", "python", "--mock", "--host", "127.0.0.1", "--port", str(port),
             "--mock-step-delay-ms", "1"],
            cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT)
        wait_healthy(self.proc, self.url, log_path)

    def stop(self) -> None:
        terminate(self.proc)
        self._log.close()


@pytest.fixture(scope="module")
def servers(demo_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[
        dict[str, str]]:
    logs = tmp_path_factory.mktemp("sweep-servers")
    rust = MockServer(demo_model, logs / "rust.log", *STEP)
    try:
        python = PythonMockServer(demo_model, logs / "python.log")
    except BaseException:
        rust.stop()
        raise
    yield {"rust": rust.url, "python": python.url}
    python.stop()
    rust.stop()


def sweep(servers: dict[str, str], out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    targets = [arg for label, url in servers.items()
               for arg in ("--base-url", url, "--label", label)]
    return run_vrs("bench", "sweep", *targets, "--output-dir", str(out),
                   "--max-concurrency", ",".join(map(str, CONCURRENCIES)),
                   "--num-prompts", str(NUM_PROMPTS), "--random-input-len", str(INPUT_LEN),
                   "--random-output-len", str(OUTPUT_LEN), "--ignore-eos", *extra)


def csv_rows(out: Path) -> list[dict[str, str]]:
    with open(out / "summary.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_sweep_over_two_servers_then_resume(servers: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    run = sweep(servers, out)
    assert run.returncode == 0, run.stdout + run.stderr
    files = sorted(out.glob("*/*.json"))
    expected = sorted(out / label / f"c{c}.json" for label in servers for c in CONCURRENCIES)
    assert files == expected
    for label in servers:
        for c in CONCURRENCIES:
            result = json.loads((out / label / f"c{c}.json").read_text())
            assert (result["label"], result["max_concurrency"]) == (label, c)
            assert result["request_rate"] == "inf" and result["base_url"] == servers[label]
            assert result["completed"] == NUM_PROMPTS and result["failed"] == 0
            assert result["total_input_tokens"] == NUM_PROMPTS * INPUT_LEN
            assert result["total_output_tokens"] == NUM_PROMPTS * OUTPUT_LEN
            assert result["max_concurrent_requests"] <= c
            for key in ("date", "duration", "median_ttft_ms", "p99_ttft_ms", "mean_itl_ms",
                        "median_e2el_ms", "p99_tpot_ms", "output_throughput"):
                assert key in result, key
            assert f"[{list(servers).index(label) * 4 + CONCURRENCIES.index(c) + 1}/8] " \
                   f"{label} c={c}: " in run.stdout
    rows = csv_rows(out)
    assert [(r["label"], int(r["max_concurrency"])) for r in rows] == [
        (label, c) for label in servers for c in CONCURRENCIES]
    for row in rows:
        stored = json.loads((out / row["label"] / f"c{row['max_concurrency']}.json").read_text())
        assert float(row["request_throughput"]) == stored["request_throughput"]
        assert float(row["p99_ttft_ms"]) == stored["p99_ttft_ms"]
        assert float(row["median_itl_ms"]) == stored["median_itl_ms"]
        assert (int(row["completed"]), int(row["failed"]), row["request_rate"]) == (
            NUM_PROMPTS, 0, "inf")
    assert "summary written to" in run.stdout and "(8 rows)" in run.stdout
    # vLLM's `vllm bench sweep plot OUTPUT_DIR` reads **/summary.json: lists of result
    # maps, with its default axes total_token_throughput and median_ttft_ms
    listed = json.loads((out / "summary.json").read_text())
    assert [(r["label"], r["max_concurrency"]) for r in listed] == [
        (label, c) for label in servers for c in CONCURRENCIES]
    for entry in listed:
        assert entry == json.loads(
            (out / entry["label"] / f"c{entry['max_concurrency']}.json").read_text())
        assert isinstance(entry["total_token_throughput"], float)
        assert isinstance(entry["median_ttft_ms"], float)
    check_plot(out, tmp_path / "plots", list(servers))

    # resume: every point is kept, nothing is sent again, the CSV is the same
    before = {path: path.stat().st_mtime_ns for path in files}
    csv_before = (out / "summary.csv").read_text()
    again = sweep(servers, out)
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.count("(kept from an earlier run)") == 8, again.stdout
    assert ": running" not in again.stdout
    assert {path: path.stat().st_mtime_ns for path in files} == before
    assert (out / "summary.csv").read_text() == csv_before

    # --no-resume on one server: its points run again; the CSV still has every file's row
    redo = sweep({"rust": servers["rust"]}, out, "--no-resume")
    assert redo.returncode == 0, redo.stdout + redo.stderr
    assert redo.stdout.count(": running") == 4
    for path in files:
        changed = path.stat().st_mtime_ns != before[path]
        assert changed == (path.parent.name == "rust"), path
    assert [(r["label"], int(r["max_concurrency"])) for r in csv_rows(out)] == [
        (label, c) for label in servers for c in CONCURRENCIES]


def check_plot(sweep_dir: Path, plots: Path, labels: list[str]) -> None:
    """`vrs bench plot` of the sweep: a PNG, and an HTML report that loads nothing from
    elsewhere (the figure inline, no script, no external URL)."""
    out = run_vrs("bench", "plot", str(sweep_dir), "--output", str(plots))
    assert out.returncode == 0, out.stdout + out.stderr
    png = (plots / "sweep.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 20_000
    page = (plots / "report.html").read_text()
    assert "data:image/png;base64," in page
    assert "<script" not in page and not re.search(r"(src|href)=\"(https?:)?//", page)
    for label in labels:  # the table: a row per point
        assert page.count(f"<td>{label}</td>") == len(CONCURRENCIES)


def test_sweep_stops_each_server_at_an_impossible_slo(servers: dict[str, str],
                                                      tmp_path: Path) -> None:
    out = tmp_path / "slo"
    run = sweep(servers, out, "--stop-at-slo", "ttft:0.001")
    assert run.returncode == 0, run.stdout + run.stderr
    assert sorted(out.glob("*/*.json")) == sorted(out / label / "c1.json" for label in servers)
    for label in servers:
        assert (f"stopped {label} at c=1: median_ttft_ms" in run.stdout), run.stdout
    assert run.stdout.count("> 0.001 ms (stop-at-slo median_ttft:0.001) (3 points left "
                            "out)") == 2, run.stdout
    assert [r["label"] for r in csv_rows(out)] == list(servers)
    # resumed, the stored point still stops the sweep: nothing runs
    again = sweep(servers, out, "--stop-at-slo", "ttft:0.001")
    assert again.returncode == 0 and ": running" not in again.stdout, again.stdout
    assert again.stdout.count("stopped ") == 2
    assert len(list(out.glob("*/*.json"))) == 2


def test_sweep_of_an_unreachable_server_stops_and_fails(tmp_path: Path) -> None:
    out = tmp_path / "down"
    run = sweep({"down": f"http://127.0.0.1:{free_port()}"}, out)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "[1/4] down c=1: could not run: cannot reach" in run.stdout, run.stdout
    assert "stopped down at c=1: the point could not run" in run.stdout
    assert "(3 points left out)" in run.stdout
    assert list(out.glob("*/*.json")) == []
    assert csv_rows(out) == []


def test_sweep_settings_are_checked_before_anything_runs(tmp_path: Path) -> None:
    run = run_vrs("bench", "sweep", "--base-url", "http://127.0.0.1:1", "--label", "a",
                  "--label", "b", "--max-concurrency", "1,2", "--output-dir",
                  str(tmp_path / "x"))
    assert run.returncode != 0
    assert "one label per server" in run.stdout + run.stderr
    run = run_vrs("bench", "sweep", "--base-url", "http://127.0.0.1:1", "--max-concurrency",
                  "1", "--stop-at-slo", "ttft", "--output-dir", str(tmp_path / "x"))
    assert run.returncode != 0 and "[STAT_]METRIC:MS" in run.stdout + run.stderr
    assert not (tmp_path / "x").exists()
