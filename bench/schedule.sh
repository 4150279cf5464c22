#!/usr/bin/env bash
# Schedules' figures (periodic jobs, docs/schedules.md), in one run on this
# machine. Prints each run's JSON on stderr as it goes, then a summary line
# per step on stdout.
#
#   bash bench/schedule.sh                   # builds delayq and delayq-bench first
#   SKIP_BUILD=1 BUILD=build bash bench/schedule.sh
#   STEPS="1" SCHEDULES=2000 SECONDS_RUN=10 SKIP_BUILD=1 bash bench/schedule.sh
#
# Steps (STEPS, default "1 2 3"), each on fresh servers on free loopback ports:
#   1 embedded   `delayq serve --store embedded --fsync everysec` (temporary
#                data dir); `delayq-bench schedules`: SCHEDULES (10,000)
#                schedules `* * * * * *` on topic sched.bench, CONSUMERS (8)
#                RESP connections in long-poll RESERVE ... COUNT COUNT (500),
#                finishing in batches, over SECONDS_RUN (30) s: every fire
#                time of the window delivered, none twice, lateness (receive -
#                fire time) p50/p99/max, 0 early; RSS per schedule; server CPU
#                per firing. Targets: p99 <= 50 ms, p50 <= 10 ms.
#   2 redis      the same with two `delayq serve --store redis` on one
#                redis-server (started here: --save '' --appendonly no), the
#                consumers spread over both, over REDIS_SECONDS (60) s: no
#                duplicate, no missing firing. Also redis-server's CPU over the
#                whole bench run (creation, window, drain, deletion).
#   3 idle       IDLE (1,000,000) schedules `0 * * * *` (hourly) created over
#                4 pipelined connections on the embedded store: RSS per
#                schedule; then SIGTERM (time to exit) and a start on the same
#                data dir: seconds until /healthz answers and until SCHEDULE
#                GET of the last schedule created answers it.
#
# PIN (default 1): with two CPUs or more, step 1 runs the server on CPU 0 and
# the consumers on CPU 1 (taskset), as consumers on other machines would
# leave the server its core; PIN=0 lets the kernel place both. Both figures
# are in docs/benchmarks.md.
#
# Loopback only, on free ports; every process started here is stopped by PID.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
STEPS=${STEPS:-1 2 3}
SCHEDULES=${SCHEDULES:-10000}
SECONDS_RUN=${SECONDS_RUN:-30}
REDIS_SECONDS=${REDIS_SECONDS:-60}
IDLE=${IDLE:-1000000}
CONSUMERS=${CONSUMERS:-8}
COUNT=${COUNT:-500}
PIN=${PIN:-1}
PY=${PY:-/usr/bin/python3}
OUT=${OUT:-$(mktemp -d /tmp/delayq-schedule-bench.XXXXXX)}
mkdir -p "$OUT"
pids=()
# shellcheck source=bench/lib.sh
source bench/lib.sh
trap stop_started EXIT

if [ -z "${SKIP_BUILD:-}" ]; then
  cmake --build "$BUILD" --target delayq delayq-bench -j2 >&2
fi
DELAYQ=$BUILD/bin/delayq
BENCH=$BUILD/bin/delayq-bench
for tool in redis-server redis-cli curl; do
  command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 1; }
done

