#!/usr/bin/env python3
"""Schedules (periodic jobs) black-box: the real `delayq serve`, real time.
What only real processes can show: a server restarted (gracefully, and killed)
in the middle of a schedule that fires every second loses no fire time and
adds none twice; two servers on one Redis, each running every schedule with
no leader, add each fire time exactly once; every firing is delivered never
before its fire time. The firing rules on a manual clock are in
tests/schedule/scheduler_test.cc.

    /usr/bin/python3 tests/integration/schedule_test.py --binary build/bin/delayq
"""
import http.client
import json
import subprocess
import threading
import time
import unittest
import urllib.parse

import harness
from harness import Server, wait_until
from redis_server_test import RedisProcess


def call(server, method, path, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=30)
    try:
        data = None if body is None else json.dumps(body).encode()
        conn.request(method, path, body=data)
        resp = conn.getresponse()
        raw = resp.read()
        return resp.status, (json.loads(raw) if raw else None)
    finally:
        conn.close()


def put_schedule(server, name, **fields):
    status, body = call(server, "PUT", "/v1/schedules/" + name, fields)
    assert status in (200, 201), (status, body)
    return body


class Consumer:
    """Reserves and finishes the jobs of `topic` from each server in turn,
    recording (id, run_at_ms, wall ms when received)."""

    def __init__(self, servers, topic):
        self.servers = list(servers)
        self.topic = topic
        self.got = []
        self.lock = threading.Lock()
        self.stopping = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        i = 0
        while not self.stopping:
            server = self.servers[i % len(self.servers)]
            i += 1
            try:
                status, body = call(server, "POST", "/v1/reserve",
                                    {"topics": [self.topic], "wait_ms": 200, "count": 100})
            except OSError:
                time.sleep(0.05)  # that server is restarting: try the next
                continue
            if status != 200:
                time.sleep(0.05)
                continue
            now_ms = int(time.time() * 1000)
            for job in body["jobs"]:
                with self.lock:
                    self.got.append((job["id"], job["run_at_ms"], now_ms, job["attempts"]))
                try:
                    call(server, "POST",
                         "/v1/jobs/%s/finish" % urllib.parse.quote(job["id"], safe=""),
                         {"receipt": job["receipt"]})
                except OSError:
                    pass  # its TTR brings it back, as a second attempt

    def stop(self):
        self.stopping = True
        self.thread.join(timeout=10)

    def ids(self):
        """The jobs delivered, each once (a job given again after a crash, its
        attempt 2, is the same firing)."""
        with self.lock:
            return list(dict.fromkeys(g[0] for g in self.got))

    def first_attempts(self):
        """Ids of first deliveries: a fire time added twice shows up twice here."""
        with self.lock:
            return [g[0] for g in self.got if g[3] == 1]

    def deliveries(self):
        with self.lock:
            return list(self.got)


def fire_times(ids, name):
    prefix = name + "@"
    return sorted(int(i[len(prefix):]) for i in ids if i.startswith(prefix))


