#!/usr/bin/env bash
# A change to the attention kernels against the programs built from the commit before it, in one
# call on the GPU host: the 8K-token prefill layers (bench_prefill, default and folded experts),
# decode layers at batch 64 and 256 (bench_decode), the device forward's prompt chunks (the mid
# model of bench/ab_check.sh), base then new; the full gpu_tests; then the same prefill layers in
# torch ops (the peer) in the same call. After `source gpu-bundle/env.sh` (docs/gpu.md), the bundle
# holding gpu_tests, bench_prefill, bench_decode, bench_device_forward and deepinfer-model,
# BASE_DIR the base build's bench_prefill, bench_decode and bench_device_forward (~8 minutes):
#   bench/attention_check.sh OUT_DIR BASE_DIR
set -uo pipefail
out=${1:?OUT_DIR}
base=${2:?BASE_DIR}
mkdir -p "$out"
layers='
import json, sys
for l in open(sys.argv[1]):
    if not l.startswith("{") or "layer_us" not in l: continue
    r = json.loads(l)
    k = {x["name"]: x for x in r["kernels"]}
    print(sys.argv[2], r["mode"], r["layer"], "b%d" % r["batch"], "ctx%d" % r["context"],
          "layer_us", r["layer_us"], "attention_us", k["attention"]["us"],
          "TFLOP/s", k["attention"]["tflop_s"])'
for variant in base new; do
  dir=""
  [ "$variant" = base ] && dir="$base/"
  timeout 100 "${dir}bench_prefill" --contexts 8192 --layers 4 --reps 3 \
    >"$out/prefill_${variant}.jsonl" 2>&1
  python3 -c "$layers" "$out/prefill_${variant}.jsonl" "$variant"
  timeout 100 "${dir}bench_prefill" --contexts 8192 --layers 4 --reps 3 --experts folded \
    >"$out/prefill_folded_${variant}.jsonl" 2>&1
  python3 -c "$layers" "$out/prefill_folded_${variant}.jsonl" "$variant folded"
  timeout 120 "${dir}bench_decode" --layers 8 --batches 64,256 --contexts 4096,32768 \
    >"$out/decode_${variant}.jsonl" 2>&1
  python3 -c "$layers" "$out/decode_${variant}.jsonl" "$variant"
done
model=$(mktemp -d)/m
deepinfer-model make-tiny --out "$model" --quantize fp8-fp4 --seed 21 --vocab 8192 --hidden 4096 \
  --heads 64 --head-dim 512 --rope-dim 64 --q-lora 1024 --o-groups 8 --o-lora 1024 --window 128 \
  --index-heads 64 --index-head-dim 128 --index-topk 512 --experts 32 --top-k 6 --moe-inter 2048 \
  --ratios 0,4,128,4 --hash-layers 1 >/dev/null
for variant in base new; do
  bin=bench_device_forward
  [ "$variant" = base ] && bin="$base/bench_device_forward"
  timeout 100 "$bin" --model "$model" --prefill 512,2048 --context 4096 \
    >"$out/forward_prefill_${variant}.jsonl" 2>&1
  echo "forward $variant"; grep '^{' "$out/forward_prefill_${variant}.jsonl" | tail -2
done
rm -rf "$(dirname "$model")"
timeout 300 gpu_tests >"$out/tests.txt" 2>&1
echo "gpu_tests exit $?"
grep -E "^\[  (PASSED|FAILED)|^\[  FAILED|Failure|tests ran" "$out/tests.txt" | head -20
timeout 150 python3 "$(dirname "$0")/decode_torch_peer.py" --prefill 8192 --contexts 8192 \
  >"$out/peer.jsonl" 2>&1
echo "peer exit $?"
grep '^{' "$out/peer.jsonl" | head -4