now() { date +%s.%N; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# serve NAME STORE [ARGS...]: a server on fresh ports (embedded: data in
# OUT/data-NAME, fsync everysec); sets HTTP, RESP, SERVER.
serve() {
  local name=$1 store=$2
  shift 2
  HTTP=$(free_port)
  RESP=$(free_port)
  local args=(serve --store "$store" --http-port "$HTTP" --resp-port "$RESP" --log-level warn)
  if [ "$store" = embedded ]; then
    args+=(--data-dir "$OUT/data-$name" --fsync everysec)
  fi
  start "server-$name" "${SERVER_PIN[@]}" "$DELAYQ" "${args[@]}" "$@"
  SERVER=$started
  wait_port "$HTTP"
  wait_port "$RESP"
}

# stats HTTP: the schedule counters of /v1/stats, as JSON members stats_*.
stats() {
  curl -s "127.0.0.1:$1/v1/stats" | $PY -c '
import json, sys
s = json.load(sys.stdin)
print(json.dumps({"stats_" + k: s.get(k) for k in ("schedules", "schedule_firings", "schedule_skipped")}))'
}

# pick FILE KEYS...: those members of a JSON object, as JSON.
pick() {
  $PY -c 'import json,sys; r=json.load(open(sys.argv[1])); print(json.dumps({k: r.get(k) for k in sys.argv[2:]}))' "$@"
}

# merge JSON...: one object of all members.
merge() {
  $PY -c 'import json,sys; m={}
for a in sys.argv[1:]: m.update(json.loads(a))
print(json.dumps(m))' "$@"
}

FIRING_KEYS=(schedules seconds expected missing duplicates redelivered early outside_window
  foreign p50_ms p90_ms p99_ms max_ms bytes_per_schedule sets_per_s server_cpu_s
  cpu_us_per_firing client_cpu_s errors first_error)
summary=()

SERVER_PIN=()
BENCH_PIN=()
if [ "$PIN" = 1 ] && [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
  SERVER_PIN=(taskset -c 0)
  BENCH_PIN=(taskset -c 1)
fi

if [[ " $STEPS " == *" 1 "* ]]; then
  load0=$(loadavg)
  log "step 1: $SCHEDULES schedules every second, embedded, ${SECONDS_RUN} s (load $load0, ${SERVER_PIN[*]:-not pinned})"
  serve s1 embedded
  rc=0
  "${BENCH_PIN[@]}" "$BENCH" schedules --servers "127.0.0.1:$RESP" --pids "$SERVER" --schedules "$SCHEDULES" \
    --seconds "$SECONDS_RUN" --consumers "$CONSUMERS" --count "$COUNT" >"$OUT/s1.json" || rc=$?
  cat "$OUT/s1.json" >&2
  st=$(stats "$HTTP")
  stop_pid "$SERVER"
  pinned=false
  [ ${#BENCH_PIN[@]} -gt 0 ] && pinned=true
  summary+=("$(merge '{"step":"embedded","pinned":'"$pinned"',"rc":'"$rc"',"load_before":"'"$load0"'","load_after":"'"$(loadavg)"'"}' \
    "$(pick "$OUT/s1.json" "${FIRING_KEYS[@]}")" "$st")")
fi

SERVER_PIN=()  # steps 2 and 3: placed by the kernel

if [[ " $STEPS " == *" 2 "* ]]; then
  load0=$(loadavg)
  log "step 2: $SCHEDULES schedules every second, two servers on one Redis, ${REDIS_SECONDS} s (load $load0)"
  rd_port=$(free_port)
  mkdir -p "$OUT/redis"
  start redis redis-server --bind 127.0.0.1 --port "$rd_port" --dir "$OUT/redis" \
    --save "" --appendonly no
  RD_PID=$started
  wait_port "$rd_port"
  serve s2a redis --redis "redis://127.0.0.1:$rd_port" --redis-prefix bench
  A_RESP=$RESP A_HTTP=$HTTP A_PID=$SERVER
  serve s2b redis --redis "redis://127.0.0.1:$rd_port" --redis-prefix bench
  B_RESP=$RESP B_HTTP=$HTTP B_PID=$SERVER
  rd_mem0=$(redis-cli -p "$rd_port" info memory | awk -F: '/^used_memory:/ { print $2 + 0 }')
  rd_cpu0=$(cpu_s "$RD_PID")
  rc=0
  "$BENCH" schedules --servers "127.0.0.1:$A_RESP,127.0.0.1:$B_RESP" --pids "$A_PID,$B_PID" \
    --schedules "$SCHEDULES" --seconds "$REDIS_SECONDS" --consumers "$CONSUMERS" \
    --count "$COUNT" >"$OUT/s2.json" || rc=$?
  rd_cpu1=$(cpu_s "$RD_PID")
  log "redis-server CPU seconds: $rd_cpu0 before the bench run, $rd_cpu1 after"
  cat "$OUT/s2.json" >&2
  sta=$(stats "$A_HTTP")
  stb=$(stats "$B_HTTP")
  stop_pid "$A_PID"
  stop_pid "$B_PID"
  stop_pid "$RD_PID"
  summary+=("$(merge '{"step":"redis","servers":2,"rc":'"$rc"',"load_before":"'"$load0"'","load_after":"'"$(loadavg)"'"}' \
    "$(pick "$OUT/s2.json" "${FIRING_KEYS[@]}")" \
    "{\"server_a\":$sta,\"server_b\":$stb,\"redis_used_memory_before\":$rd_mem0,\"redis_cpu_s_whole_run\":$($PY -c "print(round($rd_cpu1-$rd_cpu0, 2))")}")")
fi

if [[ " $STEPS " == *" 3 "* ]]; then
  load0=$(loadavg)
  log "step 3: $IDLE idle hourly schedules, embedded: memory and restart (load $load0)"
  serve s3 embedded
  rc=0
  "$BENCH" schedules --servers "127.0.0.1:$RESP" --pids "$SERVER" --schedules "$IDLE" \
    --cron "0 * * * *" --topic sched.idle --name-prefix idle --seconds 0 --keep \
    --create-connections 4 --create-depth 256 --stall-seconds 60 >"$OUT/s3.json" || rc=$?
  cat "$OUT/s3.json" >&2
  last="idle-$((IDLE - 1))"
  st=$(stats "$HTTP")
  t0=$(now)
  stop_pid "$SERVER"
  t1=$(now)
  du_kb=$(du -sk "$OUT/data-s3" | cut -f1)
  # Start again on the same data dir and ports; time the first answers.
  start server-s3-restart "$DELAYQ" serve --store embedded --http-port "$HTTP" --resp-port "$RESP" \
    --log-level warn --data-dir "$OUT/data-s3" --fsync everysec
  SERVER=$started
  t2=$(now)
  health="" got=""
  for _ in $(seq 3000); do  # up to ~5 min
    if [ -z "$health" ] && curl -sf -m1 "127.0.0.1:$HTTP/healthz" >/dev/null 2>&1; then
      health=$(now)
    fi
    if [ -z "$got" ] && redis-cli -p "$RESP" SCHEDULE GET "$last" 2>/dev/null | grep -qx "$last"; then
      got=$(now)
    fi
    [ -n "$health" ] && [ -n "$got" ] && break
    sleep 0.05
  done
  [ -n "$got" ] || { echo "SCHEDULE GET $last never answered after the restart" >&2; exit 1; }
  rss_restart=$(awk '/^VmRSS:/ { print $2 * 1024 }' "/proc/$SERVER/status")
  st2=$(stats "$HTTP")
  stop_pid "$SERVER"
  summary+=("$(merge '{"step":"idle","rc":'"$rc"',"load_before":"'"$load0"'","load_after":"'"$(loadavg)"'"}' \
    "$(pick "$OUT/s3.json" schedules sets_per_s create_s rss_before_bytes rss_after_bytes \
      bytes_per_schedule errors first_error)" \
    "$($PY -c 'import json,sys; a=[float(x) for x in sys.argv[1:5]]; print(json.dumps({
      "stop_s": round(a[1]-a[0], 3), "healthz_after_s": round(a[2]-a[3], 3),
      "schedule_get_after_s": round(float(sys.argv[5])-a[3], 3), "rss_after_restart_bytes": int(sys.argv[6]),
      "data_dir_kb": int(sys.argv[7])}))' "$t0" "$t1" "${health:-$t2}" "$t2" "$got" "$rss_restart" "$du_kb")" \
    "{\"stats_before\":$st,\"stats_after_restart\":$st2}")")
fi

printf '%s\n' "${summary[@]}"
log "raw output in $OUT"
