#!/usr/bin/env python3
"""Black-box tests of `delayq serve --store embedded` (the default): what a
restart keeps after SIGTERM and after SIGKILL, the data directory (default,
lock, bad paths), the log's damage handling, bounded disk under compaction,
and the fsync policies. Each test has its own temporary data directory and
ends its servers by PID. Nothing sleeps to wait for time: waits poll with a
deadline (including the few that wait for a job to fall due while the server
is down).

    /usr/bin/python3 tests/integration/embedded_server_test.py --binary build/bin/delayq
"""
import base64
import glob
import http.client
import json
import os
import random
import re
import shutil
import signal
import tempfile
import time
import unittest

import redis

import harness
from harness import Server, run_serve, wait_until

BIN_BODY = bytes(range(256)) * 4 + b"\r\n\x00*1\r\n$-1\r\n"          # every byte value
BIG_BODY = random.Random(4).randbytes(200 * 1024)                    # ~200 KiB, incompressible
HOUR = 3_600_000


def client(server, **kw):
    return redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=10, **kw)


def pairs(flat):
    return {k.decode(): v for k, v in zip(flat[::2], flat[1::2])}


def get(r, job_id):
    """GET as a dict of str -> bytes, or None."""
    flat = r.execute_command("GET", job_id)
    return None if flat is None else pairs(flat)


def stats(r, *topic):
    return pairs(r.execute_command("STATS", *topic))


def call(server, method, path, body=None):
    """One HTTP/JSON request: (status, decoded reply)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=10)
    try:
        data = None if body is None else json.dumps(body)
        conn.request(method, path, body=data,
                     headers={"Content-Type": "application/json"} if data else {})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"null")
    finally:
        conn.close()


def now_ms():
    return int(time.time() * 1000)


def segments(data_dir):
    return sorted(glob.glob(os.path.join(data_dir, "log-*.dq")))


def segment_bytes(data_dir):
    """Bytes in the data dir's segments. A running server's compaction may
    remove a segment between the listing and its stat: it is then no longer
    on disk and counts nothing."""
    total = 0
    for path in segments(data_dir):
        try:
            total += os.path.getsize(path)
        except FileNotFoundError:
            pass
    return total


class DataDirCase(unittest.TestCase):
    """A temporary directory per test; `self.dir` is the data dir in it.
    Servers started with `self.start` are ended (SIGKILL if still running)
    before the directory is removed."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="delayq-itest-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.dir = os.path.join(self.tmp, "data")

    def start(self, *extra, data_dir=None, cwd=None):
        """A server on `data_dir` (default self.dir), or with cwd= and no
        data_dir on the server's default ./data of cwd."""
        if data_dir is None and cwd is None:
            data_dir = self.dir
        server = Server(*extra, data_dir=data_dir, cwd=cwd)
        self.addCleanup(lambda: server.proc.poll() is not None or server.kill())
        return server

    def restart(self, server, how, *extra):
        """Ends `server` with SIGTERM ("term", checking a clean exit) or
        SIGKILL ("kill") and starts a new one the same way (or with `extra`)
        on the same data dir."""
        if how == "term":
            self.assertEqual(server.stop(), 0, server.text)
        else:
            self.assertEqual(server.kill(), -signal.SIGKILL)
        new = self.start(*(extra or server.extra), data_dir=server.data_dir, cwd=server.cwd)
        return new, client(new)


