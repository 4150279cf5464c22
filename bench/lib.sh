# shellcheck shell=bash
# Shell helpers shared by the bench/*.sh scripts (sourced).
# They expect PY (a python3) and OUT (the output directory; bench_cpu also
# bin, where delayq-bench is), and append the
# PIDs they start to the array `pids`, which the caller's EXIT trap stops.

log() { echo "# $(date -u +%T) $*" >&2; }

# stop_started: SIGTERM to every PID in `pids`, then waits for each (the
# scripts' EXIT trap; a function defined before it is sourced is fine).
stop_started() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}

# stop_pid PID: SIGTERM, then SIGKILL after 15 s; waits until it is gone,
# child of this shell or not, and drops it from `pids`.
stop_pid() {
  local p=$1 i
  kill "$p" 2>/dev/null || true
  for i in $(seq 150); do
    [ -e "/proc/$p" ] || break
    if [ "$(awk '{ print $3 }' "/proc/$p/stat" 2>/dev/null)" = Z ]; then break; fi
    sleep 0.1
  done
  kill -9 "$p" 2>/dev/null || true
  wait "$p" 2>/dev/null || true
  local keep=()
  for i in "${pids[@]}"; do [ "$i" = "$p" ] || keep+=("$i"); done
  pids=("${keep[@]}")
}

free_port() {
  $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_port() {  # up to 10 s
  for _ in $(seq 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "nothing listens on 127.0.0.1:$1" >&2
  exit 1
}

# start NAME COMMAND...: runs it in the background, logs to OUT/NAME.log,
# sets $started to its PID.
start() {
  local name=$1
  shift
  "$@" >"$OUT/$name.log" 2>&1 &
  started=$!
  pids+=("$started")
}

# CPU seconds (user + system) a process has used so far.
cpu_s() {
  awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) / hz }' "/proc/$1/stat"
}

