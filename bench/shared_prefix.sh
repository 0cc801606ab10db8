#!/usr/bin/env bash
# Requests sharing a system prompt through deepinferd: `deepinfer bench --own-ids` (every prompt
# is the same 512 ids, then 24 ids of its own) on the slot path with donors on and off
# (--share-prefixes), and on the layers path with the prefix cache's 128-token snapshots. Prints
# one bench JSON line per mode and the prompt tokens each resumed.
#   [DEVICE=cuda] bench/shared_prefix.sh [BIN_DIR] [make-tiny flags...]  (BIN_DIR: build/bin)
# Default model: a random 6-layer checkpoint, hidden 512, 8 heads (CPU backend, 2 threads).
set -euo pipefail
bin=${1:-build/bin}
shift || true
spec=("$@")
[ ${#spec[@]} -eq 0 ] && spec=(--quantize fp8-fp4 --seed 3 --hidden 512 --heads 8)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin/deepinfer-model" make-tiny --out "$work/m" "${spec[@]}" >/dev/null
prompt=$(python3 -c 'print(",".join(str((i * 37 + 11) % 500 + 1) for i in range(512)))')
for mode in "slots on" "slots off" "layers -"; do
  read -r forward share <<<"$mode"
  sock="$work/$forward-$share.sock"
  extra=(--device "${DEVICE:-cpu}" --forward "$forward")
  if [ "$forward" = slots ]; then
    extra+=(--prefix-cache-bytes 0 --slot-context 1024 --share-prefixes "$share")
  fi
  "$bin/deepinferd" --model "$work/m" --tokenizer none --socket "$sock" --batch-requests 3 \
    --step-token-budget 128 --threads 2 --log-level error "${extra[@]}" &
  daemon=$!
  for _ in $(seq 100); do "$bin/deepinfer" --socket "$sock" health >/dev/null 2>&1 && break; sleep 0.2; done
  line=$("$bin/deepinfer" --socket "$sock" bench --clients 2 --requests 4 --own-ids 24 \
    --prompt-ids "$prompt" --max-tokens 8 --temperature 0)
  hits=$("$bin/deepinfer" --socket "$sock" status | grep '^prefix_cache_hit_tokens' | cut -d: -f2)
  echo "$forward share_prefixes=$share resumed_tokens=$hits $line"
  kill "$daemon"
  wait "$daemon" || true
done
