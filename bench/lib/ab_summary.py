#!/usr/bin/env python3
"""Means per variant and batch of labelled bench_device_forward lines (bench/ab_variants.sh).

  bench/lib/ab_summary.py AB_JSONL

Each input line is a bench_device_forward JSON line with "variant" and "round" added. Prints, per
batch, each variant's rounds, their mean and the mean's change against the first variant seen.
"""
import collections
import json
import sys


def main():
    rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
    order, steps = [], collections.defaultdict(list)
    for r in rows:
        if r["variant"] not in order:
            order.append(r["variant"])
        steps[(r["batch"], r["variant"])].append(r["us_per_step"])
    for batch in sorted({b for b, _ in steps}):
        base = None
        for v in order:
            got = steps.get((batch, v))
            if not got:
                continue
            mean = sum(got) / len(got)
            base = mean if base is None else base
            rounds = " / ".join("%.1f" % x for x in got)
            print("batch %d  %-24s mean %8.1f us  %+6.2f %%  (%s)" %
                  (batch, v, mean, 100.0 * (mean / base - 1.0), rounds))


if __name__ == "__main__":
    main()