class RestartTest(DataDirCase):
    """Every job comes back in its state, with its fields, after SIGTERM and
    after SIGKILL (the default fsync, everysec, answers only once written)."""

    def populate(self, r):
        """Jobs in every state and topics in every pause state. Returns
        (receipts, generated ids with bodies)."""
        c = r.execute_command
        receipts = {}

        def reserve(topic):
            jobs = c("RESERVE", "FROM", topic)
            self.assertIsNotNone(jobs, topic)
            return jobs[0]

        c("ADD", "rs.delayed", "delayed-1", HOUR, 60000, b'{"order":1}',
          "PRIORITY", 7, "MAXATTEMPTS", 5)
        c("ADD", "rs.ready", "ready-bin", 0, 60000, BIN_BODY)
        c("ADD", "rs.big", "ready-big", 0, 60000, BIG_BODY)
        c("ADD", "rs.empty", "ready-empty", 0, 60000, b"")
        # Reserved, touched.
        c("ADD", "rs.res", "reserved-1", 0, 600000, b"res-1")
        receipts["reserved-1"] = reserve("rs.res")[3]
        self.assertEqual(c("TOUCH", "reserved-1", receipts["reserved-1"]), b"OK")
        # Reserved for the second time, after a release with an error.
        c("ADD", "rs.res2", "reserved-2", 0, 600000, b"res-2")
        first = reserve("rs.res2")[3]
        c("RELEASE", "reserved-2", 0, first, "ERROR", "smtp timeout")
        job = reserve("rs.res2")
        self.assertEqual(job[4], 2)
        receipts["reserved-2"] = job[3]
        # Buried by a worker.
        c("ADD", "rs.bur", "buried-1", 0, 60000, b"bur-1")
        c("BURY", "buried-1", reserve("rs.bur")[3])
        # Buried because its one attempt's TTR ran out.
        c("ADD", "rs.ma", "buried-ma", 0, 1, b"ma", "MAXATTEMPTS", 1)
        reserve("rs.ma")
        wait_until(lambda: get(r, "buried-ma")["state"] == b"buried", what="the TTR to run out")
        # Released with a long delay and an error.
        c("ADD", "rs.rel", "released-1", 0, 60000, b"rel-1")
        c("RELEASE", "released-1", HOUR, reserve("rs.rel")[3], "ERROR", "payment service down")
        # Buried, then kicked: ready again, attempts kept.
        c("ADD", "rs.kick", "kicked-1", 0, 60000, b"kick-1")
        c("BURY", "kicked-1", reserve("rs.kick")[3])
        c("KICK", "kicked-1")
        # Replaced: the new body and schedule.
        c("ADD", "rs.repl", "replaced-1", 0, 60000, b"old")
        c("ADD", "rs.repl", "replaced-1", HOUR, 30000, b"new", "REPLACE", "PRIORITY", 3)
        # Gone before the restart.
        c("ADD", "rs.gone", "finished-1", 0, 60000, b"fin")
        c("FINISH", "finished-1", reserve("rs.gone")[3])
        c("ADD", "rs.gone", "deleted-1", HOUR, 60000, b"del")
        c("DELETE", "deleted-1")
        c("ADD", "rs.gone", "deleted-reserved", 0, 60000, b"delr")
        reserve("rs.gone")
        c("DELETE", "deleted-reserved")
        # Two buried, kicked by topic.
        for job_id in ("ktopic-1", "ktopic-2"):
            c("ADD", "rs.ktopic", job_id, 0, 60000, job_id.encode())
            c("BURY", job_id, reserve("rs.ktopic")[3])
        self.assertEqual(c("KICKTOPIC", "rs.ktopic", 10), 2)
        # Pauses: until resume, timed, and one resumed.
        c("ADD", "rs.paused", "paused-1", 0, 60000, b"p")
        c("PAUSE", "rs.paused", 0)
        c("ADD", "rs.tpaused", "tpaused-1", 0, 60000, b"tp")
        c("PAUSE", "rs.tpaused", HOUR)
        c("ADD", "rs.resumed", "resumed-1", 0, 60000, b"rsm")
        c("PAUSE", "rs.resumed", 0)
        c("RESUME", "rs.resumed")
        c("PAUSE", "rs.emptypause", 0)  # a paused topic with no jobs at all
        # Generated ids, with holes left by finished ones.
        generated = {}
        for i in range(60):
            body = b"gen-%d" % i
            job_id = c("ADD", "rs.gen%d" % (i % 3), "*", 0 if i % 2 else HOUR, 60000, body)
            generated[job_id] = body
        for job_id in list(generated)[::4]:
            c("DELETE", job_id)
            del generated[job_id]
        return receipts, generated

    def check_same_job(self, before, after, job_id):
        self.assertIsNotNone(after, f"{job_id} did not come back")
        for field, value in before.items():
            if field == "reserved_until_ms":
                continue
            self.assertEqual(after[field], value, f"{job_id}: {field}")
        # A reservation keeps its deadline (an estimate in wall-clock ms).
        self.assertAlmostEqual(int(after["reserved_until_ms"]), int(before["reserved_until_ms"]),
                               delta=1000, msg=f"{job_id}: reserved_until_ms")

    def restart_keeps_everything(self, how):
        server = self.start()
        r = client(server)
        receipts, generated = self.populate(r)
        ids = ["delayed-1", "ready-bin", "ready-big", "ready-empty", "reserved-1", "reserved-2",
               "buried-1", "buried-ma", "released-1", "kicked-1", "replaced-1", "paused-1",
               "tpaused-1", "resumed-1", "ktopic-1", "ktopic-2",
               *[g.decode() for g in generated]]
        before = {i: get(r, i) for i in ids}
        topics_before = {t: stats(r, t) for t in r.execute_command("TOPICS")}
        counts_before = {k: stats(r)[k] for k in ("jobs", "delayed", "ready", "reserved", "buried")}
        # Spot-check what populate made, so a wrong setup cannot pass.
        self.assertEqual(before["reserved-2"]["attempts"], b"2")
        self.assertEqual(before["reserved-2"]["last_error"], b"smtp timeout")
        self.assertEqual(before["buried-ma"]["state"], b"buried")
        self.assertIn(b"max_attempts (1) used up", before["buried-ma"]["last_error"])
        self.assertEqual(before["released-1"]["state"], b"delayed")
        self.assertEqual(before["kicked-1"]["state"], b"ready")
        self.assertEqual(before["replaced-1"]["body"], b"new")

        server, r = self.restart(server, how)
        log = server.text
        self.assertIn(f"opening the embedded store in {self.dir} (fsync everysec)", log)
        self.assertRegex(log, r"recovered %d jobs from \d+ records in \d+ segments" % len(ids))
        for job_id in ids:
            self.check_same_job(before[job_id], get(r, job_id), job_id)
        self.assertIsNone(get(r, "finished-1"))
        self.assertIsNone(get(r, "deleted-1"))
        self.assertIsNone(get(r, "deleted-reserved"))
        self.assertEqual({k: stats(r)[k] for k in counts_before}, counts_before)
        self.assertEqual(sorted(r.execute_command("TOPICS")), sorted(topics_before))
        for topic, st in topics_before.items():
            after = stats(r, topic)
            was, now = int(st.pop("paused_for_ms")), int(after.pop("paused_for_ms"))
            self.assertEqual(after, st, topic)
            if was in (0, -1):
                self.assertEqual(now, was, topic)
            else:  # a timed pause runs on from where it was
                self.assertLessEqual(now, was, topic)
                self.assertGreater(now, HOUR - 60000, topic)
        self.assertEqual(stats(r, "rs.paused")["paused_for_ms"], b"-1")
        self.assertEqual(stats(r, "rs.tpaused")["paused"], b"1")
        self.assertEqual(stats(r, "rs.resumed")["paused"], b"0")

        c = r.execute_command
        # The old receipts still work; a wrong one does not.
        with self.assertRaisesRegex(redis.ResponseError, "^STALE"):
            c("FINISH", "reserved-1", "0" * 24)
        self.assertEqual(c("FINISH", "reserved-1", receipts["reserved-1"]), b"OK")
        self.assertEqual(c("RELEASE", "reserved-2", 0, receipts["reserved-2"]), b"OK")
        # Paused topics hand out nothing; a resumed one does.
        self.assertIsNone(c("RESERVE", "FROM", "rs.paused", "rs.tpaused"))
        self.assertEqual(c("RESERVE", "FROM", "rs.resumed")[0][:3],
                         [b"resumed-1", b"rs.resumed", b"rsm"])
        self.assertEqual(c("RESUME", "rs.paused"), b"OK")
        self.assertEqual(c("RESERVE", "FROM", "rs.paused")[0][0], b"paused-1")
        # Nothing early.
        self.assertIsNone(c("RESERVE", "FROM", "rs.delayed", "rs.rel", "rs.repl"))
        # Bodies come back whole through a reserve too.
        self.assertEqual(c("RESERVE", "FROM", "rs.ready")[0][2], BIN_BODY)
        self.assertEqual(c("RESERVE", "FROM", "rs.big")[0][2], BIG_BODY)
        self.assertEqual(c("RESERVE", "FROM", "rs.empty")[0][2], b"")
        job = c("RESERVE", "FROM", "rs.res2")[0]
        self.assertEqual((job[0], job[4]), (b"reserved-2", 3))
        # Buried jobs kick and keep counting attempts.
        self.assertEqual(c("KICK", "buried-1"), b"OK")
        self.assertEqual(c("RESERVE", "FROM", "rs.bur")[0][4], 2)
        # Generated ids: each still names its own job, and new ones are new.
        for job_id, body in generated.items():
            self.assertEqual(get(r, job_id)["body"], body, job_id)
        fresh = {c("ADD", "rs.gen0", "*", HOUR, 60000, b"fresh-%d" % i): b"fresh-%d" % i
                 for i in range(60)}
        self.assertFalse(set(fresh) & set(generated))
        for job_id, body in {**generated, **fresh}.items():
            self.assertEqual(get(r, job_id)["body"], body, job_id)
        some = list(generated)[1]
        self.assertEqual(c("DELETE", some), b"OK")
        self.assertIsNone(get(r, some))

        # What happened after the restart survives the next one.
        after_ops = {i: get(r, i) for i in ids if i != some}
        server, r = self.restart(server, how)
        self.assertIsNone(get(r, "reserved-1"))
        self.assertIsNone(get(r, some))
        for job_id, info in after_ops.items():
            if info is None:
                self.assertIsNone(get(r, job_id), job_id)
            else:
                self.check_same_job(info, get(r, job_id), job_id)
        for job_id, body in fresh.items():
            self.assertEqual(get(r, job_id)["body"], body, job_id)
        self.assertEqual(stats(r, "rs.paused")["paused"], b"0")
        self.assertEqual(server.stop(), 0)

    def test_restart_after_sigterm_keeps_everything(self):
        self.restart_keeps_everything("term")

    def test_restart_after_sigkill_keeps_everything(self):
        self.restart_keeps_everything("kill")

    def test_jobs_added_over_http_and_command_come_back_the_same(self):
        server = self.start()
        raw = bytes(range(256))
        adds = [{"topic": "h.json", "id": "h-json", "body": {"order": 42, "x": [1, 2]},
                 "delay_ms": HOUR, "priority": 9, "max_attempts": 3},
                {"topic": "h.text", "id": "h-text", "body": "h\u00e9llo \"q\"\n"},
                {"topic": "h.b64", "id": "h-b64", "body_base64": base64.b64encode(raw).decode()}]
        for add in adds:
            self.assertEqual(call(server, "POST", "/v1/jobs", add)[0], 201)
        st, res = call(server, "POST", "/v1/reserve", {"topics": ["h.text"]})
        receipt = res["jobs"][0]["receipt"]
        self.assertEqual(call(server, "POST", "/v1/topics/h.b64/pause", None)[0], 200)
        st, seed = call(server, "POST", "/command", {"command": "add", "topic": "h.seed",
                                                    "id": "h-seed", "delay": 3600, "TTR": 60,
                                                    "body": "{}"})
        self.assertTrue(seed["success"], seed)
        ids = ["h-json", "h-text", "h-b64", "h-seed"]
        before = {i: call(server, "GET", "/v1/jobs/" + i)[1] for i in ids}
        topics = call(server, "GET", "/v1/topics")[1]
        server, _ = self.restart(server, "kill")
        for job_id in ids:
            st, after = call(server, "GET", "/v1/jobs/" + job_id)
            self.assertEqual(st, 200, after)
            want = dict(before[job_id])
            self.assertAlmostEqual(after.pop("reserved_until_ms"), want.pop("reserved_until_ms"),
                                   delta=1000)
            self.assertEqual(after, want)
        self.assertEqual(base64.b64decode(before["h-b64"]["body_base64"]), raw)
        got = call(server, "GET", "/v1/topics")[1]
        for t in got["topics"] + topics["topics"]:
            t.pop("paused_for_ms")
        self.assertEqual(got, topics)
        self.assertEqual(call(server, "POST", "/v1/jobs/h-text/finish", {"receipt": receipt}),
                         (200, {"ok": True}))
        self.assertEqual(call(server, "POST", "/command", {"command": "delete", "id": "h-seed"})
                         [1]["success"], True)
        self.assertEqual(server.stop(), 0)

    def test_jobs_that_fell_due_while_down_are_ready_at_once(self):
        server = self.start()
        r = client(server)
        c = r.execute_command
        c("ADD", "fd.delay", "due-soon", 300, 60000, b"due")
        c("ADD", "fd.delay", "due-later", HOUR, 60000, b"later")
        c("ADD", "fd.ttr", "ttr-soon", 0, 300, b"ttr")
        receipt = c("RESERVE", "FROM", "fd.ttr")[0][3]
        c("ADD", "fd.paused", "paused-due", 300, 60000, b"pd")
        c("PAUSE", "fd.paused", 0)
        run_at = int(get(r, "due-soon")["run_at_ms"])
        until = int(get(r, "ttr-soon")["reserved_until_ms"])
        self.assertEqual(server.kill(), -signal.SIGKILL)
        # The server is down while both fall due.
        wait_until(lambda: now_ms() > max(run_at, until) + 50, what="the jobs to fall due")
        server = self.start()
        r = client(server)
        c = r.execute_command
        self.assertEqual(get(r, "due-soon")["state"], b"ready")
        info = get(r, "ttr-soon")
        self.assertEqual((info["state"], info["attempts"]), (b"ready", b"1"))
        self.assertEqual(info["receipt"], b"")
        self.assertEqual(get(r, "paused-due")["state"], b"ready")
        # At once: no TIMEOUT, so an answer now or nil.
        self.assertEqual(c("RESERVE", "FROM", "fd.delay")[0][:3], [b"due-soon", b"fd.delay", b"due"])
        self.assertIsNone(c("RESERVE", "FROM", "fd.delay"))  # due-later stays delayed
        job = c("RESERVE", "FROM", "fd.ttr")[0]
        self.assertEqual((job[0], job[2], job[4]), (b"ttr-soon", b"ttr", 2))
        with self.assertRaisesRegex(redis.ResponseError, "^STALE"):
            c("FINISH", "ttr-soon", receipt)  # the delivery before the crash is over
        self.assertEqual(c("FINISH", "ttr-soon", job[3]), b"OK")
        self.assertIsNone(c("RESERVE", "FROM", "fd.paused"))  # still paused
        c("RESUME", "fd.paused")
        self.assertEqual(c("RESERVE", "FROM", "fd.paused")[0][0], b"paused-due")
        self.assertEqual(server.stop(), 0)

    def test_timers_run_on_after_a_restart(self):
        # A delayed job and a timed pause, both ending shortly after the
        # restart: the recovered engine must arm them, not wait for a poke.
        server = self.start()
        r = client(server)
        c = r.execute_command
        # 6 s: time enough for a kill -9 and a restart on a loaded machine.
        c("ADD", "tm.delay", "soon", 6000, 60000, b"soon")
        run_at = int(get(r, "soon")["run_at_ms"])
        c("ADD", "tm.paused", "held", 0, 60000, b"held")
        c("PAUSE", "tm.paused", 6000)
        asked_at = now_ms()  # no later than the server's now: a lower bound of the end
        paused_until = asked_at + int(stats(r, "tm.paused")["paused_for_ms"])
        c("ADD", "tm.ttr", "short-ttr", 0, 6000, b"ttr")
        c("RESERVE", "FROM", "tm.ttr")
        until = int(get(r, "short-ttr")["reserved_until_ms"])
        server, r = self.restart(server, "kill")
        c = r.execute_command
        self.assertLess(now_ms(), min(run_at, paused_until, until),
                        "the restart took too long for this test")
        self.assertEqual(get(r, "soon")["state"], b"delayed")
        job = c("RESERVE", "TIMEOUT", 9000, "FROM", "tm.delay")
        got_at = now_ms()
        self.assertEqual(job[0][0], b"soon")
        self.assertGreaterEqual(got_at, run_at)      # never early
        self.assertLess(got_at, run_at + 2000)       # and not a poll later
        job = c("RESERVE", "TIMEOUT", 9000, "FROM", "tm.paused")
        self.assertEqual(job[0][0], b"held")
        self.assertGreaterEqual(now_ms(), paused_until - 50)
        job = c("RESERVE", "TIMEOUT", 9000, "FROM", "tm.ttr")
        self.assertEqual((job[0][0], job[0][4]), (b"short-ttr", 2))
        self.assertGreaterEqual(now_ms(), until - 50)
        self.assertEqual(server.stop(), 0)

    def test_a_timed_pause_that_ended_while_down_is_over(self):
        server = self.start()
        r = client(server)
        r.execute_command("ADD", "tp.over", "tp-1", 0, 60000, b"x")
        r.execute_command("PAUSE", "tp.over", 200)
        ends = now_ms() + int(stats(r, "tp.over")["paused_for_ms"])
        self.assertEqual(server.kill(), -signal.SIGKILL)
        wait_until(lambda: now_ms() > ends + 50, what="the pause to end")
        server = self.start()
        r = client(server)
        self.assertEqual(stats(r, "tp.over")["paused"], b"0")
        self.assertEqual(r.execute_command("RESERVE", "FROM", "tp.over")[0][0], b"tp-1")
        self.assertEqual(server.stop(), 0)

    def test_generated_ids_keep_working_after_restarts(self):
        server = self.start()
        r = client(server)
        c = r.execute_command
        jobs = {}
        for rnd in range(3):
            pipe = r.pipeline(transaction=False)
            bodies = [b"round %d job %d" % (rnd, i) for i in range(300)]
            for i, body in enumerate(bodies):
                pipe.execute_command("ADD", "gid.%d" % (i % 5), "*", (i % 2) * HOUR, 60000, body)
            added = pipe.execute()
            self.assertEqual(len(set(added)), len(added))
            self.assertFalse(set(added) & set(jobs), "a generated id was handed out twice")
            jobs.update(zip(added, bodies))
            # Holes: delete some, finish others.
            for job_id in added[::7]:
                c("DELETE", job_id)
                del jobs[job_id]
            for job in c("RESERVE", "COUNT", 20, "FROM", "gid.0", "gid.1") or []:
                c("FINISH", job[0], job[3])
                del jobs[job[0]]
            server, r = self.restart(server, "kill" if rnd % 2 else "term")
            c = r.execute_command
            self.assertEqual(int(stats(r)["jobs"]), len(jobs))
            for job_id, body in jobs.items():
                info = get(r, job_id)
                self.assertIsNotNone(info, job_id)
                self.assertEqual((info["id"], info["body"]), (job_id, body))
        self.assertEqual(server.stop(), 0)


