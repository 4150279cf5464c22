#!/usr/bin/env bash
# delayq against beanstalkd through lockstep (bench/lockstep.c, issue 14): a
# client that is not delayq's own, one thread, one epoll loop, 50 connections,
# each with ONE command in flight (add, reserve, finish, each written when the
# previous reply is in). Starts on free loopback ports
#   a  delayq serve --store memory
#   b  delayq serve --store embedded --fsync always --data-dir D1
#   c  beanstalkd -l 127.0.0.1 -p P                (no binlog)
#   d  beanstalkd -l 127.0.0.1 -p P -b D2 -f 0     (binlog, fsync every write)
# measures each with lockstep (the durable ones with --fsync-probe on their
# data directory: one fdatasync on this disk, timed in the same run), prints
# each run's JSON on stdout, then a JSON summary with the ratios and a
# markdown table:
#   memory delayq / beanstalkd without binlog        (cycles/s)
#   delayq --fsync always / beanstalkd -b -f0        (cycles/s)
#   delayq --fsync always: command p50 / fdatasync p50 (how many fdatasyncs
#                                                      a command waits for)
# and two more pairs: the same memory vs no-binlog cycle pipelined
# (--depth 16: 16 adds written together, then 16 reserves, then the finishes,
# as a client library's pipeline does, one stage at a time), and --fsync
# always vs -f0 with ONE connection (a commit's own latency, no queueing
# behind other connections: with 50 in lockstep on a CPU-bound server the
# command latency is 50 / commands per second, Little's law, whatever a
# commit costs). Last, the memory store pipelined again through hiredis_cycle
# (bench/hiredis_cycle.c: hiredis, the plain C Redis client library, one
# blocking context per connection, redisAppendCommand then redisGetReply)
# against the pipelined beanstalkd figure: a heavier client than lockstep (a
# reply object allocated per reply), so it says what an application gets.
#
#   bash bench/lockstep.sh                       # 10 s per run
#   bash bench/lockstep.sh --seconds 5 --rounds 3 --binary build-bench/bin/delayq
#
# Options: --seconds N (10) per run, after --warmup-seconds (1); --connections
# (50); --body (100); --rounds N (1): the four servers measured in turn N times
# (order reversed every other round), each figure from its server's median
# round by cycles/s; --binary (build/bin/delayq); --lockstep (build/bin/lockstep,
# built here with cc when missing or older than bench/lockstep.c); --out DIR
# (a new /tmp/delayq-lockstep.XXXXXX): raw output, server logs and the data
# directories (which must be on the disk measured, not a tmpfs; removed at the
# end unless --keep-data). Every process started here is stopped by PID on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

RUN_SECONDS=10
WARMUP=1
CONNECTIONS=50
BODY=100
ROUNDS=1
BINARY=build/bin/delayq
LOCKSTEP=build/bin/lockstep
OUT=
KEEP_DATA=0
PY=/usr/bin/python3

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) RUN_SECONDS=$2; shift 2 ;;
    --warmup-seconds) WARMUP=$2; shift 2 ;;
    --connections) CONNECTIONS=$2; shift 2 ;;
    --body) BODY=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --binary) BINARY=$2; shift 2 ;;
    --lockstep) LOCKSTEP=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --keep-data) KEEP_DATA=1; shift ;;
    -h|--help) usage ;;
    *) echo "unknown option: $1" >&2; usage ;;
  esac
done
[ -n "$OUT" ] || OUT=$(mktemp -d /tmp/delayq-lockstep.XXXXXX)
DATA_ROOT=$OUT/data
mkdir -p "$OUT" "$DATA_ROOT"

pids=()
datadirs=()
cleanup() {
  local p d
  for p in "${pids[@]}"; do stop_pid "$p"; done
  if [ "$KEEP_DATA" != 1 ]; then
    for d in "${datadirs[@]}"; do rm -rf -- "$d"; done
  fi
}
trap cleanup EXIT
# shellcheck source=bench/lib.sh
source bench/lib.sh  # log, free_port, wait_port, start, cpu_s, median

# lockstep: built from its one source file when missing or older than it
# (it is plain C11; the CMake project builds C++ only).
if [ ! -x "$LOCKSTEP" ] || [ bench/lockstep.c -nt "$LOCKSTEP" ]; then
  mkdir -p "$(dirname "$LOCKSTEP")"
  log "building $LOCKSTEP"
  cc -O2 -std=c11 -Wall -Wextra -o "$LOCKSTEP.tmp.$$" bench/lockstep.c
  mv -f "$LOCKSTEP.tmp.$$" "$LOCKSTEP"
