"""MockEngine: the real wire and scheduling shape, no model.

Prefill is instant and every running request gets one seeded random token per step. It is
the tool for measuring a frontend alone (docs/internals.md, "The mock engine"): it
honours ``max_tokens``, ``min_tokens``, EOS and ``stop_token_ids``, ``ignore_eos``,
``logprobs`` and aborts exactly like the real engine, so a frontend cannot tell the
difference except by the text. Log-probabilities are made up but well formed: the sampled
token's logprob and rank, and ``k`` top tokens with descending log-probabilities whose
probabilities sum to at most 1 (the sampled token among them when its rank is within
``k``). Scripted replies (``mock_replies``, see engine/mock/replies.py) replace the
random tokens of matching requests; replies are scripted or random, never sampled from
logits, so ``logit_bias``, ``allowed_token_ids`` and ``bad_words_token_ids`` do not apply
to them.

Structured outputs are honoured: a constrained request's grammar is compiled as in the
real engine (off the step loop, the request waiting meanwhile; a spec that does not
compile ends it with an ``invalid_request`` error), and each token is drawn at random
from the tokens the grammar allows next, EOS as soon as the grammar may end (so a
grammar that can end does end, as a model's output would). A scripted reply is followed
while the grammar accepts its tokens, then random allowed tokens take over.

``prompt_logprobs`` are answered with synthetic, well-formed entries (with the first
output): one per prompt token from the second on, ``token_id`` the prompt token, its
rank, logprob and top ``k`` made up as above, from a generator seeded by the prompt's ids
(the same prompt gets the same entries; engine/mock/logprobs.py). The first output also
carries ``queue_time`` (from ``add_request`` to the first step that runs the request) and
``prefill_time`` (from then to the end of that step); the final one ``decode_time`` (from
the first token to the end).

A thinking budget (``thinking_budget``) is honoured as in the real engine
(engine/thinking_budget.py): once it is spent, the next tokens are the end marker's,
ahead of whatever the script or the generator would have given (a script resumes after
them, where it was).

Scheduling follows the real scheduler's shape: at most ``max_num_seqs`` requests run at
once; the others wait first come, first served, or with ``--scheduling-policy priority``
in (priority, arrival) order (a constrained request joins the queue once its grammar is
compiled), and start as running ones finish or are aborted (nothing is preempted: the
mock has no KV cache, so ``cache_salt`` changes nothing either). ``SchedulerStats``
reports them as the real engine does: ``num_running`` the running requests,
``num_waiting`` the queued ones plus those waiting for their grammar.

With ``runner`` "pooling" it serves pooling requests instead (engine/mock/pooling.py), each
scheduled as above and answered in its first step (finish_reason "stop", ``pooling_output``);
a request for the other runner ends at once with an ``invalid_request`` error.
"""

from __future__ import annotations

import heapq
import json
import random
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from engine import protocol as p
from engine.config import ConfigError, EngineConfig
from engine.grammar.bitmask import allowed_token_ids
from engine.grammar.compiler import GrammarCompiler
from engine.grammar.pending import PendingGrammars
from engine.mock.logprobs import FIRST_SAMPLED_ID as _FIRST_SAMPLED_ID
from engine.mock.logprobs import made_up, prompt_logprobs
from engine.mock.pooling import answer, labels_for, runner_error, tasks_for
from engine.mock.replies import MockReplies
from engine.thinking_budget import ThinkingState, budget_error


class _MockRequest:
    __slots__ = ("request_id", "params", "prompt_len", "generated", "rng", "lp_rng", "script",
                 "prompt_ids", "received", "grammar", "first_token", "key", "thinking",
                 "pooling")
    lp_rng: random.Random | None

    def __init__(self, request: p.EngineCoreRequest, base_seed: int,
                 script: list[int] | None) -> None:
        self.request_id = request.request_id
        self.params = request.sampling_params
        self.prompt_len = len(request.prompt_token_ids)
        self.generated = 0
        seed = self.params.seed
        if seed is None:
            seed = zlib.crc32(request.request_id.encode()) ^ base_seed
        self.rng = random.Random(seed)
        # A separate stream: asking for logprobs does not change the sampled tokens. Seeded
        # only for requests that ask for logprobs (seeding costs as much as ten tokens).
        self.lp_rng = random.Random(seed ^ 0x10C9) if self.params.logprobs is not None else None
        self.script = script
        # Kept only for the synthetic prompt logprobs.
        self.prompt_ids = (request.prompt_token_ids
                           if self.params.prompt_logprobs is not None else None)
        self.received = time.perf_counter()
        self.grammar: Any = None  # the xgrammar matcher of a constrained request
        self.first_token: float | None = None  # when its first token went out
        # Its place in the priority policy's queue (lower first; the ids break ties).
        self.key = (request.priority, request.arrival_time, request.request_id)
        spec = self.params.thinking_budget
        self.thinking = (None if spec is None
                         else ThinkingState(spec, request.prompt_token_ids))
        # A pooling request: its params and prompt, answered in its first step.
        self.pooling = (None if request.pooling_params is None
                        else (request.pooling_params, request.prompt_token_ids))


