#!/usr/bin/env python3
"""Black-box tests of `delayq work TOPIC -- COMMAND` against a real
`delayq serve --store memory` on free loopback ports: real commands run per
job (sh scripts writing what they got to files), real signals. Jobs are
added and read back over RESP with redis-py. Every process started here is
ended by PID. Nothing sleeps to wait for time: the tests poll with
wait_until; the commands' own `sleep` is what they are (a slow job).

    /usr/bin/python3 tests/integration/work_test.py --binary build/bin/delayq
"""
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

import redis

import harness
from harness import Server, closed_port, wait_until

OK, USAGE, UNAVAILABLE = 0, 2, 4


class Work:
    """A running `delayq work`, its stdout and stderr in files."""

    def __init__(self, server, *args, env=None):
        self.dir = tempfile.mkdtemp(prefix="delayq-work-")
        self.out = open(os.path.join(self.dir, "stdout"), "w+b")
        self.err = open(os.path.join(self.dir, "stderr"), "w+b")
        e = harness.server_env(env)
        e["DELAYQ_SERVER"] = server if isinstance(server, str) else server.address
        self.proc = subprocess.Popen([harness.BINARY, "work", *[str(a) for a in args]],
                                     stdout=self.out, stderr=self.err, env=e)

    def signal(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def wait(self, timeout=15):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise

    def stop(self):
        """SIGTERM, then the exit code (SIGKILL by PID if it hangs)."""
        self.signal()
        return self.wait()

    def stdout(self):
        self.out.seek(0)
        return self.out.read().decode(errors="replace")

    def stderr(self):
        self.err.seek(0)
        return self.err.read().decode(errors="replace")

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.out.close()
        self.err.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def run_work(*args, env=None, timeout=30):
    """`delayq work ARGS` expected to exit on its own."""
    e = harness.server_env(env)
    return subprocess.run([harness.BINARY, "work", *[str(a) for a in args]], env=e,
                          capture_output=True, timeout=timeout)


class WorkTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server("--store", "memory")
        cls.redis = redis.Redis(port=cls.server.port, socket_timeout=10)

    @classmethod
    def tearDownClass(cls):
        cls.redis.close()
        cls.server.stop()

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="delayq-work-out-")
        self.works = []

    def tearDown(self):
        for w in self.works:
            w.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def work(self, *args, server=None):
        w = Work(server or self.server, *args, env={"OUT": self.tmp})
        self.works.append(w)
        return w

    def add(self, topic, job_id, body=b"", ttr_ms=60000, *extra):
        self.redis.execute_command("ADD", topic, job_id, 0, ttr_ms, body, *extra)

    def get(self, job_id):
        """The job as a dict of str, None once it is gone."""
        got = self.redis.execute_command("GET", job_id)
        if got is None:
            return None
        return {got[i].decode(): got[i + 1] for i in range(0, len(got), 2)}

    def path(self, name):
        return os.path.join(self.tmp, name)

    def read(self, name):
        with open(self.path(name), "rb") as f:
            return f.read()

    def gone(self, job_id, timeout=10):
        wait_until(lambda: self.get(job_id) is None, timeout=timeout,
                   what="job %s finished" % job_id)

    def test_a_command_that_exits_0_gets_the_body_and_environment_and_finishes_the_job(self):
        big = bytes(range(256)) * 800  # 200 KiB: more than a pipe holds
        self.add("work.ok", "ok-1", b"hello\nworld")
        self.add("work.ok", "ok-2", big)
        # The first server is down: the list fails over to the second.
        servers = "127.0.0.1:%d,%s" % (closed_port(), self.server.address)
        w = self.work("work.ok", "--concurrency", 2, "--", "sh", "-c",
                      'cat > "$OUT/$DELAYQ_JOB_ID.body"; env | grep ^DELAYQ_ | sort '
                      '> "$OUT/$DELAYQ_JOB_ID.env"; echo "out $DELAYQ_JOB_ID"',
                      server=servers)
        self.gone("ok-1")
        self.gone("ok-2")
        self.assertEqual(self.read("ok-1.body"), b"hello\nworld")
        self.assertEqual(self.read("ok-2.body"), big)
        env = dict(line.split("=", 1) for line in self.read("ok-1.env").decode().splitlines())
        self.assertEqual((env["DELAYQ_JOB_ID"], env["DELAYQ_TOPIC"], env["DELAYQ_ATTEMPTS"]),
                         ("ok-1", "work.ok", "1"))
        self.assertRegex(env["DELAYQ_RECEIPT"], r"^[0-9a-f]{24}$")
        self.assertEqual(w.stop(), OK, w.stderr())
        self.assertEqual(sorted(w.stdout().splitlines()), ["out ok-1", "out ok-2"])
        self.assertRegex(w.stderr(), r"job ok-1 \(work\.ok, attempt 1\): exit 0 in \d+ ms")

    def test_a_command_gets_no_descriptor_of_delayq_work_but_0_1_2(self):
        # Fails before: the client's hiredis sockets (no SOCK_CLOEXEC) were
        # inherited: job code held an authenticated server connection.
        self.add("work.fds", "fds-1")
        # The command lists its own descriptors (listdir's, closed by the time
        # it is read, drops out), then writes them: "fd target" per line.
        lister = ('import os\n'
                  'fds = []\n'
                  'for f in os.listdir("/proc/self/fd"):\n'
                  '    try: fds.append(f + " " + os.readlink("/proc/self/fd/" + f))\n'
                  '    except OSError: pass\n'
                  'open(os.environ["OUT"] + "/fds", "w").write("\\n".join(fds))\n')
        w = self.work("work.fds", "--concurrency", 2, "--", "/usr/bin/python3", "-c", lister)
        self.gone("fds-1")
        listing = self.read("fds").decode()
        fds = dict((int(line.split(" ", 1)[0]), line.split(" ", 1)[1])
                   for line in listing.splitlines())
        self.assertFalse([t for t in fds.values() if t.startswith("socket:")], listing)
        self.assertEqual(sorted(fds), [0, 1, 2], listing)
        self.assertEqual(w.stop(), OK, w.stderr())

    def test_a_command_that_closes_its_stderr_still_gets_the_whole_body(self):
        # Fails before: feeding stdin stopped at stderr's EOF (65,536 bytes).
        body = b"z" * 200000
        self.add("work.nostderr", "nostderr-1", body)
        w = self.work("work.nostderr", "--", "sh", "-c",
                      'exec 2>&-; wc -c > "$OUT/count.tmp"; mv "$OUT/count.tmp" "$OUT/count"')
        self.gone("nostderr-1")
        self.assertEqual(self.read("count").strip(), b"200000")
        self.assertEqual(w.stop(), OK, w.stderr())

    def test_a_failing_command_releases_the_job_with_its_exit_code_and_stderr_tail(self):
        self.add("work.fail", "fail-1", b"x", 60000, "MAXATTEMPTS", 2)
        start = time.monotonic()
        w = self.work("work.fail", "--backoff", "300ms", "--", "sh", "-c",
                      'echo "$DELAYQ_ATTEMPTS" >> "$OUT/attempts"; '
                      'head -c 3000 /dev/zero | tr "\\0" y >&2; echo "boom at the end" >&2; '
                      'exit 3')
        job = wait_until(lambda: (lambda j: j if j["state"] == b"buried"
                                  else None)(self.get("fail-1")),
                         timeout=10, what="fail-1 buried after two attempts")
        elapsed = time.monotonic() - start
        self.assertEqual(self.read("attempts"), b"1\n2\n")  # DELAYQ_ATTEMPTS counts deliveries
        self.assertGreaterEqual(elapsed, 0.3)  # the retry waited for --backoff
        error = job["last_error"].decode()
        self.assertTrue(error.startswith("exit 3: yyy"), error)
        self.assertTrue(error.endswith("yyyboom at the end"), error[-40:])
        self.assertEqual(len(error), 1024)  # the tail that fits what the queue keeps
        self.assertEqual(int(job["attempts"]), 2)
        self.assertEqual(w.stop(), OK, w.stderr())
        self.assertIn("job fail-1 (work.fail, attempt 1): exit 3", w.stderr())

    def test_a_release_that_uses_up_max_attempts_is_logged_as_the_bury_it_is(self):
        # Fails before: logged "attempt 2: released" and counted "2 released
        # for a retry" for a job the server had buried.
        self.add("work.used", "used-1", b"", 60000, "MAXATTEMPTS", 2)
        w = self.work("work.used", "--backoff", "10ms", "--", "sh", "-c", "exit 3")
        wait_until(lambda: (self.get("used-1") or {}).get("state") == b"buried", timeout=10,
                   what="used-1 buried after two attempts")
        self.assertEqual(w.stop(), OK, w.stderr())
        err = w.stderr()
        self.assertRegex(err, r"job used-1 \(work\.used, attempt 1\): exit 3 in \d+ ms\n")
        self.assertIn("job used-1 (work.used, attempt 1): released\n", err)
        self.assertIn("job used-1 (work.used, attempt 2): buried (max_attempts 2 used up)\n",
                      err)
        self.assertNotIn("attempt 2): released", err)
        self.assertIn("delayq work: stopped: 0 finished, 1 released for a retry, 1 buried "
                      "(max_attempts used up), 0 given back\n", err)

    def test_a_command_killed_by_a_signal_releases_the_job_saying_so(self):
        self.add("work.kill", "kill-1", b"", 60000, "MAXATTEMPTS", 1)
        w = self.work("work.kill", "--", "sh", "-c", 'echo dying >&2; kill -9 $$')
        job = wait_until(lambda: (lambda j: j if j["state"] == b"buried" else None)(
            self.get("kill-1")), timeout=10, what="kill-1 buried")
        self.assertTrue(job["last_error"].decode().startswith(
            "killed by signal 9 (SIGKILL): dying"), job["last_error"])
        self.assertEqual(w.stop(), OK, w.stderr())

    def test_a_command_slower_than_its_ttr_keeps_its_reservation(self):
        timed_out = self.server.stats()["timed_out"]
        self.add("work.slow", "slow-1", b"", 1000)  # TTR 1 s; the command takes 2.5 s
        w = self.work("work.slow", "--concurrency", 2, "--", "sh", "-c",
                      'echo "$DELAYQ_ATTEMPTS" >> "$OUT/runs"; sleep 2.5')
        self.gone("slow-1", timeout=15)
        self.assertEqual(self.read("runs"), b"1\n")  # handed out once
        self.assertEqual(self.server.stats()["timed_out"], timed_out)  # touched, never expired
        self.assertEqual(w.stop(), OK, w.stderr())

    def test_sigterm_lets_a_running_command_finish_and_exits_0(self):
        self.add("work.drain", "drain-1")
        w = self.work("work.drain", "--", "sh", "-c",
                      'touch "$OUT/started"; sleep 1; touch "$OUT/done"')
        wait_until(lambda: os.path.exists(self.path("started")), timeout=10,
                   what="the command started")
        w.signal(signal.SIGTERM)
        self.assertEqual(w.wait(), OK, w.stderr())
        self.assertTrue(os.path.exists(self.path("done")))
        self.assertIsNone(self.get("drain-1"))  # finished within the drain
        self.assertIn("SIGTERM: no more jobs", w.stderr())

    def sleeper(self, topic, job_id, drain):
        """`delayq work` with DRAIN over a command that runs 30 s, once it runs JOB_ID."""
        self.add(topic, job_id)
        w = self.work(topic, "--drain", drain, "--", "sh", "-c",
                      'touch "$OUT/started"; sleep 30')
        wait_until(lambda: os.path.exists(self.path("started")), timeout=10,
                   what="the command started")
        return w

    def test_a_drain_that_runs_out_releases_the_job_and_exits_0(self):
        w = self.sleeper("work.cut", "cut-1", "200ms")
        start = time.monotonic()
        w.signal(signal.SIGINT)
        self.assertEqual(w.wait(), OK, w.stderr())
        self.assertLess(time.monotonic() - start, 10)  # not the command's 30 s
        job = self.get("cut-1")
        self.assertEqual(job["state"], b"ready")  # released, due at once
        self.assertEqual(job["last_error"], b"worker stopped while the handler ran")

    def test_a_second_signal_ends_the_drain_at_once(self):
        w = self.sleeper("work.twice", "twice-1", "10m")
        start = time.monotonic()
        w.signal(signal.SIGTERM)
        wait_until(lambda: "no more jobs" in w.stderr(), timeout=10,
                   what="the first SIGTERM taken")
        self.assertIsNone(w.proc.poll())  # draining: the command may take its 10 minutes
        w.signal(signal.SIGINT)
        self.assertEqual(w.wait(), OK, w.stderr())
        self.assertLess(time.monotonic() - start, 10)  # neither the drain nor the sleep
        self.assertIn("SIGINT again: the drain ends", w.stderr())
        job = self.get("twice-1")
        self.assertIsNotNone(job)  # released for a retry, not finished
        self.assertIn(b"SIGTERM", job["last_error"])
        self.assertEqual(job["attempts"], b"1")

    def test_an_error_during_the_drain_is_logged(self):
        # Fails before: errors were logged only until the stop began, so a
        # finish lost with its server during the drain left no trace.
        server = Server("--store", "memory")
        try:
            client = redis.Redis(port=server.port, socket_timeout=10)
            client.execute_command("ADD", "work.lost", "lost-1", 0, 60000, "")
            client.close()
            w = self.work("work.lost", "--drain", "5s", "--", "sh", "-c",
                          'touch "$OUT/started"; '
                          'while [ ! -e "$OUT/go" ]; do sleep 0.05; done', server=server)
            wait_until(lambda: os.path.exists(self.path("started")), timeout=10,
                       what="the command started")
            w.signal(signal.SIGTERM)
            wait_until(lambda: "no more jobs" in w.stderr(), timeout=10,
                       what="the SIGTERM taken")
            server.kill()  # the finish of the command below cannot be delivered
            open(self.path("go"), "w").close()
            self.assertEqual(w.wait(), OK, w.stderr())
            self.assertRegex(w.stderr(), r"delayq work: \d+ error\(s\); the last: ")
        finally:
            if server.proc.poll() is None:
                server.kill()

    def test_bad_input_is_refused_before_anything_runs(self):
        addr = self.server.address
        for args, message in (
                (["t", "true"], "the command goes after '--'"),
                (["t", "--"], "the command goes after '--'"),
                (["t"], "the command goes after '--'"),
                (["bad topic", "--", "true"], "topic 'bad topic'"),
                (["t", "--", "no-such-command-here"], "'no-such-command-here': not found"),
                (["t", "--drain", "5x", "--", "true"], "--drain: unknown unit"),
                (["t", "--concurrency", 0, "--", "true"], "--concurrency")):
            with self.subTest(args=args):
                r = run_work("--server", addr, *args)
                self.assertEqual(r.returncode, USAGE, r.stderr)
                self.assertIn(message, r.stderr.decode())

    def test_unreachable_servers_are_named(self):
        a, b = closed_port(), closed_port()
        r = run_work("t", "--server", "127.0.0.1:%d" % a, "--", "true")
        self.assertEqual(r.returncode, UNAVAILABLE, r.stderr)
        self.assertRegex(r.stderr.decode(),
                         r"^delayq work: cannot connect to 127\.0\.0\.1:%d: Connection refused" % a)
        r = run_work("t", "--server", "127.0.0.1:%d,127.0.0.1:%d" % (a, b), "--", "true")
        self.assertEqual(r.returncode, UNAVAILABLE, r.stderr)
        self.assertIn("127.0.0.1:%d (Connection refused), 127.0.0.1:%d (Connection refused)"
                      % (a, b), r.stderr.decode())
        r = run_work("t", "--server", "no-such-host.invalid:7701", "--", "true")
        self.assertEqual(r.returncode, UNAVAILABLE, r.stderr)
        self.assertIn("no-such-host.invalid", r.stderr.decode())


if __name__ == "__main__":
    harness.main()
