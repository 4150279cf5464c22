#!/usr/bin/env bash
# delayq against its peers, in one run on this machine (SPEC §12): starts
# delayq (memory store, RESP + HTTP), beanstalkd (no binlog) and redis-server
# (no persistence) on free loopback ports, loads each with the same client,
# and prints the figures and their ratios (JSON, then a markdown table).
#
#   bash bench/server.sh            # builds first (make build)
#   SKIP_BUILD=1 BUILD=build-bench bash bench/server.sh
#
# Steps, run in the order 1 4 2 3 5 6 (lateness on servers that have only
# run cycles, which leave no jobs behind). Steps 1 and 2 run ROUNDS rounds,
# each round going through the servers compared in turn, and keep each
# figure's median round: this VM's speed drifts by tens of percent within a
# minute, and alternating makes the drift hit every server alike.
#   1 cycle     add -> reserve -> finish, 50 connections, DEPTH in flight each:
#               delayq RESP, beanstalkd, delayq HTTP
#   4 lateness  LATE_JOBS jobs due within LATE_WINDOW s while LATE_FAR more
#               wait 1-2 h (1M pending in all), consumers in long-poll
#               reserves, the server at half load (half its step-1 rate):
#               delayq vs beanstalkd
#   2 add       single adds, 50 connections, no pipelining: redis-benchmark SET
#               on Redis vs redis-benchmark ADD on delayq; delayq-bench put on
#               delayq RESP, Redis (SET), beanstalkd and delayq HTTP
#   3 http add  wrk (bench/http_add.lua) on delayq HTTP; ratios to step 2's
#               RESP adds
#   5 syscalls  strace -c -f on the server around SYSCALL_REQUESTS depth-1
#               requests from redis-benchmark: delayq ADD vs Redis SET
#   6 memory    RSS growth per pending job, MEM_JOBS jobs delayed 1 h, each
#               server started fresh: delayq, beanstalkd, Redis hash + zset
#
# All raw output stays in OUT (printed at the end). Every process started
# here is stopped by PID on exit. Takes about 4-5 minutes with the defaults.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
CONNECTIONS=${CONNECTIONS:-50}
DEPTH=${DEPTH:-16}              # cycles in flight per connection (step 1)
BODY=${BODY:-100}
ROUNDS=${ROUNDS:-3}             # rounds of steps 1 and 2, alternating servers; medians kept
CYCLE_SECONDS=${CYCLE_SECONDS:-5}      # per round
WARMUP_SECONDS=${WARMUP_SECONDS:-1}
ADD_REQUESTS=${ADD_REQUESTS:-200000}   # redis-benchmark -n, per round
PUT_SECONDS=${PUT_SECONDS:-4}          # per round
HTTP_SECONDS=${HTTP_SECONDS:-8}
LATE_JOBS=${LATE_JOBS:-100000}
LATE_FAR=${LATE_FAR:-900000}
LATE_WINDOW=${LATE_WINDOW:-20}
LATE_LEAD=${LATE_LEAD:-8}
LATE_CONSUMERS=${LATE_CONSUMERS:-8}
SYSCALL_REQUESTS=${SYSCALL_REQUESTS:-100000}
MEM_JOBS=${MEM_JOBS:-1000000}   # 0 skips step 6
OUT=${OUT:-$(mktemp -d /tmp/delayq-server-bench.XXXXXX)}
PY=/usr/bin/python3

mkdir -p "$OUT"
bin=$BUILD/bin
# shellcheck source=bench/lib.sh
source bench/lib.sh  # (the cwd is the repository root by now)
build_and_check "$bin/delayq" "$bin/delayq-bench"
need_commands beanstalkd redis-server redis-benchmark wrk strace

pids=()
trap stop_started EXIT


# json FILE KEY: a number from a one-line JSON object.
# (0 when the file or the key is missing).
json() {
  $PY -c 'import json,sys
try: print(json.load(open(sys.argv[1]))[sys.argv[2]])
except Exception: print(0)' "$1" "$2"
}

# bench NAME SERVER_PID ARGS...: bench_cpu (bench/lib.sh).
bench() { bench_cpu "$@"; }


body=$(head -c "$BODY" /dev/zero | tr '\0' x)

start_delayq() {
  dq_resp=$(free_port)
  dq_http=$(free_port)
  start "delayq$1" "$bin/delayq" serve --store memory --resp-port "$dq_resp" --http-port "$dq_http"
  dq_pid=$started
  wait_port "$dq_resp"
  wait_port "$dq_http"
}
start_beanstalkd() {
  bs_port=$(free_port)
  start "beanstalkd$1" beanstalkd -l 127.0.0.1 -p "$bs_port"
  bs_pid=$started
  wait_port "$bs_port"
}
start_redis() {
  rd_port=$(free_port)
  start "redis$1" redis-server --bind 127.0.0.1 --port "$rd_port" --save '' --appendonly no
  rd_pid=$started
  wait_port "$rd_port"
}

