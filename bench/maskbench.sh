#!/usr/bin/env bash
# Runs the sample of JSONSchemaBench's MaskBench corpus (bench/data/maskbench: real-world schemas,
# each with LLM-generated valid and invalid instances) through deepinfer-grammar with compact
# whitespace: `check` lenient and --strict (unenforceable keywords refuse the schema), then `bench`
# lenient. Prints per mode the schemas, the schemas that compile ("ERROR name: reason" for each
# refused one), valid instances accepted and invalid instances rejected, and every failure; then
# the bench's "mask cache:" line and its last (JSON) line.
#
#   bench/maskbench.sh [BUILD_DIR]     (default build/)
# Environment: TOKENIZER (default the DeepSeek V3 tokenizer in deps/), DATA (default
# bench/data/maskbench), OUT (a folder for the case file, the raw outputs and the summaries;
# default a temporary one).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
DATA=${DATA:-$ROOT/bench/data/maskbench}
. "$ROOT/bench/lib/grammar_check.sh"

node "$ROOT/bench/maskbench.mjs" "$OUT/cases.json" "$DATA"
for mode in lenient strict; do
  check_mode "$mode"
  SUMMARY_JSON="$OUT/$mode.summary.json" \
    node "$ROOT/bench/maskbench.mjs" summarize "$OUT/cases.json" "$OUT/$mode.out" \
    "check --compact ($mode)"
done

echo "== bench --compact (lenient)"
"$BIN" bench --tokenizer "$TOKENIZER" --cases "$OUT/cases.json" --compact \
  >"$OUT/bench.out" 2>"$OUT/bench.err"
grep '^mask cache:' "$OUT/bench.out"
tail -n 1 "$OUT/bench.out"
echo "raw outputs and figures (*.summary.json) in $OUT"
