#!/usr/bin/env bash
# A change to the folded expert GEMM (kernels/expert_fp4_wgmma.cu) against the programs built from
# the commit before it, in one call on the GPU host: its tests and the device forward's, then the
# 8K-token prefill experts (bench_prefill --experts folded), base and new in two interleaved
# rounds. After `source gpu-bundle/env.sh` (docs/gpu.md), the bundle holding gpu_tests and
# bench_prefill, BASE_DIR the base build's bench_prefill (~2 minutes). With the host's toolkit
# (cuobjdump), also the new kernel's SASS and its opcode counts (OUT_DIR/sass.txt):
#   bench/folded_check.sh OUT_DIR BASE_DIR
set -uo pipefail
out=${1:?OUT_DIR}
base=${2:?BASE_DIR}
mkdir -p "$out"
timeout 120 gpu_tests --gtest_filter='ExpertFp4Wgmma*:DeviceFoldedExperts*:ExpertFp4GpuTest*' \
  --gtest_output="xml:$out/tests.xml" >"$out/tests.txt" 2>&1
echo "gpu_tests exit $?"
grep -E "^\[  (PASSED|FAILED)|^\[  FAILED|Failure|folded vs" "$out/tests.txt" | head -20
grep -o 'worst_error[^/]*' "$out/tests.xml" | head
summary='
import json, sys
for l in open(sys.argv[1]):
    if not l.startswith("{") or "layer_us" not in l: continue
    r = json.loads(l)
    k = {x["name"]: x for x in r["kernels"]}["routed_experts"]
    print(sys.argv[2], r["layer"], r["layer_us"], "experts us", k["us"], "TFLOP/s", k["tflop_s"])'
for round in 1 2; do
  for variant in base new; do
    bin=bench_prefill
    [ "$variant" = base ] && bin="$base/bench_prefill"
    timeout 100 "$bin" --contexts 8192 --layers 4 --reps 3 --experts folded \
      >"$out/prefill_${variant}_$round.jsonl" 2>&1
    python3 -c "$summary" "$out/prefill_${variant}_$round.jsonl" "$variant"
  done
done
if command -v cuobjdump >/dev/null; then
  cuobjdump -sass "$(command -v bench_prefill)" |
    awk '/Function : .*Fp4ExpertWgmmaKernel/{on=1} on{print} on&&/^[[:space:]]*\.\.\.\.\.\.\.\./{exit}' \
      >"$out/sass.txt"
  echo "SASS lines: $(wc -l <"$out/sass.txt")"
  grep -oE '^\s+/\*[0-9a-f]+\*/\s+[@!A-Z0-9_.]+( [A-Z0-9_.]+)?' "$out/sass.txt" |
    awk '{op=$2; if (op ~ /^@/) op=$3; sub(/\..*/, "", op); n[op]++} END {for (o in n) print n[o], o}' |
    sort -rn | head -25
fi
