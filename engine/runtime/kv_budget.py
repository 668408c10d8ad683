"""How many KV blocks the engine gets: the budget, and what it must hold.

The budget is ``--kv-cache-memory`` when given; otherwise on the CPU what
``max_num_seqs`` sequences of ``max_model_len`` tokens need, at most
``CPU_DEFAULT_KV_BYTES``, and on CUDA what ``gpu_memory_utilization`` leaves after the
weights and a peak-sized step. It covers every copy of the K/V the attention backend
keeps: with resident decode rows (``kv_copies == 2``, attention/resident.py) half of it
is the paged cache and the rows may hold as many tokens again, so the memory used stays
within the budget.
"""

from __future__ import annotations

import logging

import torch

from engine import protocol as p
from engine.config import ConfigError, EngineConfig
from engine.runtime.attention.sdpa import SdpaBackend
from engine.runtime.kv_cache import cdiv
from engine.runtime.model_runner import ModelRunner, StepMirror, kv_cache_bytes_per_block
from engine.runtime.models.base import Model
from engine.runtime.prompt_logprobs import ROWS_PER_SLICE
from engine.runtime.request import Request

logger = logging.getLogger("vrs.engine")

CPU_DEFAULT_KV_BYTES = 1 << 30


def size_kv_cache(
    config: EngineConfig,
    model: Model,
    device: torch.device,
    max_model_len: int,
    kv_copies: int,
    mirror: StepMirror | None = None,
) -> tuple[int, int]:
    """The paged cache's block count, and ``max_model_len`` (lowered to what the cache
    holds when the user did not set it)."""
    bytes_per_block = kv_cache_bytes_per_block(model, config.block_size)
    budget = kv_budget(config, model, device, bytes_per_block * kv_copies, max_model_len,
                       mirror)
    # One more block is the scratch block.
    num_blocks = budget // (bytes_per_block * kv_copies) - 1
    if num_blocks < 1:
        raise ConfigError(
            f"invalid engine config: kv_cache_memory_bytes={budget}; allowed: >= "
            f"{2 * bytes_per_block * kv_copies} (two blocks of {bytes_per_block} bytes"
            + (f", times {kv_copies} copies of the K/V" if kv_copies > 1 else "")
            + ")"
        )
    capacity = num_blocks * config.block_size
    if capacity < max_model_len:
        if config.max_model_len is not None:
            raise ConfigError(
                f"invalid engine config: max_model_len={max_model_len}; allowed: "
                f"1..{capacity} (the KV cache holds {num_blocks} blocks = {capacity} "
                f"tokens; raise --kv-cache-memory or lower --max-model-len)"
            )
        logger.warning(
            "max_model_len lowered from %d to %d: the KV cache holds %d tokens",
            max_model_len,
            capacity,
            capacity,
        )
        max_model_len = capacity
    paged_mib = (num_blocks + 1) * bytes_per_block / 2**20
    logger.info(
        "KV cache: %d blocks of %d tokens (%d tokens), %.1f MiB%s",
        num_blocks,
        config.block_size,
        capacity,
        paged_mib,
        f", and up to {paged_mib:.1f} MiB of resident decode rows" if kv_copies > 1 else "",
    )
    return num_blocks, max_model_len


def kv_budget(
    config: EngineConfig,
    model: Model,
    device: torch.device,
    bytes_per_block: int,
    max_model_len: int,
    mirror: StepMirror | None = None,
) -> int:
    """Bytes for the K/V; ``bytes_per_block`` counts every copy the backend keeps. With
    tensor parallel (``mirror``) the CUDA profile step runs on every rank."""
    if config.kv_cache_memory_bytes is not None:
        return config.kv_cache_memory_bytes
    blocks_wanted = config.max_num_seqs * cdiv(max_model_len, config.block_size) + 1
    wanted = blocks_wanted * bytes_per_block
    if device.type != "cuda":
        return min(CPU_DEFAULT_KV_BYTES, wanted)
    # CUDA: what gpu_memory_utilization leaves after weights and a peak-sized step.
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    free, total = torch.cuda.mem_get_info(device)
    used_before = total - free
    profile_blocks = cdiv(config.max_num_batched_tokens, config.block_size) + 1
    runner = ModelRunner(
        model, profile_blocks, config.block_size, SdpaBackend(device), mirror=mirror
    )
    tokens = min(config.max_num_batched_tokens, max_model_len)
    dummy = Request("profile", [0] * tokens, p.SamplingParams(max_tokens=1), 0.0, frozenset())
    dummy.block_ids = list(range(cdiv(tokens, config.block_size)))
    with torch.inference_mode():
        runner.execute([dummy], [tokens])
    torch.cuda.synchronize(device)
    activations = torch.cuda.max_memory_allocated(device) - torch.cuda.memory_allocated(device)
    # The sampler's float32 logits and probabilities for a full batch of sequences.
    activations += 2 * 4 * config.max_num_seqs * model.config.vocab_size
    # Prompt logprobs: float32 logits, log-softmax and comparisons of one slice of rows.
    activations += 3 * 4 * ROWS_PER_SLICE * model.config.vocab_size
    del runner
    torch.cuda.empty_cache()
    budget = int(total * config.gpu_memory_utilization) - used_before - activations
    return max(min(budget, wanted), 0)
