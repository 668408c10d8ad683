"""vLLM's metric names (``vllm:*``) on ``GET /metrics``, as
``rust/server/src/edge/vllm_metrics.rs``; names, types, help texts, buckets and label names
are ``server/contracts/metrics.json``'s. Per-request series are measured here in the
frontend, per engine the request was routed to; engine state comes from each engine's latest
``SchedulerStats``. Behaviour: docs/api.md, "vLLM's names".
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import msgspec

from engine import protocol as p
from server.edge.metric_contract import buckets, family, header

REASONS = ("stop", "length", "abort")  # what vLLM pre-creates for vllm:request_success


class _Histogram(msgspec.Struct, frozen=True):
    """A histogram's name, bounds, their ``le`` labels, and whether bounds are token counts
    (rendered up to the model's context length)."""

    name: str
    bounds: tuple[float, ...]
    labels: tuple[str, ...]
    capped: bool


def _histogram(name: str) -> _Histogram:
    labels = buckets(name)
    return _Histogram(name, tuple(float(b) for b in labels), labels,
                      family(name).capped_at_max_model_len)


# vLLM's own order (vllm/v1/metrics/loggers.py), as vrs-rs writes them.
(TTFT, ITL, E2E, QUEUE, INFERENCE, PREFILL, DECODE, PROMPT_LEN, GENERATION_LEN,
 MAX_GENERATION) = range(10)
HISTOGRAMS = tuple(_histogram(name) for name in (
    "vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
    "vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds",
    "vllm:request_inference_time_seconds", "vllm:request_prefill_time_seconds",
    "vllm:request_decode_time_seconds", "vllm:request_prompt_tokens",
    "vllm:request_generation_tokens", "vllm:request_max_num_generation_tokens"))

# Engine state from SchedulerStats: (name, value).
_ENGINE: tuple[tuple[str, Callable[[p.SchedulerStats], str]], ...] = (
    ("vllm:num_requests_running", lambda s: str(s.num_running)),
    ("vllm:num_requests_waiting", lambda s: str(s.num_waiting)),
    ("vllm:kv_cache_usage_perc", lambda s: repr(float(s.kv_cache_usage))),
    ("vllm:gpu_cache_usage_perc", lambda s: repr(float(s.kv_cache_usage))),
    ("vllm:prefix_cache_queries", lambda s: str(s.prefix_cache_queries)),
    ("vllm:prefix_cache_hits", lambda s: str(s.prefix_cache_hits)),
    ("vllm:num_preemptions", lambda s: str(s.num_preemptions)),
)


@dataclass
class _Counts:
    buckets: list[int]
    total: float = 0.0
    count: int = 0


@dataclass
class _PerEngine:
    """Everything measured for the requests routed to one engine."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    success: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REASONS, 0))
    histograms: list[_Counts] = field(
        default_factory=lambda: [_Counts([0] * len(h.bounds)) for h in HISTOGRAMS])

    def observe(self, which: int, value: float) -> None:
        counts = self.histograms[which]
        bounds = HISTOGRAMS[which].bounds
        i = bisect_left(bounds, value)  # the first bound >= value (none for NaN)
        if i < len(bounds) and value <= bounds[i]:
            counts.buckets[i] += 1
        counts.total += value
        counts.count += 1

    def copy(self) -> _PerEngine:
        return _PerEngine(self.prompt_tokens, self.generation_tokens, dict(self.success),
                          [_Counts(list(c.buckets), c.total, c.count)
                           for c in self.histograms])


class Siblings:
    """The ``n`` choices of one HTTP request: the last to finish reports the most tokens any
    of them generated (``vllm:request_max_num_generation_tokens``)."""

    __slots__ = ("remaining", "most")

    def __init__(self, n: int) -> None:
        self.remaining = n
        self.most = 0

    def done(self, tokens: int) -> int | None:
        """One choice ended with ``tokens`` generated; the most of all once the last ended."""
        self.most = max(self.most, tokens)
        self.remaining -= 1
        return self.most if self.remaining == 0 else None


class VllmMetrics:
    """The ``vllm:*`` series measured in the frontend, per engine index."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._engines: dict[int, _PerEngine] = {}

    def _engine(self, engine: int) -> _PerEngine:
        e = self._engines.get(engine)
        if e is None:  # built once per engine, not on every token
            e = self._engines[engine] = _PerEngine()
        return e

    def first_token(self, engine: int, prompt_tokens: int, ttft: float) -> None:
        """The engine's first output for a request: its prompt was processed."""
        with self._lock:
            e = self._engine(engine)
            e.prompt_tokens += prompt_tokens
            e.observe(TTFT, ttft)

    def generated(self, engine: int, tokens: int, since_last: float | None) -> None:
        """``tokens`` generated; ``since_last``: seconds since the previous output."""
        with self._lock:
            e = self._engine(engine)
            e.generation_tokens += tokens
            if since_last is not None:
                e.observe(ITL, since_last)

    def finished(self, engine: int, reason: str, e2e: float, decode: float | None,
                 prompt_tokens: int, generation_tokens: int, queue: float | None = None,
                 prefill: float | None = None) -> None:
        """A request that finished (not failed); ``queue`` / ``prefill``: the engine's
        times (None when it sent none, e.g. aborted while waiting)."""
        with self._lock:
            e = self._engine(engine)
            e.success[reason] = e.success.get(reason, 0) + 1
            e.observe(E2E, e2e)
            if decode is not None:
                e.observe(DECODE, decode)
            if queue is not None:
                e.observe(QUEUE, queue)
            if prefill is not None:
                e.observe(PREFILL, prefill)
                e.observe(INFERENCE, prefill + (decode or 0.0))
            e.observe(PROMPT_LEN, float(prompt_tokens))
            e.observe(GENERATION_LEN, float(generation_tokens))

    def max_generation(self, engine: int, tokens: int) -> None:
        with self._lock:
            self._engine(engine).observe(MAX_GENERATION, float(tokens))

    def render(self, out: list[str], model_name: str, max_model_len: int,
               stats: Mapping[int, p.SchedulerStats]) -> None:
        """Appends every ``vllm:*`` series, one label set per engine (those with stats
        and those that served requests)."""
        with self._lock:
            measured = {i: e.copy() for i, e in self._engines.items()}
        for index in stats:
            measured.setdefault(index, _PerEngine())
        model = _escape(model_name)

        def labels(index: int) -> str:
            return f'model_name="{model}",engine="{index}"'

        for name, value in _ENGINE:
            header(out, name)
            sample = f"{name}_total" if family(name).type == "counter" else name
            for index in sorted(stats):
                out.append(f"{sample}{{{labels(index)}}} {value(stats[index])}\n")
        engines = sorted(measured.items())
        for name, attr in (("vllm:prompt_tokens", "prompt_tokens"),
                           ("vllm:generation_tokens", "generation_tokens")):
            header(out, name)
            for index, e in engines:
                out.append(f"{name}_total{{{labels(index)}}} {getattr(e, attr)}\n")
        name = "vllm:request_success"
        header(out, name)
        for index, e in engines:
            for reason, n in sorted(e.success.items()):
                out.append(f'{name}_total{{{labels(index)},finished_reason="{reason}"}} {n}\n')
        for which, h in enumerate(HISTOGRAMS):
            name = h.name
            header(out, name)
            for index, e in engines:
                c = e.histograms[which]
                running = 0
                for bound, le, n in zip(h.bounds, h.labels, c.buckets, strict=True):
                    running += n
                    if h.capped and bound > max_model_len:
                        break
                    out.append(f'{name}_bucket{{{labels(index)},le="{le}"}} {running}\n')
                out.append(f'{name}_bucket{{{labels(index)},le="+Inf"}} {c.count}\n')
                out.append(f"{name}_sum{{{labels(index)}}} {c.total!r}\n")
                out.append(f"{name}_count{{{labels(index)}}} {c.count}\n")


def _escape(value: str) -> str:
    """A label value in the text format: backslash, quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
