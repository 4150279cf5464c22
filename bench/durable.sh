#!/usr/bin/env bash
# The embedded store's figures (SPEC §12, issue 4), in one run on this
# machine: starts `delayq serve --store embedded` (each server on a fresh
# data directory), `delayq serve --store memory` and `beanstalkd -b DIR -f0`
# on free loopback ports, loads them with delayq-bench, and prints the
# figures and their ratios (JSON, then a markdown table).
#
#   bash bench/durable.sh                               # builds first (make build)
#   SKIP_BUILD=1 BUILD=build-bench2 bash bench/durable.sh
#   STEPS="1 2" STORE_DURABLE=memory bash bench/durable.sh   # the script itself, on `memory`
#
# Steps (STEPS, default "1 2 3 4"):
#   1 everysec  cycle --depth DEPTH, 50 connections: embedded --fsync
#               everysec vs memory, ROUNDS rounds alternating, medians;
#               target embedded / memory >= 0.90
#   2 always    cycle, 50 connections, DEPTH in flight (SPEC §12's pipelined
#               cycles: target >= 20x) and 1 in flight (stricter): embedded
#               --fsync always vs beanstalkd -b DIR -f0, ROUNDS rounds
#               alternating, medians. Jobs per fdatasync from /v1/stats
#               (finished and log_syncs, read before and after each run).
#               Also 50 producers (put, adds only, 1 and DEPTH in flight
#               each; on a second pair of servers) against beanstalkd -f0:
#               the issue's "50 producers", and one client (reservelat,
#               ONE_CYCLES) against beanstalkd -f0.
#   3 restart   put RESTART_JOBS jobs delayed 1 h into embedded everysec,
#               kill -9, du -sb of the data dir, start again on it: seconds
#               from exec to the first PING answered; /v1/stats jobs
#               must match; target <= 1 s per million jobs
#   4 reserve   reserve round trip (reservelat: add, reserve, finish, one
#               at a time on one connection), LAT_ROUNDS x LAT_CYCLES, on a
#               fresh embedded server; then FINISHED_JOBS cycles; wait until
#               disk_bytes stops shrinking (<= SETTLE_MAX s); the reserve
#               round trip again, in turn with a server just started on an
#               empty directory (a control for the VM's drift); target p99
#               after / fresh <= 1.1
#
# Fields of /v1/stats that the embedded store adds (log_writes, log_syncs,
# log_bytes, disk_bytes, log_segments) are null in the output while a server
# does not report them. STORE_DURABLE=memory runs every "embedded" server
# with --store memory instead: for trying the script out (step 3 then
# finds 0 jobs after the restart, as it must).
#
# All raw output stays in OUT (printed at the end); data directories in
# DATA_ROOT (default OUT/data) are removed at the end unless KEEP_DATA=1.
# Every process started here is stopped by PID on exit. About 2.5 minutes
# with the defaults (step 4's wait for compaction can add up to SETTLE_MAX).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
STEPS=${STEPS:-1 2 3 4}
STORE_DURABLE=${STORE_DURABLE:-embedded}  # memory: try the script without the embedded store
CONNECTIONS=${CONNECTIONS:-50}
DEPTH=${DEPTH:-16}                    # cycles in flight per connection (steps 1, 2's reference, 4)
BODY=${BODY:-100}
ROUNDS=${ROUNDS:-3}                   # rounds of steps 1 and 2, alternating servers; medians kept
CYCLE_SECONDS=${CYCLE_SECONDS:-5}     # per run in steps 1 and 2
WARMUP_SECONDS=${WARMUP_SECONDS:-1}
RESTART_JOBS=${RESTART_JOBS:-1000000}       # step 3 (the documented figure: 10000000)
RESTART_TIMEOUT=${RESTART_TIMEOUT:-120}     # s to wait for the restarted server
KILL_AFTER=${KILL_AFTER:-2}                 # s between the last add and kill -9 (> everysec)
FINISHED_JOBS=${FINISHED_JOBS:-1000000}     # step 4 (the documented figure: 10000000)
LAT_CYCLES=${LAT_CYCLES:-20000}             # reservelat cycles per round
ONE_CYCLES=${ONE_CYCLES:-3000}              # step 2's one-client round trips per round
LAT_ROUNDS=${LAT_ROUNDS:-3}                 # reservelat rounds before and after; median p99
SETTLE_MAX=${SETTLE_MAX:-60}                # s at most to wait for disk_bytes to stop shrinking
SETTLE_STABLE=${SETTLE_STABLE:-5}           # s without a decrease that count as stopped
OUT=${OUT:-$(mktemp -d /tmp/delayq-durable-bench.XXXXXX)}
DATA_ROOT=${DATA_ROOT:-$OUT/data}           # must be on the disk measured (not tmpfs)
KEEP_DATA=${KEEP_DATA:-0}
PY=/usr/bin/python3

mkdir -p "$OUT" "$DATA_ROOT"
bin=$BUILD/bin
if [ "${SKIP_BUILD:-0}" != 1 ]; then make build BUILD="$BUILD" >&2; fi
for tool in "$bin/delayq" "$bin/delayq-bench"; do
  [ -x "$tool" ] || { echo "missing $tool: build first (make build)" >&2; exit 1; }
