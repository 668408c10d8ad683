"""`vrs bench serve --plot DIR` against `vrs-rs serve --mock` (the run's TTFT and ITL
distributions from its per-request lists, which the result file keeps only with
`--save-detailed`), and `vrs bench plot`'s errors on files it cannot use. The sweep's
plot is checked in tests/cli/test_bench_sweep.py, on a real two-server sweep."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_bench import (  # noqa: F401 - fixtures
    MockServer,
    bench,
    demo_model,
    run_vrs,
)

pytestmark = pytest.mark.e2e

PNG = b"\x89PNG\r\n\x1a\n"
DETAILED = ("input_lens", "output_lens", "start_times", "ttfts", "itls", "errors")


@pytest.fixture(scope="module")
def mock_server(demo_model: Path,  # noqa: F811 - the imported fixture
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # one engine step per 2 ms: a token per chunk, so there are gaps to draw
    server = MockServer(demo_model, tmp_path_factory.mktemp("vrs-rs") / "serve.log",
                        "--engine-config", json.dumps({"mock_step_delay_ms": 2.0}))
    yield server.url
    server.stop()


def test_serve_plot_draws_the_runs_distributions(mock_server: str, tmp_path: Path) -> None:
    args = ("--num-prompts", "24", "--random-input-len", "16", "--random-output-len", "6",
            "--ignore-eos", "--max-concurrency", "4")
    result = bench(mock_server, tmp_path / "r.json", *args, "--plot", str(tmp_path / "p"))
    assert result["completed"] == 24
    png = (tmp_path / "p" / "distributions.png").read_bytes()
    assert png.startswith(PNG) and len(png) > 10_000
    page = (tmp_path / "p" / "report.html").read_text()
    assert "data:image/png;base64," in page and "<script" not in page
    # the lists were drawn, not written: the result file stays the summary
    assert not set(DETAILED) & set(result)
    detailed = bench(mock_server, tmp_path / "d.json", *args, "--save-detailed")
    assert [len(detailed[k]) for k in DETAILED] == [24] * 6
    assert detailed["input_lens"] == [16] * 24 and detailed["output_lens"] == [6] * 24
    # gaps between content chunks (the mock may put several tokens in one), in seconds:
    # the summary's ITL is their mean
    gaps = [g for request in detailed["itls"] for g in request]
    assert len(gaps) > 24 and all(len(request) <= 5 for request in detailed["itls"])
    assert sum(gaps) / len(gaps) * 1000 == pytest.approx(detailed["mean_itl_ms"])
    assert detailed["errors"] == [""] * 24
    assert all(0 < t < 10 for t in detailed["ttfts"]), "seconds, as vLLM's"


def test_plot_of_an_embeddings_run_is_refused(tmp_path: Path) -> None:
    out = run_vrs("bench", "serve", "--backend", "openai-embeddings", "--plot",
                  str(tmp_path / "p"), "--port", "1")
    assert out.returncode == 2 and "an embeddings run does not measure" in out.stderr
    assert not (tmp_path / "p").exists()


def test_plot_names_the_file_it_cannot_use(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "completed": 3,\n  oops\n}\n')
    out = run_vrs("bench", "plot", str(bad), "--output", str(tmp_path / "o"))
    assert out.returncode != 0 and f"{bad} line 3" in out.stdout + out.stderr
    other = tmp_path / "other.json"
    other.write_text('{"model": "x"}')
    out = run_vrs("bench", "plot", str(other), "--output", str(tmp_path / "o"))
    assert out.returncode != 0 and "not a `vrs bench serve` result" in out.stdout + out.stderr
    single = tmp_path / "one.json"
    single.write_text(json.dumps({"completed": 1, "max_concurrency": None,
                                  "request_rate": "inf"}))
    out = run_vrs("bench", "plot", str(single), "--output", str(tmp_path / "o"))
    assert out.returncode != 0 and "to draw a curve over" in out.stdout + out.stderr
    assert not (tmp_path / "o").exists()
