# Sourced by the daemon benchmarks (bench/turns.sh, bench/shared_prefix.sh): one mode's run.
#   daemon_bench BIN_DIR SOCKET LABEL DAEMON_FLAGS... -- BENCH_FLAGS...
# starts deepinferd with the flags (no tokenizer, errors only), waits until it is healthy, runs
# `deepinfer bench` with the bench flags, prints "LABEL resumed_tokens=N <bench JSON>" (N: the
# status's prefix_cache_hit_tokens) and stops the daemon.
daemon_bench() {
  local bin=$1 sock=$2 label=$3
  shift 3
  local daemon_flags=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    daemon_flags+=("$1")
    shift
  done
  shift
  "$bin/deepinferd" --tokenizer none --socket "$sock" --log-level error "${daemon_flags[@]}" &
  local daemon=$!
  for _ in $(seq 100); do
    "$bin/deepinfer" --socket "$sock" health >/dev/null 2>&1 && break
    sleep 0.2
  done
  local line hits
  line=$("$bin/deepinfer" --socket "$sock" bench "$@")
  hits=$("$bin/deepinfer" --socket "$sock" status | grep '^prefix_cache_hit_tokens' | cut -d: -f2)
  echo "$label resumed_tokens=$hits $line"
  kill "$daemon"
  wait "$daemon" || true
}

# bench_model BIN_DIR WORK_DIR [MAKE_TINY_FLAGS...]: the benchmark's checkpoint in WORK_DIR/m
# (default: a random 6-layer one, hidden 512, 8 heads, FP8/FP4).
bench_model() {
  local bin=$1 work=$2
  shift 2
  local spec=("$@")
  if [ ${#spec[@]} -eq 0 ]; then spec=(--quantize fp8-fp4 --seed 3 --hidden 512 --heads 8); fi
  "$bin/deepinfer-model" make-tiny --out "$work/m" "${spec[@]}" >/dev/null
}

# reuse_modes BIN_DIR WORK_DIR SLOT_FLAG DAEMON_FLAGS... -- BENCH_FLAGS...
# the three prefix-reuse modes on WORK_DIR/m, a daemon_bench line each: the slot path with
# SLOT_FLAG on, then off, then the layers path with the prefix cache's 128-token snapshots
# (DEVICE=cuda: the device forward and the CUDA backend's stage 1).
reuse_modes() {
  local bin=$1 work=$2 flag=$3
  shift 3
  local daemon_flags=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    daemon_flags+=("$1")
    shift
  done
  shift
  local key=${flag#--} mode forward value
  key=${key//-/_}  # the option's config key, as the lines have always named it
  for mode in "slots on" "slots off" "layers -"; do
    read -r forward value <<<"$mode"
    local extra=(--device "${DEVICE:-cpu}" --forward "$forward")
    if [ "$forward" = slots ]; then
      extra+=(--prefix-cache-bytes 0 --slot-context 1024 "$flag" "$value")
    fi
    daemon_bench "$bin" "$work/$forward-$value.sock" "$forward $key=$value" \
      --model "$work/m" "${daemon_flags[@]}" "${extra[@]}" -- "$@"
  done
}
