#!/usr/bin/env bash
# The Redis store's figures (SPEC §12, issue 5), in one run on this machine:
# starts its own redis-server 7 (no persistence) on a free loopback port,
# `delayq serve --store redis` on it, loads delayq with delayq-bench and runs
# BullMQ (bench/bullmq.sh) on the same Redis, in alternating rounds; then the
# lateness of timed jobs with consumers waiting; then a 3-master Redis
# Cluster. Prints JSON, then a markdown table.
#
#   bash bench/redis.sh                        # builds first (make build)
#   SKIP_BUILD=1 BUILD=build-bench bash bench/redis.sh
#   STEPS="1" ROUNDS=5 bash bench/redis.sh
#
# Steps (STEPS, default "1 2 3"):
#   1 lifecycles  delayq-bench cycle (add -> reserve -> finish) over RESP, 50
#                 connections x DEPTH in flight, against delayq on Redis;
#                 BullMQ (worker concurrency 50) on the same Redis; ROUNDS
#                 rounds alternating, medians; target delayq / BullMQ >= 5.
#                 Redis commands per lifecycle from INFO commandstats deltas
#                 (all commands, and script calls), Redis CPU per lifecycle.
#   2 lateness    LATE_JOBS timed jobs due within LATE_WINDOW s, consumers in
#                 long-poll reserves (delayq-bench lateness): zero early,
#                 p99 <= 10 ms.
#   3 cluster     a 3-master Redis Cluster (redis-cli --cluster create);
#                 CLUSTER_SERVERS delayq servers on it, each loaded by its own
#                 delayq-bench cycle at once; how the commands and Redis CPU
#                 spread over the masters.
#   4 wait        a 3-master Redis Cluster with a replica each; two delayq
#                 servers on it (prefixes of their own), one with
#                 --redis-wait-replicas 0 and one with 1, the same cycle
#                 against each in alternating rounds (ROUNDS), medians: what
#                 waiting for a replica costs (target: <= 30 %). Redis CPU and
#                 commands are summed over masters and replicas.
#
# Every process started here is stopped by PID on exit; raw output stays in
# OUT (printed at the end).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
STEPS=${STEPS:-1 2 3 4}
CONNECTIONS=${CONNECTIONS:-50}
DEPTH=${DEPTH:-16}
TOPICS=${TOPICS:-1}  # topics the connections share (0: one each); BullMQ's is one queue
BODY=${BODY:-100}
ROUNDS=${ROUNDS:-3}
CYCLE_SECONDS=${CYCLE_SECONDS:-5}
WARMUP_SECONDS=${WARMUP_SECONDS:-1}
BUCKETS=${BUCKETS:-0}  # 0: the server's default (1 on a standalone Redis, 16 on a cluster)
BULLMQ_SECONDS=${BULLMQ_SECONDS:-5}
LATE_JOBS=${LATE_JOBS:-20000}
LATE_WINDOW=${LATE_WINDOW:-10}
LATE_CONSUMERS=${LATE_CONSUMERS:-8}
CLUSTER_SERVERS=${CLUSTER_SERVERS:-2}
OUT=${OUT:-$(mktemp -d /tmp/delayq-redis-bench.XXXXXX)}
PY=/usr/bin/python3

mkdir -p "$OUT"
bin=$BUILD/bin
# shellcheck source=bench/lib.sh
source bench/lib.sh  # (the cwd is the repository root by now)
build_and_check "$bin/delayq" "$bin/delayq-bench"
need_commands redis-server redis-cli

pids=()
trap stop_started EXIT

now() { date +%s.%N; }

# start_redis NAME [ARGS...]: redis-server on a free port in OUT/NAME; sets rd_port, rd_pid.
# (At most 55535: a cluster node also listens on its port + 10000.)
start_redis() {
  local name=$1
  shift
  mkdir -p "$OUT/$name"
  rd_port=$(free_port)
  while [ "$rd_port" -gt 55535 ]; do rd_port=$(free_port); done
  start "$name" redis-server --bind 127.0.0.1 --port "$rd_port" --dir "$OUT/$name" \
    --save "" --appendonly no "$@"
  rd_pid=$started
  wait_port "$rd_port"
  log "$name: redis-server pid $rd_pid, port $rd_port"
}

