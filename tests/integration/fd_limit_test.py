#!/usr/bin/env python3
"""Black-box tests of `delayq serve` at its connection and descriptor limits
(issue 14, item 2): a connection past either limit is answered at once with
the protocol's busy reply (HTTP 503, RESP -ERR max number of clients
reached) and closed, never left unanswered in the kernel's backlog; the
connections already open keep being served.

The server runs with RLIMIT_NOFILE lowered to 128 in the child, so
--max-connections 10000 (the default) cannot fit: it must be lowered, with a
warning when the user asked for 10000 and silently (a debug line) when it is
the default. Every socket read is bounded by a 2 s timeout, so a server that
hangs fails the test instead of stalling it.

    /usr/bin/python3 tests/integration/fd_limit_test.py --binary build/bin/delayq
"""
import os
import re
import resource
import socket
import subprocess
import unittest

import harness
from harness import Server

FD_LIMIT = 128
ANSWER_WITHIN = 2.0  # seconds: an answer slower than this is a hang
RESP_BUSY = b"-ERR max number of clients reached\r\n"


def low_fd_limit():
    resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))


def connect(port):
    return socket.create_connection(("127.0.0.1", port), timeout=ANSWER_WITHIN)


def read_until(sock, done):
    """Bytes until done(data) or EOF; socket.timeout if neither comes in time."""
    data = b""
    while not done(data):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def closed_by_server(sock):
    """Whether the server closes `sock` (FIN or RST) once its reply is read.
    RST is closed too: a request that reached the server after it had
    answered and closed is reset by the kernel, as with any closed socket."""
    try:
        return read_until(sock, lambda d: False) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def http_response(data):
    """(status, headers, body) once `data` holds a whole response, else None."""
    head, sep, rest = data.partition(b"\r\n\r\n")
    if not sep:
        return None
    lines = head.split(b"\r\n")
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(b":")
        headers[k.strip().lower()] = v.strip()
    length = int(headers.get(b"content-length", b"0"))
    if len(rest) < length:
        return None
    return int(lines[0].split()[1]), headers, rest[:length]


class LimitTestBase(unittest.TestCase):
    server = None

    def ask_resp(self, sock, n):
        """PING over `sock`: True for PONG, False for the busy reply (after
        which the server must close the connection)."""
        try:
            sock.sendall(b"PING\r\n")
            data = read_until(sock, lambda d: d.endswith(b"\r\n"))
        except socket.timeout:
            self.fail("RESP connection %d got no answer within %.0f s" % (n, ANSWER_WITHIN))
        if data == b"+PONG\r\n":
            return True
        self.assertEqual(data, RESP_BUSY, "connection %d" % n)
        self.assertTrue(closed_by_server(sock), "busy connection not closed")
        return False

    def ask_http(self, sock, n):
        """GET /healthz over `sock` (keep-alive): True for 200, False for the
        busy reply: 503 unavailable, Connection: close, then EOF."""
        try:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            data = read_until(sock, lambda d: http_response(d) is not None)
        except socket.timeout:
            self.fail("HTTP connection %d got no answer within %.0f s" % (n, ANSWER_WITHIN))
        parsed = http_response(data)
        self.assertIsNotNone(parsed, "connection %d: closed mid-response: %r" % (n, data))
        status, headers, body = parsed
        if status == 200:
            return True
        self.assertEqual(status, 503, data)
        self.assertEqual(headers.get(b"connection"), b"close")
        self.assertIn(b'"code":"unavailable"', body)
        self.assertTrue(closed_by_server(sock), "busy connection not closed")
        return False

    def fill_then_refuse(self, port, ask, at_most):
        """Opens connections until one is refused (at most `at_most`), checks
        that a few more are refused too and that every open one is still
        served. Returns how many were served."""
        served = []
        try:
            refused = False
            for n in range(at_most):
                s = connect(port)
                if ask(s, n):
                    served.append(s)
                    continue
                s.close()
                refused = True
                break
            self.assertTrue(refused, "none of %d connections was refused" % at_most)
            self.assertGreater(len(served), 0)
            for n in range(5):  # still full: each newcomer is refused at once
                s = connect(port)
                self.assertFalse(ask(s, len(served) + 1 + n))
                s.close()
            for n, s in enumerate(served):  # the open ones are unaffected
                self.assertTrue(ask(s, n), "open connection %d no longer served" % n)
            return len(served)
        finally:
            for s in served:
                s.close()


