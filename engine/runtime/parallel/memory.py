"""Whether each rank's slice of the weights fits its device, checked before loading.

Each rank's weights are estimated from the checkpoint's safetensors headers (shapes only,
nothing is read): a split projection counts ``1/N`` on every rank, everything else whole,
and vrs's decoder keeps the LM head on rank 0 only. A rank may use:

* on CUDA, ``gpu_memory_utilization`` of its device's memory (the KV cache is sized from
  what the weights leave, engine/runtime/kv_budget.py);
* on the CPU, its share of the host's available memory (``MemAvailable / N``): the ranks
  are processes of one host, so splitting a model does not make it fit there;
* ``VRS_DEVICE_MEMORY`` (bytes, or e.g. ``2GiB``) in place of either: each rank's device
  has that much, as a separate device would (how the tests show a model that fits only
  when split on a machine without GPUs).

A model that does not fit is refused with the numbers, and the smallest
``--tensor-parallel-size`` that would fit, if any.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open

from engine.config import ConfigError, EngineConfig
from engine.runtime.loader import safetensors_files
from engine.runtime.parallel.shard import DECODER_WEIGHT, allowed_sizes
from engine.sizes import parse_size

DEVICE_MEMORY_ENV = "VRS_DEVICE_MEMORY"
_LM_HEAD = re.compile(r"(^|\.)lm_head\.weight$")


def human(nbytes: int) -> str:
    """``nbytes`` as GiB, MiB or KiB, whichever reads best."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20)):
        if nbytes >= scale:
            return f"{nbytes / scale:.2f} {unit}"
    return f"{nbytes / 2**10:.1f} KiB"


def _mem_available() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise OSError("/proc/meminfo has no MemAvailable")


def rank_capacity(config: EngineConfig, device: torch.device) -> tuple[int, str]:
    """Bytes one rank's weights may take, and where that figure comes from."""
    override = os.environ.get(DEVICE_MEMORY_ENV)
    if override:
        try:
            return parse_size(override), f"{DEVICE_MEMORY_ENV}={override}"
        except ValueError as exc:
            raise ConfigError(f"{DEVICE_MEMORY_ENV}: {exc}") from None
    if device.type == "cuda":
        _, total = torch.cuda.mem_get_info(device)
        util = config.gpu_memory_utilization
        return int(total * util), f"{util} of the device's {total / 2**30:.1f} GiB"
    size = config.tensor_parallel_size
    available = _mem_available()
    return available // size, (f"the host's {available / 2**30:.1f} GiB available"
                               + (f", shared by {size} ranks" if size > 1 else ""))


def _checkpoint_tensors(model_dir: Path) -> list[tuple[str, int, bool]]:
    """(name, elements, floating point) of every checkpoint tensor, from the headers."""
    found = []
    for path in safetensors_files(model_dir):
        with safe_open(str(path), framework="pt", device="cpu") as shard:
            for name in shard.keys():  # noqa: SIM118 - safe_open is not a mapping
                part = shard.get_slice(name)
                elements = 1
                for dim in part.get_shape():
                    elements *= int(dim)
                found.append((name, elements, part.get_dtype().startswith(("F", "BF"))))
    return found


def _plan_split(plan: dict[str, str]) -> re.Pattern[str] | None:
    keys = [re.escape(k).replace(r"\*", r"\d+") for k, s in plan.items()
            if s in ("colwise", "rowwise")]
    if not keys:
        return None
    return re.compile(r"(?:^|\.)(?:" + "|".join(keys) + r")\.(?:weight|bias)$")


def rank_weights(model_dir: Path, impl: str, dtype: torch.dtype, size: int,
                 plan: dict[str, str] | None = None) -> list[int]:
    """Each rank's estimated weight bytes in ``dtype`` (``plan``: the transformers
    backend's ``base_model_tp_plan``)."""
    elem = torch.empty((), dtype=dtype).element_size()
    split = DECODER_WEIGHT if impl == "vrs" else _plan_split(plan or {})
    ranks = [0] * size
    embed = 0
    head = False
    for name, elements, floating in _checkpoint_tensors(model_dir):
        nbytes = elements * (elem if floating else 8)
        if split is not None and split.search(name):
            ranks = [r + nbytes // size for r in ranks]
        elif impl == "vrs" and _LM_HEAD.search(name):
            ranks[0] += nbytes  # the workers sample nothing
            head = True
        else:
            ranks = [r + nbytes for r in ranks]
            if name.endswith("embed_tokens.weight"):
                embed = nbytes
    if impl == "vrs" and not head:  # tied: rank 0 packs its own copy for the LM head
        ranks[0] += embed
    return ranks


def check_fits(config: EngineConfig, model_dir: Path, hf_config: dict[str, Any], impl: str,
               dtype: torch.dtype, device: torch.device,
               plan: dict[str, str] | None = None) -> None:
    """Refuse, before loading, weights that do not fit a rank's device, with the numbers
    and the tensor-parallel sizes that would fit. ``plan``: the transformers backend's
    ``base_model_tp_plan`` when ``check_split`` has read it (at TP=1 nothing is split,
    so it is read only to suggest a size)."""
    size = config.tensor_parallel_size
    need = rank_weights(model_dir, impl, dtype, size, plan)
    capacity, source = rank_capacity(config, device)
    if max(need) <= capacity:
        return
    message = (f"the model's weights need {human(max(need))} on a rank at "
               f"tensor_parallel_size={size}, more than the {human(capacity)} a rank "
               f"may use ({source})")
    dims = _split_dims(hf_config, impl)
    if dims and not (device.type == "cpu" and not os.environ.get(DEVICE_MEMORY_ENV)):
        if impl == "transformers" and plan is None:
            plan = _plan(model_dir)
        for bigger in allowed_sizes(*dims):
            if bigger <= size:
                continue
            each = max(rank_weights(model_dir, impl, dtype, bigger, plan))
            if each <= capacity:
                message += f"; at tensor_parallel_size={bigger} a rank needs {human(each)}"
                break
    raise ConfigError(f"invalid engine config: {message}")


def _plan(model_dir: Path) -> dict[str, str]:
    from transformers import AutoConfig

    text = AutoConfig.from_pretrained(str(model_dir), trust_remote_code=False).get_text_config()
    return dict(getattr(text, "base_model_tp_plan", None) or {})


def _split_dims(hf_config: dict[str, Any], impl: str) -> list[int]:
    """The sizes a tensor-parallel size must divide (heads, KV heads, and for vrs's
    decoder the MLP)."""
    text = hf_config.get("text_config") or hf_config
    heads = text.get("num_attention_heads")
    if not heads:
        return []
    dims = [int(heads), int(text.get("num_key_value_heads") or heads)]
    if impl == "vrs" and text.get("intermediate_size"):
        dims.append(int(text["intermediate_size"]))
    return dims
