#!/usr/bin/env bash
# The README's test command: install vrs with its test extras, then run every test.
# Builds vrs-rs through maturin (release), then ruff, import-linter, mypy, the Rust
# module-cycle check, cargo fmt/clippy/test, pytest, and the engine tests again as on an
# AVX2-only CPU.
# Installs into the interpreter $PYTHON (default: python3, i.e. the active venv's, or the
# system's); .ci/run runs it inside a fresh venv.
#
# --fast, for the edit-test loop (after one full run has installed the dependencies): no
# install, the same lint, cargo test without the tests that run Python, and pytest's unit
# and server tiers on the source tree (docs/internals.md, "Testing: tiers").
set -euo pipefail
cd "$(dirname "$0")/.."

fast=0
case "${1:-}" in
    "") ;;
    --fast) fast=1 ;;
    *) echo "usage: scripts/test.sh [--fast]" >&2; exit 2 ;;
esac

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/vrs-target}"
export PIP_DISABLE_PIP_VERSION_CHECK=1
export TOKENIZERS_PARALLELISM=false
PYTHON="${PYTHON:-python3}"
# Each step says when it starts (seconds since this script did), to see where CI's time goes.
section() { echo "== $1 (at ${SECONDS}s)"; }
# The Rust tests that ask Python (transformers, tokenizers, the wire fixtures, the demo
# model) use the same interpreter.
export VRS_PYTHON="${VRS_PYTHON:-$PYTHON}"

if [[ $fast == 0 ]]; then
    section "install (pip install '.[test]': builds vrs-rs in release mode)"
    "$PYTHON" -m pip install --quiet '.[test]'
elif ! "$PYTHON" -c 'import mypy, importlinter, ruff, torch, server' 2>/dev/null; then
    echo "scripts/test.sh --fast: $PYTHON lacks vrs's test dependencies;" \
        "run scripts/test.sh once (it installs them)" >&2
    exit 2
fi

section "lint"
"$PYTHON" -m ruff check .
# import-linter: the Python layers ([tool.importlinter] in pyproject.toml). What the
# `lint-imports` script runs, called through $PYTHON so no PATH or scripts dir matters.
"$PYTHON" -c 'import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())'
# mypy: the type checker ([tool.mypy] in pyproject.toml says what and how strictly).
"$PYTHON" -m mypy
# The Rust layers: crates cannot form a cycle; modules inside a crate must not either.
"$PYTHON" scripts/check_module_cycles.py
(cd rust && cargo fmt --all -- --check)
(cd rust && cargo clippy --release --workspace --all-targets -- -D warnings)

section "cargo test"
# python-tests: the Rust tests that run $VRS_PYTHON (transformers' templates and ids, the
# wire fixtures from engine/protocol.py, the demo model's tokenizer).
if [[ $fast == 1 ]]; then
    (cd rust && cargo test --release --workspace)
    section "pytest: the unit and server tiers"
    "$PYTHON" -m pytest -q -m "unit or server"
    section "done"
    exit 0
fi
(cd rust && cargo test --release --workspace --features python-tests)

section "pytest"
# Use the installed vrs-rs (auto discovery finds it next to the interpreter). The slowest
# tests are listed at the end, to keep an eye on the suite's time (docs/internals.md,
# "Testing").
"$PYTHON" -m pytest -q --durations=25

section "pytest tests/engine as on an AVX2-only CPU (no AVX-512, AMX or native bf16)"
# The detection's other branch on any machine (docs/internals.md, "Testing: CPU paths").
# Tensor parallel is left out: float32 process plumbing that takes no branch of it.
VRS_CPU_MASK=bf16,amx,avx512 ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 \
    "$PYTHON" -m pytest -q tests/engine --ignore=tests/engine/test_tensor_parallel.py
section "done"
