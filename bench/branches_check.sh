#!/usr/bin/env bash
# The check behind the cluster collapse and the concurrent branches (bench/RESULTS-gpu.md, twelfth
# session): the full gpu_tests, then the device forward and the V4-Flash-shaped layers against
# the same programs built from the commit before (BASE_DIR), and the forward with --no-branches.
# On the GPU host after `source gpu-bundle/env.sh` (docs/gpu.md), the bundle holding gpu_tests,
# bench_device_forward, bench_decode and deepinfer-model (~7 minutes):
#   bench/branches_check.sh OUT_DIR BASE_DIR
set -uo pipefail
out=${1:?OUT_DIR}
base=${2:?BASE_DIR}
mkdir -p "$out"
timeout 300 gpu_tests >"$out/tests.txt" 2>&1
echo "gpu_tests exit $?"
grep -E "^\[  (PASSED|FAILED)|^\[  FAILED|Failure|seed|tests ran" "$out/tests.txt" | head -20
model=$(mktemp -d)/m
deepinfer-model make-tiny --out "$model" --quantize fp8-fp4 --seed 21 --vocab 8192 --hidden 4096 \
  --heads 64 --head-dim 512 --rope-dim 64 --q-lora 1024 --o-groups 8 --o-lora 1024 --window 128 \
  --index-heads 64 --index-head-dim 128 --index-topk 512 --experts 32 --top-k 6 --moe-inter 2048 \
  --ratios 0,4,128,4 --hash-layers 1 >/dev/null
summary='
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print(sys.argv[2], " ".join("b%d:%.1f" % (r["batch"], r["us_per_step"]) for r in rows))'
for round in 1 2; do
  for variant in base new no-branches; do
    case $variant in
      base) cmd=("$base/bench_device_forward") ;;
      new) cmd=(bench_device_forward) ;;
      no-branches) cmd=(bench_device_forward --no-branches) ;;
    esac
    timeout 100 "${cmd[@]}" --model "$model" --batches 1,4,8 --context 512 --no-eager \
      >"$out/fwd_${variant}_$round.jsonl" 2>&1
    python3 -c "$summary" "$out/fwd_${variant}_$round.jsonl" "forward $variant r$round"
  done
done
rm -rf "$(dirname "$model")"
layers='
import json, sys
for l in open(sys.argv[1]):
    if not l.startswith("{") or "layer_us" not in l: continue
    r = json.loads(l)
    k = {x["name"]: x["us"] for x in r["kernels"]}
    print(sys.argv[2], r["layer"], "b%d" % r["batch"], r["layer_us"], "mhc_pre", k.get("mhc_pre_attn"), k.get("mhc_pre_ffn"))'
for variant in base new; do
  bin=bench_decode
  [ "$variant" = base ] && bin="$base/bench_decode"
  timeout 120 "$bin" --layers 8 --batches 1,8 --contexts 4096 >"$out/decode_$variant.jsonl" 2>&1
  python3 -c "$layers" "$out/decode_$variant.jsonl" "$variant"
done
