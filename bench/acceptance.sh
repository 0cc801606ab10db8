#!/usr/bin/env bash
# Issue 7's acceptance run on a checkpoint (official tensor names, FP8 dense weights, FP4 experts),
# on the GPU host after `source gpu-bundle/env.sh` (docs/gpu.md):
#   - `deepinfer-model logits --device cuda` against `--device cpu`, in each numerics, for the
#     prompt in one chunk (prefill) and for decode steps after its first half;
#   - the device forward's production kernels (`--forward device`, reference numerics) against the
#     CPU, as decode steps from the first token and as prompt chunks of 64, 100 and 136 tokens.
# Each line: the per-position relative error (max, p99), argmax agreement and PASS or FAIL against
# the bound (max below 1e-2, argmax above 99 %); the exit status is 1 if any line fails.
#   bench/acceptance.sh MODEL_DIR [TOKENS_FILE] [BIN_DIR]
# TOKENS_FILE: comma-separated ids (default: 300 fixed pseudo-random ids below the vocabulary and
# the model's positions). DEVICE=cpu runs the same lines with the CPU on both sides (a check of
# the script itself, without a GPU; the device forward's lines need CUDA and are skipped).
set -euo pipefail
model_dir=${1:?MODEL_DIR}
tokens_file=${2:-}
bin=${3:-}
device=${DEVICE:-cuda}
here=$(dirname "$0")
model() { "${bin:+$bin/}deepinfer-model" "$@"; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [[ -z $tokens_file ]]; then
  tokens_file="$work/tokens.txt"
  python3 - "$model_dir/config.json" >"$tokens_file" <<'PY'
import json, sys
cfg = json.load(open(sys.argv[1]))
n = min(300, int(cfg.get("max_position_embeddings", 300)) - 1)
vocab = int(cfg["vocab_size"])
print(",".join(str((7919 * i + 13) % vocab) for i in range(n)))
PY
fi
n_tokens=$(tr ',' '\n' <"$tokens_file" | grep -c .)
failed=0
check() {  # label test.npy reference.npy
  printf '%-44s ' "$1"
  python3 "$here/lib/compare_logits.py" "$2" "$3" --bound 1e-2 --agree 0.99 || failed=1
}
for numerics in exact reference; do
  for mode in prefill decode; do
    extra=()
    [[ $mode == decode ]] && extra=(--decode-from $((n_tokens / 2)))
    for side in ref test; do
      dev=cpu
      [[ $side == test ]] && dev=$device
      model logits --model "$model_dir" --tokens-file "$tokens_file" --numerics "$numerics" \
        --device "$dev" "${extra[@]}" --out "$work/$side.npy" >/dev/null
    done
    check "--device $device, $numerics, $mode" "$work/test.npy" "$work/ref.npy"
  done
done
if [[ $device == cuda ]]; then
  model logits --model "$model_dir" --tokens-file "$tokens_file" --numerics reference \
    --out "$work/ref.npy" >/dev/null
  for plan in "--decode-from 1" "--chunks 64,100,136"; do
    model logits --model "$model_dir" --tokens-file "$tokens_file" --numerics reference \
      --device cuda --forward device --kernels production $plan --out "$work/test.npy" >/dev/null
    check "device forward, production, ${plan#--}" "$work/test.npy" "$work/ref.npy"
  done
fi
exit $failed
