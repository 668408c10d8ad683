"""``python -m engine.runtime.parallel.worker``: one tensor-parallel rank other than 0.

Started by rank 0 (workers.py) with the engine's config. It joins the group, loads its
slice of the model, then runs what rank 0 broadcasts (message.py): it allocates its
paged KV cache (its own KV heads only) and runs the forward of every step, whose
all-reduces meet rank 0's. It samples nothing and holds no LM head. It dies with its
parent, ignores SIGTERM/SIGINT (rank 0 stops it with ``Stop``; the frontend's SIGKILL of
the engine's group is the backstop), and a failure is written to the store for rank 0
to report before the worker exits non-zero.
"""

from __future__ import annotations

import argparse
import ctypes
import logging
import os
import signal
import sys

import msgspec
import torch
from torch._C._distributed_c10d import TCPStore

from engine.config import EngineConfig
from engine.runtime.attention.selection import backend_named
from engine.runtime.device import choose_dtype, resolve_device
from engine.runtime.loader import read_config, resolve_model_dir
from engine.runtime.model_runner import ModelRunner
from engine.runtime.models import max_positions, pick_impl
from engine.runtime.parallel import message as m
from engine.runtime.parallel.group import TensorParallelGroup
from engine.runtime.parallel.shard import load_shard
from engine.runtime.parallel.workers import (
    GROUP_TIMEOUT_S,
    STORE_TIMEOUT_S,
    failure_key,
    rank_device,
)

logger = logging.getLogger("vrs.engine")
_PR_SET_PDEATHSIG = 1


def _die_with(parent: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it died before prctl took effect
        os._exit(1)


def serve(config: EngineConfig, rank: int, store: TCPStore) -> int:
    """Load this rank's slice and run rank 0's messages until ``Stop``."""
    size = config.tensor_parallel_size
    device = rank_device(resolve_device(config.device), rank)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dtype = choose_dtype(config.dtype, device).dtype
    group = TensorParallelGroup(store, rank, size, device, GROUP_TIMEOUT_S)
    model_dir = resolve_model_dir(config.model)
    hf_config = read_config(model_dir)
    impl = pick_impl(hf_config, config.model_impl)
    max_len = config.max_model_len or max_positions(hf_config)
    model = load_shard(model_dir, hf_config, dtype, device, max_len, group,
                       need_lm_head=False, impl=impl)
    logger.info("rank %d of %d: weights %.1f MiB on %s", rank, size,
                model.weight_bytes() / 2**20, device)
    runner: ModelRunner | None = None
    with torch.inference_mode():
        while True:
            message = m.decode(group.receive())
            if isinstance(message, m.Stop):
                return 0
            if isinstance(message, m.Allocate):
                runner = None  # the last cache goes before the next is made
                runner = ModelRunner(model, message.num_blocks, message.block_size,
                                     backend_named(message.attention, device))
                group.all_gather_ints([model.weight_bytes(), runner.kv_cache_bytes])
                continue
            if runner is None:
                raise RuntimeError("a step came before any Allocate")
            input_ids, positions, batch = m.step_inputs(
                message, runner.block_size, runner.scratch_block, device)
            model.forward(input_ids, positions, runner.attention.build(batch),
                          runner.kv_caches)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.runtime.parallel.worker",
                                     description=__doc__)
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--store-port", type=int, required=True)
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("--config-json", required=True)
    args = parser.parse_args(argv)
    _die_with(args.parent)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    config = msgspec.json.decode(args.config_json, type=EngineConfig).validate()
    from engine.logfmt import setup_logging

    index = os.environ.get("VRS_ENGINE_INDEX", "0")
    setup_logging(config.log_level.upper(), f"engine {index} rank {args.rank}")
    store = TensorParallelGroup.join_store(args.store_port, config.tensor_parallel_size,
                                           STORE_TIMEOUT_S)
    try:
        return serve(config, args.rank, store)
    except Exception as exc:
        logger.exception("rank %d failed", args.rank)
        try:
            store.set(failure_key(args.rank), f"{type(exc).__name__}: {exc}")
        except RuntimeError:
            pass
        return 1


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
