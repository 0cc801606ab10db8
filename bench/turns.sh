#!/usr/bin/env bash
# Conversation turns through deepinferd: `deepinfer bench --turns` (each client's requests are one
# conversation, every prompt repeating the previous prompt and answer) on the slot path with
# parked slots on and off, and on the layers path with the prefix cache's 128-token snapshots.
# Prints one bench JSON line per mode and the prompt tokens each resumed.
#   [DEVICE=cuda] bench/turns.sh [BIN_DIR] [make-tiny flags...]   (BIN_DIR defaults to build/bin)
# Default model: a random 6-layer checkpoint, hidden 512, 8 heads (CPU backend, 2 threads). With
# DEVICE=cuda the slot modes run the device forward (pass make-tiny flags with the production
# kernels' shapes, as bench/gpu_session.sh does) and the layers mode the CUDA backend's stage 1.
set -euo pipefail
source "$(dirname "$0")/lib/daemon_bench.sh"
bin=${1:-build/bin}
shift || true
bench_model "$bin" "$@"
reuse_modes "$bin" --park-slots --batch-requests 2 --step-token-budget 64 --threads 2 \
  -- --clients 2 --requests 6 --turns \
  --prompt-ids "$(prompt_ids 48)" --max-tokens 8 --temperature 0
