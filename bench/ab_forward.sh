#!/usr/bin/env bash
# The device forward against a variant of itself, in interleaved rounds on the mid model
# (bench/lib/mid_model.sh), CUDA graphs only: a lighter bench/ab_check.sh for changes that need
# no layer benchmark. VARIANT is either a flag of bench_device_forward (e.g. --no-early-weights:
# the same binary with the switch) or the path of a base build's bench_device_forward. After
# `source gpu-bundle/env.sh` (docs/gpu.md), the bundle holding bench_device_forward and
# deepinfer-model:
#   bench/ab_forward.sh OUT_DIR VARIANT [BATCHES=1,4,8] [CONTEXT=512] [ROUNDS=2]
# Writes OUT_DIR/{main,variant}-ROUND.jsonl and prints µs per step (fraction of the HBM floor).
set -uo pipefail
source "$(dirname "$0")/lib/mid_model.sh"
out=${1:?OUT_DIR}
variant=${2:?VARIANT}
batches=${3:-1,4,8}
context=${4:-512}
rounds=${5:-2}
mkdir -p "$out"
model=$(mktemp -d)/m
mid_model "$model"
for round in $(seq 1 "$rounds"); do
  for which in main variant; do
    cmd=(bench_device_forward)
    if [ "$which" = variant ]; then
      case $variant in
        --*) cmd+=("$variant") ;;
        *) cmd=("$variant") ;;
      esac
    fi
    timeout 120 "${cmd[@]}" --model "$model" --batches "$batches" --context "$context" \
      --no-eager >"$out/$which-$round.jsonl" 2>&1
    forward_summary "$out/$which-$round.jsonl" "$which ($([ "$which" = main ] && echo \
      bench_device_forward || echo "$variant")), round $round"
  done
done
rm -rf "$(dirname "$model")"