class RestartWithMemoryWindowTest(RestartTest):
    """The same with --memory-window 0: every delayed job lives in the log
    only (a slot in memory), read back to answer for it and brought back
    when due. Every answer must be the same."""

    def start(self, *extra, data_dir=None, cwd=None):
        if "--memory-window" not in extra:
            extra = ("--memory-window", "0") + tuple(extra)
        return super().start(*extra, data_dir=data_dir, cwd=cwd)

    def test_far_jobs_are_counted_and_read_back(self):
        server = self.start()
        r = client(server)
        c = r.execute_command
        for i in range(50):
            c("ADD", "far.t", "far-%d" % i, 30 * 86400000 + i, 60000, b"far body %d" % i)
        st = stats(r)
        self.assertEqual(int(st["far_jobs"]), 50)
        self.assertEqual(int(st["delayed"]), 50)
        self.assertEqual(get(r, "far-7")["body"], b"far body 7")
        server, r = self.restart(server, "term")
        self.assertEqual(int(stats(r)["far_jobs"]), 50)
        self.assertEqual(get(r, "far-49")["body"], b"far body 49")
        server, r = self.restart(server, "kill", "--memory-window", "off")
        self.assertEqual(int(stats(r)["jobs"]), 50)
        self.assertNotIn("far_jobs", stats(r))
        self.assertEqual(server.stop(), 0)


