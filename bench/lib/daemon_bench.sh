# Shared by the daemon benchmarks (engine_loop_bench.sh, rate_bench.sh); sourced after ROOT and
# BIN are set. The demo's tiny V4 checkpoint (hidden 64, 129,280-token vocabulary, FP8/FP4),
# made once; a daemon per configuration on a private socket.
MODEL=${MODEL:-$ROOT/build/demo-model-v4vocab}
TOK=$ROOT/deps/tokenizer-v4-test
SOCK=$(mktemp -u /tmp/deepinfer-bench.XXXXXX.sock)
[ -f "$MODEL/model.safetensors" ] ||
  "$BIN/deepinfer-model" make-tiny --out "$MODEL" --quantize fp8-fp4 --vocab 129280 --hidden 64 --seed 7 >/dev/null

# A JSON field's value from stdin (the CLI's flat objects).
field() { sed -n "s/.*\"$1\": *\([-0-9.a-z]*\).*/\1/p"; }

# Starts deepinferd with the extra flags given and waits until it answers health.
start_daemon() {
  "$BIN/deepinferd" --model "$MODEL" --tokenizer "$TOK" --socket "$SOCK" --threads 2 \
    --log-level warn "$@" &
  DAEMON_PID=$!
  for _ in $(seq 100); do "$BIN/deepinfer" --socket "$SOCK" health >/dev/null 2>&1 && return; sleep 0.1; done
}

stop_daemon() { kill -TERM "$DAEMON_PID"; wait "$DAEMON_PID" || true; }
