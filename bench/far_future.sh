#!/usr/bin/env bash
# Far-future jobs (issue 30): what N pending jobs due in 1-30 days cost the
# embedded store, in one run on this machine: with the server's default
# memory window (1 h: far jobs live on disk), or with every pending job in
# RAM (SERVE_ARGS="--memory-window off").
#
#   SKIP_BUILD=1 bash bench/far_future.sh                    # JOBS=10000000
#   JOBS=1000000 SKIP_BUILD=1 SERVE_ARGS="--memory-window off" bash bench/far_future.sh
#   JOBS=1000000 STEPS="probe" SERVE_ARGS="--memory-window 1h" bash bench/far_future.sh
#
# Always, first:
#   a  start `delayq serve --store embedded --fsync FSYNC SERVE_ARGS` on a
#      fresh data dir and free loopback ports; VmRSS (/proc/PID/status) and
#      du -sb of the data dir, empty
#   c  `delayq-bench fill`: exactly JOBS jobs, BODY-byte bodies, due
#      uniformly over [now + MIN_DELAY_MS, now + MAX_DELAY_MS] (1-30 days),
#      CONNECTIONS x DEPTH adds in flight, ids the server's (ID_BYTES 0) or
#      the client's ("order-" + zero-padded number, ID_BYTES long); a
#      uniform sample of SAMPLE ids to OUT/sample.txt. Then VmRSS and
#      du -sb again: bytes per job above the empty server; /v1/stats jobs
#      must be JOBS
# Then the STEPS (default "restart probe add late peers"), in this order:
#   restart  kill -9 right after the fill, and a start timed as below
#            (with a memory window, the figures far_checkpoints and
#            far_crash_replay_bytes just before the kill are kept); then
#            SIGTERM, timed until the process is gone (stop_s); a start on
#            the same data dir, timed from its exec to the first RESP PING
#            answered (first_answer_s) and until /v1/stats shows every job
#            (all_jobs_s); the server's own recovery_ms; VmRSS after. Then
#            kill -9 of that server and the same start again; then SIGTERM,
#            the data dir's files synced and dropped from the page cache
#            (fadvise DONTNEED: nothing else is evicted), and a cold start
#   probe    `delayq-bench probe`: GET of each sampled id, one at a time
#            over RESP (p50/p99/p999/max us; every one must be found), then
#            DELETE of DELETES of them (-1: all; each must be found), then a
#            GET of those (each must be gone)
#   add      the add rate with N pending against an empty server: ADD_ROUNDS
#            rounds, each a `fill` of ADD_JOBS more jobs (the same delays
#            and seed in both) into the full server and into a fresh empty
#            one (started, filled, stopped, its data dir removed), the order
#            alternating each round; medians, and the ratio per round
#   late     lateness with N far jobs pending: `delayq-bench cycle` for
#            CYCLE_SECONDS gives the full server's cycle rate; then
#            `lateness` (LATE_JOBS due over LATE_WINDOW s, 8 consumers,
#            LATE_LOAD (0.5) of that cycle rate as load) on the full server and on a fresh
#            reference server started with --memory-window off (every job in RAM,
#            nothing pending; the same cycle run first), in turn; with
#            /v1/stats' log_bytes and rewritten_bytes (compaction) over both
#   peers    bytes per pending job of Redis (hash + zset, as the seeds kept
#            jobs), beanstalkd (no binlog) and `delayq serve --store memory`,
#            each fresh, `delayq-bench memory --jobs PEER_JOBS` (1 h delays)
#
# Before each step (and each add round) the CPUs' business over one second
# is logged (OUT/busy.txt, the summary's busy_before_steps), with a compiler
# running named; QUIET_WAIT=S waits up to S seconds for a quiet second first.
#
# Prints each run's JSON on stderr, then a JSON summary line and a markdown
# table on stdout; everything stays in OUT (the summary in OUT/summary.json).
# Data dirs live in DATA_ROOT (default OUT/data; must be a disk, not a tmpfs)
# and are removed at the end unless KEEP_DATA=1. Every process started here
# is stopped by PID on exit; every wait has a deadline. About 3 minutes at
# JOBS=10000000 (the fill ~25 s, each restart ~10-20 s).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
JOBS=${JOBS:-10000000}
BODY=${BODY:-100}
ID_BYTES=${ID_BYTES:-0}                   # 0: the server's ids; else client ids of this length
SAMPLE=${SAMPLE:-10000}                   # ids kept for the probe
DELETES=${DELETES:--1}                    # sampled ids the probe deletes (-1: all)
SERVE_ARGS=${SERVE_ARGS:-}                # extra arguments to `delayq serve` (the path measured)
FSYNC=${FSYNC:-everysec}
STEPS=${STEPS:-restart probe add late peers}
MIN_DELAY_MS=${MIN_DELAY_MS:-86400000}    # 1 day
MAX_DELAY_MS=${MAX_DELAY_MS:-2592000000}  # 30 days
CONNECTIONS=${CONNECTIONS:-4}             # fill's connections ...
DEPTH=${DEPTH:-256}                       # ... and adds in flight on each
SEED=${SEED:-1}
ADD_JOBS=${ADD_JOBS:-1000000}             # jobs per timed fill of step add
ADD_ROUNDS=${ADD_ROUNDS:-5}             # (the full server holds ADD_ROUNDS x ADD_JOBS more after)
RESTART_TIMEOUT=${RESTART_TIMEOUT:-300}   # s to wait for a stop, or for a start to serve
CYCLE_SECONDS=${CYCLE_SECONDS:-5}         # step late: the cycle rate measured first
LATE_JOBS=${LATE_JOBS:-100000}
LATE_WINDOW=${LATE_WINDOW:-20}            # s: LATE_JOBS / LATE_WINDOW jobs fall due per second
LATE_LEAD=${LATE_LEAD:-5}
LATE_CONSUMERS=${LATE_CONSUMERS:-8}
LATE_LOAD=${LATE_LOAD:-0.5}               # the load during lateness, a fraction of the cycle rate
PEER_JOBS=${PEER_JOBS:-1000000}
QUIET_WAIT=${QUIET_WAIT:-0}               # s to wait, before each step, for a quiet machine
OUT=${OUT:-$(mktemp -d /tmp/delayq-far-bench.XXXXXX)}
DATA_ROOT=${DATA_ROOT:-$OUT/data}
KEEP_DATA=${KEEP_DATA:-0}
PY=/usr/bin/python3