fi
HIREDIS_CYCLE=$(dirname "$LOCKSTEP")/hiredis_cycle
if [ ! -x "$HIREDIS_CYCLE" ] || [ bench/hiredis_cycle.c -nt "$HIREDIS_CYCLE" ]; then
  log "building $HIREDIS_CYCLE"
  cc -O2 -std=c11 -Wall -Wextra -o "$HIREDIS_CYCLE.tmp.$$" bench/hiredis_cycle.c -lhiredis
  mv -f "$HIREDIS_CYCLE.tmp.$$" "$HIREDIS_CYCLE"
fi
[ -x "$BINARY" ] || { echo "missing $BINARY: build delayq first (make build)" >&2; exit 1; }
command -v beanstalkd >/dev/null || { echo "missing beanstalkd" >&2; exit 1; }

fs=$(df -T "$DATA_ROOT" | awk 'NR == 2 { print $2 }')
log "machine: $(nproc) cpu, load $(cut -d' ' -f1-3 /proc/loadavg)," \
  "commit $(git rev-parse --short HEAD 2>/dev/null || echo ?); output in $OUT, data on $fs"
[ "$fs" != tmpfs ] || log "WARNING: $DATA_ROOT is a tmpfs: the fsync figures measure no disk"
pgrep -x cc1plus >/dev/null && log "WARNING: a compiler is running: the figures suffer"

new_datadir() {
  datadir=$(mktemp -d "$DATA_ROOT/$1.XXXXXX")
  datadirs+=("$datadir")
}

# The four servers, all up for the whole run (idle while another is measured).
port=$(free_port); http=$(free_port)
start dq_memory "$BINARY" serve --store memory --resp-port "$port" --http-port "$http"
mem_pid=$started mem_port=$port
wait_port "$mem_port"; wait_port "$http"

new_datadir dq_always; always_dir=$datadir
port=$(free_port); http=$(free_port)
start dq_always "$BINARY" serve --store embedded --fsync always --data-dir "$always_dir" \
  --resp-port "$port" --http-port "$http"
always_pid=$started always_port=$port
wait_port "$always_port"; wait_port "$http"

port=$(free_port)
start bs_nobinlog beanstalkd -l 127.0.0.1 -p "$port"
bs_pid=$started bs_port=$port
wait_port "$bs_port"

new_datadir bs_f0; f0_dir=$datadir
port=$(free_port)
start bs_f0 beanstalkd -l 127.0.0.1 -p "$port" -b "$f0_dir" -f 0
f0_pid=$started f0_port=$port
wait_port "$f0_port"
log "delayq memory pid $mem_pid port $mem_port; delayq always pid $always_pid port $always_port" \
  "($always_dir); beanstalkd pid $bs_pid port $bs_port; beanstalkd -f0 pid $f0_pid port" \
  "$f0_port ($f0_dir)"

# measure NAME SERVER_PID LOCKSTEP_ARGS...: OUT/NAME.json is lockstep's JSON
# with name, server_cpu_s (the server's CPU over the run, /proc/PID/stat) and
# compiler_running (a cc1plus seen just before or after) added; printed on stdout.
measure() {
  local name=$1 spid=$2 c0 c1 cc=0 rc=0
  shift 2
  pgrep -x cc1plus >/dev/null && cc=1
  c0=$(cpu_s "$spid")
  "${CLIENT:-$LOCKSTEP}" --connections "$CONNECTIONS" --body "$BODY" --seconds "$RUN_SECONDS" \
    --warmup-seconds "$WARMUP" "$@" >"$OUT/$name.raw" 2>"$OUT/$name.err" || rc=$?
  c1=$(cpu_s "$spid")
  pgrep -x cc1plus >/dev/null && cc=1
  if [ "$rc" != 0 ]; then
    log "$name: lockstep exited $rc: $(tail -3 "$OUT/$name.err" | tr '\n' ' ')"
    [ -s "$OUT/$name.raw" ] || return 0
  fi
  $PY - "$OUT" "$name" "$c0" "$c1" "$cc" <<'EOF'
import json, os, sys
out, name, c0, c1, cc = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
d = {"name": name}
d.update(json.load(open(os.path.join(out, name + ".raw"))))
d["server_cpu_s"] = round(c1 - c0, 2)
if cc == "1":
    d["compiler_running"] = True
json.dump(d, open(os.path.join(out, name + ".json"), "w"))
print(json.dumps(d))
EOF
}

