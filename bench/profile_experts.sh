#!/usr/bin/env bash
# Nsight Compute's view of the one-token expert kernels (gate+up with SwiGLU, then down: the
# integer-limb GEMVs) in a batch-1 decode step of the device forward: throughput of DRAM, L2 and
# L1, occupancy, waves, issue and stall reasons. Clocks and caches are left as the step has them
# (no clock lock, no cache flush), so the figures describe the kernels as they run in the graph.
# Run on the GPU host from the repository root after `source gpu-bundle/env.sh`, with a
# checkpoint as bench/profile_device_forward.sh makes it (~1 minute):
#   bench/profile_experts.sh MODEL [OUT_FILE] [KERNEL_REGEX=Fp4LimbsKernel]
# BATCH (default 1) sets the step's rows: from 2 on the routed experts run on the tensor cores
# (KERNEL_REGEX=Fp4ExpertMmaKernel); SKIP (default 40) the matching launches passed over first.
set -euo pipefail
model=${1:?MODEL}
out=${2:-/dev/stdout}
ncu --graph-profiling node --kernel-name "regex:${3:-Fp4LimbsKernel}" --launch-skip "${SKIP:-40}" \
  --launch-count 2 --clock-control none --cache-control none \
  --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
  --section MemoryWorkloadAnalysis --section SchedulerStats --section ComputeWorkloadAnalysis \
  --section InstructionStats --section SourceCounters \
  bench_device_forward --model "$model" --batches "${BATCH:-1}" --context 64 --steps 2 --no-eager >"$out" 2>&1
