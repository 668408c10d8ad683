"""/metrics serves the vLLM names a vLLM Grafana dashboard queries (in the request modes;
every launch mode writes the same names, help and buckets).

The list of names, their types and labels is tests/server/vllm_dashboard_metrics.json
(taken from vLLM's published dashboard and its metric definitions, source and commit in the
file). Each served name must have its type, vLLM's labels and values that match the traffic
this test sends; the few vrs cannot measure are listed there as known-absent and must be
absent.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import httpx
import pytest

from tests.e2e.servers import MODEL, MODES, Pool, Server, wait_until

pytestmark = pytest.mark.e2e

FIXTURE = json.loads((Path(__file__).resolve().parents[1] / "server"
                      / "vllm_dashboard_metrics.json").read_text())
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')

Sample = tuple[str, tuple[tuple[str, str], ...]]


def scrape(server: Server) -> tuple[dict[str, str], dict[Sample, float]]:
    """The ``# TYPE`` of each name, and every sample by (name, sorted labels)."""
    response = httpx.get(f"{server.url}/metrics", timeout=10)
    assert response.status_code == 200
    types: dict[str, str] = {}
    samples: dict[Sample, float] = {}
    for line in response.text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert name not in types, f"{name} typed twice"
            types[name] = kind
        elif line and not line.startswith("#"):
            match = SAMPLE.match(line)
            assert match, line
            name, labels, value = match.groups()
            key = (name, tuple(sorted(LABEL.findall(labels or ""))))
            assert key not in samples, f"duplicate sample {line}"
            samples[key] = float(value)
    return types, samples


def total(samples: dict[Sample, float], name: str, **where: str) -> float:
    """The sum of ``name`` over engines (and any label not in ``where``)."""
    return sum(v for (n, labels), v in samples.items()
               if n == name and all((k, w) in labels for k, w in where.items()))


def test_every_dashboard_series_is_served_with_its_type_and_labels(server: Server) -> None:
    served = {**FIXTURE["dashboard"], **FIXTURE["also_served"]}
    absent = FIXTURE["known_absent"]
    assert set(absent) <= set(FIXTURE["dashboard"])
    server.client().completions.create(model=MODEL, prompt="warm up", max_tokens=2)
    types, samples = scrape(server)
    for name in absent:
        assert name not in types and not any(n.startswith(name) for n, _ in samples), name
    for name, spec in served.items():
        if name in absent:
            continue
        kind = spec["type"]
        assert types.get(name) == kind, (name, types.get(name))
        expected = set(spec["labels"])
        if kind == "histogram":
            parts = {"_bucket": expected | {"le"}, "_sum": expected, "_count": expected}
        elif kind == "counter":
            parts = {"_total": expected}
        else:
            parts = {"": expected}
        for suffix, label_names in parts.items():
            found = [dict(labels) for n, labels in samples if n == name + suffix]
            assert found, f"no {name}{suffix}"
            for labels in found:
                assert set(labels) == label_names, (name + suffix, labels)
                assert labels["model_name"] == MODEL
                assert labels["engine"].isdigit()
        if kind == "histogram":
            for labels in {tuple(kv for kv in lab if kv[0] != "le")
                           for n, lab in samples if n == f"{name}_bucket"}:
                buckets = sorted((float(dict(lab)["le"]), v) for (n, lab), v in samples.items()
                                 if n == f"{name}_bucket"
                                 and tuple(kv for kv in lab if kv[0] != "le") == labels)
                counts = [v for _, v in buckets]
                assert counts == sorted(counts), f"{name} buckets not cumulative"
                assert buckets[-1][0] == float("inf")
                assert buckets[-1][1] == samples[(f"{name}_count", labels)]
    usage = [v for (n, _), v in samples.items() if n == "vllm:kv_cache_usage_perc"]
    assert usage and all(0.0 <= v <= 1.0 for v in usage)


def test_values_follow_the_traffic(server: Server) -> None:
    _, before = scrape(server)
    client = server.client()
    one = client.completions.create(model=MODEL, prompt="count me please", max_tokens=5)
    two = client.completions.create(model=MODEL, prompt="two choices", max_tokens=3, n=2)
    stream = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "stream it"}], max_tokens=4,
        stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    streamed = chunks[-1].usage
    assert streamed is not None
    reasons = Counter([c.finish_reason for c in one.choices + two.choices]
                      + [c.finish_reason for chunk in chunks for c in chunk.choices
                         if c.finish_reason])
    engine_requests = 4  # one, two choices, one streamed
    generated = (one.usage.completion_tokens + two.usage.completion_tokens
                 + streamed.completion_tokens)
    prompts = (one.usage.prompt_tokens + 2 * two.usage.prompt_tokens
               + streamed.prompt_tokens)

    def delta(after: dict[Sample, float], name: str, **where: str) -> float:
        return total(after, name, **where) - total(before, name, **where)

    def settled() -> dict[Sample, float] | None:
        _, after = scrape(server)
        done = delta(after, "vllm:request_success_total") == engine_requests
        return after if done else None

    assert wait_until(settled, 10), "the finished requests were not all counted"
    after = settled()
    assert after is not None
    assert delta(after, "vllm:generation_tokens_total") == generated
    assert delta(after, "vllm:prompt_tokens_total") == prompts
    for reason, n in reasons.items():
        assert delta(after, "vllm:request_success_total", finished_reason=reason) == n, reason
    for name in ("time_to_first_token_seconds", "e2e_request_latency_seconds",
                 "request_decode_time_seconds", "request_prompt_tokens",
                 "request_generation_tokens"):
        assert delta(after, f"vllm:{name}_count") == engine_requests, name
    assert delta(after, "vllm:request_prompt_tokens_sum") == prompts
    assert delta(after, "vllm:request_generation_tokens_sum") == generated
    # One observation per HTTP request: the most tokens any of its choices generated.
    assert delta(after, "vllm:request_max_num_generation_tokens_count") == 3
    # A choice that ran to max_tokens generated max_tokens: 5, then 3 (the most of the two
    # choices), then 4.
    if set(reasons) == {"length"}:
        assert delta(after, "vllm:request_max_num_generation_tokens_sum") == 5 + 3 + 4
    # Every token after a request's first output is timed once per output.
    assert delta(after, "vllm:inter_token_latency_seconds_count") >= 1
    e2e = delta(after, "vllm:e2e_request_latency_seconds_sum")
    assert 0 < e2e < 60


def test_every_frontend_writes_the_same_names_help_and_buckets(pool: Pool) -> None:
    """The Rust and the Python frontends mirror each other: same HELP/TYPE lines, same
    label sets and bucket bounds (values differ with the traffic each one saw)."""

    def shape(server: Server) -> list[str]:
        text = httpx.get(f"{server.url}/metrics", timeout=10).text
        lines = [line for line in text.splitlines() if "vllm:" in line]
        return [re.sub(r" \S+$", "", line) if not line.startswith("#") else line
                for line in lines]

    shapes = {mode: shape(pool.get(mode)) for mode in MODES}
    assert shapes["python"], "no vllm:* series"
    for mode, lines in shapes.items():
        assert lines == shapes["python"], mode
