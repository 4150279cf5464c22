#!/usr/bin/env python3
"""Black-box tests of several `delayq serve --store redis` processes sharing real
`redis-server` processes (issue 5, "Tests"), over RESP with redis-py.

Every test starts its own redis-server on a free loopback port in a temporary
directory (`--save ""`; `--appendonly yes --appendfsync always` where Redis is
restarted), waits for PING with a deadline, starts its delayq servers on ports the
kernel picks (harness.Server), and stops everything it started by PID (SIGTERM,
then SIGKILL after a deadline) in cleanups that run even when the test fails.
Nothing sleeps to wait for something: waits poll with a deadline, long-polls are
bounded by their own timeouts, and the only sleeps are poll intervals and the
pause between retries of a client whose server said `unavailable`. (RedisProcess,
the Load of producers and consumers and its checks: redis_support.py, shared
with redis_failover_test.py.)

- test_two_then_three_servers_under_concurrent_load: 4 producers and 6
  consumers over 2, then 3 servers: every acknowledged add delivered, none twice
  within its TTR, none before its run_at, every finish OK, 0 jobs left.
- test_add_through_one_server_wakes_a_reserve_waiting_on_another (due now and
  delayed), test_ttr_running_out_hands_the_job_out_again_through_another_server,
- test_sigkill_of_one_server_mid_load_loses_nothing,
- test_redis_restart_mid_load_gives_unavailable_then_serves_again,
- test_bad_redis_url_and_unreachable_redis_at_start,
- test_two_prefixes_on_one_redis_do_not_see_each_other,
- PipeliningTest: pipelined commands share the store's rounds and reply in
  order; a RESERVE sees the changes before it, what follows a waiting
  RESERVE waits for it; replies owed are written before QUIT closes; a call
  waiting on Redis (Redis paused with CLIENT PAUSE) holds up no other
  connection, RESP or HTTP; the seed's POST /command and /metrics.

    /usr/bin/python3 tests/integration/redis_server_test.py --binary build/bin/delayq [-v]

DELAYQ_ITR_SEED=n replays the random choices of a run (thread interleaving
still differs).
"""
import http.client
import json
import os
import shutil
import signal
import socket
import struct
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree

import redis  # noqa: E402

import harness  # noqa: E402
from harness import recv_all, run_serve, wait_until  # noqa: E402
# RedisProcess: push_test.py and schedule_test.py take it from here too.
from redis_support import (SEED, SHORT_TTR, Load, RedisProcess,  # noqa: E402,F401
                           RedisServerTestCase, client, free_port, now_ms, pairs, stats)

# --- the tests ------------------------------------------------------------------------


class DataDirTest(RedisServerTestCase):
    def test_a_data_dir_given_is_said_not_to_be_used(self):
        """The jobs are in Redis: a --data-dir given is said at start to be
        unused (with the URL, its password hidden), and nothing is made there."""
        rp = self.start_redis()
        d = tempfile.mkdtemp(prefix="delayq-unused-")
        self.addCleanup(shutil.rmtree, d, True)
        s = self.start_delayq(rp, "dd", "--data-dir", d)
        self.assertIn(f"warn  --data-dir {d} is not used by --store redis: the jobs are in Redis "
                      f"at {rp.url}", s.text)
        self.assertEqual(os.listdir(d), [])


