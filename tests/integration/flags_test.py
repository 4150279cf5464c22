#!/usr/bin/env python3
"""Black-box tests of the command line's rules for option values (issue 14,
item 6), against the built binary: an empty --auth-token, numbers out of
range (negative, zero where zero means nothing, absurdly large) and values
that are really another option (`--data-dir --help`) are usage errors (exit
2) whose message names the option, and nothing is created on the way; an
empty DELAYQ_AUTH_TOKEN counts as unset; a real token is still required.

    /usr/bin/python3 tests/integration/flags_test.py --binary build/bin/delayq
"""
import http.client
import os
import re
import shutil
import socket
import subprocess
import tempfile
import unittest

import redis

import harness
from harness import Server, closed_port, run_serve

USAGE = 2


def run_cli(*args, env=None, cwd=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("DELAYQ_")}
    # Usage errors are found before connecting; a closed port makes sure.
    e["DELAYQ_SERVER"] = "127.0.0.1:%d" % closed_port()
    e.update(env or {})
    return subprocess.run([harness.BINARY, *[str(a) for a in args]], capture_output=True,
                          text=True, env=e, cwd=cwd, timeout=30)


class TempCwdTest(unittest.TestCase):
    """Each test runs the binary in an empty directory of its own, to see
    that a refused start leaves nothing behind."""

    def setUp(self):
        self.cwd = tempfile.mkdtemp(prefix="delayq-flags-")

    def tearDown(self):
        shutil.rmtree(self.cwd, ignore_errors=True)

    def refused(self, *args, flag, env=None):
        code, err = run_serve(*args, cwd=self.cwd, env=env)
        self.assertEqual(code, USAGE, (args, err))
        self.assertIn(flag, err, args)
        self.assertEqual(os.listdir(self.cwd), [], (args, "left files behind"))
        return err


class ServeFlagsTest(TempCwdTest):
    def test_an_empty_auth_token_is_refused(self):
        err = self.refused("--auth-token", "", flag="--auth-token")
        self.assertIn("must not be empty", err)
        self.refused("--auth-token=", flag="--auth-token")

    def test_negative_and_absurd_numbers_are_refused_naming_the_flag(self):
        for flag, value in [("--max-connections", "-5"), ("--max-connections", "0"),
                            ("--max-connections", "99999999999"),
                            ("--max-body", "-1"), ("--max-header-bytes", "-1"),
                            ("--max-output-bytes", "-1"), ("--segment-bytes", "-1"),
                            ("--redis-buckets", "-1"), ("--redis-wait-replicas", "-1"),
                            ("--redis-wait-replicas", "1001"), ("--redis-wait-timeout", "0"),
                            ("--redis-wait-timeout-ms", "0"), ("--http-port", "-1"),
                            ("--resp-port", "70000"), ("--idle-timeout-ms", "-1"),
                            ("--idle-timeout-ms", "9223372036854775807"),
                            ("--request-timeout-ms", "-5"),
                            ("--shutdown-timeout-ms", "99999999999999")]:
            with self.subTest(flag=flag, value=value):
                self.refused("--store", "memory", flag, value, flag=flag)

    def test_a_number_out_of_range_in_the_environment_is_refused_too(self):
        self.refused("--store", "memory", env={"DELAYQ_MAX_CONNECTIONS": "-5"},
                     flag="--max-connections")

    def test_a_value_that_is_another_option_is_refused(self):
        # Once, this created a directory named "--help" and served from it.
        err = self.refused("--data-dir", "--help", flag="--data-dir")
        self.assertIn("'--help'", err)
        self.refused("--data-dir", "--store", "memory", flag="--data-dir")
        self.refused("--store", "memory", "--http-host", "--resp-port", "0", flag="--http-host")
        self.refused("--store", "memory", "--auth-token", "--log-level", "debug",
                     flag="--auth-token")


# serve's time options: a duration (the one syntax of every duration delayq
# takes) beside the whole-milliseconds form each had.
DURATION_FLAGS = ["--dedup-window", "--redis-wait-timeout", "--idle-timeout", "--request-timeout",
                  "--shutdown-timeout"]


def env_name(flag):
    return "DELAYQ_" + flag[2:].upper().replace("-", "_")


