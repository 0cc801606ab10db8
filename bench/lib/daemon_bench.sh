# Sourced by the prefix-reuse benchmarks (bench/turns.sh, bench/shared_prefix.sh).

# bench_model BIN_DIR [MAKE_TINY_FLAGS...]: a work directory in $work (removed on exit) holding
# the benchmark's checkpoint, $work/m (default: a random 6-layer one, hidden 512, 8 heads,
# FP8/FP4).
bench_model() {
  local bin=$1
  shift
  local spec=("$@")
  if [ ${#spec[@]} -eq 0 ]; then spec=(--quantize fp8-fp4 --seed 3 --hidden 512 --heads 8); fi
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  "$bin/deepinfer-model" make-tiny --out "$work/m" "${spec[@]}" >/dev/null
}

# prompt_ids N: N comma-separated token ids in 1 .. 500.
prompt_ids() {
  python3 -c "print(','.join(str((i * 37 + 11) % 500 + 1) for i in range($1)))"
}

# run_mode BIN_DIR LABEL DAEMON_FLAGS... -- BENCH_FLAGS...
# Starts deepinferd on $work/m with the flags (no tokenizer, errors only), waits until it is
# healthy, runs `deepinfer bench` with the bench flags, prints "LABEL <bench JSON>" and then the
# status lines named in $STATUS_KEYS (default prefix_cache_hit_tokens) as KEY=VALUE, and stops
# the daemon.
run_mode() {
  local bin=$1 label=$2
  shift 2
  local daemon_flags=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    daemon_flags+=("$1")
    shift
  done
  shift
  local sock="$work/mode.sock" daemon line key values=()
  "$bin/deepinferd" --model "$work/m" --tokenizer none --socket "$sock" --log-level error \
    "${daemon_flags[@]}" &
  daemon=$!
  for _ in $(seq 100); do
    "$bin/deepinfer" --socket "$sock" health >/dev/null 2>&1 && break
    sleep 0.2
  done
  line=$("$bin/deepinfer" --socket "$sock" bench "$@")
  for key in ${STATUS_KEYS:-prefix_cache_hit_tokens}; do
    values+=("$key=$("$bin/deepinfer" --socket "$sock" status | grep "^$key" | cut -d: -f2)")
  done
  echo "$label ${values[*]} $line"
  kill "$daemon"
  wait "$daemon" || true
}

# reuse_modes BIN_DIR SLOT_FLAG DAEMON_FLAGS... -- BENCH_FLAGS...
# The three prefix-reuse modes on $work/m: the slot path with SLOT_FLAG on, then off, then the
# layers path with the prefix cache's 128-token snapshots (DEVICE=cuda: the device forward and
# the CUDA backend's stage 1), each through run_mode, printing "MODE KEY=VALUE
# resumed_tokens=N <bench JSON>" (N: the status's prefix_cache_hit_tokens).
reuse_modes() {
  local bin=$1 flag=$2
  shift 2
  local key=${flag#--} mode forward value
  key=${key//-/_}  # the option's config key, as the lines have always named it
  for mode in "slots on" "slots off" "layers -"; do
    read -r forward value <<<"$mode"
    local extra=(--device "${DEVICE:-cpu}" --forward "$forward")
    if [ "$forward" = slots ]; then
      extra+=(--prefix-cache-bytes 0 --slot-context 1024 "$flag" "$value")
    fi
    # "$@" is DAEMON_FLAGS -- BENCH_FLAGS: the mode's flags go before the daemon's.
    run_mode "$bin" "$forward $key=$value" "${extra[@]}" "$@" |
      sed 's/ prefix_cache_hit_tokens=/ resumed_tokens=/'
  done
}
