#!/usr/bin/env bash
# What TLS on the listeners costs delayq, against what it costs Redis, in one
# run on this machine (issue 29): starts delayq (memory store) twice — once
# plaintext, once with --tls-cert-file/--tls-key-file (both listeners TLS) —
# and redis-server twice — plaintext, and TLS only (--port 0 --tls-port) —
# on free loopback ports, with certificates made here by openssl (an EC P-256
# CA and a server certificate for localhost and 127.0.0.1), and loads each
# pair with the same client, plaintext then TLS:
#
#   bash bench/tls.sh               # builds first (make build)
#   SKIP_BUILD=1 BUILD=build bash bench/tls.sh
#   STEPS="1 3" ROUNDS=5 SKIP_BUILD=1 bash bench/tls.sh
#
# Steps (STEPS, default "1 2 3 4"), each ROUNDS rounds, plaintext and TLS in
# turn (the order swapped every other round), medians kept: this VM's speed
# drifts by tens of percent within a minute, and alternating makes the drift
# hit both alike.
#   1 cycle     delayq-bench cycle --proto resp, CONNECTIONS × DEPTH in flight
#               (server.sh step 1's shape): delayq plaintext vs delayq TLS
#   2 http      the same over HTTP (--proto http)
#   3 add       redis-benchmark -c CONNECTIONS -P 1 (server.sh step 2): SET on
#               Redis plaintext vs --tls SET on Redis TLS; ADD on delayq
#               plaintext vs --tls ADD on delayq TLS
#   4 put       delayq-bench put (single adds, depth 1): delayq RESP and Redis
#               SET (--proto redis-set), each plaintext vs TLS: the ratios of
#               step 3 through a second client
# For each: the TLS / plaintext ratio of the throughput, and the server's CPU
# per request (/proc/PID/stat over the run; cycle and put: over warm-up and
# run, divided by the rate × both). The claim checked: delayq's ratio is not
# below Redis's (TLS costs delayq no more of its throughput than it costs
# Redis), step 3 (and 4) giving both through one client.
#
# Prints a JSON line per figure and a markdown table; raw output stays in OUT.
# Every process started here is stopped by PID on exit. About 3 minutes with
# the defaults.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
STEPS=${STEPS:-1 2 3 4}
CONNECTIONS=${CONNECTIONS:-50}
DEPTH=${DEPTH:-16}                     # cycles in flight per connection (steps 1, 2)
BODY=${BODY:-100}
ROUNDS=${ROUNDS:-3}
CYCLE_SECONDS=${CYCLE_SECONDS:-5}      # per run
WARMUP_SECONDS=${WARMUP_SECONDS:-1}
ADD_REQUESTS=${ADD_REQUESTS:-200000}   # redis-benchmark -n, per run
PUT_SECONDS=${PUT_SECONDS:-4}          # per run
OUT=${OUT:-$(mktemp -d /tmp/delayq-tls-bench.XXXXXX)}
PY=/usr/bin/python3

mkdir -p "$OUT"
bin=$BUILD/bin
# shellcheck source=bench/lib.sh
source bench/lib.sh  # (the cwd is the repository root by now)
build_and_check "$bin/delayq" "$bin/delayq-bench"
need_commands redis-server redis-benchmark openssl

pids=()
trap stop_started EXIT


# --- certificates -------------------------------------------------------------------
# As tests/integration/tls_test.py's Certs: a CA, and a server certificate it
# signs for DNS:localhost and IP:127.0.0.1 (the clients check the address).
certs=$OUT/certs
mkdir -p "$certs"
ossl() { (cd "$certs" && openssl "$@") >>"$certs/openssl.log" 2>&1; }
ossl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key \
  -out ca.pem -days 30 -subj "/CN=delayq bench CA"
ossl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout server.key \
  -out server.csr -subj "/CN=localhost"
echo "subjectAltName=DNS:localhost,IP:127.0.0.1" >"$certs/server.ext"
ossl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem \
  -days 30 -extfile server.ext
ca=$certs/ca.pem
tls_serve=(--tls-cert-file "$certs/server.pem" --tls-key-file "$certs/server.key")

# --- servers ------------------------------------------------------------------------
start_delayq() {  # start_delayq NAME [serve options...]: sets dq_resp, dq_http, dq_pid
  local name=$1
  shift
  dq_resp=$(free_port)
  dq_http=$(free_port)
  start "$name" "$bin/delayq" serve --store memory --resp-port "$dq_resp" \
    --http-port "$dq_http" "$@"
  dq_pid=$started
  wait_port "$dq_resp"
  wait_port "$dq_http"
}
start_delayq delayq_plain
plain_resp=$dq_resp plain_http=$dq_http plain_pid=$dq_pid
start_delayq delayq_tls "${tls_serve[@]}"
tls_resp=$dq_resp tls_http=$dq_http tls_pid=$dq_pid

rd_plain_port=$(free_port)
start redis_plain redis-server --bind 127.0.0.1 --port "$rd_plain_port" --save '' \
  --appendonly no
