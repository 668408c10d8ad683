"""One request inside the mock engine: random tokens, vLLM's stop rules, synthetic logprobs.

vLLM's engine gets one request per sequence (the frontend splits ``n > 1`` into child
requests with ``n = 1``), so a ``Sequence`` is one ``EngineCoreRequest``. The stop rules
are ``vllm/v1/core/sched/utils.py:check_stop``'s: the eos token (unless ``ignore_eos``,
which leaves ``eos_token_id`` None), ``stop_token_ids`` (``stop_reason`` = the id), then
``max_tokens`` or the model length. Before ``min_tokens`` the sampler never picks a stop
token (vLLM masks them), so the mock draws again. ``allowed_token_ids`` bounds the draw.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field

import numpy as np
import torch
from vllm.v1.engine import EngineCoreOutput, EngineCoreRequest, FinishReason
from vllm.v1.outputs import LogprobsLists, LogprobsTensors

# vLLM's "-1: the whole vocabulary" for logprobs; the mock caps the synthetic lists here.
MAX_SYNTHETIC_LOGPROBS = 20


def request_seed(base_seed: int, engine_index: int, request_id: str) -> int:
    """A stable per-request seed from the CLI seed, the engine and the request id."""
    digest = hashlib.blake2b(f"{base_seed}/{engine_index}/{request_id}".encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "little")


@dataclass
class Sequence:
    """A request being decoded: what it asked for and how far it has got."""

    request: EngineCoreRequest
    client_index: int
    max_tokens: int
    vocab_size: int
    max_model_len: int
    rng: random.Random
    generated: int = 0
    prompt_logprobs_sent: bool = False
    finished: bool = False
    tokens: list[int] = field(default_factory=list)

    @classmethod
    def start(cls, request: EngineCoreRequest, vocab_size: int, max_model_len: int,
              seed: int, engine_index: int) -> Sequence:
        params = request.sampling_params
        max_tokens = 16
        if params is not None and params.max_tokens is not None:
            max_tokens = params.max_tokens
        return cls(request, request.client_index, max_tokens, vocab_size, max_model_len,
                   random.Random(request_seed(seed, engine_index, request.request_id)))

    @property
    def request_id(self) -> str:
        return self.request.request_id

    @property
    def prompt_len(self) -> int:
        return len(self.request.prompt_token_ids or ())

    def _draw(self) -> int:
        params = self.request.sampling_params
        allowed = params.allowed_token_ids if params is not None else None
        masked: set[int] = set()
        if params is not None and self.generated < params.min_tokens:
            masked = set(params.all_stop_token_ids or ())
        for _ in range(64):
            token = (self.rng.choice(allowed) if allowed
                     else self.rng.randrange(self.vocab_size))
            if token not in masked:
                return token
        return token

    def _stop(self, token: int) -> tuple[FinishReason, int | str | None] | None:
        params = self.request.sampling_params
        assert params is not None
        if token == params.eos_token_id:
            return FinishReason.STOP, None
        if token in (params.stop_token_ids or ()):
            return FinishReason.STOP, token
        if (self.generated >= self.max_tokens
                or self.prompt_len + self.generated >= self.max_model_len):
            return FinishReason.LENGTH, None
        return None

    def step(self, chunk_size: int) -> EngineCoreOutput:
        """One engine step: up to ``chunk_size`` new tokens, the finish if reached."""
        new: list[int] = []
        finish: tuple[FinishReason, int | str | None] | None = None
        while len(new) < chunk_size and finish is None:
            token = self._draw()
            new.append(token)
            self.generated += 1
            finish = self._stop(token)
        self.tokens.extend(new)
        out = EngineCoreOutput(request_id=self.request_id, new_token_ids=new)
        params = self.request.sampling_params
        if params is not None and params.logprobs is not None:
            out.new_logprobs = self._logprobs(new, params.logprobs)
        if (params is not None and params.prompt_logprobs is not None
                and not self.prompt_logprobs_sent):
            out.new_prompt_logprobs_tensors = self._prompt_logprobs(params.prompt_logprobs)
            self.prompt_logprobs_sent = True
        if finish is not None:
            out.finish_reason, out.stop_reason = finish
            self.finished = True
        return out

    def _top(self, rows: int, k: int, first: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """Rows of [token, top-1..top-k] ids and descending logprobs; the token is top-1."""
        ids = np.empty((rows, k + 1), dtype=np.int32)
        lps = np.empty((rows, k + 1), dtype=np.float32)
        for r in range(rows):
            best = -0.25 - self.rng.random()
            ids[r, 0] = first[r]
            lps[r, 0] = best
            others = [first[r]] + [self.rng.randrange(self.vocab_size) for _ in range(k - 1)]
            for c in range(1, k + 1):
                ids[r, c] = others[c - 1]
                lps[r, c] = best - (c - 1) * 0.5
        return ids, lps

    def _logprobs(self, new: list[int], asked: int) -> LogprobsLists:
        k = MAX_SYNTHETIC_LOGPROBS if asked < 0 else asked
        ids, lps = self._top(len(new), k, new)
        if k == 0:
            ids, lps = ids[:, :1], lps[:, :1]
        ranks = np.ones(len(new), dtype=np.int32)
        return LogprobsLists(ids, lps, ranks, None)

    def _prompt_logprobs(self, asked: int) -> LogprobsTensors:
        """Prompt logprobs for tokens 1..L-1 (vLLM has none for the first prompt token)."""
        prompt = list(self.request.prompt_token_ids or ())[1:]
        k = MAX_SYNTHETIC_LOGPROBS if asked < 0 else asked
        ids, lps = self._top(len(prompt), k, prompt)
        if k == 0:
            ids, lps = ids[:, :1], lps[:, :1]
        ranks = np.ones(len(prompt), dtype=np.int32)
        return LogprobsTensors(torch.from_numpy(ids), torch.from_numpy(lps),
                               torch.from_numpy(ranks))
