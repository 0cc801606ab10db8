#!/usr/bin/env bash
# Draws on the stepper against draws on the host (--device-sampling on/off) through deepinferd on
# the slot path: `deepinfer bench` with temperature sampling (every request drawn), at V4's
# 129,280-token vocabulary, where each host draw takes a row of logits copied back and a
# temperature pick (~3.3 ms on one core). Prints one bench JSON line per mode and the tokens the
# stepper drew.
#   [DEVICE=cuda] bench/device_sampling.sh [BIN_DIR] [CLIENTS] [make-tiny flags...]
# BIN_DIR: build/bin; CLIENTS: 8 (also the batch); THREADS (environment): the daemon's --threads,
# which is also the host sampler's thread count (default 2). Default model: a random 4-layer checkpoint,
# hidden 512, 8 heads, FP8/FP4, 129,280 ids. With DEVICE=cuda pass the production kernels'
# shapes (bench/gpu_session.sh's kernel-shaped flags) with --vocab 129280.
set -euo pipefail
source "$(dirname "$0")/lib/daemon_bench.sh"
bin=${1:-build/bin}
clients=${2:-8}
shift 2 || shift $#
if [ $# -eq 0 ]; then
  set -- --quantize fp8-fp4 --seed 3 --hidden 512 --heads 8 --ratios 0,4,128,4 --vocab 129280
fi
bench_model "$bin" "$@"
for value in on off; do
  STATUS_KEYS=stepper_sampled_tokens run_mode "$bin" "device_sampling=$value" \
    --device "${DEVICE:-cpu}" --forward slots --prefix-cache-bytes 0 --slot-context 1024 \
    --batch-requests "$clients" --step-token-budget 256 --threads "${THREADS:-2}" \
    --device-sampling "$value" \
    -- --clients "$clients" --requests 4 --own-ids 16 --prompt-ids "$(prompt_ids 64)" \
    --max-tokens 32 --temperature 0.8 --top-p 0.95
done
