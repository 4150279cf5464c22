#!/usr/bin/env python3
"""examples/remote_worker.cc: worker.cc's handlers against a real `delayq
serve --store memory` on free loopback ports. A Worker over the network
client closes the three orders (the third after one retry) and buries the
unparsable one; a second run against the same server, found through
DELAYQ_SERVER this time, does the same work again without the buried job
coming back; with no server listening it says so and fails.

    /usr/bin/python3 tests/integration/remote_worker_example_test.py --binary build/bin/delayq

The example is found beside the binary (build/bin/delayq-example-remote-worker).
"""
import os
import subprocess
import tempfile
import unittest

import harness

CLOSED = ["closed order-1 (attempt 1)", "closed order-2 (attempt 1)",
          "closed order-3 (attempt 2)"]


class RemoteWorkerExampleTest(unittest.TestCase):
    def setUp(self):
        self.example = os.path.join(os.path.dirname(harness.BINARY),
                                    "delayq-example-remote-worker")
        if not os.path.exists(self.example):
            self.fail(f"{self.example} is not built (`make build` builds it)")
        self.cwd = tempfile.mkdtemp(prefix="delayq-remote-worker-example-")
        self.addCleanup(os.rmdir, self.cwd)  # the example writes nothing here

    def run_example(self, *args, server=None):
        env = harness.server_env({"DELAYQ_SERVER": server} if server else None)
        return subprocess.run([self.example, *args], capture_output=True, text=True,
                              cwd=self.cwd, env=env, timeout=30)

    def assert_worked(self, r, buried):
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stderr, "")
        lines = r.stdout.splitlines()
        # Two handlers run at once: the closing lines may come in any order.
        self.assertEqual(sorted(lines[:-1]), CLOSED, r.stdout)
        self.assertEqual(lines[-1], f"succeeded 3, retried 1, buried {buried}")

    def test_handlers_close_retry_and_bury_and_a_second_run_does_it_again(self):
        server = harness.Server("--store", "memory")
        self.addCleanup(server.stop)
        self.assert_worked(self.run_example(server.address), buried=1)
        stats = server.stats()
        self.assertEqual((stats["finished"], stats["buried"]), (3, 1), stats)
        # DELAYQ_SERVER when no argument names the servers.
        self.assert_worked(self.run_example(server=server.address), buried=0)  # kept buried
        stats = server.stats()
        self.assertEqual((stats["finished"], stats["buried"]), (6, 1), stats)

    def test_no_server_listening_fails_naming_it(self):
        address = "127.0.0.1:%d" % harness.closed_port()
        r = self.run_example(address)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("unavailable", r.stderr)
        self.assertIn(address, r.stderr)

    def test_a_bad_argument_prints_usage(self):
        r = self.run_example("--nope")
        self.assertEqual(r.returncode, 2)
        self.assertIn("usage:", r.stderr)


if __name__ == "__main__":
    harness.main()