# start_delayq NAME URL [PREFIX [ARGS...]]: delayq serve --store redis on free
# ports (prefix "bench" unless given); sets dq_pid, dq_resp.
start_delayq() {
  local name=$1 url=$2 prefix=${3:-bench}
  shift 2
  [ $# -gt 0 ] && shift
  dq_resp=$(free_port)
  local http
  http=$(free_port)
  start "$name" "$bin/delayq" serve --store redis --redis "$url" --redis-prefix "$prefix" \
    --redis-buckets "$BUCKETS" --resp-port "$dq_resp" --http-port "$http" "$@"
  dq_pid=$started
  wait_port "$dq_resp"
  log "$name: delayq serve --store redis --redis $url, pid $dq_pid, resp $dq_resp"
}

# redis_counts PORT: one JSON object: total command calls, script calls
# (evalsha + eval), used CPU seconds of the Redis process.
redis_counts() {
  $PY - "$1" <<'EOF'
import json, subprocess, sys
out = subprocess.run(["redis-cli", "-p", sys.argv[1], "INFO", "all"], capture_output=True,
                     text=True).stdout
calls = scripts = 0
cpu = 0.0
per = {}
for line in out.splitlines():
    if line.startswith("cmdstat_"):
        name, rest = line[len("cmdstat_"):].split(":", 1)
        n = int(dict(kv.split("=") for kv in rest.split(","))["calls"])
        per[name] = n
        calls += n
        if name in ("evalsha", "eval"):
            scripts += n
    elif line.startswith("used_cpu_sys:") or line.startswith("used_cpu_user:"):
        cpu += float(line.split(":")[1])
print(json.dumps({"calls": calls, "scripts": scripts, "cpu_s": cpu, "per": per}))
EOF
}

# bench NAME SERVER_PID "REDIS_PORTS" ARGS...: runs delayq-bench, keeps its
# JSON in OUT/NAME.json with the server's CPU and, summed over the Redis
# ports, the commands, script calls and Redis CPU per lifecycle.
bench() {
  local name=$1 spid=$2 ports=$3 p
  shift 3
  local c0 c1
  for p in $ports; do redis_counts "$p" >"$OUT/$name.redis0.$p"; done
  c0=$(cpu_s "$spid")
  if ! "$bin/delayq-bench" "$@" >"$OUT/$name.raw" 2>"$OUT/$name.err"; then
    echo "FAILED: delayq-bench $* ($(tail -1 "$OUT/$name.err"))" >&2
    [ -s "$OUT/$name.raw" ] || return 0
  fi
  c1=$(cpu_s "$spid")
  for p in $ports; do redis_counts "$p" >"$OUT/$name.redis1.$p"; done
  $PY - "$OUT" "$name" "$c0" "$c1" $ports <<'EOF'
import json, os, sys
out, name, c0, c1 = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
ports = sys.argv[5:]
p = lambda ext: os.path.join(out, name + ext)
d = json.load(open(p(".raw")))
d["name"] = name
d["server_cpu_s"] = round(c1 - c0, 2)
jobs = d.get("cycles") or d.get("jobs") or 0
d["masters"] = []
tot = {"calls": 0, "scripts": 0, "cpu_s": 0.0}
waits = 0
for port in ports:
    a, b = json.load(open(p(".redis0." + port))), json.load(open(p(".redis1." + port)))
    waits += b["per"].get("wait", 0) - a["per"].get("wait", 0)
    m = {k: b[k] - a[k] for k in ("calls", "scripts", "cpu_s")}
    m["port"] = int(port)
    m["top"] = sorted(((k, b["per"][k] - a["per"].get(k, 0)) for k in b["per"]),
                      key=lambda kv: -kv[1])[:4]
    d["masters"].append(m)
    for k in tot:
        tot[k] += m[k]
if jobs:
    d["redis_commands_per_lifecycle"] = round(tot["calls"] / jobs, 3)
    d["redis_scripts_per_lifecycle"] = round(tot["scripts"] / jobs, 3)
    d["redis_cpu_us_per_lifecycle"] = round(tot["cpu_s"] * 1e6 / jobs, 2)
d["redis_cpu_s"] = round(tot["cpu_s"], 2)
d["redis_waits"] = waits
if jobs and waits:
    d["lifecycles_per_wait"] = round(jobs / waits, 1)
json.dump(d, open(p(".json"), "w"))
EOF
  cat "$OUT/$name.json" >&2
  echo >&2
}

# bullmq NAME PORT: one BullMQ round on the Redis at PORT; OUT/NAME.json.
bullmq() {
  local name=$1 port=$2
  if ! ROUNDS=1 RUN_SECONDS="$BULLMQ_SECONDS" REDIS_PORT="$port" OUT="$OUT/$name.d" \
    bash bench/bullmq.sh >"$OUT/$name.raw" 2>"$OUT/$name.err"; then
    echo "FAILED: bench/bullmq.sh ($(tail -1 "$OUT/$name.err"))" >&2
    return 0
  fi
  head -1 "$OUT/$name.raw" | $PY -c 'import json,sys
s = json.load(sys.stdin)
print(json.dumps({"lifecycles_per_s": s["bullmq_lifecycles_per_s"],
                  "redis_commands_per_lifecycle": s.get("redis_commands_per_lifecycle")}))' \
    >"$OUT/$name.json"
  cat "$OUT/$name.json" >&2
  echo >&2
}

log "machine: $(nproc) cpu, load $(cut -d' ' -f1-3 /proc/loadavg)," \
  "commit $(git rev-parse --short HEAD 2>/dev/null || echo ?), $(redis-server --version | cut -d' ' -f3)"
cyc=(--connections "$CONNECTIONS" --body "$BODY" --seconds "$CYCLE_SECONDS"
  --warmup-seconds "$WARMUP_SECONDS" --depth "$DEPTH" --topics "$TOPICS")
want() { [[ " $STEPS " == *" $1 "* ]]; }

# --- 1 lifecycles: delayq on Redis vs BullMQ on the same Redis ------------------------------
if want 1; then
  start_redis s1_redis
  start_delayq s1_delayq "redis://127.0.0.1:$rd_port"
  for r in $(seq "$ROUNDS"); do
    log "1 lifecycles, round $r/$ROUNDS: delayq (redis store) and BullMQ, same Redis"
    run_dq() { bench "s1_delayq_r$r" "$dq_pid" "$rd_port" cycle --proto resp --port "$dq_resp" "${cyc[@]}"; }
    run_bq() { bullmq "s1_bullmq_r$r" "$rd_port"; }
    if ((r % 2)); then run_dq; run_bq; else run_bq; run_dq; fi
  done
  median s1_delayq cycles_per_s
  median s1_bullmq lifecycles_per_s
  stop_one() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }
  stop_one "$dq_pid"
  stop_one "$rd_pid"
