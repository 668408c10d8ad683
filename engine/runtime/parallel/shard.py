"""Which slice of each weight a tensor-parallel rank keeps.

vrs's decoder (Megatron's split): q/k/v and gate/up are column-parallel (a rank keeps
its heads and its slice of the MLP), o_proj and down_proj row-parallel (the matching
input columns; the partial outputs are summed by an all-reduce, and their bias is added
once, by rank 0). Embeddings, norms and the LM head are replicated.

The transformers backend follows the model's own ``base_model_tp_plan``: ``colwise`` and
``rowwise`` linears as above (a rowwise one becomes a ``RowParallelLinear``), and
``replicated_with_grad_allreduce`` (q/k norms) stays whole. A plan with any other style
(``colwise_gather_output``, ``embedding_rowwise``, expert parallel) is refused, as is a
model without a plan.
"""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path
from typing import Any

import torch

from engine.config import ConfigError
from engine.runtime.loader import iter_weights
from engine.runtime.models import resolve_config
from engine.runtime.models.base import Model
from engine.runtime.models.decoder import DecoderConfig, DecoderModel
from engine.runtime.parallel.group import TensorParallelGroup

DECODER_WEIGHT = re.compile(
    r"(?:^|\.)layers\.\d+\.(?:self_attn|mlp)\.(q|k|v|o|gate|up|down)_proj\.(weight|bias)$")
# vrs's decoder: which projections split their output rows (column-parallel) and which
# their input columns (row-parallel), and by which size.
_COLUMN = {"q": "heads", "k": "kv_heads", "v": "kv_heads", "gate": "mlp", "up": "mlp"}
_ROW = {"o", "down"}
PLAN_STYLES = ("colwise", "rowwise", "replicated_with_grad_allreduce")


def allowed_sizes(*dims: int) -> list[int]:
    """The tensor-parallel sizes that divide every one of ``dims``."""
    common = 0
    for dim in dims:
        common = math.gcd(common, dim)
    return [n for n in range(1, common + 1) if common % n == 0]


def _refuse_split(size: int, named: dict[str, int]) -> None:
    if all(value % size == 0 for value in named.values()):
        return
    sizes = ", ".join(map(str, allowed_sizes(*named.values())))
    what = ", ".join(f"{k}={v}" for k, v in named.items())
    raise ConfigError(f"invalid engine config: tensor_parallel_size={size} does not divide "
                      f"this model ({what}); allowed: {sizes}")


