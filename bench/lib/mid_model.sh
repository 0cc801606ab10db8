# Sourced by the device-forward A/B scripts (bench/ab_check.sh, bench/ab_forward.sh).

# mid_model PATH: the mid model at PATH — four V4-Flash-shaped layers (hidden 4096, 64 heads of
# 512, sliding / CSA / HCA / CSA), 32 experts top-6, FP8/FP4, 8,192 ids.
mid_model() {
  deepinfer-model make-tiny --out "$1" --quantize fp8-fp4 --seed 21 --vocab 8192 --hidden 4096 \
    --heads 64 --head-dim 512 --rope-dim 64 --q-lora 1024 --o-groups 8 --o-lora 1024 --window 128 \
    --index-heads 64 --index-head-dim 128 --index-topk 512 --experts 32 --top-k 6 \
    --moe-inter 2048 --ratios 0,4,128,4 --hash-layers 1 >/dev/null
}

# forward_summary FILE LABEL: one line of bench_device_forward's JSON lines in FILE, µs per step
# and the fraction of the HBM floor per batch.
forward_summary() {
  python3 - "$1" "$2" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print(sys.argv[2], " ".join("b%d:%.1f(%.3f)" % (r["batch"], r["us_per_step"], r["of_floor"])
                            for r in rows))
PY
}