DEPTH=16
runs=(memory always nobinlog f0 memory_d nobinlog_d always_1 f0_1 memory_h)
for r in $(seq "$ROUNDS"); do
  order=("${runs[@]}")
  ((r % 2)) || order=(memory_h f0_1 always_1 nobinlog_d memory_d f0 nobinlog always memory)
  log "round $r/$ROUNDS: ${order[*]}, $CONNECTIONS connections, $RUN_SECONDS s each"
  for s in "${order[@]}"; do
    case $s in
      memory) measure "dq_memory_r$r" "$mem_pid" --proto resp --port "$mem_port" ;;
      always) measure "dq_always_r$r" "$always_pid" --proto resp --port "$always_port" \
                --fsync-probe "$always_dir" ;;
      nobinlog) measure "bs_nobinlog_r$r" "$bs_pid" --proto beanstalk --port "$bs_port" ;;
      f0) measure "bs_f0_r$r" "$f0_pid" --proto beanstalk --port "$f0_port" \
            --fsync-probe "$f0_dir" ;;
      memory_d) measure "dq_memory_d_r$r" "$mem_pid" --proto resp --port "$mem_port" \
                  --depth "$DEPTH" ;;
      nobinlog_d) measure "bs_nobinlog_d_r$r" "$bs_pid" --proto beanstalk --port "$bs_port" \
                    --depth "$DEPTH" ;;
      always_1) measure "dq_always_1_r$r" "$always_pid" --proto resp --port "$always_port" \
                  --connections 1 --fsync-probe "$always_dir" ;;
      f0_1) measure "bs_f0_1_r$r" "$f0_pid" --proto beanstalk --port "$f0_port" \
              --connections 1 --fsync-probe "$f0_dir" ;;
      memory_h) CLIENT=$HIREDIS_CYCLE measure "dq_memory_h_r$r" "$mem_pid" --port "$mem_port" \
                  --depth "$DEPTH" ;;
    esac
  done
done
for s in dq_memory dq_always bs_nobinlog bs_f0 dq_memory_d bs_nobinlog_d dq_always_1 bs_f0_1 \
         dq_memory_h; do
  median "$s" cycles_per_s
done

$PY - "$OUT" "$(cut -d' ' -f1-3 /proc/loadavg)" "$CONNECTIONS" <<'EOF'
import json, os, sys
out, load, conns = sys.argv[1:4]
def ld(name):
    try:
        return json.load(open(os.path.join(out, name + ".json")))
    except (OSError, ValueError):
        return {}
m, a, b, f = ld("dq_memory"), ld("dq_always"), ld("bs_nobinlog"), ld("bs_f0")
md, bd, a1, f1 = ld("dq_memory_d"), ld("bs_nobinlog_d"), ld("dq_always_1"), ld("bs_f0_1")
mh = ld("dq_memory_h")
def ratio(x, y, nd=2):
    return round(x / y, nd) if x is not None and y else None
