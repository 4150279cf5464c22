#!/usr/bin/env python3
"""The clients' examples (clients/{python,node,go}/examples/worker.*): the same
program in three languages, run alike against a real `delayq serve --store
memory`. Each reads DELAYQ_SERVER and DELAYQ_TOPIC (default orders.close),
prints `done <id>` once per job whose finish the server accepted and nothing
else on stdout, and on SIGTERM (or SIGINT) drains and exits 0.

    /usr/bin/python3 tests/integration/client_examples_test.py --binary build/bin/delayq

The Python example runs from the source tree (PYTHONPATH=clients/python/src),
the Node one from clients/node (its node_modules: scripts/bootstrap.sh runs
`npm ci` there), the Go one built first with `go build` (offline: GOPROXY=off),
so that the signal reaches the program itself, not `go run`. (Each client's
README's first example is run by that client's own suite.)
"""
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import unittest

import harness
import redis

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CLIENTS = os.path.join(ROOT, "clients")
JOBS = 30


def add_jobs(server, topic, n, prefix):
    """n jobs due now on `topic`, ids prefix-0 ... prefix-(n-1), over RESP."""
    r = redis.Redis(host="127.0.0.1", port=server.port)
    try:
        ids = [f"{prefix}-{i}" for i in range(n)]
        for i, job_id in enumerate(ids):
            r.execute_command("ADD", topic, job_id, 0, 30000, '{"order":%d}' % i)
        return ids
    finally:
        r.close()


class Example:
    """One language's example: how to build it (once) and start it."""

    def __init__(self, name, command, cwd, env=None, build=None):
        self.name, self.command, self.cwd = name, command, cwd
        self.env, self.build = env or {}, build

    def start(self, server, topic=None):
        env = harness.server_env({"DELAYQ_SERVER": server.address, **self.env})
        if topic is not None:
            env["DELAYQ_TOPIC"] = topic
        return Running(subprocess.Popen(self.command, cwd=self.cwd, env=env, text=True,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE))


class Running:
    """A started example whose stdout lines are collected by a thread, so a
    wait for them is a poll with a deadline."""

    def __init__(self, proc):
        self.proc = proc
        self.lines = []
        self.err = []
        self._out = threading.Thread(target=self._read, args=(proc.stdout, self.lines))
        self._err = threading.Thread(target=self._read, args=(proc.stderr, self.err))
        self._out.start()
        self._err.start()

    @staticmethod
    def _read(stream, into):
        for line in stream:
            into.append(line.rstrip("\n"))

    def stop(self, sig=signal.SIGTERM, timeout=40):
        """Sends `sig`, waits for the exit; the exit code (killed after
        `timeout` s: reported as None)."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            code = None
        self._out.join(timeout=10)
        self._err.join(timeout=10)
        self.proc.stdout.close()
        self.proc.stderr.close()
        return code

    def output(self):
        return "stdout:\n%s\nstderr:\n%s" % ("\n".join(self.lines), "\n".join(self.err))


def go_build(out_dir):
    binary = os.path.join(out_dir, "worker")
    env = dict(os.environ, GOPROXY="off", GOFLAGS="-mod=mod")
    subprocess.run(["go", "build", "-o", binary, "./examples/worker.go"],
                   cwd=os.path.join(CLIENTS, "go"), env=env, check=True, timeout=300,
                   capture_output=True)
    return [binary]


class ClientExamplesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.scratch = tempfile.mkdtemp(prefix="delayq-client-examples-")
        cls.examples = [
            Example("python", ["/usr/bin/python3", os.path.join(CLIENTS, "python", "examples",
                                                                 "worker.py")],
                    cwd=cls.scratch, env={"PYTHONPATH": os.path.join(CLIENTS, "python", "src")}),
            Example("node", ["node", os.path.join("examples", "worker.mjs")],
                    cwd=os.path.join(CLIENTS, "node")),
            Example("go", go_build(cls.scratch), cwd=cls.scratch),
        ]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.scratch, ignore_errors=True)

    def setUp(self):
        self.server = harness.Server("--store", "memory")
        self.addCleanup(self.server.stop)

    def test_each_example_finishes_every_job_once_and_exits_0_on_sigterm(self):
        for example in self.examples:
            with self.subTest(example.name):
                ids = add_jobs(self.server, "orders.close", JOBS, example.name)
                running = example.start(self.server)
                try:
                    harness.wait_until(lambda: len(running.lines) >= JOBS, timeout=30,
                                       what=f"{example.name}: {JOBS} done lines")
                finally:
                    code = running.stop(signal.SIGTERM)
                self.assertEqual(code, 0, running.output())
                self.assertEqual(sorted(running.lines), sorted(f"done {i}" for i in ids),
                                 running.output())
                # Nothing left behind: every job finished, none reserved.
                stats = self.server.stats()
                self.assertEqual((stats["jobs"], stats["reserved"]), (0, 0), stats)

    def test_each_example_takes_its_topic_from_DELAYQ_TOPIC_and_stops_on_sigint(self):
        for example in self.examples:
            with self.subTest(example.name):
                topic = f"reminders.{example.name}"
                other = add_jobs(self.server, "orders.close", 3, f"{example.name}-other")
                ids = add_jobs(self.server, topic, 5, f"{example.name}-topic")
                running = example.start(self.server, topic=topic)
                try:
                    harness.wait_until(lambda: len(running.lines) >= 5, timeout=30,
                                       what=f"{example.name}: 5 done lines")
                finally:
                    code = running.stop(signal.SIGINT)
                self.assertEqual(code, 0, running.output())
                self.assertEqual(sorted(running.lines), sorted(f"done {i}" for i in ids),
                                 running.output())
                # The default topic's jobs were not touched: still ready.
                r = redis.Redis(host="127.0.0.1", port=self.server.port)
                try:
                    for job_id in other:
                        job = r.execute_command("GET", job_id)
                        fields = dict(zip(job[::2], job[1::2]))
                        self.assertEqual(fields[b"state"], b"ready", fields)
                        self.assertEqual(fields[b"attempts"], b"0", fields)
                        r.execute_command("DELETE", job_id)
                finally:
                    r.close()

    def test_each_example_with_no_job_stops_at_once_on_sigterm(self):
        # An idle worker holds one waiting reserve; SIGTERM cancels it and
        # the program exits 0 without waiting out the reserve's long poll.
        for example in self.examples:
            with self.subTest(example.name):
                running = example.start(self.server)
                harness.wait_until(lambda: self.server.stats().get("waiting", 0) >= 1,
                                   timeout=30, what=f"{example.name}: a waiting reserve")
                code = running.stop(signal.SIGTERM, timeout=10)
                self.assertEqual(code, 0, running.output())
                self.assertEqual(running.lines, [], running.output())
                harness.wait_until(lambda: self.server.stats().get("waiting", 0) == 0,
                                   timeout=10, what="the reserve withdrawn")


if __name__ == "__main__":
    harness.main()