def local_decoder_config(cfg: DecoderConfig, size: int) -> DecoderConfig:
    """The shape of one rank's slice; refuses a size that does not divide the heads and
    the MLP."""
    _refuse_split(size, {"num_attention_heads": cfg.num_heads,
                         "num_key_value_heads": cfg.num_kv_heads,
                         "intermediate_size": cfg.intermediate_size})
    return dataclasses.replace(cfg, num_heads=cfg.num_heads // size,
                               num_kv_heads=cfg.num_kv_heads // size,
                               intermediate_size=cfg.intermediate_size // size)


def _part(tensor: torch.Tensor, dim: int, rank: int, size: int) -> torch.Tensor:
    length = tensor.shape[dim] // size
    return tensor.narrow(dim, rank * length, length).contiguous()


def shard_decoder_tensor(name: str, tensor: torch.Tensor, rank: int, size: int
                         ) -> torch.Tensor:
    """Rank ``rank``'s part of the checkpoint tensor ``name`` (vrs's decoder)."""
    match = DECODER_WEIGHT.search(name)
    if match is None:
        return tensor
    proj, kind = match.groups()
    if proj in _COLUMN:
        return _part(tensor, 0, rank, size)
    if kind == "weight":
        return _part(tensor, 1, rank, size)
    # A row-parallel bias is added once: by rank 0, to the all-reduced sum.
    return tensor if rank == 0 else torch.zeros_like(tensor)


class RowParallelLinear(torch.nn.Module):
    """A rowwise ``nn.Linear``: this rank's input columns, the partial outputs summed over
    the ranks, then the bias."""

    def __init__(self, linear: torch.nn.Linear, group: TensorParallelGroup) -> None:
        super().__init__()
        self.bias = None if linear.bias is None else linear.bias.detach()
        linear.register_parameter("bias", None)
        self.linear = linear
        self.group = group

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.group.all_reduce(self.linear(x).contiguous())
        return out if self.bias is None else out + self.bias


def _pattern(key: str) -> re.Pattern[str]:
    return re.compile("^" + re.escape(key).replace(r"\*", r"\d+") + "$")


def tp_plan(hf_config: Any) -> dict[str, str]:
    """The model's ``base_model_tp_plan``; a clear error where it has none, or one with a
    style this backend does not split."""
    text = hf_config.get_text_config()
    plan = dict(getattr(text, "base_model_tp_plan", None) or {})
    name = type(text).__name__
    if not plan:
        raise ConfigError(f"invalid engine config: tensor_parallel_size > 1, and {name} has "
                          "no base_model_tp_plan to split it by; allowed: 1")
    odd = sorted({style for style in plan.values() if style not in PLAN_STYLES})
    if odd:
        raise ConfigError(
            f"invalid engine config: tensor_parallel_size > 1, and {name}'s "
            f"base_model_tp_plan uses {', '.join(odd)}; the transformers backend splits "
            f"{', '.join(PLAN_STYLES)} only; allowed: 1")
    return plan


def check_plan_split(hf_config: Any, size: int) -> None:
    """Refuse a size that does not divide the attention heads."""
    text = hf_config.get_text_config()
    heads = int(text.num_attention_heads)
    kv_heads = int(getattr(text, "num_key_value_heads", None) or heads)
    _refuse_split(size, {"num_attention_heads": heads, "num_key_value_heads": kv_heads})


def apply_plan(decoder: torch.nn.Module, plan: dict[str, str],
               group: TensorParallelGroup) -> None:
    """Split ``decoder``'s linears (names relative to it, as the plan's keys) in place."""
    patterns = [(_pattern(key), style) for key, style in plan.items()]
    rank, size = group.rank, group.size
    for name, module in list(decoder.named_modules()):
        style = next((s for pat, s in patterns if pat.match(name)), None)
        if style is None or style == "replicated_with_grad_allreduce":
            continue
        if not isinstance(module, torch.nn.Linear):
            raise ConfigError(f"invalid engine config: tensor_parallel_size > 1: {name} is "
                              f"{type(module).__name__}, and only nn.Linear layers split "
                              f"{style}; allowed: 1")
        dim = 0 if style == "colwise" else 1
        if module.weight.shape[dim] % size:
            raise ConfigError(f"invalid engine config: tensor_parallel_size={size} does not "
                              f"divide {name} ({list(module.weight.shape)})")
        with torch.no_grad():
            module.weight = torch.nn.Parameter(_part(module.weight, dim, rank, size),
                                               requires_grad=False)
            if style == "colwise":
                module.out_features //= size
                if module.bias is not None:
                    module.bias = torch.nn.Parameter(_part(module.bias, 0, rank, size),
                                                     requires_grad=False)
            else:
                module.in_features //= size
        if style == "rowwise":
            parent_name, _, child = name.rpartition(".")
            parent = decoder.get_submodule(parent_name) if parent_name else decoder
            setattr(parent, child, RowParallelLinear(module, group))


def load_shard(model_dir: Path, hf_config: dict[str, Any], dtype: torch.dtype,
               device: torch.device, max_len: int, group: TensorParallelGroup,
               need_lm_head: bool = True, lm_rows: list[int] | None = None,
               impl: str = "vrs") -> Model:
    """This rank's slice of the model: ``load_model``'s, split as the module says.
    The checkpoint is read tensor by tensor and each is cut before the next is read."""
    rank, size = group.rank, group.size
    if impl == "transformers":
        from engine.runtime.models.transformers_model import TransformersModel

        def split(decoder: torch.nn.Module, config: Any) -> None:
            check_plan_split(config, size)
            apply_plan(decoder, tp_plan(config), group)

        return TransformersModel(model_dir, hf_config, dtype, device, prepare=split)
    config = local_decoder_config(resolve_config(hf_config), size)
    model = DecoderModel(config, dtype, device)
    weights = {name: shard_decoder_tensor(name, tensor, rank, size)
               for name, tensor in iter_weights(model_dir, dtype, device)}
    model.load_weights(weights, need_lm_head, lm_rows)
    model.reduce = group.all_reduce
    model.init_rope(max_len, model_dir)
    return model


def check_split(model_dir: Path, hf_config: dict[str, Any], impl: str, size: int
                ) -> dict[str, str] | None:
    """Refuse, before any process starts, a size the model cannot be split by; returns
    the transformers backend's plan (None for vrs's decoder)."""
    if impl == "transformers":
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(str(model_dir), trust_remote_code=False)
        plan = tp_plan(config)
        check_plan_split(config, size)
        return plan
    local_decoder_config(resolve_config(hf_config), size)
    return None
