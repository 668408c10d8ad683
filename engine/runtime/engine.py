"""ModelEngine: the real EngineBackend (scheduler + paged KV cache + torch forward).

``step`` = schedule, one batched forward over every scheduled token, sample the requests
whose known tokens are all computed, then update them and return their new tokens.
A request's first output also carries its prompt logprobs (when asked for: gathered
chunk by chunk during its prefill) and its ``queue_time`` / ``prefill_time``.
With a pooling head (``--runner pooling``) a request with ``pooling_params`` runs its
prefill only: its pooled hidden state goes through the head (engine/runtime/pooling/)
and its one output carries the vector; its KV blocks are freed at once (their prefix-cache
entries stay). Bad input never kills the engine: impossible requests are refused by ``add_request``
with the numbers, and a step that raises is rerun one request at a time so only the
failing request ends (``finish_reason="error"``) while the others go on.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import msgspec
import torch

from engine import protocol as p
from engine.config import EngineConfig
from engine.grammar.compiler import GrammarCompiler
from engine.grammar.pending import PendingGrammars
from engine.runtime.attention.base import AttentionBackend
from engine.runtime.kv_cache import KVCacheManager
from engine.runtime.model_runner import (
    Forward,
    ModelRunner,
    RunOutput,
)
from engine.runtime.models.base import Model
from engine.runtime.outputs import advance_grammar, decode_time, error_output, first_output
from engine.runtime.parallel.group import TensorParallelError
from engine.runtime.parallel.workers import TensorParallelWorkers
from engine.runtime.pooling.decoder_pooler import DecoderPooler
from engine.runtime.request import Request
from engine.runtime.sampler import Sampler
from engine.runtime.scheduler import Scheduler
from engine.runtime.validation import pooling_request_error, request_error

logger = logging.getLogger("vrs.engine")

GRAMMAR_POLL_S = 0.005  # the idle wait while every request waits for its grammar
_SampleResult = tuple[Request, int, p.TokenLogprobs | None]
_Failure = tuple[Request, str]  # a request and why it failed
_PromptLogprobs = list[tuple[Request, list[p.TokenLogprobs]]]
_Pooled = list[tuple[Request, torch.Tensor]]


class ModelEngine:
    def __init__(
        self,
        config: EngineConfig,
        model: Model,
        model_name: str,
        eos_token_ids: list[int],
        max_model_len: int,
        num_blocks: int,
        attention: AttentionBackend,
        tokenizer_dir: Path | None = None,
        forward: Forward | None = None,
        pooler: DecoderPooler | None = None,
        workers: TensorParallelWorkers | None = None,
    ) -> None:
        self.config = config
        self.workers = workers
        self.model = model
        self.model_name = model_name
        self.eos_token_ids = eos_token_ids
        self._eos = frozenset(eos_token_ids)
        self.max_model_len = max_model_len
        self.block_size = config.block_size
        self.num_blocks = num_blocks
        self.vocab_size = model.config.vocab_size
        self.kv_cache = KVCacheManager(num_blocks, config.block_size, config.enable_prefix_caching)
        self.scheduler = Scheduler(
            self.kv_cache, config.max_num_seqs, config.max_num_batched_tokens,
            config.scheduling_policy,
        )
        self.attention = attention
        self.runner = ModelRunner(
            model, num_blocks, config.block_size, self.attention, forward, workers
        )
        # What each tensor-parallel rank holds (one rank without tensor parallel).
        self.rank_memory = workers.memory if workers is not None else [p.RankMemory(
            rank=0, device=str(model.device), weight_bytes=model.weight_bytes(),
            kv_cache_bytes=self.runner.kv_cache_bytes)]
        for rank in self.rank_memory:
            logger.info("rank %d on %s: weights %.1f MiB, KV cache %.1f MiB", rank.rank,
                        rank.device, rank.weight_bytes / 2**20, rank.kv_cache_bytes / 2**20)
        self.sampler = Sampler(self.vocab_size, config.seed, model.device)
        # Structured outputs: grammars compile off the step loop; a constrained request
        # waits in ``pending`` (counted as waiting) until its grammar is ready.
        self.grammars = (
            GrammarCompiler(tokenizer_dir, self.vocab_size, eos_token_ids,
                            config.structured_outputs_compile_timeout)
            if tokenizer_dir is not None
            else None
        )
        self.pending: PendingGrammars[Request] = PendingGrammars()
        # The pooling head (runner "pooling"): None serves generation requests only.
        self.pooler = pooler

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_config(cls, config: EngineConfig) -> ModelEngine:
        """The engine ``config`` describes, its model loaded (engine/runtime/construction.py)."""
        from engine.runtime.construction import build_engine

        return build_engine(config)

    def close(self) -> None:
        """Stop the tensor-parallel workers (nothing to do without them)."""
        if self.workers is not None:
            self.workers.stop()

    def ready(self, engine_index: int) -> p.Ready:
        return p.Ready(
            engine_index=engine_index,
            max_model_len=self.max_model_len,
            vocab_size=self.vocab_size,
            block_size=self.block_size,
            num_kv_blocks=self.num_blocks,
            eos_token_ids=list(self.eos_token_ids),
            model_name=self.model_name,
            is_mock=False,
            runner=(p.Runner.GENERATE if self.pooler is None else p.Runner.POOLING).value,
            pooling_tasks=[] if self.pooler is None else list(self.pooler.spec.tasks),
            classify_labels=[] if self.pooler is None else list(self.pooler.spec.labels),
            ranks=list(self.rank_memory),
        )

    # ------------------------------------------------------------------ requests

    def validate_request(self, request: p.EngineCoreRequest) -> str | None:
        """Why ``request`` can never be served, or None."""
        if request.request_id in self.scheduler.requests or request.request_id in self.pending:
            return f"request id {request.request_id!r} is already in use"
        if request.pooling_params is not None or self.pooler is not None:
            return pooling_request_error(request, self.pooler, self.vocab_size,
                                         self.max_model_len, self.block_size, self.num_blocks)
        return request_error(
            request, self.vocab_size, self.max_model_len, self.block_size, self.num_blocks
        )

    def add_request(self, request: p.EngineCoreRequest) -> list[p.EngineCoreOutput]:
        error = self.validate_request(request)
        if error is not None:
            logger.warning("request %s refused: %s", request.request_id, error)
            kind = None if self.pooler is None and request.pooling_params is None \
                else p.ErrorKind.INVALID_REQUEST.value
            return [error_output(request.request_id, error, kind=kind)]
        if self.pooler is not None:
            self.scheduler.add_request(Request(
                request.request_id, request.prompt_token_ids, request.sampling_params,
                request.arrival_time, self._eos, request.priority, request.cache_salt,
                request.pooling_params, self.pooler.spec.method))
            return []
        sp = request.sampling_params
        if sp.seed is not None and not 0 <= sp.seed < 2**64:
            sp = msgspec.structs.replace(sp, seed=sp.seed % 2**64)
        req = Request(
            request.request_id, request.prompt_token_ids, sp, request.arrival_time, self._eos,
            request.priority, request.cache_salt,
        )
        if sp.structured_outputs is None:
            self.scheduler.add_request(req)
            return []
        if self.grammars is None:
            return [error_output(request.request_id, "structured outputs need the model's "
                                  "tokenizer, and this engine was started without one",
                                  kind=p.ErrorKind.INVALID_REQUEST.value)]
        self.pending.add(req.request_id, req, self.grammars.submit(sp.structured_outputs))
        return []

    def abort_requests(self, request_ids: list[str]) -> list[p.EngineCoreOutput]:
        outputs = []
        for request_id in request_ids:
            req = self.scheduler.requests.get(request_id) or self.pending.pop(request_id)
            if req is None:
                continue
            if req.request_id in self.scheduler.requests:
                self.scheduler.finish_request(req, p.FinishReason.ABORT.value)
            outputs.append(
                p.EngineCoreOutput(
                    request_id,
                    [],
                    p.FinishReason.ABORT.value,
                    num_cached_tokens=req.num_cached_tokens,
                    decode_time=decode_time(req),
                )
            )
        return outputs

    def has_unfinished_requests(self) -> bool:
        return self.scheduler.has_unfinished_requests() or bool(self.pending)

    # ------------------------------------------------------------------ step

    def step(self) -> list[p.EngineCoreOutput]:
        """One engine step: admit compiled grammars -> schedule -> run -> sample -> update."""
        admitted = self._admit_grammars() if self.pending else []
        with torch.inference_mode():
            sched = self.scheduler.schedule()
            if not sched.requests:
                if self.pending and not admitted:
                    self.pending.wait(GRAMMAR_POLL_S)  # nothing else to do: no busy spin
                return admitted
            results, prompt, pooled, failed = self._run_and_sample(
                sched.requests, sched.num_new_tokens)
            outputs = self._update(sched.requests, sched.num_new_tokens, results, prompt, failed)
            if pooled:
                outputs.extend(self._pooled_outputs(pooled))
        return admitted + outputs if admitted else outputs

    def _admit_grammars(self) -> list[p.EngineCoreOutput]:
        """Requests whose grammar is ready enter the scheduler; those whose grammar failed
        (or timed out) end with an ``invalid_request`` error."""
        ready, failed = self.pending.take()
        for req, matcher in ready:
            req.grammar = matcher
            self.scheduler.add_request(req)
        outputs = []
        for req, message in failed:
            logger.warning("request %s refused: %s", req.request_id, message)
            outputs.append(error_output(req.request_id, message,
                                         kind=p.ErrorKind.INVALID_REQUEST.value))
        return outputs

    def _run_and_sample(
        self, requests: list[Request], num_new: list[int]
    ) -> tuple[list[_SampleResult], _PromptLogprobs, _Pooled, list[_Failure]]:
        """Run and sample the batch; if that raises, isolate the culprit: rerun one request
        at a time, so only the failing request ends (the others' results are kept)."""
        failed: list[_Failure] = []
        pooled_state = [] if self.pooler is None else [(req, req.pooled) for req in requests]
        try:
            run = self._run(requests, num_new)
            return self._sample(run), run.prompt_logprobs, run.pooled, failed
        except TensorParallelError:
            raise
        except Exception as exc:
            logger.warning("step failed (%s); retrying requests one by one", exc)
        for req, state in pooled_state:  # what the failed step gathered is not kept
            req.pooled = state
        results: list[_SampleResult] = []
        prompt: _PromptLogprobs = []
        pooled: _Pooled = []
        for req, n in zip(requests, num_new, strict=True):
            try:
                run = self._run([req], [n])
                results.extend(self._sample(run))
                prompt.extend(run.prompt_logprobs)
                pooled.extend(run.pooled)
            except Exception as one_exc:
                logger.exception("request %s failed", req.request_id)
                failed.append((req, f"{type(one_exc).__name__}: {one_exc}"))
        return results, prompt, pooled, failed

    def _run(self, requests: list[Request], num_new: list[int]) -> RunOutput:
        """One batched forward over every scheduled token: the logits of the requests whose
        known tokens are now all computed (the ``due`` ones), and prompt logprobs."""
        if self.workers is None:
            return self.runner.execute(requests, num_new)
        try:
            return self.runner.execute(requests, num_new)
        except TensorParallelError:
            raise
        except Exception as exc:  # the workers' collectives cannot be matched any more
            raise self.workers.failure(
                f"a tensor-parallel step failed on rank 0 ({type(exc).__name__}: {exc}); "
                "its workers cannot go on") from exc

    def _sample(self, run: RunOutput) -> list[_SampleResult]:
        """Each due request's next token (and its logprobs when asked)."""
        if run.logits is None:
            return []
        due = run.sample_requests
        sampled = self.sampler(run.logits, due)
        return list(zip(due, sampled.token_ids, sampled.logprobs, strict=True))

    def _update(
        self,
        requests: list[Request],
        num_new: list[int],
        results: list[_SampleResult],
        prompt: _PromptLogprobs,
        failed: list[_Failure],
    ) -> list[p.EngineCoreOutput]:
        """Advance the requests past this step's tokens, append the sampled tokens, finish
        those that are done or failed; returns the step's outputs."""
        outputs: list[p.EngineCoreOutput] = []
        failed_ids = {id(req) for req, _ in failed}
        kv = self.kv_cache
        for req, n in zip(requests, num_new, strict=True):
            if id(req) not in failed_ids:
                req.num_computed_tokens += n
                kv.cache_full_blocks(req)
        for req, entries in prompt:
            if id(req) not in failed_ids and req.prompt_logprobs is not None:
                req.prompt_logprobs.extend(entries)
        finished: list[Request] = []
        max_len = self.max_model_len
        for req, token, logprobs in results:
            first = req.num_output_tokens == 0
            try:
                done = req.append_token(token, max_len)
                if req.grammar is not None:
                    done = advance_grammar(req, token, done)
            except Exception as exc:
                failed.append((req, f"{type(exc).__name__}: {exc}"))
                continue
            out = p.EngineCoreOutput(
                req.request_id,
                [token],
                req.finish_reason if done else None,
                req.stop_token_id if done else None,
                None if logprobs is None else [logprobs],
                req.num_cached_tokens,
            )
            if first:
                first_output(req, out)
            if done:
                out.decode_time = decode_time(req)
                finished.append(req)
            outputs.append(out)
        self.scheduler.finish_requests(finished)
        for req, message in failed:
            self.scheduler.finish_request(req, p.FinishReason.ERROR.value)
            outputs.append(error_output(req.request_id, message, req.num_cached_tokens))
        return outputs

    def _pooled_outputs(self, pooled: _Pooled) -> list[p.EngineCoreOutput]:
        """The one output of each pooling request whose prompt is computed: the head's
        vector (finish "stop"); the request ends and its blocks are freed."""
        assert self.pooler is not None
        requests = [req for req, _ in pooled]
        outputs: list[p.EngineCoreOutput] = []
        try:
            vectors = self.pooler(torch.stack([vector for _, vector in pooled]),
                                  [req.pooling for req in requests if req.pooling])
        except Exception as exc:
            logger.exception("pooling head failed")
            for req in requests:
                self.scheduler.finish_request(req, p.FinishReason.ERROR.value)
                outputs.append(error_output(req.request_id, f"{type(exc).__name__}: {exc}",
                                            req.num_cached_tokens))
            return outputs
        for req, vector in zip(requests, vectors, strict=True):
            req.finish_reason = p.FinishReason.STOP.value
            out = p.EngineCoreOutput(req.request_id, [], p.FinishReason.STOP.value,
                                     num_cached_tokens=req.num_cached_tokens,
                                     pooling_output=vector)
            first_output(req, out)
            outputs.append(out)
        self.scheduler.finish_requests(requests)
        return outputs

    # ------------------------------------------------------------------ introspection

    def stats(self) -> p.SchedulerStats:
        kv = self.kv_cache
        return p.SchedulerStats(
            num_running=self.scheduler.num_running,
            num_waiting=self.scheduler.num_waiting + len(self.pending),
            kv_cache_usage=kv.usage,
            prefix_cache_queries=kv.prefix_cache_queries,
            prefix_cache_hits=kv.prefix_cache_hits,
            num_preemptions=self.scheduler.num_preemptions,
            num_free_blocks=kv.num_free_blocks,
            num_total_blocks=kv.num_blocks,
        )

    def utility(self, method: str, args: list[Any]) -> Any:
        if method == "ping":
            return "pong"
        if method == "get_stats":
            return msgspec.structs.asdict(self.stats())
        if method == "reset_prefix_cache":
            if self.scheduler.has_unfinished_requests():
                return False
            self.kv_cache.reset_prefix_cache()
            return True
        if method == "get_model_info":
            cfg = self.model.config
            return {
                "model_name": self.model_name,
                "architecture": cfg.architecture,
                "device": str(self.model.device),
                "dtype": str(self.model.dtype).removeprefix("torch."),
                "max_model_len": self.max_model_len,
                "num_kv_blocks": self.num_blocks,
                "block_size": self.block_size,
                "vocab_size": self.vocab_size,
            }
        raise ValueError(
            f"unknown utility method {method!r}; known: ping, get_stats, reset_prefix_cache, "
            "get_model_info"
        )
