#!/usr/bin/env bash
# Throughput and latency against offered request rate (open loop, Poisson arrivals) on the demo
# model, with and without prefix sharing and the overlapped loop. Every request carries the same
# 300-token prompt (a shared system prompt), 16 new tokens; 4 clients x 10 requests per point.
#
#   bench/rate_bench.sh [BUILD_DIR]      (default build/; needs deps/tokenizer-v4-test)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${1:-$ROOT/build}/bin
. "$ROOT/bench/lib/daemon_bench.sh"
PROMPT=$(awk 'BEGIN{for(i=0;i<300;i++){printf "%s%d", (i?",":""), (i*7919+13)%120000}}')

echo "| config | offered req/s | tokens/s | TTFT p50 ms | TTFT p99 ms | ITL p50 ms | latency p50 ms | latency p99 ms | prefix hit tokens |"
echo "|---|---|---|---|---|---|---|---|---|"
for config in "prefix+overlap" "prefix, no overlap" "no prefix, overlap"; do
  flags=()
  case "$config" in
    "prefix, no overlap") flags=(--no-overlap) ;;
    "no prefix, overlap") flags=(--prefix-cache-bytes 0) ;;
  esac
  for rate in 2 4 8 16; do
    start_daemon "${flags[@]}"
    out=$("$BIN/deepinfer" --socket "$SOCK" bench --clients 4 --requests 10 --rate "$rate" \
            --max-tokens 16 --prompt-ids "$PROMPT")
    st=$("$BIN/deepinfer" --socket "$SOCK" status --json)
    stop_daemon
    printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n" "$config" "$rate" \
      "$(echo "$out" | field tokens_per_s)" "$(echo "$out" | field ttft_ms_p50)" \
      "$(echo "$out" | field ttft_ms_p99)" "$(echo "$out" | field itl_ms_p50)" \
      "$(echo "$out" | field latency_ms_p50)" "$(echo "$out" | field latency_ms_p99)" \
      "$(echo "$st" | field prefix_cache_hit_tokens)"
  done
done
