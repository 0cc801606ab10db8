#!/usr/bin/env python3
"""Where a graph-replayed step's time goes, from libdi_kernel_trace.so's CSV (bench/kernel_trace.cc).

  bench/kernel_trace_summary.py trace.csv [--graph ID] [--last N] [--step-csv OUT.csv]

The kernels of one cudaGraphLaunch share its correlation id, so each id is one step. The graph
replayed most often is summarised (or --graph), over its last N launches (the timed ones).

Two measures per kernel, medians over the launches:
- dur: its own start to end. With overlapped launches (griddepcontrol) a kernel starts while its
  producer still runs and waits, so dur counts that wait too.
- share: the part of the launch's span it is charged with. The span is cut at every kernel's
  end; the slice up to a kernel's end is its own from its start on, and the part of the slice
  before its start goes to the kernels running then, shared equally (none running: idle). So
  in a chain of overlapped launches each kernel is charged from its producer's end to its own,
  a short kernel that ends inside a long one on a side stream is not charged with the long
  one's time, and the shares and the idle time add up to the span: glue on the critical path
  shows up here, where Nsight Compute's serialized times cannot say. Of kernels that end at the
  same instant the one that started first is charged with the slice.
The printed totals are sums over kernels of their medians (each launch's shares and idle time
add up to its span exactly; the medians of different kernels come from different launches).

Kernels are "products" when they read weights or the cache in bulk (GEMVs, experts, attention,
the indexer) and "glue" otherwise; both sums are printed. --step-csv writes one launch's kernels
in order of their median start (name, grid, block, start_us, dur_us, share_us).
"""
import argparse
import collections
import csv
import re
import statistics
import sys

PRODUCT = re.compile(r"Gemv|[Gg]emm|nvjet|Fp4Expert|Fp4Limbs|MqaMma|MqaSplit|Indexer")


def is_product(name):
    return bool(PRODUCT.search(name))


def load(path):
    launches = collections.defaultdict(list)
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            start, end = int(r["start_ns"]), int(r["end_ns"])
            if r["graph"] == "0" or start == 0 or end < start:  # eager, or times never filled
                continue
            launches[(int(r["graph"]), int(r["correlation"]))].append({
                "node": int(r["node"]),
                "start": start,
                "end": end,
                "grid": f'({r["grid_x"]}, {r["grid_y"]}, {r["grid_z"]})',
                "block": f'({r["block_x"]}, {r["block_y"]}, {r["block_z"]})',
                "name": r["name"],
            })
    return launches


def shared_out(kernels, a, b, share):
    """Charges [a, b) to the kernels running in it, shared equally at each instant."""
    cuts = sorted({a, b} | {t for k in kernels for t in (k["start"], k["end"]) if a < t < b})
    for lo, hi in zip(cuts, cuts[1:]):
        running = [k for k in kernels if k["start"] <= lo and k["end"] >= hi]
        for k in running:
            share[k["node"]] += (hi - lo) / len(running)


def step_measures(kernels):
    """Per node: (start offset, dur, share) in ns; and the launch's span and busy time."""
    t0 = min(k["start"] for k in kernels)
    share = collections.defaultdict(float)
    last_end = t0
    for k in sorted(kernels, key=lambda k: (k["end"], k["start"])):
        if k["end"] > last_end:
            own_from = max(last_end, k["start"])
            shared_out(kernels, last_end, own_from, share)
            share[k["node"]] += k["end"] - own_from
            last_end = k["end"]
    out = {k["node"]: (k["start"] - t0, k["end"] - k["start"], share[k["node"]]) for k in kernels}
    # Only instants with a kernel running are charged, so the shares add up to the busy time.
    return out, last_end - t0, sum(share.values())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--graph", type=int)
    ap.add_argument("--last", type=int, default=32)
    ap.add_argument("--step-csv")
    args = ap.parse_args()
    launches = load(args.csv)
    if not launches:
        sys.exit("no graph launches in the trace")
    per_graph = collections.Counter(g for g, _ in launches)
    graph = args.graph if args.graph is not None else per_graph.most_common(1)[0][0]
    chosen = sorted((k for (g, _), k in launches.items() if g == graph),
                    key=lambda ks: min(k["start"] for k in ks))[-args.last:]
    if not chosen:
        sys.exit(f"graph {graph} has no launches")
    nodes = {k["node"]: k for k in chosen[-1]}
    samples = collections.defaultdict(list)
    spans, busies = [], []
    for kernels in chosen:
        measures, span, busy = step_measures(kernels)
        spans.append(span)
        busies.append(busy)
        for node, m in measures.items():
            samples[node].append(m)
    med = {n: tuple(statistics.median(s[i] for s in samples[n]) / 1000 for i in range(3))
           for n in nodes if n in samples}
    total_dur = sum(m[1] for m in med.values())
    span_us, busy_us = statistics.median(spans) / 1000, statistics.median(busies) / 1000
    print(f"graph {graph}: {len(chosen)} launches, {len(nodes)} kernels a launch")
    print(f"span {span_us:.1f} us (min {min(spans) / 1000:.1f}, max {max(spans) / 1000:.1f}), "
          f"GPU busy {busy_us:.1f} us, idle {span_us - busy_us:.1f} us, "
          f"kernel durations sum {total_dur:.1f} us")
    for label, pick in (("products", True), ("glue", False)):
        ms = [m for n, m in med.items() if is_product(nodes[n]["name"]) == pick]
        print(f"{label:9s} {len(ms):4d} kernels  dur {sum(m[1] for m in ms):8.1f} us  "
              f"share {sum(m[2] for m in ms):8.1f} us")
    by_name = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for n, m in med.items():
        entry = by_name[nodes[n]["name"]]
        entry[0] += 1
        entry[1] += m[1]
        entry[2] += m[2]
    print(f"{'share us':>9s} {'dur us':>9s} {'count':>5s}  kernel")
    for name, (count, dur, share) in sorted(by_name.items(), key=lambda kv: -kv[1][2]):
        print(f"{share:9.1f} {dur:9.1f} {count:5d}  {name}")
    if args.step_csv:
        with open(args.step_csv, "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(["kernel", "grid", "block", "start_us", "dur_us", "share_us"])
            for n in sorted(med, key=lambda n: med[n][0]):
                k = nodes[n]
                w.writerow([k["name"], k["grid"], k["block"]] + [f"{v:.3f}" for v in med[n]])


if __name__ == "__main__":
    main()