log "machine: $(nproc) cpu, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
  "load $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD 2>/dev/null || echo ?)"
log "output in $OUT"
start_delayq ""
start_beanstalkd ""
start_redis ""
log "delayq pid $dq_pid resp $dq_resp http $dq_http; beanstalkd pid $bs_pid port $bs_port;" \
  "redis pid $rd_pid port $rd_port"

# --- 1 cycles ---------------------------------------------------------------------
cyc=(--connections "$CONNECTIONS" --depth "$DEPTH" --body "$BODY" --seconds "$CYCLE_SECONDS"
  --warmup-seconds "$WARMUP_SECONDS")
for r in $(seq "$ROUNDS"); do
  log "1 cycle, round $r/$ROUNDS: delayq resp, beanstalkd, delayq http"
  bench "cycle_delayq_resp_r$r" "$dq_pid" cycle --proto resp --port "$dq_resp" "${cyc[@]}"
  bench "cycle_beanstalkd_r$r" "$bs_pid" cycle --proto beanstalk --port "$bs_port" "${cyc[@]}"
  bench "cycle_delayq_http_r$r" "$dq_pid" cycle --proto http --port "$dq_http" "${cyc[@]}"
done
median cycle_delayq_resp cycles_per_s
median cycle_beanstalkd cycles_per_s
median cycle_delayq_http cycles_per_s

# --- 4 lateness ---------------------------------------------------------------------
late=(--jobs "$LATE_JOBS" --far-jobs "$LATE_FAR" --window-seconds "$LATE_WINDOW"
  --lead-seconds "$LATE_LEAD" --consumers "$LATE_CONSUMERS" --body "$BODY")
dq_half=$($PY -c "print(int($(json "$OUT/cycle_delayq_resp.json" cycles_per_s) / 2))")
bs_half=$($PY -c "print(int($(json "$OUT/cycle_beanstalkd.json" cycles_per_s) / 2))")
log "4 lateness: delayq resp, load $dq_half cycles/s"
bench late_delayq_resp "$dq_pid" lateness --proto resp --port "$dq_resp" "${late[@]}" \
  --load-rate "$dq_half" --load-depth "$DEPTH"
# The server's own measure of the same deliveries (run_at to the write to the
# waiting reserve, SPEC's "reservable time - run_at"): STATS due_lateness_*.
redis-cli -p "$dq_resp" STATS | paste - - | $PY -c 'import json,sys
f = dict(l.split("\t") for l in sys.stdin.read().splitlines())
print(json.dumps({k: int(v) for k, v in f.items() if k.startswith("due_lateness")}))' \
  >"$OUT/late_delayq_server.json"
log "4 lateness: beanstalkd, load $bs_half cycles/s"
bench late_beanstalkd "$bs_pid" lateness --proto beanstalk --port "$bs_port" "${late[@]}" \
  --load-rate "$bs_half" --load-depth "$DEPTH"

# --- 2 single adds, 3 HTTP adds ----------------------------------------------------------
put=(--connections "$CONNECTIONS" --depth 1 --body "$BODY" --seconds "$PUT_SECONDS"
  --warmup-seconds 1)
for r in $(seq "$ROUNDS"); do
  log "2 add, round $r/$ROUNDS: redis-benchmark SET on redis, ADD on delayq"
  redis_benchmark "rb_set_r$r" "$rd_pid" "$rd_port" -n "$ADD_REQUESTS" -d "$BODY" -t set
  redis_benchmark "rb_add_r$r" "$dq_pid" "$dq_resp" -n "$ADD_REQUESTS" ADD t '*' 0 60000 "$body"
  log "2 add, round $r/$ROUNDS: delayq-bench put: delayq resp, redis SET, beanstalkd, delayq http"
  bench "put_delayq_resp_r$r" "$dq_pid" put --proto resp --port "$dq_resp" "${put[@]}"
  bench "put_redis_set_r$r" "$rd_pid" put --proto redis-set --port "$rd_port" "${put[@]}"
  bench "put_beanstalkd_r$r" "$bs_pid" put --proto beanstalk --port "$bs_port" "${put[@]}"
  bench "put_delayq_http_r$r" "$dq_pid" put --proto http --port "$dq_http" "${put[@]}"
done
for name in rb_set rb_add; do median "$name" rps; done
for name in put_delayq_resp put_redis_set put_beanstalkd put_delayq_http; do
  median "$name" adds_per_s
done

log "3 http add: wrk"
c0=$(cpu_s "$dq_pid")
wrk -t1 -c"$CONNECTIONS" -d"${HTTP_SECONDS}s" -s bench/http_add.lua \
  "http://127.0.0.1:$dq_http/v1/jobs" >"$OUT/wrk.txt"