class DescriptorLimitTest(LimitTestBase):
    """RLIMIT_NOFILE 128 under --max-connections 10000, asked for."""

    @classmethod
    def setUpClass(cls):
        cls.server = Server("--max-connections", "10000", preexec_fn=low_fd_limit)

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0, cls.server.text

    def lowered_to(self):
        m = re.search(r"--max-connections 10000 does not fit the open files limit \(128\b.*"
                      r"lowered to (\d+) per protocol", self.server.text)
        self.assertIsNotNone(m, self.server.text)
        return int(m.group(1))

    def test_log_says_max_connections_were_lowered_to_fit_the_limit(self):
        lowered = self.lowered_to()
        self.assertRegex(self.server.text, r"warn +--max-connections 10000 does not fit")
        # Both protocols' connections and the store's own descriptors fit.
        self.assertGreater(lowered, 0)
        self.assertLess(2 * lowered, FD_LIMIT)

    def test_resp_connections_past_the_limit_get_the_busy_reply(self):
        served = self.fill_then_refuse(self.server.port, self.ask_resp, FD_LIMIT + 10)
        self.assertEqual(served, self.lowered_to())

    def test_http_connections_past_the_limit_get_503(self):
        served = self.fill_then_refuse(self.server.http_port, self.ask_http, FD_LIMIT + 10)
        self.assertEqual(served, self.lowered_to())


class DefaultMaxConnectionsTest(LimitTestBase):
    """RLIMIT_NOFILE 128 under the default --max-connections: lowered as
    above, but a routine start says nothing of it (only at --log-level
    debug), since the user asked for nothing."""

    def test_a_default_start_lowers_it_silently(self):
        server = Server(preexec_fn=low_fd_limit)
        try:
            self.assertNotIn("max-connections", server.text)
            self.assertNotIn("does not fit", server.text)
            served = self.fill_then_refuse(server.port, self.ask_resp, FD_LIMIT + 10)
            self.assertLess(2 * served, FD_LIMIT)  # lowered all the same
        finally:
            self.assertEqual(server.stop(), 0, server.text)

    def test_at_debug_level_it_is_said(self):
        server = Server("--log-level", "debug", preexec_fn=low_fd_limit)
        try:
            self.assertRegex(server.text, r"debug +--max-connections 10000 does not fit the "
                                          r"open files limit \(128\b")
        finally:
            self.assertEqual(server.stop(), 0, server.text)


def sanitized(binary):
    """Whether `binary` runs under AddressSanitizer (make test's second pass)."""
    out = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
    return "libasan" in out


class OutOfDescriptorsTest(LimitTestBase):
    """The limit lowered under a running server (prlimit), below what its
    --max-connections was fitted to: accept fails with EMFILE, and the spare
    descriptor still lets each newcomer be told it is refused."""

    @classmethod
    def setUpClass(cls):
        # Out of descriptors, the sanitizers' own checks fail: UBSan's vptr
        # check tests memory through a pipe(2), finds none to make, and
        # reports a valid object as invalid (then aborts the server). The
        # release pass of make test runs this.
        if sanitized(harness.BINARY):
            raise unittest.SkipTest("needs descriptors the sanitizer runtime cannot go without")
        cls.server = Server(preexec_fn=low_fd_limit)
        cls.idle_fds = cls.open_fds()
        resource.prlimit(cls.server.proc.pid, resource.RLIMIT_NOFILE, (40, FD_LIMIT))

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0, cls.server.text

    @classmethod
    def open_fds(cls):
        return len(os.listdir("/proc/%d/fd" % cls.server.proc.pid))

    def test_connections_past_the_descriptor_limit_get_the_busy_reply(self):
        # 28 per protocol were allowed, but only 40 descriptors are left in all.
        resp = self.fill_then_refuse(self.server.port, self.ask_resp, FD_LIMIT)
        self.assertLess(resp, 28)
        # The server has closed its side of those before HTTP's turn comes.
        harness.wait_until(lambda: self.open_fds() <= self.idle_fds,
                           what="the server to close the RESP connections")
        http = self.fill_then_refuse(self.server.http_port, self.ask_http, FD_LIMIT)
        self.assertLess(http, 28)
        harness.wait_until(lambda: "RESP: cannot accept: Too many open files" in self.server.text
                           and "HTTP: cannot accept: Too many open files" in self.server.text,
                           what="the log to say accept ran out of descriptors")


class MaxConnectionsTest(LimitTestBase):
    """--max-connections well under the descriptor limit."""

    @classmethod
    def setUpClass(cls):
        cls.server = Server("--max-connections", "5")

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0, cls.server.text

    def test_resp_connection_past_max_connections_gets_the_busy_reply(self):
        self.assertEqual(self.fill_then_refuse(self.server.port, self.ask_resp, 50), 5)
        harness.wait_until(lambda: "RESP: 5 connections open" in self.server.text,
                           what="the log to say RESP refused connections")

    def test_http_connection_past_max_connections_gets_503(self):
        self.assertEqual(self.fill_then_refuse(self.server.http_port, self.ask_http, 50), 5)
        harness.wait_until(lambda: "HTTP: 5 connections open" in self.server.text,
                           what="the log to say HTTP refused connections")

    def test_max_connections_under_the_limit_is_not_lowered(self):
        self.assertNotIn("does not fit the open files limit", self.server.text)


if __name__ == "__main__":
    harness.main()
