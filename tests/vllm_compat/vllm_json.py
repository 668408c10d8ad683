"""vLLM wire values as JSON, in the shape the Rust types (rust/wire/src/vllm/) serialize to.

* msgspec structs, dataclasses and named tuples: an object keyed by field name (private
  ``_fields`` included: the Rust side renames to them);
* dicts: ``{"__map__": [[key, value], ...]}`` in insertion order (the wire order);
* sets: a list in iteration order (the wire order); tuples: a list; enums: their value;
* numpy arrays and torch tensors: ``{"dtype": ..., "shape": [...], "data": [bytes...]}``
  with the dtype string exactly as vLLM's encoder writes it (numpy ``dtype.str``, torch
  dtype name);
* bytes: ``{"__bytes__": [...]}``;
* ``UtilityResult``: ``{"type_info": None, "value": ...}``.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

import msgspec
import numpy as np
import torch
from vllm.v1.serial_utils import UtilityResult


def to_json(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        if isinstance(value, enum.Enum):
            return to_json(value.value)
        return value
    if isinstance(value, enum.Enum):
        return to_json(value.value)
    if isinstance(value, np.ndarray):
        return {"dtype": value.dtype.str, "shape": list(value.shape), "data": list(value.tobytes())}
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).removeprefix("torch.")
        raw = value.contiguous().view(torch.uint8).numpy().tobytes() if value.numel() else b""
        return {"dtype": dtype, "shape": list(value.shape), "data": list(raw)}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"__bytes__": list(bytes(value))}
    if isinstance(value, UtilityResult):
        # Written as (type info, value); type info is None unless pickling is allowed.
        return {"type_info": None, "value": to_json(value.result)}
    if isinstance(value, msgspec.Struct):
        return {f.name: to_json(getattr(value, f.name)) for f in msgspec.structs.fields(value)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return {name: to_json(getattr(value, name)) for name in value._fields}
    if isinstance(value, dict):
        return {"__map__": [[to_json(k), to_json(v)] for k, v in value.items()]}
    if isinstance(value, (set, frozenset)):
        return [to_json(v) for v in value]  # iteration order: the order on the wire
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    raise TypeError(f"no JSON mapping for {type(value).__name__}")
