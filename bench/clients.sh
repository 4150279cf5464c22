#!/usr/bin/env bash
# The language clients' workers (issue 27, "Performance"): job lifecycles per
# second of a no-op handler at concurrency 50, while producers add 100-byte
# jobs due now, at most WINDOW (1000) outstanding, counted over RUN_SECONDS
# after WARMUP_SECONDS; each worker's own clients/<lang>/bench/lifecycle.*,
# producers in the same process as its worker, as BullMQ's lifecycle.js runs
# its own (PROCESSES=1, its best figure here). In one run, in turns:
#
#   node_memory   Node Worker  -> `delayq serve --store memory`
#   node_redis    Node Worker  -> `delayq serve --store redis` on redis-server R
#   bullmq        BullMQ Worker (bench/bullmq.sh, concurrency 50) on the same R
#   python_memory Python Worker (asyncio, async no-op handler) -> memory
#   go_memory     Go Worker    -> memory
#   cpp_memory    the C++ Worker through the network client (delayq-bench
#                 remote-worker, 50 threads) -> memory
#
# Targets: node_memory >= 3 x bullmq (each on its own store), node_redis >=
# 1.5 x bullmq (same Redis); the others recorded beside the C++ Worker's.
#
#   bash bench/clients.sh                       # builds first (make build)
#   SKIP_BUILD=1 ROUNDS=5 bash bench/clients.sh
#   RUNS="node_memory bullmq" SKIP_BUILD=1 bash bench/clients.sh
#
# Environment (defaults): ROUNDS 3 (medians; the runs in a different order
# each round), RUNS (all six), CONCURRENCY 50, WINDOW 1000, BODY 100,
# RUN_SECONDS 5, WARMUP_SECONDS 2, BULLMQ_PRODUCERS 4, BUILD build, OUT (a
# temp dir).
# Every process started here is stopped by PID on exit; loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
ROUNDS=${ROUNDS:-3}
RUNS=${RUNS:-node_memory node_redis bullmq python_memory go_memory cpp_memory}
CONCURRENCY=${CONCURRENCY:-50}
WINDOW=${WINDOW:-1000}
BODY=${BODY:-100}
RUN_SECONDS=${RUN_SECONDS:-5}
WARMUP_SECONDS=${WARMUP_SECONDS:-2}
# BullMQ's producers (addBulk of 50 each): 4, as bench/worker.sh gives it,
# its better figure here (bench/bullmq.sh's own default is 2).
BULLMQ_PRODUCERS=${BULLMQ_PRODUCERS:-4}
OUT=${OUT:-$(mktemp -d /tmp/delayq-clients-bench.XXXXXX)}
PY=/usr/bin/python3
export GOPROXY=off GOFLAGS=-mod=mod

mkdir -p "$OUT"
pids=()
trap stop_started EXIT
# shellcheck source=bench/lib.sh
source bench/lib.sh
bin=$BUILD/bin
build_and_check "$bin/delayq" "$bin/delayq-bench"
bash scripts/bootstrap.sh test # node, go, and clients/node's npm ci

log "machine: $(nproc) cpu, load $(cut -d' ' -f1-3 /proc/loadavg)," \
  "commit $(git rev-parse --short HEAD 2>/dev/null || echo ?)"
log "output in $OUT"
(cd clients/go && go build -o "$OUT/go-lifecycle" ./bench/lifecycle.go)

start_worker_servers clients

# lifecycle NAME SERVER_PID RESP_PORT COMMAND...: one run of a client's
# lifecycle program (its last line of output: JSON), the server's CPU added.
lifecycle() {
  local name=$1 spid=$2 port=$3 c0 c1
  shift 3
  c0=$(cpu_s "$spid")
  if ! DELAYQ_SERVER="127.0.0.1:$port" CONCURRENCY="$CONCURRENCY" WINDOW="$WINDOW" \
    BODY="$BODY" RUN_SECONDS="$RUN_SECONDS" WARMUP_SECONDS="$WARMUP_SECONDS" \
    "$@" >"$OUT/$name.raw" 2>"$OUT/$name.err"; then
    echo "FAILED: $name ($(tail -1 "$OUT/$name.err"))" >&2
    return 0
  fi
  c1=$(cpu_s "$spid")
  with_server_cpu "$name" "$c0" "$c1"
}

