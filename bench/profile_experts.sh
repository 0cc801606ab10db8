#!/usr/bin/env bash
# Nsight Compute's view of the one-token expert kernels (gate+up with SwiGLU, then down) in a
# batch-1 decode step of the device forward: throughput of DRAM, L2 and L1, occupancy, waves and
# stall reasons. Run on the GPU host from the repository root after `source gpu-bundle/env.sh`,
# with a checkpoint as bench/profile_device_forward.sh makes it (~1 minute):
#   bench/profile_experts.sh MODEL [OUT_FILE]
set -euo pipefail
model=${1:?MODEL}
out=${2:-/dev/stdout}
ncu --graph-profiling node --kernel-name regex:Fp4ExpertKernel --launch-skip 40 --launch-count 2 \
  --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
  --section MemoryWorkloadAnalysis \
  bench_device_forward --model "$model" --batches 1 --context 64 --steps 2 --no-eager >"$out" 2>&1
