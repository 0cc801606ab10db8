#!/usr/bin/env python3
"""Per-position agreement of two logits files [positions, vocab] (float32 .npy): the relative error
of each position (max |a - b| over the row / max |b|), its max and 99th percentile, and the share
of positions whose argmax agrees. With --bound, also PASS or FAIL against issue 7's acceptance
(max relative error below the bound, argmax agreement above --agree) and the exit status.

  compare_logits.py TEST.npy REFERENCE.npy [--bound 1e-2 --agree 0.99]
"""
import argparse
import ast
import sys
from array import array


def load_rows(path):
    """Rows of a little-endian float32 2-D .npy file (as deepinfer-model writes them), without
    numpy, which the development machines lack."""
    with open(path, "rb") as f:
        if f.read(6) != b"\x93NUMPY":
            sys.exit(f"{path}: not a .npy file")
        major = f.read(2)[0]
        size = int.from_bytes(f.read(2 if major == 1 else 4), "little")
        header = ast.literal_eval(f.read(size).decode("latin1"))
        if header["descr"] != "<f4" or header["fortran_order"] or len(header["shape"]) != 2:
            sys.exit(f"{path}: expected a C-order float32 matrix, got {header}")
        rows, cols = header["shape"]
        data = array("f")
        data.frombytes(f.read(rows * cols * 4))
    if sys.byteorder != "little":
        data.byteswap()
    return [data[r * cols:(r + 1) * cols] for r in range(rows)]


def argmax(row):
    return max(range(len(row)), key=row.__getitem__)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("test")
    ap.add_argument("reference")
    ap.add_argument("--bound", type=float)
    ap.add_argument("--agree", type=float, default=0.99)
    args = ap.parse_args()
    a, b = load_rows(args.test), load_rows(args.reference)
    if len(a) != len(b) or len(a[0]) != len(b[0]):
        sys.exit(f"shapes differ: {len(a)}x{len(a[0])} against {len(b)}x{len(b[0])}")
    try:  # the same figures, vectorised where numpy is (the GPU host: a full vocabulary)
        import numpy as np
        x = np.array([np.frombuffer(r, dtype=np.float32) for r in a], dtype=np.float64)
        y = np.array([np.frombuffer(r, dtype=np.float32) for r in b], dtype=np.float64)
        err = sorted((np.abs(x - y).max(axis=1) / np.abs(y).max(axis=1)).tolist())
        agree = float((x.argmax(axis=1) == y.argmax(axis=1)).mean())
    except ImportError:
        err = sorted(max(abs(p - q) for p, q in zip(ra, rb)) / max(abs(q) for q in rb)
                     for ra, rb in zip(a, b))
        agree = sum(argmax(ra) == argmax(rb) for ra, rb in zip(a, b)) / len(a)
    # numpy's default quantile: linear between the two nearest ranks.
    pos = 0.99 * (len(err) - 1)
    lo = int(pos)
    p99 = err[lo] + (err[min(lo + 1, len(err) - 1)] - err[lo]) * (pos - lo)
    line = f"max {err[-1]:.2e}  p99 {p99:.2e}  argmax {100 * agree:.1f} %"
    if args.bound is None:
        print(line)
        return 0
    ok = err[-1] < args.bound and agree > args.agree
    print(f"{line}  {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
