#!/usr/bin/env bash
# The engine loop under load: throughput and latency against offered load (concurrent clients),
# with the overlapped loop and with --no-overlap, for plain and structured (json_object) requests;
# plus the model time per step and the idle gap between steps from the daemon's status.
#
#   bench/engine_loop_bench.sh [BUILD_DIR]      (default build/; needs deps/tokenizer-v4-test)
# Model: the demo's tiny V4 checkpoint (hidden 64, 129,280-token vocabulary, FP8/FP4).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${1:-$ROOT/build}/bin
. "$ROOT/bench/lib/daemon_bench.sh"
PROMPT=$(seq -s, 1000 1047)  # 48 prompt ids

echo "| loop | requests | clients | tokens/s | TTFT p50 ms | ITL p50 ms | ITL p99 ms | model ms/step | idle gap ms/step (avg) | gap max ms |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for loop in overlap no-overlap; do
  for kind in plain json_object; do
    for clients in 1 4 16; do
      flags=()
      [ "$loop" = no-overlap ] && flags=(--no-overlap)
      start_daemon "${flags[@]}"
      rf=()
      [ "$kind" = json_object ] && rf=(--response-format '{"type": "json_object"}')
      out=$("$BIN/deepinfer" --socket "$SOCK" bench --clients "$clients" --requests 2 \
              --max-tokens 24 --prompt-ids "$PROMPT" "${rf[@]}")
      st=$("$BIN/deepinfer" --socket "$SOCK" status --json)
      stop_daemon
      fwd=$(echo "$st" | field step_forward_us_avg)
      gap=$(echo "$st" | field idle_gap_us_avg)
      gmax=$(echo "$st" | field idle_gap_us_max)
      printf "| %s | %s | %s | %s | %s | %s | %s | %.2f | %.2f | %.2f |\n" "$loop" "$kind" "$clients" \
        "$(echo "$out" | field tokens_per_s)" "$(echo "$out" | field ttft_ms_p50)" \
        "$(echo "$out" | field itl_ms_p50)" "$(echo "$out" | field itl_ms_p99)" \
        "$(awk "BEGIN{print $fwd/1000}")" "$(awk "BEGIN{print $gap/1000}")" "$(awk "BEGIN{print $gmax/1000}")"
    done
  done
done
