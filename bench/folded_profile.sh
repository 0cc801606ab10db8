#!/usr/bin/env bash
# Where the folded expert GEMM's warps wait: Nsight Compute on one gate/up launch inside
# bench_prefill (8K tokens, 2 layers; --reserve-gb leaves the profiler room to save and restore
# the launch), the report's key metrics, its stall reasons, and the SASS source view with the
# stall samples of each instruction (the 40 hottest printed) and the instructions executed per
# opcode. After `source gpu-bundle/env.sh` (docs/gpu.md), the bundle holding bench_prefill, with
# the host toolkit's ncu (~1 minute a kernel). KIND is folded (Fp4ExpertWgmmaKernel) or, on
# branch folded-warp-specialized, folded-ws (Fp4ExpertWsKernel):
#   bench/folded_profile.sh OUT_DIR [KIND...]
set -uo pipefail
out=${1:?OUT_DIR}
shift
kinds=("${@:-folded}")
mkdir -p "$out"
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
if [ -z "$ncu" ]; then
  echo "no ncu on this host"
  exit 1
fi
for kind in "${kinds[@]}"; do
  case "$kind" in
    folded) kernel=Fp4ExpertWgmmaKernel ;;
    folded-ws) kernel=Fp4ExpertWsKernel ;;
    *) echo "unknown kind $kind"; exit 2 ;;
  esac
  timeout 150 "$ncu" --kernel-name "regex:$kernel" --launch-skip 2 --launch-count 1 --set full \
    --import-source no -o "$out/$kind" bench_prefill --contexts 8192 --layers 2 --reps 1 \
    --experts "$kind" --reserve-gb 80 >"$out/${kind}_log.txt" 2>&1
  echo "$kind: ncu exit $?"
  "$ncu" --import "$out/$kind.ncu-rep" --page details >"$out/${kind}_details.txt" 2>&1
  grep -E "Duration|Issue Slots Busy|Eligible Warps|Warp Cycles Per Issued|Grid Size" \
    "$out/${kind}_details.txt" | head -6
  "$ncu" --import "$out/$kind.ncu-rep" --page raw --csv >"$out/${kind}_raw.csv" 2>&1
  "$ncu" --import "$out/$kind.ncu-rep" --page source --print-source sass --csv \
    >"$out/${kind}_sass.csv" 2>&1
  python3 - "$out/${kind}_raw.csv" "$out/${kind}_sass.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
h, v = rows[0], rows[2]
stalls = []
for name, value in zip(h, v):
    if name.startswith('smsp__pcsamp_warps_issue_stalled_') and 'not_issued' not in name:
        try:
            stalls.append((float(value.replace(',', '')), name[len('smsp__pcsamp_warps_issue_stalled_'):]))
        except ValueError:
            pass
total = sum(x for x, _ in stalls) or 1
print('stalls:', ' '.join('%s %.0f%%' % (n, 100 * x / total) for x, n in sorted(stalls, reverse=True)[:10]))
# The source view: one row per SASS instruction; keep the columns that name the instruction and
# its sampled stalls, and print the hottest.
sass = [r for r in csv.reader(open(sys.argv[2])) if r]
head = next((i for i, r in enumerate(sass) if any('Source' in c for c in r)), None)
if head is None:
    print('no source view in', sys.argv[2]); sys.exit(0)
cols = sass[head]
src = next(i for i, c in enumerate(cols) if 'Source' in c)
samp = [i for i, c in enumerate(cols) if 'Sampling' in c and 'All' in c] or \
       [i for i, c in enumerate(cols) if 'Sampling' in c]
if not samp:
    print('columns:', cols); sys.exit(0)
def num(s):
    try: return float(s.replace(',', ''))
    except ValueError: return 0.0
body = [r for r in sass[head + 1:] if len(r) > max(src, samp[0])]
total = sum(num(r[samp[0]]) for r in body) or 1
print('hottest instructions (%s):' % cols[samp[0]])
for r in sorted(body, key=lambda r: -num(r[samp[0]]))[:40]:
    print('%5.1f%%  %s' % (100 * num(r[samp[0]]) / total, r[src].strip()))
# Where the issue slots go: warp instructions executed per opcode (the kernel is issue-bound, so
# this, not the stalls, says what to cut).
done = [i for i, c in enumerate(cols) if c.strip() == 'Instructions Executed']
if done:
    per_op = {}
    for r in body:
        text = r[src].strip().split()
        if text and text[0].startswith('@'):
            text = text[1:]
        if text:
            op = text[0].split('.')[0]
            per_op[op] = per_op.get(op, 0) + num(r[done[0]])
    all_ops = sum(per_op.values()) or 1
    print('warp instructions executed: %.0f' % all_ops)
    print(' '.join('%s %.1f%%' % (op, 100 * n / all_ops)
                   for op, n in sorted(per_op.items(), key=lambda kv: -kv[1])[:24]))
PY
done
