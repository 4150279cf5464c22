#!/usr/bin/env python3
"""Black-box: `delayq serve --store embedded` on a file system that fills up.

The data directory lives on a small tmpfs the test mounts (root only; CI runs
as root). The server is filled until adds are refused, and then must: refuse
each add at once with `unavailable` naming the disk (HTTP 503); keep answering
everything that needs no new data (PING, GET, STATS, /healthz, /metrics,
RESERVE and FINISH of jobs already there); report the state in /healthz,
STATS and /metrics; take adds again by itself once space is freed; and after
kill -9 keep every acknowledged job and none that was refused. Waits poll
with deadlines; nothing sleeps.

    /usr/bin/python3 tests/integration/disk_full_test.py --binary build/bin/delayq
"""
import http.client
import json
import os
import shutil
import subprocess
import tempfile
import unittest

import redis

import harness
from harness import Server, wait_until

BODY = "x" * 10_000


def call(server, method, path, body=None):
    """One HTTP/JSON request: (status, reply text)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=5)
    try:
        conn.request(method, path, body=None if body is None else json.dumps(body))
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


def pairs(flat):
    return {k.decode(): v for k, v in zip(flat[::2], flat[1::2])}


class SmallFileSystem:
    """A tmpfs of `mib` MiB mounted on a fresh directory, unmounted on close."""

    def __init__(self, mib):
        self.root = tempfile.mkdtemp(prefix="delayq-full-")
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={mib}m", "tmpfs", self.root],
                           capture_output=True, text=True)
        if r.returncode != 0:
            os.rmdir(self.root)
            raise unittest.SkipTest("cannot mount a tmpfs (needs root): " + r.stderr.strip())

    def close(self):
        subprocess.run(["umount", self.root], check=False)
        shutil.rmtree(self.root, ignore_errors=True)


class DiskFull(unittest.TestCase):
    def setUp(self):
        self.fs = SmallFileSystem(8)
        self.addCleanup(self.fs.close)
        self.data = os.path.join(self.fs.root, "data")
        # Space taken by something else, freed later by "the operator".
        self.ballast = os.path.join(self.fs.root, "ballast")
        with open(self.ballast, "wb") as f:
            f.write(b"\0" * (3 << 20))

    def start(self):
        server = Server("--segment-bytes", 1 << 20, data_dir=self.data)
        self.addCleanup(lambda: server.kill(keep_data=True))
        return server

    def fill(self, r):
        """Adds 10 KB jobs until one is refused: (acknowledged ids, refusal)."""
        acked = []
        for i in range(2000):
            try:
                r.execute_command("ADD", "fill", f"f{i}", 0, 60000, BODY)
                acked.append(f"f{i}")
            except redis.ResponseError as e:
                return acked, str(e)
        self.fail("8 MiB took 2000 adds of 10 KB without a refusal")

    def test_full_disk_refuses_adds_at_once_serves_the_rest_and_resumes_by_itself(self):
        server = self.start()
        r = redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=5)
        r.execute_command("ADD", "work", "w1", 0, 60000, "to do")
        acked, refusal = self.fill(r)
        self.assertGreater(len(acked), 10)
        self.assertTrue(refusal.startswith("UNAVAILABLE disk full"), refusal)
        self.assertIn(self.data, refusal)
        refused = [f"f{len(acked)}"]
        # Everything that adds nothing is answered at once.
        self.assertTrue(r.ping())
        self.assertEqual(pairs(r.execute_command("GET", acked[0]))["state"], b"ready")
        st = pairs(r.execute_command("STATS"))
        self.assertEqual(st["store_disk_full"], b"1")
        self.assertGreaterEqual(int(st["refused_changes"]), 1)
        self.assertEqual(st["log_write_failures"], b"0")  # refused before, never failed after
        job = r.execute_command("RESERVE", "COUNT", 1, "FROM", "work")[0]
        self.assertEqual(job[0], b"w1")
        self.assertEqual(r.execute_command("FINISH", "w1", job[3]), b"OK")
        # HTTP: the add is refused with 503 naming the disk; health says why.
        status, text = call(server, "POST", "/v1/jobs", {"topic": "fill", "id": "h1", "body": BODY})
        self.assertEqual(status, 503, text)
        error = json.loads(text)["error"]
        self.assertEqual(error["code"], "unavailable")
        self.assertIn("disk full", error["message"])
        refused.append("h1")
        status, text = call(server, "GET", "/healthz")
        self.assertEqual(status, 200, text)
        health = json.loads(text)
        self.assertEqual(health["status"], "degraded")
        self.assertIn("disk full", health["store"])
        status, text = call(server, "GET", "/metrics")
        self.assertEqual(status, 200)
        self.assertIn("delayq_store_store_disk_full 1", text)
        self.assertRegex(text, r"delayq_store_refused_changes [1-9]")
        # The server's log is read by a thread of the harness: wait for the line.
        wait_until(lambda: "disk full" in server.text, what="the server logging 'disk full'")
        # The operator frees space: adds resume without a restart.
        os.remove(self.ballast)

        def add_after():
            try:
                r.execute_command("ADD", "fill", "after", 0, 60000, BODY)
                return True
            except redis.ResponseError as e:
                self.assertIn("disk full", str(e))
                return False
        wait_until(add_after, timeout=10, what="an add once space is back")
        acked.append("after")
        status, text = call(server, "GET", "/healthz")
        self.assertEqual((status, json.loads(text)["status"]), (200, "ok"), text)
        # kill -9: every acknowledged job is there, no refused one is.
        server.kill(keep_data=True)
        again = self.start()
        r2 = redis.Redis(host="127.0.0.1", port=again.port, socket_timeout=5)
        for job_id in acked:
            self.assertIsNotNone(r2.execute_command("GET", job_id), job_id)
        for job_id in refused:
            self.assertIsNone(r2.execute_command("GET", job_id), job_id)
        self.assertIsNone(r2.execute_command("GET", "w1"))  # finished while full

    def test_full_disk_does_not_hold_replies_to_other_clients(self):
        server = self.start()
        writer = redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=5)
        reader = redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=5)
        acked, _ = self.fill(writer)
        for _ in range(20):  # every refused add, and every read, answered at once
            with self.assertRaises(redis.ResponseError):
                writer.execute_command("ADD", "fill", "more", 0, 60000, BODY)
            self.assertTrue(reader.ping())
            self.assertIsNotNone(reader.execute_command("GET", acked[-1]))


if __name__ == "__main__":
    harness.main()