done
for tool in beanstalkd curl; do
  command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 1; }
done

pids=()
datadirs=()
cleanup() {
  local p d
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do stop_pid "$p"; done
  if [ "$KEEP_DATA" != 1 ]; then
    for d in "${datadirs[@]}"; do rm -rf -- "$d"; done
  fi
}
trap cleanup EXIT
# shellcheck source=bench/lib.sh
source bench/lib.sh  # (the cwd is the repository root by now)

# busy_pct: how busy the two CPUs were over the last second, in percent
# (called between steps, when nothing of this script runs).
busy_pct() {
  $PY - <<'EOF'
import time
def snap():
    v = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return sum(v), v[3] + v[4]  # all, idle + iowait
t0, i0 = snap()
time.sleep(1)
t1, i1 = snap()
print(round(100 * (1 - (i1 - i0) / max(1, t1 - t0))))
EOF
}
# want STEP: whether STEPS names it; says so when other work keeps the
# machine busy (the figures are worth little then, on two vCPUs).
want() {
  [[ " $STEPS " == *" $1 "* ]] || return 1
  local busy
  busy=$(busy_pct)
  if [ "$busy" -gt 15 ] || pgrep -x cc1plus >/dev/null; then
    log "WARNING: before step $1 the CPUs were $busy % busy" \
      "$(pgrep -x cc1plus >/dev/null && echo '(a compiler is running) ')(load" \
      "$(cut -d' ' -f1-3 /proc/loadavg)): its figures suffer"
  fi
}

# new_datadir NAME: a fresh, empty directory under DATA_ROOT in $datadir.
new_datadir() {
  datadir=$(mktemp -d "$DATA_ROOT/$1.XXXXXX")
  datadirs+=("$datadir")
}

now() { date +%s.%N; }

# stats HTTP_PORT: delayq's /v1/stats (a JSON object), or {} when it does not answer.
stats() {
  curl -sf -m 5 "http://127.0.0.1:$1/v1/stats" || echo '{}'
}

# json FILE KEY: a value from a one-line JSON object (null when the file or the key is missing).
json() {
  $PY -c 'import json,sys
try: print(json.dumps(json.load(open(sys.argv[1])).get(sys.argv[2])))
except Exception: print("null")' "$1" "$2"
}

# start_delayq NAME STORE FSYNC: `delayq serve` on free ports; STORE embedded
# gets a fresh data directory. Sets dq_pid, dq_resp, dq_http, dq_dir.
start_delayq() {
  local name=$1 store=$2 fsync=$3
  [ "$store" = embedded ] && store=$STORE_DURABLE
  new_datadir "$name"
  dq_dir=$datadir
  dq_resp=$(free_port)
  dq_http=$(free_port)
  start "$name" "$bin/delayq" serve --store "$store" --data-dir "$dq_dir" --fsync "$fsync" \
    --resp-port "$dq_resp" --http-port "$dq_http"
  dq_pid=$started
  wait_port "$dq_resp"
  wait_port "$dq_http"
  log "$name: delayq serve --store $store --fsync $fsync, pid $dq_pid, resp $dq_resp," \
    "http $dq_http, data $dq_dir"
}
start_beanstalkd() {
  new_datadir "$1"
  bs_dir=$datadir
  bs_port=$(free_port)
  start "$1" beanstalkd -l 127.0.0.1 -p "$bs_port" -b "$bs_dir" -f0
  bs_pid=$started
  wait_port "$bs_port"
  log "$1: beanstalkd -b $bs_dir -f0, pid $bs_pid, port $bs_port"
}

