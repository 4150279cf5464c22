# shellcheck shell=bash
# Shell helpers shared by the bench/*.sh scripts (sourced).
# They expect PY (a python3) and OUT (the output directory), and append the
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