class ManyServersTest(RedisServerTestCase):

    def run_load(self, tag, servers, jobs):
        load = Load(tag, servers, jobs)
        load.start()
        try:
            load.join_producers(timeout=60)
            wait_until(load.all_delivered_and_settled, timeout=30,
                       what=f"{tag}: every acknowledged add delivered and finished")
        finally:
            self.assertTrue(load.stop(), "load threads did not stop")
        self.assertAlive(*servers)
        load.verify(self, servers[0], strict=True)
        return load

    def test_two_then_three_servers_under_concurrent_load(self):
        rp = self.start_redis()
        servers = [self.start_delayq(rp, "load") for _ in range(2)]
        self.run_load("two", servers, 1200)
        servers.append(self.start_delayq(rp, "load"))
        load = self.run_load("three", servers, 1500)
        # Each server took part, and each sees the same, empty store.
        self.assertTrue(all(load.adds_by_port.values()), load.adds_by_port)
        self.assertTrue(all(load.reserves_by_port.values()), load.reserves_by_port)
        for s in servers:
            st = stats(s)
            self.assertEqual((st["jobs"], st["delayed"], st["ready"], st["reserved"],
                              st["buried"]), (0, 0, 0, 0, 0), st)
            self.assertEqual(st["added"], 2700, st)      # counters live in Redis
            self.assertEqual(st["finished"], 2700, st)
            self.assertEqual(st["timed_out"], 0, st)

    def test_add_through_one_server_wakes_a_reserve_waiting_on_another(self):
        rp = self.start_redis()
        a = self.start_delayq(rp, "wake")
        b = self.start_delayq(rp, "wake")
        ra, rb = client(a), client(b, socket_timeout=15)
        self.addCleanup(ra.close)
        self.addCleanup(rb.close)
        for job_id, delay in (("wake-now", 0), ("wake-later", 300)):
            got = {}

            def wait():
                got["jobs"] = rb.execute_command("RESERVE", "TIMEOUT", 10000, "FROM", "wake.t")
                got["at"] = now_ms()

            t = threading.Thread(target=wait)
            t.start()
            wait_until(lambda: stats(b, "wake.t")["waiting"] == 1, timeout=5,
                       what="the reserve to wait on B")
            t_add = now_ms()
            self.assertEqual(ra.execute_command("ADD", "wake.t", job_id, delay, 30000, "hi"),
                             job_id.encode())
            run_at = int(pairs(ra.execute_command("GET", job_id))["run_at_ms"])
            t.join(timeout=12)
            self.assertFalse(t.is_alive())
            self.assertIsNotNone(got["jobs"], f"{job_id}: B's reserve timed out empty")
            self.assertEqual(got["jobs"][0][0], job_id.encode())
            self.assertGreaterEqual(got["at"], run_at, f"{job_id}: delivered early")
            # Well before the 10 s timeout: woken by A's announcement, not a poll.
            late = got["at"] - max(run_at, t_add)
            print(f"\n  {job_id}: handed out through B {late:.1f} ms after it was due "
                  f"(added through A)", file=sys.stderr)
            self.assertLess(late, 2000, job_id)
            self.assertEqual(ra.execute_command("FINISH", job_id, got["jobs"][0][3]), b"OK")

    def test_ttr_running_out_hands_the_job_out_again_through_another_server(self):
        rp = self.start_redis()
        a = self.start_delayq(rp, "ttr")
        b = self.start_delayq(rp, "ttr")
        ra, rb = client(a), client(b)
        self.addCleanup(ra.close)
        self.addCleanup(rb.close)
        ra.execute_command("ADD", "ttr.t", "ttr-1", 0, 300, "work")
        t0 = now_ms()
        (job1,) = ra.execute_command("RESERVE", "FROM", "ttr.t")
        t1 = now_ms()
        self.assertEqual((job1[0], job1[4]), (b"ttr-1", 1))
        receipt1 = job1[3]
        again = rb.execute_command("RESERVE", "FROM", "ttr.t")
        if now_ms() < t0 + 300:  # (only meaningful while the TTR surely runs)
            self.assertIsNone(again, "handed out again while its TTR ran")
        jobs = rb.execute_command("RESERVE", "TIMEOUT", 5000, "FROM", "ttr.t")
        t2 = now_ms()
        self.assertIsNotNone(jobs, "B never handed the job out again")
        (job2,) = jobs
        self.assertEqual((job2[0], job2[4]), (b"ttr-1", 2))
        receipt2 = job2[3]
        self.assertNotEqual(receipt1, receipt2)
        self.assertGreaterEqual(t2, t0 + 300, "handed out again before the TTR ran out")
        print(f"\n  ttr-1: handed out again through B {t2 - t1 - 300:.0f} ms after "
              f"A's 300 ms TTR ran out", file=sys.stderr)
        self.assertLess(t2 - t1, 3000)
        for r in (ra, rb):
            with self.assertRaisesRegex(redis.ResponseError, "^STALE"):
                r.execute_command("FINISH", "ttr-1", receipt1)
        info = pairs(ra.execute_command("GET", "ttr-1"))
        self.assertEqual((info["state"], info["receipt"], info["attempts"]),
                         (b"reserved", receipt2, b"2"))
        self.assertIn(b"ttr of 300 ms ran out", info["last_error"])
        self.assertEqual(ra.execute_command("FINISH", "ttr-1", receipt2), b"OK")
        self.assertIsNone(rb.execute_command("GET", "ttr-1"))
        self.assertEqual(stats(b)["jobs"], 0)


