#!/usr/bin/env python3
"""Black-box tests of `delayq serve` over the Redis protocol, with a real Redis
client (redis-py) and raw sockets. Each test class starts its own server on a
free loopback port and ends it by PID. Nothing sleeps to wait for time: waits
poll with a deadline, and long-polls are bounded by their own timeouts.

    /usr/bin/python3 tests/integration/resp_server_test.py --binary build/bin/delayq
"""
import socket
import subprocess
import threading
import time
import unittest

import redis

import harness
from harness import Server, recv_all, wait_until


def client(server, **kw):
    return redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=10, **kw)


class RespServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server()
        cls.r = client(cls.server)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def cmd(self, *args):
        return self.r.execute_command(*args)

    def test_ping(self):
        self.assertTrue(self.cmd("PING"))  # redis-py reads +PONG as True

    def test_add_reserve_finish_round_trip(self):
        self.assertEqual(self.cmd("ADD", "rt", "rt-1", 0, 60000, b"body\x00\xff"), b"rt-1")
        jobs = self.cmd("RESERVE", "FROM", "rt")
        self.assertEqual(len(jobs), 1)
        # Every field of a delivery, in wire::kDeliveryFields' order.
        (job_id, topic, body, receipt, attempts, ttr_ms, priority, run_at_ms,
         reserved_until_ms, max_attempts) = jobs[0]
        self.assertEqual((job_id, topic, body, attempts), (b"rt-1", b"rt", b"body\x00\xff", 1))
        self.assertEqual((ttr_ms, priority, max_attempts), (60000, 1024, 0))
        fields = self.cmd("GET", "rt-1")
        info = dict(zip(fields[::2], fields[1::2]))
        self.assertEqual(info[b"state"], b"reserved")
        self.assertEqual(info[b"receipt"], receipt)
        self.assertEqual(int(info[b"run_at_ms"]), run_at_ms)
        # Both wall-clock estimates of one deadline, made apart: a ms may part them.
        self.assertLessEqual(abs(int(info[b"reserved_until_ms"]) - reserved_until_ms), 5)
        self.assertEqual(self.cmd("FINISH", "rt-1", receipt), b"OK")
        self.assertIsNone(self.cmd("GET", "rt-1"))

    def test_errors_have_stable_prefixes(self):
        self.cmd("ADD", "err", "e1", 0, 60000, "x")
        with self.assertRaisesRegex(redis.ResponseError, "^EXISTS"):
            self.cmd("ADD", "err", "e1", 0, 60000, "x")
        with self.assertRaisesRegex(redis.ResponseError, "^NOTFOUND"):
            self.cmd("FINISH", "nope", "FORCE")
        with self.assertRaisesRegex(redis.ResponseError, "^NOTRESERVED"):
            self.cmd("FINISH", "e1", "FORCE")
        with self.assertRaisesRegex(redis.ResponseError, "^STALE"):
            self.cmd("FINISH", "e1", "0" * 24)
        with self.assertRaisesRegex(redis.ResponseError, "^INVALID receipt: required"):
            self.cmd("FINISH", "e1")
        with self.assertRaisesRegex(redis.ResponseError,
                                    "^INVALID receipt: expected the 24 hex digits"):
            self.cmd("FINISH", "e1", "abc")
        with self.assertRaisesRegex(redis.ResponseError, "^INVALID run_at_ms: 1795659700 is "
                                    "before 2001-09-09 — it looks like seconds"):
            self.cmd("ADD", "err", "*", 0, 60000, "x", "AT", 1795659700)
        with self.assertRaisesRegex(redis.ResponseError, "^INVALID topic"):
            self.cmd("ADD", "bad topic!", "*", 0, 60000, "x")
        with self.assertRaisesRegex(redis.ResponseError, "^INVALID delay"):
            self.cmd("ADD", "err", "*", -5, 60000, "x")
        with self.assertRaisesRegex(redis.ResponseError, "unknown command"):
            self.cmd("FLUSHALL")
        with self.assertRaisesRegex(redis.ResponseError, "wrong number of arguments"):
            self.cmd("FINISH")
        # Nothing above changed the stored job.
        info = self.cmd("GET", "e1")
        self.assertEqual(dict(zip(info[::2], info[1::2]))[b"state"], b"ready")

    def test_a_receipt_or_force_is_required_and_durations_take_units(self):
        # delay and ttr with units; plain digits stay milliseconds.
        self.assertEqual(self.cmd("ADD", "force.t", "f1", "1h", "90s", "x"), b"f1")
        info = self.cmd("GET", "f1")
        info = dict(zip(info[::2], info[1::2]))
        self.assertEqual((info[b"state"], info[b"ttr_ms"]), (b"delayed", b"90000"))
        self.assertEqual(self.cmd("KICK", "f1"), b"OK")
        [job] = self.cmd("RESERVE", "TIMEOUT", "1s", "FROM", "force.t")
        for args in (("FINISH", "f1"), ("TOUCH", "f1"), ("BURY", "f1"), ("RELEASE", "f1", 0)):
            with self.subTest(args=args):
                with self.assertRaisesRegex(redis.ResponseError,
                                            "^INVALID receipt: required .*FORCE"):
                    self.cmd(*args)
        info = self.cmd("GET", "f1")
        self.assertEqual(dict(zip(info[::2], info[1::2]))[b"receipt"], job[3])
        # FORCE acts by id alone and says so.
        self.assertEqual(self.cmd("RELEASE", "f1", 0, "FORCE", "ERROR", "forced back"), b"FORCED")
        [job] = self.cmd("RESERVE", "FROM", "force.t")
        self.assertEqual(job[4], 2)
        self.assertEqual(self.cmd("FINISH", "f1", "force"), b"FORCED")
        self.assertIsNone(self.cmd("GET", "f1"))

    def test_redis_cli_pipe_mode(self):
        # redis-cli --pipe sends raw commands and ends with an ECHO it waits for.
        cmds = "".join(f"ADD pipemode pm-{i} 0 60000 x\r\n" for i in range(100))
        out = subprocess.run(["redis-cli", "-p", str(self.server.port), "--pipe"],
                             input=cmds.encode(), capture_output=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn(b"errors: 0, replies: 100", out.stdout)
        self.assertEqual(self.cmd("ECHO", "hi"), b"hi")

    def test_reserve_timeout_answers_nil(self):
        self.assertIsNone(self.cmd("RESERVE", "TIMEOUT", 50, "FROM", "empty.topic"))

    def test_long_poll_gets_a_job_that_falls_due_never_early(self):
        waiter = client(self.server)
        got = {}

        def wait():
            got["jobs"] = waiter.execute_command("RESERVE", "TIMEOUT", 5000, "FROM", "lp")
            got["at"] = time.time() * 1000

        t = threading.Thread(target=wait)
        t.start()
        wait_until(lambda: dict(zip(*[iter(self.cmd("STATS", "lp"))] * 2))[b"waiting"] == b"1",
                   what="the reserve to park")
        job_id = self.cmd("ADD", "lp", "*", 200, 60000, "soon")
        info = self.cmd("GET", job_id)
        run_at = int(dict(zip(info[::2], info[1::2]))[b"run_at_ms"])
        t.join(timeout=10)
        self.assertEqual(got["jobs"][0][0], job_id)
        self.assertGreaterEqual(got["at"], run_at)  # never early
        self.assertLess(got["at"], run_at + 2000)    # and not a poll later
        # The server measured that delivery's lateness too.
        stats = dict(zip(*[iter(self.cmd("STATS"))] * 2))
        self.assertGreaterEqual(int(stats[b"due_lateness_count"]), 1)
        self.assertLess(int(stats[b"due_lateness_p50_us"]), 1_000_000)

    def test_a_client_that_sends_fin_while_its_reserve_waits_is_gone_and_takes_no_job(self):
        # A worker that exits while its long-poll waits closes its socket with
        # a FIN (nothing unread, so no reset). The server takes it as gone, as
        # Redis and beanstalkd do at EOF: a job added next must not go to it
        # (it would stay reserved, unread, until its TTR).
        s = socket.create_connection(("127.0.0.1", self.server.port), timeout=5)
        s.sendall(b"RESERVE TIMEOUT 30000 FROM fin.t\r\n")
        stats = lambda: dict(zip(*[iter(self.cmd("STATS", "fin.t"))] * 2))  # noqa: E731
        wait_until(lambda: stats()[b"waiting"] == b"1", what="the reserve to park")
        s.shutdown(socket.SHUT_WR)
        # The connection closes without a reply (read to its end, bounded by
        # the socket's timeout); the reserve no longer waits.
        self.assertEqual(recv_all(s), b"")
        s.close()
        wait_until(lambda: stats()[b"waiting"] == b"0", what="the reserve to end")
        job_id = self.cmd("ADD", "fin.t", "*", 0, 60000, "for a live worker")
        jobs = self.cmd("RESERVE", "TIMEOUT", 1000, "FROM", "fin.t")
        self.assertEqual((jobs[0][0], jobs[0][4]), (job_id, 1))  # its first delivery
        self.assertEqual(self.cmd("FINISH", job_id, jobs[0][3]), b"OK")

    def test_a_reserve_that_arrives_with_the_clients_fin_takes_no_job(self):
        # A worker that sends RESERVE and exits at once: the command and the
        # FIN reach the server together (TCP_CORK makes them one segment, as
        # they often are anyway). The client is gone; the job must not be
        # written to its socket and stay reserved, unread, for its TTR: it
        # stays ready, undelivered. Half of them close, half only shut down
        # their sending side (and read: nothing comes).
        ids = [self.cmd("ADD", "fin.r", "*", 0, 60000, "x") for _ in range(20)]
        for i in range(20):
            s = socket.create_connection(("127.0.0.1", self.server.port), timeout=5)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
            s.sendall(b"RESERVE FROM fin.r\r\n")
            if i % 2:
                s.close()
            else:
                s.shutdown(socket.SHUT_WR)
                self.assertEqual(recv_all(s), b"")
                s.close()
        stats = lambda: dict(zip(*[iter(self.cmd("STATS", "fin.r"))] * 2))  # noqa: E731
        wait_until(lambda: stats()[b"ready"] == b"20", timeout=5,
                   what="every job ready (not reserved until its TTR)")
        jobs = self.cmd("RESERVE", "COUNT", 20, "FROM", "fin.r")
        self.assertEqual(sorted(j[0] for j in jobs), sorted(ids))
        self.assertEqual({j[4] for j in jobs}, {1})  # each job's first delivery

    def test_pipeline_of_many_commands(self):
        pipe = self.r.pipeline(transaction=False)
        for i in range(1000):
            pipe.execute_command("ADD", "pipe", f"p{i}", 0, 60000, "x")
        self.assertEqual(pipe.execute(), [f"p{i}".encode() for i in range(1000)])
        jobs = self.cmd("RESERVE", "COUNT", 1000, "FROM", "pipe")
        self.assertEqual([j[0] for j in jobs], [f"p{i}".encode() for i in range(1000)])

    def test_garbage_closes_that_connection_only(self):
        self.cmd("ADD", "keep", "k1", 0, 60000, "kept")
        s = socket.create_connection(("127.0.0.1", self.server.port), timeout=5)
        s.sendall(b"*9999999999999\r\n")
        self.assertTrue(s.recv(100).startswith(b"-ERR Protocol error"))
        self.assertEqual(s.recv(100), b"")  # closed
        s.close()
        s = socket.create_connection(("127.0.0.1", self.server.port), timeout=5)
        s.sendall(bytes(range(256)) * 4 + b"\r\n")
        s.recv(1000)
        s.close()
        info = self.cmd("GET", "k1")
        self.assertEqual(dict(zip(info[::2], info[1::2]))[b"body"], b"kept")

    def test_many_arguments_cannot_add_up_past_the_command_limit(self):
        # Each argument is under the body limit; together they are far over
        # it. The server refuses before buffering them.
        self.cmd("ADD", "keep2", "k2", 0, 60000, "kept")
        s = socket.create_connection(("127.0.0.1", self.server.port), timeout=5)
        arg = b"$200000\r\n" + b"x" * 200000 + b"\r\n"
        s.sendall(b"*200\r\n$3\r\nADD\r\n" + arg * 2)
        data = b""
        while not data.endswith(b"\r\n"):
            chunk = s.recv(1000)
            if not chunk:
                break
            data += chunk
        s.close()
        self.assertTrue(data.startswith(b"-ERR Protocol error: "), data)
        self.assertIn(b"command longer than", data)
        info = dict(zip(*[iter(self.cmd("GET", "k2"))] * 2))
        self.assertEqual(info[b"body"], b"kept")

    def test_commands_sent_before_the_client_closes_are_answered(self):
        # Exactly 64 KiB, the server's read size, so a read that fills its
        # buffer is followed by one that sees the FIN.
        pings = b"PING\r\n" * 10914
        payload = b"ADD eof eof-1 0 60000 x\r\n" + pings
        payload += b"\n" * (65536 - len(payload))  # empty lines are skipped
        self.assertEqual(len(payload), 65536)
        s = socket.create_connection(("127.0.0.1", self.server.port), timeout=5)
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)  # FIN right behind the commands, as `nc -q0` sends
        data = recv_all(s)
        s.close()
        self.assertEqual(data, b"$5\r\neof-1\r\n" + b"+PONG\r\n" * 10914)
        self.assertIsNotNone(self.cmd("GET", "eof-1"))

    def test_half_sent_command_completes(self):
        s = socket.create_connection(("127.0.0.1", self.server.port), timeout=5)
        s.sendall(b"*1\r\n$4\r\nPI")
        s.sendall(b"NG\r\n*2\r\n$4\r\nPING\r\n$2\r\nhi\r\n")
        data = b""
        while len(data) < len(b"+PONG\r\n$2\r\nhi\r\n"):
            data += s.recv(100)
        self.assertEqual(data, b"+PONG\r\n$2\r\nhi\r\n")
        s.close()


