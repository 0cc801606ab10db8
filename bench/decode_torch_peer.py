"""The peer for bench_decode and bench_prefill: the same V4-Flash step of one layer in PyTorch ops.

Run on the GPU host (torch is there) in the same call as bench_decode, e.g.
    source gpu-bundle/env.sh && bench_decode && python3 bench/decode_torch_peer.py
It is what a framework without V4 kernels runs (the transformers port's math in plain torch ops):
bf16 weights and activations (PyTorch has no MXFP4 or 128x128-block FP8 product on Hopper, so
the peer reads 2x the dense and 4x the expert weight bytes), the compressed rows each query sees
already gathered, the indexer's scores and top-k over all compressed keys, attention with the
sink as an extra softmax column, Sinkhorn in 20 iterations, the router's top-k, the compressor
states pooled at a window end (decode), routed experts in a loop over the experts the batch
routes to (a static routing: a graph cannot hold a data-dependent loop). One layer's step is captured in a CUDA graph and replayed; prints
one JSON object per layer kind, batch and context.

--whole-step KINDS (e.g. sliding,csa,hca,csa) times whole decode steps instead, the peer of
bench_device_forward: the embedding, those layers in sequence, the HC head, the final norm and
the LM head (--vocab), with --experts routed experts per layer, one graph per step:
    python3 bench/decode_torch_peer.py --whole-step sliding,csa,hca,csa --experts 32 \
        --vocab 8192 --batches 1,8,32,64 --contexts 1024
"""
import argparse
import json
import math

import torch
import torch.nn.functional as F

H, HEADS, D, ROPE, QL, G, OL = 4096, 64, 512, 64, 1024, 8, 1024
E, TOPK, INTER, IH, ID, ITOP, WIN, HC = 256, 6, 2048, 64, 128, 512, 128, 4
dev = torch.device("cuda")
bf = torch.bfloat16


def w(*shape, dtype=bf):
    return (torch.randn(*shape, device=dev) / math.sqrt(shape[-1])).to(dtype)


def rms(x, weight=None, eps=1e-6):
    y = x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps).to(x.dtype)
    return y * weight if weight is not None else y


def rope(x, cos, sin, inverse=False):
    r = x[..., -ROPE:].float().unflatten(-1, (-1, 2))
    a, b = r[..., 0], r[..., 1]
    s = -sin if inverse else sin
    out = torch.stack((a * cos - b * s, b * cos + a * s), -1).flatten(-2)
    return torch.cat((x[..., :-ROPE], out.to(x.dtype)), -1)