wrk_cpu=$(minus "$(cpu_s "$dq_pid")" "$c0")
wrk_rps=$(awk '/Requests\/sec/ { print $2 }' "$OUT/wrk.txt")
wrk_bad=$(awk '/Non-2xx/ { print $NF }' "$OUT/wrk.txt")
echo "{\"wrk_rps\":$wrk_rps,\"non_2xx\":${wrk_bad:-0},\"server_cpu_s\":$wrk_cpu}" \
  | tee "$OUT/wrk.json" >&2

# --- 5 syscalls per request -----------------------------------------------------------
# strace_count NAME PID PORT ARGS...: syscalls of PID (all threads) per request
# while redis-benchmark sends SYSCALL_REQUESTS depth-1 requests.
strace_count() {
  local name=$1 spid=$2 port=$3
  shift 3
  strace -c -f -p "$spid" -o "$OUT/$name.strace" 2>"$OUT/$name.strace.err" &
  local st=$!
  pids+=("$st")
  sleep 1  # attached
  redis-benchmark -h 127.0.0.1 -p "$port" -c "$CONNECTIONS" -P 1 -n "$SYSCALL_REQUESTS" --csv \
    "$@" >"$OUT/$name.csv" 2>/dev/null
  kill -INT "$st"
  wait "$st" 2>/dev/null || true
  awk -v n="$SYSCALL_REQUESTS" '$NF == "total" { printf "%.2f\n", $4 / n }' "$OUT/$name.strace"
}
log "5 syscalls: delayq ADD"
dq_sys=$(strace_count strace_delayq "$dq_pid" "$dq_resp" ADD t '*' 0 60000 "$body")
log "5 syscalls: redis SET"
rd_sys=$(strace_count strace_redis "$rd_pid" "$rd_port" -d "$BODY" -t set)
echo "{\"delayq_syscalls_per_add\":$dq_sys,\"redis_syscalls_per_set\":$rd_sys}" \
  | tee "$OUT/syscalls.json" >&2

# --- 6 memory ---------------------------------------------------------------------------
if [ "$MEM_JOBS" != 0 ]; then
  stop_started
  pids=()
  start_delayq _mem
  start_beanstalkd _mem
  start_redis _mem
  mem=(--jobs "$MEM_JOBS" --body "$BODY")
  log "6 memory: delayq"
  bench mem_delayq "$dq_pid" memory --proto resp --port "$dq_resp" --pid "$dq_pid" "${mem[@]}"
  log "6 memory: beanstalkd"
  bench mem_beanstalkd "$bs_pid" memory --proto beanstalk --port "$bs_port" --pid "$bs_pid" \
    "${mem[@]}"
  log "6 memory: redis hash + zset"
  bench mem_redis "$rd_pid" memory --proto redis-hashzset --port "$rd_port" --pid "$rd_pid" \
    "${mem[@]}"
fi

# --- summary ----------------------------------------------------------------------------
$PY - "$OUT" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'EOF'
import glob, json, os, sys
out = sys.argv[1]
r = {}
for f in glob.glob(os.path.join(out, "*.json")):
    r[os.path.basename(f)[:-5]] = json.load(open(f))
def g(name, key):
    return r.get(name, {}).get(key)
def ratio(a, b):
    return round(a / b, 2) if a is not None and b else None
