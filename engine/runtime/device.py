"""Where and in which dtype the model runs: ``auto`` resolved, impossible choices refused.

dtype ``auto`` is bfloat16 on CUDA. On CPU it is bfloat16 only where the CPU computes
bf16 natively (AMX ``amx_bf16`` or AVX-512 ``avx512_bf16``, read from the kernel's CPU
flags at start-up) and torch has oneDNN to use them; anywhere else bf16 matmuls are
emulated and slower than fp32, so ``auto`` is float32 there.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from engine.config import ConfigError

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# CPU flags (as /proc/cpuinfo names them) that make bf16 matmuls native, best first.
BF16_CPU_FLAGS = ("amx_bf16", "avx512_bf16")
CPUINFO = Path("/proc/cpuinfo")


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


def cpu_flags(cpuinfo: Path = CPUINFO) -> frozenset[str]:
    """The CPU's feature flags from ``/proc/cpuinfo`` (empty where there is no such file)."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


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
    return auto_cpu_dtype(cpu_flags(), torch.backends.mkldnn.is_available())


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    return choose_dtype(name, device).dtype