fi

# --- 2 lateness ----------------------------------------------------------------------------
if want 2; then
  start_redis s2_redis
  start_delayq s2_delayq "redis://127.0.0.1:$rd_port"
  log "2 lateness: $LATE_JOBS jobs due within $LATE_WINDOW s, $LATE_CONSUMERS consumers waiting"
  bench s2_late "$dq_pid" "$rd_port" lateness --proto resp --port "$dq_resp" --jobs "$LATE_JOBS" \
    --window-seconds "$LATE_WINDOW" --lead-seconds 3 --consumers "$LATE_CONSUMERS" --body "$BODY"
  kill "$dq_pid" "$rd_pid" 2>/dev/null || true
fi

# --- 3 cluster -----------------------------------------------------------------------------
if want 3; then
  ports=()
  for i in 1 2 3; do
    start_redis "s3_node$i" --cluster-enabled yes --cluster-config-file nodes.conf
    ports+=("$rd_port")
  done
  redis-cli --cluster create "${ports[@]/#/127.0.0.1:}" --cluster-yes >"$OUT/s3_create.log" 2>&1
  for _ in $(seq 100); do
    ok=1
    for p in "${ports[@]}"; do
      redis-cli -p "$p" CLUSTER INFO | grep -q cluster_state:ok || ok=0
    done
    [ "$ok" = 1 ] && break
    sleep 0.1
  done
  log "3 cluster: masters on ${ports[*]}"
  url="redis://127.0.0.1:${ports[0]},127.0.0.1:${ports[1]},127.0.0.1:${ports[2]}"
  dq=() resp=()
  for i in $(seq "$CLUSTER_SERVERS"); do
    start_delayq "s3_delayq$i" "$url"
    dq+=("$dq_pid")
    resp+=("$dq_resp")
  done
  log "3 cluster: $CLUSTER_SERVERS delayq servers loaded at once"
  bpids=()
  for i in $(seq "$CLUSTER_SERVERS"); do
    bench "s3_cluster_s$i" "${dq[$((i - 1))]}" "${ports[*]}" cycle --proto resp \
      --port "${resp[$((i - 1))]}" "${cyc[@]}" &
    bpids+=("$!")
  done
  for p in "${bpids[@]}"; do wait "$p"; done
