"""Which attention backend an engine uses: chosen once, from the device and the config.

``VRS_ATTENTION`` overrides the choice (``resident``, ``sdpa`` or ``flex``; ``auto`` is the
default: resident K/V on the CPU, gather + SDPA elsewhere),
as ``VRS_CPU_MATMUL`` does for the matmuls, so that the two can be compared.
"""

from __future__ import annotations

import logging
import os

import torch

from engine.runtime.attention.base import AttentionBackend
from engine.runtime.attention.resident import ResidentBackend
from engine.runtime.attention.sdpa import SdpaBackend

logger = logging.getLogger("vrs.engine")

CHOICES = ("auto", "resident", "sdpa", "flex")


def select_backend(device: torch.device, enforce_eager: bool,
                   features: str | None = None) -> AttentionBackend:
    """The backend for this engine; the choice and the reason are logged. ``features``:
    what the model's layers ask beyond plain causal attention (a sliding window,
    soft-capping, sinks; engine/runtime/attention/features.py), which only the gather +
    SDPA backend computes."""
    wanted = os.environ.get("VRS_ATTENTION", "auto")
    if wanted not in CHOICES:
        raise ValueError(f"VRS_ATTENTION={wanted!r}; allowed: {', '.join(CHOICES)}")
    if features is not None:
        if wanted not in ("auto", "sdpa"):
            raise ValueError(f"VRS_ATTENTION={wanted} cannot compute what this model's "
                             f"layers ask: {features}; use sdpa or auto")
        backend: AttentionBackend = SdpaBackend(device)
        logger.info("attention backend: %s (the layers ask for %s)", backend.name, features)
        return backend
    backend, reason = _choose(wanted, device, enforce_eager)
    logger.info("attention backend: %s (%s)", backend.name, reason)
    return backend


def _choose(
    wanted: str, device: torch.device, enforce_eager: bool
) -> tuple[AttentionBackend, str]:
    if wanted == "sdpa":
        return SdpaBackend(device), "VRS_ATTENTION=sdpa"
    if wanted == "resident":
        if device.type != "cpu":
            raise ValueError(
                f"VRS_ATTENTION=resident is only measured for the CPU, not {device.type}"
            )
        return ResidentBackend(device), "VRS_ATTENTION=resident"
    if wanted == "flex":
        if device.type != "cpu":
            raise ValueError(
                f"VRS_ATTENTION=flex is only built and measured for the CPU, not {device.type}"
            )
        if enforce_eager:
            return SdpaBackend(device), "VRS_ATTENTION=flex, but enforce_eager: flex needs compile"
        from engine.runtime.attention.flex import FlexBackend

        return FlexBackend(device, compiled=True), "VRS_ATTENTION=flex"
    if device.type == "cpu":
        return ResidentBackend(device), "decodes read resident K/V rows: no per-step gather"
    return SdpaBackend(device), f"today's {device.type} path (no FlashInfer backend yet)"


def backend_named(name: str, device: torch.device) -> AttentionBackend:
    """The backend another rank chose, by its ``name`` (a tensor-parallel worker builds
    the same backend as rank 0)."""
    if name == "sdpa":
        return SdpaBackend(device)
    if name == "resident":
        return ResidentBackend(device)
    if name == "flex":
        from engine.runtime.attention.flex import FlexBackend

        return FlexBackend(device, compiled=True)
    raise ValueError(f"unknown attention backend {name!r}; known: sdpa, resident, flex")