s = {
    "memory_cycles_per_s": m.get("cycles_per_s"),
    "beanstalkd_cycles_per_s": b.get("cycles_per_s"),
    "memory_over_beanstalkd": ratio(m.get("cycles_per_s"), b.get("cycles_per_s")),
    "always_cycles_per_s": a.get("cycles_per_s"),
    "beanstalkd_f0_cycles_per_s": f.get("cycles_per_s"),
    "always_over_beanstalkd_f0": ratio(a.get("cycles_per_s"), f.get("cycles_per_s")),
    "always_command_p50_us": a.get("command_p50_us"),
    "always_fdatasync_p50_us": a.get("fdatasync_p50_us"),
    "always_command_p50_over_fdatasync_p50": ratio(a.get("command_p50_us"), a.get("fdatasync_p50_us")),
    "beanstalkd_f0_command_p50_us": f.get("command_p50_us"),
    "beanstalkd_f0_fdatasync_p50_us": f.get("fdatasync_p50_us"),
    "beanstalkd_f0_command_p50_over_fdatasync_p50": ratio(f.get("command_p50_us"), f.get("fdatasync_p50_us")),
    "pipelined_memory_cycles_per_s": md.get("cycles_per_s"),
    "pipelined_beanstalkd_cycles_per_s": bd.get("cycles_per_s"),
    "pipelined_memory_over_beanstalkd": ratio(md.get("cycles_per_s"), bd.get("cycles_per_s")),
    "hiredis_memory_cycles_per_s": mh.get("cycles_per_s"),
    "hiredis_memory_client_cpu_s": mh.get("client_cpu_s"),
    "hiredis_memory_over_pipelined_beanstalkd": ratio(mh.get("cycles_per_s"), bd.get("cycles_per_s")),
    "one_connection_always_command_p50_us": a1.get("command_p50_us"),
    "one_connection_always_fdatasync_p50_us": a1.get("fdatasync_p50_us"),
    "one_connection_always_command_p50_over_fdatasync_p50":
        ratio(a1.get("command_p50_us"), a1.get("fdatasync_p50_us")),
    "one_connection_always_over_beanstalkd_f0": ratio(a1.get("cycles_per_s"), f1.get("cycles_per_s")),
    "errors": sum(d.get("errors") or 0 for d in (m, a, b, f, md, bd, a1, f1, mh)),
    "runs_with_a_compiler_running":
        [d["name"] for d in (m, a, b, f, md, bd, a1, f1, mh) if d.get("compiler_running")],
    "load_average_at_end": load,
}
print(json.dumps(s))
def v(x):
    return "" if x is None else x
def lat(d):
    return "%s / %s" % (v(d.get("command_p50_us")), v(d.get("command_p99_us"))) if d else ""
print()
print("| lockstep, %s connections x 1 command in flight | delayq | beanstalkd | ratio |" % conns)
print("| --- | --- | --- | --- |")
print("| cycles/s: memory vs no binlog | %s | %s | %s |"
      % (v(s["memory_cycles_per_s"]), v(s["beanstalkd_cycles_per_s"]), v(s["memory_over_beanstalkd"])))
print("| command p50 / p99 us: memory vs no binlog | %s | %s | |" % (lat(m), lat(b)))
print("| cycles/s: --fsync always vs -b -f0 | %s | %s | %s |"
      % (v(s["always_cycles_per_s"]), v(s["beanstalkd_f0_cycles_per_s"]), v(s["always_over_beanstalkd_f0"])))
print("| command p50 / p99 us: --fsync always vs -b -f0 | %s | %s | |" % (lat(a), lat(f)))
print("| fdatasync p50 / p99 us on the data dir (probe) | %s / %s | %s / %s | |"
      % (v(a.get("fdatasync_p50_us")), v(a.get("fdatasync_p99_us")),
         v(f.get("fdatasync_p50_us")), v(f.get("fdatasync_p99_us"))))
print("| command p50 / fdatasync p50 | %s | %s | |"
      % (v(s["always_command_p50_over_fdatasync_p50"]), v(s["beanstalkd_f0_command_p50_over_fdatasync_p50"])))
print("| cycles/s: memory vs no binlog, --depth 16 | %s | %s | %s |"
      % (v(s["pipelined_memory_cycles_per_s"]), v(s["pipelined_beanstalkd_cycles_per_s"]),
         v(s["pipelined_memory_over_beanstalkd"])))
print("| cycles/s: memory through hiredis vs no binlog through lockstep, --depth 16 | %s | %s | %s |"
      % (v(s["hiredis_memory_cycles_per_s"]), v(s["pipelined_beanstalkd_cycles_per_s"]),
         v(s["hiredis_memory_over_pipelined_beanstalkd"])))
print("| 1 connection: cycles/s, --fsync always vs -b -f0 | %s | %s | %s |"
      % (v(a1.get("cycles_per_s")), v(f1.get("cycles_per_s")), v(s["one_connection_always_over_beanstalkd_f0"])))
print("| 1 connection: command p50 us / fdatasync p50 us | %s / %s = %s | %s / %s | |"
      % (v(a1.get("command_p50_us")), v(a1.get("fdatasync_p50_us")),
         v(s["one_connection_always_command_p50_over_fdatasync_p50"]),
         v(f1.get("command_p50_us")), v(f1.get("fdatasync_p50_us"))))
EOF
log "load $(cut -d' ' -f1-3 /proc/loadavg); raw output: $OUT"