class AuthTest(unittest.TestCase):
    def test_token_is_required(self):
        server = Server("--auth-token", "s3cret")
        try:
            r = client(server)
            # redis-py turns -NOAUTH replies into AuthenticationError.
            with self.assertRaisesRegex(redis.AuthenticationError, "Authentication required"):
                r.execute_command("ADD", "a", "*", 0, 1000, "x")
            with self.assertRaisesRegex(redis.AuthenticationError, "invalid token"):
                r.execute_command("AUTH", "wrong")
            self.assertTrue(r.execute_command("AUTH", "s3cret"))  # +OK reads as True
            self.assertTrue(r.execute_command("ADD", "a", "*", 0, 1000, "x"))
            # As in Redis, a failed AUTH leaves the earlier one in force.
            # (Raw socket: redis-py drops its connection on an auth error.)
            s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            s.sendall(b"AUTH s3cret\r\nAUTH wrong\r\nGET nope\r\n")  # GET needs AUTH
            want = b"+OK\r\n-NOAUTH invalid token\r\n*-1\r\n"
            data = b""
            while len(data) < len(want):
                data += s.recv(100)
            s.close()
            self.assertEqual(data, want)
        finally:
            self.assertEqual(server.stop(), 0)


# What a reserve cut short by the server's shutdown answers (server/errors.h).
SHUTTING_DOWN = ("shutting down: the server is stopping; reserve again on another server, or on "
                 "this one once it is back")