class DataDirTest(DataDirCase):
    def test_default_data_dir_is_data_in_the_working_directory(self):
        # What `make run` does: no --data-dir, no --store.
        cwd = os.path.join(self.tmp, "run")
        os.mkdir(cwd)
        server = self.start(cwd=cwd)
        self.assertIn("opening the embedded store in ./data (fsync everysec)", server.text)
        self.assertIn("store embedded in ./data, fsync everysec", server.text)
        self.assertTrue(os.path.isdir(os.path.join(cwd, "data")))
        r = client(server)
        r.execute_command("ADD", "mr", "make-run-1", HOUR, 60000, b"kept")
        self.assertEqual(server.kill(), -signal.SIGKILL)
        self.assertTrue(os.listdir(os.path.join(cwd, "data")))
        server = self.start(cwd=cwd)
        self.assertEqual(get(client(server), "make-run-1")["body"], b"kept")
        self.assertEqual(server.stop(), 0)
        self.assertFalse(os.path.exists(self.dir))  # it used ./data, nothing else

    def test_deleting_files_in_the_dir_does_not_let_a_second_server_in(self):
        # The lock is the directory's own: no file in it can be deleted or
        # replaced to get past it (a LOCK file could).
        server = self.start()
        r = client(server)
        r.execute_command("ADD", "lk", "lock-1", HOUR, 60000, b"x")
        for name in os.listdir(self.dir):
            path = os.path.join(self.dir, name)
            if not name.startswith("log-") and os.path.isfile(path):  # far/ is a directory
                os.remove(path)
        code, err = run_serve("--data-dir", self.dir)
        self.assertEqual(code, 1, err)
        self.assertIn("is locked: another delayq is using this data directory", err)
        self.assertEqual(get(r, "lock-1")["body"], b"x")

    def test_a_second_server_on_the_same_dir_refuses_to_start(self):
        server = self.start()
        r = client(server)
        r.execute_command("ADD", "lk", "lock-1", HOUR, 60000, b"x")
        code, err = run_serve("--data-dir", self.dir)
        self.assertEqual(code, 1, err)
        self.assertIn("is locked: another delayq is using this data directory", err)
        self.assertNotIn("serving", err)
        # Also through a different spelling of the same directory.
        code, err = run_serve("--data-dir", self.dir + "/./")
        self.assertEqual(code, 1, err)
        self.assertIn("is locked", err)
        # The first one is unharmed.
        self.assertEqual(get(r, "lock-1")["body"], b"x")
        r.execute_command("ADD", "lk", "lock-2", HOUR, 60000, b"y")
        # A killed holder leaves no stale lock behind.
        self.assertEqual(server.kill(), -signal.SIGKILL)
        server = self.start()
        r = client(server)
        self.assertEqual(get(r, "lock-2")["body"], b"y")
        self.assertEqual(server.stop(), 0)
        server = self.start()
        self.assertEqual(server.stop(), 0)

    def test_a_data_dir_that_cannot_be_created_refuses_to_start(self):
        plain = os.path.join(self.tmp, "plain-file")
        with open(plain, "w") as f:
            f.write("not a directory\n")
        for path in (os.path.join(plain, "data"), plain, os.path.join(plain, "a", "b")):
            code, err = run_serve("--data-dir", path)
            self.assertEqual(code, 1, err)
            self.assertIn(path, err)
            self.assertNotIn("serving", err)
        with open(plain) as f:
            self.assertEqual(f.read(), "not a directory\n")  # untouched

    def test_a_missing_parent_is_created(self):
        deep = os.path.join(self.tmp, "x", "y", "data")
        server = self.start(data_dir=deep)
        client(server).execute_command("ADD", "deep", "d1", 0, 60000, b"d")
        self.assertEqual(server.stop(), 0)
        self.assertTrue(os.path.isdir(deep))

    def test_memory_store_keeps_nothing(self):
        cwd = os.path.join(self.tmp, "mem")
        os.mkdir(cwd)
        server = self.start("--store", "memory", cwd=cwd)
        self.assertNotIn("embedded", server.text)
        client(server).execute_command("ADD", "mem", "m1", HOUR, 60000, b"m")
        self.assertEqual(server.stop(), 0)
        server = self.start("--store", "memory", cwd=cwd)
        self.assertIsNone(get(client(server), "m1"))
        self.assertEqual(server.stop(), 0)
        self.assertEqual(os.listdir(cwd), [])  # no ./data

    def test_bad_flags_are_refused(self):
        for flags in (["--fsync", "sometimes"], ["--segment-bytes", "4095"],
                      ["--store", "disk"]):
            code, err = run_serve("--data-dir", self.dir, *flags)
            self.assertNotEqual(code, 0, flags)
            self.assertIn(flags[0], err)


