#!/usr/bin/env bash
# The check behind the FP8 dense products on the tensor cores (bench/RESULTS-gpu.md, twelfth
# session): its tests, the kernel against the CUDA-core GEMV, and the device forward with and
# without --no-dense-mma.
# On the GPU host after `source gpu-bundle/env.sh` (docs/gpu.md), the bundle holding gpu_tests,
# bench_gpu_gemv, bench_device_forward and deepinfer-model (~5 minutes):
#   bench/dense_mma_check.sh OUT_DIR
set -uo pipefail
out=${1:?OUT_DIR}
mkdir -p "$out"
timeout 120 gpu_tests --gtest_filter='LinearFp8Mma*:LinearFp8Gpu*' >"$out/tests_kernel.txt" 2>&1
echo "kernel tests exit $?"
grep -E "^\[  |Failure|seed" "$out/tests_kernel.txt" | head -20
timeout 60 bench_gpu_gemv >"$out/gemv.jsonl" 2>&1
echo "bench_gpu_gemv exit $?"
python3 -c '
import json, sys
for line in open(sys.argv[1]):
    if line.startswith("{") and "kernel" in line:
        r = json.loads(line)
        print(r["kernel"], r["shape"], r["rows"], r["us"], r["of_copy_ceiling"])' "$out/gemv.jsonl"
model=$(mktemp -d)/m
deepinfer-model make-tiny --out "$model" --quantize fp8-fp4 --seed 21 --vocab 8192 --hidden 4096 \
  --heads 64 --head-dim 512 --rope-dim 64 --q-lora 1024 --o-groups 8 --o-lora 1024 --window 128 \
  --index-heads 64 --index-head-dim 128 --index-topk 512 --experts 32 --top-k 6 --moe-inter 2048 \
  --ratios 0,4,128,4 --hash-layers 1 >/dev/null
for round in 1 2; do
  for flag in --no-dense-mma ""; do
    timeout 90 bench_device_forward --model "$model" --batches 1,2,4,8 --context 1024 --no-eager \
      $flag >"$out/fwd${flag}_$round.jsonl" 2>&1
    python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print(sys.argv[2], " ".join("b%d:%.1f" % (r["batch"], r["us_per_step"]) for r in rows))' \
      "$out/fwd${flag}_$round.jsonl" "forward ${flag:-mma} r$round"
  done
done
rm -rf "$(dirname "$model")"
timeout 200 gpu_tests --gtest_filter='DeviceForwardTest.DecodeMatchesTheCpuForward' \
  >"$out/tests_forward.txt" 2>&1
echo "forward test exit $?"
grep -E "^\[  |Failure|relative" "$out/tests_forward.txt" | head
