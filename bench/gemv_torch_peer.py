"""The peer for bench_gpu_gemv: the same V4-Flash decode shapes through PyTorch on the same GPU.

Runs on the GPU host (torch is there), next to bench_gpu_gemv in the same call, e.g.
    source gpu-bundle/env.sh && bench_gpu_gemv && python3 bench/gemv_torch_peer.py
Two peers per shape and row count, timed like bench_gpu_gemv (64 weight copies so every launch
reads cold HBM, CUDA events around 64 launches, here replayed from a CUDA graph):
  torch_bf16_linear  F.linear with bf16 weights (what a framework without FP8 kernels runs; twice
                     the weight bytes of ours),
  torch_fp8_scaled_mm torch._scaled_mm with e4m3 weights and per-tensor scales (cuBLASLt FP8; rows
                     padded to 16, the smallest M it takes). Block scales are not applied.
Prints one JSON object per line.
"""
import json

import torch

SHAPES = [("wq_b", 32768, 1024), ("wo_a", 8192, 4096), ("wo_b", 4096, 8192),
          ("shared_w1", 2048, 4096), ("wq_a", 1024, 4096)]
COPIES = 64


def time_us(fn):
    # The 64 launches are captured in a CUDA graph and replayed, so Python's per-call overhead
    # (~20 us, more than these kernels take) does not hide the GPU time.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn(0)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for c in range(COPIES):
            fn(c)
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    graph.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / COPIES


def main():
    dev = torch.device("cuda")
    torch.manual_seed(1)
    for name, out, inp in SHAPES:
        w_bf16 = [torch.randn(out, inp, device=dev, dtype=torch.bfloat16) for _ in range(COPIES)]
        w_fp8 = [w.to(torch.float8_e4m3fn) for w in w_bf16]
        one = torch.ones((), device=dev, dtype=torch.float32)
        for rows in (1, 8):
            x = torch.randn(rows, inp, device=dev, dtype=torch.bfloat16)
            us = time_us(lambda c: torch.nn.functional.linear(x, w_bf16[c]))
            print(json.dumps({"peer": "torch_bf16_linear", "shape": name, "rows": rows,
                              "us": round(us, 2),
                              "weight_tb_s": round(out * inp * 2 / (us * 1e-6) / 1e12, 3)}))
            x16 = torch.zeros(16, inp, device=dev, dtype=torch.bfloat16)
            x16[:rows] = x
            x8 = x16.to(torch.float8_e4m3fn)
            try:
                us = time_us(lambda c: torch._scaled_mm(x8, w_fp8[c].t(), scale_a=one,
                                                        scale_b=one, out_dtype=torch.bfloat16))
                print(json.dumps({"peer": "torch_fp8_scaled_mm", "shape": name, "rows": rows,
                                  "us": round(us, 2),
                                  "weight_tb_s": round(out * inp / (us * 1e-6) / 1e12, 3)}))
            except RuntimeError as e:  # an older torch or cuBLASLt without this FP8 shape
                print(json.dumps({"peer": "torch_fp8_scaled_mm", "shape": name, "rows": rows,
                                  "error": str(e).splitlines()[0]}))
        del w_bf16, w_fp8
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
