#!/usr/bin/env bash
# The device forward's decode steps as the GPU ran them: bench_device_forward (CUDA graphs) once
# plain and once under libdi_kernel_trace.so (bench/kernel_trace.cc, CUPTI), then
# bench/kernel_trace_summary.py over the timed steps. On the GPU host after `source …/env.sh`:
#   bench/trace_device_forward.sh OUT_DIR MODEL_DIR [BATCH=1] [CONTEXT=512]
# Environment: STEPS (64, the timed steps summarised), TRACE_LIB (default: libdi_kernel_trace.so
# beside bench_device_forward on PATH), BENCH (default: bench_device_forward on PATH), FLAGS
# (more bench_device_forward flags, e.g. --no-overlap).
# Writes OUT_DIR/{plain,traced}.jsonl, trace.csv.gz, summary.txt and step.csv; prints both step
# times (what tracing costs) and the summary.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?OUT_DIR}
model=${2:?MODEL_DIR}
batch=${3:-1}
context=${4:-512}
steps=${STEPS:-64}
bin=${BENCH:-$(command -v bench_device_forward)} || true
[ -x "$bin" ] || { echo "trace_device_forward.sh: no bench_device_forward" >&2; exit 2; }
lib=${TRACE_LIB:-$(dirname "$bin")/libdi_kernel_trace.so}
[ -f "$lib" ] || { echo "trace_device_forward.sh: no $lib" >&2; exit 2; }
mkdir -p "$out"
run() {
  timeout 300 "$bin" --model "$model" --batches "$batch" --context "$context" --steps "$steps" \
    --no-eager ${FLAGS:-}
}
step_us() { python3 -c 'import json, sys
print(" ".join("%.1f" % json.loads(l)["us_per_step"] for l in open(sys.argv[1]) if l[:1] == "{"))' "$1"; }
run >"$out/plain.jsonl" 2>&1 || { echo "plain run failed" >&2; tail -5 "$out/plain.jsonl" >&2; exit 1; }
rm -f "$out/trace.csv" "$out/trace.csv.gz"  # never summarise an earlier run's trace
CUDA_INJECTION64_PATH=$lib DI_KERNEL_TRACE=$out/trace.csv run >"$out/traced.jsonl" 2>&1 ||
  { echo "traced run failed" >&2; tail -5 "$out/traced.jsonl" >&2; exit 1; }
[ -s "$out/trace.csv" ] || { echo "no trace written: did the CUDA driver load $lib?" >&2; exit 1; }
# CUPTI drops records when its buffers fill; the summary would then cover part of the steps.
grep -h "di_kernel_trace:" "$out/traced.jsonl" >&2 && echo "trace_device_forward.sh: see above" >&2
echo "us per step: plain $(step_us "$out/plain.jsonl"), traced $(step_us "$out/traced.jsonl")"
python3 "$here/kernel_trace_summary.py" "$out/trace.csv" --last "$steps" \
  --step-csv "$out/step.csv" >"$out/summary.txt" || exit 1
gzip -f "$out/trace.csv"
cat "$out/summary.txt"
