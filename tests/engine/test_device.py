"""dtype ``auto``: bf16 on CPUs with native bf16, fp32 elsewhere, with the reason logged."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch

from engine.config import ConfigError
from engine.runtime.device import (
    DTypeChoice,
    auto_cpu_dtype,
    choose_dtype,
    cpu_bf16_flag,
    cpu_flags,
    cpu_mask,
    native_bf16,
    resolve_dtype,
)
from tests.engine.engine_kit import make_engine

pytestmark = pytest.mark.engine

CPU = torch.device("cpu")
ZEN4 = frozenset({"fpu", "avx2", "avx512f", "avx512bw", "avx512_bf16"})
SAPPHIRE_RAPIDS = frozenset({"avx512f", "avx512_bf16", "amx_tile", "amx_bf16"})
SKYLAKE = frozenset({"fpu", "avx2", "avx512f", "avx512bw"})


@pytest.mark.parametrize(
    ("flags", "dtype", "reason"),
    [
        (ZEN4, torch.bfloat16, "CPU has avx512_bf16"),
        (SAPPHIRE_RAPIDS, torch.bfloat16, "CPU has amx_bf16"),
        (SKYLAKE, torch.float32, "CPU has neither amx_bf16 or avx512_bf16"),
        (frozenset(), torch.float32, "CPU flags unknown (no /proc/cpuinfo flags)"),
    ],
    ids=["avx512-bf16", "amx", "avx512-only", "unknown"],
)
def test_auto_on_cpu_follows_the_flags(flags: frozenset[str], dtype: torch.dtype,
                                       reason: str) -> None:
    choice = auto_cpu_dtype(flags, onednn=True)
    assert (choice.dtype, choice.reason) == (dtype, reason)


def test_native_bf16_without_onednn_stays_float32() -> None:
    choice = auto_cpu_dtype(ZEN4, onednn=False)
    assert choice.dtype == torch.float32
    assert choice.reason == "CPU has avx512_bf16 but torch lacks oneDNN (mkldnn)"


def test_cpu_flags_are_read_from_cpuinfo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VRS_CPU_MASK", raising=False)  # the masked CI run sets it
    info = tmp_path / "cpuinfo"
    info.write_text(
        "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx512f avx512_bf16\n\n"
        "processor\t: 1\nflags\t\t: fpu avx512f avx512_bf16\n"
    )
    assert cpu_flags(info) == frozenset({"fpu", "avx512f", "avx512_bf16"})
    assert cpu_bf16_flag(cpu_flags(info)) == "avx512_bf16"
    assert cpu_flags(tmp_path / "missing") == frozenset()
    (tmp_path / "noflags").write_text("processor\t: 0\n")
    assert cpu_flags(tmp_path / "noflags") == frozenset()


def test_auto_on_this_machine_matches_its_cpu() -> None:
    """Whatever CPU runs the suite: auto is bf16 exactly when /proc/cpuinfo says so."""
    native = cpu_bf16_flag(cpu_flags()) is not None and torch.backends.mkldnn.is_available()
    choice = choose_dtype("auto", CPU)
    assert choice.dtype == (torch.bfloat16 if native else torch.float32)
    assert resolve_dtype("auto", CPU) == choice.dtype


def test_named_dtypes_are_kept_and_cuda_auto_is_bf16() -> None:
    assert choose_dtype("float32", CPU) == DTypeChoice(torch.float32, "as configured")
    assert choose_dtype("bfloat16", CPU).dtype == torch.bfloat16
    assert choose_dtype("auto", torch.device("cuda")).dtype == torch.bfloat16
    with pytest.raises(ConfigError, match="dtype='int8'; allowed: auto, float32"):
        choose_dtype("int8", CPU)


def test_engine_logs_the_dtype_and_why(model_dirs: dict[str, Path],
                                       caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="vrs.engine"):
        engine = make_engine(model_dirs["llama"], dtype="auto")
    choice = choose_dtype("auto", CPU)
    assert engine.model.dtype == choice.dtype
    assert f"dtype auto → {choice.name} ({choice.reason})" in caplog.text
    assert engine.runner.kv_caches[0].dtype == choice.dtype
    assert f"(matmuls: {engine.model.linear_backend}: {engine.model.linear_reason}," in caplog.text


SAPPHIRE_RAPIDS_INFO = "flags\t\t: fpu avx2 avx512f avx512_bf16 amx_tile amx_bf16 amx_int8\n"


@pytest.mark.parametrize(
    ("mask", "left"),
    [
        ("", {"fpu", "avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8"}),
        ("bf16", {"fpu", "avx2", "avx512f", "amx_tile", "amx_int8"}),
        ("amx", {"fpu", "avx2", "avx512f", "avx512_bf16"}),
        ("avx512", {"fpu", "avx2", "amx_tile", "amx_bf16", "amx_int8"}),
        ("bf16, amx,avx512", {"fpu", "avx2"}),
    ],
    ids=["none", "bf16", "amx", "avx512", "all"],
)
def test_the_mask_hides_cpu_features(mask: str, left: set[str], tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text(SAPPHIRE_RAPIDS_INFO)
    monkeypatch.setenv("VRS_CPU_MASK", mask)
    assert cpu_flags(info) == frozenset(left)
    assert cpu_flags(info, mask=cpu_mask(mask)) == frozenset(left)


def test_an_unknown_mask_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VRS_CPU_MASK", "bf16,sse9")
    with pytest.raises(ConfigError, match=r"VRS_CPU_MASK='bf16,sse9': unknown sse9; "
                                          r"allowed: bf16, amx, avx512"):
        choose_dtype("auto", CPU)


@pytest.mark.parametrize("mask", ["bf16", "amx,avx512"])
def test_masked_detection_is_float32_on_any_machine(mask: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The no-native-bf16 branch of ``auto``, whatever CPU runs the suite."""
    monkeypatch.setenv("VRS_CPU_MASK", mask)
    assert native_bf16() is None
    choice = choose_dtype("auto", CPU)
    assert choice.dtype == torch.float32
    hidden = ",".join(sorted(mask.split(",")))
    assert choice.reason.endswith(f"; VRS_CPU_MASK hides {hidden}"), choice.reason