read -r -a serve_extra <<<"$SERVE_ARGS"
mkdir -p "$OUT" "$DATA_ROOT"
bin=$BUILD/bin
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
source bench/lib.sh # (the cwd is the repository root by now)

build_and_check "$bin/delayq" "$bin/delayq-bench"
need_commands curl

want() { [[ " $STEPS " == *" $1 "* ]]; }
now() { date +%s.%N; }

# busy_note STEP: logs how busy the CPUs were over the last second (this
# script's servers idle then); a compiler running next to the run is noted
# in OUT/busy.txt and the summary: the figures suffer on two vCPUs. With
# QUIET_WAIT > 0 it first waits up to that many seconds for a quiet second
# (CPUs < 15 % busy, no compiler): others' builds come and go.
busy_pct() {
  $PY -c 'import time
def snap():
    v = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return sum(v), v[3] + v[4]
t0, i0 = snap(); time.sleep(1); t1, i1 = snap()
print(round(100 * (1 - (i1 - i0) / max(1, t1 - t0))))'
}
busy_note() {
  local busy cc="" waited=0 t0=$SECONDS
  while :; do
    busy=$(busy_pct)
    cc=""
    pgrep -x cc1plus >/dev/null && cc=" (a compiler is running)"
    if [ "$busy" -lt 15 ] && [ -z "$cc" ]; then break; fi
    if ((SECONDS - t0 >= QUIET_WAIT)); then break; fi
    [ "$waited" = 1 ] || log "before $1: CPUs $busy % busy$cc: waiting up to $QUIET_WAIT s for a quiet second"
    waited=1
  done
  log "before $1: CPUs $busy % busy$cc, load $(cut -d' ' -f1-3 /proc/loadavg)" \
    "$([ "$waited" = 1 ] && echo "(after $((SECONDS - t0)) s of waiting)")"
  echo "$1 $busy${cc:+ compiler}" >>"$OUT/busy.txt"
}

new_datadir() {
  datadir=$(mktemp -d "$DATA_ROOT/$1.XXXXXX")
  datadirs+=("$datadir")
}

