"""The decoder shared by Llama, Qwen2 and Qwen3: pre-norm blocks, RoPE, GQA, SwiGLU.

Families differ only in ``DecoderOptions`` (biases, per-head q/k norm). Weights come
from Hugging Face checkpoint names; q/k/v and gate/up are fused into one matmul each.
The forward runs over a flat batch of tokens ``[T]`` with paged attention.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from engine.runtime.attention.base import AttentionMetadata
from engine.runtime.device import BF16_CPU_FLAGS, native_bf16, noting_mask
from engine.runtime.loader import ModelLoadError
from engine.runtime.models.base import tensor_bytes

# RoPE types whose frequencies do not depend on the sequence length.
STATIC_ROPE_TYPES = ("default", "linear", "llama3", "yarn")

Linear = Callable[[torch.Tensor, torch.Tensor, "torch.Tensor | None"], torch.Tensor]
# Attention of one layer: (layer index, q [T, heads, head_dim], kv [T, 2, kv_heads, head_dim])
# -> [T, heads * head_dim]. The layers call it and know nothing of the cache or the step's
# metadata, so a compiled forward can keep it outside its graph (engine/runtime/compile.py).
Attend = Callable[[int, torch.Tensor, torch.Tensor], torch.Tensor]


def row_bucket(rows: int) -> int:
    """Rows padded to a few sizes: 1, 2, 4, 8, 16, then multiples of 16, then of 128."""
    if rows <= 16:
        return 1 << (rows - 1).bit_length()
    if rows <= 512:
        return (rows + 15) // 16 * 16
    return (rows + 127) // 128 * 128


def _onednn_linear(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """oneDNN matmul of ``x [rows, in]``; rows are padded to a bucket size.

    oneDNN builds (and caches) a kernel per input shape, which costs milliseconds; with
    continuous batching the row count changes every step, so only a few sizes are used.
    ``weight`` is a plain tensor or one packed by ``_pack_weight``.
    """
    rows = x.shape[0]
    padded = row_bucket(rows)
    # torch.ops.* are typed Any; the annotated locals say what these return.
    if padded != rows:
        x = F.pad(x, (0, 0, 0, padded - rows))
        out: torch.Tensor = torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")
        return out[:rows]
    out = torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")
    return out


# The row count oneDNN picks a packed weight layout for: a decode step's batch.
PACK_ROWS = 64


def _pack_weight(weight: torch.Tensor) -> torch.Tensor:
    """``weight`` reordered once into oneDNN's blocked layout (an opaque mkldnn tensor)."""
    packed: torch.Tensor = torch.ops.mkldnn._reorder_linear_weight(weight, PACK_ROWS)
    return packed


def _same(weight: torch.Tensor) -> torch.Tensor:
    return weight


CPU_MATMULS = ("auto", "torch", "onednn", "onednn-packed")
# What ``auto`` means on CPU, for fp32 and bf16 alike (measured: see pick_linear).
AUTO_CPU_MATMUL = "onednn-packed"


@dataclass(frozen=True)
class LinearBackend:
    """The matmul of every linear, the form its weights are kept in, and why it was chosen
    (logged at start-up)."""

    name: str
    linear: Linear
    pack: Callable[[torch.Tensor], torch.Tensor]
    reason: str


def _works(backend: LinearBackend, dtype: torch.dtype) -> bool:
    """The backend runs here and agrees with ``F.linear`` (a torch without it fails)."""
    try:
        x, w, b = (torch.randn(3, 16).to(dtype), torch.randn(8, 16).to(dtype),
                   torch.randn(8).to(dtype))
        got = backend.linear(x, backend.pack(w), b)
    except (RuntimeError, AttributeError):
        return False
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    return torch.allclose(got.float(), F.linear(x, w, b).float(), atol=tol, rtol=tol)


def _plain(reason: str) -> LinearBackend:
    return LinearBackend("torch", F.linear, _same, reason)


