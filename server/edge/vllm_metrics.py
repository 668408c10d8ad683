"""vLLM's metric names (``vllm:*``) on ``GET /metrics``, so a vLLM Grafana dashboard works
against vrs.

Mirrors ``rust/server/src/edge/vllm_metrics.rs``: the same names, help texts, buckets and
labels (``model_name`` and ``engine`` on every series, as vLLM's
``vllm/v1/metrics/loggers.py`` has them). Counters follow ``prometheus_client``: the
``# TYPE`` line names the base name, the sample carries ``_total``.

Per-request series are measured here in the frontend, per engine the request was routed
to; engine state comes from each engine's latest ``SchedulerStats``. The queue and
prefill times are the engine's own (``queue_time`` / ``prefill_time`` of a request's
first output); the inference time is the prefill time plus the decode time (from the
first to the last output, measured here), as vLLM's RUNNING phase. All three are observed
when a request finishes, with the end-to-end latency.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from engine import protocol as p

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5,
                5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
TOKEN_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0,
                         2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
REQUEST_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0,
                   50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
# Token counts: 1, 2, 5, 10, 20, 50, ... rendered up to the model's context length.
COUNT_BUCKETS = tuple(float(m * 10**e) for e in range(9) for m in (1, 2, 5)) + (1e9,)
REASONS = ("stop", "length", "abort")  # what vLLM pre-creates for vllm:request_success

# vLLM's own order (vllm/v1/metrics/loggers.py), as vrs-rs writes them.
(TTFT, ITL, E2E, QUEUE, INFERENCE, PREFILL, DECODE, PROMPT_LEN, GENERATION_LEN,
 MAX_GENERATION) = range(10)
# (name, help, bounds, bounds are token counts)
HISTOGRAMS: tuple[tuple[str, str, tuple[float, ...], bool], ...] = (
    ("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
     TTFT_BUCKETS, False),
    ("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
     TOKEN_LATENCY_BUCKETS, False),
    ("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
     REQUEST_BUCKETS, False),
    ("vllm:request_queue_time_seconds",
     "Histogram of time spent in WAITING phase for request.", REQUEST_BUCKETS, False),
    ("vllm:request_inference_time_seconds",
     "Histogram of time spent in RUNNING phase for request.", REQUEST_BUCKETS, False),
    ("vllm:request_prefill_time_seconds",
     "Histogram of time spent in PREFILL phase for request.", REQUEST_BUCKETS, False),
    ("vllm:request_decode_time_seconds",
     "Histogram of time spent in DECODE phase for request.", REQUEST_BUCKETS, False),
    ("vllm:request_prompt_tokens", "Number of prefill tokens processed.", COUNT_BUCKETS, True),
    ("vllm:request_generation_tokens", "Number of generation tokens processed.",
     COUNT_BUCKETS, True),
    ("vllm:request_max_num_generation_tokens",
     "Histogram of maximum number of requested generation tokens.", COUNT_BUCKETS, True),
)

# Engine state from SchedulerStats: (name, type, help, value).
_ENGINE: tuple[tuple[str, str, str, Callable[[p.SchedulerStats], str]], ...] = (
    ("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.",
     lambda s: str(s.num_running)),
    ("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
     lambda s: str(s.num_waiting)),
    ("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.",
     lambda s: repr(float(s.kv_cache_usage))),
    ("vllm:gpu_cache_usage_perc", "gauge",
     "GPU KV-cache usage. 1 means 100 percent usage. DEPRECATED: Use "
     "vllm:kv_cache_usage_perc instead.", lambda s: repr(float(s.kv_cache_usage))),
    ("vllm:prefix_cache_queries", "counter",
     "Prefix cache queries, in terms of number of queried tokens.",
     lambda s: str(s.prefix_cache_queries)),
    ("vllm:prefix_cache_hits", "counter",
     "Prefix cache hits, in terms of number of cached tokens.",
     lambda s: str(s.prefix_cache_hits)),
    ("vllm:num_preemptions", "counter", "Cumulative number of preemption from the engine.",
     lambda s: str(s.num_preemptions)),
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
        default_factory=lambda: [_Counts([0] * len(h[2])) for h in HISTOGRAMS])

    def observe(self, which: int, value: float) -> None:
        counts = self.histograms[which]
        bounds = HISTOGRAMS[which][2]
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

        for name, kind, help_text, value in _ENGINE:
            _header(out, name, help_text, kind)
            sample = f"{name}_total" if kind == "counter" else name
            for index in sorted(stats):
                out.append(f"{sample}{{{labels(index)}}} {value(stats[index])}\n")
        engines = sorted(measured.items())
        for name, help_text, attr in (
                ("vllm:prompt_tokens", "Number of prefill tokens processed.", "prompt_tokens"),
                ("vllm:generation_tokens", "Number of generation tokens processed.",
                 "generation_tokens")):
            _header(out, name, help_text, "counter")
            for index, e in engines:
                out.append(f"{name}_total{{{labels(index)}}} {getattr(e, attr)}\n")
        name = "vllm:request_success"
        _header(out, name, "Count of successfully processed requests.", "counter")
        for index, e in engines:
            for reason, n in sorted(e.success.items()):
                out.append(f'{name}_total{{{labels(index)},finished_reason="{reason}"}} {n}\n')
        for which, (name, help_text, bounds, counts) in enumerate(HISTOGRAMS):
            _header(out, name, help_text, "histogram")
            for index, e in engines:
                c = e.histograms[which]
                running = 0
                for bound, n in zip(bounds, c.buckets, strict=True):
                    running += n
                    if counts and bound > max_model_len:
                        break
                    out.append(f'{name}_bucket{{{labels(index)},le="{bound!r}"}} {running}\n')
                out.append(f'{name}_bucket{{{labels(index)},le="+Inf"}} {c.count}\n')
                out.append(f"{name}_sum{{{labels(index)}}} {c.total!r}\n")
                out.append(f"{name}_count{{{labels(index)}}} {c.count}\n")


def _header(out: list[str], name: str, help_text: str, kind: str) -> None:
    out.append(f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n")


def _escape(value: str) -> str:
    """A label value in the text format: backslash, quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
