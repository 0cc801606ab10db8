#!/usr/bin/env bash
# Per-kernel times of one batch-1 decode step of the device forward under Nsight Compute (each
# kernel of the step's CUDA graph timed alone), on the 4-layer V4-shaped checkpoint of
# bench/RESULTS-gpu.md, "Device forward". Run on the GPU host from the repository root after
# `source gpu-bundle/env.sh`; takes ~4 minutes. Prints the step's kernels by total time.
#   bench/profile_device_forward.sh [OUT_DIR]
# The window (launches 10,000-11,199) falls on the 12 timed steps at context 64-76 (~150 kernels a
# step since the twelfth session), so attention reads fewer rows than at context 1024; everything
# else is the same per step.
set -euo pipefail
out=${1:-$(mktemp -d)}
model="$out/model"
deepinfer-model make-tiny --out "$model" --quantize fp8-fp4 --seed 21 --vocab 8192 --hidden 4096 \
  --heads 64 --head-dim 512 --rope-dim 64 --q-lora 1024 --o-groups 8 --o-lora 1024 --window 128 \
  --index-heads 64 --index-head-dim 128 --index-topk 512 --experts 32 --top-k 6 --moe-inter 2048 \
  --ratios 0,4,128,4 --hash-layers 1 >/dev/null
ncu --launch-skip 10000 --launch-count 1200 --metrics gpu__time_duration.sum --csv \
  --graph-profiling node --cache-control none \
  bench_device_forward --model "$model" --batches 1 --context 64 --steps 12 --no-eager \
  >"$out/ncu.csv"
python3 "$(dirname "$0")/ncu_step_summary.py" "$out/ncu.csv" --step-csv "$out/step.csv"