# start_dq NAME DIR [ARGS...]: `delayq serve --store embedded` on DIR and
# free ports, with ARGS (default SERVE_ARGS; "-": every job in memory, the
# path without a memory window). Sets dq_pid, dq_resp, dq_http.
start_dq() {
  local name=$1 dir=$2
  shift 2
  local extra=("$@")
  [ $# -gt 0 ] || extra=(${serve_extra[@]+"${serve_extra[@]}"})
  [ "${extra[*]}" != "-" ] || extra=(--memory-window off)  # every job in memory
  dq_resp=$(free_port)
  dq_http=$(free_port)
  start "$name" "$bin/delayq" serve --store embedded --data-dir "$dir" --fsync "$FSYNC" \
    --resp-port "$dq_resp" --http-port "$dq_http" ${extra[@]+"${extra[@]}"}
  dq_pid=$started
  wait_port "$dq_resp"
  wait_port "$dq_http"
  log "$name: delayq serve pid $dq_pid, resp $dq_resp, http $dq_http, data $dir${extra[*]:+, ${extra[*]}}"
}

stats() { curl -sf -m 10 "http://127.0.0.1:$1/v1/stats" || echo '{}'; }
rss() { awk '/^VmRSS:/ { print $2 * 1024 }' "/proc/$1/status"; }
minflt() { awk '{ print $10 }' "/proc/$1/stat"; } # minor page faults so far
du_b() { du -sb "$1" | cut -f1; }         # apparent bytes (file sizes)
du_alloc() { du -s -B1 "$1" | cut -f1; }  # allocated blocks, in bytes
jkey() {                                  # jkey FILE KEY: a value of a JSON object, or null
  $PY -c 'import json,sys
try: print(json.dumps(json.load(open(sys.argv[1])).get(sys.argv[2])))
except Exception: print("null")' "$1" "$2"
}
# kv NAME KEY=VALUE...: OUT/NAME.json, a flat JSON object of numbers (or null).
kv() {
  local name=$1
  shift
  $PY - "$OUT/$name.json" "$@" <<'EOF'
import json, sys
d = {}
for a in sys.argv[2:]:
    k, v = a.split("=", 1)
    try:
        d[k] = json.loads(v)
    except ValueError:
        d[k] = v
json.dump(d, open(sys.argv[1], "w"))
EOF
  cat "$OUT/$name.json" >&2
  echo >&2
}

fill_args=(--body "$BODY" --id-bytes "$ID_BYTES" --min-delay-ms "$MIN_DELAY_MS"
  --max-delay-ms "$MAX_DELAY_MS" --connections "$CONNECTIONS" --depth "$DEPTH" --stall-seconds 60)

# The restart helper: optionally stops a server (SIGTERM or SIGKILL, timed
# until its process is gone or a zombie), then starts one (the clock starts
# at its exec), polls a RESP PING every millisecond until one is answered,
# then /v1/stats until `jobs` is the expected count. Its PID goes to
# OUT/NAME.pid at once; the figures to OUT/NAME.json.
cat >"$OUT/restart.py" <<'EOF'
import http.client, json, os, signal, socket, subprocess, sys, time
out, name, timeout, expected, stop_pid, sig, evict = sys.argv[1:8]
cmd = sys.argv[8:]
timeout, expected, stop_pid = float(timeout), int(expected), int(stop_pid)
resp_port = int(cmd[cmd.index("--resp-port") + 1])
http_port = int(cmd[cmd.index("--http-port") + 1])
r = {"name": name, "jobs_expected": expected}

# Gone: no such process, or a zombie whose threads have all exited (a
# zombie leader's other threads may still hold its files, the data dir's
# lock among them).
def gone(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                return False
        return len(os.listdir("/proc/%d/task" % pid)) <= 1
    except OSError:
        return True

if stop_pid > 0:
    t0 = time.monotonic()
    os.kill(stop_pid, getattr(signal, sig))
    while not gone(stop_pid):
        if time.monotonic() - t0 > timeout:
            r["error"] = "pid %d still there %g s after %s" % (stop_pid, timeout, sig)
            json.dump(r, open(os.path.join(out, name + ".json"), "w"))
            sys.exit(1)
        time.sleep(0.001)
    r["stop_signal"] = sig
    r["stop_s"] = round(time.monotonic() - t0, 3)

# evict DIR: a cold start without touching anything but the data dir: each
# of its files is synced, then dropped from the page cache (fadvise
# DONTNEED); what stays cached is counted with fincore where it exists.
if evict != "-":
    for f in sorted(os.listdir(evict)):
        p = os.path.join(evict, f)
        if not os.path.isfile(p):
            continue
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    try:
        files = [os.path.join(evict, f) for f in os.listdir(evict)]
        res = subprocess.run(["fincore", "-b", "-n", "-o", "RES"] + files,
                             capture_output=True, text=True, timeout=60)
        r["cached_bytes_after_evict"] = sum(int(x) for x in res.stdout.split())
    except (OSError, ValueError, subprocess.SubprocessError):
        r["cached_bytes_after_evict"] = None

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

logf = open(os.path.join(out, name + ".log"), "w")
t0 = time.monotonic()
proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT)
open(os.path.join(out, name + ".pid"), "w").write(str(proc.pid))
r["pid"] = proc.pid
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
    n = None
    while time.monotonic() - t0 < timeout:
        n = jobs()
        if n == expected:
            r["all_jobs_s"] = round(time.monotonic() - t0, 3)
            break
        time.sleep(0.005)
    r["jobs_after"] = n
    r["jobs_match"] = n == expected
json.dump(r, open(os.path.join(out, name + ".json"), "w"))
sys.exit(0 if r.get("jobs_match") else 1)
EOF

# restart NAME SIGNAL [cold]: stops the full server (dq_pid) with SIGNAL and
# starts it again on its data dir, on new free ports (restart.py); with
# `cold`, the data dir's files are dropped from the page cache in between.
# dq_pid, dq_resp, dq_http become the new server's. OUT/NAME.json gets the server's
# recovery_ms and recovered_records and the VmRSS after.
restart() {
  local name=$1 sig=$2 evict=- expected old=$dq_pid rss_before
  [ "${3:-}" != cold ] || evict=$full_dir
  rss_before=$(rss "$dq_pid")
  expected=$(stats "$dq_http" | $PY -c 'import json,sys; print(json.load(sys.stdin).get("jobs", -1))')
  dq_resp=$(free_port)
  dq_http=$(free_port)
  log "$name: $sig to pid $old with $expected jobs, then a start on $full_dir"
  $PY "$OUT/restart.py" "$OUT" "$name" "$RESTART_TIMEOUT" "$expected" "$old" "$sig" "$evict" \
    "$bin/delayq" serve --store embedded --data-dir "$full_dir" --fsync "$FSYNC" \
    --resp-port "$dq_resp" --http-port "$dq_http" ${serve_extra[@]+"${serve_extra[@]}"} \
    || log "$name: FAILED ($(cat "$OUT/$name.json" 2>/dev/null))"
  wait "$old" 2>/dev/null || true # reaps it when it is this shell's child
  local keep=() p
  for p in "${pids[@]}"; do [ "$p" = "$old" ] || keep+=("$p"); done
  pids=(${keep[@]+"${keep[@]}"})
  [ -s "$OUT/$name.pid" ] || { log "$name: no server started"; exit 1; }
  dq_pid=$(cat "$OUT/$name.pid")
  pids+=("$dq_pid")
  [ -e "/proc/$dq_pid/status" ] || { log "$name: the server is not running: $OUT/$name.log"; exit 1; }
  stats "$dq_http" >"$OUT/$name.stats"
  $PY - "$OUT/$name.json" "$OUT/$name.stats" "$rss_before" "$(rss "$dq_pid")" <<'EOF' >&2
import json, sys
r, s = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
r["recovery_ms"] = s.get("recovery_ms")
r["recovered_records"] = s.get("recovered_records")
r["rss_before_bytes"] = int(sys.argv[3])
r["rss_after_bytes"] = int(sys.argv[4])
json.dump(r, open(sys.argv[1], "w"))
print(json.dumps(r))
EOF
}

log "machine: $(nproc) cpu, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
  "$(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)," \
  "commit $(git rev-parse --short HEAD 2>/dev/null || echo ?), $("$bin/delayq" --version 2>&1 | head -1)"
log "output in $OUT, data in $DATA_ROOT ($(df -T "$DATA_ROOT" | awk 'NR == 2 { print $2 }')," \
  "$(df -h --output=avail "$DATA_ROOT" | tail -1 | xargs) free); JOBS=$JOBS BODY=$BODY" \
  "ID_BYTES=$ID_BYTES FSYNC=$FSYNC SERVE_ARGS='$SERVE_ARGS' STEPS='$STEPS'"
: >"$OUT/busy.txt"
kv config jobs="$JOBS" body="$BODY" id_bytes="$ID_BYTES" sample="$SAMPLE" fsync="\"$FSYNC\"" \
  serve_args="$($PY -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$SERVE_ARGS")" \
  min_delay_ms="$MIN_DELAY_MS" max_delay_ms="$MAX_DELAY_MS" add_jobs="$ADD_JOBS" \
  add_rounds="$ADD_ROUNDS" commit="\"$(git rev-parse --short HEAD 2>/dev/null || echo ?)\"" \
  load_at_start="\"$(cut -d' ' -f1-3 /proc/loadavg)\""

