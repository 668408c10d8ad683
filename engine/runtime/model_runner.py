"""Turns a scheduled step into tensors, runs the model, returns logits to sample from.

Owns the KV cache: one tensor per layer, ``num_blocks + 1`` blocks of K and V (the
last is the scratch block that padding points at). Per step it builds, without a
per-token Python loop: the flat token ids and positions, the slot of every token
(``block_id * block_size + offset``) and the ``StepBatch`` (block tables and lengths)
from which the engine's attention backend builds its per-step metadata.

Logits are made for the last position of each request due to sample and, for a request
that asked for prompt logprobs, for every prompt position of its chunk as well (see
engine/runtime/prompt_logprobs.py); the other requests pay nothing for that. A pooling
request makes no logits: the hidden states its pooling reads are gathered chunk by chunk
(``PoolSpan``), and once its prompt is computed its pooled vector is in ``RunOutput.pooled``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from engine import protocol as p
from engine.runtime.attention.base import AttentionBackend, AttentionMetadata, StepBatch
from engine.runtime.models.base import Model
from engine.runtime.prompt_logprobs import PromptSpan, compute_prompt_logprobs
from engine.runtime.request import Request


@dataclass
class PoolSpan:
    """Rows ``first .. first + count`` of a step's hidden states are positions of a
    pooling request's prompt; ``last``: they end it."""

    request: Request
    first: int
    count: int
    last: bool


@dataclass
class ModelInput:
    input_ids: torch.Tensor
    positions: torch.Tensor
    meta: AttentionMetadata
    logits_index: torch.Tensor  # rows of the hidden states to turn into logits
    sample_requests: list[Request]  # one per logits row, in order
    prompt_index: torch.Tensor | None  # rows of the prompt positions needing logprobs
    prompt_spans: list[PromptSpan]  # whose positions those rows are, in order
    pool_spans: list[PoolSpan]  # the rows pooling requests read
    batch: StepBatch  # what ``meta`` was built from


@dataclass
class RunOutput:
    """One step's results: the logits to sample from (None when no request is due), the
    requests due, one per logits row, the prompt logprobs this step computed, and the
    pooled hidden state ``[hidden]`` (float32) of each pooling request it completed."""

    logits: torch.Tensor | None
    sample_requests: list[Request]
    prompt_logprobs: list[tuple[Request, list[p.TokenLogprobs]]]
    pooled: list[tuple[Request, torch.Tensor]]


# (input_ids, positions, metadata, kv caches) -> hidden states: the model's eager forward
# or its compiled graph (engine/runtime/compile.py).
Forward = Callable[[torch.Tensor, torch.Tensor, AttentionMetadata, list[torch.Tensor]],
                   torch.Tensor]


class StepMirror(Protocol):
    """Other processes that run every forward with this runner: the tensor-parallel
    workers (engine/runtime/parallel/workers.py)."""

    def allocate(self, num_blocks: int, block_size: int, attention: str,
                 weight_bytes: int, kv_cache_bytes: int) -> None:
        """Each worker allocates its cache and attention backend (``attention``'s name),
        replacing its last; given this rank's memory, the workers' is gathered."""
        ...

    def step(self, input_ids: torch.Tensor, positions: torch.Tensor, batch: StepBatch
             ) -> None:
        """Each worker starts this step's forward (called just before rank 0's)."""
        ...


def kv_cache_bytes_per_block(model: Model, block_size: int) -> int:
    cfg = model.config
    elem = torch.empty((), dtype=model.dtype).element_size()
    return 2 * cfg.num_layers * block_size * cfg.num_kv_heads * cfg.head_dim * elem


