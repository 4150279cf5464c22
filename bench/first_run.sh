#!/usr/bin/env bash
# The newcomer's wait: `make run` in a fresh clone of this repository, timed
# until the server answers /healthz, then the same again with nothing changed.
# Without ccache (a newcomer has none). Each run is its own process group,
# stopped by its id; ports 7800/7801 (PORT=...), so it runs beside `make run`.
#
#   bash bench/first_run.sh            # prints first_s=... second_s=... warnings=...
#
# docs/benchmarks.md records its figures ("The first hour").
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
port=${PORT:-7800}
scratch=$(mktemp -d /tmp/delayq-first-run.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
git clone -q "$repo" "$scratch/clone"

# Seconds from `make run` to the first /healthz answer; its output in $2.
serve_time() {
  local log=$1
  if curl -s -m1 "localhost:$port/healthz" >/dev/null 2>&1; then
    echo "bench/first_run.sh: port $port is taken (PORT=... for another)" >&2
    exit 1
  fi
  local start end pid ok=0
  start=$(date +%s.%N)
  (cd "$scratch/clone" &&
    exec env -u CMAKE_CXX_COMPILER_LAUNCHER -u CMAKE_C_COMPILER_LAUNCHER CCACHE_DISABLE=1 \
      DELAYQ_HTTP_PORT=$port DELAYQ_RESP_PORT=$((port + 1)) setsid make run) >"$log" 2>&1 &
  pid=$!
  local deadline=$(($(date +%s) + ${DEADLINE:-1200}))
  while [ "$(date +%s)" -lt $deadline ] && kill -0 $pid 2>/dev/null; do
    if curl -s -m1 "localhost:$port/healthz" >/dev/null 2>&1; then ok=1; break; fi
    sleep 0.1  # a person's polling, not a test's: this measures, it asserts nothing
  done
  end=$(date +%s.%N)
  kill -TERM -- -"$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  [ $ok = 1 ] || { echo "bench/first_run.sh: no answer; see $log" >&2; cat "$log" >&2; exit 1; }
  echo "$end - $start" | bc
}

first=$(serve_time "$scratch/first.log")
second=$(serve_time "$scratch/second.log")
echo "first_s=$first second_s=$second warnings=$(grep -c 'warning:' "$scratch/first.log" || true)"
echo "steps=$(grep -c '^\[[0-9]*/[0-9]*\]' "$scratch/first.log" || true) second_output: $(head -1 "$scratch/second.log")"
