#!/usr/bin/env bash
# deepinferd's draws on the device, two builds interleaved: 8 clients (4 requests of 32 tokens
# each, 64-id prompts) on the kernel-shaped random checkpoint at V4's 129,280 ids, one line per
# round, build and sampling setting: `LABEL stepper_sampled_tokens=N <deepinfer bench JSON>`.
# Then a mean ITL p50 and tokens/s per build and setting. On the GPU host, after
# `source …/env.sh` (docs/gpu.md):
#   bench/device_sampling_ab.sh BEFORE_BIN_DIR AFTER_BIN_DIR [ROUNDS] [-- SAMPLING_FLAGS...]
# Each BIN_DIR holds deepinferd and deepinfer (the checkpoint is made with AFTER's
# deepinfer-model). Default settings: temperature 1 alone (V4's card) and top-p 0.95 at T 0.8;
# with `-- FLAGS` one setting of your own (e.g. -- --temperature 0.3 --top-p 0.9).
# DEVICE_SAMPLING=off draws on the host instead (the host sampler's cost at V4's vocabulary).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib/daemon_bench.sh"
before=${1:?BEFORE_BIN_DIR}
after=${2:?AFTER_BIN_DIR}
shift 2
rounds=3
if [ $# -gt 0 ] && [ "$1" != -- ]; then
  rounds=$1
  shift
fi
settings=("--temperature 1" "--temperature 0.8 --top-p 0.95")
if [ $# -gt 0 ] && [ "$1" = -- ]; then
  shift
  settings=("$*")
fi
bench_model "$after" --quantize fp8-fp4 --seed 14 --hidden 512 --heads 16 --head-dim 512 \
  --rope-dim 64 --q-lora 256 --o-groups 2 --o-lora 256 --window 64 --index-heads 64 \
  --index-head-dim 128 --index-topk 16 --experts 16 --top-k 4 --moe-inter 256 --vocab 129280
out=$(mktemp)
for _ in $(seq 1 "$rounds"); do
  for build in before after; do
    bin=$before
    [ "$build" = after ] && bin=$after
    for setting in "${settings[@]}"; do
      # shellcheck disable=SC2086  # a setting is several flags
      STATUS_KEYS=stepper_sampled_tokens run_mode "$bin" "$build ${setting// /_}" \
        --device "${DEVICE:-cuda}" --forward slots --prefix-cache-bytes 0 --slot-context 1024 \
        --batch-requests 8 --step-token-budget 256 --threads 2 \
        --device-sampling "${DEVICE_SAMPLING:-on}" -- --clients 8 --requests 4 --own-ids 16 \
        --prompt-ids "$(prompt_ids 64)" --max-tokens 32 $setting
    done
  done
done | tee "$out"
python3 - "$out" <<'PY'
import collections, json, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    label = line.split(" stepper_sampled_tokens")[0]
    j = json.loads(line[line.index("{"):])
    runs[label].append((j["itl_ms_p50"], j["tokens_per_s"]))
for label, v in runs.items():
    print("%-40s ITL p50 %.3f ms  tokens/s %.0f  (%d rounds)"
          % (label, sum(x[0] for x in v) / len(v), sum(x[1] for x in v) / len(v), len(v)))
PY
rm -f "$out"
