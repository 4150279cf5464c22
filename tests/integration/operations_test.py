#!/usr/bin/env python3
"""What README.md's "Operations" promises an operator: `cmake --install` (what
`make install` runs) puts a working `delayq` in PREFIX/bin and the systemd
unit of deploy/ in PREFIX/lib/systemd/system with its ExecStart pointed there;
the unit passes `systemd-analyze verify` and keeps its hardening; `/metrics`
explains each counter in a HELP line of its own.

    /usr/bin/python3 tests/integration/operations_test.py --binary build/bin/delayq

The build tree installed from is the one holding the binary (build/bin/delayq
-> build/).
"""
import http.client
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import harness

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
UNIT = os.path.join(ROOT, "deploy", "delayq.service")

# The hardening README.md's "Operations" describes; each one a line of the unit.
HARDENING = [
    "DynamicUser=yes",
    "StateDirectory=delayq",
    "LimitNOFILE=65536",
    "ProtectSystem=strict",
    "ProtectHome=yes",
    "PrivateTmp=yes",
    "NoNewPrivileges=yes",
    "Restart=on-failure",
    "KillSignal=SIGTERM",
    "EnvironmentFile=-/etc/default/delayq",
]


def unit_lines(path):
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip() and not line.startswith("#")]


def verify(unit_path):
    """systemd-analyze verify: (exit code, everything it said). It reads the
    unit offline; it needs no running systemd."""
    r = subprocess.run(["systemd-analyze", "verify", unit_path], capture_output=True, text=True,
                       timeout=60)
    return r.returncode, (r.stdout + r.stderr).strip()


class InstallTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.build = os.path.dirname(os.path.dirname(harness.BINARY))
        if not os.path.exists(os.path.join(cls.build, "CMakeCache.txt")):
            raise AssertionError(f"{harness.BINARY} is not in a CMake build tree's bin/")
        cls.prefix = tempfile.mkdtemp(prefix="delayq-install-")
        cls.install = subprocess.run(["cmake", "--install", cls.build, "--prefix", cls.prefix],
                                     capture_output=True, text=True, timeout=120)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.prefix, ignore_errors=True)

    def test_the_installed_binary_runs(self):
        self.assertEqual(self.install.returncode, 0, self.install.stderr)
        binary = os.path.join(self.prefix, "bin", "delayq")
        r = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^delayq \d+\.\d+\.\d+\n$")

    def test_the_unit_is_installed_pointing_at_the_installed_binary_and_verifies(self):
        self.assertEqual(self.install.returncode, 0, self.install.stderr)
        unit = os.path.join(self.prefix, "lib", "systemd", "system", "delayq.service")
        lines = unit_lines(unit)
        exec_start = [line for line in lines if line.startswith("ExecStart=")]
        self.assertEqual(exec_start, [f"ExecStart={self.prefix}/bin/delayq serve "
                                      "--data-dir %S/delayq"])
        # Otherwise the installed unit is deploy/delayq.service.
        self.assertEqual([line for line in lines if not line.startswith("ExecStart=")],
                         [line for line in unit_lines(UNIT) if not line.startswith("ExecStart=")])
        code, said = verify(unit)
        self.assertEqual(code, 0, said)
        self.assertEqual(said, "", "systemd-analyze verify warned")


class UnitTest(unittest.TestCase):
    def test_the_unit_in_deploy_verifies_but_for_its_binary(self):
        # deploy/ names /usr/local/bin/delayq, which the test machine need not
        # have: verify a copy pointing at the binary under test, unchanged else.
        with open(UNIT, encoding="utf-8") as f:
            text = f.read()
        self.assertIn("ExecStart=/usr/local/bin/delayq serve ", text)
        scratch = tempfile.mkdtemp(prefix="delayq-unit-")
        self.addCleanup(shutil.rmtree, scratch, ignore_errors=True)
        copy = os.path.join(scratch, "delayq.service")
        with open(copy, "w", encoding="utf-8") as f:
            f.write(text.replace("ExecStart=/usr/local/bin/delayq ",
                                 f"ExecStart={harness.BINARY} "))
        code, said = verify(copy)
        self.assertEqual(code, 0, said)
        self.assertEqual(said, "", "systemd-analyze verify warned")

    def test_the_unit_has_its_hardening_and_stops_after_the_drain(self):
        lines = unit_lines(UNIT)
        for setting in HARDENING:
            self.assertIn(setting, lines)
        # The drain of the first SIGTERM lasts up to --shutdown-timeout-ms
        # (`delayq serve --help` gives its default); systemd must wait longer.
        r = subprocess.run([harness.BINARY, "serve", "--help"], capture_output=True, text=True,
                           timeout=30)
        # "--shutdown-timeout-ms INT ...=5000", or a duration ("=5s").
        m = re.search(r"--shutdown-timeout(-ms)?\b[^\n]*?=(\d+)(ms|s|m)?\b", r.stdout)
        self.assertIsNotNone(m, r.stdout)
        unit = m.group(3) or ("ms" if m.group(1) else "s")
        drain_ms = int(m.group(2)) * {"ms": 1, "s": 1000, "m": 60000}[unit]
        self.assertGreater(drain_ms, 0)
        stop = [int(line.split("=")[1]) for line in lines if line.startswith("TimeoutStopSec=")]
        self.assertEqual(len(stop), 1)
        self.assertGreater(stop[0] * 1000, drain_ms)

    def test_a_broken_unit_is_caught(self):
        # The check above would notice a mistake: a misspelt key is a warning.
        scratch = tempfile.mkdtemp(prefix="delayq-unit-")
        self.addCleanup(shutil.rmtree, scratch, ignore_errors=True)
        copy = os.path.join(scratch, "delayq.service")
        with open(copy, "w", encoding="utf-8") as f:
            f.write(f"[Service]\nExecStart={harness.BINARY} serve\nProtectSytem=strict\n")
        _, said = verify(copy)
        self.assertIn("ProtectSytem", said)


