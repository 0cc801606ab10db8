#!/usr/bin/env bash
# Regenerates tests/data/golden. Two halves, because transformers lives only on the GPU host:
#   tools/reference/make_golden.sh prepare      # here: build the tiny checkpoints into .golden/
#   (device) bash tools/reference/make_golden.sh reference   # GPU host: run transformers
#   tools/reference/make_golden.sh install DIR  # here: copy the results from DIR into tests/data
set -euo pipefail
cd "$(dirname "$0")/../.."
G=.golden
case "${1:-}" in
  prepare)
    rm -rf $G && mkdir -p $G
    M=build/bin/deepinfer-model
    $M make-tiny --out $G/tiny-fp8 --quantize fp8-fp4 --seed 7
    $M make-tiny --out $G/tiny-f32 --seed 3 --vocab 256
    $M make-tiny --out $G/tiny-bf16 --quantize bf16 --seed 11 --hidden 64 --vocab 128
    $M make-tiny --out $G/tiny-var --quantize fp8-fp4 --seed 21 --vocab 384 --hidden 256 --heads 8 \
      --head-dim 128 --rope-dim 32 --q-lora 128 --o-groups 4 --o-lora 64 --window 64 \
      --index-heads 16 --index-head-dim 64 --index-topk 512 --experts 16 --top-k 4 --moe-inter 96 \
      --ratios 0,4,128,0,4,128 --hash-layers 1 --max-position 4096
    for n in fp8 f32 bf16 var; do cp tests/data/golden/tiny-$n/tokens.txt $G/tokens-$n.txt; done
    ;;
  reference)
    cd $G
    export PYTHONUNBUFFERED=1
    R=../tools/reference/golden.py
    python3 $R --model tiny-fp8 --out out-fp8 --tokens-file tokens-fp8.txt --splits 150 37 \
      --chunks 1,3,128,60,108 --mtp
    python3 $R --model tiny-f32 --out out-f32 --tokens-file tokens-f32.txt --splits 257 \
      --chunks 129,127,264 --mtp
    python3 $R --model tiny-var --out out-var --tokens-file tokens-var.txt --splits 150 61 --mtp
    python3 $R --model tiny-bf16 --out out-bf16 --tokens-file tokens-bf16.txt --splits 100 --mtp \
      --save-pretrained-out hf-bf16
    tar czf "${OUT:-.}/golden.tgz" out-fp8 out-f32 out-var out-bf16 hf-bf16
    ;;
  install)
    src=${2:?usage: make_golden.sh install DIR}
    for n in fp8 f32 var bf16; do
      cp "$src/out-$n/full.npy" "$src/out-$n/mtp.npy" tests/data/golden/tiny-$n/
    done
    (cd "$src/hf-bf16" && tar czf - config.json model.safetensors) > tests/data/golden/tiny-bf16/save_pretrained.tgz
    cp "$src/out-bf16/save_pretrained_keys.json" tests/data/golden/tiny-bf16/
    ;;
  *) sed -n '2,6p' "$0"; exit 2 ;;
esac
