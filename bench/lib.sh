# shellcheck shell=bash
# Shell helpers shared by bench/server.sh and bench/durable.sh (sourced).
# They expect PY (a python3) and OUT (the output directory), and append the
# PIDs they start to the array `pids`, which the caller's EXIT trap stops.

log() { echo "# $(date -u +%T) $*" >&2; }

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