class DamageTest(DataDirCase):
    def fill(self, *extra, n=3, body=b"x"):
        server = self.start(*extra)
        r = client(server)
        for i in range(n):
            r.execute_command("ADD", "dmg", "job-%d" % i, HOUR, 60000, body + b"-%d" % i)
        return server, r

    def test_a_torn_tail_is_cut_and_reported(self):
        server, r = self.fill()
        self.assertEqual(server.kill(), -signal.SIGKILL)
        newest = segments(self.dir)[-1]
        # The records end where the zeros prepared ahead of them begin (the
        # last record ends in its body, never in a zero).
        with open(newest, "rb") as f:
            size = len(f.read().rstrip(b"\0"))
        os.truncate(newest, size - 3)  # the last record, half written
        server = self.start()
        r = client(server)
        self.assertRegex(server.text, r"warn .*%s.*cut" % re.escape(os.path.basename(newest)))
        self.assertEqual(get(r, "job-0")["body"], b"x-0")
        self.assertEqual(get(r, "job-1")["body"], b"x-1")
        self.assertIsNone(get(r, "job-2"))
        # Serving on: new writes land after the cut and survive.
        r.execute_command("ADD", "dmg", "job-3", HOUR, 60000, b"x-3")
        server, r = self.restart(server, "kill")
        self.assertNotIn("cut", server.text)
        self.assertEqual([get(r, "job-%d" % i) is not None for i in range(4)],
                         [True, True, False, True])
        self.assertEqual(server.stop(), 0)

    def test_a_damaged_last_record_is_reported_where_and_how_much_and_counted(self):
        server, r = self.fill()
        self.assertEqual(server.kill(), -signal.SIGKILL)
        newest = segments(self.dir)[-1]
        with open(newest, "rb") as f:
            data = f.read()
        end = len(data.rstrip(b"\0"))  # zeros prepared ahead follow the records
        # The last record's length field, so its start is known: it is the
        # one whose 9-byte header plus payload ends at `end`.
        start = next(i for i in range(32, end - 8)
                     if i + 8 + int.from_bytes(data[i + 4:i + 8], "little") == end)
        with open(newest, "r+b") as f:
            f.seek(end - 2)
            f.write(b"!")  # a torn page: the record is all there, its bytes are not
        server = self.start()
        r = client(server)
        self.assertRegex(
            server.text,
            r"warn .*%s: cut %d bytes at byte %d.*checksum" %
            (re.escape(os.path.basename(newest)), end - start, start))
        self.assertIsNone(get(r, "job-2"))
        self.assertEqual(get(r, "job-1")["body"], b"x-1")
        st = stats(r)
        self.assertEqual(st["recovery_torn_records"], b"1")
        self.assertEqual(st["recovery_torn_bytes"], b"%d" % (end - start))
        conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=10)
        conn.request("GET", "/metrics")
        self.assertIn(b"delayq_store_recovery_torn_records 1", conn.getresponse().read())
        conn.close()
        self.assertEqual(server.stop(), 0)

    def test_garbage_after_the_last_record_is_cut(self):
        server, r = self.fill()
        self.assertEqual(server.stop(), 0)
        newest = segments(self.dir)[-1]
        with open(newest, "ab") as f:
            f.write(random.Random(7).randbytes(100))
        server = self.start()
        r = client(server)
        self.assertIn("cut", server.text)
        for i in range(3):
            self.assertEqual(get(r, "job-%d" % i)["body"], b"x-%d" % i)
        self.assertEqual(server.stop(), 0)

    def test_damage_in_an_older_segment_refuses_to_start(self):
        server, r = self.fill("--segment-bytes", "4096", n=12, body=b"b" * 1000)
        self.assertGreaterEqual(int(server.stats()["log_segments"]), 2)
        self.assertEqual(server.stop(), 0)
        older = segments(self.dir)[0]
        self.assertGreaterEqual(len(segments(self.dir)), 2)
        with open(older, "r+b") as f:
            f.seek(32 + 20)  # inside the first record (after the 32-byte header)
            byte = f.read(1)
            f.seek(32 + 20)
            f.write(bytes([byte[0] ^ 0x55]))
        code, err = run_serve("--data-dir", self.dir)
        self.assertEqual(code, 1, err)
        self.assertIn(older, err)
        self.assertRegex(err, r"damaged at byte 32\b")
        self.assertNotIn("serving", err)
        # Nothing was cut or removed: the damage is left for a human.
        self.assertTrue(os.path.exists(older))

    def test_damage_amid_whole_records_of_the_newest_segment_is_not_cut_off(self):
        # One flipped byte in the first record, with whole, checksummed
        # records after it: that is not a torn tail (a crash leaves those at
        # the end only), and with --fsync always the later jobs were
        # acknowledged as on disk. Either answer of the issue is fine —
        # refuse to start naming the file and offset, or skip the bad record
        # and report it — but not cutting every later record off as a "torn
        # tail".
        server, r = self.fill("--fsync", "always", n=5, body=b"y" * 100)
        self.assertEqual(server.kill(), -signal.SIGKILL)
        newest = segments(self.dir)[-1]
        size = os.path.getsize(newest)
        with open(newest, "r+b") as f:
            f.seek(32 + 30)  # inside the first record's payload
            byte = f.read(1)
            f.seek(32 + 30)
            f.write(bytes([byte[0] ^ 0x01]))
        try:
            server = self.start("--fsync", "always")
        except RuntimeError as e:  # refused: fine if it says where
            self.assertIn(newest, str(e))
            self.assertRegex(str(e), r"byte 32\b")
            self.assertEqual(os.path.getsize(newest), size, "the evidence was cut off")
            return
        r = client(server)
        present = [get(r, "job-%d" % i) is not None for i in range(5)]
        self.assertEqual(present[1:], [True] * 4,
                         f"intact acknowledged jobs after the damaged record were dropped: "
                         f"{server.text}")
        self.assertEqual(server.stop(), 0)

    def test_a_missing_segment_in_the_middle_is_noticed(self):
        # Compaction removes only the oldest segment, so the segment numbers
        # on disk are always consecutive; a gap means a file was lost (and
        # with it, possibly, the removes of finished jobs).
        server, r = self.fill("--segment-bytes", "4096", n=12, body=b"b" * 1000)
        self.assertEqual(server.stop(), 0)
        names = segments(self.dir)
        self.assertGreaterEqual(len(names), 3)
        os.remove(names[1])
        try:
            server = self.start()
        except RuntimeError as e:  # refused: fine if it names what is missing
            self.assertIn(os.path.basename(names[1]), str(e))
            return
        # Started: then at least say so.
        self.assertIn(os.path.basename(names[1]), server.text,
                      "started without a word about the missing segment")
        self.assertEqual(server.stop(), 0)