rd_plain_pid=$started
rd_tls_port=$(free_port)
start redis_tls redis-server --bind 127.0.0.1 --port 0 --tls-port "$rd_tls_port" \
  --tls-cert-file "$certs/server.pem" --tls-key-file "$certs/server.key" \
  --tls-ca-cert-file "$ca" --tls-auth-clients no --save '' --appendonly no
rd_tls_pid=$started
wait_port "$rd_plain_port"
wait_port "$rd_tls_port"

log "machine: $(nproc) cpu, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
  "load $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD 2>/dev/null || echo ?)," \
  "$(openssl version), $(redis-server --version | cut -d' ' -f1-3)"
log "output in $OUT"
log "delayq plaintext pid $plain_pid resp $plain_resp http $plain_http;" \
  "delayq TLS pid $tls_pid resp $tls_resp http $tls_http;" \
  "redis plaintext pid $rd_plain_pid port $rd_plain_port; redis TLS pid $rd_tls_pid port $rd_tls_port"

# --- runs ---------------------------------------------------------------------------
# bench NAME SERVER_PID ARGS...: bench_cpu (bench/lib.sh).
bench() { bench_cpu "$@"; }


# pair R FIRST SECOND: FIRST then SECOND (two functions of no arguments), the
# other way round in even rounds.
pair() {
  if (($1 % 2)); then "$2"; "$3"; else "$3"; "$2"; fi
}

has_step() { [[ " $STEPS " == *" $1 "* ]]; }

body=$(head -c "$BODY" /dev/zero | tr '\0' x)
cyc=(--connections "$CONNECTIONS" --depth "$DEPTH" --body "$BODY" --seconds "$CYCLE_SECONDS"
  --warmup-seconds "$WARMUP_SECONDS")
put=(--connections "$CONNECTIONS" --depth 1 --body "$BODY" --seconds "$PUT_SECONDS"
  --warmup-seconds "$WARMUP_SECONDS")
add=(ADD t '*' 0 60000 "$body")
tls_client=(--tls --cacert "$ca")

for r in $(seq "$ROUNDS"); do
  if has_step 1; then
    log "1 cycle resp, round $r/$ROUNDS: delayq plaintext, delayq TLS"
    c1p() { bench "cycle_resp_plain_r$r" "$plain_pid" cycle --proto resp --port "$plain_resp" "${cyc[@]}"; }
    c1t() { bench "cycle_resp_tls_r$r" "$tls_pid" cycle --proto resp --port "$tls_resp" --tls-ca "$ca" "${cyc[@]}"; }
    pair "$r" c1p c1t
  fi
  if has_step 2; then
    log "2 cycle http, round $r/$ROUNDS: delayq plaintext, delayq TLS"
    c2p() { bench "cycle_http_plain_r$r" "$plain_pid" cycle --proto http --port "$plain_http" "${cyc[@]}"; }
    c2t() { bench "cycle_http_tls_r$r" "$tls_pid" cycle --proto http --port "$tls_http" --tls-ca "$ca" "${cyc[@]}"; }
    pair "$r" c2p c2t
  fi
  if has_step 3; then
    log "3 add, round $r/$ROUNDS: redis-benchmark SET on redis, ADD on delayq; plaintext, TLS"
    s3p() { redis_benchmark "rb_set_plain_r$r" "$rd_plain_pid" "$rd_plain_port" -n "$ADD_REQUESTS" -d "$BODY" -t set; }
    s3t() { redis_benchmark "rb_set_tls_r$r" "$rd_tls_pid" "$rd_tls_port" "${tls_client[@]}" -n "$ADD_REQUESTS" -d "$BODY" -t set; }
    a3p() { redis_benchmark "rb_add_plain_r$r" "$plain_pid" "$plain_resp" -n "$ADD_REQUESTS" "${add[@]}"; }
    a3t() { redis_benchmark "rb_add_tls_r$r" "$tls_pid" "$tls_resp" "${tls_client[@]}" -n "$ADD_REQUESTS" "${add[@]}"; }
    pair "$r" s3p s3t
    pair "$r" a3p a3t
  fi
  if has_step 4; then
    log "4 put, round $r/$ROUNDS: delayq-bench put on delayq and redis SET; plaintext, TLS"
    p4p() { bench "put_delayq_plain_r$r" "$plain_pid" put --proto resp --port "$plain_resp" "${put[@]}"; }
    p4t() { bench "put_delayq_tls_r$r" "$tls_pid" put --proto resp --port "$tls_resp" --tls-ca "$ca" "${put[@]}"; }
    r4p() { bench "put_redis_plain_r$r" "$rd_plain_pid" put --proto redis-set --port "$rd_plain_port" "${put[@]}"; }
    r4t() { bench "put_redis_tls_r$r" "$rd_tls_pid" put --proto redis-set --port "$rd_tls_port" --tls-ca "$ca" "${put[@]}"; }
    pair "$r" p4p p4t
    pair "$r" r4p r4t
  fi
