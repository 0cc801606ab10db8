#!/usr/bin/env bash
# Draws under a grammar through deepinferd, end to end: a regex, a JSON Schema and an EBNF
# grammar, each greedy and sampled, on a random checkpoint with the real tokenizer's vocabulary.
# Every answer is checked against its constraint here (python3's re and json), so a mask that
# reaches the sampler late, or not at all, on the chosen device shows as a FAIL line.
#   [DEVICE=cpu|cuda] [TOKENIZER=DIR] [DAEMON_FLAGS=...] bench/constrained_draws.sh [BIN_DIR]
#     [make-tiny flags...]
# BIN_DIR defaults to build/bin, TOKENIZER to deps/tokenizer-v4-test. The default checkpoint is
# the demo's (hidden 64, FP8/FP4, vocabulary 129,280); with DEVICE=cuda the daemon runs the
# device forward (forward slots), so pass make-tiny flags with the production kernels' shapes
# (bench/gpu_session.sh's kernel-shaped ones, with --vocab 129280).
# DAEMON_FLAGS: more deepinferd flags (e.g. `--device-sampling off`, whose answers must be the
# same as with the default's draws on the stepper).
# Prints "PASS|FAIL KIND temperature=T ANSWER" a request (ERROR when the client itself failed);
# exit status 1 if any line is not PASS, 2 if the checkpoint or the daemon did not come up.
set -uo pipefail
bin=${1:-build/bin}
shift || true
spec=("$@")
[ ${#spec[@]} -eq 0 ] && spec=(--quantize fp8-fp4 --vocab 129280 --hidden 64 --seed 7)
work=$(mktemp -d)
daemon=
trap '[ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon"; rm -rf "$work"' EXIT
"$bin/deepinfer-model" make-tiny --out "$work/m" "${spec[@]}" >/dev/null || exit 2
sock=$work/s
"$bin/deepinferd" --model "$work/m" --tokenizer "${TOKENIZER:-deps/tokenizer-v4-test}" \
  --socket "$sock" --device "${DEVICE:-cpu}" --threads 2 --log-level error ${DAEMON_FLAGS:-} &
daemon=$!
up=0
for _ in $(seq 300); do
  kill -0 "$daemon" 2>/dev/null || break
  if "$bin/deepinfer" --socket "$sock" health >/dev/null 2>&1; then
    up=1
    break
  fi
  sleep 0.2
done
[ $up -eq 1 ] || { echo "constrained_draws.sh: deepinferd did not come up" >&2; exit 2; }

# KIND, the response_format, and the python3 check of the answer (in $answer).
kinds=(regex json_schema grammar)
declare -A format check
format[regex]='{"type": "regex", "regex": "[0-9]{3}-[0-9]{4}( ext [0-9]{1,3})?"}'
check[regex]='import re; assert re.fullmatch(r"[0-9]{3}-[0-9]{4}( ext [0-9]{1,3})?", answer)'
format[json_schema]='{"type": "json_schema", "json_schema": {"schema": {"type": "object",
  "properties": {"name": {"type": "string", "maxLength": 6}, "ok": {"type": "boolean"},
  "n": {"enum": [1, 2, 3]}}, "required": ["name", "ok", "n"], "additionalProperties": false}}}'
check[json_schema]='import json; d = json.loads(answer)
assert sorted(d) == ["n", "name", "ok"] and len(d["name"]) <= 6
assert isinstance(d["ok"], bool) and d["n"] in (1, 2, 3)'
format[grammar]='{"type": "grammar", "grammar": "root ::= (\"yes\" | \"no\") \" \" num\nnum ::= [1-9] [0-9]?"}'
check[grammar]='import re; assert re.fullmatch(r"(yes|no) [1-9][0-9]?", answer)'

failed=0
for kind in "${kinds[@]}"; do
  for temperature in 0 1; do
    answer=$("$bin/deepinfer" --socket "$sock" generate --prompt "Answer:" --max-tokens 64 \
      --temperature "$temperature" --seed 11 --response-format "${format[$kind]}")
    rc=$?
    verdict=PASS
    if [ $rc -ne 0 ]; then
      verdict=ERROR
    elif ! answer=$answer python3 -c "import os; answer = os.environ['answer']
${check[$kind]}" 2>/dev/null; then
      verdict=FAIL
    fi
    [ $verdict = PASS ] || failed=1
    printf '%s %s temperature=%s %q\n' "$verdict" "$kind" "$temperature" "$answer"
  done
done
exit $failed