class MockEngine:
    """An EngineBackend (see engine.core) that makes up tokens instead of computing them."""

    def __init__(
        self,
        model_name: str,
        vocab_size: int,
        eos_token_ids: list[int],
        max_model_len: int,
        seed: int = 0,
        step_delay_s: float = 0.0,
        replies: MockReplies | None = None,
        grammars: GrammarCompiler | None = None,
        max_num_seqs: int = 256,
        scheduling_policy: str = "fcfs",
        pooling_tasks: list[str] | None = None,
    ) -> None:
        if vocab_size <= _FIRST_SAMPLED_ID:
            raise ConfigError(f"mock engine: vocab_size={vocab_size} is too small")
        if max_num_seqs < 1:
            raise ConfigError(f"mock engine: max_num_seqs={max_num_seqs} must be at least 1")
        self.model_name = model_name
        self.vocab_size = vocab_size
        self.eos_token_ids = eos_token_ids
        self.max_model_len = max_model_len
        self.seed = seed
        self.step_delay_s = step_delay_s
        self.replies = replies
        self._span = vocab_size - _FIRST_SAMPLED_ID  # the ids the mock draws from
        self.max_num_seqs = max_num_seqs
        self._running: dict[str, _MockRequest] = {}
        # Requests beyond max_num_seqs, first come first served (a dict keeps insertion
        # order and makes an abort O(1)).
        self._waiting: dict[str, _MockRequest] = {}
        # The priority policy's order of ``_waiting``: a heap of (key, id), its entries
        # for requests no longer waiting dropped as they surface.
        self._priority = scheduling_policy == "priority"
        self._heap: list[tuple[tuple[int, float, str], str]] = []
        self.grammars = grammars
        self.pending: PendingGrammars[_MockRequest] = PendingGrammars()
        # None: a generating mock; else the pooling tasks it serves (engine/mock/pooling.py).
        self.pooling_tasks = pooling_tasks

    @classmethod
    def from_config(cls, config: EngineConfig) -> MockEngine:
        """Read vocab size, EOS and context length from the model dir (no weights)."""
        model_dir = Path(config.model)
        config_path = model_dir / "config.json"
        if not config_path.is_file():
            raise ConfigError(f"mock engine: {config_path} not found; MODEL must be a model dir")
        hf = json.loads(config_path.read_text(encoding="utf-8"))
        eos = _eos_ids(model_dir, hf)
        native_len = int(hf.get("max_position_embeddings") or 4096)
        max_model_len = config.max_model_len or native_len
        tokenizer_dir = Path(config.tokenizer) if config.tokenizer else model_dir
        return cls(
            model_name=config.served_model_name or model_dir.name,
            vocab_size=int(hf["vocab_size"]),
            eos_token_ids=eos,
            max_model_len=max_model_len,
            seed=config.seed,
            step_delay_s=config.mock_step_delay_ms / 1000.0,
            replies=MockReplies(model_dir, config.mock_replies,
                                Path(config.tokenizer) if config.tokenizer else None),
            grammars=GrammarCompiler(tokenizer_dir, int(hf["vocab_size"]), eos,
                                     config.structured_outputs_compile_timeout),
            max_num_seqs=config.max_num_seqs,
            scheduling_policy=config.scheduling_policy,
            pooling_tasks=tasks_for(config.convert) if config.runner == "pooling" else None,
        )

    def ready(self, engine_index: int) -> p.Ready:
        return p.Ready(
            engine_index=engine_index,
            max_model_len=self.max_model_len,
            vocab_size=self.vocab_size,
            block_size=16,
            num_kv_blocks=0,
            eos_token_ids=list(self.eos_token_ids),
            model_name=self.model_name,
            is_mock=True,
            runner="generate" if self.pooling_tasks is None else "pooling",
            pooling_tasks=list(self.pooling_tasks or []),
            classify_labels=labels_for(self.pooling_tasks or []),
            ranks=[],  # no model: no weights, no KV cache
        )

    # ------------------------------------------------------------- EngineBackend

    def add_request(self, request: p.EngineCoreRequest) -> list[p.EngineCoreOutput]:
        prompt_len = len(request.prompt_token_ids)
        # A pooling request generates nothing: its prompt may fill the context.
        if prompt_len >= self.max_model_len + (request.pooling_params is not None):
            return [_error(request.request_id,
                           f"prompt has {prompt_len} tokens; max_model_len is "
                           f"{self.max_model_len}")]
        if (request.request_id in self._running or request.request_id in self._waiting
                or request.request_id in self.pending):
            return [_error(request.request_id, "duplicate request id")]
        error = runner_error(self.pooling_tasks, request.pooling_params)
        if error is not None:
            return [_error(request.request_id, error, invalid=True)]
        if request.pooling_params is not None:
            self._wait(_MockRequest(request, self.seed, None))
            return []
        error = budget_error(request.sampling_params, self.vocab_size)
        if error is not None:
            return [_error(request.request_id, error)]
        script = self.replies.script_for(request.prompt_token_ids) if self.replies else None
        mock = _MockRequest(request, self.seed, script)
        spec = request.sampling_params.structured_outputs
        if spec is None:
            self._wait(mock)
        elif self.grammars is None:
            return [_error(request.request_id, "structured outputs need the model's tokenizer, "
                           "and this mock engine was started without one", invalid=True)]
        else:
            self.pending.add(request.request_id, mock, self.grammars.submit(spec))
        return []

    def abort_requests(self, request_ids: list[str]) -> list[p.EngineCoreOutput]:
        outputs = []
        for request_id in request_ids:
            request = (self._running.pop(request_id, None)
                       or self._waiting.pop(request_id, None) or self.pending.pop(request_id))
            if request is not None:
                outputs.append(p.EngineCoreOutput(request_id, [], finish_reason="abort",
                                                  decode_time=_decode_time(request)))
        return outputs

    def has_unfinished_requests(self) -> bool:
        return bool(self._running) or bool(self._waiting) or bool(self.pending)

    def step(self) -> list[p.EngineCoreOutput]:
        outputs = self._admit_grammars() if self.pending else []
        if self._waiting and len(self._running) < self.max_num_seqs:
            self._schedule_waiting()
        if not self._running:
            if self.pending and not outputs:
                self.pending.wait(0.005)  # every request waits for its grammar
            return outputs
        scheduled = time.perf_counter()
        if self.step_delay_s:
            time.sleep(self.step_delay_s)
        finished = []
        for request in self._running.values():
            output = self._advance(request)
            outputs.append(output)
            if request.generated == 1:  # the request's first output
                request.first_token = time.perf_counter()
                output.queue_time = max(0.0, scheduled - request.received)
                output.prefill_time = request.first_token - scheduled
                if request.prompt_ids is not None:
                    output.prompt_logprobs = prompt_logprobs(
                        request.prompt_ids, request.params.prompt_logprobs or 0,
                        self.vocab_size)
            if output.finish_reason is not None:
                output.decode_time = _decode_time(request)
                finished.append(request.request_id)
        for request_id in finished:
            del self._running[request_id]
        return outputs

    def close(self) -> None:
        """Nothing runs beside this process."""

    def stats(self) -> p.SchedulerStats:
        return p.SchedulerStats(num_running=len(self._running),
                                num_waiting=len(self._waiting) + len(self.pending))

    def utility(self, method: str, args: list[Any]) -> Any:
        if method == "ping":
            return "pong"
        if method == "num_running":
            return len(self._running)
        raise ValueError(f"unknown utility method {method!r} (known: ping, num_running)")

    # ------------------------------------------------------------- internals

    def _wait(self, request: _MockRequest) -> None:
        self._waiting[request.request_id] = request
        if self._priority:
            heapq.heappush(self._heap, (request.key, request.request_id))

    def _schedule_waiting(self) -> None:
        """Moves waiting requests to the running set, up to max_num_seqs: the oldest
        (fcfs), or the first in (priority, arrival) order (priority)."""
        waiting, running, heap = self._waiting, self._running, self._heap
        while waiting and len(running) < self.max_num_seqs:
            if self._priority:
                request_id = heapq.heappop(heap)[1]
                if request_id not in waiting:
                    continue  # aborted while waiting
            else:
                request_id = next(iter(waiting))
            running[request_id] = waiting.pop(request_id)

    def _admit_grammars(self) -> list[p.EngineCoreOutput]:
        ready, failed = self.pending.take()
        for request, matcher in ready:
            request.grammar = matcher
            self._wait(request)
        return [_error(request.request_id, message, invalid=True) for request, message in failed]

    def _constrained_token(self, request: _MockRequest) -> int:
        """The next token of a constrained request: its script's while the grammar takes
        it, else EOS when the grammar may end, else a random allowed token."""
        matcher = request.grammar
        script = request.script
        if script and not matcher.bans(script[0]) and matcher.accept_token(script[0]):
            return script.pop(0)
        request.script = []
        allowed = allowed_token_ids(matcher, self.vocab_size)
        may_end = request.generated >= request.params.min_tokens
        token = next((t for t in self.eos_token_ids if may_end and _has(allowed, t)), None)
        if token is None:
            # numpy, not a Python pass over what may be most of the vocabulary, per token
            choices = allowed[~np.isin(allowed, self.eos_token_ids)]
            if not len(choices):
                choices = allowed
            token = int(choices[int(request.rng.random() * len(choices))])
        if not matcher.accept_token(token):
            raise RuntimeError(f"the grammar rejected token {token} it allowed")
        return token

    def _logprobs(self, request: _MockRequest, token: int) -> p.TokenLogprobs:
        """Made-up but well-formed log-probabilities for ``token`` (see the module doc)."""
        rng = request.lp_rng
        assert rng is not None, "lp_rng is seeded for every request that asks for logprobs"
        return made_up(rng, token, request.params.logprobs or 0, self.vocab_size)

    def _advance(self, request: _MockRequest) -> p.EngineCoreOutput:
        if request.pooling is not None:
            request.generated = 1
            pooling, ids = request.pooling
            return p.EngineCoreOutput(request.request_id, [], finish_reason="stop",
                                      pooling_output=answer(pooling, ids))
        params = request.params
        script = request.script
        thinking = request.thinking
        forced = None if thinking is None else thinking.forced()
        if forced is not None:
            token = forced  # the thinking budget is spent: its end marker, before the script
        elif request.grammar is not None:
            token = self._constrained_token(request)
        elif script:
            token = script.pop(0)
        elif script is not None and self.eos_token_ids and not params.ignore_eos:
            token = self.eos_token_ids[0]  # the scripted reply is over
        else:
            # random() scaled, not randrange(): a third of the cost, and as uniform for a
            # vocabulary far below 2**53.
            token = _FIRST_SAMPLED_ID + int(request.rng.random() * self._span)
        generated = request.generated = request.generated + 1
        if thinking is not None:
            thinking.advance(token)
        if params.logprobs is None:
            out = p.EngineCoreOutput(request.request_id, [token])
        else:
            out = p.EngineCoreOutput(request.request_id, [token],
                                     new_logprobs=[self._logprobs(request, token)])
        may_stop = generated > params.min_tokens
        if request.grammar is not None and request.grammar.is_terminated():
            out.finish_reason, out.stop_token_id = "stop", token
        elif may_stop and token in params.stop_token_ids:
            out.finish_reason, out.stop_token_id = "stop", token
        elif may_stop and not params.ignore_eos and token in self.eos_token_ids:
            out.finish_reason, out.stop_token_id = "stop", token
        elif (generated >= params.max_tokens
                or request.prompt_len + generated >= self.max_model_len):
            out.finish_reason = "length"
        return out

def _decode_time(request: _MockRequest) -> float | None:
    """Seconds from the request's first token to now (None before its first token)."""
    first = request.first_token
    return None if first is None else max(0.0, time.perf_counter() - first)


def _error(request_id: str, message: str, invalid: bool = False) -> p.EngineCoreOutput:
    return p.EngineCoreOutput(request_id, [], finish_reason="error", error_message=message,
                              error_kind=p.ErrorKind.INVALID_REQUEST.value if invalid else None)


def _has(sorted_ids: Any, token: int) -> bool:
    i = int(sorted_ids.searchsorted(token))
    return i < len(sorted_ids) and int(sorted_ids[i]) == token


def _eos_ids(model_dir: Path, hf_config: dict[str, Any]) -> list[int]:
    """EOS ids from generation_config.json, else config.json (int or list)."""
    value: Any = None
    generation = model_dir / "generation_config.json"
    if generation.is_file():
        value = json.loads(generation.read_text(encoding="utf-8")).get("eos_token_id")
    if value is None:
        value = hf_config.get("eos_token_id")
    if value is None:
        return []
    return [int(v) for v in value] if isinstance(value, list) else [int(value)]