# --- a: the empty server ------------------------------------------------------------------
new_datadir full
full_dir=$datadir
start_dq full "$full_dir"
stats "$dq_http" >"$OUT/a_empty.stats"
kv a_empty rss_bytes="$(rss "$dq_pid")" du_bytes="$(du_b "$full_dir")" \
  du_alloc_bytes="$(du_alloc "$full_dir")"

# --- c: fill N ------------------------------------------------------------------------------
busy_note fill
log "c fill: $JOBS jobs due in $MIN_DELAY_MS..$MAX_DELAY_MS ms, $CONNECTIONS x $DEPTH in flight"
bench_cpu c_fill "$dq_pid" fill --port "$dq_resp" --jobs "$JOBS" --seed "$SEED" \
  --id-prefix order- --sample "$SAMPLE" --sample-file "$OUT/sample.txt" "${fill_args[@]}"
rss_full=$(rss "$dq_pid")
stats "$dq_http" >"$OUT/c_full.stats"
kv c_full rss_bytes="$rss_full" du_bytes="$(du_b "$full_dir")" \
  du_alloc_bytes="$(du_alloc "$full_dir")" jobs="$(jkey "$OUT/c_full.stats" jobs)" \
  log_bytes="$(jkey "$OUT/c_full.stats" log_bytes)" disk_bytes="$(jkey "$OUT/c_full.stats" disk_bytes)" \
  log_segments="$(jkey "$OUT/c_full.stats" log_segments)"
[ "$(jkey "$OUT/c_full.stats" jobs)" = "$JOBS" ] ||
  log "c fill: WARNING: the server holds $(jkey "$OUT/c_full.stats" jobs) jobs, not $JOBS"

# --- restart -----------------------------------------------------------------------------
if want restart; then
  busy_note restart
  # First a crash right after the fill: what a kill -9 mid-life costs (with
  # a memory window, the replay from the last checkpoint written while the
  # fill ran; the server's far_crash_replay_bytes said how much).
  stats "$dq_http" >"$OUT/f_kill9_fill.before"
  restart f_kill9_fill SIGKILL
  restart f_graceful SIGTERM
  restart f_kill9 SIGKILL
  restart f_cold SIGTERM cold
fi

# --- probe -------------------------------------------------------------------------------
if want probe; then
  busy_note probe
  log "probe: GET of $(wc -l <"$OUT/sample.txt") sampled ids, one at a time; DELETE of $DELETES (-1: all)"
  bench_cpu e_probe "$dq_pid" probe --port "$dq_resp" --sample-file "$OUT/sample.txt" \
    --deletes "$DELETES" --seed "$SEED"
fi

# --- add: the add rate with N pending vs into an empty server -------------------------------
if want add; then
  full_pid=$dq_pid full_resp=$dq_resp full_http=$dq_http
  for r in $(seq "$ADD_ROUNDS"); do
    run_empty() {
      local dir
      new_datadir "empty_r$r"
      dir=$datadir
      start_dq "empty_r$r" "$dir"
      local rss0 f0
      rss0=$(rss "$dq_pid")
      f0=$(minflt "$dq_pid")
      bench_cpu "b_empty_r$r" "$dq_pid" fill --port "$dq_resp" --jobs "$ADD_JOBS" \
        --seed "$((SEED + 100 + r))" --id-prefix "order-b$r-" "${fill_args[@]}"
      kv "rss_empty_r$r" rss_before_bytes="$rss0" rss_after_bytes="$(rss "$dq_pid")" \
        minflt="$(($(minflt "$dq_pid") - f0))"
      stop_pid "$dq_pid"
      rm -rf -- "$dir"
    }
    run_full() {
      local rss0 f0
      rss0=$(rss "$full_pid")
      f0=$(minflt "$full_pid")
      bench_cpu "d_full_r$r" "$full_pid" fill --port "$full_resp" --jobs "$ADD_JOBS" \
        --seed "$((SEED + 100 + r))" --id-prefix "order-d$r-" "${fill_args[@]}"
      kv "rss_full_r$r" rss_before_bytes="$rss0" rss_after_bytes="$(rss "$full_pid")" \
        minflt="$(($(minflt "$full_pid") - f0))"
    }
    busy_note "add_r$r"
    log "add round $r/$ADD_ROUNDS: $ADD_JOBS jobs into an empty server and into the full one"
    if ((r % 2)); then run_empty; run_full; else run_full; run_empty; fi
  done
  dq_pid=$full_pid dq_resp=$full_resp dq_http=$full_http
  median b_empty adds_per_s
  median d_full adds_per_s
