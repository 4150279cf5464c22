#!/usr/bin/env python3
"""examples/worker.cc, plugin mode, run as a user runs it: in a scratch
directory it keeps its queue in ./example-worker-data, a Worker closes the
three orders (the third after one retry), buries the unparsable one, and a
second run over the same directory does the same work again without the
buried job coming back.

    /usr/bin/python3 tests/integration/worker_example_test.py --binary build/bin/delayq

The example is found beside the binary (build/bin/delayq-example-worker).
"""
import os
import shutil
import subprocess
import tempfile
import unittest

import harness

CLOSED = ["closed order-1 (attempt 1)", "closed order-2 (attempt 1)",
          "closed order-3 (attempt 2)"]


class WorkerExampleTest(unittest.TestCase):
    def setUp(self):
        self.example = os.path.join(os.path.dirname(harness.BINARY), "delayq-example-worker")
        if not os.path.exists(self.example):
            self.fail(f"{self.example} is not built (`make build` builds it)")
        self.cwd = tempfile.mkdtemp(prefix="delayq-worker-example-")
        self.addCleanup(shutil.rmtree, self.cwd, ignore_errors=True)

    def run_example(self):
        return subprocess.run([self.example], capture_output=True, text=True, cwd=self.cwd,
                              timeout=30)

    def test_handlers_close_retry_and_bury_and_a_second_run_does_it_again(self):
        r = self.run_example()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "")
        lines = r.stdout.splitlines()
        # Two handlers run at once: the closing lines may come in any order.
        self.assertEqual(sorted(lines[:-1]), CLOSED, r.stdout)
        self.assertEqual(lines[-1], "succeeded 3, retried 1, buried 1")
        self.assertEqual(os.listdir(self.cwd), ["example-worker-data"])
        r = self.run_example()
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(sorted(lines[:-1]), CLOSED, r.stdout)
        self.assertEqual(lines[-1], "succeeded 3, retried 1, buried 0")  # kept buried

    def test_a_bad_argument_prints_usage(self):
        r = subprocess.run([self.example, "--nope"], capture_output=True, text=True,
                           cwd=self.cwd, timeout=30)
        self.assertEqual(r.returncode, 2)
        self.assertIn("usage:", r.stderr)


if __name__ == "__main__":
    harness.main()