class ShutdownTest(unittest.TestCase):
    def test_sigterm_answers_waiters_and_exits_cleanly(self):
        server = Server()
        r = client(server)
        result = {}

        def wait():
            try:
                result["r"] = r.execute_command("RESERVE", "TIMEOUT", 30000, "FROM", "never")
            except Exception as e:  # the connection closes at shutdown
                result["e"] = e

        t = threading.Thread(target=wait)
        t.start()
        probe = client(server)
        wait_until(lambda: dict(zip(*[iter(probe.execute_command("STATS"))] * 2))[b"waiting"]
                   == b"1", what="the reserve to park")
        self.assertEqual(server.stop(), 0)
        t.join(timeout=10)
        self.assertFalse(t.is_alive())
        # Drained, not cut: the waiting reserve was answered first, and not
        # with the nil of "no job": the server is going away.
        self.assertEqual(list(result), ["e"])
        self.assertIsInstance(result["e"], redis.ResponseError)
        self.assertEqual(str(result["e"]), "UNAVAILABLE " + SHUTTING_DOWN)
        self.assertIn("stopping: draining", "".join(server.log))

    def test_sigterm_serves_what_was_pipelined_behind_a_waiting_reserve(self):
        server = Server()
        s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        s.sendall(b"RESERVE TIMEOUT 30000 FROM never\r\nADD d d-1 0 60000 x\r\nPING\r\n")
        probe = client(server)
        wait_until(lambda: dict(zip(*[iter(probe.execute_command("STATS"))] * 2))[b"waiting"]
                   == b"1", what="the reserve to park")
        probe.close()
        server.signal()  # SIGTERM: the drain
        # The reserve cut short, then the commands behind it, then the close.
        self.assertEqual(recv_all(s), b"-UNAVAILABLE " + SHUTTING_DOWN.encode() +
                         b"\r\n$3\r\nd-1\r\n+PONG\r\n")
        s.close()
        self.assertEqual(server.stop(), 0)


if __name__ == "__main__":
    harness.main()