# cpp NAME: the C++ Worker through the network client (delayq-bench
# remote-worker: its 4 producers add batches of 50) on the memory server.
cpp() {
  local name=$1 c0 c1
  c0=$(cpu_s "$mem_pid")
  if ! "$bin/delayq-bench" remote-worker --servers "127.0.0.1:$mem_resp" --threads "$CONCURRENCY" \
    --producers 4 --batch 50 --window "$WINDOW" --body "$BODY" \
    --seconds "$RUN_SECONDS" --warmup-seconds "$WARMUP_SECONDS" \
    >"$OUT/$name.raw" 2>"$OUT/$name.err"; then
    echo "FAILED: delayq-bench remote-worker ($(tail -1 "$OUT/$name.err"))" >&2
    return 0
  fi
  c1=$(cpu_s "$mem_pid")
  with_server_cpu "$name" "$c0" "$c1"
}

read -r -a runs <<<"$RUNS"
n=${#runs[@]}
for r in $(seq "$ROUNDS"); do
  log "round $r/$ROUNDS (load $(cut -d' ' -f1-3 /proc/loadavg))"
  for k in $(seq 0 $((n - 1))); do # each round starts one run later
    run=${runs[$(((k + r - 1) % n))]}
    case $run in
      node_memory) lifecycle "node_memory_r$r" "$mem_pid" "$mem_resp" node clients/node/bench/lifecycle.mjs ;;
      node_redis) lifecycle "node_redis_r$r" "$rds_pid" "$rds_resp" node clients/node/bench/lifecycle.mjs ;;
      python_memory) lifecycle "python_memory_r$r" "$mem_pid" "$mem_resp" \
        env PYTHONPATH=clients/python/src $PY clients/python/bench/lifecycle.py ;;
      go_memory) lifecycle "go_memory_r$r" "$mem_pid" "$mem_resp" "$OUT/go-lifecycle" ;;
      cpp_memory) cpp "cpp_memory_r$r" ;;
      bullmq) PRODUCERS=$BULLMQ_PRODUCERS bullmq_round "bullmq_r$r" "$rd_port" "$CONCURRENCY" ;;
      *) echo "unknown run '$run' in RUNS" >&2; exit 2 ;;
    esac
  done
done
for run in "${runs[@]}"; do median "$run" lifecycles_per_s; done

# --- summary -------------------------------------------------------------------------------
$PY - "$OUT" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'EOF'
import json, os, sys
out = sys.argv[1]
def load(n):
    try:
        return json.load(open(os.path.join(out, n + ".json")))
    except Exception:
        return {}
names = ["node_memory", "node_redis", "bullmq", "python_memory", "go_memory", "cpp_memory"]
runs = {n: load(n) for n in names}
rate = {n: runs[n].get("lifecycles_per_s") for n in names}
ratio = lambda a, b: round(a / b, 1) if a and b else None
s = {n + "_lifecycles_per_s": rate[n] for n in names}
s.update({n + "_rounds": runs[n].get("rounds_lifecycles_per_s") for n in names})
s["node_memory_vs_bullmq"] = ratio(rate["node_memory"], rate["bullmq"])
s["node_redis_vs_bullmq"] = ratio(rate["node_redis"], rate["bullmq"])
s["bullmq_versions"] = runs["bullmq"].get("versions")
s["load_average_at_end"] = sys.argv[2]
print(json.dumps(s))
print()
print("| worker, no-op handler, concurrency 50 | store | lifecycles/s (rounds) | vs BullMQ | target |")
print("| --- | --- | --- | --- | --- |")
rows = [("Node (`clients/node`)", "node_memory", "delayq memory", ">= 3x"),
        ("Node (`clients/node`)", "node_redis", "delayq redis, same Redis as BullMQ", ">= 1.5x"),
        ("BullMQ Worker", "bullmq", "Redis", ""),
        ("Python (`clients/python`, asyncio)", "python_memory", "delayq memory", "recorded"),
        ("Go (`clients/go`)", "go_memory", "delayq memory", "recorded"),
        ("C++ `delayq::Worker`, network client, 50 threads", "cpp_memory", "delayq memory", "recorded")]
for label, n, store, target in rows:
    print("| %s | %s | %s (%s) | %s | %s |" % (label, store, rate[n], runs[n].get("rounds_lifecycles_per_s"),
                                            ratio(rate[n], rate["bullmq"]) if n != "bullmq" else "", target))
EOF
log "raw output in $OUT"
