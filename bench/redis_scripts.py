#!/usr/bin/python3
"""Redis CPU per job of each Redis-store script, measured inside Redis.

Starts its own redis-server (no persistence) on a free loopback port, loads
the scripts from src/redis/scripts/ as the server does (lib.lua spliced in, via
tests/redis/script_harness.py), and runs ROUNDS rounds of: add BATCH jobs (due
at once, 100-byte bodies, one topic), reserve them all in one call, finish
them all in one call, while IN_FLIGHT jobs of another topic stay reserved
and 200 ready jobs of a worse priority wait behind the rounds' (as on a
loaded server: see --in-flight). Each script's time is Redis's own account of it
(INFO commandstats, usec of evalsha) around each call, so neither the client
nor the network is in the figures. Prints one JSON object:

    {"batch": 128, "rounds": 200, "in_flight": 800, "add_us_per_job": ..., "reserve_us_per_job": ...,
     "finish_us_per_job": ..., "lifecycle_us": ...}

    /usr/bin/python3 bench/redis_scripts.py [--batch 128] [--rounds 200] [--body 100]
                                            [--in-flight 800]

Use it to see what a change to a script costs or saves per job before running
bench/redis.sh, whose figures also carry the server, the network and BullMQ.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests',
                                'redis'))
import redis  # noqa: E402

import script_harness as h  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--batch', type=int, default=128, help='jobs per call (1..1000)')
    p.add_argument('--rounds', type=int, default=200)
    p.add_argument('--body', type=int, default=100, help='body bytes')
    p.add_argument('--in-flight', type=int, default=800,
                   help='jobs of another topic reserved before the rounds and left reserved')
    o = p.parse_args()
    if not 1 <= o.batch <= 1000 or o.rounds < 1 or o.body < 0 or o.in_flight < 0:
        p.error('--batch 1..1000, --rounds >= 1, --body >= 0, --in-flight >= 0')

    server = h.RedisServer()
    try:
        r = redis.Redis(host='127.0.0.1', port=server.port, socket_timeout=30)
        scripts = h.load_scripts()
        shas = {name: r.script_load(text) for name, text in scripts.items()}
        bucket = h.Bucket(r, 'bench', 0, scripts, shas)
        now = int(time.time() * 1000)
        bucket.init(now, 1)
        body = b'x' * o.body
        # As on a loaded server (bench/redis.sh keeps 50 x 16 lifecycles in
        # flight): the pool and the reserved set are big enough for Redis's
        # hash table and skiplist encodings (a set of at most 128 entries is
        # a listpack, whose every insert is a linear scan).
        # The ready set keeps 200 jobs of a worse priority behind the rounds'.
        for k in range(0, o.in_flight, 1000):
            n = min(1000, o.in_flight - k)
            bucket.add(now, *[h.Bucket.job('held%d' % (k + i), 'held', now, ttr=3600000,
                                           body=body) for i in range(n)])
            bucket.reserve(now, ['held'], n)
        if o.in_flight:
            bucket.add(now, *[h.Bucket.job('behind%d' % i, 'orders', now, priority=2**31,
                                           body=body) for i in range(200)])

        def usec():
            return r.info('commandstats')['cmdstat_evalsha']['usec']

        spent = {'add': 0, 'reserve': 0, 'finish': 0}
        for k in range(o.rounds):
            jobs = [h.Bucket.job('j%d.%d' % (k, i), 'orders', now, body=body)
                    for i in range(o.batch)]
            u0 = usec()
            bucket.add(now, *jobs)
            u1 = usec()
            got = bucket.reserve(now, ['orders'], o.batch)
            u2 = usec()
            if len(got) != o.batch:
                raise SystemExit('reserve handed out %d of %d jobs' % (len(got), o.batch))
            status = bucket.finish(now, *[(d['id'], d['receipt']) for d in got])
            u3 = usec()
            if status != ['ok'] * o.batch:
                raise SystemExit('finish answered %r' % (status[:3],))
            spent['add'] += u1 - u0
            spent['reserve'] += u2 - u1
            spent['finish'] += u3 - u2
        jobs = o.batch * o.rounds
        out = {'batch': o.batch, 'rounds': o.rounds, 'in_flight': o.in_flight,
               'body_bytes': o.body}
        for name, us in spent.items():
            out[name + '_us_per_job'] = round(us / jobs, 2)
        out['lifecycle_us'] = round(sum(spent.values()) / jobs, 2)
        print(json.dumps(out))
    finally:
        server.stop()


if __name__ == '__main__':
    main()