s = {
    "cycle_delayq_resp_per_s": g("cycle_delayq_resp", "cycles_per_s"),
    "cycle_delayq_http_per_s": g("cycle_delayq_http", "cycles_per_s"),
    "cycle_beanstalkd_per_s": g("cycle_beanstalkd", "cycles_per_s"),
    "cycle_delayq_over_beanstalkd": ratio(g("cycle_delayq_resp", "cycles_per_s"),
                                          g("cycle_beanstalkd", "cycles_per_s")),
    "add_redis_set_rps": g("rb_set", "rps"),
    "add_delayq_rps_redis_benchmark": g("rb_add", "rps"),
    "add_delayq_over_redis_set": ratio(g("rb_add", "rps"), g("rb_set", "rps")),
    "put_delayq_resp_per_s": g("put_delayq_resp", "adds_per_s"),
    "put_beanstalkd_per_s": g("put_beanstalkd", "adds_per_s"),
    "put_redis_set_per_s": g("put_redis_set", "adds_per_s"),
    "put_delayq_over_redis_set": ratio(g("put_delayq_resp", "adds_per_s"),
                                       g("put_redis_set", "adds_per_s")),
    "http_add_wrk_rps": g("wrk", "wrk_rps"),
    "http_add_put_per_s": g("put_delayq_http", "adds_per_s"),
    "http_over_resp_add_wrk": ratio(g("wrk", "wrk_rps"), g("rb_add", "rps")),
    "http_over_resp_add_put": ratio(g("put_delayq_http", "adds_per_s"),
                                    g("put_delayq_resp", "adds_per_s")),
    "lateness_delayq": {k: g("late_delayq_resp", k) for k in
                        ("count", "early", "p50_ms", "p99_ms", "p999_ms", "max_ms", "missing",
                         "load_cycles_per_s")},
    "lateness_delayq_server_us": r.get("late_delayq_server"),
    "lateness_beanstalkd": {k: g("late_beanstalkd", k) for k in
                            ("count", "early", "p50_ms", "p99_ms", "p999_ms", "max_ms",
                             "missing", "load_cycles_per_s")},
    "syscalls_per_add_delayq": g("syscalls", "delayq_syscalls_per_add"),
    "syscalls_per_set_redis": g("syscalls", "redis_syscalls_per_set"),
    "bytes_per_job_delayq": g("mem_delayq", "bytes_per_job"),
    "bytes_per_job_beanstalkd": g("mem_beanstalkd", "bytes_per_job"),
    "bytes_per_job_redis_hash_zset": g("mem_redis", "bytes_per_job"),
    "load_average_at_end": sys.argv[2],
}
print(json.dumps(s))
ld, lb = s["lateness_delayq"], s["lateness_beanstalkd"]
rows = [
    ("cycles/s, %s conns, pipelined" % g("cycle_delayq_resp", "connections"),
     s["cycle_delayq_resp_per_s"], s["cycle_beanstalkd_per_s"], s["cycle_delayq_over_beanstalkd"]),
    ("cycles/s over HTTP (same depth)", s["cycle_delayq_http_per_s"], s["cycle_beanstalkd_per_s"],
     ratio(s["cycle_delayq_http_per_s"], s["cycle_beanstalkd_per_s"])),
    ("single add/s, redis-benchmark (peer: Redis SET)", s["add_delayq_rps_redis_benchmark"],
     s["add_redis_set_rps"], s["add_delayq_over_redis_set"]),
    ("single add/s, delayq-bench put (peer: Redis SET, same client)", s["put_delayq_resp_per_s"],
     s["put_redis_set_per_s"], s["put_delayq_over_redis_set"]),
    ("single add/s, delayq-bench put (peer: beanstalkd)", s["put_delayq_resp_per_s"],
     s["put_beanstalkd_per_s"], ratio(s["put_delayq_resp_per_s"], s["put_beanstalkd_per_s"])),
    ("HTTP add/s, wrk (vs RESP add, redis-benchmark)", s["http_add_wrk_rps"],
     s["add_delayq_rps_redis_benchmark"], s["http_over_resp_add_wrk"]),
    ("HTTP add/s, delayq-bench put (vs RESP put)", s["http_add_put_per_s"],
     s["put_delayq_resp_per_s"], s["http_over_resp_add_put"]),
    ("lateness p50 ms (peer: beanstalkd)", ld["p50_ms"], lb["p50_ms"], None),
    ("lateness p99 ms", ld["p99_ms"], lb["p99_ms"], None),
    ("lateness at the server (run_at to the write), p50 / p99 / p99.9 ms",
     "%s / %s / %s" % tuple(round((s["lateness_delayq_server_us"] or {}).get(k, 0) / 1000, 3)
                            for k in ("due_lateness_p50_us", "due_lateness_p99_us",
                                      "due_lateness_p999_us")), "", None),
    ("lateness p99.9 / max ms", "%s / %s" % (ld["p999_ms"], ld["max_ms"]),
     "%s / %s" % (lb["p999_ms"], lb["max_ms"]), None),
    ("early deliveries / missing", "%s / %s" % (ld["early"], ld["missing"]),
     "%s / %s" % (lb["early"], lb["missing"]), None),
    ("syscalls per depth-1 add (peer: Redis SET)", s["syscalls_per_add_delayq"],
     s["syscalls_per_set_redis"], ratio(s["syscalls_per_add_delayq"], s["syscalls_per_set_redis"])),
    ("bytes per pending job (peer: beanstalkd)", s["bytes_per_job_delayq"],
     s["bytes_per_job_beanstalkd"], ratio(s["bytes_per_job_delayq"], s["bytes_per_job_beanstalkd"])),
    ("bytes per pending job (peer: Redis hash + zset)", s["bytes_per_job_delayq"],
     s["bytes_per_job_redis_hash_zset"],
     ratio(s["bytes_per_job_delayq"], s["bytes_per_job_redis_hash_zset"])),
]
print()
print("| measure | delayq | peer | ratio |")
print("| --- | --- | --- | --- |")
for name, a, b, q in rows:
    print("| %s | %s | %s | %s |" % (name, a, b, "" if q is None else q))
EOF
log "raw output: $OUT"