done
for name in cycle_resp_plain cycle_resp_tls cycle_http_plain cycle_http_tls; do
  median "$name" cycles_per_s
done
for name in rb_set_plain rb_set_tls rb_add_plain rb_add_tls; do median "$name" rps; done
for name in put_delayq_plain put_delayq_tls put_redis_plain put_redis_tls; do
  median "$name" adds_per_s
done

# --- summary ----------------------------------------------------------------------------
$PY - "$OUT" "$(cut -d' ' -f1-3 /proc/loadavg)" "$WARMUP_SECONDS" <<'EOF'
import glob, json, os, sys
out = sys.argv[1]
warmup = float(sys.argv[3])
r = {}
for f in glob.glob(os.path.join(out, "*.json")):
    r[os.path.basename(f)[:-5]] = json.load(open(f))

def per_request_us(name, rate_key):
    """The server's CPU per request: over the median run, warm-up included
    for delayq-bench (its rate taken for the warm-up's too)."""
    d = r.get(name)
    if not d or not d.get(rate_key) or d.get("server_cpu_s") is None:
        return None
    if "requests" in d:
        n = d["requests"]
    else:
        n = d[rate_key] * (d["seconds"] + warmup)
    return round(d["server_cpu_s"] / n * 1e6, 2)

figures = [
    # (figure, plaintext run, TLS run, rate key)
    ("delayq cycle, RESP (cycles/s)", "cycle_resp_plain", "cycle_resp_tls", "cycles_per_s"),
    ("delayq cycle, HTTP (cycles/s)", "cycle_http_plain", "cycle_http_tls", "cycles_per_s"),
    ("delayq ADD, redis-benchmark (adds/s)", "rb_add_plain", "rb_add_tls", "rps"),
    ("Redis SET, redis-benchmark (sets/s)", "rb_set_plain", "rb_set_tls", "rps"),
    ("delayq ADD, delayq-bench put (adds/s)", "put_delayq_plain", "put_delayq_tls", "adds_per_s"),
    ("Redis SET, delayq-bench put (sets/s)", "put_redis_plain", "put_redis_tls", "adds_per_s"),
]
def paired(p, t, key):
    """TLS / plaintext of each round (the two runs next to each other in
    time), in round order, and their median."""
    q = []
    for i in range(1, 1000):
        a, b = r.get("%s_r%d" % (p, i)), r.get("%s_r%d" % (t, i))
        if a is None and b is None:
            break
        if a and b and a.get(key) and b.get(key) is not None:
            q.append(round(b[key] / a[key], 3))
    return q, (sorted(q)[len(q) // 2] if q else None)

rows = []
for fig, p, t, key in figures:
    a, b = r.get(p, {}).get(key), r.get(t, {}).get(key)
    if a is None and b is None:
        continue
    per_round, paired_median = paired(p, t, key)
    row = {
        "figure": fig,
        "plaintext": a,
        "tls": b,
        "tls_over_plaintext": round(b / a, 3) if a and b else None,
        "paired_ratios": per_round,
        "paired_ratio_median": paired_median,
        "rounds_plaintext": r.get(p, {}).get("rounds_" + key),
        "rounds_tls": r.get(t, {}).get("rounds_" + key),
        "server_cpu_us_plaintext": per_request_us(p, key),
        "server_cpu_us_tls": per_request_us(t, key),
        "client_cpu_s_plaintext": r.get(p, {}).get("client_cpu_s"),
        "client_cpu_s_tls": r.get(t, {}).get("client_cpu_s"),
    }
    rows.append(row)
    print(json.dumps(row))

def ratio_of(fig, key):
    return next((x[key] for x in rows if x["figure"] == fig), None)

checks = [("redis-benchmark", "delayq ADD, redis-benchmark (adds/s)",
           "Redis SET, redis-benchmark (sets/s)"),
          ("delayq-bench put", "delayq ADD, delayq-bench put (adds/s)",
           "Redis SET, delayq-bench put (sets/s)")]
for client, dq, rd in checks:
    for key in ("tls_over_plaintext", "paired_ratio_median"):
        a, b = ratio_of(dq, key), ratio_of(rd, key)
        if a is not None and b is not None:
            print(json.dumps({"check": "TLS costs delayq no more than Redis (%s)" % client,
                              "ratio": key, "delayq_ratio": a, "redis_ratio": b,
                              "met": a >= b}))
print(json.dumps({"load_average_at_end": sys.argv[2]}))
print()
print("| figure | plaintext | TLS | TLS / plaintext (medians) | per round, median"
      " | server CPU µs per request, plaintext → TLS |")
print("| --- | --- | --- | --- | --- | --- |")
for x in rows:
    print("| %s | %s | %s | %s | %s, %s | %s → %s |" % (
        x["figure"], x["plaintext"], x["tls"], x["tls_over_plaintext"],
        " ".join(str(q) for q in x["paired_ratios"]), x["paired_ratio_median"],
        x["server_cpu_us_plaintext"], x["server_cpu_us_tls"]))
EOF
log "raw output: $OUT"