class DurationFlagsTest(TempCwdTest):
    def test_both_forms_given_are_a_usage_error_naming_both(self):
        for flag in DURATION_FLAGS:
            with self.subTest(flag=flag):
                err = self.refused("--store", "memory", flag, "1s", flag + "-ms", "1000", flag=flag)
                self.assertIn(f"delayq serve: {flag} and {flag}-ms: give one, not both ({flag} "
                              f"takes a duration such as 30s, {flag}-ms whole milliseconds)", err)
                env = {env_name(flag): "1s", env_name(flag + "-ms"): "1000"}
                err = self.refused("--store", "memory", env=env, flag=env_name(flag))
                self.assertIn(f"delayq serve: {env_name(flag)} and {env_name(flag + '-ms')}: "
                              "give one, not both", err)

    def test_a_bad_duration_names_the_option_and_the_value(self):
        err = self.refused("--store", "memory", "--request-timeout", "30x",
                           flag="delayq serve: --request-timeout: ")
        self.assertIn("'30x'", err)
        err = self.refused("--store", "memory", "--idle-timeout", "5000",
                           flag="delayq serve: --idle-timeout: ")
        self.assertIn("'5000'", err)  # a bare number: the -ms form takes those
        err = self.refused("--store", "memory", "--shutdown-timeout", "2d",
                           flag="delayq serve: --shutdown-timeout: ")
        self.assertIn("'2d' is longer than the longest allowed, 1d", err)
        err = self.refused("--store", "memory", env={"DELAYQ_REQUEST_TIMEOUT": "5x"},
                           flag="delayq serve: DELAYQ_REQUEST_TIMEOUT: ")
        self.assertIn("'5x'", err)

    def test_help_shows_the_duration_form_first(self):
        r = subprocess.run([harness.BINARY, "serve", "--help"], capture_output=True, text=True,
                           timeout=30)
        for flag in DURATION_FLAGS:
            with self.subTest(flag=flag):
                self.assertIn(f"{flag} DURATION=", r.stdout)
                self.assertLess(r.stdout.index(f"{flag} DURATION"), r.stdout.index(f"{flag}-ms "))
        self.assertIn("--request-timeout DURATION=10s (Env:DELAYQ_REQUEST_TIMEOUT)", r.stdout)


class DurationFlagsTakeEffectTest(unittest.TestCase):
    """--idle-timeout 300ms closes an idle connection long before the
    default 5 minutes: given as a flag, in the environment, and as a flag
    over the other form's variable (a flag wins, as over its own)."""

    def closes_idle_connections(self, *args, env=None):
        server = Server("--store", "memory", *args, env=env)
        try:
            s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            self.assertEqual(s.recv(1), b"")  # closed by the server, not timed out here
            s.close()
        finally:
            self.assertEqual(server.stop(), 0)

    def test_as_a_flag(self):
        self.closes_idle_connections("--idle-timeout", "300ms")

    def test_from_the_environment(self):
        self.closes_idle_connections(env={"DELAYQ_IDLE_TIMEOUT": "300ms"})

    def test_a_flag_wins_over_the_other_forms_variable(self):
        self.closes_idle_connections("--idle-timeout", "300ms",
                                     env={"DELAYQ_IDLE_TIMEOUT_MS": "600000"})


class DataDirOfAStoreThatDoesNotUseItTest(unittest.TestCase):
    """--data-dir given to --store memory is said at start not to be used,
    only when it was given (flag or DELAYQ_DATA_DIR)."""

    def started(self, *args, env=None, data_dir=None):
        server = Server("--store", "memory", *args, env=env, data_dir=data_dir)
        try:
            return server.text
        finally:
            self.assertEqual(server.stop(), 0)

    def test_said_when_given(self):
        d = tempfile.mkdtemp(prefix="delayq-unused-")
        try:
            said = self.started(data_dir=d)
            self.assertIn(f"warn  --data-dir {d} is not used by --store memory: nothing is kept, "
                          "every job is lost when the server stops", said)
            said = self.started(env={"DELAYQ_DATA_DIR": d})
            self.assertIn(f"DELAYQ_DATA_DIR {d} is not used by --store memory", said)
            self.assertEqual(os.listdir(d), [])
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def test_silent_when_not_given(self):
        self.assertNotIn("is not used", self.started())


class EmptyTokenInTheEnvironmentTest(unittest.TestCase):
    def test_an_empty_DELAYQ_AUTH_TOKEN_counts_as_unset(self):
        server = Server("--store", "memory", env={"DELAYQ_AUTH_TOKEN": ""})
        try:
            self.assertNotIn("auth required", server.text)
            r = redis.Redis(port=server.port, socket_timeout=5)
            self.assertTrue(r.ping())
            self.assertEqual(r.execute_command("TOPICS"), [])
            r.close()
        finally:
            self.assertEqual(server.stop(), 0)


