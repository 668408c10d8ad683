"""Where and in which dtype the model runs: ``auto`` resolved, impossible choices refused.

dtype ``auto`` is bfloat16 on CUDA. On CPU it is bfloat16 only where the CPU computes
bf16 natively (AMX ``amx_bf16`` or AVX-512 ``avx512_bf16``, read from the kernel's CPU
flags at start-up) and torch has oneDNN to use them; anywhere else bf16 matmuls are
emulated and slower than fp32, so ``auto`` is float32 there.

``VRS_CPU_MASK`` (a comma list of ``bf16``, ``amx``, ``avx512``) hides those CPU features
from this detection, so the paths of an older CPU run on any machine (docs/internals.md,
"Testing").
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from engine.config import ConfigError

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# CPU flags (as /proc/cpuinfo names them) that make bf16 matmuls native, best first.
BF16_CPU_FLAGS = ("amx_bf16", "avx512_bf16")
CPUINFO = Path("/proc/cpuinfo")
# VRS_CPU_MASK: each name hides the CPU flags it matches from cpu_flags().
CPU_MASK_ENV = "VRS_CPU_MASK"
CPU_MASKS: dict[str, Callable[[str], bool]] = {
    "bf16": lambda flag: flag in BF16_CPU_FLAGS,
    "amx": lambda flag: flag.startswith("amx"),
    "avx512": lambda flag: flag.startswith("avx512"),
}


@dataclass(frozen=True)
class DTypeChoice:
    """The dtype the model runs in, and why (logged at start-up)."""

    dtype: torch.dtype
    reason: str

    @property
    def name(self) -> str:
        return str(self.dtype).removeprefix("torch.")


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("invalid engine config: device='cuda' but no CUDA device is available")
    return torch.device(name)


def cpu_mask(value: str | None = None) -> frozenset[str]:
    """The feature names ``VRS_CPU_MASK`` hides (``value`` in its place when given)."""
    if value is None:
        value = os.environ.get(CPU_MASK_ENV, "")
    names = frozenset(name.strip() for name in value.split(",") if name.strip())
    unknown = sorted(names - CPU_MASKS.keys())
    if unknown:
        raise ConfigError(
            f"{CPU_MASK_ENV}={value!r}: unknown {', '.join(unknown)}; "
            f"allowed: {', '.join(CPU_MASKS)} (comma-separated)"
        )
    return names


def cpu_flags(cpuinfo: Path = CPUINFO, mask: frozenset[str] | None = None) -> frozenset[str]:
    """The CPU's feature flags from ``/proc/cpuinfo`` (empty where there is no such file),
    less those ``mask`` (default: ``VRS_CPU_MASK``) hides."""
    hidden = [CPU_MASKS[name] for name in (cpu_mask() if mask is None else mask)]
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(flag for flag in value.split()
                             if not any(hides(flag) for hides in hidden))
    return frozenset()


def noting_mask(reason: str) -> str:
    """``reason``, with the ``VRS_CPU_MASK`` in force when one is (for the start-up log)."""
    hidden = cpu_mask()
    return f"{reason}; {CPU_MASK_ENV} hides {','.join(sorted(hidden))}" if hidden else reason


def native_bf16() -> str | None:
    """The flag that makes this CPU compute bf16 natively (after ``VRS_CPU_MASK``), or None."""
    return cpu_bf16_flag(cpu_flags())


def cpu_bf16_flag(flags: frozenset[str]) -> str | None:
    """The first flag of ``BF16_CPU_FLAGS`` the CPU has, or None."""
    return next((flag for flag in BF16_CPU_FLAGS if flag in flags), None)


def auto_cpu_dtype(flags: frozenset[str], onednn: bool) -> DTypeChoice:
    """``auto`` on CPU: bf16 where the CPU has native bf16 and torch can use it."""
    flag = cpu_bf16_flag(flags)
    if flag is None:
        if not flags:
            return DTypeChoice(torch.float32, "CPU flags unknown (no /proc/cpuinfo flags)")
        wanted = " or ".join(BF16_CPU_FLAGS)
        return DTypeChoice(torch.float32, f"CPU has neither {wanted}")
    if not onednn:
        return DTypeChoice(torch.float32, f"CPU has {flag} but torch lacks oneDNN (mkldnn)")
    return DTypeChoice(torch.bfloat16, f"CPU has {flag}")


def choose_dtype(name: str, device: torch.device) -> DTypeChoice:
    """Resolve ``name`` (``auto`` or a dtype name) for ``device``, with the reason."""
    if name != "auto":
        if name not in _DTYPES:
            raise ConfigError(
                f"invalid engine config: dtype={name!r}; allowed: auto, {', '.join(_DTYPES)}"
            )
        return DTypeChoice(_DTYPES[name], "as configured")
    if device.type == "cuda":
        return DTypeChoice(torch.bfloat16, "CUDA device")
    if device.type != "cpu":
        return DTypeChoice(torch.float32, f"device {device.type!r}")
    choice = auto_cpu_dtype(cpu_flags(), torch.backends.mkldnn.is_available())
    return DTypeChoice(choice.dtype, noting_mask(choice.reason))


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    return choose_dtype(name, device).dtype