fi

# --- 4 wait: --redis-wait-replicas 1 against 0, on a cluster with replicas ------------------
if want 4; then
  ports=()
  for i in 1 2 3 4 5 6; do
    start_redis "s4_node$i" --cluster-enabled yes --cluster-config-file nodes.conf \
      --repl-diskless-sync-delay 0
    ports+=("$rd_port")
  done
  redis-cli --cluster create "${ports[@]/#/127.0.0.1:}" --cluster-replicas 1 --cluster-yes \
    >"$OUT/s4_create.log" 2>&1
  for _ in $(seq 300); do  # every node ok, and 3 replicas online
    ok=1
    for p in "${ports[@]}"; do
      redis-cli -p "$p" CLUSTER INFO | grep -q cluster_state:ok || ok=0
    done
    online=0
    for p in "${ports[@]}"; do
      online=$((online + $(redis-cli -p "$p" INFO replication | grep -c state=online || true)))
    done
    [ "$ok" = 1 ] && [ "$online" -ge 3 ] && break
    sleep 0.1
  done
  log "4 wait: 3 masters + 3 replicas on ${ports[*]} ($online replicas online)"
  url="redis://127.0.0.1:${ports[0]},127.0.0.1:${ports[1]},127.0.0.1:${ports[2]}"
  start_delayq s4_delayq_nowait "$url" bench0
  nowait_pid=$dq_pid nowait_resp=$dq_resp
  start_delayq s4_delayq_wait "$url" bench1 --redis-wait-replicas 1
  wait_pid=$dq_pid wait_resp=$dq_resp
  for r in $(seq "$ROUNDS"); do
    log "4 wait, round $r/$ROUNDS: --redis-wait-replicas 0 and 1, same cluster"
    run_nowait() { bench "s4_nowait_r$r" "$nowait_pid" "${ports[*]}" cycle --proto resp --port "$nowait_resp" "${cyc[@]}"; }
    run_wait() { bench "s4_wait_r$r" "$wait_pid" "${ports[*]}" cycle --proto resp --port "$wait_resp" "${cyc[@]}"; }
    if ((r % 2)); then run_nowait; run_wait; else run_wait; run_nowait; fi
  done
  median s4_nowait cycles_per_s
  median s4_wait cycles_per_s
fi

# --- summary -------------------------------------------------------------------------------
$PY - "$OUT" <<'EOF'
import json, os, sys
out = sys.argv[1]
def load(n):
    try:
        return json.load(open(os.path.join(out, n + ".json")))
    except Exception:
        return {}
dq, bq, late = load("s1_delayq"), load("s1_bullmq"), load("s2_late")
s = {
    "delayq_lifecycles_per_s": dq.get("cycles_per_s"),
    "delayq_rounds": dq.get("rounds_cycles_per_s"),
    "bullmq_lifecycles_per_s": bq.get("lifecycles_per_s"),
    "bullmq_rounds": bq.get("rounds_lifecycles_per_s"),
    "redis_commands_per_lifecycle": dq.get("redis_commands_per_lifecycle"),
    "redis_scripts_per_lifecycle": dq.get("redis_scripts_per_lifecycle"),
    "redis_cpu_us_per_lifecycle": dq.get("redis_cpu_us_per_lifecycle"),
    "bullmq_redis_commands_per_lifecycle": bq.get("redis_commands_per_lifecycle"),
    "delayq_server_cpu_s": dq.get("server_cpu_s"),
    "lateness": {k: late.get(k) for k in ("p50_ms", "p99_ms", "p999_ms", "max_ms", "early",
                                          "delivered", "missing")},
}
if s["delayq_lifecycles_per_s"] and s["bullmq_lifecycles_per_s"]:
    s["ratio"] = round(s["delayq_lifecycles_per_s"] / s["bullmq_lifecycles_per_s"], 1)
