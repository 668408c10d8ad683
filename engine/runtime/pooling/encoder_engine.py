"""EncoderEngine: the EngineBackend of encoder-only pooling models (embed, classify,
score); engine/process/handshake.py builds it for a BERT, RoBERTa / XLM-RoBERTa or
ModernBERT checkpoint.

No KV cache, no decoding: a request is its prompt's one forward. Each step takes the
waiting requests in arrival order (up to ``max_num_seqs`` requests and
``max_num_batched_tokens`` prompt tokens, at least one request), sorts them by length and
runs them as few right-padded forwards as fit the token budget with their padding, so
that similar lengths share a forward. Every request ends in that step with one output:
finish ``stop`` and its ``pooling_output``. A forward that raises is rerun one request at
a time, so only the request that fails ends with an error.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import msgspec
import torch

from engine import protocol as p
from engine.config import ConfigError, EngineConfig
from engine.runtime.device import choose_dtype, resolve_device
from engine.runtime.loader import read_config, resolve_model_dir
from engine.runtime.models.linear import module_weight_bytes
from engine.runtime.outputs import error_output
from engine.runtime.pooling.encoder import (
    DEFAULT_METHOD,
    EncoderModel,
    encoder_family,
    position_limit,
)
from engine.runtime.pooling.head import classify_output, request_error
from engine.runtime.pooling.spec import read_pooling_spec
from engine.runtime.pooling.task import pooling_convert
from engine.runtime.validation import prompt_error

logger = logging.getLogger("vrs.engine")
INVALID = p.ErrorKind.INVALID_REQUEST.value


@dataclass
class _Pending:
    request_id: str
    prompt: list[int]
    params: p.PoolingParams
    received: float  # time.monotonic() when add_request took it


class EncoderEngine:
    def __init__(self, config: EngineConfig, model: EncoderModel, model_name: str,
                 max_model_len: int) -> None:
        self.config = config
        self.model = model
        self.spec = model.spec
        self.model_name = model_name
        self.max_model_len = max_model_len
        # A request of max_model_len tokens always fits one forward.
        self.token_budget = max(config.max_num_batched_tokens, max_model_len)
        self.waiting: OrderedDict[str, _Pending] = OrderedDict()

    @classmethod
    def from_config(cls, config: EngineConfig) -> EncoderEngine:
        config.validate()
        device = resolve_device(config.device)
        choice = choose_dtype(config.dtype, device)
        logger.info("dtype %s → %s (%s)", config.dtype, choice.name, choice.reason)
        torch.manual_seed(config.seed)
        model_dir = resolve_model_dir(config.model)
        hf_config = read_config(model_dir)
        family = encoder_family(hf_config)
        if family is None:
            raise ConfigError(f"invalid engine config: model={config.model!r} is not an "
                              "encoder-only architecture")
        if config.tensor_parallel_size > 1:
            raise ConfigError(f"invalid engine config: tensor_parallel_size="
                              f"{config.tensor_parallel_size}; allowed: 1 for an encoder "
                              "(BERT-sized models run whole in every engine; use "
                              "--data-parallel-size to add engines)")
        convert = pooling_convert(config.runner, config.convert, hf_config, model_dir) or "auto"
        spec = read_pooling_spec(model_dir, hf_config, convert, DEFAULT_METHOD)
        model_limit = position_limit(hf_config, family)
        if config.max_model_len is not None and config.max_model_len > model_limit:
            raise ConfigError(f"invalid engine config: max_model_len={config.max_model_len}; "
                              f"allowed: 1..{model_limit} (the model's position embeddings)")
        # vLLM: sentence-transformers' max_seq_length is the default length.
        default_len = min(spec.max_seq_length or model_limit, model_limit)
        max_model_len = config.max_model_len or default_len
        logger.info("loading %s (%s encoder: %s; pooling %s%s) on %s as %s", model_dir,
                    family.name, ", ".join(spec.tasks), spec.method,
                    f" + {len(spec.dense)} dense" if spec.dense else "", device, choice.name)
        model = EncoderModel(model_dir, hf_config, spec, device, choice.dtype)
        name = config.served_model_name or model_dir.name
        return cls(config, model, name, max_model_len)

    def ready(self, engine_index: int) -> p.Ready:
        classify = p.PoolingTask.CLASSIFY.value in self.spec.tasks
        return p.Ready(
            engine_index=engine_index,
            max_model_len=self.max_model_len,
            vocab_size=self.model.vocab_size,
            block_size=self.config.block_size,
            num_kv_blocks=0,
            eos_token_ids=[],
            model_name=self.model_name,
            is_mock=False,
            runner=p.Runner.POOLING.value,
            pooling_tasks=list(self.spec.tasks),
            classify_labels=list(self.spec.labels) if classify else [],
            ranks=[p.RankMemory(rank=0, device=str(self.model.device),
                                weight_bytes=module_weight_bytes(self.model.model),
                                kv_cache_bytes=0)],
        )

    # ------------------------------------------------------------------ requests

    def validate_request(self, request: p.EngineCoreRequest) -> str | None:
        """Why ``request`` can never be served by this engine, or None."""
        if request.request_id in self.waiting:
            return f"request id {request.request_id!r} is already in use"
        params = request.pooling_params
        if params is None:
            return (f"model {self.model_name!r} is a pooling model ("
                    f"{', '.join(self.spec.tasks)}): it does not generate text")
        prompt = request.prompt_token_ids
        error = request_error(self.spec, params, len(prompt), self.model_name)
        if error is not None:
            return error
        error = prompt_error(prompt, self.model.vocab_size)
        if error is not None:
            return error
        if len(prompt) > self.max_model_len:
            return (f"prompt ({len(prompt)} tokens) exceeds max_model_len "
                    f"({self.max_model_len})")
        return None

    def add_request(self, request: p.EngineCoreRequest) -> list[p.EngineCoreOutput]:
        error = self.validate_request(request)
        if error is not None:
            logger.warning("request %s refused: %s", request.request_id, error)
            return [error_output(request.request_id, error, kind=INVALID)]
        assert request.pooling_params is not None
        self.waiting[request.request_id] = _Pending(
            request.request_id, request.prompt_token_ids, request.pooling_params,
            time.monotonic())
        return []

    def abort_requests(self, request_ids: list[str]) -> list[p.EngineCoreOutput]:
        return [p.EngineCoreOutput(rid, [], p.FinishReason.ABORT.value)
                for rid in request_ids if self.waiting.pop(rid, None) is not None]

    def has_unfinished_requests(self) -> bool:
        return bool(self.waiting)

    # ------------------------------------------------------------------ step

    def step(self) -> list[p.EngineCoreOutput]:
        """Run the next batch of waiting requests; each ends with its answer."""
        taken = self._take()
        if not taken:
            return []
        started = time.monotonic()
        outputs: list[p.EngineCoreOutput] = []
        with torch.inference_mode():
            for group in self._groups(sorted(taken, key=lambda r: len(r.prompt))):
                outputs.extend(self._run(group, started))
        return outputs

    def _take(self) -> list[_Pending]:
        """The oldest waiting requests that fit one step (at least one)."""
        taken: list[_Pending] = []
        tokens = 0
        while self.waiting and len(taken) < self.config.max_num_seqs:
            first = next(iter(self.waiting.values()))
            if taken and tokens + len(first.prompt) > self.token_budget:
                break
            tokens += len(first.prompt)
            taken.append(self.waiting.popitem(last=False)[1])
        return taken

    def _groups(self, by_length: list[_Pending]) -> list[list[_Pending]]:
        """Split length-sorted requests into forwards whose padded size fits the budget."""
        groups: list[list[_Pending]] = [[]]
        for req in by_length:
            group = groups[-1]
            if group and (len(group) + 1) * len(req.prompt) > self.token_budget:
                groups.append(group := [])
            group.append(req)
        return groups

    def _run(self, group: list[_Pending], started: float) -> list[p.EngineCoreOutput]:
        try:
            answers = self._answer(group)
        except Exception as exc:  # noqa: BLE001 - isolate the request that fails
            if len(group) == 1:
                logger.exception("request %s failed", group[0].request_id)
                return [error_output(group[0].request_id, f"the forward failed: {exc}")]
            return [out for req in group for out in self._run([req], started)]
        done = time.monotonic()
        return [
            p.EngineCoreOutput(req.request_id, [], p.FinishReason.STOP.value,
                               queue_time=max(started - req.received, 0.0),
                               prefill_time=max(done - started, 0.0), pooling_output=answer)
            for req, answer in zip(group, answers, strict=True)
        ]

    def _answer(self, group: list[_Pending]) -> list[list[float]]:
        params = [req.params for req in group]
        out = self.model.forward([req.prompt for req in group],
                                 [q.token_type_start for q in params])
        if self.model.head is not None:
            return self.model.head(out, params)
        return classify_output(out, params, self.spec.score_activation)

    # ------------------------------------------------------------------ info

    def close(self) -> None:
        """Nothing runs beside this process."""

    def stats(self) -> p.SchedulerStats:
        return p.SchedulerStats(num_running=0, num_waiting=len(self.waiting))

    def utility(self, method: str, args: list[Any]) -> Any:
        if method == "ping":
            return "pong"
        if method == "get_stats":
            return msgspec.structs.asdict(self.stats())
        if method == "reset_prefix_cache":
            return True  # nothing is cached
        if method == "get_model_info":
            return {
                "model_name": self.model_name,
                "architecture": self.model.family.name,
                "device": str(self.model.device),
                "dtype": str(self.model.dtype).removeprefix("torch."),
                "matmuls": self.model.matmuls,
                "max_model_len": self.max_model_len,
                "runner": p.Runner.POOLING.value,
                "pooling_tasks": list(self.spec.tasks),
                "pooling_method": self.spec.method,
            }
        raise ValueError(f"unknown utility method {method!r}; known: ping, get_stats, "
                         "reset_prefix_cache, get_model_info")
