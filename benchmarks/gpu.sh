#!/usr/bin/env bash
# vrs against transformers on a lent GPU, in one command:
#   Qwen3-0.6B shapes with random seeded weights (nothing downloaded), 256 requests of
#   128 in / 128 out, greedy, EOS ignored: `vrs serve` (default dtype: bfloat16 on CUDA)
#   driven by `vrs bench serve` at concurrency 256, against transformers' static
#   generate() in float32 and bfloat16, 3 rounds taking turns; then greedy parity of the
#   in-process engine against generate() in float32 on 4 prompts.
# Needs a CUDA GPU, torch with CUDA, transformers and this checkout's vrs (vrs-rs built).
# Fails (exit 2) before doing anything without a GPU; exit 1 when a request failed or a
# parity prompt differed. Results: benchmarks/results/gpu.{md,json}.
#   bash benchmarks/gpu.sh [extra engine_throughput.py flags]
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${VRS_PYTHON:-python}"

if ! "$PYTHON" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    echo "gpu.sh: no CUDA GPU visible to torch ($("$PYTHON" -c 'import torch; print(torch.__version__)' 2>&1)); nothing was run" >&2
    exit 2
fi
"$PYTHON" -c 'import torch; print("GPU:", torch.cuda.get_device_name())'

exec "$PYTHON" benchmarks/engine_throughput.py --shape qwen3-0.6b --device cuda \
    --num-requests 256 --concurrency 256 --input-len 128 --output-len 128 --rounds 3 \
    --parity 4 --output benchmarks/results/gpu.json "$@"
