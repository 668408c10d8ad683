"""``GET /metrics``: Prometheus text format (version 0.0.4), written by hand.

Mirrors ``rust/server/src/edge/metrics.rs``; each family's type, help text, label names and
buckets, and the ``endpoint`` label's values, are ``server/contracts/metrics.json``'s
(:mod:`server.edge.metric_contract`), which both frontends read. Frontend metrics are
counted here; the engine's come from the latest ``SchedulerStats`` each engine sent (one
``engine`` label per engine). vLLM's names (``vllm:*``) come from
:mod:`server.edge.vllm_metrics`, always served next to these.
"""

from __future__ import annotations

import enum
import threading
from bisect import bisect_left
from collections.abc import Callable, Mapping

from engine import protocol as p
from server.edge.metric_contract import ENDPOINTS, buckets, family, header
from server.edge.vllm_metrics import VllmMetrics

CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"


class Rejection(enum.Enum):
    """Why a generation request was refused or shed for overload (the ``reason`` label of
    ``vrs:requests_rejected_total``); as ``Rejection`` in the Rust metrics."""

    MAX_CONCURRENT_REQUESTS = "max_concurrent_requests"  # 429
    QUEUE_FULL_REQUESTS = "queue_full_requests"  # 503: --max-num-queued-reqs
    QUEUE_FULL_TOKENS = "queue_full_tokens"  # 503: --max-num-queued-tokens
    QUEUE_WAIT_TIMEOUT = "queue_wait_timeout"  # 503 or an SSE error: --max-queue-wait


class Histogram:
    """A cumulative histogram with fixed bucket bounds (thread-safe observe)."""

    __slots__ = ("name", "help", "labels", "bounds", "counts", "total", "count", "_lock")

    def __init__(self, name: str) -> None:
        self.name = name
        self.help = family(name).help
        self.labels = buckets(name)
        self.bounds = tuple(float(b) for b in self.labels)
        self.counts = [0] * len(self.bounds)
        self.total = 0.0
        self.count = 0
        self._lock = threading.Lock()

    def observe(self, value: float) -> None:
        bounds = self.bounds
        i = bisect_left(bounds, value)  # the first bound >= value (none for NaN)
        with self._lock:
            if i < len(bounds) and value <= bounds[i]:
                self.counts[i] += 1
            self.total += value
            self.count += 1

    def render(self, out: list[str]) -> None:
        header(out, self.name)
        with self._lock:
            counts, total, count = list(self.counts), self.total, self.count
        running = 0
        for label, n in zip(self.labels, counts, strict=True):
            running += n
            out.append(f'{self.name}_bucket{{le="{label}"}} {running}\n')
        out.append(f'{self.name}_bucket{{le="+Inf"}} {count}\n')
        out.append(f"{self.name}_sum {_float(total)}\n")
        out.append(f"{self.name}_count {count}\n")


def _float(value: float) -> str:
    return repr(float(value))


class Metrics:
    """Every metric of one frontend."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.http: dict[tuple[str, int], int] = {}
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.ttft = Histogram("vrs:time_to_first_token_seconds")
        self.itl = Histogram("vrs:inter_token_latency_seconds")
        self.e2e = Histogram("vrs:e2e_request_latency_seconds")
        self.tokenize = Histogram("vrs:tokenize_latency_seconds")
        self.detokenize = Histogram("vrs:detokenize_latency_seconds")
        self.vllm = VllmMetrics()  # the vllm:* series a vLLM Grafana dashboard queries
        self.rejected = dict.fromkeys(Rejection, 0)

    def request(self, path: str, status: int) -> None:
        endpoint = path if path in ENDPOINTS else "other"
        with self._lock:
            key = (endpoint, status)
            self.http[key] = self.http.get(key, 0) + 1

    def reject(self, reason: Rejection) -> None:
        """One request refused or shed for ``reason`` (event loop only)."""
        self.rejected[reason] += 1

    def tokens(self, prompt: int = 0, generation: int = 0) -> None:
        with self._lock:
            self.prompt_tokens += prompt
            self.generation_tokens += generation

    def render(self, stats: Mapping[int, p.SchedulerStats], in_flight: int,
               routed: Mapping[int, int] | None = None) -> bytes:
        """The text format; ``routed``: requests routed to each engine (data parallel)."""
        out: list[str] = []
        header(out, "vrs:http_requests_total")
        with self._lock:
            http = sorted(self.http.items())
            prompt, generation = self.prompt_tokens, self.generation_tokens
        for (endpoint, status), n in http:
            out.append(f'vrs:http_requests_total{{endpoint="{endpoint}",status="{status}"}} '
                       f"{n}\n")
        header(out, "vrs:prompt_tokens_total")
        out.append(f"vrs:prompt_tokens_total {prompt}\n")
        header(out, "vrs:generation_tokens_total")
        out.append(f"vrs:generation_tokens_total {generation}\n")
        header(out, "vrs:requests_in_flight")
        out.append(f"vrs:requests_in_flight {in_flight}\n")
        header(out, "vrs:requests_rejected_total")
        for reason, n in self.rejected.items():
            out.append(f'vrs:requests_rejected_total{{reason="{reason.value}"}} {n}\n')
        for histogram in (self.ttft, self.itl, self.e2e, self.tokenize, self.detokenize):
            histogram.render(out)
        _engine_metrics(out, stats)
        header(out, "vrs:engine_requests_routed_total")
        for index, n in sorted((routed or {}).items()):
            out.append(f'vrs:engine_requests_routed_total{{engine="{index}"}} {n}\n')
        return "".join(out).encode()


# (name, the value's text from an engine's stats)
_ENGINE: tuple[tuple[str, Callable[[p.SchedulerStats], str]], ...] = (
    ("vrs:num_requests_running", lambda s: str(s.num_running)),
    ("vrs:num_requests_waiting", lambda s: str(s.num_waiting)),
    ("vrs:kv_cache_usage_perc", lambda s: _float(s.kv_cache_usage)),
    ("vrs:prefix_cache_queries_total", lambda s: str(s.prefix_cache_queries)),
    ("vrs:prefix_cache_hits_total", lambda s: str(s.prefix_cache_hits)),
    ("vrs:prefix_cache_hit_rate",
     lambda s: _float(s.prefix_cache_hits / s.prefix_cache_queries
                      if s.prefix_cache_queries else 0.0)),
    ("vrs:num_preemptions_total", lambda s: str(s.num_preemptions)),
)


def _engine_metrics(out: list[str], stats: Mapping[int, p.SchedulerStats]) -> None:
    for name, value in _ENGINE:
        header(out, name)
        for index in sorted(stats):
            out.append(f'{name}{{engine="{index}"}} {value(stats[index])}\n')
