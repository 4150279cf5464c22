#!/usr/bin/python3
"""Redis CPU (or instructions) per job of each Redis-store script, inside Redis.

Starts its own redis-server (no persistence) on a free loopback port, loads
the scripts from src/redis_store/scripts/ as the server does (lib.lua spliced in, via
tests/redis/script_harness.py), and runs ROUNDS rounds of: add BATCH jobs (due
at once, 100-byte bodies, one topic), reserve them all in one call, finish
them all in one call, while IN_FLIGHT jobs of another topic stay reserved
and 200 ready jobs of a worse priority wait behind the rounds' (as on a
loaded server: see --in-flight). Each script's time is Redis's own account of
it (INFO commandstats, usec of evalsha) around each call, so neither the
client nor the network is in the figures. Prints one JSON object:

    {"batch": 128, "rounds": 200, "in_flight": 800, "add_us_per_job": ..., "reserve_us_per_job": ...,
     "finish_us_per_job": ..., "lifecycle_us": ...}

    /usr/bin/python3 bench/redis_scripts.py [--batch 128] [--rounds 200] [--body 100]
                                            [--in-flight 800] [--instructions]

--instructions counts the instructions redis-server executes instead (valgrind's
callgrind, counting only while a script of the kind measured runs; one
redis-server per script, 3 rounds of warm-up): "add_ir_per_job" and so on. On
a machine whose speed drifts by tens of percent between runs, this count moves
by a few percent, so it shows what a change to a script saves. It runs ~50x
slower: use --rounds 20. (Instructions are not time: a cache miss costs more
than an instruction; bench/redis.sh gives the time.)

Use it to see what a change to a script costs or saves per job before running
bench/redis.sh, whose figures also carry the server, the network and BullMQ.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import tempfile
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests',
                                'redis'))
import redis  # noqa: E402

import script_harness as h  # noqa: E402

SCRIPTS = ('add', 'reserve', 'finish')
WARMUP_ROUNDS = 3  # --instructions: rounds run before counting starts


def prepare(o, r):
    """The bucket, loaded as on a loaded server; returns (bucket, now, body)."""
    scripts = h.load_scripts()
    shas = {name: r.script_load(text) for name, text in scripts.items()}
    bucket = h.Bucket(r, 'bench', 0, scripts, shas)
    now = int(time.time() * 1000)
    bucket.init(now, 1)
    body = b'x' * o.body
    # As on a loaded server (bench/redis.sh keeps 50 x 16 lifecycles in
    # flight): the pool and the reserved set are big enough for Redis's
    # hash table and skiplist encodings (a set of at most 128 entries is
    # a listpack, whose every insert is a linear scan). The ready set keeps
    # 200 jobs of a worse priority behind the rounds'.
    for k in range(0, o.in_flight, 1000):
        n = min(1000, o.in_flight - k)
        bucket.add(now, *[h.Bucket.job('held%d' % (k + i), 'held', now, ttr=3600000,
                                       body=body) for i in range(n)])
        bucket.reserve(now, ['held'], n)
    if o.in_flight:
        bucket.add(now, *[h.Bucket.job('behind%d' % i, 'orders', now, priority=2**31,
                                       body=body) for i in range(200)])
    return bucket, now, body


def run_rounds(o, bucket, now, body, rounds, around):
    """Runs the rounds; around(name, call) runs one script call and returns its result."""
    for k in range(rounds):
        jobs = [h.Bucket.job('j%d.%d' % (k, i), 'orders', now, body=body)
                for i in range(o.batch)]
        around('add', lambda: bucket.add(now, *jobs))
        got = around('reserve', lambda: bucket.reserve(now, ['orders'], o.batch))
        if len(got) != o.batch:
            raise SystemExit('reserve handed out %d of %d jobs' % (len(got), o.batch))
        status = around('finish',
                        lambda: bucket.finish(now, *[(d['id'], d['receipt']) for d in got]))
        if status != ['ok'] * o.batch:
            raise SystemExit('finish answered %r' % (status[:3],))


def measure_time(o):
    server = h.RedisServer()
    try:
        r = redis.Redis(host='127.0.0.1', port=server.port, socket_timeout=30)
        bucket, now, body = prepare(o, r)
        spent = dict.fromkeys(SCRIPTS, 0)

        def usec():
            return r.info('commandstats')['cmdstat_evalsha']['usec']

        def around(name, call):
            u0 = usec()
            result = call()
            spent[name] += usec() - u0
            return result

        run_rounds(o, bucket, now, body, o.rounds, around)
    finally:
        server.stop()
    jobs = o.batch * o.rounds
    out = {name + '_us_per_job': round(us / jobs, 2) for name, us in spent.items()}
    out['lifecycle_us'] = round(sum(spent.values()) / jobs, 2)
    return out


def measure_instructions(o):
    for tool in ('valgrind', 'callgrind_control'):
        if shutil.which(tool) is None:
            raise SystemExit('--instructions needs %s (apt-get install valgrind)' % tool)
    out = {}
    for target in SCRIPTS:
        counts = os.path.join(tempfile.mkdtemp(prefix='delayq-callgrind-'), 'callgrind.out')
        server = h.RedisServer(wrap=('valgrind', '--tool=callgrind', '--instr-atstart=no',
                                     '--callgrind-out-file=' + counts))
        try:
            r = redis.Redis(host='127.0.0.1', port=server.port, socket_timeout=300)
            bucket, now, body = prepare(o, r)
            run_rounds(o, bucket, now, body, WARMUP_ROUNDS, lambda name, call: call())

            def instrument(state):
                subprocess.run(['callgrind_control', '-i', state, str(server.proc.pid)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               check=True)

            def around(name, call):
                if name != target:
                    return call()
                instrument('on')
                try:
                    return call()
                finally:
                    instrument('off')

            run_rounds(o, bucket, now, body, o.rounds, around)
        finally:
            server.stop()  # valgrind writes its counts as redis-server exits
        with open(counts, encoding='utf-8') as f:
            total = int(re.search(r'^totals: (\d+)', f.read(), re.M).group(1))
        shutil.rmtree(os.path.dirname(counts), ignore_errors=True)
        out[target + '_ir_per_job'] = round(total / (o.batch * o.rounds))
    out['lifecycle_ir'] = sum(out.values())
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--batch', type=int, default=128, help='jobs per call (1..1000)')
    p.add_argument('--rounds', type=int, default=200)
    p.add_argument('--body', type=int, default=100, help='body bytes')
    p.add_argument('--in-flight', type=int, default=800,
                   help='jobs of another topic reserved before the rounds and left reserved')
    p.add_argument('--instructions', action='store_true',
                   help='count instructions (valgrind callgrind) instead of time')
    o = p.parse_args()
    if not 1 <= o.batch <= 1000 or o.rounds < 1 or o.body < 0 or o.in_flight < 0:
        p.error('--batch 1..1000, --rounds >= 1, --body >= 0, --in-flight >= 0')
    out = {'batch': o.batch, 'rounds': o.rounds, 'in_flight': o.in_flight, 'body_bytes': o.body}
    out.update(measure_instructions(o) if o.instructions else measure_time(o))
    print(json.dumps(out))


if __name__ == '__main__':
    main()