def pick_linear(
    device: torch.device, dtype: torch.dtype, wanted: str | None = None
) -> LinearBackend:
    """The matmul for this device and dtype: ``wanted``, else ``VRS_CPU_MATMUL``, else auto.

    On CPU ``auto`` is oneDNN with weights packed once at load (``onednn-packed``), for
    fp32 and bf16 alike: torch's default fp32 CPU GEMM (MKL) is 2-3x slower than oneDNN
    on AMD CPUs for the skinny matrices of a decode step, and the packed weight saves
    oneDNN a reorder per call (benchmarks/cpu_linear.py measures the options).
    ``torch`` keeps ``F.linear`` (e.g. to compare); ``onednn`` is oneDNN on plain weights.
    bf16 takes oneDNN only where the CPU computes bf16 natively (``native_bf16()``, the
    detection dtype ``auto`` uses); elsewhere, and where a oneDNN backend fails its start-up
    check against ``F.linear``, it is ``F.linear``, with the reason.
    On CUDA, and where torch lacks oneDNN, it is always ``F.linear``. inductor
    (torch.compile) cannot trace ``_linear_pointwise`` on a weight that is a graph input,
    packed or not, so the compiled forward calls it as an opaque op (engine/runtime/compile.py).
    """
    if wanted is None:
        wanted = os.environ.get("VRS_CPU_MATMUL", "auto")
    if wanted not in CPU_MATMULS:
        raise ValueError(f"VRS_CPU_MATMUL={wanted!r}; allowed: {', '.join(CPU_MATMULS)}")
    if device.type != "cpu":
        return _plain(f"device {device.type}")
    if wanted == "torch":
        return _plain("as configured")
    if not torch.backends.mkldnn.is_available():
        return _plain("torch lacks oneDNN (mkldnn)")
    if dtype not in (torch.float32, torch.bfloat16):
        return _plain(f"oneDNN is used for float32 and bfloat16, not {dtype}")
    if dtype == torch.bfloat16 and native_bf16() is None:
        flags = " nor ".join(BF16_CPU_FLAGS)
        return _plain(noting_mask(f"CPU has no native bf16 (neither {flags})"))
    if wanted == "auto":
        wanted = AUTO_CPU_MATMUL
    pack = _pack_weight if wanted == "onednn-packed" else _same
    backend = LinearBackend(wanted, _onednn_linear, pack, "oneDNN")
    if _works(backend, dtype):
        return backend
    return _plain(f"oneDNN {wanted} failed its start-up check against F.linear")


@dataclass
class DecoderOptions:
    """What differs between families."""

    qkv_bias: bool
    o_bias: bool
    mlp_bias: bool
    qk_norm: bool


