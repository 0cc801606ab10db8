#!/usr/bin/env bash
# The CUDA backend against the CPU backend on whole tiny checkpoints: `deepinfer-model logits`
# with --device cuda and --device cpu, both numerics, prefill in one chunk and decode from position
# 150; then the device forward (--forward device: decode steps, then prompt chunks of 64, 100 and
# 136 tokens; production and CPU-order kernels) on a checkpoint with the production kernels'
# shapes against the CPU's prefill, and the production kernels on the same shapes made tame
# (--residual-gain 0.05 --expert-gain 1).
# Prints the per-position relative error (max, p99) and argmax agreement. Run on the GPU host
# (docs/gpu.md): bench/gpu_agreement.sh [BIN_DIR]   (BIN_DIR defaults to the PATH).
set -euo pipefail
bin=${1:-}
model() { "${bin:+$bin/}deepinfer-model" "$@"; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tokens=$(python3 -c 'print(",".join(str((37 * i + 5) % 512) for i in range(300)))')
compare() { python3 "$(dirname "$0")/lib/compare_logits.py" "$1" "$2"; }  # cuda, cpu
for spec in "--seed 11" "--seed 12 --hidden 256" "--seed 13 --hidden 512 --heads 8"; do
  dir="$work/ck"
  rm -rf "$dir"
  model make-tiny --out "$dir" --quantize fp8-fp4 $spec >/dev/null
  for numerics in exact reference; do
    for mode in prefill decode; do
      extra=()
      [[ $mode == decode ]] && extra=(--decode-from 150)
      for dev in cpu cuda; do
        model logits --model "$dir" --tokens "$tokens" --numerics "$numerics" --device "$dev" \
          "${extra[@]}" --out "$work/$dev.npy" >/dev/null
      done
      printf '%-32s %-9s %-7s ' "$spec" "$numerics" "$mode"
      compare "$work/cuda.npy" "$work/cpu.npy"
    done
  done
done
dir="$work/ck"
rm -rf "$dir"
kernel_shaped="--seed 14 --hidden 512 --heads 16 --head-dim 512 --rope-dim 64 --q-lora 256 \
--o-groups 2 --o-lora 256 --window 64 --index-heads 64 --index-head-dim 128 --index-topk 16 \
--experts 16 --top-k 4 --moe-inter 256"
model make-tiny --out "$dir" --quantize fp8-fp4 $kernel_shaped >/dev/null
model logits --model "$dir" --tokens "$tokens" --numerics reference --out "$work/cpu.npy" >/dev/null
for kernels in production cpu-order; do
  for plan in "--decode-from 1" "--chunks 64,100,136"; do  # decode steps; prompt chunks
    model logits --model "$dir" --tokens "$tokens" --numerics reference --device cuda \
      --forward device --kernels "$kernels" $plan --out "$work/cuda.npy" >/dev/null
    printf '%-32s %-9s %-7s ' "kernel-shaped, seed 14" reference "device forward, $kernels, $plan"
    compare "$work/cuda.npy" "$work/cpu.npy"
  done
done
# The same shapes as a tame model (each layer moves the residual streams by a few per cent, as a
# trained model's do; docs/gpu.md, "How much of that is the random model"): the production
# kernels against the CPU where the CPU's own last-bit noise stays inside 1e-2.
rm -rf "$dir"
model make-tiny --out "$dir" --quantize fp8-fp4 $kernel_shaped --residual-gain 0.05 \
  --expert-gain 1 >/dev/null
model logits --model "$dir" --tokens "$tokens" --numerics reference --out "$work/cpu.npy" >/dev/null
for plan in "--decode-from 1" "--chunks 64,100,136"; do
  model logits --model "$dir" --tokens "$tokens" --numerics reference --device cuda \
    --forward device --kernels production $plan --out "$work/cuda.npy" >/dev/null
  printf '%-32s %-9s %-7s ' "kernel-shaped, tame" reference "device forward, production, $plan"
  compare "$work/cuda.npy" "$work/cpu.npy"
done
