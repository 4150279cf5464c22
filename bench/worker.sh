#!/usr/bin/env bash
# The worker runtime's figures (issue 17, "Performance"), in one run on this
# machine. Prints each run's JSON on stderr as it goes, then a JSON summary
# and a markdown table on stdout.
#
#   bash bench/worker.sh                         # builds first (make build)
#   SKIP_BUILD=1 BUILD=build-bench bash bench/worker.sh
#   STEPS="2" ROUNDS=5 SKIP_BUILD=1 bash bench/worker.sh
#
# Steps (STEPS, default "1 2 3"):
#   1 in-process  delayq-bench worker: a Worker (WORKER_THREADS threads) over
#                 the in-process memory queue, no-op handler, WORKER_JOBS per
#                 round, beside the engine alone in the same process and
#                 rounds (ROUNDS, medians). Target: worker >= 0.5 x engine.
#   2 network     delayq-bench remote-worker: a Worker with THREADS (50)
#                 handler threads (its 50 slots; the topic's concurrency is
#                 all of them), no-op handler, through the network client
#                 (store "remote") to `delayq serve --store memory`, and to
#                 `delayq serve --store redis` on a redis-server; BullMQ
#                 (bench/bullmq.sh: a Worker of concurrency 50, one node
#                 process) on that same redis-server. As BullMQ's
#                 lifecycle.js: PRODUCERS (4) producers add 100-byte jobs due
#                 at once while the Worker runs, at most WINDOW (1000)
#                 outstanding, counted over RUN_SECONDS after WARMUP_SECONDS;
#                 delayq's producers write ADD_BATCH (50) pipelined RESP ADDs
#                 at a time (BullMQ's: addBulk of 50). ROUNDS rounds, the
#                 three runs in a different order each round, medians.
#                 Targets: memory >= 10 x BullMQ, redis >= 5 x BullMQ.
#   3 work        bench/work.sh: `delayq work` with `true` as the command,
#                 WORK_JOBS jobs at each of WORK_CONCURRENCY: jobs/s. A
#                 process start per job dominates.
#
# The servers run on free loopback ports; every process started here is
# stopped by PID on exit. Raw output stays in OUT (printed at the end).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
STEPS=${STEPS:-1 2 3}
ROUNDS=${ROUNDS:-3}
WORKER_JOBS=${WORKER_JOBS:-1000000}
WORKER_THREADS=${WORKER_THREADS:-4}
THREADS=${THREADS:-50}
# 4, not 2: each producer has one batch in flight, and through `serve --store
# redis` an add waits for a Redis round, so 2 producers (100 adds in flight)
# held delayq's worker back (59-63k/s against 72-80k/s with 4); BullMQ's
# worker is its limit either way (13.9k/s with 2, 14.5k/s with 4).
PRODUCERS=${PRODUCERS:-4}
ADD_BATCH=${ADD_BATCH:-50}
WINDOW=${WINDOW:-1000}
BODY=${BODY:-100}
RUN_SECONDS=${RUN_SECONDS:-5}
WARMUP_SECONDS=${WARMUP_SECONDS:-2}
WORK_JOBS=${WORK_JOBS:-2000}
WORK_CONCURRENCY=${WORK_CONCURRENCY:-1 2 4}
OUT=${OUT:-$(mktemp -d /tmp/delayq-worker-bench.XXXXXX)}
PY=/usr/bin/python3

mkdir -p "$OUT"
bin=$BUILD/bin
# shellcheck source=bench/lib.sh
source bench/lib.sh
build_and_check "$bin/delayq" "$bin/delayq-bench"

pids=()
trap stop_started EXIT
want() { [[ " $STEPS " == *" $1 "* ]]; }

log "machine: $(nproc) cpu, load $(cut -d' ' -f1-3 /proc/loadavg)," \
  "commit $(git rev-parse --short HEAD 2>/dev/null || echo ?)"
log "output in $OUT"

# --- 1 in-process ------------------------------------------------------------------------
if want 1; then
  log "1 in-process: delayq-bench worker --jobs $WORKER_JOBS --threads $WORKER_THREADS"
  "$bin/delayq-bench" worker --jobs "$WORKER_JOBS" --threads "$WORKER_THREADS" \
    --body "$BODY" --rounds "$ROUNDS" >"$OUT/s1_worker.json" 2>"$OUT/s1_worker.err" ||
    echo "FAILED: delayq-bench worker ($(tail -1 "$OUT/s1_worker.err"))" >&2
  cat "$OUT/s1_worker.json" >&2
fi

# --- 2 network: Worker through the client, vs BullMQ -------------------------------------
# remote NAME SERVER_PID RESP_PORT: one remote-worker run, OUT/NAME.json with
# the server's CPU seconds added.
remote() {
  local name=$1 spid=$2 port=$3 c0 c1
  c0=$(cpu_s "$spid")
  if ! "$bin/delayq-bench" remote-worker --servers "127.0.0.1:$port" --threads "$THREADS" \
    --producers "$PRODUCERS" --batch "$ADD_BATCH" --window "$WINDOW" --body "$BODY" \
    --seconds "$RUN_SECONDS" --warmup-seconds "$WARMUP_SECONDS" \
    >"$OUT/$name.raw" 2>"$OUT/$name.err"; then
    echo "FAILED: delayq-bench remote-worker ($(tail -1 "$OUT/$name.err"))" >&2
    [ -s "$OUT/$name.raw" ] || return 0
  fi
  c1=$(cpu_s "$spid")
  with_server_cpu "$name" "$c0" "$c1"
}

