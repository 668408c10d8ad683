"""The cross-language contracts in server/contracts/ (read by both frontends; the Rust
twins of these checks are in rust/server/src/edge/metric_contract.rs and
rust/server/src/parsers/tools/formats/tests.rs): what the Python server writes and
parses comes from the files, read here with plain ``json``, not through the loaders."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import server
from engine import protocol as p
from server.edge.metrics import Metrics, Rejection
from server.parsers.tools import formats, json_formats

pytestmark = pytest.mark.unit

CONTRACTS = Path(server.__file__).resolve().parent / "contracts"
ROOT = Path(__file__).resolve().parents[2]
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def load(name: str) -> Any:
    return json.loads((CONTRACTS / name).read_text(encoding="utf-8"))


def exposition() -> str:
    """Every family with at least one sample: two engines, traffic on engine 0."""
    m = Metrics()
    m.ttft.observe(0.003)
    m.request("/v1/completions", 200)
    m.reject(Rejection.QUEUE_FULL_TOKENS)
    stats = {0: p.SchedulerStats(num_running=1, prefix_cache_queries=4, prefix_cache_hits=1),
             1: p.SchedulerStats()}
    m.vllm.first_token(0, 7, 0.003)
    m.vllm.finished(0, "stop", 0.4, 0.02, 7, 3, queue=0.2, prefill=0.05)
    vllm: list[str] = []
    m.vllm.render(vllm, "demo", 10**12, stats)  # no token-count bound left out
    return (m.render(stats, 2, {0: 1}) + "".join(vllm).encode()).decode()


def test_every_metric_family_is_the_files() -> None:
    """HELP/TYPE lines in the file's order, each sample's label names, every bucket bound."""
    contract = load("metrics.json")
    text = exposition()
    heads = re.findall(r"^# HELP (\S+) (.*)\n# TYPE (\S+) (\S+)$", text, re.M)
    assert [(n, h, t) for n, h, n2, t in heads if n == n2] == [
        (f["name"], f["help"], f["type"]) for f in contract["families"]]
    assert len(heads) == text.count("# HELP ") == text.count("# TYPE ")
    samples: dict[str, list[dict[str, str]]] = {}
    for line in text.splitlines():
        if not line.startswith("#"):
            match = SAMPLE.match(line)
            assert match, line
            samples.setdefault(match[1], []).append(dict(LABEL.findall(match[2] or "")))
    for f in contract["families"]:
        name, labels = f["name"], f["labels"]
        if f["type"] == "histogram":
            rows = samples[f"{name}_bucket"] + samples[f"{name}_sum"] + samples[f"{name}_count"]
            les = [b["le"] for b in samples[f"{name}_bucket"] if b.get("engine", "0") == "0"]
            assert les == [*contract["buckets"][f["buckets"]], "+Inf"], name
        else:
            counter = f["type"] == "counter" and not name.endswith("_total")
            rows = samples[f"{name}_total" if counter else name]
        assert rows, name
        for row in rows:
            assert sorted(row.keys() - {"le"}) == sorted(labels), (name, row)


def test_token_count_buckets_stop_at_the_context_length_where_the_file_says() -> None:
    contract = load("metrics.json")
    out: list[str] = []
    Metrics().vllm.render(out, "demo", 100, {0: p.SchedulerStats()})
    text = "".join(out)
    vllm = [f for f in contract["families"] if f["name"].startswith("vllm:")]
    assert any(f.get("capped_at_max_model_len") for f in vllm)
    for f in vllm:
        if f["type"] == "histogram":
            les = re.findall(rf'^{f["name"]}_bucket{{.*,le="([^"]+)"}}', text, re.M)
            assert les == [b for b in contract["buckets"][f["buckets"]]
                           if not f.get("capped_at_max_model_len") or float(b) <= 100
                           ] + ["+Inf"], f["name"]


def test_the_tool_formats_and_markers_are_the_files() -> None:
    specs = load("tool_formats.json")["formats"]
    by_name = {s["name"]: s for s in specs}
    assert list(formats.TOOL_CALL_PARSERS) == [s["name"] for s in specs]
    for s in specs:
        fmt = formats.TOOL_CALL_PARSERS[s["name"]]
        assert (fmt.begin, fmt.end) == (s["begin"], s["end"])
    assert formats.NATIVE_FORCING == tuple(s["name"] for s in specs if s.get("native"))
    ds = by_name["deepseek_v3"]
    assert (formats.MISTRAL_ARGS, formats.DEEPSEEK_SEP) == (by_name["mistral"]["args"], ds["sep"])
    assert (json_formats.DS_CALL_BEGIN, json_formats.DS_CALL_END) == (ds["call_begin"],
                                                                      ds["call_end"])


def test_every_marker_is_in_a_shared_case_of_its_parser() -> None:
    """The file against the literal bytes of tests/parser_cases/tools.jsonl (which both
    frontends' parsers must parse): a changed marker fails here or there."""
    cases = [json.loads(line) for line in
             (ROOT / "tests" / "parser_cases" / "tools.jsonl").read_text().splitlines() if line]
    for s in load("tool_formats.json")["formats"]:
        texts = [c["text"] for c in cases if c["parser"] == s["name"] and c["calls"]]
        for key in ("begin", "end", "args", "call_begin", "call_end", "sep"):
            if s.get(key):
                assert any(s[key] in t for t in texts), (s["name"], key)