@dataclass
class DecoderConfig:
    architecture: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    max_position_embeddings: int
    tie_word_embeddings: bool
    rope: dict[str, Any]
    options: DecoderOptions

    @classmethod
    def from_hf(cls, cfg: dict[str, Any], options: DecoderOptions) -> DecoderConfig:
        def need(key: str) -> Any:
            if key not in cfg:
                raise ModelLoadError(f"config.json lacks {key!r}")
            return cfg[key]

        hidden = int(need("hidden_size"))
        heads = int(need("num_attention_heads"))
        act = cfg.get("hidden_act", "silu")
        if act != "silu":
            raise ModelLoadError(f"hidden_act={act!r} is not supported (only 'silu')")
        if cfg.get("use_sliding_window"):
            raise ModelLoadError("sliding-window attention (use_sliding_window) is not supported")
        rope = dict(cfg.get("rope_parameters") or cfg.get("rope_scaling") or {})
        rope.setdefault("rope_theta", cfg.get("rope_theta", 10000.0))
        rope_type = rope.get("rope_type", rope.get("type", "default"))
        if rope_type not in STATIC_ROPE_TYPES:
            raise ModelLoadError(
                f"rope type {rope_type!r} is not supported; supported: "
                f"{', '.join(STATIC_ROPE_TYPES)}"
            )
        rope["rope_type"] = rope_type
        return cls(
            architecture=str(cfg.get("architectures", ["?"])[0]),
            vocab_size=int(need("vocab_size")),
            hidden_size=hidden,
            intermediate_size=int(need("intermediate_size")),
            num_layers=int(need("num_hidden_layers")),
            num_heads=heads,
            num_kv_heads=int(cfg.get("num_key_value_heads") or heads),
            head_dim=int(cfg.get("head_dim") or hidden // heads),
            rms_norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
            max_position_embeddings=int(cfg.get("max_position_embeddings", 2048)),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            rope=rope,
            options=options,
        )


def rope_inv_freq(config: DecoderConfig, model_dir: Path | None) -> tuple[torch.Tensor, float]:
    """Inverse frequencies and cos/sin scaling, computed as transformers does."""
    dim = config.head_dim
    rope = config.rope
    base = float(rope["rope_theta"])
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    rope_type = rope["rope_type"]
    if rope_type == "default":
        return inv_freq, 1.0
    if rope_type == "linear":
        return inv_freq / float(rope["factor"]), 1.0
    if rope_type == "llama3":
        factor = float(rope["factor"])
        low, high = float(rope["low_freq_factor"]), float(rope["high_freq_factor"])
        old_len = float(rope["original_max_position_embeddings"])
        low_wavelen, high_wavelen = old_len / low, old_len / high
        wavelen = 2 * math.pi / inv_freq
        scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
        smooth = (old_len / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
        return torch.where(medium, smoothed, scaled), 1.0
    # yarn: defer to transformers' own implementation for exact parity.
    if model_dir is None:
        raise ModelLoadError(f"rope type {rope_type!r} needs the model directory")
    from transformers import AutoConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    hf_config = AutoConfig.from_pretrained(str(model_dir))
    inv, scaling = ROPE_INIT_FUNCTIONS[rope_type](hf_config, torch.device("cpu"))
    return inv.float(), float(scaling)


class _Layer:
    """One layer's fused weights; ``DecoderModel.load_weights`` sets every slot."""

    __slots__ = (
        "input_norm", "qkv_w", "qkv_b", "o_w", "o_b", "qk_norm",
        "post_norm", "gate_up_w", "gate_up_b", "down_w", "down_b",
    )
    input_norm: torch.Tensor
    qkv_w: torch.Tensor
    qkv_b: torch.Tensor | None
    o_w: torch.Tensor
    o_b: torch.Tensor | None
    qk_norm: torch.Tensor | None
    post_norm: torch.Tensor
    gate_up_w: torch.Tensor
    gate_up_b: torch.Tensor | None
    down_w: torch.Tensor
    down_b: torch.Tensor | None


class DecoderModel:
    """Weights and the batched forward of one decoder-only model."""

    def __init__(self, config: DecoderConfig, dtype: torch.dtype, device: torch.device) -> None:
        self.config = config
        self.dtype = dtype
        self.device = device
        self.layers: list[_Layer] = []
        self.embed: torch.Tensor | None = None
        self.final_norm: torch.Tensor | None = None
        self.lm_head: torch.Tensor | None = None
        # A *ForSequenceClassification checkpoint's head ``[num_labels, hidden]``.
        self.score: torch.Tensor | None = None
        # Rows of the LM head a converted yes/no reranker scores with.
        self.lm_rows: torch.Tensor | None = None
        self.cos: torch.Tensor | None = None
        self.sin: torch.Tensor | None = None
        self.scale = config.head_dim**-0.5
        # Tensor parallel: sums a row-parallel projection's partial outputs over the ranks
        # (engine/runtime/parallel/); None: the whole model is here.
        self.reduce: Callable[[torch.Tensor], torch.Tensor] | None = None
        backend = pick_linear(device, dtype)
        self.linear, self.linear_backend = backend.linear, backend.name
        self.linear_reason = backend.reason
        self._pack = backend.pack

    # ------------------------------------------------------------------ loading

    def load_weights(self, weights: dict[str, torch.Tensor], need_lm_head: bool = True,
                     lm_rows: list[int] | None = None) -> None:
        """Take the checkpoint tensors (already on device, in dtype); fuse and check.
        A checkpoint saved from the bare model (``embed_tokens.weight``, no ``model.``
        prefix, as Qwen3-Embedding ships) is read too. ``need_lm_head`` False (a pooling
        model): no LM head is kept, and the checkpoint may lack one; ``lm_rows``: these
        rows of the LM head (or of the tied embeddings) are kept in ``lm_rows``. A
        classification head (``score.weight``) is kept in ``score``."""
        cfg = self.config
        opts = cfg.options
        if "model.embed_tokens.weight" not in weights and "embed_tokens.weight" in weights:
            weights = {(n if n.startswith(("lm_head.", "score.")) else f"model.{n}"): t
                       for n, t in weights.items()}
        self.score = weights.pop("score.weight", None)

        def take(name: str) -> torch.Tensor:
            try:
                return weights.pop(name)
            except KeyError:
                raise ModelLoadError(f"checkpoint lacks weight {name!r}") from None

        def take_opt(name: str, wanted: bool) -> torch.Tensor | None:
            return take(name) if wanted else weights.pop(name, None)

        pack = self._pack
        self.embed = take("model.embed_tokens.weight")
        self.final_norm = take("model.norm.weight")
        if lm_rows is not None:
            rows = weights.get("lm_head.weight", self.embed)
            if "lm_head.weight" not in weights and not cfg.tie_word_embeddings:
                raise ModelLoadError("checkpoint lacks 'lm_head.weight' (its yes/no rows "
                                     "score a converted reranker)")
            self.lm_rows = rows[lm_rows].clone()
        if not need_lm_head:
            weights.pop("lm_head.weight", None)
            self.lm_head = None
        elif "lm_head.weight" in weights:
            self.lm_head = pack(weights.pop("lm_head.weight"))
        elif cfg.tie_word_embeddings:
            self.lm_head = pack(self.embed)
        else:
            raise ModelLoadError("checkpoint lacks 'lm_head.weight' and embeddings are not tied")
        for i in range(cfg.num_layers):
            pre = f"model.layers.{i}."
            layer = _Layer()
            layer.input_norm = take(pre + "input_layernorm.weight")
            layer.post_norm = take(pre + "post_attention_layernorm.weight")
            att = pre + "self_attn."
            q, k, v = (take(f"{att}{n}_proj.weight") for n in "qkv")
            layer.qkv_w = pack(torch.cat([q, k, v], 0).contiguous())
            qb, kb, vb = (take_opt(f"{att}{n}_proj.bias", opts.qkv_bias) for n in "qkv")
            if qb is None:
                layer.qkv_b = None
            elif kb is None or vb is None:
                raise ModelLoadError(f"checkpoint has {att}q_proj.bias but not k_proj's and "
                                     "v_proj's")
            else:
                layer.qkv_b = torch.cat([qb, kb, vb], 0).contiguous()
            layer.o_w = pack(take(att + "o_proj.weight"))
            layer.o_b = take_opt(att + "o_proj.bias", opts.o_bias)
            layer.qk_norm = None
            if opts.qk_norm:  # one [heads + kv_heads, head_dim] weight: q and k in one go
                qn, kn = take(att + "q_norm.weight"), take(att + "k_norm.weight")
                layer.qk_norm = torch.cat([
                    qn.expand(cfg.num_heads, cfg.head_dim),
                    kn.expand(cfg.num_kv_heads, cfg.head_dim),
                ]).contiguous()
            mlp = pre + "mlp."
            gate, up = take(mlp + "gate_proj.weight"), take(mlp + "up_proj.weight")
            layer.gate_up_w = pack(torch.cat([gate, up], 0).contiguous())
            gb = take_opt(mlp + "gate_proj.bias", opts.mlp_bias)
            ub = take_opt(mlp + "up_proj.bias", opts.mlp_bias)
            layer.gate_up_b = None if gb is None or ub is None else torch.cat([gb, ub], 0)
            layer.down_w = pack(take(mlp + "down_proj.weight"))
            layer.down_b = take_opt(mlp + "down_proj.bias", opts.mlp_bias)
            self.layers.append(layer)
        expected = (cfg.num_heads * cfg.head_dim, cfg.hidden_size)
        if tuple(self.layers[0].o_w.shape) != expected[::-1]:
            raise ModelLoadError(
                f"o_proj shape {tuple(self.layers[0].o_w.shape)} does not match config "
                f"(hidden_size={cfg.hidden_size}, heads={cfg.num_heads}, head_dim={cfg.head_dim})"
            )
        leftover = [n for n in weights if "rotary_emb" not in n]
        if leftover:
            raise ModelLoadError(f"unexpected weights in checkpoint: {', '.join(leftover[:5])}")

    def init_rope(self, max_len: int, model_dir: Path | None) -> None:
        inv_freq, scaling = rope_inv_freq(self.config, model_dir)
        positions = torch.arange(max_len, dtype=torch.int64).float()
        freqs = positions[:, None] * inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        self.cos = (emb.cos() * scaling).to(device=self.device, dtype=self.dtype)
        self.sin = (emb.sin() * scaling).to(device=self.device, dtype=self.dtype)

    # ------------------------------------------------------------------ forward

    def _norm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """RMSNorm over the last axis; ``weight`` broadcasts (per-head weights too)."""
        eps = self.config.rms_norm_eps
        if x.dtype == torch.float32:
            if weight.dim() == 1:
                return F.rms_norm(x, (x.shape[-1],), weight, eps)
            return F.rms_norm(x, (x.shape[-1],), None, eps) * weight
        # Half precision: normalise in float32, scale in the model dtype (as HF does).
        normed = F.rms_norm(x.float(), (x.shape[-1],), None, eps)
        return weight * normed.to(x.dtype)

    @staticmethod
    def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x1, x2 = x.chunk(2, dim=-1)
        return x * cos + torch.cat((-x2, x1), dim=-1) * sin

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        meta: AttentionMetadata,
        kv_caches: list[torch.Tensor],
    ) -> torch.Tensor:
        """Hidden states ``[T, hidden]`` after the final norm (eager)."""
        return self.run_layers(input_ids, positions, self.attention(meta, kv_caches), self.linear)

    def attention(self, meta: AttentionMetadata, kv_caches: list[torch.Tensor]) -> Attend:
        """The paged attention of one step: writes this step's K/V, attends over the cache."""
        scale = self.scale

        def attend(index: int, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
            return meta.forward(index, q, kv, kv_caches[index], scale)

        return attend

    def run_layers(
        self, input_ids: torch.Tensor, positions: torch.Tensor, attend: Attend, linear: Linear
    ) -> torch.Tensor:
        """Embedding, the layers and the final norm over a flat batch of tokens ``[T]``."""
        assert self.embed is not None and self.final_norm is not None, "load_weights first"
        assert self.cos is not None and self.sin is not None, "init_rope first"
        cfg = self.config
        num_tokens = input_ids.shape[0]
        heads, kv_heads, head_dim = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        cos = self.cos.index_select(0, positions).unsqueeze(1)
        sin = self.sin.index_select(0, positions).unsqueeze(1)
        h = F.embedding(input_ids, self.embed)
        reduce = self.reduce
        qk_heads = heads + kv_heads
        for index, layer in enumerate(self.layers):
            x = self._norm(h, layer.input_norm)
            qkv = linear(x, layer.qkv_w, layer.qkv_b).view(num_tokens, -1, head_dim)
            qk = qkv[:, :qk_heads]
            if layer.qk_norm is not None:
                qk = self._norm(qk, layer.qk_norm)
            qk = self._rope(qk, cos, sin)
            kv = torch.cat((qk[:, heads:], qkv[:, qk_heads:]), dim=1)
            o = attend(index, qk[:, :heads], kv.view(num_tokens, 2, kv_heads, head_dim))
            o = linear(o, layer.o_w, layer.o_b)
            h = h + (o if reduce is None else reduce(o))
            x = self._norm(h, layer.post_norm)
            gate, up = linear(x, layer.gate_up_w, layer.gate_up_b).chunk(2, dim=-1)
            down = linear(F.silu(gate) * up, layer.down_w, layer.down_b)
            h = h + (down if reduce is None else reduce(down))
        return self._norm(h, self.final_norm)

    def weight_bytes(self) -> int:
        tensors = [self.embed, self.final_norm, self.lm_head, self.score, self.lm_rows]
        for layer in self.layers:
            tensors.extend(getattr(layer, slot) for slot in _Layer.__slots__)
        return tensor_bytes(tensors)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        assert self.lm_head is not None, "load_weights first"
        return self.linear(hidden, self.lm_head, None).float()