class ScheduleTest(unittest.TestCase):
    def check_every_second(self, consumer, name, since_ms, until_ms):
        """Each whole second in [since, until] fired once, and not early."""
        firsts = fire_times(consumer.first_attempts(), name)
        self.assertEqual(len(firsts), len(set(firsts)), "a fire time was added twice")
        times = fire_times(consumer.ids(), name)
        want = list(range(since_ms, until_ms + 1, 1000))
        have = [t for t in times if since_ms <= t <= until_ms]
        self.assertEqual(have, want)
        for job_id, run_at, received, _ in consumer.deliveries():
            self.assertEqual(run_at, int(job_id.split("@")[1]))
            self.assertGreaterEqual(received, run_at, "delivered before its fire time")

    def test_restarts_mid_schedule_lose_and_duplicate_nothing(self):
        server = Server("--fsync", "always")
        data_dir = server.data_dir
        self.addCleanup(lambda: server.stop())
        put_schedule(server, "beat", cron="* * * * * *", topic="beats", catchup="all",
                     catchup_window_ms=600000)
        consumer = Consumer([server], "beats")
        self.addCleanup(consumer.stop)
        wait_until(lambda: len(consumer.ids()) >= 3, timeout=15, what="three firings")
        first = fire_times(consumer.ids(), "beat")[0]
        # A graceful restart, then a crash, each with the schedule due meanwhile.
        for how in ("stop", "kill"):
            getattr(server, how)(keep_data=True)
            down_at = time.time()
            # Two of the schedule's fire times pass while no server runs.
            wait_until(lambda: time.time() >= down_at + 2.0, timeout=5, what="two seconds down")
            server = Server("--data-dir", data_dir, "--fsync", "always", data_dir=None)
            consumer.servers = [server]
            seen = len(consumer.ids())
            wait_until(lambda: len(consumer.ids()) >= seen + 4, timeout=15,
                       what="firings after the restart")
        _, body = call(server, "GET", "/v1/schedules/beat")
        last = body["last_fire_at_ms"]
        wait_until(lambda: fire_times(consumer.ids(), "beat")[-1] >= last, timeout=10,
                   what="the last firing delivered")
        consumer.stop()
        self.check_every_second(consumer, "beat", first, last)
        self.assertEqual(body["skipped"], 0)
        server.stop()

    def test_two_servers_on_one_redis_add_each_fire_time_once(self):
        redis = RedisProcess()
        self.addCleanup(redis.stop)
        servers = [Server("--store", "redis", "--redis", redis.url) for _ in range(2)]
        for s in servers:
            self.addCleanup(s.stop)
        names = ["s%d" % i for i in range(5)]
        for i, name in enumerate(names):
            put_schedule(servers[i % 2], name, cron="* * * * * *", topic="shared")
        consumer = Consumer(servers, "shared")
        self.addCleanup(consumer.stop)
        start = int(time.time() * 1000)
        wait_until(lambda: all(len(fire_times(consumer.ids(), n)) >= 6 for n in names),
                   timeout=30, what="six firings of every schedule")
        consumer.stop()
        for name in names:
            times = fire_times(consumer.ids(), name)
            # The first firing is the first whole second after the put; from
            # there on, every second once.
            self.check_every_second(consumer, name, times[0], times[-1])
            self.assertGreater(times[0], start - 2000)
        for s in servers:
            st = s.stats()
            self.assertIn("schedule_firings", st)
        total = sum(s.stats()["schedule_firings"] for s in servers)
        # Each server added some firings (no leader), none twice in all.
        _, listing = call(servers[0], "GET", "/v1/schedules")
        self.assertEqual(sorted(x["name"] for x in listing["schedules"]), names)
        self.assertEqual(total, sum(x["firings"] for x in listing["schedules"]))

    def test_the_cli_manages_a_schedule(self):
        server = Server("--store", "memory")
        self.addCleanup(server.stop)
        env = {"DELAYQ_SERVER": server.address}

        def cli(*args):
            return subprocess.run([harness.BINARY, *args], capture_output=True, text=True,
                                  env=harness.server_env(env), timeout=30)

        r = cli("schedule", "set", "nightly", "--cron", "0 23 * * *", "--topic", "books.close",
                "--timezone", "Europe/Berlin")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = cli("schedule", "get", "nightly")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("Europe/Berlin", r.stdout)
        _, body = call(server, "GET", "/v1/schedules/nightly")
        self.assertGreater(body["next_fire_at_ms"], int(time.time() * 1000))
        job_id = "nightly@%d" % body["next_fire_at_ms"]
        status, job = call(server, "GET", "/v1/jobs/" + urllib.parse.quote(job_id, safe=""))
        self.assertEqual(status, 200, job)
        self.assertEqual(job["state"], "delayed")
        r = cli("schedule", "pause", "nightly")
        self.assertEqual(r.returncode, 0, r.stderr)
        wait_until(lambda: call(server, "GET", "/v1/jobs/" +
                                urllib.parse.quote(job_id, safe=""))[0] == 404,
                   timeout=10, what="the firing ahead withdrawn")
        r = cli("schedule", "set", "bad", "--cron", "0 25 * * *", "--topic", "t")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("hour", r.stderr)
        r = cli("schedule", "delete", "nightly")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = cli("schedule", "list")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("nightly", r.stdout)


if __name__ == "__main__":
    harness.main()