class MetricsHelpTest(unittest.TestCase):
    def test_each_counter_has_a_help_line_of_its_own(self):
        server = harness.Server("--store", "memory")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=10)
            conn.request("GET", "/metrics")
            resp = conn.getresponse()
            text = resp.read().decode()
            conn.close()
        finally:
            server.stop()
        self.assertEqual(resp.status, 200, text)
        helps = dict(re.findall(r"^# HELP (\S+) (.*)$", text, re.M))
        counters = {name: help for name, help in helps.items() if name.endswith("_total")}
        self.assertIn("delayq_finished_total", counters)
        self.assertEqual(counters["delayq_finished_total"],
                         "Jobs finished (acknowledged) since start.")
        seen = {}
        for name, help in counters.items():
            self.assertNotIn(help, seen, f"{name} and {seen.get(help)} share a HELP text")
            seen[help] = name


class NewcomerWordsTest(unittest.TestCase):
    """What a newcomer reads names things they can look up: no "SPEC §N"
    (the spec is not in the repository), no "the seed's protocol" (say whose),
    no "issue N" in the README, the API reference, the folder READMEs (the
    clients' included), the bootstrap script or the --help texts; and the
    license is there."""

    JARGON = re.compile(r"SPEC §|\bthe seed's\b|\bseed's protocol\b|\bissue \d+", re.I)

    def test_the_docs_and_help_a_newcomer_reads_have_no_jargon(self):
        paths = ["README.md", "CONTRIBUTING.md", "docs/api.md", "docs/architecture.md",
                 "scripts/bootstrap.sh", "clients/README.md", "clients/python/README.md",
                 "clients/node/README.md", "clients/go/README.md"]
        src = os.path.join(ROOT, "src")
        paths += [os.path.join("src", d, "README.md") for d in sorted(os.listdir(src))
                  if os.path.exists(os.path.join(src, d, "README.md"))]
        texts = {}
        for p in paths:
            with open(os.path.join(ROOT, p), encoding="utf-8") as f:
                texts[p] = f.read()
        for args in (["--help"], ["serve", "--help"], ["add", "--help"], ["finish", "--help"]):
            r = subprocess.run([harness.BINARY, *args], capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 0, r.stderr)
            texts["delayq " + " ".join(args)] = r.stdout
        for name, text in texts.items():
            for n, line in enumerate(text.splitlines(), 1):
                self.assertIsNone(self.JARGON.search(line), f"{name}:{n}: {line}")

    def test_the_readme_has_one_reader_and_its_status_is_plain_words(self):
        """README.md is for someone deciding whether to use delayq and getting
        it running: read in ten minutes, its Status in plain words (the figures
        and the contributor's material live in docs/ and CONTRIBUTING.md)."""
        with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
            readme = f.read()
        self.assertLess(len(readme.splitlines()), 430)
        status = readme[readme.index("## Status"):readme.index("\n## ", readme.index("## Status") + 1)]
        for word in ("RESP", "TTR", "Youzan", "-f0", "p99", "LINT_BASE", "gtest", "ctest"):
            self.assertNotIn(word, status)
        self.assertIn("(docs/benchmarks.md)", status)
        for contributor in ("LINT_BASE", "delayq_test(", "Anatomy of a request", "## Source layout"):
            self.assertNotIn(contributor, readme)
            with open(os.path.join(ROOT, "CONTRIBUTING.md"), encoding="utf-8") as f:
                self.assertIn(contributor, f.read())

    def test_the_license_is_there_and_the_readme_says_which(self):
        with open(os.path.join(ROOT, "LICENSE"), encoding="utf-8") as f:
            self.assertTrue(f.readline().startswith("MIT License"))
        with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
            readme = f.read()
        self.assertRegex(readme, r"## License\n\n[^#]*MIT[^#]*\(LICENSE\)")


if __name__ == "__main__":
    harness.main()
