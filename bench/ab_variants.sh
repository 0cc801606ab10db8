#!/usr/bin/env bash
# Interleaved A/B of several builds of bench_device_forward on the mid model (bench/lib/
# mid_model.sh), made once, CUDA graphs only. A gpu_tests binary may run while the model is
# written: the model is CPU work, the tests the GPU's, so one device call holds both. After
# `source …/env.sh` on the GPU host (docs/gpu.md), with deepinfer-model on PATH:
#   bench/ab_variants.sh OUT_DIR NAME=BENCH_BINARY [NAME=BENCH_BINARY ...]
# Environment: BATCHES (default 1,4,8), CONTEXT (512), ROUNDS (3), TESTS (a gpu_tests binary,
# output to OUT_DIR/gpu_tests.txt), TESTS_FILTER (its --gtest_filter) and FLAGS (more
# bench_device_forward flags, e.g. --draw temperature).
# Writes OUT_DIR/ab.jsonl (each line labelled `variant` and `round`) and prints µs per step per
# round, then each variant's mean against the first variant's (bench/lib/ab_summary.py).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib/mid_model.sh"
out=${1:?OUT_DIR}
shift
[ $# -ge 1 ] || { echo "ab_variants.sh: give at least one NAME=BENCH_BINARY" >&2; exit 2; }
for v in "$@"; do
  [ -x "${v#*=}" ] || { echo "ab_variants.sh: ${v#*=} is not executable" >&2; exit 2; }
done
mkdir -p "$out"
: >"$out/ab.jsonl"
model=$(mktemp -d)/m
t0=$(date +%s)
# The model's own time, printed when it is made (the tests may still be running).
(mid_model "$model" && echo "model made after $(($(date +%s) - t0)) s") &
model_pid=$!
if [ -n "${TESTS:-}" ]; then
  timeout 300 "$TESTS" --gtest_filter="${TESTS_FILTER:-*}" >"$out/gpu_tests.txt" 2>&1
  echo "gpu_tests exit $? after $(($(date +%s) - t0)) s"
  grep -E '^\[  (PASSED|FAILED)  \]' "$out/gpu_tests.txt"
fi
wait "$model_pid" || { echo "ab_variants.sh: the mid model was not made" >&2; exit 1; }
for round in $(seq 1 "${ROUNDS:-3}"); do
  for v in "$@"; do
    name=${v%%=*}
    timeout 120 "${v#*=}" --model "$model" --batches "${BATCHES:-1,4,8}" \
      --context "${CONTEXT:-512}" --no-eager ${FLAGS:-} >"$out/run.jsonl" 2>&1
    forward_summary "$out/run.jsonl" "$name, round $round"
    python3 -c 'import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        r = json.loads(l); r["variant"] = sys.argv[2]; r["round"] = int(sys.argv[3])
        print(json.dumps(r))' "$out/run.jsonl" "$name" "$round" >>"$out/ab.jsonl"
  done
done
rm -f "$out/run.jsonl"
rm -rf "$(dirname "$model")"
python3 "$here/lib/ab_summary.py" "$out/ab.jsonl"
