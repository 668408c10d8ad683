"""One request as the engine tracks it between ADD and its last output: a generation
request, or a pooling one (prefill only: its prompt's hidden states pooled into one
vector, see engine/runtime/pooling/)."""

from __future__ import annotations

import enum
import itertools
import time
from typing import Any

import torch

from engine import protocol as p
from engine.thinking_budget import ThinkingState

# Each Request's ``serial``: unique for the life of the process, unlike ``id()``.
_SERIALS = itertools.count()

# Below this temperature sampling is greedy (argmax), as in vLLM.
GREEDY_EPSILON = 1e-5


class RequestStatus(enum.IntEnum):
    WAITING = 0  # new, or preempted and waiting to be recomputed
    RUNNING = 1
    FINISHED = 2


class Request:
    """Token ids, progress and KV blocks of one request.

    ``token_ids`` holds the prompt followed by every generated token;
    ``num_computed_tokens`` of them have their K/V in the cache. A request is due to
    sample once all its known tokens are computed.
    """

    __slots__ = (
        "request_id",
        "serial",
        "token_ids",
        "num_prompt_tokens",
        "params",
        "arrival_time",
        "eos_token_ids",
        "status",
        "num_computed_tokens",
        "block_ids",
        "block_hashes",
        "num_cached_blocks",
        "num_cached_tokens",
        "num_preemptions",
        "generator",
        "stop_ids",
        "finish_reason",
        "stop_token_id",
        "first_scheduled",
        "received_at",
        "scheduled_at",
        "first_token_at",
        "prompt_logprobs",
        "grammar",
        "priority",
        "cache_salt",
        "thinking",
        "pooling",
        "pool_method",
        "pooled",
    )

    def __init__(
        self,
        request_id: str,
        prompt_token_ids: list[int],
        params: p.SamplingParams,
        arrival_time: float,
        eos_token_ids: frozenset[int],
        priority: int = 0,
        cache_salt: str | None = None,
        pooling: p.PoolingParams | None = None,
        pool_method: str = "last",
    ) -> None:
        self.request_id = request_id
        # What tensor-parallel workers know this request by (engine/runtime/parallel/).
        self.serial = next(_SERIALS)
        self.token_ids: list[int] = list(prompt_token_ids)
        self.num_prompt_tokens = len(prompt_token_ids)
        self.params = params
        self.arrival_time = arrival_time
        self.eos_token_ids = frozenset() if params.ignore_eos else eos_token_ids
        self.status = RequestStatus.WAITING
        self.num_computed_tokens = 0
        self.block_ids: list[int] = []
        # Chained hashes of this request's full blocks, extended as tokens arrive.
        self.block_hashes: list[bytes] = []
        # How many leading blocks are registered in the prefix cache (or were hits).
        self.num_cached_blocks = 0
        self.num_cached_tokens = 0  # prefix-cache hit length at first admission
        self.num_preemptions = 0
        self.generator: torch.Generator | None = None
        if params.seed is not None:
            self.generator = torch.Generator(device="cpu")
            self.generator.manual_seed(params.seed)
        self.stop_ids = frozenset(params.stop_token_ids)
        self.finish_reason: str | None = None
        self.stop_token_id: int | None = None
        self.first_scheduled = False
        # Monotonic clock: when the engine got the request, and first scheduled it.
        self.received_at = time.monotonic()
        self.scheduled_at: float | None = None
        self.first_token_at: float | None = None  # when its first output went out
        # Prompt logprobs gathered so far (prefill chunk by chunk); None when not asked
        # for, and again once they went out with the first output.
        self.prompt_logprobs: list[p.TokenLogprobs] | None = (
            [] if params.prompt_logprobs is not None else None
        )
        # The xgrammar matcher of a structured-output request (set once its grammar is
        # compiled): it has accepted every output token so far, and it survives
        # preemption as the tokens do.
        self.grammar: Any = None
        self.priority = priority  # lower is served earlier (--scheduling-policy priority)
        self.cache_salt = cache_salt  # salts the prefix cache's first block hash
        # The thinking budget's state (engine/thinking_budget.py); None: no budget.
        self.thinking = (
            None if params.thinking_budget is None
            else ThinkingState(params.thinking_budget, self.token_ids)
        )
        # A pooling request: its task, how its prompt's hidden states are pooled ("last",
        # "mean", "cls"), and what was gathered of them so far (the sum of the rows for
        # "mean", the first row for "cls"; float32).
        self.pooling = pooling
        self.pool_method = pool_method
        self.pooled: torch.Tensor | None = None

    # ------------------------------------------------------------------ views

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self.token_ids) - self.num_prompt_tokens

    @property
    def output_token_ids(self) -> list[int]:
        return self.token_ids[self.num_prompt_tokens :]

    @property
    def is_greedy(self) -> bool:
        return self.params.temperature < GREEDY_EPSILON

    @property
    def max_total_tokens(self) -> int:
        return self.num_prompt_tokens + self.params.max_tokens

    @property
    def needs_min_tokens_mask(self) -> bool:
        """True while EOS and stop tokens must not be sampled (min_tokens not reached)."""
        return self.num_output_tokens < self.params.min_tokens and bool(
            self.eos_token_ids or self.stop_ids
        )

    @property
    def needs_prompt_logprobs(self) -> bool:
        """True while some prompt position still lacks its logprobs: such a request
        computes its whole prompt (no prefix-cache hits), as in vLLM."""
        plp = self.prompt_logprobs
        return plp is not None and len(plp) < self.num_prompt_tokens - 1

    @property
    def pools_every_token(self) -> bool:
        """True for a pooling request whose pooling reads other rows than the last
        ("mean", "cls"): it computes its whole prompt (no prefix-cache hits)."""
        return self.pooling is not None and self.pool_method != "last"

    @property
    def has_logits_processors(self) -> bool:
        """True when logit_bias, allowed_token_ids or bad_words_token_ids are set."""
        sp = self.params
        return bool(sp.logit_bias or sp.bad_words_token_ids) or sp.allowed_token_ids is not None

    @property
    def has_penalties(self) -> bool:
        sp = self.params
        return (
            sp.presence_penalty != 0.0
            or sp.frequency_penalty != 0.0
            or sp.repetition_penalty != 1.0
        )

    # ------------------------------------------------------------------ updates

    def append_token(self, token_id: int, max_model_len: int) -> bool:
        """Record a sampled token; returns True when it finishes the request."""
        self.token_ids.append(token_id)
        if self.thinking is not None:
            self.thinking.advance(token_id)
        if self.num_output_tokens >= self.params.min_tokens:
            if token_id in self.stop_ids or token_id in self.eos_token_ids:
                self.finish_reason = p.FinishReason.STOP.value
                self.stop_token_id = token_id
                return True
        if self.num_output_tokens >= self.params.max_tokens or self.num_tokens >= max_model_len:
            self.finish_reason = p.FinishReason.LENGTH.value
            return True
        return False

    def reset_for_recompute(self) -> None:
        """After preemption: every token (prompt and output) is computed again."""
        self.status = RequestStatus.WAITING
        self.num_computed_tokens = 0
        self.num_cached_blocks = 0
        self.block_ids = []
        self.num_preemptions += 1
        self.pooled = None

    def __repr__(self) -> str:
        return (
            f"Request({self.request_id!r}, tokens={self.num_tokens}, "
            f"computed={self.num_computed_tokens}, blocks={len(self.block_ids)}, "
            f"status={self.status.name})"
        )
