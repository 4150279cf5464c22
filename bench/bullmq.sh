#!/usr/bin/env bash
# BullMQ's job lifecycles per second on one Redis: the peer of delayq's Redis
# store (SPEC §12, issue 5). Runs bench/bullmq/lifecycle.js ROUNDS times and
# keeps the median round (JSON, then a markdown table, on stdout).
#
#   bash bench/bullmq.sh                   # its own redis-server, no persistence
#   REDIS_PORT=6390 bash bench/bullmq.sh   # a Redis already running on 127.0.0.1
#
# With REDIS_PORT the script starts no Redis and touches only its own keys:
# each round uses a queue under a fresh prefix (dqbench-bullmq-<pid>-<random>)
# and removes it at the end (obliterate, then UNLINK of what matches the
# prefix). commandstats deltas then count whatever else that Redis ran during
# the window too: run nothing else on it meanwhile.
#
# Needs node and npm: installed with apt-get (nodejs npm) only when node is
# missing; the npm packages (bench/bullmq/package-lock.json) with `npm ci`
# when bench/bullmq/node_modules lacks them.
#
# Environment (defaults):
#   ROUNDS 3            rounds, median kept
#   RUN_SECONDS 10      measured seconds per round, after WARMUP_SECONDS (2)
#   CONCURRENCY 50      the Worker's concurrency
#   PRODUCERS 2         Queue connections adding
#   PROCESSES 1         1: producers and Worker in one node process (BullMQ's
#                       best figure on 2 vCPUs); 2: the Worker in a second one
#   ADD_MODE bulk       bulk: addBulk of BATCH (50) jobs, one at a time per
#                       producer (BullMQ's documented fast way); add: Queue.add,
#                       ADD_DEPTH (64) unanswered (the same rate here)
#   WINDOW 1000         jobs outstanding (added, not completed) at most
#   BODY 100            bytes of job data
#   DELAY_MS 0          job delay; > 0 goes through BullMQ's delayed set and
#                       reports lateness (processedOn - (timestamp + delay))
#   RATE 0              adds/s in all (0: as fast as WINDOW lets them); for a
#                       lateness figure, a rate below the maximum (at the
#                       maximum the lateness is the WINDOW's backlog)
#   OUT                 raw output (default: a new /tmp/delayq-bullmq-bench.*)
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
RUN_SECONDS=${RUN_SECONDS:-10}
WARMUP_SECONDS=${WARMUP_SECONDS:-2}
CONCURRENCY=${CONCURRENCY:-50}
PRODUCERS=${PRODUCERS:-2}
PROCESSES=${PROCESSES:-1}
ADD_MODE=${ADD_MODE:-bulk}
BATCH=${BATCH:-50}
ADD_DEPTH=${ADD_DEPTH:-64}
WINDOW=${WINDOW:-1000}
BODY=${BODY:-100}
DELAY_MS=${DELAY_MS:-0}
RATE=${RATE:-0}
REDIS_PORT=${REDIS_PORT:-}
OUT=${OUT:-$(mktemp -d /tmp/delayq-bullmq-bench.XXXXXX)}
PY=/usr/bin/python3

mkdir -p "$OUT"
pids=()
trap stop_started EXIT
# shellcheck source=bench/lib.sh
source bench/lib.sh  # (the cwd is the repository root by now)

