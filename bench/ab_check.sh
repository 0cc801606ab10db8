#!/usr/bin/env bash
# A device-forward change against the programs built from the commit before it, in one call on
# the GPU host: the full gpu_tests; the device forward at batch 1, 4 and 8 (context 512) and the
# V4-Flash-shaped layers at batch 1 and 8 (context 4096), base then new; then the headline steps
# (batch 1/8/32/64, context 1024) and the same whole steps in torch ops, the peer, in the same
# call. After `source gpu-bundle/env.sh` (docs/gpu.md), the bundle holding gpu_tests,
# bench_device_forward, bench_decode and deepinfer-model, BASE_DIR the base build's
# bench_device_forward and bench_decode (~8 minutes):
#   bench/ab_check.sh OUT_DIR BASE_DIR
set -uo pipefail
out=${1:?OUT_DIR}
base=${2:?BASE_DIR}
mkdir -p "$out"
timeout 300 gpu_tests >"$out/tests.txt" 2>&1
echo "gpu_tests exit $?"
grep -E "^\[  (PASSED|FAILED)|^\[  FAILED|Failure|seed|tests ran" "$out/tests.txt" | head -20
source "$(dirname "$0")/lib/mid_model.sh"
model=$(mktemp -d)/m
mid_model "$model"
for variant in base new; do
  bin=bench_device_forward
  [ "$variant" = base ] && bin="$base/bench_device_forward"
  timeout 100 "$bin" --model "$model" --batches 1,4,8 --context 512 --no-eager \
    >"$out/fwd_$variant.jsonl" 2>&1
  forward_summary "$out/fwd_$variant.jsonl" "forward $variant"
done
layers='
import json, sys
for l in open(sys.argv[1]):
    if not l.startswith("{") or "layer_us" not in l: continue
    r = json.loads(l)
    print(sys.argv[2], r["layer"], "b%d" % r["batch"], r["layer_us"], r["of_hbm_floor"])'
for variant in base new; do
  bin=bench_decode
  [ "$variant" = base ] && bin="$base/bench_decode"
  timeout 120 "$bin" --layers 8 --batches 1,8 --contexts 4096 >"$out/decode_$variant.jsonl" 2>&1
  python3 -c "$layers" "$out/decode_$variant.jsonl" "$variant"
done
timeout 120 bench_device_forward --model "$model" --batches 1,8,32,64 --context 1024 --no-eager \
  >"$out/fwd_headline.jsonl" 2>&1
forward_summary "$out/fwd_headline.jsonl" "headline"
rm -rf "$(dirname "$model")"
timeout 150 python3 "$(dirname "$0")/decode_torch_peer.py" --whole-step sliding,csa,hca,csa \
  --experts 32 --vocab 8192 --batches 1,8,32,64 --contexts 1024 >"$out/peer.jsonl" 2>&1
echo "peer exit $?"
grep '^{' "$out/peer.jsonl" | head -8
