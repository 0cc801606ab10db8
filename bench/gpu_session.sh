#!/usr/bin/env bash
# One call on the GPU host that checks and measures what docs/gpu.md and bench/RESULTS-gpu.md
# report, each part under its own time limit, its output kept in OUT_DIR:
#   gpu_tests                      every kernel and the device forward against the CPU
#   bench/gpu_agreement.sh         whole tiny models, --device cuda and --forward device vs cpu
#   bench_device_forward           decode steps (batch 1, 8, 32, 64) and prompt chunks (128, 512)
#                                  on the 4-layer V4-shaped checkpoint
#   bench_decode (8 layer copies)  decode steps of V4-Flash-shaped layers at batch 1, 8, 64, 4K
#                                  context, the experts as the device forward takes them
#   bench_prefill --contexts 8192  one 8K chunk through V4-Flash-shaped layers
#   bench/turns.sh (DEVICE=cuda)   conversation turns on the device forward, parked and not
#   bench_gpu_sampler              the GPU sampler's draws at V4's vocabulary, 1 to 64 rows
#   profile (not in the default)   bench/profile_device_forward.sh and bench/profile_experts.sh
# Run from the repository root after `source gpu-bundle/env.sh` (docs/gpu.md), the programs on
# the PATH:  bench/gpu_session.sh OUT_DIR [PART...]   (parts: tests agreement forward decode
# prefill turns sampler profile; default all but profile). Takes about 10 minutes in all.
set -uo pipefail
out=${1:?OUT_DIR}
shift
parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(tests agreement forward decode prefill turns sampler)
mkdir -p "$out"
bin=$(dirname "$(command -v deepinfer-model)")
mid=(--quantize fp8-fp4 --seed 21 --vocab 8192 --hidden 4096 --heads 64 --head-dim 512
  --rope-dim 64 --q-lora 1024 --o-groups 8 --o-lora 1024 --window 128 --index-heads 64
  --index-head-dim 128 --index-topk 512 --experts 32 --top-k 6 --moe-inter 2048 --ratios 0,4,128,4
  --hash-layers 1)
kernel_shaped=(--quantize fp8-fp4 --seed 14 --hidden 512 --heads 16 --head-dim 512 --rope-dim 64
  --q-lora 256 --o-groups 2 --o-lora 256 --window 64 --index-heads 64 --index-head-dim 128
  --index-topk 16 --experts 16 --top-k 4 --moe-inter 256)
for part in "${parts[@]}"; do
  echo "== $part"
  case $part in
    tests)
      timeout 330 gpu_tests >"$out/gpu_tests.txt" 2>&1
      echo "gpu_tests exit $?"
      grep -E "FAILED|PASSED|positions" "$out/gpu_tests.txt" | head -20
      ;;
    agreement)
      timeout 200 bash bench/gpu_agreement.sh >"$out/agreement.txt" 2>&1
      echo "agreement exit $?"
      cat "$out/agreement.txt"
      ;;
    forward)
      model=$(mktemp -d)/m
      deepinfer-model make-tiny --out "$model" "${mid[@]}" >/dev/null
      timeout 120 bench_device_forward --model "$model" --batches 1,8,32,64 --context 1024 \
        >"$out/device_forward.jsonl" 2>&1
      timeout 120 bench_device_forward --model "$model" --prefill 128,512 --context 1024 \
        >"$out/device_forward_prefill.jsonl" 2>&1
      rm -rf "$(dirname "$model")"
      tail -n 12 "$out/device_forward.jsonl" "$out/device_forward_prefill.jsonl"
      ;;
    decode)
      timeout 150 bench_decode --layers 8 --batches 1,8,64 --contexts 4096 >"$out/decode.jsonl" 2>&1
      echo "bench_decode exit $?"
      python3 bench/decode_table.py "$out/decode.jsonl" \
        bench/data/decode/h200-2026-11-30-glue-torch-peer.jsonl
      ;;
    prefill)
      timeout 200 bench_prefill --contexts 8192 >"$out/prefill.jsonl" 2>&1
      echo "bench_prefill exit $?"
      python3 bench/decode_table.py "$out/prefill.jsonl" \
        bench/data/decode/h200-2026-11-30-glue-prefill-torch-peer.jsonl --prefill
      ;;
    turns)
      DEVICE=cuda timeout 200 bench/turns.sh "$bin" "${kernel_shaped[@]}" >"$out/turns.txt" 2>&1
      echo "turns exit $?"
      cat "$out/turns.txt"
      ;;
    sampler)
      timeout 60 bench_gpu_sampler --rows 1,8,32,64 >"$out/sampler.jsonl" 2>&1
      echo "bench_gpu_sampler exit $?"
      python3 -c 'import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        r = json.loads(l)
        print("%3d %-22s %-6s %8.1f us" % (r["rows"], r["kind"], r["path"], r["us_per_call"]))' \
        "$out/sampler.jsonl"
      ;;
    profile)
      timeout 300 bash bench/profile_device_forward.sh "$out/profile" >"$out/profile.txt" 2>&1
      echo "profile exit $?"
      head -30 "$out/profile.txt"
      timeout 90 bash bench/profile_experts.sh "$out/profile/model" "$out/ncu_experts.txt"
      echo "profile_experts exit $?"
      grep -E "Fp4ExpertKernel|Duration|DRAM Throughput|L1/TEX Cache Throughput|Registers Per|Achieved Occupancy|Waves Per SM" \
        "$out/ncu_experts.txt"
      gzip -f "$out/profile/ncu.csv"
      rm -rf "$out/profile/model"
      ;;
    *) echo "unknown part $part" ;;
  esac
done
