#!/usr/bin/env bash
# Requests sharing a system prompt through deepinferd: `deepinfer bench --own-ids` (every prompt
# is the same 512 ids, then 24 ids of its own) on the slot path with donors on and off
# (--share-prefixes), and on the layers path with the prefix cache's 128-token snapshots. Prints
# one bench JSON line per mode and the prompt tokens each resumed.
#   [DEVICE=cuda] bench/shared_prefix.sh [BIN_DIR] [make-tiny flags...]  (BIN_DIR: build/bin)
# Default model: a random 6-layer checkpoint, hidden 512, 8 heads (CPU backend, 2 threads).
set -euo pipefail
source "$(dirname "$0")/lib/daemon_bench.sh"
bin=${1:-build/bin}
shift || true
bench_model "$bin" "$@"
reuse_modes "$bin" --share-prefixes --batch-requests 3 --step-token-budget 128 --threads 2 \
  -- --clients 2 --requests 4 \
  --own-ids 24 --prompt-ids "$(prompt_ids 512)" --max-tokens 8 --temperature 0
