"""Building a ModelEngine from its config: the checks that refuse a model or a setting
before anything is loaded, the tensor-parallel workers, the model (or this rank's slice
of it), the attention backend, the KV cache's size, the pooling head or the grammars,
and the decoder's forward (eager or compiled)."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import torch

from engine.config import ConfigError, EngineConfig
from engine.grammar.compiler import load_xgrammar
from engine.runtime.attention.selection import select_backend
from engine.runtime.compile import build_forward
from engine.runtime.device import choose_dtype, resolve_device
from engine.runtime.engine import ModelEngine
from engine.runtime.kv_budget import size_kv_cache
from engine.runtime.loader import read_config, read_eos_token_ids, resolve_model_dir
from engine.runtime.models import load_model, max_positions, pick_impl
from engine.runtime.models.decoder import DecoderModel
from engine.runtime.models.transformers_model import TransformersModel
from engine.runtime.parallel.memory import check_fits
from engine.runtime.parallel.shard import check_split, load_shard
from engine.runtime.parallel.workers import TensorParallelWorkers
from engine.runtime.pooling.decoder_pooler import DecoderPooler, converts_lm, rerank_token_ids
from engine.runtime.pooling.task import pooling_convert

logger = logging.getLogger("vrs.engine")


def build_engine(config: EngineConfig) -> ModelEngine:
    """Validate ``config``, check the model and the split, start the tensor-parallel
    workers, load the model and size its cache: the engine, ready to serve."""
    config.validate()
    device = resolve_device(config.device)
    choice = choose_dtype(config.dtype, device)
    dtype = choice.dtype
    logger.info("dtype %s → %s (%s)", config.dtype, choice.name, choice.reason)
    torch.manual_seed(config.seed)
    model_dir = resolve_model_dir(config.model)
    hf_config = read_config(model_dir)
    impl = pick_impl(hf_config, config.model_impl)  # unsupported model: fail early
    model_limit = max_positions(hf_config)
    if config.max_model_len is not None and config.max_model_len > model_limit:
        raise ConfigError(
            f"invalid engine config: max_model_len={config.max_model_len}; allowed: "
            f"1..{model_limit} (the model's max_position_embeddings)"
        )
    max_model_len = config.max_model_len or model_limit
    logger.info(
        "loading %s (%s) on %s as %s, %s",
        model_dir,
        (hf_config.get("architectures") or ["?"])[0],
        device,
        str(dtype).removeprefix("torch."),
        "vrs's decoder" if impl == "vrs" else "transformers backend",
    )
    convert = pooling_convert(config.runner, config.convert, hf_config, model_dir)
    if convert is not None and impl != "vrs":
        raise ConfigError(
            "invalid engine config: runner=pooling with the transformers backend; "
            "allowed: pooling with vrs's own decoders (Llama, Qwen2, Qwen3) or the "
            "encoders; the transformers backend serves generation (--runner generate)")
    tokenizer_dir = Path(config.tokenizer) if config.tokenizer else model_dir
    lm_rows = None
    if convert is not None and converts_lm(hf_config, convert):
        lm_rows = rerank_token_ids(tokenizer_dir)
    start = time.perf_counter()
    workers = None
    plan = None
    if config.tensor_parallel_size > 1:
        plan = check_split(model_dir, hf_config, impl, config.tensor_parallel_size)
    check_fits(config, model_dir, hf_config, impl, dtype, device, plan)
    if config.tensor_parallel_size > 1:
        workers = TensorParallelWorkers(config, device)
    try:
        return _build(config, model_dir, hf_config, impl, dtype, device, max_model_len,
                      convert, tokenizer_dir, lm_rows, start, workers)
    except BaseException:
        if workers is not None:
            workers.abort()
        raise

def _build(config: EngineConfig, model_dir: Path, hf_config: dict[str, Any],
           impl: str, dtype: torch.dtype, device: torch.device, max_model_len: int,
           convert: str | None, tokenizer_dir: Path, lm_rows: list[int] | None,
           start: float, workers: TensorParallelWorkers | None) -> ModelEngine:
    """The model loaded (this rank's slice under tensor parallel), then the attention
    backend, the KV cache, the pooling head or the grammars, the forward."""
    if workers is None:
        model = load_model(model_dir, hf_config, dtype, device, max_model_len,
                           need_lm_head=convert is None, lm_rows=lm_rows, impl=impl)
    else:
        model = load_shard(model_dir, hf_config, dtype, device, max_model_len,
                           workers.group, need_lm_head=convert is None, lm_rows=lm_rows,
                           impl=impl)
    logger.info(
        "model loaded in %.1fs (matmuls: %s: %s, torch threads: %d)",
        time.perf_counter() - start,
        model.linear_backend,
        model.linear_reason,
        torch.get_num_threads(),
    )

    attention = select_backend(
        device, config.enforce_eager,
        model.feature_summary() if isinstance(model, TransformersModel) else None)
    num_blocks, max_model_len = size_kv_cache(
        config, model, device, max_model_len, attention.kv_copies, workers
    )
    eos = read_eos_token_ids(model_dir, hf_config)
    name = config.served_model_name or model_dir.name
    pooler = None
    if convert is not None:
        assert isinstance(model, DecoderModel)  # pooling with transformers is refused
        pooler = DecoderPooler.build(model, model_dir, hf_config, convert, name)
        logger.info("pooling model: %s, %s pooling", ", ".join(pooler.spec.tasks),
                    pooler.spec.method)
    else:
        load_xgrammar()  # here, on one thread: the grammar threads only use it
    forward = None
    if workers is not None:
        logger.info("decoder runs eager (tensor parallel: the all-reduces run between "
                    "the layers' ops)")
    elif isinstance(model, DecoderModel):
        forward = build_forward(config, model, config.max_num_batched_tokens)
    return ModelEngine(
        config, model, name, eos, max_model_len, num_blocks, attention,
        tokenizer_dir if pooler is None else None, forward, pooler, workers,
    )

