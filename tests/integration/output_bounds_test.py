#!/usr/bin/env python3
"""Black-box tests of what `delayq serve` does when a client reads its replies
late or never (issue 14, "Hardening", items 3 and 4), over RESP and HTTP:

- a reserve hands out no more than fits in the output limit (a batch cap by
  bytes); the rest stay ready, never attempted;
- jobs whose reply a closed connection never received go back to ready at
  once, their attempt not counted (max_attempts 1 does not bury them);
- a client that writes a long pipeline before reading any reply (redis-py's
  pipeline().execute()) is not deadlocked: the server keeps reading input
  while its replies wait.

Each class starts its own server on free loopback ports and ends it by PID.
Nothing sleeps to wait for time: waits poll with a deadline.

    /usr/bin/python3 tests/integration/output_bounds_test.py --binary build/bin/delayq
"""
import json
import socket
import sys
import time
import unittest

import redis

import harness
from harness import Server, wait_until

SMALL_RCVBUF = 16 * 1024  # the client's receive buffer: the server's output backs up


def client(server, **kw):
    return redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=30, **kw)


def resp_command(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def slow_socket(port):
    """A connected socket whose receive buffer is small (set before connect,
    so the window is small from the start)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_RCVBUF)
    s.settimeout(30)
    s.connect(("127.0.0.1", port))
    return s


class RespReader:
    """A minimal RESP reply parser over a socket, reading in small pieces."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def _fill(self):
        chunk = self.sock.recv(16384)
        if not chunk:
            raise ConnectionError("server closed the connection")
        self.buf += chunk

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def read(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if kind == b":":
            return int(rest)
        if kind == b"-":
            raise redis.ResponseError(rest.decode())
        return rest


def topic_stats(r, topic):
    fields = r.execute_command("STATS", topic)
    return {k.decode(): int(v) for k, v in zip(fields[::2], fields[1::2]) if k != b"topic"}


def job_info(r, job_id):
    fields = r.execute_command("GET", job_id)
    return {k.decode(): v for k, v in zip(fields[::2], fields[1::2])}


def add_jobs(r, topic, n, body_bytes, max_attempts=1):
    body = b"x" * body_bytes
    p = r.pipeline(transaction=False)
    for i in range(n):
        p.execute_command("ADD", topic, "%s-%03d" % (topic, i), 0, 60000, body,
                          "MAXATTEMPTS", max_attempts)
    p.execute()


def http_reserve_request(port, topic, count):
    body = json.dumps({"topics": [topic], "count": count}).encode()
    return (b"POST /v1/reserve HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (port, len(body), body))


def read_http_response(sock):
    """One HTTP/1.1 response with a Content-Length: (status, body)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(16384)
        if not chunk:
            raise ConnectionError("server closed the connection")
        buf += chunk
    head, body = buf.split(b"\r\n\r\n", 1)
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = sock.recv(16384)
        if not chunk:
            raise ConnectionError("server closed the connection mid-body")
        body += chunk
    return status, body


class SmallOutputLimitTest(unittest.TestCase):
    """A batch bigger than the output limit, from a client that reads late."""

    @classmethod
    def setUpClass(cls):
        cls.server = Server("--max-output-bytes", 1 << 20)
        cls.r = client(cls.server)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def check_rest_untouched(self, topic, total, delivered):
        st = topic_stats(self.r, topic)
        self.assertEqual((st["ready"], st["reserved"], st["buried"]),
                         (total - len(delivered), len(delivered), 0), st)
        for i in range(total):
            job_id = "%s-%03d" % (topic, i)
            if job_id.encode() in delivered:
                continue
            info = job_info(self.r, job_id)
            self.assertEqual((info["state"], info["attempts"]), (b"ready", b"0"), job_id)

    def test_resp_reserve_batch_is_cut_to_what_the_output_limit_allows(self):
        # 300 jobs of 32 KiB (9.6 MB) with max_attempts 1; the limit is 1 MiB.
        add_jobs(self.r, "cap", 300, 32 * 1024)
        s = slow_socket(self.server.port)
        try:
            s.sendall(resp_command("RESERVE", "COUNT", 300, "FROM", "cap"))
            # Not reading: wait until the server has answered the reserve.
            wait_until(lambda: topic_stats(self.r, "cap")["reserved"] > 0, timeout=10,
                       what="the reserve to be answered")
            # Still not reading; the output that did not fit in the socket is
            # still there. Then read, slowly.
            jobs = RespReader(s).read()
        finally:
            s.close()
        # A quarter of the output limit (256 KiB) of 32 KiB bodies: 8 jobs.
        self.assertEqual(len(jobs), 8)
        for job_id, topic, body, receipt, attempts, *_ in jobs:
            self.assertEqual((topic, len(body), attempts), (b"cap", 32 * 1024, 1))
        self.check_rest_untouched("cap", 300, {j[0] for j in jobs})

    def test_http_reserve_batch_is_cut_to_what_the_output_limit_allows(self):
        add_jobs(self.r, "hcap", 300, 32 * 1024)
        s = slow_socket(self.server.http_port)
        try:
            s.sendall(http_reserve_request(self.server.http_port, "hcap", 300))
            wait_until(lambda: topic_stats(self.r, "hcap")["reserved"] > 0, timeout=10,
                       what="the reserve to be answered")
            status, body = read_http_response(s)
        finally:
            s.close()
        self.assertEqual(status, 200, body[:200])
        jobs = json.loads(body)["jobs"]
        # An eighth of the output limit for JSON (128 KiB): 4 jobs.
        self.assertEqual(len(jobs), 4)
        self.assertTrue(all(j["attempts"] == 1 for j in jobs))
        self.check_rest_untouched("hcap", 300, {j["id"].encode() for j in jobs})


class WrittenDeliveriesTest(unittest.TestCase):
    """Deliveries that were written stay the client's."""

    @classmethod
    def setUpClass(cls):
        cls.server = Server()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_a_waiting_reserve_answered_after_a_written_batch_keeps_both(self):
        # Regression: the answer of a waiting RESERVE takes its place in the
        # output after a batch already written; the server crashed there.
        r = client(self.server)
        add_jobs(r, "kept", 20, 10, max_attempts=0)
        self.assertEqual(len(r.execute_command("RESERVE", "COUNT", 20, "FROM", "kept")), 20)
        later = client(self.server)
        self.assertIsNone(r.execute_command("RESERVE", "TIMEOUT", 50, "FROM", "kept.none"))
        r.execute_command("ADD", "kept.later", "late-1", 300, 60000, "x")
        jobs = r.execute_command("RESERVE", "TIMEOUT", 5000, "FROM", "kept.later")
        self.assertEqual(jobs[0][0], b"late-1")
        r.close()  # everything was read: nothing goes back
        st = topic_stats(later, "kept")
        self.assertEqual((st["reserved"], st["ready"]), (20, 0), st)
        self.assertEqual(job_info(later, "late-1")["state"], b"reserved")
        later.close()


class ClosedBeforeReadingTest(unittest.TestCase):
    """A client that sends a reserve and closes without reading: what the
    server had not written goes back to ready at once, attempts unchanged.
    The default output limit (64 MiB) lets one reply (a quarter: 16 MiB of
    bodies over RESP, an eighth over HTTP) exceed what the sockets' buffers
    hold, so part of it is still unwritten when the client goes."""

    BODY = 64 * 1024
    TOTAL = 300

    @classmethod
    def setUpClass(cls):
        cls.server = Server()
        cls.r = client(cls.server)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def reserve_then_close(self, topic, port, request, handed):
        add_jobs(self.r, topic, self.TOTAL, self.BODY)
        s = slow_socket(port)
        s.sendall(request)
        wait_until(lambda: topic_stats(self.r, topic)["reserved"] > 0, timeout=10,
                   what="the reserve to be answered")
        st = topic_stats(self.r, topic)
        self.assertEqual(st["reserved"], handed, st)  # cut to the byte budget
        s.close()  # unread data: the kernel resets the connection
        # The jobs that never left go back at once (TTR is 60 s).
        wait_until(lambda: topic_stats(self.r, topic)["ready"] > self.TOTAL - handed,
                   timeout=10, what="jobs given back")
        # All at once, as the connection closed. Whatever the server had
        # written may have been received: those stay reserved, with their
        # attempt. Nothing is buried.
        st = topic_stats(self.r, topic)
        self.assertEqual(st["buried"], 0, st)
        self.assertEqual(st["ready"] + st["reserved"], self.TOTAL, st)
        self.assertGreater(st["ready"], self.TOTAL - handed, st)
        for i in range(self.TOTAL):
            info = job_info(self.r, "%s-%03d" % (topic, i))
            expected = b"1" if info["state"] == b"reserved" else b"0"
            self.assertIn(info["state"], (b"ready", b"reserved"))
            self.assertEqual(info["attempts"], expected, info)

    def test_resp_jobs_not_written_before_close_come_back_unattempted(self):
        self.reserve_then_close("gone", self.server.port,
                                resp_command("RESERVE", "COUNT", 300, "FROM", "gone"),
                                handed=(64 << 20) // 4 // self.BODY)

    def test_http_jobs_not_written_before_close_come_back_unattempted(self):
        self.reserve_then_close("hgone", self.server.http_port,
                                http_reserve_request(self.server.http_port, "hgone", 300),
                                handed=(64 << 20) // 8 // self.BODY)


class LongPipelineTest(unittest.TestCase):
    """A client that writes its whole pipeline before reading a reply."""

    IDS = 300
    REPEAT = 1000

    @classmethod
    def setUpClass(cls):
        cls.server = Server()
        cls.r = client(cls.server)
        p = cls.r.pipeline(transaction=False)
        for i in range(cls.IDS):
            p.execute_command("ADD", "pipe", "pipe-%03d" % i, 0, 60000, b"b" * 200)
        p.execute()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_redis_py_pipeline_of_300000_gets_completes(self):
        r = client(self.server)
        p = r.pipeline(transaction=False)
        for _ in range(self.REPEAT):
            for i in range(self.IDS):
                p.execute_command("GET", "pipe-%03d" % i)
        start = time.monotonic()
        replies = p.execute()  # sends all 300,000, then reads
        elapsed = time.monotonic() - start
        self.assertEqual(len(replies), self.IDS * self.REPEAT)
        self.assertTrue(all(x is not None and len(x) == 26 for x in replies))
        self.assertEqual(replies[-1][7], b"b" * 200)
        print("300,000 pipelined GETs: %.1f s" % elapsed, file=sys.stderr)
        r.close()

    def test_http_pipeline_written_before_reading_completes(self):
        n = 300_000
        requests = b"".join(b"GET /v1/jobs/pipe-%03d HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                            % (i % self.IDS) for i in range(n))
        s = socket.create_connection(("127.0.0.1", self.server.http_port), timeout=30)
        try:
            s.sendall(requests)  # the whole pipeline before any read
            got, statuses = 0, set()
            buf, pos = bytearray(), 0
            while got < n:
                head_end = buf.find(b"\r\n\r\n", pos)
                if head_end >= 0:
                    head = bytes(buf[pos:head_end]).lower()
                    cl = head.index(b"content-length:") + len(b"content-length:")
                    length = int(head[cl:].split(b"\r\n", 1)[0])
                    if len(buf) >= head_end + 4 + length:
                        statuses.add(head[:12])
                        pos = head_end + 4 + length
                        got += 1
                        continue
                chunk = s.recv(1 << 20)
                if not chunk:
                    break
                del buf[:pos]
                pos = 0
                buf += chunk
        finally:
            s.close()
        self.assertEqual(got, n)
        self.assertEqual(statuses, {b"http/1.1 200"})

if __name__ == "__main__":
    harness.main()
