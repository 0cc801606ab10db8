#!/usr/bin/env bash
# Throughput and latency against offered request rate (open loop, Poisson arrivals) on the demo
# model, with and without prefix sharing and the overlapped loop. Every request carries the same
# 300-token prompt (a shared system prompt), 16 new tokens; 4 clients x 10 requests per point.
#
#   bench/rate_bench.sh [BUILD_DIR]      (default build/; needs deps/tokenizer-v4-test)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${1:-$ROOT/build}/bin
MODEL=${MODEL:-$ROOT/build/demo-model-v4vocab}
TOK=$ROOT/deps/tokenizer-v4-test
SOCK=$(mktemp -u /tmp/deepinfer-rate.XXXXXX.sock)
[ -f "$MODEL/model.safetensors" ] ||
  "$BIN/deepinfer-model" make-tiny --out "$MODEL" --quantize fp8-fp4 --vocab 129280 --hidden 64 --seed 7 >/dev/null
PROMPT=$(awk 'BEGIN{for(i=0;i<300;i++){printf "%s%d", (i?",":""), (i*7919+13)%120000}}')
field() { sed -n "s/.*\"$1\": *\([-0-9.a-z]*\).*/\1/p"; }

echo "| config | offered req/s | tokens/s | TTFT p50 ms | TTFT p99 ms | ITL p50 ms | latency p50 ms | latency p99 ms | prefix hit tokens |"
echo "|---|---|---|---|---|---|---|---|---|"
for config in "prefix+overlap" "prefix, no overlap" "no prefix, overlap"; do
  flags=()
  case "$config" in
    "prefix, no overlap") flags=(--no-overlap) ;;
    "no prefix, overlap") flags=(--prefix-cache-bytes 0) ;;
  esac
  for rate in 2 4 8 16; do
    "$BIN/deepinferd" --model "$MODEL" --tokenizer "$TOK" --socket "$SOCK" --threads 2 \
      --log-level warn "${flags[@]}" &
    pid=$!
    for _ in $(seq 100); do "$BIN/deepinfer" --socket "$SOCK" health >/dev/null 2>&1 && break; sleep 0.1; done
    out=$("$BIN/deepinfer" --socket "$SOCK" bench --clients 4 --requests 10 --rate "$rate" \
            --max-tokens 16 --prompt-ids "$PROMPT")
    st=$("$BIN/deepinfer" --socket "$SOCK" status --json)
    kill -TERM $pid; wait $pid || true
    printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n" "$config" "$rate" \
      "$(echo "$out" | field tokens_per_s)" "$(echo "$out" | field ttft_ms_p50)" \
      "$(echo "$out" | field ttft_ms_p99)" "$(echo "$out" | field itl_ms_p50)" \
      "$(echo "$out" | field latency_ms_p50)" "$(echo "$out" | field latency_ms_p99)" \
      "$(echo "$st" | field prefix_cache_hit_tokens)"
  done
done
