#!/usr/bin/env bash
# Issue #33's live suite: vLLM 0.33.0's engine wire, proven without a GPU.
#
# Installs vllm==0.33.0 into its own cached venv ($VRS_VLLM_VENV, default
# ~/.cache/vrs-vllm-venv; pip reuses its download cache, and an existing venv with
# vllm 0.33.0 is kept as it is), then runs tests/vllm_compat -m e2e with $PYTHON (default
# python3: the interpreter where vrs and its test extras are installed):
#   - test_vllm_fixtures.py: the committed wire fixtures are what vLLM's encoder writes;
#   - test_live.py: frontends in front of tests/vllm_compat/mock_engine.py (a vLLM-wire mock
#     engine on vLLM's own structs), in the three ways in: 1 `VLLM_USE_RUST_FRONTEND=1
#     vllm serve`, 2 `vrs-rs serve --engine vllm` launching the mock, 3 remote engines
#     joining `<frontend> serve --data-parallel-size-local 0`; frontends vllm-rs (the
#     reference, from the wheel), vLLM's Python frontend (way 3) and vrs-rs
#     ($VRS_RUST_FRONTEND_PATH, else beside $PYTHON, else rust/target/release). Cases: chat,
#     completions, streaming, n > 1, logprobs, prompt logprobs, tools, structured outputs,
#     Responses, Messages, abort on disconnect, engine death.
# vLLM and the mock run with VLLM_TARGET_DEVICE=cpu: nothing here needs an accelerator.
# Extra arguments go to pytest, e.g.  scripts/vllm_compat.sh -k vllm-rs  (about 4 minutes
# for vllm-rs alone on 2 cores; the whole suite about 10).
set -euo pipefail
cd "$(dirname "$0")/.."

VLLM_VERSION=0.33.0
VLLM_VENV="${VRS_VLLM_VENV:-$HOME/.cache/vrs-vllm-venv}"
PYTHON="${PYTHON:-python3}"
export PIP_DISABLE_PIP_VERSION_CHECK=1

installed() {
    "$VLLM_VENV/bin/python" -c "import importlib.metadata as m; print(m.version('vllm'))" \
        2>/dev/null || true
}

if [ "$(installed)" != "$VLLM_VERSION" ]; then
    echo "== installing vllm==$VLLM_VERSION into $VLLM_VENV"
    if [ ! -x "$VLLM_VENV/bin/python" ]; then
        python3 -m venv "$VLLM_VENV"
    fi
    "$VLLM_VENV/bin/pip" install "vllm==$VLLM_VERSION"
    if [ "$(installed)" != "$VLLM_VERSION" ]; then
        echo "vllm_compat.sh: $VLLM_VENV has vllm '$(installed)', not $VLLM_VERSION;" \
             "remove that venv and run again" >&2
        exit 1
    fi
fi

echo "== tests/vllm_compat (vllm $VLLM_VERSION at $VLLM_VENV, suite run by $PYTHON)"
export VRS_VLLM_PYTHON="$VLLM_VENV/bin/python"
exec "$PYTHON" -m pytest tests/vllm_compat -m e2e -rA "$@"
