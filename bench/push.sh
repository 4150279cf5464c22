#!/usr/bin/env bash
# Push delivery's figures (service mode, docs/push.md), in one run on this
# machine. Prints each run's JSON on stderr as it goes, then a summary.
#
#   bash bench/push.sh                     # builds delayq and delayq-bench first
#   SKIP_BUILD=1 BUILD=build bash bench/push.sh
#   STEPS="2" SKIP_BUILD=1 bash bench/push.sh
#
# Steps (STEPS, default "1 2 3"), each on a fresh `delayq serve` (STORE,
# default memory; embedded runs with --fsync everysec in a temporary dir):
#   1 throughput  pull: `delayq-bench cycle --proto resp --connections 50
#                 --depth 1 --body 100 --seconds SECONDS` (add -> reserve ->
#                 finish, cycles/s: 50 cycles in flight, as the push has 50
#                 requests in flight), and the same at --depth 16 (pipelined,
#                 800 in flight: the pull path's best) for reference. push: JOBS 100-byte jobs added due now
#                 (delayq-bench put), then one subscription of concurrency 50
#                 to `delayq-bench receive` (keep-alive, answers 200 at once):
#                 requests/s from the first request to the last, each a whole
#                 lifecycle (reserve, POST, finish). Target: push >= 0.5 x pull.
#   2 lateness    FAR_JOBS (1M) jobs due in a day (pending ballast), then
#                 LATE_JOBS (20,000) jobs due evenly over 10 s from 3 s after
#                 they are added, pushed to the receiver (concurrency 50):
#                 request arrival - run_at. Target: 0 early, p99 <= 5 ms.
#   3 failing     a receiver that answers 500 to everything; FAIL_JOBS (1000)
#                 jobs due now, min backoff 1 s, max 4 s: the server's CPU and
#                 the requests per 2-second slice over 20 s (flat CPU, retries
#                 paced by the backoff, not a storm).
#
# Loopback only, on free ports; every process started here is stopped by PID.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
STEPS=${STEPS:-1 2 3}
STORE=${STORE:-memory}
SECONDS_RUN=${SECONDS_RUN:-10}
JOBS=${JOBS:-300000}
FAR_JOBS=${FAR_JOBS:-1000000}
LATE_JOBS=${LATE_JOBS:-20000}
FAIL_JOBS=${FAIL_JOBS:-1000}
PY=${PY:-/usr/bin/python3}
OUT=${OUT:-$(mktemp -d /tmp/delayq-push-bench.XXXXXX)}
pids=()
# shellcheck source=bench/lib.sh
source bench/lib.sh
trap stop_started EXIT

if [ -z "${SKIP_BUILD:-}" ]; then
  cmake --build "$BUILD" --target delayq delayq-bench -j2 >&2
fi
DELAYQ=$BUILD/bin/delayq
BENCH=$BUILD/bin/delayq-bench

serve() {  # serve NAME: starts a server on fresh ports; sets HTTP, RESP, SERVER
  HTTP=$(free_port)
  RESP=$(free_port)
  local args=(serve --store "$STORE" --http-port "$HTTP" --resp-port "$RESP" --log-level warn)
  if [ "$STORE" = embedded ]; then
    args+=(--data-dir "$OUT/data-$1" --fsync everysec)
  fi
  start "server-$1" "$DELAYQ" "${args[@]}"
  SERVER=$started
  wait_port "$HTTP"
  wait_port "$RESP"
}

subscribe() {  # subscribe URL JSON-EXTRA
  curl -sf -X PUT "127.0.0.1:$HTTP/v1/subscriptions/bench" \
    -d "{\"topics\":[\"push-0\",\"push-1\",\"push-2\",\"push-3\",\"push-4\",\"push-5\",\"push-6\",\"push-7\"],\"url\":\"$1\"${2:+,$2}}" >/dev/null
}

receiver() {  # receiver NAME ARGS...: sets RECV_PORT, RECEIVER
  RECV_PORT=$(free_port)
  "$BENCH" receive --port "$RECV_PORT" "${@:2}" >"$OUT/$1.json" 2>"$OUT/$1.log" &
  RECEIVER=$!
  pids+=("$RECEIVER")
  wait_port "$RECV_PORT"
}

summary=()

