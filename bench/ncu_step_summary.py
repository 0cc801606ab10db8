#!/usr/bin/env python3
"""Per-kernel time of one decode step of the device forward, from an Nsight Compute CSV.

Input: the CSV of bench/profile_device_forward.sh (`ncu --metrics gpu__time_duration.sum --csv`),
which profiles a window of kernel launches that spans several whole steps. A step starts at the
embedding gather (EmbedKernel); the last complete step in the window is summarised.

  bench/ncu_step_summary.py ncu.csv [--step-csv OUT.csv]

Prints the step's kernel count, the sum of the kernels' serialized durations (each kernel timed
alone, so the sum exceeds the step's graph-replay wall time by the per-launch overhead), and the
time per kernel name, largest first. --step-csv writes the step's kernels in launch order
(name, block, grid, microseconds): the small raw file kept in bench/data.
"""
import argparse
import collections
import csv
import re
import sys


def short(name):
    name = re.sub(r"\(.*", "", name).replace("void ", "").replace("(anonymous namespace)::", "")
    return name.replace("unnamed>::", "").replace("deepinfer::kernels::", "")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--step-csv")
    args = ap.parse_args()
    # The program's own output (a JSON line has commas too) comes before ncu's header row.
    rows = list(csv.reader(open(args.csv)))
    first = next(i for i, r in enumerate(rows) if r and r[0] == "ID")
    header, rows = rows[first], [r for r in rows[first + 1:] if len(r) == len(rows[first])]
    col = {k: i for i, k in enumerate(header)}
    kernels = [(short(r[col["Kernel Name"]]), r[col["Block Size"]], r[col["Grid Size"]],
                float(r[col["Metric Value"]].replace(",", "")) / 1000) for r in rows]
    starts = [i for i, k in enumerate(kernels) if k[0].startswith("EmbedKernel")]
    if len(starts) < 2:
        sys.exit("fewer than two step starts (EmbedKernel) in the window")
    step = kernels[starts[-2]:starts[-1]]
    print(f"kernels per step {len(step)}, serialized sum {sum(k[3] for k in step):.1f} us")
    total = collections.defaultdict(lambda: [0, 0.0])
    for name, _, _, us in step:
        total[name][0] += 1
        total[name][1] += us
    for name, (count, us) in sorted(total.items(), key=lambda kv: -kv[1][1]):
        print(f"{us:8.1f} us  {count:3d}x  {name}")
    if args.step_csv:
        with open(args.step_csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["kernel", "block", "grid", "us"])
            for name, block, grid, us in step:
                w.writerow([name, block, grid, f"{us:.3f}"])


if __name__ == "__main__":
    main()