# bench NAME SERVER_PID HTTP_PORT ARGS...: runs delayq-bench, keeps its JSON
# in OUT/NAME.json with the server's CPU seconds during the run added and,
# unless HTTP_PORT is -, what /v1/stats counted over the run (d_finished,
# d_added, d_log_syncs, ...: after - before, null when a field is missing)
# and jobs_per_sync (jobs finished, or added for put, per fdatasync);
# compiler_running when a cc1plus was seen just before or after. A failed
# run is logged and leaves its figures out; the other steps still run.
bench() {
  local name=$1 spid=$2 hport=$3
  shift 3
  local c0 c1 t0 t1 cc=0
  if [ "$hport" = - ]; then echo '{}' >"$OUT/$name.stats0"; else stats "$hport" >"$OUT/$name.stats0"; fi
  pgrep -x cc1plus >/dev/null && cc=1
  c0=$(cpu_s "$spid")
  t0=$(now)
  if ! "$bin/delayq-bench" "$@" >"$OUT/$name.raw" 2>"$OUT/$name.err"; then
    echo "FAILED: delayq-bench $* ($(tail -1 "$OUT/$name.err"))" >&2
    [ -s "$OUT/$name.raw" ] || return 0
  fi
  t1=$(now)
  c1=$(cpu_s "$spid")
  pgrep -x cc1plus >/dev/null && cc=1
  if [ "$hport" = - ]; then echo '{}' >"$OUT/$name.stats1"; else stats "$hport" >"$OUT/$name.stats1"; fi
  $PY - "$OUT" "$name" "$c0" "$c1" "$t0" "$t1" "$cc" <<'EOF'
import json, os, sys
out, name = sys.argv[1:3]
c0, c1, t0, t1 = map(float, sys.argv[3:7])
p = lambda ext: os.path.join(out, name + ext)
d = json.load(open(p(".raw")))
d["name"] = name
d["server_cpu_s"] = round(c1 - c0, 2)
d["wall_s"] = round(t1 - t0, 2)
if sys.argv[7] == "1":
    d["compiler_running"] = True  # seen just before or just after the run
s0, s1 = json.load(open(p(".stats0"))), json.load(open(p(".stats1")))
if s0 and s1:
    for k in ("finished", "added", "log_writes", "log_syncs", "log_bytes"):
        d["d_" + k] = s1[k] - s0[k] if k in s0 and k in s1 else None
    for k in ("jobs", "disk_bytes", "log_segments"):
        d[k + "_after"] = s1.get(k)
    jobs = d["d_added"] if d.get("bench") == "put" else d["d_finished"]
    per = lambda k: round(d[k] / jobs, 2) if d[k] is not None and jobs else None
    d["jobs_per_sync"] = round(jobs / d["d_log_syncs"], 1) if jobs and d["d_log_syncs"] else None
    d["syncs_per_s"] = round(d["d_log_syncs"] / (t1 - t0)) if d["d_log_syncs"] is not None else None
    d["log_writes_per_job"] = per("d_log_writes")
    d["log_bytes_per_job"] = per("d_log_bytes")
json.dump(d, open(p(".json"), "w"))
EOF
  cat "$OUT/$name.json" >&2
  echo >&2
}

log "machine: $(nproc) cpu, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
  "load $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD 2>/dev/null || echo ?)"
log "output in $OUT, data in $DATA_ROOT ($(df -T "$DATA_ROOT" | awk 'NR == 2 { print $2 }'))," \
  "steps $STEPS, durable store $STORE_DURABLE"

cyc=(--connections "$CONNECTIONS" --body "$BODY" --seconds "$CYCLE_SECONDS"
  --warmup-seconds "$WARMUP_SECONDS")

# --- 1 everysec vs memory -------------------------------------------------------------
if want 1; then
  start_delayq s1_memory memory everysec
  mem_pid=$dq_pid mem_resp=$dq_resp mem_http=$dq_http
  start_delayq s1_everysec embedded everysec
  for r in $(seq "$ROUNDS"); do
    # The order flips each round, so a drift of the VM's speed within a
    # round favours neither; each round's pair also gives a ratio.
    log "1 cycle depth $DEPTH, round $r/$ROUNDS: memory and embedded everysec"
    run_mem() {
      bench "s1_memory_r$r" "$mem_pid" "$mem_http" cycle --proto resp --port "$mem_resp" \
        --depth "$DEPTH" "${cyc[@]}"
    }
    run_dq() {
      bench "s1_everysec_r$r" "$dq_pid" "$dq_http" cycle --proto resp --port "$dq_resp" \
        --depth "$DEPTH" "${cyc[@]}"
    }
    if ((r % 2)); then run_mem; run_dq; else run_dq; run_mem; fi
  done
  median s1_memory cycles_per_s
  median s1_everysec cycles_per_s
  du -sb "$dq_dir" | awk '{ print "{\"du_bytes\":" $1 "}" }' >"$OUT/s1_everysec_du.json"
  stop_pid "$mem_pid"
  stop_pid "$dq_pid"
fi