class CompactionTest(DataDirCase):
    def test_add_and_finish_forever_runs_in_bounded_disk(self):
        seg = 65536
        server = self.start("--segment-bytes", seg)
        r = client(server)
        c = r.execute_command
        # The first job pins the oldest segment until compaction copies it on.
        c("ADD", "cp.pin", "pinned", 30 * 24 * HOUR, 60000, b"pinned body " + BIN_BODY)
        c("ADD", "cp.pin", "pinned-big", 30 * 24 * HOUR, 60000, BIG_BODY)
        gen = c("ADD", "cp.pin", "*", 30 * 24 * HOUR, 60000, b"generated, pinned")
        # State that compaction must carry forward too: a reservation with
        # its receipt, attempts and last_error, and pauses.
        c("ADD", "cp.res", "pinned-reserved", 0, 24 * HOUR, b"reserved body")
        first = c("RESERVE", "FROM", "cp.res")[0][3]
        c("RELEASE", "pinned-reserved", 0, first, "ERROR", "first try failed")
        receipt = c("RESERVE", "FROM", "cp.res")[0][3]
        c("PAUSE", "cp.paused", 0)
        c("PAUSE", "cp.resumed", 0)
        c("RESUME", "cp.resumed")
        reserved_before = get(r, "pinned-reserved")
        body = b"c" * 100
        total, batch = 30000, 1000
        for start in range(0, total, batch):
            pipe = r.pipeline(transaction=False)
            for i in range(start, start + batch):
                pipe.execute_command("ADD", "cp.churn", "churn-%d" % i, 0, 60000, body)
            pipe.execute()
            jobs = c("RESERVE", "COUNT", batch, "FROM", "cp.churn")
            self.assertEqual(len(jobs), batch)
            pipe = r.pipeline(transaction=False)
            for job in jobs:
                pipe.execute_command("FINISH", job[0], job[3])
            self.assertEqual(pipe.execute(), [b"OK"] * batch)
        st = server.stats()
        self.assertGreater(st["log_bytes"], 30 * seg, st)  # far more was written than kept
        # At most 4 segments besides the live set (the big job may be a
        # segment of its own).
        bound = 4 * seg + len(BIG_BODY) + 4096
        settled = wait_until(lambda: (lambda s: s if s["disk_bytes"] < bound else None)(
            server.stats()), timeout=20, what=f"disk_bytes below {bound}")
        self.assertGreater(settled["removed_segments"], 0, settled)
        self.assertGreater(settled["rewritten_bytes"], 0, settled)
        self.assertLessEqual(settled["log_segments"], 5, settled)
        self.assertEqual(settled["jobs"], 4)
        on_disk = segment_bytes(self.dir)
        self.assertLess(on_disk, bound + seg, segments(self.dir))
        self.assertEqual(get(r, "pinned")["body"], b"pinned body " + BIN_BODY)
        self.assertEqual(get(r, "pinned-big")["body"], BIG_BODY)
        self.assertEqual(get(r, gen)["body"], b"generated, pinned")
        for how in ("kill", "term"):
            server, r = self.restart(server, how)
            self.assertRegex(server.text, r"recovered 4 jobs from")
            self.assertEqual(get(r, gen)["body"], b"generated, pinned")
            info = get(r, "pinned-reserved")
            for field in ("state", "body", "attempts", "receipt", "last_error", "run_at_ms"):
                self.assertEqual(info[field], reserved_before[field], field)
            self.assertEqual(stats(r, "cp.paused")["paused_for_ms"], b"-1")
            self.assertEqual(stats(r, "cp.resumed")["paused"], b"0")
            self.assertEqual(get(r, "pinned")["body"], b"pinned body " + BIN_BODY)
            self.assertEqual(get(r, "pinned-big")["body"], BIG_BODY)
            self.assertIsNone(get(r, "churn-0"))
            self.assertIsNone(get(r, "churn-%d" % (total - 1)))
            self.assertEqual(int(stats(r)["jobs"]), 4)
            self.assertLess(server.stats()["disk_bytes"], bound)
        self.assertEqual(r.execute_command("FINISH", "pinned-reserved", receipt), b"OK")
        self.assertEqual(server.stop(), 0)

    def test_release_with_a_delay_forever_runs_in_bounded_disk(self):
        # beanstalkd #622's pattern: the same jobs go round and round.
        seg = 65536
        server = self.start("--segment-bytes", seg)
        r = client(server)
        c = r.execute_command
        n = 200
        pipe = r.pipeline(transaction=False)
        for i in range(n):
            pipe.execute_command("ADD", "rl", "loop-%d" % i, 0, 60000, b"l" * 200)
        pipe.execute()
        for _ in range(60):
            jobs = c("RESERVE", "COUNT", n, "FROM", "rl")
            self.assertEqual(len(jobs), n)
            pipe = r.pipeline(transaction=False)
            for job in jobs:
                pipe.execute_command("RELEASE", job[0], 0, job[3], "ERROR", "again")
            pipe.execute()
        st = server.stats()
        self.assertGreater(st["log_bytes"], 12 * seg, st)
        bound = 4 * seg
        wait_until(lambda: server.stats()["disk_bytes"] < bound, timeout=20,
                   what=f"disk_bytes below {bound}")
        server, r = self.restart(server, "kill")
        self.assertEqual(int(stats(r)["ready"]), n)
        info = get(r, "loop-0")
        self.assertEqual((info["attempts"], info["last_error"]), (b"60", b"again"))
        self.assertEqual(server.stop(), 0)


