"""The engine process's OpenMP spin count (engine/__main__.py): set before torch loads
libgomp, unless the user chose a wait policy or a spin count."""

from __future__ import annotations

import subprocess
import sys

import pytest

from engine.__main__ import SPIN_COUNT, set_openmp_spin

pytestmark = pytest.mark.e2e  # the last test starts a Python child


def test_the_engine_sets_its_spin_count() -> None:
    environ: dict[str, str] = {"PATH": "/bin"}
    set_openmp_spin(environ)
    assert environ == {"PATH": "/bin", "GOMP_SPINCOUNT": SPIN_COUNT}


@pytest.mark.parametrize("chosen", [{"GOMP_SPINCOUNT": "300000"},
                                    {"OMP_WAIT_POLICY": "passive"},
                                    {"OMP_WAIT_POLICY": "active"}])
def test_a_users_choice_wins(chosen: dict[str, str]) -> None:
    environ = dict(chosen)
    set_openmp_spin(environ)
    assert environ == chosen


def test_the_engine_entry_point_does_not_load_torch_before_setting_it() -> None:
    # libgomp reads GOMP_SPINCOUNT once, when torch loads it: `python -m engine` must not
    # import torch before main() has set it.
    code = "import sys, engine.__main__; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