# --- 2 fsync always vs beanstalkd -f0 -------------------------------------------------------
if want 2; then
  # The adds-only runs keep every job they add: they get servers of their
  # own, so the cycles never run over millions of pending jobs.
  start_delayq s2_always_adds embedded always
  pa_pid=$dq_pid pa_resp=$dq_resp pa_http=$dq_http
  start_beanstalkd s2_beanstalkd_adds
  pb_pid=$bs_pid pb_port=$bs_port
  start_delayq s2_always embedded always
  start_beanstalkd s2_beanstalkd
  for r in $(seq "$ROUNDS"); do
    log "2 cycle depth 1, round $r/$ROUNDS: embedded always, beanstalkd -f0; embedded always depth $DEPTH"
    bench "s2_always_d1_r$r" "$dq_pid" "$dq_http" cycle --proto resp --port "$dq_resp" \
      --depth 1 "${cyc[@]}"
    bench "s2_beanstalkd_d1_r$r" "$bs_pid" - cycle --proto beanstalk --port "$bs_port" \
      --depth 1 "${cyc[@]}"
    bench "s2_always_d${DEPTH}_r$r" "$dq_pid" "$dq_http" cycle --proto resp --port "$dq_resp" \
      --depth "$DEPTH" "${cyc[@]}"
    bench "s2_beanstalkd_d${DEPTH}_r$r" "$bs_pid" - cycle --proto beanstalk --port "$bs_port" \
      --depth "$DEPTH" "${cyc[@]}"
    # The issue's own wording, "50 producers": adds only, one in flight each.
    bench "s2_always_put_r$r" "$pa_pid" "$pa_http" put --proto resp --port "$pa_resp" \
      --depth 1 "${cyc[@]}"
    bench "s2_beanstalkd_put_r$r" "$pb_pid" - put --proto beanstalk --port "$pb_port" \
      --depth 1 "${cyc[@]}"
    # And pipelined, as SPEC §12's cycles are.
    bench "s2_always_put_d${DEPTH}_r$r" "$pa_pid" "$pa_http" put --proto resp --port "$pa_resp" \
      --depth "$DEPTH" "${cyc[@]}"
    bench "s2_beanstalkd_put_d${DEPTH}_r$r" "$pb_pid" - put --proto beanstalk --port "$pb_port" \
      --depth "$DEPTH" "${cyc[@]}"
    # One client, one request at a time: each round trip waits for its own fdatasync.
    bench "s2_always_one_r$r" "$dq_pid" "$dq_http" reservelat --proto resp --port "$dq_resp" \
      --cycles "$ONE_CYCLES" --body "$BODY"
    bench "s2_beanstalkd_one_r$r" "$bs_pid" - reservelat --proto beanstalk --port "$bs_port" \
      --cycles "$ONE_CYCLES" --body "$BODY"
  done
  median s2_always_d1 cycles_per_s
  median s2_beanstalkd_d1 cycles_per_s
  median s2_always_put adds_per_s
  median s2_beanstalkd_put adds_per_s
  median "s2_always_put_d$DEPTH" adds_per_s
  median "s2_beanstalkd_put_d$DEPTH" adds_per_s
  median "s2_always_d$DEPTH" cycles_per_s
  median "s2_beanstalkd_d$DEPTH" cycles_per_s
  median s2_always_one cycles_per_s
  median s2_beanstalkd_one cycles_per_s
  stop_pid "$dq_pid"
  stop_pid "$bs_pid"
  stop_pid "$pa_pid"
  stop_pid "$pb_pid"
fi

# --- 3 restart time ---------------------------------------------------------------------
if want 3; then
  start_delayq s3_fill embedded everysec
  log "3 restart: put $RESTART_JOBS jobs delayed 1 h"
  bench s3_fill "$dq_pid" "$dq_http" put --proto resp --port "$dq_resp" --jobs "$RESTART_JOBS" \
    --delay-ms 3600000 --connections "$CONNECTIONS" --depth "$DEPTH" --body "$BODY" \
    --stall-seconds 60
  sleep "$KILL_AFTER"
  stats "$dq_http" >"$OUT/s3_before_kill.stats"
  kill -9 "$dq_pid"
  stop_pid "$dq_pid"
  du_bytes=$(du -sb "$dq_dir" | cut -f1)
  log "3 restart: killed -9 with $(json "$OUT/s3_before_kill.stats" jobs) jobs; data dir $du_bytes bytes"
  s3_resp=$(free_port)
  s3_http=$(free_port)
  s3_store=$STORE_DURABLE
  # Python starts the server (so the clock starts at its exec) and polls it:
  # a PING on the RESP port every millisecond until one is answered, then
  # /v1/stats until `jobs` reaches the count before the kill or stops
  # changing for 2 s. The server's PID goes to OUT/s3_restart.pid at once.
  $PY - "$OUT" "$RESTART_TIMEOUT" "$(json "$OUT/s3_before_kill.stats" jobs)" \
    "$bin/delayq" serve --store "$s3_store" --data-dir "$dq_dir" --fsync everysec \
    --resp-port "$s3_resp" --http-port "$s3_http" <<'EOF' >&2 || log "3 restart: FAILED"
import http.client, json, os, socket, subprocess, sys, time
out, timeout, expected = sys.argv[1], float(sys.argv[2]), json.loads(sys.argv[3])
cmd = sys.argv[4:]
resp_port = int(cmd[cmd.index("--resp-port") + 1])
http_port = int(cmd[cmd.index("--http-port") + 1])
logf = open(os.path.join(out, "s3_restart.log"), "w")
t0 = time.monotonic()
proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT)
open(os.path.join(out, "s3_restart.pid"), "w").write(str(proc.pid))

def ping():
    try:
        with socket.create_connection(("127.0.0.1", resp_port), timeout=timeout) as s:
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False

def jobs():
    try:
        c = http.client.HTTPConnection("127.0.0.1", http_port, timeout=10)
        c.request("GET", "/v1/stats")
        return json.loads(c.getresponse().read()).get("jobs")
    except (OSError, ValueError):
        return None

r = {"pid": proc.pid, "jobs_before_kill": expected}
while not ping():
    if proc.poll() is not None:
        r["error"] = "the server exited with %d" % proc.returncode
        break
    if time.monotonic() - t0 > timeout:
        r["error"] = "no PING answered within %g s" % timeout
        break
    time.sleep(0.001)
else:
    r["first_answer_s"] = round(time.monotonic() - t0, 3)
    last, changed = None, time.monotonic()
    while time.monotonic() - t0 < timeout:
        n = jobs()
        t = time.monotonic()
        if n != last:
            last, changed = n, t
        if n is not None and n == expected:
            r["all_jobs_s"] = round(t - t0, 3)
            break
        if t - changed > 2:
            break
        time.sleep(0.005)
    r["jobs_after_restart"] = last
    r["jobs_match"] = last == expected
