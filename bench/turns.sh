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
bin=${1:-build/bin}
shift || true
spec=("$@")
[ ${#spec[@]} -eq 0 ] && spec=(--quantize fp8-fp4 --seed 3 --hidden 512 --heads 8)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin/deepinfer-model" make-tiny --out "$work/m" "${spec[@]}" >/dev/null
prompt=$(python3 -c 'print(",".join(str((i * 37 + 11) % 500 + 1) for i in range(48)))')
for mode in "slots on" "slots off" "layers -"; do
  read -r forward park <<<"$mode"
  sock="$work/$forward-$park.sock"
  extra=(--device "${DEVICE:-cpu}" --forward "$forward")
  if [ "$forward" = slots ]; then
    extra+=(--prefix-cache-bytes 0 --slot-context 1024 --park-slots "$park")
  fi
  "$bin/deepinferd" --model "$work/m" --tokenizer none --socket "$sock" --batch-requests 2 \
    --step-token-budget 64 --threads 2 --log-level error "${extra[@]}" &
  daemon=$!
  for _ in $(seq 100); do "$bin/deepinfer" --socket "$sock" health >/dev/null 2>&1 && break; sleep 0.2; done
  line=$("$bin/deepinfer" --socket "$sock" bench --clients 2 --requests 6 --turns \
    --prompt-ids "$prompt" --max-tokens 8 --temperature 0)
  hits=$("$bin/deepinfer" --socket "$sock" status | grep '^prefix_cache_hit_tokens' | cut -d: -f2)
  echo "$forward park_slots=$park resumed_tokens=$hits $line"
  kill "$daemon"
  wait "$daemon" || true
done
