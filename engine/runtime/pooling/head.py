"""From hidden states to a pooling request's answer, as vLLM's pooler heads do
(vllm/model_executor/layers/pooler/seqwise/heads.py): pooling, the sentence-transformers
Dense layers, Matryoshka truncation, normalization; the class-score activations; and
why a pooling request cannot be served.

Order for embed: pool -> Dense layers -> keep the first ``dimensions`` values -> L2
normalize. That is vLLM's order, and sentence-transformers'
``encode(truncate_dim=d, normalize_embeddings=True)``. (sentence-transformers' Normalize
*module* runs before its ``truncate_dim`` slice, so a plain ``encode(truncate_dim=d)`` of a
model with a Normalize module gives the truncated unit vector, not re-normalized; like
vLLM, this engine re-normalizes after truncating.) The head computes in float32.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file

from engine import protocol as p
from engine.runtime.loader import ModelLoadError
from engine.runtime.pooling.spec import DenseSpec, PoolingSpec

_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "identity": lambda x: x,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "relu": torch.relu,
    "gelu": F.gelu,
    "silu": F.silu,
}
_TASK_PARAMETERS = {
    p.PoolingTask.EMBED.value: ("dimensions", "normalize"),
    p.PoolingTask.CLASSIFY.value: ("use_activation", "token_type_start"),
    p.PoolingTask.SCORE.value: ("use_activation", "token_type_start"),
}


def pool(hidden: torch.Tensor, method: str) -> torch.Tensor:
    """One sequence's hidden states ``[T, H]`` pooled to float32 ``[H]``: the first token
    (``cls``), the mean over all tokens (``mean``, accumulated in float32) or the last
    token (``last``)."""
    if hidden.dim() != 2 or hidden.shape[0] == 0:
        raise ValueError(f"pool needs hidden states [T>0, H], got {tuple(hidden.shape)}")
    if method == "cls":
        return hidden[0].float()
    if method == "last":
        return hidden[-1].float()
    if method == "mean":
        return hidden.float().mean(dim=0)
    raise ValueError(f"unknown pooling method {method!r}")


def pool_padded(hidden: torch.Tensor, lengths: torch.Tensor, method: str) -> torch.Tensor:
    """A right-padded batch ``[B, T, H]`` (row b's tokens are ``[:lengths[b]]``) pooled to
    ``[B, H]`` float32, as sentence-transformers' Pooling module does on a padded batch."""
    if method == "cls":
        return hidden[:, 0].float()
    rows = torch.arange(hidden.shape[0], device=hidden.device)
    if method == "last":
        return hidden[rows, lengths - 1].float()
    if method == "mean":
        positions = torch.arange(hidden.shape[1], device=hidden.device)
        mask = (positions[None, :] < lengths[:, None]).to(torch.float32)
        summed = torch.einsum("bth,bt->bh", hidden.float(), mask)
        return summed / lengths.to(torch.float32).clamp(min=1.0)[:, None]
    raise ValueError(f"unknown pooling method {method!r}")


class _Dense:
    """One sentence-transformers Dense layer, float32."""

    def __init__(self, spec: DenseSpec, device: torch.device) -> None:
        weights = _load_dense_weights(spec.dir)
        self.weight = _take(weights, spec, "linear.weight", (spec.out_features, spec.in_features))
        self.bias = (_take(weights, spec, "linear.bias", (spec.out_features,))
                     if spec.bias else None)
        self.residual: torch.Tensor | None = None
        self.identity_residual = spec.residual and spec.in_features == spec.out_features
        if spec.residual and not self.identity_residual:
            self.residual = _take(weights, spec, "residual.weight",
                                  (spec.out_features, spec.in_features))
        self.activation = _ACTIVATIONS[spec.activation]
        self.weight = self.weight.to(device)
        self.bias = None if self.bias is None else self.bias.to(device)
        self.residual = None if self.residual is None else self.residual.to(device)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        out = self.activation(F.linear(x, self.weight, self.bias))
        if self.identity_residual:
            out = out + x
        elif self.residual is not None:
            out = out + F.linear(x, self.residual)
        return out


def _load_dense_weights(dense_dir: Path) -> dict[str, torch.Tensor]:
    safetensors = dense_dir / "model.safetensors"
    if safetensors.is_file():
        return load_file(str(safetensors))
    legacy = dense_dir / "pytorch_model.bin"
    if legacy.is_file():
        loaded = torch.load(legacy, map_location="cpu", weights_only=True)
        if isinstance(loaded, dict):
            return {str(k): v for k, v in loaded.items() if isinstance(v, torch.Tensor)}
    raise ModelLoadError(f"{dense_dir.name}: no model.safetensors or pytorch_model.bin weights")


def _take(weights: dict[str, torch.Tensor], spec: DenseSpec, key: str,
          shape: tuple[int, ...]) -> torch.Tensor:
    tensor = weights.get(key)
    if tensor is None:
        raise ModelLoadError(f"{spec.dir.name}: weight {key} is missing")
    if tuple(tensor.shape) != shape:
        raise ModelLoadError(f"{spec.dir.name}: {key} has shape {tuple(tensor.shape)}, "
                             f"config.json says {shape}")
    return tensor.to(torch.float32)


class EmbedHead:
    """Pooled vectors ``[B, H]`` -> one embedding per row, per its PoolingParams."""

    def __init__(self, spec: PoolingSpec, device: torch.device | None = None) -> None:
        self.spec = spec
        self.layers = [_Dense(dense, device or torch.device("cpu")) for dense in spec.dense]

    def __call__(self, pooled: torch.Tensor,
                 params: Sequence[p.PoolingParams]) -> list[list[float]]:
        if pooled.shape[0] != len(params):
            raise ValueError(f"{pooled.shape[0]} pooled rows for {len(params)} requests")
        x = pooled.to(torch.float32)
        for layer in self.layers:
            x = layer(x)
        normalize = [self.spec.normalize if q.normalize is None else q.normalize for q in params]
        dims = [q.dimensions for q in params]
        if all(d is None for d in dims):
            if all(normalize):
                x = F.normalize(x, p=2.0, dim=-1)
            elif any(normalize):
                x = torch.where(torch.tensor(normalize, device=x.device)[:, None],
                                F.normalize(x, p=2.0, dim=-1), x)
            return x.cpu().tolist()
        rows = x.cpu()
        out: list[list[float]] = []
        for row, d, norm in zip(rows, dims, normalize, strict=True):
            vec = row if d is None else row[:d]
            out.append((F.normalize(vec, p=2.0, dim=-1) if norm else vec).tolist())
        return out


def classify_output(logits: torch.Tensor, params: Sequence[p.PoolingParams],
                    activation: str = "auto") -> list[list[float]]:
    """Class logits ``[B, C]`` -> each row's scores: the spec's ``score_activation``
    ("auto": softmax over the classes, sigmoid for one class) unless the request's
    ``use_activation`` is False (the raw logits). float32."""
    if logits.shape[0] != len(params):
        raise ValueError(f"{logits.shape[0]} logit rows for {len(params)} requests")
    x = logits.to(torch.float32)
    if activation == "auto":
        active = torch.sigmoid(x) if x.shape[-1] == 1 else torch.softmax(x, dim=-1)
    elif activation in _ACTIVATIONS:
        active = _ACTIVATIONS[activation](x)
    else:
        raise ValueError(f"unknown score activation {activation!r}")
    use = [q.use_activation is not False for q in params]
    if all(use):
        return active.cpu().tolist()
    if not any(use):
        return x.cpu().tolist()
    return torch.where(torch.tensor(use, device=x.device)[:, None], active, x).cpu().tolist()


def request_error(spec: PoolingSpec, params: p.PoolingParams, num_prompt_tokens: int,
                  model_name: str = "") -> str | None:
    """Why this pooling request cannot be served by this model (vLLM's messages, from
    vllm/v1/engine/input_processor.py and vllm/pooling_params.py), or None."""
    if params.task not in spec.tasks:
        return f"Unsupported task: {params.task!r} Supported tasks: {list(spec.tasks)}"
    if num_prompt_tokens < 1:
        return "the prompt is empty"
    valid = _TASK_PARAMETERS[params.task]
    given = [name for name in ("dimensions", "normalize", "use_activation", "token_type_start")
             if getattr(params, name) is not None]
    invalid = [name for name in given if name not in valid]
    if invalid:
        return (f"Task {params.task!r} only supports {list(valid)} parameters, does not "
                f"support {invalid} parameters")
    name = model_name or "this model"
    if params.dimensions is not None:
        dimensions = params.dimensions
        if spec.matryoshka_dims is None:
            return (f"Model {name!r} does not support Matryoshka embeddings; dimensions "
                    f"must be unset (received dimensions={dimensions}).")
        if not 1 <= dimensions <= spec.embedding_size:
            return (f"Model {name!r} only supports dimensions in range "
                    f"[1, {spec.embedding_size}], got {dimensions}.")
        if spec.matryoshka_dims and dimensions not in spec.matryoshka_dims:
            return (f"Model {name!r} only supports Matryoshka dimensions "
                    f"{list(spec.matryoshka_dims)}, got {dimensions}.")
    start = params.token_type_start
    if start is not None and not 0 <= start <= num_prompt_tokens:
        return (f"token_type_start={start} is out of range; allowed: 0..{num_prompt_tokens} "
                f"(the prompt's length)")
    return None
