"""The transformers backend: a decoder family vrs has no code for, run through the
modeling code transformers ships, on vrs's paged KV cache and attention backends.

The model is transformers' own ``<Family>ForCausalLM``, loaded by ``from_pretrained``
(never code from the model repository) in the engine's dtype, with
``attn_implementation="vrs"``: transformers' ``AttentionInterface`` routes every
attention call to ``_vrs_attention``, which hands the layer's query, key and value to
the step's ``AttentionMetadata`` (written to the paged cache, attended over it). The
whole continuous batch runs as one packed forward: a batch of one row holding every
sequence's new tokens, with their ``position_ids``; transformers builds no mask for an
attention function it does not know, and nothing else in a decoder layer mixes tokens.

At start-up a probe forward records what each layer passes to attention (sliding
window, soft-cap, sinks, scaling, head sizes); anything else refuses the model.
The probe also checks that ``compute_logits`` (the LM head, then the config's logit
scale and soft-cap) reproduces the model's own logits.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from engine.runtime.attention.base import AttentionMetadata
from engine.runtime.attention.features import LayerFeatures, attend, visible
from engine.runtime.loader import ModelLoadError
from engine.runtime.models.linear import module_weight_bytes, pack_linears
from engine.runtime.models.transformers_support import model_class

logger = logging.getLogger("vrs.engine")

ATTN_IMPLEMENTATION = "vrs"
# What transformers' layers pass to an attention function besides q, k, v and the mask;
# any other keyword is a feature this backend does not implement.
_QUIET_KWARGS = {"dropout", "position_ids", "use_cache", "cache_position", "return_dict",
                 "output_attentions", "past_key_values", "is_causal"}
_FEATURE_KWARGS = {"scaling", "sliding_window", "softcap", "s_aux"}
_PROBE_TOKENS = 5


@dataclass(frozen=True)
class TransformersShape:
    """``ModelShape`` of a transformers model (sizes read by the probe)."""

    architecture: str
    vocab_size: int
    num_layers: int
    num_kv_heads: int
    head_dim: int
    max_position_embeddings: int


@dataclass(frozen=True)
class LayerAttention:
    """What one layer asks of attention, as the probe saw it."""

    scale: float
    features: LayerFeatures
    heads: int
    kv_heads: int
    head_dim: int


class _Router:
    """Set on every attention module (``module._vrs_router``): the probe's record, then
    each step's metadata and caches."""

    def __init__(self) -> None:
        self.layers: dict[int, LayerAttention] = {}
        self.step: tuple[AttentionMetadata, list[torch.Tensor]] | None = None
        self.probing = False

    def probe(self, module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor,
              value: torch.Tensor, kwargs: dict[str, Any]) -> torch.Tensor:
        name = type(module).__name__
        unknown = sorted(k for k in set(kwargs) - _QUIET_KWARGS - _FEATURE_KWARGS
                         if not k.startswith("output_"))
        if unknown:
            raise ModelLoadError(f"{name} passes attention options the transformers backend "
                                 f"does not implement: {', '.join(unknown)}")
        if kwargs.get("is_causal") is False or getattr(module, "is_causal", True) is False:
            raise ModelLoadError(f"{name} attends bidirectionally; the paged attention of "
                                 "vrs is causal only")
        layer = getattr(module, "layer_idx", None)
        if not isinstance(layer, int):
            raise ModelLoadError(f"{name} has no layer_idx: its KV cache slot is unknown")
        if value.shape[-1] != query.shape[-1] or key.shape[-1] != query.shape[-1]:
            raise ModelLoadError(
                f"{name} has query/key/value head sizes {query.shape[-1]}/{key.shape[-1]}/"
                f"{value.shape[-1]}; the paged cache needs one head size")
        sinks = kwargs.get("s_aux")
        window = kwargs.get("sliding_window")
        softcap = kwargs.get("softcap")
        features = LayerFeatures(
            sliding_window=int(window) if window else None,
            softcap=float(softcap) if softcap else None,
            sinks=sinks.detach() if isinstance(sinks, torch.Tensor) else None,
        )
        scale = kwargs.get("scaling")
        head_dim = query.shape[-1]
        self.layers[layer] = LayerAttention(
            float(scale) if scale is not None else head_dim**-0.5, features,
            query.shape[1], key.shape[1], head_dim)
        positions = torch.arange(query.shape[2], device=query.device)[None, :]
        seen = visible(positions, key.shape[2], features.sliding_window)
        return attend(query, key, value, seen, self.layers[layer].scale, features)

    def attend(self, module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor,
               value: torch.Tensor) -> torch.Tensor:
        """``query [1, H, T, D]``, ``key``/``value [1, KVH, T, D]`` of the step's tokens;
        returns ``[1, T, H, D]``."""
        assert self.step is not None, "TransformersModel.forward sets the step"
        meta, kv_caches = self.step
        layer: int = module.layer_idx  # type: ignore[assignment]
        spec = self.layers[layer]
        tokens = query.shape[2]
        q = query[0].transpose(0, 1).contiguous()
        kv = torch.stack((key[0].transpose(0, 1), value[0].transpose(0, 1)), dim=1)
        if spec.features.plain:
            out = meta.forward(layer, q, kv, kv_caches[layer], spec.scale)
        else:
            forward_features = getattr(meta, "forward_features", None)
            if forward_features is None:
                raise RuntimeError(f"the attention backend {type(meta).__name__} cannot run "
                                   f"{spec.features.describe()}")
            out = forward_features(layer, q, kv, kv_caches[layer], spec.scale, spec.features)
        return out.view(1, tokens, spec.heads, spec.head_dim)


