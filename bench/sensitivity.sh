#!/usr/bin/env bash
# How far the reference numerics carry last-bit differences on random checkpoints, by how much
# each layer moves the residual streams: `deepinfer-model logits --perturb-seed` (every product
# and attention output moved one ulp, a seeded coin per value: what another summation order
# does) against the unperturbed CPU forward, on the kernel-shaped checkpoint of
# bench/gpu_agreement.sh at several --residual-gain / --expert-gain settings. CPU only, ~3 min.
#   bench/sensitivity.sh [BIN_DIR]   (BIN_DIR defaults to build/bin)
# Prints per setting and seed: max and p99 per-position relative error, argmax agreement.
set -euo pipefail
bin=${1:-build/bin}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tokens=$(python3 -c 'print(",".join(str((37 * i + 5) % 512) for i in range(300)))')
kernel_shaped=(--quantize fp8-fp4 --seed 14 --hidden 512 --heads 16 --head-dim 512 --rope-dim 64
  --q-lora 256 --o-groups 2 --o-lora 256 --window 64 --index-heads 64 --index-head-dim 128
  --index-topk 16 --experts 16 --top-k 4 --moe-inter 256)
compare() {  # the standard library only: the dev VM has no numpy
  python3 - "$1" "$2" <<'PY'
import array, ast, struct, sys
def load(path):
    with open(path, "rb") as f:
        f.read(6)
        major = f.read(2)[0]
        size = struct.unpack("<H" if major == 1 else "<I", f.read(2 if major == 1 else 4))[0]
        header = ast.literal_eval(f.read(size).decode())
        values = array.array("f")
        values.frombytes(f.read())
    return header["shape"], values
(rows, cols), got = load(sys.argv[1])
_, want = load(sys.argv[2])
errs, same = [], 0
for r in range(rows):
    g, w = got[r * cols:(r + 1) * cols], want[r * cols:(r + 1) * cols]
    errs.append(max(abs(a - b) for a, b in zip(g, w)) / max(abs(b) for b in w))
    same += max(range(cols), key=g.__getitem__) == max(range(cols), key=w.__getitem__)
errs.sort()
print(f"max {errs[-1]:.2e}  p99 {errs[int(0.99 * (rows - 1))]:.2e}  argmax {100 * same / rows:.1f} %")
PY
}
for gains in "1 4" "0.25 4" "1 1" "0.25 1" "0.1 1" "0.05 1"; do
  read -r residual expert <<<"$gains"
  "$bin/deepinfer-model" make-tiny --out "$work/m" "${kernel_shaped[@]}" \
    --residual-gain "$residual" --expert-gain "$expert" >/dev/null
  "$bin/deepinfer-model" logits --model "$work/m" --tokens "$tokens" --numerics reference \
    --threads 2 --out "$work/ref.npy" >/dev/null
  for seed in 1 2; do
    "$bin/deepinfer-model" logits --model "$work/m" --tokens "$tokens" --numerics reference \
      --threads 2 --perturb-seed "$seed" --out "$work/moved.npy" >/dev/null
    printf 'residual gain %-5s expert gain %-3s seed %s  ' "$residual" "$expert" "$seed"
    compare "$work/moved.npy" "$work/ref.npy"
  done
  rm -rf "$work/m"
done