if [[ " $STEPS " == *" 1 "* ]]; then
  log "step 1: pull cycle, then push of $JOBS jobs ($STORE)"
  serve pull
  "$BENCH" cycle --proto resp --port "$RESP" --connections 50 --depth 1 --body 100 \
    --seconds "$SECONDS_RUN" >"$OUT/pull.json"
  cat "$OUT/pull.json" >&2
  "$BENCH" cycle --proto resp --port "$RESP" --connections 50 --depth 16 --body 100 \
    --seconds "$SECONDS_RUN" >"$OUT/pull16.json"
  cat "$OUT/pull16.json" >&2
  stop_pid "$SERVER"

  serve push
  "$BENCH" put --proto resp --port "$RESP" --connections 8 --depth 64 --body 100 \
    --topic-prefix push --jobs "$JOBS" >"$OUT/preload.json"
  receiver push --jobs "$JOBS" --seconds 300
  cpu0=$(cpu_s "$SERVER")
  subscribe "http://127.0.0.1:$RECV_PORT/" '"concurrency":50'
  wait "$RECEIVER" || true
  cpu1=$(cpu_s "$SERVER")
  cat "$OUT/push.json" >&2
  stop_pid "$SERVER"
  pull=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["cycles_per_s"])' "$OUT/pull.json")
  push=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["requests_per_s"])' "$OUT/push.json")
  pull16=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["cycles_per_s"])' "$OUT/pull16.json")
  summary+=("$(printf '{"step":"throughput","store":"%s","pull_cycles_per_s":%s,"push_per_s":%s,"ratio":%.2f,"pull_depth16_cycles_per_s":%s,"server_cpu_s_push":%.2f}' \
    "$STORE" "$pull" "$push" "$($PY -c "print($push/$pull)")" "$pull16" "$($PY -c "print($cpu1-$cpu0)")")")
fi

if [[ " $STEPS " == *" 2 "* ]]; then
  log "step 2: lateness of $LATE_JOBS pushes over 10 s with $FAR_JOBS pending ($STORE)"
  serve late
  if [ "$FAR_JOBS" -gt 0 ]; then
    "$BENCH" put --proto resp --port "$RESP" --connections 8 --depth 64 --body 100 \
      --topic-prefix push --delay-ms 86400000 --jobs "$FAR_JOBS" >"$OUT/far.json"
  fi
  receiver late --jobs "$LATE_JOBS" --seconds 60
  subscribe "http://127.0.0.1:$RECV_PORT/" '"concurrency":50'
  # The timed jobs: run_at spread evenly over 10 s, from 3 s after now, added
  # in one pipeline (redis-cli --pipe) well before the first falls due.
  $PY - "$LATE_JOBS" <<'EOF' | redis-cli -p "$RESP" --pipe >"$OUT/late-add.log"
import sys, time
n = int(sys.argv[1])
start = int(time.time() * 1000) + 3000
out = sys.stdout.buffer
for i in range(n):
    at = str(start + i * 10000 // n).encode()
    args = [b"ADD", b"push-0", b"late-%d" % i, b"0", b"60000", b"x" * 100, b"AT", at]
    out.write(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
EOF
  wait "$RECEIVER" || true
  cat "$OUT/late.json" >&2
  stop_pid "$SERVER"
  summary+=("$($PY -c 'import json,sys; r=json.load(open(sys.argv[1])); print(json.dumps({"step":"lateness","store":sys.argv[2],"far_jobs":int(sys.argv[3]),"requests":r["requests"],"early":r["early"],"p50_us":r["lateness_p50_us"],"p99_us":r["lateness_p99_us"],"max_us":r["lateness_max_us"]}))' "$OUT/late.json" "$STORE" "$FAR_JOBS")")
fi

if [[ " $STEPS " == *" 3 "* ]]; then
  log "step 3: a receiver that answers 500 to everything, $FAIL_JOBS jobs ($STORE)"
  serve fail
  receiver fail --status 500 --seconds 25
  "$BENCH" put --proto resp --port "$RESP" --connections 1 --depth 64 --body 100 \
    --topic-prefix push --jobs "$FAIL_JOBS" >/dev/null
  subscribe "http://127.0.0.1:$RECV_PORT/" \
    '"concurrency":50,"retry":{"min_backoff_ms":1000,"max_backoff_ms":4000,"max_doublings":2}'
  slices=()
  for _ in $(seq 10); do
    c0=$(cpu_s "$SERVER")
    sleep 2
    c1=$(cpu_s "$SERVER")
    slices+=("$($PY -c "print(round($c1-$c0, 2))")")
  done
  wait "$RECEIVER" || true
  cat "$OUT/fail.json" >&2
  buried=$(curl -s "127.0.0.1:$HTTP/v1/stats" | $PY -c 'import json,sys; print(json.load(sys.stdin)["buried"])')
  stop_pid "$SERVER"
  summary+=("$(printf '{"step":"failing","store":"%s","server_cpu_s_per_2s":[%s],"requests_in_25s":%s,"buried":%s}' \
    "$STORE" "$(IFS=,; echo "${slices[*]}")" \
    "$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["requests"])' "$OUT/fail.json")" "$buried")")
fi

printf '%s\n' "${summary[@]}"
log "raw output in $OUT"