# node and npm: only here, not in scripts/bootstrap.sh (make test needs neither).
if ! command -v node >/dev/null; then
  log "node missing: apt-get install nodejs npm"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update >&2
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y nodejs npm >&2
fi
command -v redis-server >/dev/null || [ -n "$REDIS_PORT" ] || { echo "missing redis-server" >&2; exit 1; }
# The pinned packages, unless node_modules already has exactly those versions.
if ! (cd bench/bullmq && node -e '
  const want = require("./package.json").dependencies;
  for (const [n, v] of Object.entries(want))
    if (require(n + "/package.json").version !== v) process.exit(1);' 2>/dev/null); then
  command -v npm >/dev/null || { echo "missing npm (node is there: install npm for it)" >&2; exit 1; }
  log "npm ci in bench/bullmq"
  (cd bench/bullmq && npm ci --no-audit --no-fund >&2)
fi

log "machine: $(nproc) cpu, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
  "load $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD 2>/dev/null || echo ?)"
log "output in $OUT"
if [ -n "$REDIS_PORT" ]; then
  rd_port=$REDIS_PORT
  log "redis: the one on 127.0.0.1:$rd_port (only this run's keys are touched)"
else
  rd_port=$(free_port)
  start redis redis-server --bind 127.0.0.1 --port "$rd_port" --save '' --appendonly no
  log "redis pid $started port $rd_port"
fi
wait_port "$rd_port"

args=(--port "$rd_port" --seconds "$RUN_SECONDS" --warmup "$WARMUP_SECONDS"
  --concurrency "$CONCURRENCY" --producers "$PRODUCERS" --processes "$PROCESSES"
  --add-mode "$ADD_MODE" --batch "$BATCH" --add-depth "$ADD_DEPTH" --window "$WINDOW"
  --body "$BODY" --delay "$DELAY_MS" --rate "$RATE")
log "command: node bench/bullmq/lifecycle.js ${args[*]}"
for r in $(seq "$ROUNDS"); do
  name=bullmq_r$r
  cc=0
  pgrep -x cc1plus >/dev/null && cc=1
  log "round $r/$ROUNDS (load $(cut -d' ' -f1-3 /proc/loadavg))"
  # In the background so that the EXIT trap can stop it by PID; lifecycle.js
  # ends by itself (its own time limit: the run's seconds + 60 s).
  node bench/bullmq/lifecycle.js "${args[@]}" >"$OUT/$name.raw" 2>"$OUT/$name.err" &
  npid=$!
  pids+=("$npid")
  rc=0
  wait "$npid" || rc=$?
  pgrep -x cc1plus >/dev/null && cc=1
  if [ "$rc" != 0 ]; then
    echo "FAILED: round $r, exit $rc ($(tail -1 "$OUT/$name.err"))" >&2
    [ -s "$OUT/$name.raw" ] || continue
  fi
  $PY - "$OUT/$name.raw" "$OUT/$name.json" "$name" "$cc" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
d["name"] = sys.argv[3]
if sys.argv[4] == "1":
    d["compiler_running"] = True  # a cc1plus seen just before or just after
json.dump(d, open(sys.argv[2], "w"))
EOF
  cat "$OUT/$name.json" >&2
  echo >&2
done
median bullmq lifecycles_per_s
[ -s "$OUT/bullmq.json" ] || { echo "no round succeeded" >&2; exit 1; }

$PY - "$OUT" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'EOF'
import glob, json, os, sys
out = sys.argv[1]
m = json.load(open(os.path.join(out, "bullmq.json")))
rounds = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(out, "bullmq_r*.json")))]
s = {
    "bullmq_lifecycles_per_s": m["lifecycles_per_s"],
    "rounds_lifecycles_per_s": m["rounds_lifecycles_per_s"],
    "adds_per_s": m["adds_per_s"],
    "redis_commands_per_lifecycle": m["redis_commands_per_lifecycle"],
    "redis_scripts_per_lifecycle": m["redis_scripts_per_lifecycle"],
    "client_requests_per_lifecycle": m["client_requests_per_lifecycle"],
    "top_redis_commands": m["top_redis_commands"],
    "client_requests": m["client_requests"],
    "redis_cpu_util": m["redis_cpu_util"],
    "redis_cpu_us_per_lifecycle": m["redis_cpu_us_per_lifecycle"],
    "node_cpu_util": m["node_cpu_util"],
    "other_cpu_util": m.get("other_cpu_util"),
    "lateness": m["lateness"],
    "errors": sum(r.get("errors", 0) for r in rounds),
    "runs_with_a_compiler_running": [r["name"] for r in rounds if r.get("compiler_running")],
    "settings": {k: m[k] for k in ("seconds", "warmup_s", "concurrency", "producers", "processes",
                                   "add_mode", "batch", "add_depth", "window", "body", "delay_ms",
                                   "rate")},
    "versions": m["versions"],
    "load_average_at_end": sys.argv[2],
}
print(json.dumps(s))
print()
print("| measure | BullMQ |")
print("| --- | --- |")
rows = [
    ("lifecycles/s (median of %d; rounds)" % len(m["rounds_lifecycles_per_s"]),
     "%s (%s)" % (s["bullmq_lifecycles_per_s"], ", ".join(map(str, s["rounds_lifecycles_per_s"])))),
    ("adds/s", s["adds_per_s"]),
    ("Redis commands per lifecycle (scripts' included)", s["redis_commands_per_lifecycle"]),
    ("scripts (EVALSHA) per lifecycle", s["redis_scripts_per_lifecycle"]),
    ("client requests per lifecycle", s["client_requests_per_lifecycle"]),
    ("top commands per lifecycle",
     ", ".join("%s %s" % (c["cmd"], c["per_lifecycle"]) for c in s["top_redis_commands"][:8])),
    ("redis-server CPU per lifecycle, us", s["redis_cpu_us_per_lifecycle"]),
    ("CPU: redis-server / node", "%s / %s" % (s["redis_cpu_util"],
     " + ".join("%s %s" % kv for kv in s["node_cpu_util"].items()))),
    ("CPU of other work on the machine", s["other_cpu_util"]),
]
if s["lateness"]:
    l = s["lateness"]
    rows.append(("lateness p50 / p99 / max ms (early)",
                 "%s / %s / %s (%s)" % (l["p50_ms"], l["p99_ms"], l["max_ms"], l["early"])))
for name, v in rows:
    print("| %s | %s |" % (name, v))
EOF
log "raw output: $OUT"
