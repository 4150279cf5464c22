#!/usr/bin/env python3
"""examples/embedded.cc as the README shows it: the README's ```cpp block under
"Use it from C++" is the file, byte for byte, and the built program, run in a
scratch directory as a newcomer runs it, adds its job, gets it handed out once
due (not before) and finishes it, printing what the README's console block
shows.

    /usr/bin/python3 tests/integration/examples_test.py --binary build/bin/delayq

The example is found beside the binary (build/bin/delayq-example-embedded).
"""
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest

import harness

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
EXAMPLE_SOURCE = os.path.join(ROOT, "examples", "embedded.cc")
MARKER = "<!-- examples/embedded.cc, byte for byte"


def readme():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        return f.read()


def block_after(text, start, fence):
    """The body of the first ```fence block at or after `start`."""
    open_at = text.index("```" + fence + "\n", start) + len("```" + fence + "\n")
    return text[open_at:text.index("\n```\n", open_at) + 1]


class ExampleInReadmeTest(unittest.TestCase):
    def test_the_readme_shows_the_example_file_byte_for_byte(self):
        text = readme()
        self.assertIn(MARKER, text, "the README lost the marker above the example")
        shown = block_after(text, text.index(MARKER), "cpp")
        with open(EXAMPLE_SOURCE, encoding="utf-8") as f:
            source = f.read()
        self.assertEqual(shown, source,
                         "README.md's copy of examples/embedded.cc differs from the file: "
                         "paste the file between the ```cpp fences under the marker")

    def test_the_readme_names_the_binary_and_its_data_directory(self):
        text = readme()
        section = text[text.index("## Use it from C++"):text.index("## Documentation")]
        self.assertIn("build/bin/delayq-example-embedded", section)
        self.assertIn("example-data", section)


class ExampleRunTest(unittest.TestCase):
    def setUp(self):
        self.example = os.path.join(os.path.dirname(harness.BINARY), "delayq-example-embedded")
        if not os.path.exists(self.example):
            self.fail(f"{self.example} is not built (`make build` builds it)")
        self.cwd = tempfile.mkdtemp(prefix="delayq-example-")
        self.addCleanup(shutil.rmtree, self.cwd, ignore_errors=True)

    def run_example(self, *args):
        started = time.monotonic()
        r = subprocess.run([self.example, *args], capture_output=True, text=True, cwd=self.cwd,
                           timeout=30)
        return r, time.monotonic() - started

    def check_output(self, stdout):
        """stdout is what the README's console block under the example shows
        (a 13-digit Unix time in ms stands for any)."""
        text = readme()
        shown = block_after(text, text.index(MARKER), "console").splitlines()
        self.assertEqual(shown[0], "$ build/bin/delayq-example-embedded")
        patterns = [re.sub(r"\d{13}", r"\\d{13}", re.escape(line)) for line in shown[1:]]
        lines = stdout.splitlines()
        self.assertEqual(len(lines), len(patterns), stdout)
        for line, pattern in zip(lines, patterns):
            self.assertRegex(line, "^" + pattern + "$")

    def test_a_run_adds_the_job_gets_it_when_due_and_finishes_it_as_the_readme_shows(self):
        r, took = self.run_example()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "")
        self.check_output(r.stdout)
        # Due in 2 s, and never handed out early.
        self.assertGreaterEqual(took, 2.0, r.stdout)
        self.assertEqual(os.listdir(self.cwd), ["example-data"])
        # Finished: a second run starts from an empty queue and does the same.
        r, _ = self.run_example()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.check_output(r.stdout)

    def test_a_job_left_by_a_killed_run_is_handed_out_by_the_next(self):
        # stdbuf: line-buffered stdout, so "added" arrives as it is printed.
        # It works by LD_PRELOAD, which an ASan build refuses unless told that
        # its runtime need not come first.
        env = dict(os.environ)
        env["ASAN_OPTIONS"] = ":".join(
            filter(None, [env.get("ASAN_OPTIONS"), "verify_asan_link_order=0"]))
        proc = subprocess.Popen(["stdbuf", "-oL", self.example], stdout=subprocess.PIPE,
                                text=True, cwd=self.cwd, env=env)
        try:
            self.assertTrue(proc.stdout.readline().startswith("added order-42"))
        finally:
            proc.kill()  # during its 2 s wait: the job is on disk, not yet handed out
            proc.wait()
            proc.stdout.close()
        r, _ = self.run_example()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines(), [
            "order-42 was kept from a run that stopped before finishing it",
            'reserved order-42: {"order":42} (attempt 1)',
            "finished order-42: ok"])

    def test_it_runs_beside_a_server_holding_data_in_the_same_directory(self):
        # `make run` holds ./data/LOCK; the example keeps to ./example-data.
        server = harness.Server(data_dir=None, cwd=self.cwd)
        try:
            r, _ = self.run_example()
            self.assertEqual(r.returncode, 0, r.stderr)
            self.check_output(r.stdout)
        finally:
            self.assertEqual(server.stop(), 0)
        self.assertEqual(sorted(os.listdir(self.cwd)), ["data", "example-data"])


if __name__ == "__main__":
    harness.main()
