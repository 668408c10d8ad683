"""benchmarks/llamacpp_report.py: the build cache's key, a bench result cut to a cell,
session CPU from a /proc tree, medians, ratios and the markdown table."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.unit

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "llamacpp_report.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("llamacpp_report", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


report = _load()

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC
flags\t\t: fpu sse2 avx fma avx2 f16c
processor\t: 1
model name\t: AMD EPYC
flags\t\t: fpu sse2 avx fma avx2 f16c
"""


def test_the_cache_key_names_the_version_and_the_cpu() -> None:
    key = report.build_key("0.3.36", CPUINFO)
    assert key.startswith("0.3.36-") and len(key) == len("0.3.36-") + 12
    # the flags' order does not matter, a flag more does, and so does the model
    assert report.build_key("0.3.36", CPUINFO.replace("avx fma", "fma avx")) == key
    assert report.build_key("0.3.36", CPUINFO.replace("f16c", "f16c avx512f")) != key
    assert report.build_key("0.3.36", CPUINFO.replace("AMD EPYC", "Intel Xeon")) != key
    assert report.build_key("0.3.35", CPUINFO) != key
    with pytest.raises(ValueError, match="flags"):
        report.cpu_key("model name : x\n")


def test_cpu_summary_says_avx2_only() -> None:
    summary = report.cpu_summary(CPUINFO)
    assert summary == {"model": "AMD EPYC", "simd": ["avx", "avx2", "fma", "f16c"],
                       "avx2_only": True}
    assert not report.cpu_summary(CPUINFO.replace("f16c", "f16c avx512f"))["avx2_only"]


def test_a_cell_counts_the_probe_in_the_cpu_per_token() -> None:
    result = {"completed": 3, "output_throughput": 250.0, "median_tpot_ms": 4.0,
              "median_ttft_ms": 12.5, "median_itl_ms": 3.9}
    cell = report.cell(result, cpu_s=0.8, output_len=100)
    assert cell == {"output_tok_s": 250.0, "tpot_p50_ms": 4.0, "ttft_p50_ms": 12.5,
                    "itl_p50_ms": 3.9, "cpu_ms_per_token": 2.0}  # 800 ms / (4 x 100)


def _cell(tok_s: float, cpu: float) -> dict[str, float]:
    return {"output_tok_s": tok_s, "tpot_p50_ms": 1000 / tok_s, "ttft_p50_ms": 10.0,
            "itl_p50_ms": 1000 / tok_s, "cpu_ms_per_token": cpu}


def test_summarise_takes_medians_and_ratios_at_the_same_concurrency() -> None:
    runs = []
    for r, (ours, theirs) in enumerate([(100, 50), (300, 40), (200, 60)]):
        runs.append({"contender": "vrs serve", "concurrency": 1, "round": r,
                     "cell": _cell(ours, 2.0)})
        runs.append({"contender": "llama-server F32", "concurrency": 1, "round": r,
                     "cell": _cell(theirs, 1.0)})
    runs.append({"contender": "vrs serve", "concurrency": 64, "round": 0,
                 "cell": _cell(1000, 0.5)})
    rows = report.summarise(runs, "llama-server F32")
    assert [(row["contender"], row["concurrency"]) for row in rows] == [
        ("vrs serve", 1), ("llama-server F32", 1), ("vrs serve", 64)]
    vrs, llama, alone = rows
    assert vrs["output_tok_s"] == 200 and llama["output_tok_s"] == 50
    assert vrs["rounds_tok_s"] == [100, 300, 200]
    assert vrs["ratio"]["output_tok_s"] == pytest.approx(4.0)
    assert vrs["ratio"]["cpu_ms_per_token"] == pytest.approx(2.0)
    assert llama["ratio"]["output_tok_s"] == pytest.approx(1.0)
    assert alone["ratio"] is None  # no baseline at 64

    table = report.markdown(rows, "llama-server F32")
    assert "| vrs serve | 1 | 200.0 | 5.00 | 10.0 | 5.00 | 2.000 | 100, 300, 200 |" in table
    assert "| vrs / llama-server F32 | concurrency |" in table
    assert "| vrs serve | 1 | 4.00x | 0.25x | 1.00x | 0.25x | 2.00x |" in table
    with pytest.raises(ValueError):
        report.medians([])


def test_session_cpu_sums_the_session_from_proc(tmp_path: Path) -> None:
    tick = os.sysconf("SC_CLK_TCK")

    def proc(pid: int, command: str, session: int, utime: int, stime: int) -> None:
        (tmp_path / str(pid)).mkdir()
        rest = ["S", "1", str(session), str(session)] + ["0"] * 7 + [str(utime), str(stime)]
        (tmp_path / str(pid) / "stat").write_text(f"{pid} ({command}) {' '.join(rest)} 0 0\n")

    proc(10, "vrs serve", 10, tick, tick)           # the leader: 2 s
    proc(11, "python -m (engine)", 10, 3 * tick, 0)  # a parenthesis in the name: 3 s
    proc(12, "other", 12, 50 * tick, 0)              # another session
    (tmp_path / "self").mkdir()
    (tmp_path / "13").mkdir()                        # exited meanwhile: no stat
    assert report.session_cpu_s(10, tmp_path) == pytest.approx(5.0)


def test_vrs_variant_reads_a_name_and_its_variables() -> None:
    assert report.vrs_variant("t1:OMP_NUM_THREADS=1") == ("t1", {"OMP_NUM_THREADS": "1"})
    assert report.vrs_variant("p: OMP_WAIT_POLICY=passive,VRS_X=a=b") == (
        "p", {"OMP_WAIT_POLICY": "passive", "VRS_X": "a=b"})


@pytest.mark.parametrize("spec", ["t1", "t1:", ":A=1", "t1:A", "t1:=1", "t1:A=1,B"])
def test_vrs_variant_refuses_what_is_not_name_and_assignments(spec: str) -> None:
    with pytest.raises(ValueError, match="--vrs-env"):
        report.vrs_variant(spec)
