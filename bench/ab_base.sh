#!/usr/bin/env bash
# The device forward against a base build's bench_device_forward, in interleaved rounds on the
# mid model of bench/ab_check.sh (V4-Flash-shaped layers, 32 experts), CUDA graphs only; a
# lighter bench/ab_check.sh for changes that need no layer benchmark. After
# `source gpu-bundle/env.sh` (docs/gpu.md), the bundle holding bench_device_forward and
# deepinfer-model:
#   bench/ab_base.sh OUT_DIR BASE_BIN [BATCHES=1,4,8] [CONTEXT=512] [ROUNDS=2]
set -uo pipefail
out=${1:?OUT_DIR}
base=${2:?BASE_BIN}
batches=${3:-1,4,8}
context=${4:-512}
rounds=${5:-2}
mkdir -p "$out"
model=$(mktemp -d)/m
deepinfer-model make-tiny --out "$model" --quantize fp8-fp4 --seed 21 --vocab 8192 --hidden 4096 \
  --heads 64 --head-dim 512 --rope-dim 64 --q-lora 1024 --o-groups 8 --o-lora 1024 --window 128 \
  --index-heads 64 --index-head-dim 128 --index-topk 512 --experts 32 --top-k 6 --moe-inter 2048 \
  --ratios 0,4,128,4 --hash-layers 1 >/dev/null
summary='
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print(sys.argv[2], " ".join("b%d:%.1f(%.3f)" % (r["batch"], r["us_per_step"], r["of_floor"]) for r in rows))'
for round in $(seq 1 "$rounds"); do
  for variant in base new; do
    bin=bench_device_forward
    [ "$variant" = base ] && bin=$base
    timeout 120 "$bin" --model "$model" --batches "$batches" --context "$context" --no-eager \
      >"$out/$variant-$round.jsonl" 2>&1
    python3 -c "$summary" "$out/$variant-$round.jsonl" "$variant, round $round"
  done
done
rm -rf "$(dirname "$model")"