class PipeliningTest(RedisServerTestCase):
    """One connection keeps many commands in the store's rounds at once, and
    its replies still come in order (FrontEnd, "Pipelining")."""

    def script_calls(self, rp):
        r = redis.Redis(host="127.0.0.1", port=rp.port, socket_timeout=5)
        try:
            stats = r.info("commandstats")
            return sum(stats.get(k, {}).get("calls", 0) for k in ("cmdstat_evalsha", "cmdstat_eval"))
        finally:
            r.close()

    def test_pipelined_commands_share_rounds_and_reply_in_order(self):
        rp = self.start_redis()
        s = self.start_delayq(rp, "pipe", "--redis-buckets", "4")
        r = client(s)
        self.addCleanup(r.close)
        n = 300
        before = self.script_calls(rp)
        pipe = r.pipeline(transaction=False)
        for i in range(n):
            pipe.execute_command("ADD", "pipe.t", f"p{i}", 0, 30000, f"body {i}")
        self.assertEqual(pipe.execute(), [f"p{i}".encode() for i in range(n)])
        adds = self.script_calls(rp) - before
        # Parked one by one, each add would be a round of its own (n calls).
        # Kept in flight together they share a few rounds of <= 4 calls.
        self.assertLess(adds, n / 5, f"{adds} script calls for {n} pipelined adds")

        before = self.script_calls(rp)
        pipe = r.pipeline(transaction=False)
        for _ in range(n):
            pipe.execute_command("RESERVE", "TIMEOUT", 1000, "FROM", "pipe.t")
        got = pipe.execute()
        reserves = self.script_calls(rp) - before
        self.assertEqual(sorted(j[0][0] for j in got), sorted(f"p{i}".encode() for i in range(n)))
        self.assertLess(reserves, n / 5, f"{reserves} script calls for {n} pipelined reserves")
        # Best first: all priorities and run_ats are equal, so in order of adding.
        self.assertEqual([j[0][0] for j in got], [f"p{i}".encode() for i in range(n)])

        pipe = r.pipeline(transaction=False)
        for j in got:
            pipe.execute_command("FINISH", j[0][0], j[0][3])
        pipe.execute_command("GET", "p0")
        replies = pipe.execute()
        self.assertEqual(replies[:n], [b"OK"] * n)
        self.assertIsNone(replies[n])  # the GET ran after the finishes
        self.assertEqual(stats(s)["jobs"], 0)

    def test_a_reserve_sees_the_changes_pipelined_before_it(self):
        rp = self.start_redis()
        s = self.start_delayq(rp, "pipe")
        r = client(s)
        self.addCleanup(r.close)
        pipe = r.pipeline(transaction=False)
        for i in range(20):
            pipe.execute_command("ADD", "before.t", f"b{i}", 0, 30000, f"b{i}")
        pipe.execute_command("RESERVE", "TIMEOUT", 0, "COUNT", 100, "FROM", "before.t")
        replies = pipe.execute()
        self.assertEqual(sorted(j[0] for j in replies[20]), sorted(f"b{i}".encode() for i in range(20)))

    def test_what_follows_a_waiting_reserve_waits_for_it(self):
        rp = self.start_redis()
        s = self.start_delayq(rp, "pipe")
        r = client(s)
        self.addCleanup(r.close)
        # As with BLPOP: the ADD behind the RESERVE runs only once the
        # reserve has answered (empty, after its wait), so it cannot take it.
        pipe = r.pipeline(transaction=False)
        pipe.execute_command("RESERVE", "TIMEOUT", 300, "FROM", "hold.t")
        pipe.execute_command("ADD", "hold.t", "h1", 0, 30000, "h1")
        pipe.execute_command("GET", "h1")
        pipe.execute_command("QUIT")
        started = time.monotonic()
        reserved, added, info, quit_reply = pipe.execute()
        self.assertGreaterEqual(time.monotonic() - started, 0.29)
        self.assertIsNone(reserved)
        self.assertEqual(added, b"h1")
        self.assertEqual(pairs(info)["state"], b"ready")
        self.assertTrue(quit_reply)

    def test_a_call_waiting_on_redis_does_not_hold_up_other_connections(self):
        rp = self.start_redis()
        s = self.start_delayq(rp, "slow")
        a, b = client(s), client(s)
        self.addCleanup(a.close)
        self.addCleanup(b.close)
        a.execute_command("ADD", "slow.t", "s1", 0, 30000, "x")
        self.assertEqual(b.execute_command("PING"), True)
        admin = redis.Redis(host="127.0.0.1", port=rp.port, socket_timeout=5)
        self.addCleanup(admin.close)
        # Redis answers nothing for 2.5 s: far longer than any PING may take
        # below, so a loaded machine's stalls cannot pass for waiting on it
        # (and less than the server's 3 s command timeout).
        admin.execute_command("CLIENT", "PAUSE", 2500, "ALL")
        got = {}
        started = time.monotonic()
        t = threading.Thread(target=lambda: got.setdefault("job", a.execute_command("GET", "s1")))
        t.start()
        # Meanwhile another connection is served at once: the server's loop does
        # not wait for Redis on A's behalf (GET, STATS, PEEK, ... answer later).
        slowest = 0.0
        while time.monotonic() - started < 0.5:
            t0 = time.monotonic()
            self.assertEqual(b.execute_command("PING"), True)
            slowest = max(slowest, time.monotonic() - t0)
        t.join(timeout=10)
        self.assertLess(slowest, 1.0, "a PING waited for A's GET")
        self.assertGreater(time.monotonic() - started, 0.5)
        self.assertEqual(pairs(got["job"])["body"], b"x")

        # The same over HTTP: a read waiting on Redis holds up neither the
        # HTTP front end's other connections nor the RESP ones.
        admin.execute_command("CLIENT", "PAUSE", 2500, "ALL")
        got = {}

        def http_get(path):
            conn = http.client.HTTPConnection("127.0.0.1", s.http_port, timeout=10)
            try:
                conn.request("GET", path)
                resp = conn.getresponse()
                return resp.status, resp.read()
            finally:
                conn.close()

        started = time.monotonic()
        t = threading.Thread(target=lambda: got.setdefault("job", http_get("/v1/jobs/s1")))
        t.start()
        slowest = 0.0
        while time.monotonic() - started < 0.5:
            t0 = time.monotonic()
            self.assertEqual(http_get("/healthz")[0], 200)
            self.assertEqual(b.execute_command("PING"), True)
            slowest = max(slowest, time.monotonic() - t0)
        t.join(timeout=10)
        self.assertLess(slowest, 1.0, "a request waited for another's GET /v1/jobs")
        status, body = got["job"]
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["body"], "x")
        # A HEAD answered later is still a HEAD: headers, no body.
        conn = http.client.HTTPConnection("127.0.0.1", s.http_port, timeout=10)
        self.addCleanup(conn.close)
        conn.request("HEAD", "/v1/jobs/s1")
        resp = conn.getresponse()
        self.assertEqual((resp.status, resp.read()), (200, b""))
        self.assertGreater(int(resp.getheader("Content-Length")), 0)
        conn.request("GET", "/v1/jobs/s1")  # the same connection goes on
        self.assertEqual(json.loads(conn.getresponse().read())["body"], "x")

    def test_a_client_leaving_while_its_reserve_is_in_redis_holds_nobody_up(self):
        rp = self.start_redis()
        s = self.start_delayq(rp, "leave")
        b = client(s)
        self.addCleanup(b.close)
        b.execute_command("ADD", "leave.t", "l1", 0, 30000, "x")
        admin = redis.Redis(host="127.0.0.1", port=rp.port, socket_timeout=5)
        self.addCleanup(admin.close)
        # Scripts wait for 2.5 s (less than the server's 3 s command timeout);
        # CLIENT LIST still answers and shows them waiting.
        admin.execute_command("CLIENT", "PAUSE", 2500, "WRITE")
        paused_at = time.monotonic()
        sock = socket.create_connection(("127.0.0.1", s.port), timeout=10)
        # 20 long topic names besides leave.t make its script call stand out
        # among the waiting ones (a timer's promote is small): > 3,000 bytes of
        # arguments.
        topics = [b"leave.t"] + [b"leave.%03d.%s" % (i, b"x" * 140) for i in range(20)]
        argv = [b"RESERVE", b"TIMEOUT", b"5000", b"FROM"] + topics
        sock.sendall(b"*%d\r\n" % len(argv) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in argv))

        def reserve_in_redis():
            for line in admin.execute_command("CLIENT", "LIST").decode().splitlines():
                f = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
                if "b" in f.get("flags", "") and f.get("cmd") == "evalsha" \
                        and int(f.get("argv-mem", 0)) > 3000:
                    return True
            return False

        wait_until(reserve_in_redis, timeout=1.5, what="the reserve's script call waiting in Redis")
        # The client leaves while its reserve is inside a round: a reset, as
        # when a worker is killed (after a FIN the server would still write
        # the owed reply, as to a half-closed socket).
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
        # The loop does not wait for that round to learn what the reserve took.
        started = time.monotonic()
        slowest = 0.0
        while time.monotonic() - started < 0.4:
            t0 = time.monotonic()
            self.assertEqual(b.execute_command("PING"), True)
            slowest = max(slowest, time.monotonic() - t0)
        self.assertLess(slowest, 1.0, "a PING waited for the round of a client that left")
        self.assertLess(time.monotonic() - paused_at, 2.4, "the pause ended before the check")
        # Once Redis answers, the job the departed client's reserve took goes
        # back at once, not after its 30 s TTR, and that delivery nobody
        # received is not counted as an attempt.
        got = b.execute_command("RESERVE", "TIMEOUT", 8000, "FROM", "leave.t")
        self.assertIsNotNone(got, "the job did not come back")
        job_id, _, _, _, attempts, *_ = got[0]
        self.assertEqual((job_id, int(attempts)), (b"l1", 1))

    def test_the_seed_protocol_and_metrics_answer_later_too(self):
        rp = self.start_redis()
        s = self.start_delayq(rp, "seed")
        conn = http.client.HTTPConnection("127.0.0.1", s.http_port, timeout=10)
        self.addCleanup(conn.close)

        def post(cmd):
            conn.request("POST", "/command", body=json.dumps(cmd))
            resp = conn.getresponse()
            self.assertEqual(resp.status, 200)
            return json.loads(resp.read())

        self.assertEqual(post({"command": "add", "topic": "seed.t", "id": "o1", "delay": 0,
                               "TTR": 30, "body": "b1"})["id"], "o1")
        self.assertFalse(post({"command": "add", "topic": "seed.t", "id": "o1", "delay": 0,
                               "TTR": 30, "body": "b1"})["success"])  # exists
        popped = post({"command": "pop", "topic": "seed.t"})
        self.assertEqual((popped["id"], popped["value"]), ("o1", "b1"))
        self.assertEqual(post({"command": "finish", "id": "o1"}),
                         {"success": True, "error": None, "id": "o1", "value": None})
        done = post({"command": "delete", "id": "o1"})
        self.assertFalse(done["success"])
        self.assertIsNone(done["id"])
        post({"command": "add", "topic": "seed.m", "id": "m1", "delay": 60, "TTR": 30, "body": "m"})
        conn.request("GET", "/metrics")
        resp = conn.getresponse()
        text = resp.read().decode()
        self.assertEqual(resp.status, 200, text)
        self.assertIn('delayq_jobs{state="delayed"} 1', text)
        self.assertIn('delayq_topic_jobs{topic="seed.m",state="delayed"} 1', text)

    def test_the_redis_stores_own_figures_reach_stats_and_metrics(self):
        # The front ends see a store only through the serving interface: the
        # Redis store's dispatcher counts reach STATS and /metrics like the
        # embedded store's log figures do.
        rp = self.start_redis()
        s = self.start_delayq(rp, "figures")
        r = client(s, socket_timeout=10)
        self.addCleanup(r.close)
        for job_id in ("f1", "f2"):
            self.assertEqual(r.execute_command("ADD", "fig.t", job_id, 0, 30000, "b"),
                             job_id.encode())
        reply = r.execute_command("STATS")
        stats = {reply[i].decode(): reply[i + 1] for i in range(0, len(reply), 2)}
        for key in ("redis_rounds", "redis_commands", "redis_ops"):
            self.assertIn(key, stats)
        self.assertGreaterEqual(int(stats["redis_rounds"]), 2)
        self.assertGreaterEqual(int(stats["redis_ops"]), 2)
        conn = http.client.HTTPConnection("127.0.0.1", s.http_port, timeout=10)
        self.addCleanup(conn.close)
        conn.request("GET", "/metrics")
        resp = conn.getresponse()
        text = resp.read().decode()
        self.assertEqual(resp.status, 200, text)
        self.assertRegex(text, r"\ndelayq_store_redis_rounds [1-9][0-9]*\n")
        conn.request("GET", "/v1/stats")
        resp = conn.getresponse()
        body = json.loads(resp.read())
        self.assertGreaterEqual(body["redis_commands"], 2)

    def test_replies_still_owed_are_written_before_a_quit_closes(self):
        rp = self.start_redis()
        s = self.start_delayq(rp, "pipe")
        with socket.create_connection(("127.0.0.1", s.port), timeout=10) as sock:
            req = b""
            for i in range(50):
                body = b"q%d" % i
                req += b"*6\r\n$3\r\nADD\r\n$6\r\nquit.t\r\n$%d\r\n%s\r\n$1\r\n0\r\n" \
                       b"$5\r\n30000\r\n$%d\r\n%s\r\n" % (len(body), body, len(body), body)
            req += b"*1\r\n$4\r\nQUIT\r\n"
            sock.sendall(req)
            data = recv_all(sock)
        want = b"".join(b"$%d\r\nq%d\r\n" % (len(b"q%d" % i), i) for i in range(50)) + b"+OK\r\n"
        self.assertEqual(data, want)
        self.assertEqual(stats(s, "quit.t")["ready"], 50)


