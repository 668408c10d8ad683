#!/usr/bin/env bash
# vrs against transformers on a lent GPU, in one command:
#   Qwen3-0.6B shapes with random seeded weights (nothing downloaded), 256 requests of
#   128 in / 128 out, greedy, EOS ignored: `vrs serve` (default dtype: bfloat16 on CUDA)
#   driven by `vrs bench serve` at concurrency 256, against transformers' static
#   generate() in float32 and bfloat16, 3 rounds taking turns; then greedy parity of the
#   in-process engine against generate() in float32 on 4 prompts; with 2+ GPUs, then
#   `vrs serve --tensor-parallel-size 2` against TP=1, taking turns (tensor_parallel.py);
#   with vllm 0.33.0 in ~/.cache/vrs-vllm-venv, then `vllm serve` in front of vLLM's own
#   engine with vrs-rs and with vllm-rs in turn (frontend_vllm_engine.py --engine vllm).
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

"$PYTHON" benchmarks/engine_throughput.py --shape qwen3-0.6b --device cuda \
    --num-requests 256 --concurrency 256 --input-len 128 --output-len 128 --rounds 3 \
    --parity 4 --output benchmarks/results/gpu.json "$@"

# Tensor parallel (NCCL) on a machine lent with two GPUs or more: TP=1 and TP=2 taking
# turns, per-rank memory from GET /load. Results: benchmarks/results/gpu_tensor_parallel.*
gpus=$("$PYTHON" -c 'import torch; print(torch.cuda.device_count())')
if [ "$gpus" -ge 2 ]; then
    "$PYTHON" benchmarks/tensor_parallel.py --device cuda --shape qwen3-0.6b --sizes 1,2 \
        --num-requests 256 --concurrency 256 --rounds 3 \
        --output benchmarks/results/gpu_tensor_parallel.json
else
    echo "gpu.sh: $gpus GPU(s): the tensor-parallel run needs 2 or more; skipped" >&2
fi

# vLLM's own engine behind vrs-rs and behind vllm-rs (issue #33): `vllm serve` with
# VLLM_USE_RUST_FRONTEND=1 on Qwen3-0.6B shapes (random seeded weights), each frontend in
# turn, 3 rounds. Needs vllm 0.33.0 in ~/.cache/vrs-vllm-venv (scripts/vllm_compat.sh makes
# it). Results: benchmarks/results/gpu_vllm_frontends.json (and the table on stdout).
if [ -x "$HOME/.cache/vrs-vllm-venv/bin/python" ]; then
    "$PYTHON" benchmarks/frontend_vllm_engine.py --engine vllm --shape qwen3-0.6b \
        --concurrency 1 64 256 --rounds 3 --out benchmarks/results/gpu_vllm_frontends.json \
        --vllm-args --max-model-len 2048
else
    echo "gpu.sh: no vllm venv at ~/.cache/vrs-vllm-venv (scripts/vllm_compat.sh); the vLLM engine run was skipped" >&2
fi