class FsyncTest(DataDirCase):
    def check_policy(self, policy):
        data_dir = os.path.join(self.tmp, policy)
        server = self.start("--fsync", policy, data_dir=data_dir)
        self.assertIn(f"opening the embedded store in {data_dir} (fsync {policy})", server.text)
        self.assertIn(f"fsync {policy}", server.text)
        r = client(server)
        before = server.stats()["log_syncs"]
        for i in range(10):  # one at a time: each reply waits for its own write
            r.execute_command("ADD", "fs", "fs-%d" % i, HOUR, 60000, b"body-%d" % i)
        after = server.stats()
        if policy == "always":
            # Each add was answered only after an fdatasync that covered it.
            self.assertGreaterEqual(after["log_syncs"] - before, 10, after)
        elif policy == "never":
            self.assertEqual(after["log_syncs"], before, after)
        else:
            wait_until(lambda: server.stats()["log_syncs"] > before, timeout=5,
                       what="the once-a-second fdatasync")
        self.assertGreaterEqual(after["log_writes"], 10)
        server, r = self.restart(server, "kill")
        for i in range(10):
            self.assertEqual(get(r, "fs-%d" % i)["body"], b"body-%d" % i)
        self.assertEqual(server.stop(), 0)

    def test_fsync_always(self):
        self.check_policy("always")

    def test_fsync_everysec(self):
        self.check_policy("everysec")

    def test_fsync_never(self):
        self.check_policy("never")

    def test_store_figures_in_stats_and_metrics(self):
        server = self.start()
        r = client(server)
        r.execute_command("ADD", "st", "st-1", HOUR, 60000, b"s")
        names = ["log_writes", "log_syncs", "log_bytes", "disk_bytes", "log_segments",
                 "live_bytes", "rewritten_bytes", "removed_segments", "recovered_records",
                 "recovery_ms", "store_failing"]
        st = server.stats()
        resp = stats(r)
        conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=10)
        conn.request("GET", "/metrics")
        metrics = conn.getresponse().read().decode()
        conn.close()
        for name in names:
            self.assertIsInstance(st[name], int, name)
            self.assertIn(name, resp)
            self.assertRegex(metrics, r"(?m)^delayq_store_%s(\{[^}]*\})? \d+" % name)
        self.assertGreaterEqual(st["log_writes"], 1)
        self.assertGreater(st["disk_bytes"], 0)
        self.assertEqual(st["log_segments"], 1)
        self.assertEqual(st["store_failing"], 0)
        server, r = self.restart(server, "term")
        self.assertGreater(server.stats()["recovered_records"], 0)
        self.assertEqual(server.stop(), 0)


if __name__ == "__main__":
    harness.main()