fi

# --- late: lateness with N far jobs pending ------------------------------------------------------
if want late; then
  busy_note late
  stats "$dq_http" >"$OUT/late_full.stats0"
  log "late: cycle rate of the full server ($CYCLE_SECONDS s)"
  bench_cpu late_cycle "$dq_pid" cycle --proto resp --port "$dq_resp" --connections 50 \
    --depth 16 --body "$BODY" --seconds "$CYCLE_SECONDS"
  load_rate=$($PY -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["cycles_per_s"] * float(sys.argv[2])))' \
    "$OUT/late_cycle.json" "$LATE_LOAD" 2>/dev/null || echo 0)
  late_args=(--proto resp --jobs "$LATE_JOBS" --window-seconds "$LATE_WINDOW"
    --lead-seconds "$LATE_LEAD" --consumers "$LATE_CONSUMERS" --body "$BODY")
  [ "$load_rate" -gt 0 ] && late_args+=(--load-rate "$load_rate")
  log "late: $LATE_JOBS jobs due over $LATE_WINDOW s, load $load_rate cycles/s: the full server"
  bench_cpu late_full "$dq_pid" lateness --port "$dq_resp" "${late_args[@]}"
  stats "$dq_http" >"$OUT/late_full.stats1"
  full_pid=$dq_pid full_resp=$dq_resp full_http=$dq_http
  new_datadir late_ref
  ref_dir=$datadir
  start_dq late_ref "$ref_dir" -
  log "late: the same on a fresh server without SERVE_ARGS, nothing pending (the same cycle first)"
  stats "$dq_http" >"$OUT/late_ref.stats0"
  bench_cpu late_ref_cycle "$dq_pid" cycle --proto resp --port "$dq_resp" --connections 50 \
    --depth 16 --body "$BODY" --seconds "$CYCLE_SECONDS"
  bench_cpu late_ref "$dq_pid" lateness --port "$dq_resp" "${late_args[@]}"
  stats "$dq_http" >"$OUT/late_ref.stats1"
  stop_pid "$dq_pid"
  rm -rf -- "$ref_dir"
  dq_pid=$full_pid dq_resp=$full_resp dq_http=$full_http
fi

# --- peers: bytes per pending job of Redis, beanstalkd, delayq --store memory ------------------
if want peers; then
  busy_note peers
  if command -v redis-server >/dev/null; then
    port=$(free_port)
    mkdir -p "$OUT/redis"
    start peer_redis redis-server --bind 127.0.0.1 --port "$port" --dir "$OUT/redis" --save "" \
      --appendonly no
    rpid=$started
    wait_port "$port"
    log "peers: Redis hash + zset, $PEER_JOBS jobs"
    bench_cpu g_redis "$rpid" memory --proto redis-hashzset --port "$port" --jobs "$PEER_JOBS" \
      --body "$BODY" --pid "$rpid"
    stop_pid "$rpid"
  else
    log "peers: no redis-server, Redis skipped"
  fi
  if command -v beanstalkd >/dev/null; then
    port=$(free_port)
    start peer_beanstalkd beanstalkd -l 127.0.0.1 -p "$port"
    bpid=$started
    wait_port "$port"
    log "peers: beanstalkd, $PEER_JOBS jobs"
    bench_cpu g_beanstalkd "$bpid" memory --proto beanstalk --port "$port" --jobs "$PEER_JOBS" \
      --body "$BODY" --pid "$bpid"
    stop_pid "$bpid"
  else
    log "peers: no beanstalkd, skipped"
  fi
  port=$(free_port)
  start peer_delayq_memory "$bin/delayq" serve --store memory --resp-port "$port" --http-port 0
  mpid=$started
  wait_port "$port"
  log "peers: delayq serve --store memory, $PEER_JOBS jobs"
  bench_cpu g_delayq_memory "$mpid" memory --proto resp --port "$port" --jobs "$PEER_JOBS" \
    --body "$BODY" --pid "$mpid"
  stop_pid "$mpid"
fi

busy_note end

# --- summary ------------------------------------------------------------------------------
$PY - "$OUT" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'EOF' | tee "$OUT/summary.txt"
import json, os, sys
out, load = sys.argv[1:3]
def ld(name):
    try:
        return json.load(open(os.path.join(out, name + ".json")))
    except (OSError, ValueError):
        return {}
def ratio(a, b, nd=3):
    return round(a / b, nd) if a is not None and b else None
def per(a, b, n, nd=1):
    return round((a - b) / n, nd) if a is not None and b is not None and n else None