if want 2; then
  log "2 network"
  start_worker_servers worker
  runs=(mem rds bq)
  for r in $(seq "$ROUNDS"); do
    log "2 network, round $r/$ROUNDS (load $(cut -d' ' -f1-3 /proc/loadavg))"
    for k in 0 1 2; do  # the three in turn, starting one later each round
      case ${runs[$(((k + r - 1) % 3))]} in
        mem) remote "s2_memory_r$r" "$mem_pid" "$mem_resp" ;;
        rds) remote "s2_redis_r$r" "$rds_pid" "$rds_resp" ;;
        bq) bullmq_round "s2_bullmq_r$r" "$rd_port" "$THREADS" ;;
      esac
    done
  done
  median s2_memory lifecycles_per_s
  median s2_redis lifecycles_per_s
  median s2_bullmq lifecycles_per_s
  stop_pid "$mem_pid"
  stop_pid "$rds_pid"
fi

# --- 3 delayq work -----------------------------------------------------------------------
if want 3; then
  log "3 work: bench/work.sh, $WORK_JOBS jobs at concurrency $WORK_CONCURRENCY"
  BIN="$bin/delayq" JOBS="$WORK_JOBS" CONCURRENCY="$WORK_CONCURRENCY" bash bench/work.sh \
    >"$OUT/s3_work.txt" 2>"$OUT/s3_work.err" ||
    echo "FAILED: bench/work.sh ($(tail -1 "$OUT/s3_work.err"))" >&2
  cat "$OUT/s3_work.txt" >&2
fi

# --- summary -------------------------------------------------------------------------------
$PY - "$OUT" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'EOF'
import json, os, re, sys
out = sys.argv[1]
def load(n):
    try:
        return json.load(open(os.path.join(out, n + ".json")))
    except Exception:
        return {}
w, mem, rds, bq = load("s1_worker"), load("s2_memory"), load("s2_redis"), load("s2_bullmq")
work = []
try:
    for line in open(os.path.join(out, "s3_work.txt")):
        m = re.match(r"concurrency (\d+): (\d+) jobs in ([\d.]+) s = (\d+) jobs/s", line)
        if m:
            work.append({"concurrency": int(m[1]), "jobs": int(m[2]), "seconds": float(m[3]),
                         "jobs_per_s": int(m[4])})
except OSError:
    pass
ratio = lambda a, b: round(a / b, 1) if a and b else None
s = {
    "inprocess_engine_lifecycles_per_s": w.get("engine_lifecycles_per_s"),
    "inprocess_worker_lifecycles_per_s": w.get("worker_lifecycles_per_s"),
    "inprocess_worker_ratio": w.get("worker_ratio"),
    "memory_lifecycles_per_s": mem.get("lifecycles_per_s"),
    "memory_rounds": mem.get("rounds_lifecycles_per_s"),
    "memory_client_cpu_s": mem.get("client_cpu_s"),
    "memory_server_cpu_s": mem.get("server_cpu_s"),
    "redis_lifecycles_per_s": rds.get("lifecycles_per_s"),
    "redis_rounds": rds.get("rounds_lifecycles_per_s"),
    "redis_client_cpu_s": rds.get("client_cpu_s"),
    "redis_server_cpu_s": rds.get("server_cpu_s"),
    "bullmq_lifecycles_per_s": bq.get("lifecycles_per_s"),
    "bullmq_rounds": bq.get("rounds_lifecycles_per_s"),
    "bullmq_versions": bq.get("versions"),
    "work": work,
    "load_average_at_end": sys.argv[2],
}
s["memory_vs_bullmq"] = ratio(s["memory_lifecycles_per_s"], s["bullmq_lifecycles_per_s"])
s["redis_vs_bullmq"] = ratio(s["redis_lifecycles_per_s"], s["bullmq_lifecycles_per_s"])
print(json.dumps(s))
print()
print("| measure | delayq | peer | ratio | target |")
print("| --- | --- | --- | --- | --- |")
print("| Worker over the in-process queue, no-op: lifecycles/s | %s | engine alone %s | %s | >= 0.5 |"
      % (s["inprocess_worker_lifecycles_per_s"], s["inprocess_engine_lifecycles_per_s"],
         s["inprocess_worker_ratio"]))
print("| Worker via the client, 50 threads, serve --store memory: lifecycles/s (rounds) | %s (%s) | BullMQ %s (%s) | %s | >= 10 |"
      % (s["memory_lifecycles_per_s"], s["memory_rounds"], s["bullmq_lifecycles_per_s"],
         s["bullmq_rounds"], s["memory_vs_bullmq"]))
print("| Worker via the client, 50 threads, serve --store redis, same Redis: lifecycles/s (rounds) | %s (%s) | BullMQ %s | %s | >= 5 |"
      % (s["redis_lifecycles_per_s"], s["redis_rounds"], s["bullmq_lifecycles_per_s"],
         s["redis_vs_bullmq"]))
print("| CPU s per run, worker process / server: memory; redis | %s / %s; %s / %s | | | |"
      % (s["memory_client_cpu_s"], s["memory_server_cpu_s"], s["redis_client_cpu_s"],
         s["redis_server_cpu_s"]))
for x in work:
    print("| `delayq work -- true`, concurrency %d: jobs/s | %d | | | (process start dominates) |"
          % (x["concurrency"], x["jobs_per_s"]))
EOF
log "raw output in $OUT"