class AuthTest(unittest.TestCase):
    """A real token still guards everything but /healthz."""

    @classmethod
    def setUpClass(cls):
        cls.server = Server("--store", "memory", "--auth-token", "s3cret")

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0

    def get(self, path, token=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.server.http_port, timeout=5)
        try:
            headers = {"Authorization": "Bearer " + token} if token is not None else {}
            conn.request("GET", path, headers=headers)
            resp = conn.getresponse()
            resp.read()
            return resp.status
        finally:
            conn.close()

    def test_http_needs_the_bearer_token(self):
        self.assertIn("auth required", self.server.text)
        for path in ("/v1/stats", "/metrics", "/v1/topics"):
            with self.subTest(path=path):
                self.assertEqual(self.get(path), 401)
                self.assertEqual(self.get(path, "wrong"), 401)
                self.assertEqual(self.get(path, "s3cre"), 401)
                self.assertEqual(self.get(path, "s3cret-and-more"), 401)
                self.assertEqual(self.get(path, "s3cret"), 200)
        self.assertEqual(self.get("/healthz"), 200)  # open, for load balancers

    def test_resp_needs_auth(self):
        s = socket.create_connection(("127.0.0.1", self.server.port), timeout=5)
        try:
            def ask(command):
                s.sendall(command)
                data = b""
                while not data.endswith(b"\r\n"):
                    chunk = s.recv(4096)
                    self.assertNotEqual(chunk, b"", "closed after %r" % command)
                    data += chunk
                return data

            self.assertEqual(ask(b"PING\r\n"), b"+PONG\r\n")  # open, as in Redis
            self.assertTrue(ask(b"TOPICS\r\n").startswith(b"-NOAUTH "))
            self.assertEqual(ask(b"AUTH s3cre\r\n"), b"-NOAUTH invalid token\r\n")
            self.assertEqual(ask(b"AUTH s3cret-and-more\r\n"), b"-NOAUTH invalid token\r\n")
            self.assertTrue(ask(b"TOPICS\r\n").startswith(b"-NOAUTH "))
            self.assertEqual(ask(b"AUTH s3cret\r\n"), b"+OK\r\n")
            self.assertEqual(ask(b"TOPICS\r\n"), b"*0\r\n")
        finally:
            s.close()


class ClientFlagsTest(TempCwdTest):
    def usage_error(self, *args, flag):
        r = run_cli(*args, cwd=self.cwd)
        self.assertEqual(r.returncode, USAGE, (args, r.stderr))
        self.assertIn(flag, r.stderr, args)
        self.assertEqual(r.stdout, "")

    def test_negative_and_absurd_numbers_are_refused_naming_the_flag(self):
        for args, flag in [(["add", "t", "x", "--delay-ms", "-5"], "--delay-ms"),
                           (["add", "t", "x", "--run-at-ms", "-1"], "--run-at-ms"),
                           (["add", "t", "x", "--ttr-ms", "0"], "--ttr-ms"),
                           (["add", "t", "x", "--ttr-ms", "4294967296"], "--ttr-ms"),
                           (["add", "t", "x", "--priority", "-1"], "--priority"),
                           (["add", "t", "x", "--max-attempts", "-1"], "--max-attempts"),
                           (["reserve", "t", "--count", "0"], "--count"),
                           (["reserve", "t", "--count", "1001"], "--count"),
                           (["reserve", "t", "--wait-ms", "-1"], "--wait-ms"),
                           (["release", "j", "--delay-ms", "-1"], "--delay-ms"),
                           # Arguments are named as usage lines show them.
                           (["kicktopic", "t", "-1"], "kicktopic: N takes"),
                           (["pause", "t", "-5"], "pause: MS takes")]:
            with self.subTest(args=args):
                self.usage_error(*args, flag=flag)

    def test_an_empty_auth_token_and_option_like_values_are_refused(self):
        self.usage_error("ping", "--auth-token", "", flag="--auth-token")
        self.usage_error("ping", "--server", "--json", flag="--server")
        self.usage_error("finish", "j", "--receipt", "--json", flag="--receipt")
        self.usage_error("add", "t", "--id", "--replace", flag="--id")


class VersionTest(unittest.TestCase):
    def test_version_is_the_cmake_project_version(self):
        cmake = os.path.join(os.path.dirname(__file__), "..", "..", "CMakeLists.txt")
        with open(cmake, encoding="utf-8") as f:
            version = re.search(r"project\(delayq VERSION (\S+)", f.read()).group(1)
        r = run_cli("--version")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "delayq " + version)


class EmbeddedExampleTest(TempCwdTest):
    """examples/embedded.cc takes one optional argument, a data directory."""

    def setUp(self):
        super().setUp()
        self.example = os.path.join(os.path.dirname(harness.BINARY), "delayq-example-embedded")
        if not os.path.exists(self.example):
            self.skipTest("delayq-example-embedded is not built here")

    def run_example(self, *args):
        return subprocess.run([self.example, *args], capture_output=True, text=True,
                              cwd=self.cwd, timeout=30)

    def test_options_and_extra_arguments_are_refused_and_create_nothing(self):
        r = self.run_example("--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("usage:", r.stderr)
        for args in (["--bogus"], ["--data-dir"], ["-x"], ["dir", "extra"]):
            with self.subTest(args=args):
                r = self.run_example(*args)
                self.assertEqual(r.returncode, USAGE, r.stderr)
                self.assertIn("usage:", r.stderr)
        self.assertEqual(os.listdir(self.cwd), [])


if __name__ == "__main__":
    harness.main()
