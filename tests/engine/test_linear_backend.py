"""The decoder's matmul backends: each agrees with F.linear; the choice is checked."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from engine.runtime.models.decoder import CPU_MATMULS, pick_linear

CPU = torch.device("cpu")
ONEDNN = torch.backends.mkldnn.is_available()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("wanted", CPU_MATMULS)
def test_every_backend_agrees_with_f_linear(wanted: str, dtype: torch.dtype) -> None:
    backend = pick_linear(CPU, dtype, wanted)
    expected_name = "torch" if wanted == "torch" or not ONEDNN else wanted
    if wanted == "auto":
        expected_name = "onednn-packed" if ONEDNN else "torch"
    assert backend.name == expected_name
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


def test_cuda_and_other_dtypes_use_f_linear() -> None:
    assert pick_linear(torch.device("cuda"), torch.bfloat16, "onednn-packed").name == "torch"
    assert pick_linear(CPU, torch.float16, "auto").name == "torch"


def test_unknown_backend_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VRS_CPU_MATMUL", "mkl")
    with pytest.raises(ValueError, match="VRS_CPU_MATMUL='mkl'; allowed: auto, torch, onednn"):
        pick_linear(CPU, torch.float32)
    monkeypatch.setenv("VRS_CPU_MATMUL", "onednn")
    assert pick_linear(CPU, torch.float32).name == ("onednn" if ONEDNN else "torch")