json.dump(r, open(os.path.join(out, "s3_restart.json"), "w"))
EOF
  if [ -s "$OUT/s3_restart.pid" ]; then
    s3_pid=$(cat "$OUT/s3_restart.pid")
    pids+=("$s3_pid")
    stats "$s3_http" >"$OUT/s3_after_restart.stats"
    stop_pid "$s3_pid"
  fi
  $PY - "$OUT" "$du_bytes" <<'EOF' >&2
import json, os, sys
out, du = sys.argv[1], int(sys.argv[2])
ld = lambda f: json.load(open(os.path.join(out, f))) if os.path.exists(os.path.join(out, f)) else {}
r = ld("s3_restart.json")
before = ld("s3_before_kill.stats")
jobs = before.get("jobs")
r["du_bytes"] = du
r["du_bytes_per_job"] = round(du / jobs, 1) if jobs else None
lb = before.get("log_bytes")
r["log_bytes"] = lb
r["log_bytes_per_job"] = round(lb / jobs, 1) if lb is not None and jobs else None
r["disk_bytes"] = before.get("disk_bytes")
r["log_segments"] = before.get("log_segments")
after = ld("s3_after_restart.stats")
r["recovery_ms"] = after.get("recovery_ms")  # the server's own figure, where it reports one
r["recovered_records"] = after.get("recovered_records")
s = r.get("all_jobs_s") or r.get("first_answer_s")
r["restart_s"] = s
r["s_per_million_jobs"] = round(s / (jobs / 1e6), 3) if s is not None and jobs else None
json.dump(r, open(os.path.join(out, "s3_restart.json"), "w"))
print(json.dumps(r))
EOF
fi

# --- 4 reserve latency after many finished jobs ---------------------------------------------
if want 4; then
  start_delayq s4 embedded everysec
  lat=(--proto resp --port "$dq_resp" --cycles "$LAT_CYCLES" --body "$BODY")
  for r in $(seq "$LAT_ROUNDS"); do
    log "4 reserve latency, fresh server, round $r/$LAT_ROUNDS"
    bench "s4_fresh_r$r" "$dq_pid" "$dq_http" reservelat "${lat[@]}"
  done
  median s4_fresh reserve_p99_us
  stats "$dq_http" >"$OUT/s4_before.stats"
  du -sb "$dq_dir" | cut -f1 >"$OUT/s4_before.du"
  log "4 reserve latency: $FINISHED_JOBS cycles (add, reserve, finish)"
  bench s4_finish "$dq_pid" "$dq_http" cycle --proto resp --port "$dq_resp" \
    --connections "$CONNECTIONS" --depth "$DEPTH" --body "$BODY" --jobs "$FINISHED_JOBS"
  du -sb "$dq_dir" | cut -f1 >"$OUT/s4_peak.du"
  log "4 reserve latency: waiting for disk_bytes to stop shrinking (<= $SETTLE_MAX s)"
  $PY - "$OUT" "$dq_http" "$SETTLE_MAX" "$SETTLE_STABLE" <<'EOF' >&2
import http.client, json, os, sys, time
out, port, most, stable = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
def stats():
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("GET", "/v1/stats")
        return json.loads(c.getresponse().read())
    except (OSError, ValueError):
        return {}
t0 = time.monotonic()
rows, low, low_t = [], None, 0.0
first = stats()
while True:
    s = stats() if rows else first
    t = time.monotonic() - t0
    d = s.get("disk_bytes")
    rows.append((round(t, 1), d, s.get("log_segments"), s.get("jobs")))
    if d is None:
        break  # the server does not report it: nothing to wait for
    if low is None or d < low:
        low, low_t = d, t
    if t - low_t >= stable or t >= most:
        break
    time.sleep(0.5)
with open(os.path.join(out, "s4_settle.csv"), "w") as f:
    f.write("s,disk_bytes,log_segments,jobs\n")
    for row in rows:
        f.write(",".join("" if v is None else str(v) for v in row) + "\n")
r = {"disk_bytes_peak": first.get("disk_bytes"), "disk_bytes_settled": rows[-1][1],
     "log_segments_settled": rows[-1][2], "jobs_settled": rows[-1][3],
     "settle_s": rows[-1][0], "settled": rows[-1][1] is not None and rows[-1][0] < most}
json.dump(r, open(os.path.join(out, "s4_settle.json"), "w"))
print(json.dumps(r))
EOF
  # A control for this VM's drift: a server started now on an empty
  # directory, measured in turn with the aged one.
  s4_pid=$dq_pid s4_http=$dq_http s4_dir=$dq_dir
  start_delayq s4_control embedded everysec
  for r in $(seq "$LAT_ROUNDS"); do
    log "4 reserve latency, after $FINISHED_JOBS finished, round $r/$LAT_ROUNDS; then a fresh control"
    bench "s4_after_r$r" "$s4_pid" "$s4_http" reservelat "${lat[@]}"
    bench "s4_control_r$r" "$dq_pid" "$dq_http" reservelat --proto resp --port "$dq_resp" \
      --cycles "$LAT_CYCLES" --body "$BODY"
  done
  median s4_after reserve_p99_us
  median s4_control reserve_p99_us
  stop_pid "$dq_pid"
  stats "$s4_http" >"$OUT/s4_after.stats"
  du -sb "$s4_dir" | cut -f1 >"$OUT/s4_after.du"
  stop_pid "$s4_pid"