class FailureTest(RedisServerTestCase):

    def test_sigkill_of_one_server_mid_load_loses_nothing(self):
        rp = self.start_redis()
        servers = [self.start_delayq(rp, "kill") for _ in range(3)]
        victim, survivors = servers[0], servers[1:]
        load = Load("kill", servers, 2000, ttr=SHORT_TTR, allow_down=True)
        load.start()
        try:
            wait_until(lambda: load.acked_count >= 800 or load.errors, timeout=30,
                       what="800 acknowledged adds")
            self.assertEqual(self.kill_delayq(victim), -signal.SIGKILL)
            load.join_producers(timeout=60)
            # Everything, including what reserves lost with the victim held until
            # their TTR ran out, is handed out again by the survivors and finished.
            load.wait_drained(survivors[0], timeout=30)
        finally:
            self.assertTrue(load.stop(), "load threads did not stop")
        self.assertAlive(*survivors)
        # The threads that talked to the killed server saw it go, and only it.
        self.assertIn(victim.port, load.down)
        self.assertEqual(set(load.down), {victim.port})
        load.verify(self, survivors[0], strict=False)
        self.assertEqual(stats(survivors[1])["jobs"], 0)

    def test_redis_restart_mid_load_gives_unavailable_then_serves_again(self):
        rp = self.start_redis(aof=True)
        servers = [self.start_delayq(rp, "outage") for _ in range(2)]
        load = Load("outage", servers, 1500, ttr=SHORT_TTR, allow_unavailable=True)
        # A reserve parked on B before the outage, with a long timeout: it is
        # answered after Redis is back, when a job arrives through A (or, at
        # the latest, `unavailable` during the outage): never left hanging.
        parked = {}
        rb = client(servers[1], socket_timeout=25)
        self.addCleanup(rb.close)

        def park():
            try:
                parked["jobs"] = rb.execute_command("RESERVE", "TIMEOUT", 20000,
                                                    "FROM", "parked")
            except redis.ResponseError as e:
                parked["error"] = str(e)
            parked["at"] = time.monotonic()

        parker = threading.Thread(target=park, daemon=True)
        parker.start()
        wait_until(lambda: stats(servers[1], "parked")["waiting"] == 1, timeout=5,
                   what="the reserve to park on B")
        load.start()
        try:
            wait_until(lambda: load.acked_count >= 500 or load.errors, timeout=30,
                       what="500 acknowledged adds")
            self.assertEqual(rp.stop(), 0, rp.log()[-2000:])
            outage_started = time.monotonic()
            # Every kind of request is answered `unavailable`, promptly, by both.
            for s in servers:
                r = client(s)
                try:
                    for cmd in (("ADD", "probe", "probe-1", 0, 1000, "x"),
                                ("RESERVE", "TIMEOUT", 1000, "FROM", "probe"),
                                ("GET", "probe-1"), ("FINISH", "probe-1", "0" * 24),
                                ("STATS",), ("TOPICS",)):
                        t0 = time.monotonic()
                        with self.assertRaisesRegex(redis.ResponseError, "^UNAVAILABLE",
                                                    msg=f"{cmd[0]} on port {s.port}"):
                            r.execute_command(*cmd)
                        self.assertLess(time.monotonic() - t0, 3.0, cmd)
                    self.assertTrue(r.ping())  # the server itself is fine
                finally:
                    r.close()
            # The load's threads meet the outage too.
            # (Until they have seen it many times over: an outage of about a
            # second, so the servers' reconnects back off a few times.)
            try:
                wait_until(lambda: load.errors or (load.unavailable["add"] >= 100 and (
                    load.unavailable["reserve"] + load.unavailable["finish"]) >= 20),
                    timeout=10, what="producers and consumers to see `unavailable`")
            except AssertionError as e:
                raise AssertionError(f"{e}: {load.unavailable}") from None
            self.assertAlive(*servers)
            rp.start()
            outage = time.monotonic() - outage_started
            # Back by themselves: each server serves again without being restarted.
            for s in servers:
                r = client(s)
                try:
                    def serves():
                        try:
                            return r.execute_command("STATS") is not None
                        except redis.ResponseError as e:
                            if not str(e).startswith("UNAVAILABLE"):
                                raise
                            return False
                    wait_until(serves, timeout=15, what=f"port {s.port} to serve again")
                finally:
                    r.close()
            back_after = time.monotonic() - outage_started - outage
            ra = client(servers[0])
            self.addCleanup(ra.close)
            # The probe's ADD, refused while Redis was down, did not happen later.
            self.assertIsNone(ra.execute_command("GET", "probe-1"))
            t_add = time.monotonic()
            ra.execute_command("ADD", "parked", "parked-1", 0, 30000, "after the outage")
            parker.join(timeout=25)
            self.assertFalse(parker.is_alive(), "the parked reserve hangs")
            if "error" in parked:
                self.assertTrue(parked["error"].startswith("UNAVAILABLE"), parked)
                self.assertLess(parked["at"], t_add)
                parked_outcome = "was answered `unavailable` during the outage"
                (job,) = ra.execute_command("RESERVE", "TIMEOUT", 5000, "FROM", "parked")
                self.assertEqual(ra.execute_command("FINISH", "parked-1", job[3]), b"OK")
            else:
                self.assertIsNotNone(parked.get("jobs"), "the parked reserve timed out empty")
                self.assertEqual(parked["jobs"][0][0], b"parked-1")
                self.assertLess(parked["at"] - t_add, 3.0)
                self.assertEqual(ra.execute_command("FINISH", "parked-1", parked["jobs"][0][3]),
                                 b"OK")
                parked_outcome = (f"got the job added through A after the outage "
                                  f"{(parked['at'] - t_add) * 1000:.1f} ms later")
            load.join_producers(timeout=60)
            load.wait_drained(servers[0], timeout=30)
        finally:
            self.assertTrue(load.stop(), "load threads did not stop")
        print(f"\n  outage: Redis away {outage:.2f} s, both servers serving again "
              f"{back_after:.2f} s after it was back; the reserve parked on B "
              f"{parked_outcome}", file=sys.stderr)
        self.assertAlive(*servers)
        self.assertEqual(load.down, {})
        load.verify(self, servers[1], strict=False)

    def test_bad_redis_url_and_unreachable_redis_at_start(self):
        # A malformed URL: refused at start, naming the option and the problem.
        code, err = run_serve("--store", "redis", "--redis", "redis://127.0.0.1:notaport")
        self.assertNotEqual(code, 0, err)
        self.assertIn("redis_url", err)
        self.assertRegex(err, r"redis://127\.0\.0\.1:notaport.*port 'notaport'")
        code, err = run_serve("--store", "redis", "--redis", "http://127.0.0.1:6379")
        self.assertNotEqual(code, 0, err)
        self.assertIn("unsupported scheme 'http'", err)

        # A well-formed URL where nothing listens: `delayq serve` does not start
        # (exit 1, at once) with an `unavailable` error naming the URL; the
        # password stays out of the log. (Once running, a server outlives Redis:
        # see the restart test.)
        port = free_port()
        t0 = time.monotonic()
        code, err = run_serve("--store", "redis", "--redis",
                              f"redis://:s3cretpw@127.0.0.1:{port}")
        took = time.monotonic() - t0
        self.assertEqual(code, 1, err)
        self.assertLess(took, 5.0)
        self.assertRegex(err, rf"unavailable: .*redis://:\*\*\*@127\.0\.0\.1:{port}")
        self.assertIn("Connection refused", err)
        self.assertNotIn("s3cretpw", err)
        self.assertNotIn("serving RESP", err)

    def test_two_prefixes_on_one_redis_do_not_see_each_other(self):
        rp = self.start_redis()
        a = self.start_delayq(rp, "deploy-a")
        b = self.start_delayq(rp, "deploy-b")
        ra, rb = client(a), client(b)
        self.addCleanup(ra.close)
        self.addCleanup(rb.close)
        for i in range(20):
            ra.execute_command("ADD", "shared", f"j{i}", 0, 30000, f"a{i}")
        ra.execute_command("ADD", "shared", "later", 60000, 30000, "a-later")
        self.assertIsNone(rb.execute_command("RESERVE", "TIMEOUT", 200, "FROM", "shared"))
        self.assertIsNone(rb.execute_command("GET", "j0"))
        self.assertIsNone(rb.execute_command("PEEK", "shared", "DELAYED"))
        self.assertEqual(rb.execute_command("TOPICS"), [])
        self.assertEqual(stats(b)["jobs"], 0)
        with self.assertRaisesRegex(redis.ResponseError, "^NOTFOUND"):
            rb.execute_command("DELETE", "j1")
        # The same ids are free in B; each deployment hands out its own.
        for i in range(5):
            self.assertEqual(rb.execute_command("ADD", "shared", f"j{i}", 0, 30000, f"b{i}"),
                             f"j{i}".encode())
        got_b = rb.execute_command("RESERVE", "COUNT", 100, "FROM", "shared")
        self.assertEqual(sorted(j[2] for j in got_b), [b"b%d" % i for i in range(5)])
        # A reserve waiting on B is not woken by A's adds (the wake channel is
        # prefixed too), and B's receipts mean nothing to A's jobs.
        got = {}
        t = threading.Thread(target=lambda: got.setdefault(
            "jobs", rb.execute_command("RESERVE", "TIMEOUT", 3000, "FROM", "shared")))
        t.start()
        wait_until(lambda: stats(b, "shared")["waiting"] == 1, timeout=5,
                   what="the reserve to wait on B")
        ra.execute_command("ADD", "shared", "a-wake", 0, 30000, "a-wake")
        t.join(timeout=10)
        self.assertIsNone(got["jobs"])
        with self.assertRaisesRegex(redis.ResponseError, "^NOTRESERVED"):
            ra.execute_command("FINISH", "j0", "FORCE")
        with self.assertRaisesRegex(redis.ResponseError, "^STALE"):
            ra.execute_command("FINISH", "j0", got_b[0][3])
        got_a = ra.execute_command("RESERVE", "COUNT", 100, "FROM", "shared")
        self.assertEqual(sorted(j[2] for j in got_a),
                         sorted([b"a%d" % i for i in range(20)] + [b"a-wake"]))
        for j in got_b:
            self.assertEqual(rb.execute_command("FINISH", j[0], j[3]), b"OK")
        self.assertEqual(stats(b)["jobs"], 0)
        self.assertEqual(stats(a)["jobs"], 22)  # 21 reserved, 1 delayed
        self.assertEqual(stats(a)["reserved"], 21)


if __name__ == "__main__":
    harness.main(setup=lambda args: print(
        f"redis_server_test: seed {SEED} (replay with DELAYQ_ITR_SEED={SEED})", file=sys.stderr))