cfg, a, c, fill = ld("config"), ld("a_empty"), ld("c_full"), ld("c_fill")
g, k9, probe = ld("f_graceful"), ld("f_kill9"), ld("e_probe")
try:
    kb = json.load(open(os.path.join(out, "f_kill9_fill.before")))
except (OSError, ValueError):
    kb = {}
be, df = ld("b_empty"), ld("d_full")
n = c.get("jobs") or cfg.get("jobs")
pairs = []
for r in range(1, 1000):
    x, y = ld("d_full_r%d" % r).get("adds_per_s"), ld("b_empty_r%d" % r).get("adds_per_s")
    if x is None or y is None:
        break
    pairs.append(round(x / y, 3))
def rounds(side, run):
    """Per add round: RSS growth per job and minor page faults per 1,000 adds."""
    rss, faults = [], []
    for r in range(1, 1000):
        e, f = ld("rss_%s_r%d" % (side, r)), ld("%s_r%d" % (run, r))
        if not e:
            break
        rss.append(per(e.get("rss_after_bytes"), e.get("rss_before_bytes"), f.get("jobs")))
        faults.append(per(e.get("minflt"), 0, f.get("jobs") and f["jobs"] / 1000))
    return rss or None, faults or None
def cpu_rounds(run):
    """Per add round: the server's CPU µs per add."""
    v = []
    for r in range(1, 1000):
        d = ld("%s_r%d" % (run, r))
        if not d:
            break
        v.append(round(d["server_cpu_s"] / d["jobs"] * 1e6, 2)
                 if d.get("server_cpu_s") is not None and d.get("jobs") else None)
    return v or None
empty_rss_per_job, empty_faults = rounds("empty", "b_empty")
full_rss_per_job, full_faults = rounds("full", "d_full")
busy = [l.split() for l in open(os.path.join(out, "busy.txt")) if l.strip()]
s = {
    "jobs": n,
    "body_bytes": cfg.get("body"),
    "id_bytes": cfg.get("id_bytes"),
    "fsync": cfg.get("fsync"),
    "serve_args": cfg.get("serve_args"),
    "commit": cfg.get("commit"),
    "rss_empty_bytes": a.get("rss_bytes"),
    "rss_full_bytes": c.get("rss_bytes"),
    "rss_bytes_per_job": per(c.get("rss_bytes"), a.get("rss_bytes"), n),
    "du_bytes_full": c.get("du_bytes"),
    "du_bytes_per_job": per(c.get("du_bytes"), a.get("du_bytes"), n),
    "du_alloc_bytes_per_job": per(c.get("du_alloc_bytes"), a.get("du_alloc_bytes"), n),
    "log_bytes_per_job": per(c.get("log_bytes"), 0, n),
    "log_segments": c.get("log_segments"),
    "fill_adds_per_s": fill.get("adds_per_s"),
    "fill_seconds": fill.get("seconds"),
    "fill_server_cpu_s": fill.get("server_cpu_s"),
    "fill_client_cpu_s": fill.get("client_cpu_s"),
    "fill_errors": fill.get("errors"),
    "graceful_stop_s": g.get("stop_s"),
    "graceful_first_answer_s": g.get("first_answer_s"),
    "graceful_all_jobs_s": g.get("all_jobs_s"),
    "graceful_recovery_ms": g.get("recovery_ms"),
    "graceful_recovered_records": g.get("recovered_records"),
    "graceful_jobs_expected": g.get("jobs_expected"),
    "graceful_jobs_after": g.get("jobs_after"),
    "graceful_jobs_match": g.get("jobs_match"),
    "graceful_rss_before_bytes_per_job": per(g.get("rss_before_bytes"), a.get("rss_bytes"), n),
    "graceful_rss_after_bytes_per_job": per(g.get("rss_after_bytes"), a.get("rss_bytes"), n),
    "kill9_fill_first_answer_s": ld("f_kill9_fill").get("first_answer_s"),
    "kill9_fill_all_jobs_s": ld("f_kill9_fill").get("all_jobs_s"),
    "kill9_fill_recovery_ms": ld("f_kill9_fill").get("recovery_ms"),
    "kill9_fill_recovered_records": ld("f_kill9_fill").get("recovered_records"),
    "kill9_fill_jobs_match": ld("f_kill9_fill").get("jobs_match"),
    "kill9_fill_checkpoints_before": kb.get("far_checkpoints"),
    "kill9_fill_crash_replay_bytes_before": kb.get("far_crash_replay_bytes"),
    "kill9_first_answer_s": k9.get("first_answer_s"),
    "kill9_all_jobs_s": k9.get("all_jobs_s"),
    "kill9_recovery_ms": k9.get("recovery_ms"),
    "kill9_jobs_match": k9.get("jobs_match"),
    "kill9_jobs_after": k9.get("jobs_after"),
    "cold_first_answer_s": ld("f_cold").get("first_answer_s"),
    "cold_all_jobs_s": ld("f_cold").get("all_jobs_s"),
    "cold_recovery_ms": ld("f_cold").get("recovery_ms"),
    "cold_jobs_match": ld("f_cold").get("jobs_match"),
    "cold_cached_bytes_after_evict": ld("f_cold").get("cached_bytes_after_evict"),
    "restart_s_per_million": round(g["first_answer_s"] / (n / 1e6), 3)
    if g.get("first_answer_s") is not None and n else None,
    "probe_ids": probe.get("ids"),
    "get_p50_us": probe.get("get_p50_us"),
    "get_p99_us": probe.get("get_p99_us"),
    "get_p999_us": probe.get("get_p999_us"),
    "get_max_us": probe.get("get_max_us"),
    "get_not_found": probe.get("get_not_found"),
    "delete_p50_us": probe.get("delete_p50_us"),
    "delete_p99_us": probe.get("delete_p99_us"),
    "delete_p999_us": probe.get("delete_p999_us"),
    "delete_max_us": probe.get("delete_max_us"),
    "delete_not_found": probe.get("delete_not_found"),
    "found_after_delete": probe.get("found_after_delete"),
    "add_jobs": cfg.get("add_jobs"),
    "add_empty_adds_per_s": be.get("adds_per_s"),
    "add_empty_rounds": be.get("rounds_adds_per_s"),
    "add_full_adds_per_s": df.get("adds_per_s"),
    "add_full_rounds": df.get("rounds_adds_per_s"),
    "add_full_over_empty": ratio(df.get("adds_per_s"), be.get("adds_per_s")),
    "add_full_over_empty_pairs": pairs or None,
    "add_empty_server_cpu_us_per_add": round(be["server_cpu_s"] / be["jobs"] * 1e6, 2)
    if be.get("server_cpu_s") is not None and be.get("jobs") else None,
    "add_full_server_cpu_us_per_add": round(df["server_cpu_s"] / df["jobs"] * 1e6, 2)
    if df.get("server_cpu_s") is not None and df.get("jobs") else None,
    "add_empty_best_adds_per_s": max(be.get("rounds_adds_per_s") or [0]) or None,
    "add_full_best_adds_per_s": max(df.get("rounds_adds_per_s") or [0]) or None,
    "add_empty_cpu_us_per_add_rounds": cpu_rounds("b_empty"),
    "add_full_cpu_us_per_add_rounds": cpu_rounds("d_full"),
    "add_empty_rss_bytes_per_job": empty_rss_per_job,
    "add_full_rss_bytes_per_job": full_rss_per_job,
    "add_empty_minflt_per_1000": empty_faults,
    "add_full_minflt_per_1000": full_faults,
    "late_cycle_per_s": ld("late_cycle").get("cycles_per_s"),
    "late_ref_cycle_per_s": ld("late_ref_cycle").get("cycles_per_s"),
}
for name in ("late_full", "late_ref"):
    d = ld(name)
    for key in ("count", "early", "p50_ms", "p99_ms", "p999_ms", "max_ms", "missing",
                "load_cycles_per_s"):
        s["%s_%s" % (name, key)] = d.get(key)