class Layer:
    def __init__(self, kind, batch, context, prefill=False):
        csa, sliding = kind == "csa", kind == "sliding"
        self.csa, self.sliding = csa, sliding
        self.B, self.P, self.prefill = batch, context, prefill
        self.hc_fn = [w(24, HC * H, dtype=torch.float32) for _ in range(2)]
        self.hc_base, self.hc_scale = torch.randn(24, device=dev), torch.randn(3, device=dev)
        self.norm = torch.ones(H, device=dev, dtype=bf)
        self.wq_a, self.wq_b, self.wkv = w(QL, H), w(HEADS * D, QL), w(D, H)
        self.wo_a, self.wo_b = w(G, OL, HEADS * D // G), w(H, G * OL)
        self.comp = w((4 if csa else 2) * D, H)
        self.gate = w(E, H)
        self.bias = 1e-3 * torch.randn(E, device=dev)
        self.sh = [w(INTER, H), w(INTER, H), w(H, INTER)]
        self.experts = [w(E, INTER, H), w(E, INTER, H), w(E, H, INTER)]
        self.sinks = torch.randn(HEADS, device=dev)
        n_rows = WIN + (min(ITOP, context // 4) if csa else 0 if sliding else context // 128)
        if prefill:  # one sequence: a pool of rows every token indexes into, as bench_prefill
            compressed = context // 4 if csa else context // 128
            self.pool = torch.randn(batch + compressed, D, device=dev, dtype=bf)
            window = torch.randint(0, batch, (batch, WIN), device=dev)
            chosen = (torch.randint(0, compressed, (batch, n_rows - WIN), device=dev) if csa else
                      torch.arange(compressed, device=dev).expand(batch, compressed))
            self.index = torch.cat((window, batch + chosen), 1)
        else:
            self.rows = torch.randn(batch, n_rows, D, device=dev, dtype=bf)
            # Compressor states (kv, gate) of each sequence, pooled at this step's window end:
            # CSA 8 slots (two windows) of 512, its indexer's 8 of 128; HCA 128 of 512.
            shapes = [(8, D), (8, ID)] if csa else [] if sliding else [(128, D)]
            self.states = [torch.randn(2, batch, n, width, device=dev) for n, width in shapes]
        if csa:
            self.iwq_b, self.icomp, self.iwp = w(IH * ID, QL), w(4 * ID, H), w(IH, H)
            self.keys = torch.randn(1 if prefill else batch, context // 4, ID, device=dev,
                                    dtype=bf)
        ang = (context - 1) * torch.rand(ROPE // 2, device=dev)
        self.cos, self.sin = ang.cos(), ang.sin()
        self.streams = torch.randn(batch, HC, H, device=dev, dtype=bf)
        # Static routing (a balanced router's expectation): six distinct experts per token.
        self.route = torch.stack([torch.randperm(E, device=dev)[:TOPK] for _ in range(batch)])
        self.by_expert = [(e, (self.route == e).any(1).nonzero().flatten())
                          for e in range(E) if (self.route == e).any()]

    def hc_pre(self, X, fn):
        flat = rms(X.flatten(1).float())
        m = flat @ fn.t()
        pre = torch.sigmoid(m[:, :HC] * self.hc_scale[0] + self.hc_base[:HC]) + 1e-6
        post = 2 * torch.sigmoid(m[:, HC:2 * HC] * self.hc_scale[1] + self.hc_base[HC:2 * HC])
        c = (m[:, 2 * HC:] * self.hc_scale[2] + self.hc_base[2 * HC:]).view(-1, HC, HC)
        c = torch.softmax(c, -1) + 1e-6
        c = c / (c.sum(1, keepdim=True) + 1e-6)
        for _ in range(19):
            c = c / (c.sum(2, keepdim=True) + 1e-6)
            c = c / (c.sum(1, keepdim=True) + 1e-6)
        return (pre.unsqueeze(-1) * X.float()).sum(1).to(bf), post, c

    def hc_post(self, X, y, post, comb):
        return (post.unsqueeze(-1) * y.float().unsqueeze(1) +
                torch.einsum("bij,bic->bjc", comb, X.float())).to(bf)

    def step(self, streams=None):
        B = self.B
        streams_in = self.streams if streams is None else streams
        x, post, comb = self.hc_pre(streams_in, self.hc_fn[0])
        xn = rms(x, self.norm)
        qlat = rms(F.linear(xn, self.wq_a))
        q = rope(rms(F.linear(qlat, self.wq_b).view(B, HEADS, D)), self.cos, self.sin)
        kv = rope(rms(F.linear(xn, self.wkv)), self.cos, self.sin)
        comp = None if self.sliding else F.linear(xn, self.comp)
        if not self.prefill:
            pooled = [(torch.softmax(g, 1) * kv).sum(1) for kv, g in self.states]
            del pooled
        rows = self.pool[self.index] if self.prefill else self.rows
        if self.csa:
            iq = F.linear(qlat, self.iwq_b).view(B, IH, ID)
            icomp = F.linear(xn, self.icomp)
            iw = F.linear(xn, self.iwp)
            scores = torch.einsum("bhd,bkd->bhk", iq, self.keys.expand(B, -1, -1)).relu()
            scores = (scores * iw.unsqueeze(-1)).sum(1)
            # The selection; the rows it selects are given gathered, as they are to ours.
            scores.topk(min(ITOP, self.P // 4), -1)
            del icomp
        s = torch.einsum("bhd,bnd->bhn", q, rows).float() / math.sqrt(D)
        s = torch.cat((s, self.sinks.view(1, HEADS, 1).expand(B, HEADS, 1)), -1)
        p = torch.softmax(s, -1)[..., :-1].to(bf)
        o = rope(torch.einsum("bhn,bnd->bhd", p, rows), self.cos, self.sin, inverse=True)
        z = torch.einsum("bgi,goi->bgo", o.reshape(B, G, -1), self.wo_a).reshape(B, -1)
        h = F.linear(z, self.wo_b)
        streams = self.hc_post(streams_in, h, post, comb)
        x2, post2, comb2 = self.hc_pre(streams, self.hc_fn[1])
        u = rms(x2, self.norm)
        logits = F.linear(u.float(), self.gate.float())
        scores = F.softplus(logits).sqrt()
        (scores + self.bias).topk(TOPK, -1)  # the router's choice; the loop below is static
        weights = scores.gather(1, self.route)
        weights = weights / weights.sum(-1, keepdim=True) * 1.5
        shared = F.linear(F.silu(F.linear(u, self.sh[0]).clamp(max=10)) *
                          F.linear(u, self.sh[1]).clamp(-10, 10), self.sh[2])
        out = shared.float()
        for e, tokens in self.by_expert:
            ue = u.index_select(0, tokens)
            a = F.silu(F.linear(ue, self.experts[0][e]).clamp(max=10)) * \
                F.linear(ue, self.experts[1][e]).clamp(-10, 10)
            ye = F.linear(a, self.experts[2][e]).float()
            we = (weights.index_select(0, tokens) * (self.route.index_select(0, tokens) == e))
            out.index_add_(0, tokens, ye * we.sum(-1, keepdim=True))
        del kv, comp
        return self.hc_post(streams, out.to(bf), post2, comb2)


class WholeStep:
    """bench_device_forward's step: embedding, the layers, HC head, norm and LM head."""

    def __init__(self, kinds, batch, context, vocab):
        self.layers = [Layer(kind, batch, context) for kind in kinds]
        self.embed = w(vocab, H)
        self.tokens = torch.randint(0, vocab, (batch,), device=dev)
        self.head_fn = w(HC, HC * H, dtype=torch.float32)
        self.head_base, self.head_scale = torch.randn(HC, device=dev), torch.randn(1, device=dev)
        self.norm = torch.ones(H, device=dev, dtype=bf)
        self.head = w(vocab, H)

    def step(self):
        streams = self.embed[self.tokens].unsqueeze(1).expand(-1, HC, -1).contiguous()
        for layer in self.layers:
            streams = layer.step(streams)
        m = rms(streams.flatten(1).float()) @ self.head_fn.t()
        pre = torch.sigmoid(m * self.head_scale[0] + self.head_base) + 1e-6
        x = (pre.unsqueeze(-1) * streams.float()).sum(1).to(bf)
        return F.linear(rms(x, self.norm), self.head).float()


def time_us(fn, reps):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / reps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", default="1,8,64,256")
    ap.add_argument("--contexts", default="4096,32768,131072")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--prefill", type=int, default=0,
                    help="a chunk of N tokens of one sequence (bench_prefill's peer)")
    ap.add_argument("--experts", type=int, default=E, help="routed experts per layer")
    ap.add_argument("--whole-step", default="",
                    help="layer kinds (sliding, csa, hca) of bench_device_forward's step")
    ap.add_argument("--vocab", type=int, default=8192, help="LM head rows (--whole-step)")
    args = ap.parse_args()
    globals()["E"] = args.experts
    torch.manual_seed(1)
    if args.whole_step:
        kinds = args.whole_step.split(",")
        for batch in map(int, args.batches.split(",")):
            for context in map(int, args.contexts.split(",")):
                with torch.no_grad():
                    step = WholeStep(kinds, batch, context, args.vocab)
                    us = time_us(step.step, args.reps)
                print(json.dumps({"peer": "torch_bf16_ops", "mode": "whole_step",
                                  "layers": args.whole_step, "experts": args.experts,
                                  "batch": batch, "context": context,
                                  "us_per_step": round(us, 1)}), flush=True)
                step = None
                torch.cuda.empty_cache()
        return
    batches = [args.prefill] if args.prefill else map(int, args.batches.split(","))
    for batch in batches:
        for context in map(int, args.contexts.split(",")):
            for kind in ("csa", "hca"):
                mode = "prefill" if args.prefill else "decode"
                try:
                    with torch.no_grad():
                        layer = Layer(kind, batch, context, prefill=args.prefill > 0)
                        us = time_us(layer.step, args.reps)
                    print(json.dumps({"peer": "torch_bf16_ops", "mode": mode, "layer": kind,
                                      "batch": batch, "context": context,
                                      "layer_us": round(us, 1)}), flush=True)
                except torch.OutOfMemoryError:
                    print(json.dumps({"peer": "torch_bf16_ops", "mode": mode, "layer": kind,
                                      "batch": batch, "context": context,
                                      "skipped": "out of memory"}), flush=True)
                layer = None
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
