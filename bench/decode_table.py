"""Markdown rows for bench/RESULTS-gpu.md from bench_decode / bench_prefill output and the peer's.

    python3 bench/decode_table.py OURS.jsonl PEER.jsonl [--prefill]

One row per layer kind, batch and context, in the order of OURS: time per layer, bytes that must
be read and their floor at 4.3 TB/s, the share of the floor, TFLOP/s, the peer's time and the
ratio ours / peer (from the same call), and the three largest kernels against their own floor.
"""
import argparse
import json


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ours")
    ap.add_argument("peer")
    ap.add_argument("--prefill", action="store_true")
    args = ap.parse_args()
    mode = "prefill" if args.prefill else "decode"
    peer = {(p["layer"], p["batch"], p["context"]): p["layer_us"] for p in load(args.peer)
            if p.get("mode") == mode}
    for r in load(args.ours):
        if r.get("mode") != mode:
            continue
        key = (r["layer"], r["batch"], r["context"])
        torch_us = peer.get(key)
        ratio = f"{r['layer_us'] / torch_us:.2f}" if torch_us else "—"
        top = sorted(r["kernels"], key=lambda k: -k["us"])[:3]
        ctx = f"{r['context'] // 1024}K"
        if args.prefill:
            kernels = "; ".join(f"{k['name']} {k['us'] / 1e3:.1f} ms, {k['tflop_s']:.0f} TFLOP/s"
                                for k in top)
            experts = next(k for k in r["kernels"] if k["name"] == "routed_experts")
            print(f"| {r['layer'].upper()} | {r['batch']} | {ctx} | {r['layer_us'] / 1e3:.1f} | "
                  f"{r['tflop_s']:.1f} | {100 * r['of_fp8_tensor_peak']:.1f} % | "
                  f"{torch_us / 1e3 if torch_us else float('nan'):.1f} | {ratio} | {kernels} | "
                  f"{experts['tflop_s']:.0f} ({100 * experts['tflop_s'] / 1979:.1f} %) |")
        else:
            kernels = "; ".join(f"{k['name']} {k['us']:.0f} µs ({100 * k['of_floor']:.0f} %)"
                                for k in top)
            print(f"| {r['layer'].upper()} | {r['batch']} | {ctx} | {r['layer_us']:.0f} | "
                  f"{r['must_read_mb']:.0f} | {r['hbm_floor_us']:.1f} | "
                  f"{100 * r['of_hbm_floor']:.0f} % | {r['tflop_s']:.1f} | "
                  f"{torch_us if torch_us else float('nan'):.0f} | {ratio} | {kernels} |")


if __name__ == "__main__":
    main()