cl = [load("s3_cluster_s%d" % i) for i in range(1, 9)]
cl = [c for c in cl if c]
if cl:
    s["cluster_lifecycles_per_s"] = round(sum(c.get("cycles_per_s", 0) for c in cl))
    per = {}
    for c in cl:
        for m in c.get("masters", []):
            e = per.setdefault(m["port"], {"calls": 0, "cpu_s": 0.0})
            e["calls"] += m["calls"]
            e["cpu_s"] += m["cpu_s"]
    s["cluster_masters"] = per
nw, w = load("s4_nowait"), load("s4_wait")
if nw and w:
    s["wait0_lifecycles_per_s"] = nw.get("cycles_per_s")
    s["wait1_lifecycles_per_s"] = w.get("cycles_per_s")
    s["wait0_rounds"] = nw.get("rounds_cycles_per_s")
    s["wait1_rounds"] = w.get("rounds_cycles_per_s")
    s["wait1_redis_cpu_us_per_lifecycle"] = w.get("redis_cpu_us_per_lifecycle")
    s["wait0_redis_cpu_us_per_lifecycle"] = nw.get("redis_cpu_us_per_lifecycle")
    s["wait1_lifecycles_per_wait"] = w.get("lifecycles_per_wait")
    if nw.get("cycles_per_s") and w.get("cycles_per_s"):
        s["wait_cost_pct"] = round(100 * (1 - w["cycles_per_s"] / nw["cycles_per_s"]), 1)
print(json.dumps(s))
print()
print("| measure | delayq | peer | ratio | target |")
print("| --- | --- | --- | --- | --- |")
print("| lifecycles/s on one Redis 7 (delayq: 50 conns x DEPTH; BullMQ: concurrency 50) | %s | %s | %s | >= 5 |"
      % (s["delayq_lifecycles_per_s"], s["bullmq_lifecycles_per_s"], s.get("ratio")))
print("| Redis commands per lifecycle (script calls) | %s (%s) | %s | | |"
      % (s["redis_commands_per_lifecycle"], s["redis_scripts_per_lifecycle"],
         s["bullmq_redis_commands_per_lifecycle"]))
print("| Redis CPU per lifecycle, us | %s | | | |" % s["redis_cpu_us_per_lifecycle"])
l = s["lateness"]
print("| lateness p50 / p99 / max ms, early | %s / %s / %s, %s early | | | p99 <= 10, 0 early |"
      % (l["p50_ms"], l["p99_ms"], l["max_ms"], l["early"]))
if cl:
    print("| 3-master cluster, %d servers: lifecycles/s | %s | | | |"
          % (len(cl), s["cluster_lifecycles_per_s"]))
    for port, e in sorted(s["cluster_masters"].items()):
        print("| master %s: commands, Redis CPU s | %d, %.2f | | | |" % (port, e["calls"], e["cpu_s"]))
if "wait_cost_pct" in s:
    print("| 3 masters + 3 replicas: lifecycles/s, --redis-wait-replicas 1 (peer: 0) | %s | %s | %s %% cost | <= 30 %% |"
          % (s["wait1_lifecycles_per_s"], s["wait0_lifecycles_per_s"], s["wait_cost_pct"]))
    print("| Redis CPU per lifecycle (masters + replicas), us, wait 1 / 0 | %s / %s | | | |"
          % (s["wait1_redis_cpu_us_per_lifecycle"], s["wait0_redis_cpu_us_per_lifecycle"]))
    print("| lifecycles per WAIT (--redis-wait-replicas 1) | %s | | | |"
          % s["wait1_lifecycles_per_wait"])
EOF
log "raw output in $OUT"