fi

# --- summary ----------------------------------------------------------------------------
$PY - "$OUT" "$(cut -d' ' -f1-3 /proc/loadavg)" "$DEPTH" "$STORE_DURABLE" "$CONNECTIONS" "$STEPS" <<'EOF'
import glob, json, os, sys
out, load, depth, store, conns, steps = sys.argv[1:7]
def ld(f):
    try:
        return json.load(open(os.path.join(out, f)))
    except (OSError, ValueError):
        return {}
def num(f):
    try:
        return int(open(os.path.join(out, f)).read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
def g(name, key):
    return ld(name + ".json").get(key)
def ratio(a, b, nd=2):
    return round(a / b, nd) if a is not None and b else None
def pair_ratios(a, b):
    """a_r{i} / b_r{i} for every round i both ran: one ratio per round."""
    out_ = []
    for i in range(1, 1000):
        x, y = g(f"{a}_r{i}", "cycles_per_s"), g(f"{b}_r{i}", "cycles_per_s")
        if x is None or y is None:
            break
        out_.append(round(x / y, 3))
    return out_ or None
def median_of(v):
    if not v:
        return None
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else round((v[len(v) // 2 - 1] + v[len(v) // 2]) / 2, 3)
busy = []  # runs (not the medians, which repeat one) that saw a compiler running
for p in sorted(glob.glob(os.path.join(out, "*.json"))):
    d = ld(os.path.basename(p))
    if d.get("compiler_running") and not any(k.startswith("rounds_") for k in d):
        busy.append(os.path.basename(p)[:-5])
s3 = ld("s3_restart.json")
s4 = ld("s4_settle.json")
s4b, s4a = ld("s4_before.stats"), ld("s4_after.stats")
s = {
    "durable_store": store,
    "everysec_cycles_per_s": g("s1_everysec", "cycles_per_s"),
    "everysec_rounds": g("s1_everysec", "rounds_cycles_per_s"),
    "memory_cycles_per_s": g("s1_memory", "cycles_per_s"),
    "memory_rounds": g("s1_memory", "rounds_cycles_per_s"),
    "everysec_over_memory": ratio(g("s1_everysec", "cycles_per_s"), g("s1_memory", "cycles_per_s")),
    "everysec_over_memory_pairs": pair_ratios("s1_everysec", "s1_memory"),
    "everysec_over_memory_pairs_median": median_of(pair_ratios("s1_everysec", "s1_memory")),
    "everysec_server_cpu_s": g("s1_everysec", "server_cpu_s"),
    "memory_server_cpu_s": g("s1_memory", "server_cpu_s"),
    "everysec_jobs_per_sync": g("s1_everysec", "jobs_per_sync"),
    "everysec_log_bytes_per_job": g("s1_everysec", "log_bytes_per_job"),
    "everysec_du_bytes_after": ld("s1_everysec_du.json").get("du_bytes"),
    "always_d1_cycles_per_s": g("s2_always_d1", "cycles_per_s"),
    "always_d1_rounds": g("s2_always_d1", "rounds_cycles_per_s"),
    "beanstalkd_f0_d1_cycles_per_s": g("s2_beanstalkd_d1", "cycles_per_s"),
    "beanstalkd_f0_d1_rounds": g("s2_beanstalkd_d1", "rounds_cycles_per_s"),
    "always_over_beanstalkd_f0": ratio(g("s2_always_d1", "cycles_per_s"),
                                       g("s2_beanstalkd_d1", "cycles_per_s"), 1),
    "always_d1_jobs_per_sync": g("s2_always_d1", "jobs_per_sync"),
    "always_d1_syncs_per_s": g("s2_always_d1", "syncs_per_s"),
    "always_d1_server_cpu_s": g("s2_always_d1", "server_cpu_s"),
    "beanstalkd_f0_d1_server_cpu_s": g("s2_beanstalkd_d1", "server_cpu_s"),
    "always_put_adds_per_s": g("s2_always_put", "adds_per_s"),
    "always_put_rounds": g("s2_always_put", "rounds_adds_per_s"),
    "beanstalkd_f0_put_adds_per_s": g("s2_beanstalkd_put", "adds_per_s"),
    "beanstalkd_f0_put_rounds": g("s2_beanstalkd_put", "rounds_adds_per_s"),
    "always_put_over_beanstalkd_f0": ratio(g("s2_always_put", "adds_per_s"),
                                           g("s2_beanstalkd_put", "adds_per_s"), 1),
    "always_put_jobs_per_sync": g("s2_always_put", "jobs_per_sync"),
    "always_put_d%s_adds_per_s" % depth: g("s2_always_put_d" + depth, "adds_per_s"),
    "beanstalkd_f0_put_d%s_adds_per_s" % depth: g("s2_beanstalkd_put_d" + depth, "adds_per_s"),
    "always_put_d%s_over_beanstalkd_f0" % depth: ratio(g("s2_always_put_d" + depth, "adds_per_s"),
                                                      g("s2_beanstalkd_put_d" + depth, "adds_per_s"), 1),
    "always_put_d%s_jobs_per_sync" % depth: g("s2_always_put_d" + depth, "jobs_per_sync"),
    "always_one_cycles_per_s": g("s2_always_one", "cycles_per_s"),
    "always_one_add_p50_us": g("s2_always_one", "add_p50_us"),
    "always_one_add_p99_us": g("s2_always_one", "add_p99_us"),
    "beanstalkd_f0_one_cycles_per_s": g("s2_beanstalkd_one", "cycles_per_s"),
    "beanstalkd_f0_one_add_p50_us": g("s2_beanstalkd_one", "add_p50_us"),
    "beanstalkd_f0_one_add_p99_us": g("s2_beanstalkd_one", "add_p99_us"),
    "always_d%s_cycles_per_s" % depth: g("s2_always_d" + depth, "cycles_per_s"),
    "always_d%s_jobs_per_sync" % depth: g("s2_always_d" + depth, "jobs_per_sync"),
    "beanstalkd_f0_d%s_cycles_per_s" % depth: g("s2_beanstalkd_d" + depth, "cycles_per_s"),
    "always_over_beanstalkd_f0_d%s" % depth: ratio(g("s2_always_d" + depth, "cycles_per_s"),
                                                  g("s2_beanstalkd_d" + depth, "cycles_per_s"), 1),
    "restart_jobs": s3.get("jobs_before_kill"),
    "restart_first_answer_s": s3.get("first_answer_s"),
    "restart_all_jobs_s": s3.get("all_jobs_s"),
    "restart_s_per_million_jobs": s3.get("s_per_million_jobs"),
    "restart_jobs_after": s3.get("jobs_after_restart"),
    "restart_jobs_match": s3.get("jobs_match"),
    "restart_du_bytes": s3.get("du_bytes"),
    "restart_du_bytes_per_job": s3.get("du_bytes_per_job"),
    "restart_log_bytes_per_job": s3.get("log_bytes_per_job"),
    "restart_fill_adds_per_s": g("s3_fill", "adds_per_s"),
    "restart_recovery_ms": s3.get("recovery_ms"),
    "restart_recovered_records": s3.get("recovered_records"),
    "reserve_p99_us_fresh": g("s4_fresh", "reserve_p99_us"),
    "reserve_p99_us_fresh_rounds": g("s4_fresh", "rounds_reserve_p99_us"),
    "reserve_p50_us_fresh": g("s4_fresh", "reserve_p50_us"),
    "reserve_p99_us_after": g("s4_after", "reserve_p99_us"),
    "reserve_p99_us_after_rounds": g("s4_after", "rounds_reserve_p99_us"),
    "reserve_p50_us_after": g("s4_after", "reserve_p50_us"),
    "reserve_p99_after_over_fresh": ratio(g("s4_after", "reserve_p99_us"),
                                          g("s4_fresh", "reserve_p99_us")),
    "reserve_p99_us_control": g("s4_control", "reserve_p99_us"),
    "reserve_p99_us_control_rounds": g("s4_control", "rounds_reserve_p99_us"),
    "reserve_p50_us_control": g("s4_control", "reserve_p50_us"),
    "reserve_p99_after_over_control": ratio(g("s4_after", "reserve_p99_us"),
                                            g("s4_control", "reserve_p99_us")),
    "finished_jobs": g("s4_finish", "cycles"),
    "finished_cycles_per_s": g("s4_finish", "cycles_per_s"),
    "disk_bytes_before": s4b.get("disk_bytes"),
    "disk_bytes_peak": s4.get("disk_bytes_peak"),
    "disk_bytes_settled": s4.get("disk_bytes_settled"),
    "disk_bytes_at_end": s4a.get("disk_bytes"),
    "settle_s": s4.get("settle_s"),
    "du_bytes_before": num("s4_before.du"),
    "du_bytes_peak": num("s4_peak.du"),
    "du_bytes_at_end": num("s4_after.du"),
    "jobs_at_end": s4a.get("jobs"),
    "log_segments_at_end": s4a.get("log_segments"),
    "live_bytes_at_end": s4a.get("live_bytes"),
    "rewritten_bytes_at_end": s4a.get("rewritten_bytes"),
    "removed_segments_at_end": s4a.get("removed_segments"),
    "runs_with_a_compiler_running": busy,
    "load_average_at_end": load,
}
print(json.dumps(s))
def f(v):
    return "" if v is None else v
def pair(a, b):
    return "%s / %s" % (f(a), f(b)) if a is not None or b is not None else ""
rows = [
    ("cycles/s, %s conns x %s in flight: embedded everysec vs memory" % (conns, depth),
     s["everysec_cycles_per_s"], s["memory_cycles_per_s"], s["everysec_over_memory"], ">= 0.90"),
    ("the same, median of the per-round ratios (each round runs both, order alternating)",
     "", "", s["everysec_over_memory_pairs_median"], ">= 0.90"),
    ("server CPU s during those runs (everysec / memory)",
     pair(s["everysec_server_cpu_s"], s["memory_server_cpu_s"]), "", None, ""),
    ("cycles/s, %s conns x 1 in flight: embedded always vs beanstalkd -b -f0" % conns,
     s["always_d1_cycles_per_s"], s["beanstalkd_f0_d1_cycles_per_s"],
     s["always_over_beanstalkd_f0"], "(stricter than SPEC's)"),
    ("adds/s, %s producers x 1 in flight: embedded always vs beanstalkd -b -f0 (jobs per fdatasync)" % conns,
     s["always_put_adds_per_s"], s["beanstalkd_f0_put_adds_per_s"],
     s["always_put_over_beanstalkd_f0"],
     "" if s["always_put_jobs_per_sync"] is None
     else "%s per sync" % s["always_put_jobs_per_sync"]),
    ("adds/s, %s producers x %s in flight: embedded always vs beanstalkd -b -f0 (jobs per fdatasync)" % (conns, depth),
     s["always_put_d%s_adds_per_s" % depth], s["beanstalkd_f0_put_d%s_adds_per_s" % depth],
     s["always_put_d%s_over_beanstalkd_f0" % depth],
     ">= 20" + ("" if s["always_put_d%s_jobs_per_sync" % depth] is None
                else " (%s per sync)" % s["always_put_d%s_jobs_per_sync" % depth])),
    ("jobs per fdatasync, always, 1 in flight (fdatasyncs/s)",
     s["always_d1_jobs_per_sync"], "", None,
     "" if s["always_d1_syncs_per_s"] is None else "%s/s" % s["always_d1_syncs_per_s"]),
    ("one client, 1 in flight: cycles/s, embedded always vs beanstalkd -b -f0",
     s["always_one_cycles_per_s"], s["beanstalkd_f0_one_cycles_per_s"],
     ratio(s["always_one_cycles_per_s"], s["beanstalkd_f0_one_cycles_per_s"]), ""),
    ("one client: add round trip p50 / p99 us, embedded always vs beanstalkd -b -f0",
     pair(s["always_one_add_p50_us"], s["always_one_add_p99_us"]),
     pair(s["beanstalkd_f0_one_add_p50_us"], s["beanstalkd_f0_one_add_p99_us"]), None, ""),
    ("cycles/s, %s conns x %s in flight: embedded always vs beanstalkd -b -f0 (jobs per fdatasync)" % (conns, depth),
     s["always_d%s_cycles_per_s" % depth], s["beanstalkd_f0_d%s_cycles_per_s" % depth],
     s["always_over_beanstalkd_f0_d%s" % depth],
     ">= 20" + ("" if s["always_d%s_jobs_per_sync" % depth] is None
                else " (%s per sync)" % s["always_d%s_jobs_per_sync" % depth])),
    ("restart with %s pending: exec to first PING answered, s (server's recovery_ms)"
     % f(s["restart_jobs"]), s["restart_first_answer_s"],
     "" if s["restart_recovery_ms"] is None else "%s ms" % s["restart_recovery_ms"], None, ""),
    ("restart: s until /v1/stats shows every job; per million jobs",
     pair(s["restart_all_jobs_s"], s["restart_s_per_million_jobs"]), "", None, "<= 1.0 / M"),
    ("restart: jobs before kill -9 / after restart",
     pair(s["restart_jobs"], s["restart_jobs_after"]), "", None, "equal"),
    ("data dir bytes per pending job (du -sb); log bytes per job",
     pair(s["restart_du_bytes_per_job"], s["restart_log_bytes_per_job"]), "", None, ""),
    ("reserve round trip p99 us, after %s finished vs fresh" % f(s["finished_jobs"]),
     s["reserve_p99_us_after"], s["reserve_p99_us_fresh"], s["reserve_p99_after_over_fresh"],
     "<= 1.1"),
    ("reserve round trip p50 us, after vs fresh",
     s["reserve_p50_us_after"], s["reserve_p50_us_fresh"],
     ratio(s["reserve_p50_us_after"], s["reserve_p50_us_fresh"]), ""),
    ("reserve round trip p99 us, after vs a fresh server measured in turn with it",
     s["reserve_p99_us_after"], s["reserve_p99_us_control"],
     s["reserve_p99_after_over_control"], "<= 1.1"),
    ("disk_bytes before / peak / settled (%s s) / live jobs at end" % f(s["settle_s"]),
     "%s / %s / %s / %s" % (f(s["disk_bytes_before"]), f(s["disk_bytes_peak"]),
                            f(s["disk_bytes_settled"]), f(s["jobs_at_end"])), "", None, ""),
    ("du -sb before / after the cycles / at end",
     "%s / %s / %s" % (f(s["du_bytes_before"]), f(s["du_bytes_peak"]), f(s["du_bytes_at_end"])),
     "", None, ""),
]
print()
print("| measure | delayq | peer / reference | ratio | target |")
print("| --- | --- | --- | --- | --- |")
step_of_row = [1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 4]
assert len(step_of_row) == len(rows)
for step, (name, a, b, q, t) in zip(step_of_row, rows):
    if str(step) not in steps.split():
        continue
    print("| %s | %s | %s | %s | %s |" % (name, f(a), f(b), f(q), t))
EOF
log "load $(cut -d' ' -f1-3 /proc/loadavg); raw output: $OUT"