class ModelRunner:
    def __init__(
        self,
        model: Model,
        num_blocks: int,
        block_size: int,
        attention: AttentionBackend,
        forward: Forward | None = None,
        mirror: StepMirror | None = None,
    ) -> None:
        self.model = model
        self.mirror = mirror
        self.attention = attention
        self.forward = forward  # None: the model's own (eager) forward
        self.device = model.device
        self.block_size = block_size
        self.num_blocks = num_blocks
        self.scratch_block = num_blocks  # the extra block at the end
        cfg = model.config
        shape = (num_blocks + 1, block_size, 2, cfg.num_kv_heads, cfg.head_dim)
        self.kv_caches: list[torch.Tensor] = [
            torch.zeros(shape, dtype=model.dtype, device=self.device) for _ in range(cfg.num_layers)
        ]
        if mirror is not None:
            mirror.allocate(num_blocks, block_size, attention.name, model.weight_bytes(),
                            self.kv_cache_bytes)

    @property
    def kv_cache_bytes(self) -> int:
        """The paged cache, and as much again per further copy the backend keeps."""
        one = sum(t.numel() * t.element_size() for t in self.kv_caches)
        return one * self.attention.kv_copies

    # ------------------------------------------------------------------ inputs

    def prepare(self, requests: list[Request], num_new_tokens: list[int]) -> ModelInput:
        bs = self.block_size
        singles: list[Request] = []
        chunks: list[tuple[Request, int]] = []
        for request, n in zip(requests, num_new_tokens, strict=True):
            if n == 1:
                singles.append(request)
            else:
                chunks.append((request, n))

        ids: list[int] = []
        positions: list[int] = []
        slots: list[int] = []
        logits_rows: list[int] = []
        sample_requests: list[Request] = []
        prompt_rows: list[int] = []
        prompt_spans: list[PromptSpan] = []
        pool_spans: list[PoolSpan] = []

        # Single-token queries (decodes): tiny per-request work, plain lists.
        ctx_lens: list[int] = []
        for row, request in enumerate(singles):
            pos = request.num_computed_tokens
            ids.append(request.token_ids[pos])
            positions.append(pos)
            slots.append(request.block_ids[pos // bs] * bs + pos % bs)
            ctx_lens.append(pos + 1)
            if request.needs_prompt_logprobs and _prompt_span(request, pos, 1, prompt_spans):
                prompt_rows.append(row)
            if request.pooling is not None:
                _pool_span(request, row, pos, 1, pool_spans)
            elif pos + 1 == request.num_tokens:
                logits_rows.append(row)
                sample_requests.append(request)

        # Multi-token chunks: numpy per request.
        n_chunks = len(chunks)
        lens = np.array([n for _, n in chunks], dtype=np.int64)
        starts = np.array([r.num_computed_tokens for r, _ in chunks], dtype=np.int64)
        if n_chunks:
            chunk_ids: list[np.ndarray] = [np.asarray(ids, dtype=np.int64)]
            chunk_pos: list[np.ndarray] = [np.asarray(positions, dtype=np.int64)]
            chunk_slots: list[np.ndarray] = [np.asarray(slots, dtype=np.int64)]
            offset = len(singles)
            for request, n in chunks:
                start = request.num_computed_tokens
                span_pos = np.arange(start, start + n, dtype=np.int64)
                blocks = np.asarray(request.block_ids, dtype=np.int64)
                chunk_ids.append(np.asarray(request.token_ids[start : start + n], dtype=np.int64))
                chunk_pos.append(span_pos)
                chunk_slots.append(blocks[span_pos // bs] * bs + span_pos % bs)
                if request.needs_prompt_logprobs and _prompt_span(request, start, n, prompt_spans):
                    span = prompt_spans[-1]
                    first_row = offset + span.first - start
                    prompt_rows.extend(range(first_row, first_row + span.count))
                if request.pooling is not None:
                    _pool_span(request, offset, start, n, pool_spans)
                elif start + n == request.num_tokens:
                    logits_rows.append(offset + n - 1)
                    sample_requests.append(request)
                offset += n
            input_ids = torch.from_numpy(np.concatenate(chunk_ids))
            position_t = torch.from_numpy(np.concatenate(chunk_pos))
            slot_t = torch.from_numpy(np.concatenate(chunk_slots))
        else:
            input_ids = torch.tensor(ids, dtype=torch.long)
            position_t = torch.tensor(positions, dtype=torch.long)
            slot_t = torch.tensor(slots, dtype=torch.long)

        dev = self.device
        batch = StepBatch(
            block_size=bs,
            scratch_block=self.scratch_block,
            slot_mapping=slot_t.to(dev, non_blocking=True),
            single_ctx=ctx_lens,
            single_tables=[r.block_ids for r in singles],
            chunk_starts=starts,
            chunk_lens=lens,
            chunk_tables=[r.block_ids for r, _ in chunks],
            single_keys=[r.serial for r in singles],
        )
        return ModelInput(
            input_ids=input_ids.to(dev, non_blocking=True),
            positions=position_t.to(dev, non_blocking=True),
            meta=self.attention.build(batch),
            logits_index=torch.tensor(logits_rows, dtype=torch.long).to(dev, non_blocking=True),
            sample_requests=sample_requests,
            prompt_index=(
                torch.tensor(prompt_rows, dtype=torch.long).to(dev, non_blocking=True)
                if prompt_rows
                else None
            ),
            prompt_spans=prompt_spans,
            pool_spans=pool_spans,
            batch=batch,
        )

    # ------------------------------------------------------------------ run

    def execute(self, requests: list[Request], num_new_tokens: list[int]) -> RunOutput:
        """Run one step: the logits ``[n, vocab]`` of the requests due to sample (None
        when there are none), and the prompt logprobs of the scheduled prompt positions."""
        inputs = self.prepare(requests, num_new_tokens)
        if self.mirror is not None:
            self.mirror.step(inputs.input_ids, inputs.positions, inputs.batch)
        model = self.model
        forward = self.forward or model.forward
        hidden = forward(inputs.input_ids, inputs.positions, inputs.meta, self.kv_caches)
        prompt: list[tuple[Request, list[p.TokenLogprobs]]] = []
        if inputs.prompt_index is not None:
            prompt = compute_prompt_logprobs(
                model.compute_logits,
                hidden.index_select(0, inputs.prompt_index),
                inputs.prompt_spans,
            )
        pooled = _pool(hidden, inputs.pool_spans) if inputs.pool_spans else []
        if not inputs.sample_requests:
            return RunOutput(None, [], prompt, pooled)
        logits = model.compute_logits(hidden.index_select(0, inputs.logits_index))
        return RunOutput(logits, inputs.sample_requests, prompt, pooled)


def _pool_span(request: Request, first_row: int, start: int, n: int,
               spans: list[PoolSpan]) -> None:
    """Append the rows of positions ``start .. start + n`` that ``request``'s pooling
    reads: all of them for "mean", position 0 for "cls", the prompt's last for "last"."""
    last = start + n == request.num_tokens
    method = request.pool_method
    if method == "mean":
        spans.append(PoolSpan(request, first_row, n, last))
    elif method == "cls":
        if start == 0 or last:
            spans.append(PoolSpan(request, first_row, 1 if start == 0 else 0, last))
    elif last:
        spans.append(PoolSpan(request, first_row + n - 1, 1, last))


def _pool(hidden: torch.Tensor, spans: list[PoolSpan]) -> list[tuple[Request, torch.Tensor]]:
    """Gather the spans' rows into their requests (float32); the pooled vector of each
    request whose prompt this step completed."""
    done: list[tuple[Request, torch.Tensor]] = []
    for span in spans:
        request = span.request
        if span.count:
            rows = hidden[span.first : span.first + span.count].float()
            if request.pool_method == "mean":
                part = rows.sum(0)
                request.pooled = part if request.pooled is None else request.pooled + part
            else:
                request.pooled = rows[0]
        if span.last and request.pooled is not None:
            vector = request.pooled
            if request.pool_method == "mean":
                vector = vector / request.num_prompt_tokens
            done.append((request, vector))
    return done


def _prompt_span(request: Request, start: int, n: int, spans: list[PromptSpan]) -> bool:
    """Append the span of positions ``start..start+n`` that still need prompt logprobs
    (those after the ones already gathered, before the last prompt token); True if any."""
    first = max(start, len(request.prompt_logprobs or ()))
    end = min(start + n, request.num_prompt_tokens - 1)
    if end <= first:
        return False
    spans.append(PromptSpan(request, first, end - first))
    return True