def _vrs_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor,
                   value: torch.Tensor, attention_mask: torch.Tensor | None,
                   **kwargs: Any) -> tuple[torch.Tensor, None]:
    """The attention function transformers calls for ``attn_implementation="vrs"``."""
    router: _Router | None = getattr(module, "_vrs_router", None)
    if router is None:
        raise RuntimeError(f"{type(module).__name__} was called with vrs's attention outside "
                           "a vrs engine")
    if router.probing:
        out = router.probe(module, query, key, value, kwargs)
        return out.transpose(1, 2), None
    return router.attend(module, query, key, value), None


def _weight_name(key: Any) -> str:
    """A key of transformers' loading info: a name, or (name, checkpoint shape, model
    shape) for a mismatched one."""
    if isinstance(key, tuple) and len(key) == 3:
        return f"{key[0]}: {list(key[1])} in the checkpoint, {list(key[2])} in the model"
    return str(key)


def _register() -> None:
    from transformers import AttentionInterface

    AttentionInterface.register(ATTN_IMPLEMENTATION, _vrs_attention)


class TransformersModel:
    """A transformers ``*ForCausalLM`` serving as a vrs ``Model``."""

    def __init__(self, model_dir: Path, hf_config: dict[str, Any], dtype: torch.dtype,
                 device: torch.device,
                 prepare: Callable[[torch.nn.Module, Any], None] | None = None) -> None:
        """``prepare(decoder, config)`` runs once the weights are loaded, before the
        probe: tensor parallel splits the layers there (engine/runtime/parallel/)."""
        _register()
        cls = model_class(hf_config)
        self.dtype = dtype
        self.device = device
        try:
            self.hf, info = cls.from_pretrained(str(model_dir), dtype=dtype,
                                                attn_implementation=ATTN_IMPLEMENTATION,
                                                trust_remote_code=False,
                                                # reported in info, refused below
                                                ignore_mismatched_sizes=True,
                                                output_loading_info=True)
        except (OSError, ValueError, RuntimeError) as exc:
            raise ModelLoadError(f"transformers could not load {model_dir} as {cls.__name__}: "
                                 f"{exc}") from exc
        # Missing or mismatched: transformers would fill them with random weights;
        # unexpected: the checkpoint has parts (biases, say) the class would ignore.
        for kind in ("missing_keys", "mismatched_keys", "unexpected_keys"):
            if info.get(kind):
                names = ", ".join(sorted(_weight_name(k) for k in info[kind])[:5])
                raise ModelLoadError(f"the checkpoint in {model_dir} does not fit "
                                     f"{cls.__name__} ({kind.replace('_', ' ')}: {names})")
        self.hf.to(device).eval().requires_grad_(False)
        text = self.hf.config.get_text_config()
        self.logit_scale = float(getattr(text, "logit_scale", None) or 1.0)
        if getattr(text, "logits_scaling", None):  # Granite divides
            self.logit_scale /= float(text.logits_scaling)
        softcap = getattr(text, "final_logit_softcapping", None)
        self.final_softcap = float(softcap) if softcap else None
        self.decoder = self.hf.get_decoder()
        if prepare is not None:
            prepare(self.decoder, self.hf.config)
        self.lm_head = self.hf.get_output_embeddings()
        if self.lm_head is None:
            raise ModelLoadError(f"{cls.__name__} has no output embeddings (LM head)")
        self.router = _Router()
        for module in self.hf.modules():
            if hasattr(module, "layer_idx"):
                module._vrs_router = self.router
        self._probe(text)
        shapes = {(a.kv_heads, a.head_dim) for a in self.router.layers.values()}
        if len(shapes) != 1:
            raise ModelLoadError(f"{cls.__name__}'s layers have different KV head shapes "
                                 f"{sorted(shapes)}; the paged cache needs one")
        ((kv_heads, head_dim),) = shapes
        self.config = TransformersShape(
            architecture=cls.__name__,
            vocab_size=int(text.vocab_size),
            num_layers=len(self.router.layers),
            num_kv_heads=kv_heads,
            head_dim=head_dim,
            max_position_embeddings=int(getattr(text, "max_position_embeddings", 2048)),
        )
        self.linear_backend, self.linear_reason = pack_linears(self.hf, device, dtype)
        self.lm_head = self.hf.get_output_embeddings()  # packed too

    @property
    def features(self) -> dict[int, LayerFeatures]:
        return {i: a.features for i, a in sorted(self.router.layers.items())}

    def feature_summary(self) -> str | None:
        """What the layers ask of attention beyond plain causal softmax, with the
        layers that ask it (``"sliding window 4 (layers 0, 2)"``); None: nothing."""
        asks: dict[str, list[int]] = {}
        for index, layer in sorted(self.router.layers.items()):
            if not layer.features.plain:
                asks.setdefault(layer.features.describe(), []).append(index)
        if not asks:
            return None
        return "; ".join(f"{what} (layers {', '.join(map(str, layers))})"
                         for what, layers in asks.items())

    def _probe(self, text: Any) -> None:
        """One forward over a few tokens with the recording attention; its logits
        against ``compute_logits``."""
        ids = torch.arange(1, _PROBE_TOKENS + 1, device=self.device)[None, :] % text.vocab_size
        positions = torch.arange(_PROBE_TOKENS, device=self.device)[None, :]
        self.router.probing = True
        try:
            with torch.inference_mode():
                out = self.hf(input_ids=ids, position_ids=positions, use_cache=False)
                hidden = self.decoder(input_ids=ids, position_ids=positions,
                                      use_cache=False).last_hidden_state
                got = self.compute_logits(hidden[0])
        finally:
            self.router.probing = False
        layers = getattr(text, "num_hidden_layers", None)
        if layers is not None and len(self.router.layers) != layers:
            raise ModelLoadError(f"{len(self.router.layers)} of {layers} layers called "
                                 "attention with a layer_idx; the backend cannot cache the rest")
        want = out.logits[0].float()
        tol = 1e-3 if self.dtype == torch.float32 else 5e-2
        if not torch.allclose(got, want, atol=tol * float(want.abs().max()) + tol, rtol=tol):
            raise ModelLoadError(
                f"{type(self.hf).__name__} transforms its logits in a way the transformers "
                "backend does not reproduce (it knows the LM head, logit_scale, "
                "logits_scaling and final_logit_softcapping)")

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor,
                meta: AttentionMetadata, kv_caches: list[torch.Tensor]) -> torch.Tensor:
        """Hidden states ``[T, hidden]`` after the final norm."""
        self.router.step = (meta, kv_caches)
        try:
            out = self.decoder(input_ids=input_ids[None, :], position_ids=positions[None, :],
                               use_cache=False)
        finally:
            self.router.step = None
        hidden: torch.Tensor = out.last_hidden_state[0]
        return hidden

    def weight_bytes(self) -> int:
        return module_weight_bytes(self.hf)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.lm_head(hidden).float()
        if self.logit_scale != 1.0:
            logits = logits * self.logit_scale
        if self.final_softcap is not None:
            logits = torch.tanh(logits / self.final_softcap) * self.final_softcap
        return logits

