#!/usr/bin/env bash
# `delayq work` with `true` as the command: jobs per second (issue 17). Each
# job costs a process (posix_spawn of /bin/true, its exit, waitpid) on top
# of a reserve and a finish over RESP, so process start dominates: the figure
# says how fast a shell worker can go, not how fast delayq is.
#
#   bash bench/work.sh                          # after building build/bin/delayq
#   JOBS=5000 CONCURRENCY="1 4 8" bash bench/work.sh
#
# Starts `delayq serve --store memory` on free loopback ports, and for each
# concurrency adds JOBS jobs (redis-py, pipelined), then times `delayq work
# bench.work --concurrency C -- true` from its start to the last job
# finished (the server's `finished` count, read every 20 ms). Prints one
# line per concurrency: "concurrency C: N jobs in S s = R jobs/s".
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-build/bin/delayq}
JOBS=${JOBS:-2000}
CONCURRENCY=${CONCURRENCY:-"1 2 4"}
PY=/usr/bin/python3  # has redis-py
OUT=$(mktemp -d /tmp/delayq-work-bench.XXXXXX)
pids=()
# shellcheck source=bench/lib.sh
source bench/lib.sh
trap stop_started EXIT

resp=$(free_port)
start server "$BIN" serve --store memory --http-port 0 --resp-port "$resp"
wait_port "$resp"

for c in $CONCURRENCY; do
  $PY - "$resp" "$JOBS" <<'PYEOF'
import sys, redis
r = redis.Redis(port=int(sys.argv[1]))
p = r.pipeline(transaction=False)
for i in range(int(sys.argv[2])):
    p.execute_command("ADD", "bench.work", "*", 0, 60000, "x" * 100)
p.execute()
PYEOF
  before=$($PY -c "import redis,sys; s=redis.Redis(port=$resp).execute_command('STATS'); \
d=dict(zip(s[::2], s[1::2])); print(int(d[b'finished']))")
  t0=$(date +%s.%N)
  DELAYQ_SERVER=127.0.0.1:$resp "$BIN" work bench.work --concurrency "$c" --log-level warn \
    -- true >"$OUT/work_c$c.log" 2>&1 &
  work=$!
  pids+=("$work")
  $PY - "$resp" "$((before + JOBS))" <<'PYEOF'
import sys, time, redis
r = redis.Redis(port=int(sys.argv[1]))
want = int(sys.argv[2])
deadline = time.monotonic() + 600
while time.monotonic() < deadline:
    s = r.execute_command("STATS")
    if int(dict(zip(s[::2], s[1::2]))[b"finished"]) >= want:
        break
    time.sleep(0.02)  # a poll interval
else:
    sys.exit("not every job finished within 600 s")
PYEOF
  t1=$(date +%s.%N)
  stop_pid "$work"
  awk -v c="$c" -v n="$JOBS" -v a="$t0" -v b="$t1" \
    'BEGIN { s = b - a; printf "concurrency %d: %d jobs in %.2f s = %.0f jobs/s\n", c, n, s, n / s }'
done
