#!/usr/bin/env bash
# Runs the JSON-Schema-Test-Suite (bench/data/json-schema-test-suite) through deepinfer-grammar,
# compact whitespace, once --strict (unenforceable keywords refuse the schema) and once lenient,
# and prints a per-file table of tests, passed, refused schemas, false positives (invalid instance
# accepted) and false negatives (valid instance rejected).
#
#   bench/json_schema_test_suite.sh [BUILD_DIR]     (default build/)
# Environment: TOKENIZER (default the DeepSeek V3 tokenizer in deps/), OUT (a folder for the case
# file, the raw outputs and the lists of failures; default a temporary one).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
. "$ROOT/bench/lib/grammar_check.sh"

node "$ROOT/bench/json_schema_test_suite.mjs" convert "$OUT/cases.json"
for mode in strict lenient; do
  check_mode "$mode"
  SUMMARY_JSON="$OUT/$mode.summary.json" SUMMARY_DETAILS="$OUT/$mode.details.txt" \
    node "$ROOT/bench/json_schema_test_suite.mjs" summarize "$OUT/cases.json" "$OUT/$mode.out" \
    "$mode"
done
echo "raw outputs, failures (*.details.txt) and figures (*.summary.json) in $OUT"
