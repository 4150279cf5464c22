#!/usr/bin/env python3
"""Black-box: what Redis's own tools expect of `delayq serve`'s RESP port —
redis-py's info(), client_setname/client_list, command_count(), a client
name set on connect, AUTH with a username; redis-cli's INFO, COMMAND COUNT,
RESP3 (-3, HELLO 3) and its interactive help, which it builds from COMMAND
DOCS when it starts. Each class starts its own server and ends it by PID.

    /usr/bin/python3 tests/integration/redis_tools_test.py --binary build/bin/delayq
"""
import re
import socket
import subprocess
import unittest

import redis

import harness
from harness import Server


def cli(server, *args, stdin=None):
    """redis-cli against the server: (stdout, stderr), checked to exit 0."""
    p = subprocess.run(["redis-cli", "-p", str(server.port), *args], input=stdin,
                       capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        raise AssertionError("redis-cli %s: exit %d: %s" % (args, p.returncode, p.stderr))
    return p.stdout, p.stderr


def read_until(sock, end):
    """Bytes from the socket until they end with `end` (or it closes)."""
    data = b""
    while not data.endswith(end):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


class RedisToolsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server()
        cls.r = redis.Redis(host="127.0.0.1", port=cls.server.port, socket_timeout=10,
                            decode_responses=True)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_redis_py_info_has_redis_sections_and_delayqs_figures(self):
        self.r.execute_command("ADD", "tools.info", "*", 0, 60000, "x")
        info = self.r.info()
        self.assertEqual(info["redis_version"], "7.0.0")
        self.assertIn("delayq_version", info)
        self.assertEqual(info["store"], "embedded")
        self.assertEqual(info["process_id"], self.server.proc.pid)
        self.assertEqual(info["tcp_port"], self.server.port)
        self.assertGreaterEqual(info["connected_clients"], 1)
        self.assertGreaterEqual(info["jobs"], 1)
        stats = self.r.execute_command("STATS")
        # Every STATS figure is in INFO, under its name.
        for key in stats[::2]:
            self.assertIn(key, info)
        self.assertEqual(set(self.r.info("server")), set(self.r.info("SERVER")))
        self.assertNotIn("jobs", self.r.info("server"))

    def test_redis_py_client_names_ids_and_lists(self):
        self.assertTrue(self.r.client_setname("tools-1"))
        self.assertEqual(self.r.client_getname(), "tools-1")
        named = redis.Redis(host="127.0.0.1", port=self.server.port, socket_timeout=10,
                            client_name="worker-7")  # CLIENT SETNAME on connect
        self.assertTrue(named.ping())
        clients = {c["name"]: c for c in self.r.client_list()}
        self.assertIn("tools-1", clients)
        self.assertIn("worker-7", clients)
        self.assertEqual(int(clients["tools-1"]["id"]), self.r.client_id())
        self.assertTrue(clients["worker-7"]["addr"].startswith("127.0.0.1:"))
        self.assertEqual(clients["worker-7"]["laddr"], "127.0.0.1:%d" % self.server.port)
        self.assertEqual(self.r.client_info()["name"], "tools-1")
        named.close()

    def test_redis_py_command_count_and_select(self):
        count = self.r.command_count()
        self.assertEqual(count, len(self.r.command()))
        self.assertEqual(self.r.command()["add"]["arity"], -6)
        db0 = redis.Redis(host="127.0.0.1", port=self.server.port, db=0, socket_timeout=10)
        self.assertTrue(db0.ping())
        with self.assertRaisesRegex(redis.ResponseError, "DB index is out of range"):
            redis.Redis(host="127.0.0.1", port=self.server.port, db=3, socket_timeout=10).ping()
        with self.assertRaisesRegex(redis.ResponseError,
                                    r"^unknown command 'FROB', with args beginning with: 'x' $"):
            self.r.execute_command("FROB", "x")

    def test_hello_3_over_a_socket_switches_to_resp3(self):
        with socket.create_connection(("127.0.0.1", self.server.port), timeout=10) as s:
            s.sendall(b"HELLO 3\r\n")
            reply = read_until(s, b"$7\r\nmodules\r\n*0\r\n")
            self.assertTrue(reply.startswith(b"%7\r\n$6\r\nserver\r\n$6\r\ndelayq\r\n"), reply)
            self.assertIn(b"$5\r\nproto\r\n:3\r\n", reply)
            s.sendall(b"GET nope\r\n")
            self.assertEqual(s.recv(100), b"_\r\n")
        hello = self.r.execute_command("HELLO", "2")  # RESP2: pairs
        self.assertEqual(dict(zip(hello[::2], hello[1::2]))["server"], "delayq")
        with self.assertRaisesRegex(redis.ResponseError, "unsupported protocol version"):
            self.r.execute_command("HELLO", "4")

    def test_redis_cli_info_command_count_and_resp3(self):
        out, err = cli(self.server, "INFO")
        self.assertIn("# Server", out)
        self.assertIn("delayq_version:", out)
        self.assertIn("# Delayq", out)
        self.assertEqual(err, "")
        out, err = cli(self.server, "COMMAND", "COUNT")
        self.assertEqual(int(out), self.r.command_count())
        out, err = cli(self.server, "-3", "HELLO", "3")
        self.assertIn("server", out)
        self.assertIn("delayq", out)
        out, err = cli(self.server, "-3", "--no-raw", "STATS")
        self.assertIn('1# "jobs" => (integer)', out)  # a RESP3 map, typed
        self.assertEqual(err, "")

    def test_redis_cli_interactive_help_comes_from_command_docs(self):
        # Without arguments redis-cli starts its REPL, which first asks
        # COMMAND DOCS for its help; a server without it made it fall back to
        # Redis's own command list, where delayq's commands are not.
        out, err = cli(self.server, stdin="PING\nhelp ADD\nhelp @queue\n")
        out = re.sub(r"\x1b\[[0-9;]*m", "", out)  # its colours
        self.assertEqual(err, "")
        self.assertIn("PONG", out)
        self.assertIn("ADD topic id|* delay ttr body [PRIORITY p] [MAXATTEMPTS n] "
                      "[AT unix_ms] [REPLACE] [IDEMPOTENCY key] [WITHSTATE]", out)
        self.assertIn("summary: Adds a job", out)
        self.assertIn("group: queue", out)
        self.assertIn("RESERVE [TIMEOUT timeout] [COUNT n] [MAXBYTES bytes] FROM topic [topic ...]",
                      out)
        self.assertIn("FINISH id receipt|FORCE", out)
        self.assertNotIn("(error)", out)
        out, err = cli(self.server, "PING")
        self.assertEqual((out, err), ("PONG\n", ""))


class RedisToolsAuthTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server("--auth-token", "tools-secret")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_username_default_and_the_token_authenticate(self):
        r = redis.Redis(host="127.0.0.1", port=self.server.port, username="default",
                        password="tools-secret", socket_timeout=10, decode_responses=True)
        self.assertTrue(r.ping())
        self.assertEqual(r.info("server")["redis_version"], "7.0.0")
        with self.assertRaises(redis.AuthenticationError):
            redis.Redis(host="127.0.0.1", port=self.server.port, username="admin",
                        password="tools-secret", socket_timeout=10).ping()
        out, err = cli(self.server, "--user", "default", "--pass", "tools-secret",
                       "--no-auth-warning", "-3", "HELLO", "3", "AUTH", "default",
                       "tools-secret")
        self.assertIn("delayq", out)
        self.assertEqual(err, "")


if __name__ == "__main__":
    harness.main()