def stats_delta(name, key):
    try:
        a = json.load(open(os.path.join(out, name + ".stats0")))
        b = json.load(open(os.path.join(out, name + ".stats1")))
        return b[key] - a[key]
    except (OSError, ValueError, KeyError):
        return None
for name in ("late_full", "late_ref"):
    # what the cycle and lateness runs made the log write, and compaction copy forward
    s[name + "_log_bytes"] = stats_delta(name, "log_bytes")
    s[name + "_rewritten_bytes"] = stats_delta(name, "rewritten_bytes")
s["late_p99_full_over_ref"] = ratio(s["late_full_p99_ms"], s["late_ref_p99_ms"], 2)
s["add_best_full_over_empty"] = ratio(s["add_full_best_adds_per_s"], s["add_empty_best_adds_per_s"])
for peer in ("redis", "beanstalkd", "delayq_memory"):
    s["peer_%s_bytes_per_job" % peer] = ld("g_" + peer).get("bytes_per_job")
s["busy_before_steps"] = {b[0]: int(b[1]) for b in busy}
s["compiler_running_before"] = [b[0] for b in busy if len(b) > 2] or None
s["load_at_end"] = load
json.dump(s, open(os.path.join(out, "summary.json"), "w"))
print(json.dumps(s))
def f(v):
    return "" if v is None else v