# median NAME KEY: of OUT/NAME_r*.json, the run with the median KEY becomes
# OUT/NAME.json, with every round's KEY added (rounds alternate between the
# servers compared, so a drift of the machine's speed hits each alike).
median() {
  $PY - "$OUT" "$1" "$2" <<'EOF'
import glob, json, os, sys
out, name, key = sys.argv[1:4]
runs = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(out, name + "_r*.json")))]
runs = [r for r in runs if r.get(key) is not None]
if runs:
    runs.sort(key=lambda r: r[key])
    m = dict(runs[len(runs) // 2])
    m["rounds_" + key] = [r[key] for r in runs]
    m["name"] = name
    json.dump(m, open(os.path.join(out, name + ".json"), "w"))
EOF
}

# with_server_cpu NAME C0 C1: OUT/NAME.raw's JSON (its last line) becomes
# OUT/NAME.json with "name" and "server_cpu_s" (C1 - C0: the server's CPU
# seconds over the run, warm-up and drain included) added, and is shown.
with_server_cpu() {
  $PY - "$OUT/$1" "$1" "$2" "$3" <<'PYEOF'
import json, sys
base, name, c0, c1 = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
d = json.loads(open(base + ".raw").read().strip().splitlines()[-1])
d["name"] = name
d["server_cpu_s"] = round(c1 - c0, 2)
json.dump(d, open(base + ".json", "w"))
PYEOF
  cat "$OUT/$1.json" >&2
  echo >&2
}

# bench_cpu NAME SERVER_PID ARGS...: runs delayq-bench ARGS, keeps its JSON in
# OUT/NAME.json with the server's CPU seconds during the run added
# (with_server_cpu). A failed run is logged and leaves its figures out; the
# caller's other runs still go.
bench_cpu() {
  local name=$1 spid=$2
  shift 2
  local c0 c1
  c0=$(cpu_s "$spid")
  if ! "${bin:?bench_cpu needs bin, the directory of delayq-bench}/delayq-bench" "$@" \
    >"$OUT/$name.raw" 2>"$OUT/$name.err"; then
    echo "FAILED: delayq-bench $* ($(tail -1 "$OUT/$name.err"))" >&2
    [ -s "$OUT/$name.raw" ] || return 0
  fi
  c1=$(cpu_s "$spid")
  with_server_cpu "$name" "$c0" "$c1"
}

# bullmq_round NAME PORT CONCURRENCY: one round of bench/bullmq.sh on the
# Redis at PORT (RUN_SECONDS, WARMUP_SECONDS, WINDOW, BODY as the caller's;
# PRODUCERS and ADD_BATCH if set, else bullmq.sh's own); OUT/NAME.json.
bullmq_round() {
  local name=$1 port=$2 concurrency=$3
  if ! ROUNDS=1 RUN_SECONDS="$RUN_SECONDS" WARMUP_SECONDS="$WARMUP_SECONDS" \
    CONCURRENCY="$concurrency" PRODUCERS="${PRODUCERS:-2}" BATCH="${ADD_BATCH:-50}" \
    WINDOW="$WINDOW" BODY="$BODY" REDIS_PORT="$port" OUT="$OUT/$name.d" \
    bash bench/bullmq.sh >"$OUT/$name.raw" 2>"$OUT/$name.err"; then
    echo "FAILED: bench/bullmq.sh ($(tail -1 "$OUT/$name.err"))" >&2
    return 0
  fi
  head -1 "$OUT/$name.raw" | $PY -c 'import json,sys
s = json.load(sys.stdin)
print(json.dumps({"name": sys.argv[1], "lifecycles_per_s": s["bullmq_lifecycles_per_s"],
                  "node_cpu_util": s.get("node_cpu_util"),
                  "redis_cpu_util": s.get("redis_cpu_util"), "versions": s.get("versions")}))' \
    "$name" >"$OUT/$name.json"
  cat "$OUT/$name.json" >&2
  echo >&2
}

# start_worker_servers TAG: a redis-server (no persistence) and two `delayq
# serve` of $bin: --store memory and --store redis on that Redis (prefix
# bench-TAG-$$). Sets rd_port, mem_resp, mem_pid, rds_resp, rds_pid; logs
# go to OUT/TAG_*.log.
start_worker_servers() {
  local tag=$1
  command -v redis-server >/dev/null || { echo "missing redis-server" >&2; exit 1; }
  rd_port=$(free_port)
  mkdir -p "$OUT/redis"
  start "${tag}_redis" redis-server --bind 127.0.0.1 --port "$rd_port" --dir "$OUT/redis" \
    --save "" --appendonly no
  wait_port "$rd_port"
  mem_resp=$(free_port)
  start "${tag}_memory" "$bin/delayq" serve --store memory --resp-port "$mem_resp" --http-port 0
  mem_pid=$started
  rds_resp=$(free_port)
  start "${tag}_redis_store" "$bin/delayq" serve --store redis \
    --redis "redis://127.0.0.1:$rd_port" --redis-prefix "bench-$tag-$$" \
    --resp-port "$rds_resp" --http-port 0
  rds_pid=$started
  wait_port "$mem_resp"
  wait_port "$rds_resp"
  log "redis-server $rd_port; delayq memory $mem_resp (pid $mem_pid)," \
    "delayq redis $rds_resp (pid $rds_pid)"
}

# build_and_check TOOL...: `make build` (unless SKIP_BUILD=1), then each TOOL
# must be an executable (else a message naming it, exit 1).
build_and_check() {
  if [ "${SKIP_BUILD:-0}" != 1 ]; then make build BUILD="$BUILD" >&2; fi
  local tool
  for tool in "$@"; do
    [ -x "$tool" ] || { echo "missing $tool: build first (make build)" >&2; exit 1; }
  done
}

# need_commands NAME...: each must be a command on the PATH (else a message
# naming it, exit 1).
need_commands() {
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 1; }
  done
}

minus() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f\n", a - b }'; }

# redis_benchmark NAME SERVER_PID PORT ARGS...: a redis-benchmark --csv run
# (CONNECTIONS connections, no pipelining); OUT/NAME.json gets its rps, the
# requests (ADD_REQUESTS) and the server's CPU seconds. A failed run is
# logged and leaves its figures out.
redis_benchmark() {
  local name=$1 spid=$2 port=$3
  shift 3
  local c0 rps
  c0=$(cpu_s "$spid")
  if ! redis-benchmark -h 127.0.0.1 -p "$port" -c "$CONNECTIONS" -P 1 --csv "$@" \
    >"$OUT/$name.csv" 2>"$OUT/$name.err"; then
    echo "FAILED: redis-benchmark $* ($(tail -1 "$OUT/$name.err"))" >&2
    return 0
  fi
  rps=$(tail -1 "$OUT/$name.csv" | awk -F'","' '{ print $2 }')
  echo "{\"name\":\"$name\",\"rps\":${rps:-0},\"requests\":${ADD_REQUESTS:-0},\"server_cpu_s\":$(minus "$(cpu_s "$spid")" "$c0")}" \
    | tee "$OUT/$name.json" >&2
}
