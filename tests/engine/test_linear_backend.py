"""The decoder's matmul backends: each agrees with F.linear; the choice is checked."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from engine.runtime.device import native_bf16
from engine.runtime.models import decoder
from engine.runtime.models.decoder import AUTO_CPU_MATMUL, CPU_MATMULS, pick_linear

pytestmark = pytest.mark.unit

CPU = torch.device("cpu")
ONEDNN = torch.backends.mkldnn.is_available()


def expected_backend(wanted: str, dtype: torch.dtype) -> str:
    """What the engine must pick, from the same detection it uses (``native_bf16``,
    which honours ``VRS_CPU_MASK``), never from "oneDNN is present" alone."""
    if wanted == "torch" or not ONEDNN:
        return "torch"
    if dtype == torch.bfloat16 and native_bf16() is None:
        return "torch"
    return AUTO_CPU_MATMUL if wanted == "auto" else wanted


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("wanted", CPU_MATMULS)
def test_every_backend_agrees_with_f_linear(wanted: str, dtype: torch.dtype) -> None:
    backend = pick_linear(CPU, dtype, wanted)
    assert backend.name == expected_backend(wanted, dtype), backend.reason
    torch.manual_seed(0)
    weight, bias = torch.randn(96, 64).to(dtype), torch.randn(96).to(dtype)
    packed = backend.pack(weight)
    assert tuple(packed.shape) == (96, 64)
    for rows in (1, 3, 17, 64, 130):  # off and on the row buckets
        x = torch.randn(rows, 64).to(dtype)
        got = backend.linear(x, packed, bias)
        assert got.shape == (rows, 96) and got.dtype == dtype
        tol = 1e-5 if dtype == torch.float32 else 1e-2
        torch.testing.assert_close(got, F.linear(x, weight, bias), atol=tol, rtol=tol)


@pytest.mark.parametrize("wanted", ["auto", "onednn", "onednn-packed"])
def test_bf16_without_native_bf16_falls_back_with_the_reason(
    wanted: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fallback path on any CPU: detection told there is no native bf16."""
    monkeypatch.setenv("VRS_CPU_MASK", "bf16")
    backend = pick_linear(CPU, torch.bfloat16, wanted)
    assert backend.name == "torch"
    expected = ("CPU has no native bf16 (neither amx_bf16 nor avx512_bf16); "
                "VRS_CPU_MASK hides bf16" if ONEDNN else "torch lacks oneDNN (mkldnn)")
    assert backend.reason == expected
    # fp32 keeps oneDNN: the mask hides bf16, nothing else
    assert pick_linear(CPU, torch.float32, wanted).name == expected_backend(wanted, torch.float32)


@pytest.mark.skipif(not ONEDNN, reason="torch without oneDNN always uses F.linear")
def test_a_backend_that_fails_its_check_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None
               ) -> torch.Tensor:
        return F.linear(x, weight, bias) + 1.0

    monkeypatch.setattr(decoder, "_onednn_linear", broken)
    backend = pick_linear(CPU, torch.float32, "onednn")
    assert (backend.name, backend.reason) == (
        "torch", "oneDNN onednn failed its start-up check against F.linear")


def test_cuda_and_other_dtypes_use_f_linear() -> None:
    assert pick_linear(torch.device("cuda"), torch.bfloat16, "onednn-packed").name == "torch"
    assert pick_linear(CPU, torch.float16, "auto").name == "torch"


def test_unknown_backend_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VRS_CPU_MATMUL", "mkl")
    with pytest.raises(ValueError, match="VRS_CPU_MATMUL='mkl'; allowed: auto, torch, onednn"):
        pick_linear(CPU, torch.float32)
    monkeypatch.setenv("VRS_CPU_MATMUL", "onednn")
    assert pick_linear(CPU, torch.float32).name == ("onednn" if ONEDNN else "torch")
