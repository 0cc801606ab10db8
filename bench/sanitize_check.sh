#!/usr/bin/env bash
# The newest kernels' tests under compute-sanitizer on the GPU host: shared-memory races
# (racecheck), barrier misuse (synccheck) and out-of-bounds or misaligned accesses (memcheck) in
# the tensor-core attention and the folded expert GEMM. Value tests cannot see a race that happens
# to give the right numbers; these tools can. After `source gpu-bundle/env.sh` (docs/gpu.md), the
# bundle holding gpu_tests, with the host toolkit's compute-sanitizer (~3 minutes):
#   bench/sanitize_check.sh OUT_DIR [GTEST_FILTER]
set -uo pipefail
out=${1:?OUT_DIR}
filter=${2:-'MqaMma*:ExpertFp4Wgmma*'}
mkdir -p "$out"
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null |
  head -1)
if [ -z "$sanitizer" ]; then
  echo "no compute-sanitizer on this host"
  exit 1
fi
for tool in racecheck synccheck memcheck; do
  timeout 300 "$sanitizer" --tool "$tool" --error-exitcode 9 gpu_tests --gtest_filter="$filter" \
    >"$out/$tool.txt" 2>&1
  echo "$tool exit $?"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|hazard|Invalid|Barrier" "$out/$tool.txt" | head -5
done
