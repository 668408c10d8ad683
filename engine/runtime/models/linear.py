"""transformers' ``nn.Linear`` layers put on the decoder's CPU matmul.

The encoders (engine/runtime/pooling/encoder.py) and the transformers decoder backend
(engine/runtime/models/transformers_model.py) run transformers' own modules; their
linears are swapped for ``PackedLinear`` so they take the matmul ``pick_linear`` chooses
for vrs's own decoder (oneDNN with the weight packed once, on CPU).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from engine.runtime.models.base import tensor_bytes
from engine.runtime.models.decoder import Linear, pick_linear


class PackedLinear(torch.nn.Module):
    """A transformers ``nn.Linear`` on the decoder's CPU matmul (``pick_linear``: oneDNN
    with the weight packed once), over any leading dimensions."""

    def __init__(self, linear: torch.nn.Linear, matmul: Linear,
                 pack: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.weight = pack(linear.weight.detach())
        self.bias = None if linear.bias is None else linear.bias.detach()
        self.matmul = matmul
        self.out_features = linear.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1])
        return self.matmul(rows, self.weight, self.bias).reshape(*x.shape[:-1],
                                                                 self.out_features)


def module_weight_bytes(model: torch.nn.Module) -> int:
    """Bytes of ``model``'s parameters and buffers, packed linears' weights included."""
    tensors: list[torch.Tensor | None] = []
    for module in model.modules():
        tensors.extend(module.parameters(recurse=False))
        tensors.extend(module.buffers(recurse=False))
        if isinstance(module, PackedLinear):  # its weight is no Parameter
            tensors.extend((module.weight, module.bias))
    return tensor_bytes(tensors)


def pack_linears(model: torch.nn.Module, device: torch.device,
                 dtype: torch.dtype) -> tuple[str, str]:
    """Put every ``nn.Linear`` of ``model`` on the CPU matmul ``pick_linear`` chooses
    (``VRS_CPU_MATMUL`` as for the decoder); returns the backend's name and the reason
    for the log."""
    backend = pick_linear(device, dtype)
    if backend.name != "torch":
        for module in list(model.modules()):
            for name, child in list(module.named_children()):
                if isinstance(child, torch.nn.Linear):
                    setattr(module, name, PackedLinear(child, backend.linear, backend.pack))
    return backend.name, backend.reason