M = lambda v: "" if not v else "%gM" % (v / 1e6)
rows = [
    ("server RSS above the empty server, bytes per pending job", s["rss_bytes_per_job"],
     "%s → %s bytes" % (f(s["rss_empty_bytes"]), f(s["rss_full_bytes"]))),
    ("data dir (du -sb) bytes per pending job; allocated; log_bytes per job",
     "%s; %s; %s" % (f(s["du_bytes_per_job"]), f(s["du_alloc_bytes_per_job"]),
                     f(s["log_bytes_per_job"])), "%s segments" % f(s["log_segments"])),
    ("fill: adds/s (server CPU s, client CPU s)", s["fill_adds_per_s"],
     "%s s; %s, %s" % (f(s["fill_seconds"]), f(s["fill_server_cpu_s"]), f(s["fill_client_cpu_s"]))),
    ("adds/s into an empty server, %s jobs, median" % M(s["add_jobs"]), s["add_empty_adds_per_s"],
     "rounds %s; %s µs server CPU per add" % (f(s["add_empty_rounds"]),
                                            f(s["add_empty_server_cpu_us_per_add"]))),
    ("adds/s with N pending, median", s["add_full_adds_per_s"],
     "rounds %s; %s µs server CPU per add" % (f(s["add_full_rounds"]),
                                            f(s["add_full_server_cpu_us_per_add"]))),
    ("add rate with N pending / into an empty server", s["add_full_over_empty"],
     "per round %s" % f(s["add_full_over_empty_pairs"])),
    ("add rounds: best round, empty / full (ratio); server CPU µs per add per round",
     "%s / %s (%s)" % (f(s["add_empty_best_adds_per_s"]), f(s["add_full_best_adds_per_s"]),
                       f(s["add_best_full_over_empty"])),
     "empty %s; full %s" % (f(s["add_empty_cpu_us_per_add_rounds"]),
                            f(s["add_full_cpu_us_per_add_rounds"]))),
    ("add rounds: server minor page faults per 1,000 adds, empty / full",
     "%s / %s" % (f(s["add_empty_minflt_per_1000"]), f(s["add_full_minflt_per_1000"])),
     "RSS growth per job: %s / %s" % (f(s["add_empty_rss_bytes_per_job"]),
                                      f(s["add_full_rss_bytes_per_job"]))),
    ("GET of a random far-future id, p50 / p99 / p999 / max µs",
     "%s / %s / %s / %s" % (f(s["get_p50_us"]), f(s["get_p99_us"]), f(s["get_p999_us"]),
                            f(s["get_max_us"])),
     "%s ids, %s not found" % (f(s["probe_ids"]), f(s["get_not_found"]))),
    ("DELETE of a random far-future id, p50 / p99 / p999 / max µs",
     "%s / %s / %s / %s" % (f(s["delete_p50_us"]), f(s["delete_p99_us"]),
                            f(s["delete_p999_us"]), f(s["delete_max_us"])),
     "%s not found, %s found after" % (f(s["delete_not_found"]), f(s["found_after_delete"]))),
    ("graceful restart: SIGTERM to exit, s", s["graceful_stop_s"], ""),
    ("graceful restart: exec to first answer / every job in STATS, s (per million)",
     "%s / %s" % (f(s["graceful_first_answer_s"]), f(s["graceful_all_jobs_s"])),
     "%s s per million; recovery_ms %s, %s records" % (
         f(s["restart_s_per_million"]), f(s["graceful_recovery_ms"]),
         f(s["graceful_recovered_records"]))),
    ("graceful restart: jobs before / after", "%s / %s" % (f(s["graceful_jobs_expected"]),
                                                           f(s["graceful_jobs_after"])),
     "RSS per job above empty, just before the stop / after the start: %s / %s" % (
         f(s["graceful_rss_before_bytes_per_job"]), f(s["graceful_rss_after_bytes_per_job"]))),
    ("kill -9 right after the fill: exec to first answer / every job, s",
     "%s / %s" % (f(s["kill9_fill_first_answer_s"]), f(s["kill9_fill_all_jobs_s"])),
     "recovery_ms %s, %s records; jobs match: %s; before the kill: %s checkpoints written, "
     "%s bytes a crash would replay" % (
         f(s["kill9_fill_recovery_ms"]), f(s["kill9_fill_recovered_records"]),
         f(s["kill9_fill_jobs_match"]), f(s["kill9_fill_checkpoints_before"]),
         f(s["kill9_fill_crash_replay_bytes_before"]))),
    ("kill -9 restart (after the graceful one): exec to first answer / every job, s",
     "%s / %s" % (f(s["kill9_first_answer_s"]), f(s["kill9_all_jobs_s"])),
     "recovery_ms %s; jobs match: %s" % (f(s["kill9_recovery_ms"]), f(s["kill9_jobs_match"]))),
    ("cold restart (SIGTERM, the data dir dropped from the page cache): exec to first answer / every job, s",
     "%s / %s" % (f(s["cold_first_answer_s"]), f(s["cold_all_jobs_s"])),
     "recovery_ms %s; jobs match: %s; %s bytes still cached" % (
         f(s["cold_recovery_ms"]), f(s["cold_jobs_match"]), f(s["cold_cached_bytes_after_evict"]))),
    ("lateness, N pending vs a fresh server: p50 / p99 / max ms",
     "%s / %s / %s" % (f(s["late_full_p50_ms"]), f(s["late_full_p99_ms"]),
                       f(s["late_full_max_ms"])),
     "fresh %s / %s / %s; early %s + %s; missing %s + %s; load %s cycles/s (cycle %s / %s)" % (
         f(s["late_ref_p50_ms"]), f(s["late_ref_p99_ms"]), f(s["late_ref_max_ms"]),
         f(s["late_full_early"]), f(s["late_ref_early"]), f(s["late_full_missing"]),
         f(s["late_ref_missing"]), f(s["late_full_load_cycles_per_s"]),
         f(s["late_cycle_per_s"]), f(s["late_ref_cycle_per_s"]))),
    ("during the cycle and lateness runs: log bytes written / compaction's rewritten bytes, full vs fresh",
     "%s / %s" % (f(s["late_full_log_bytes"]), f(s["late_full_rewritten_bytes"])),
     "fresh %s / %s" % (f(s["late_ref_log_bytes"]), f(s["late_ref_rewritten_bytes"]))),
    ("peers, bytes per pending job (1 h delays): Redis hash + zset / beanstalkd / delayq memory",
     "%s / %s / %s" % (f(s["peer_redis_bytes_per_job"]), f(s["peer_beanstalkd_bytes_per_job"]),
                       f(s["peer_delayq_memory_bytes_per_job"])), ""),
]
print()
print("| measure (N = %s pending, %s-byte bodies) | figure | detail |" % (f(n), f(s["body_bytes"])))
print("| --- | --- | --- |")
for name, v, d in rows:
    print("| %s | %s | %s |" % (name, f(v), d))
EOF
log "load $(cut -d' ' -f1-3 /proc/loadavg); raw output: $OUT"
