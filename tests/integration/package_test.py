#!/usr/bin/env python3
"""libdelayq as a user's project gets it: `cmake --install` (what `make install`
runs) puts the public headers, lib/libdelayq.a, a CMake package and a
pkg-config file under a prefix; every installed header compiles on its own;
examples/embedded.cc, copied into a scratch directory, builds against the
installed package both with `find_package(delayq CONFIG)` + `delayq::delayq`
and with `c++ ... $(pkg-config --cflags --libs delayq)`, and each program
runs as the example does; examples/worker.cc (the Worker, with its
order_handlers.h) builds in the same CMake project and runs too.

    /usr/bin/python3 tests/integration/package_test.py --binary build/bin/delayq

The build tree installed from is the one holding the binary (build/bin/delayq
-> build/).
"""
import glob
import os
import shutil
import subprocess
import tempfile
import unittest

import harness

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
EXAMPLE = os.path.join(ROOT, "examples", "embedded.cc")
WORKER_EXAMPLE = [os.path.join(ROOT, "examples", f) for f in ("worker.cc", "order_handlers.h")]

# A user's project, as the README's "Use it from your own C++ project" shows it.
# No CMAKE_CXX_STANDARD: delayq::delayq brings C++20 by itself.
USER_PROJECT = """\
cmake_minimum_required(VERSION 3.16)
project(app CXX)
find_package(delayq {major}.{minor} CONFIG REQUIRED)
message(STATUS "delayq_VERSION=${{delayq_VERSION}} delayq_DIR=${{delayq_DIR}}")
add_executable(app embedded.cc)
target_link_libraries(app PRIVATE delayq::delayq)
add_executable(worker worker.cc)
target_link_libraries(worker PRIVATE delayq::delayq)
"""

# What examples/embedded.cc prints in a fresh directory (its README console block).
EXPECTED = [r"added order-42, due at \d{13} ms",
            r'reserved order-42: \{"order":42\} \(attempt 1\)',
            r"finished order-42: ok"]
# What examples/worker.cc prints (tests/integration/worker_example_test.py).
WORKER_CLOSED = ["closed order-1 (attempt 1)", "closed order-2 (attempt 1)",
                 "closed order-3 (attempt 2)"]


def run(args, **kwargs):
    """args run to completion: the CompletedProcess, output as text. MAKEFLAGS
    of an enclosing `make test` are not passed on to the scratch builds."""
    env = dict(kwargs.pop("env", os.environ))
    for name in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL"):
        env.pop(name, None)
    return subprocess.run(args, capture_output=True, text=True, timeout=120, env=env, **kwargs)


class InstalledLibraryTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.build = os.path.dirname(os.path.dirname(harness.BINARY))
        if not os.path.exists(os.path.join(cls.build, "CMakeCache.txt")):
            raise AssertionError(f"{harness.BINARY} is not in a CMake build tree's bin/")
        cls.scratch = tempfile.mkdtemp(prefix="delayq-package-")
        cls.prefix = os.path.join(cls.scratch, "prefix")
        cls.install = run(["cmake", "--install", cls.build, "--prefix", cls.prefix])
        r = run([harness.BINARY, "--version"])
        cls.version = r.stdout.split()[-1]  # "delayq 0.1.0"

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.scratch, ignore_errors=True)

    def setUp(self):
        self.assertEqual(self.install.returncode, 0, self.install.stderr)
        self.assertRegex(self.version, r"^\d+\.\d+\.\d+$")

    def workdir(self, name):
        path = os.path.join(self.scratch, name)
        os.makedirs(path)
        return path

    def run_example(self, program):
        """The program built from examples/embedded.cc, run in a fresh directory
        as a newcomer runs it: it adds its job, gets it when due, finishes it."""
        cwd = tempfile.mkdtemp(prefix="run-", dir=self.scratch)
        r = run([program], cwd=cwd)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stderr, "")
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), len(EXPECTED), r.stdout)
        for line, pattern in zip(lines, EXPECTED):
            self.assertRegex(line, "^" + pattern + "$")
        self.assertEqual(os.listdir(cwd), ["example-data"])

    def test_the_public_headers_and_only_they_are_installed(self):
        source = sorted(os.path.basename(p)
                        for p in glob.glob(os.path.join(ROOT, "include", "delayq", "*.h")))
        installed = []
        for top, _, files in os.walk(os.path.join(self.prefix, "include")):
            installed += [os.path.relpath(os.path.join(top, f), self.prefix) for f in files]
        self.assertIn("queue.h", source)
        self.assertEqual(sorted(installed),
                         sorted(f"include/delayq/{h}" for h in source + ["version.h"]))
        with open(os.path.join(self.prefix, "include", "delayq", "version.h")) as f:
            self.assertIn(f'#define DELAYQ_VERSION "{self.version}"', f.read())
        self.assertTrue(os.path.isfile(os.path.join(self.prefix, "lib", "libdelayq.a")))

    def test_each_installed_header_compiles_on_its_own(self):
        headers = sorted(glob.glob(os.path.join(self.prefix, "include", "delayq", "*.h")))
        self.assertGreater(len(headers), 1)
        work = self.workdir("headers")
        for header in headers:
            name = os.path.basename(header)
            unit = os.path.join(work, name + ".cc")
            with open(unit, "w") as f:
                f.write(f'#include "delayq/{name}"\n')
            r = run(["c++", "-std=c++20", "-fsyntax-only", "-Wall", "-Wextra",
                     "-I", os.path.join(self.prefix, "include"), unit])
            self.assertEqual(r.returncode, 0, f"delayq/{name} alone:\n{r.stderr}")

    def test_a_cmake_project_builds_the_example_with_find_package_and_runs_it(self):
        work = self.workdir("cmake-project")
        for source in [EXAMPLE, *WORKER_EXAMPLE]:
            shutil.copy(source, work)
        major, minor, _ = self.version.split(".")
        with open(os.path.join(work, "CMakeLists.txt"), "w") as f:
            f.write(USER_PROJECT.format(major=major, minor=minor))
        r = run(["cmake", "-S", work, "-B", os.path.join(work, "build"),
                 f"-DCMAKE_PREFIX_PATH={self.prefix}"])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        # The installed package, not the build tree it came from.
        package_dir = os.path.join(self.prefix, "lib", "cmake", "delayq")
        self.assertIn(f"delayq_VERSION={self.version} delayq_DIR={package_dir}\n", r.stdout)
        r = run(["cmake", "--build", os.path.join(work, "build"), "--verbose"])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(os.path.join(self.prefix, "lib", "libdelayq.a"), r.stdout)
        self.assertNotIn(os.path.abspath(ROOT), r.stdout.replace(work, ""))
        self.run_example(os.path.join(work, "build", "app"))
        # The Worker example: its handlers over an embedded queue in a fresh directory.
        cwd = tempfile.mkdtemp(prefix="run-worker-", dir=self.scratch)
        r = run([os.path.join(work, "build", "worker")], cwd=cwd)
        self.assertEqual((r.returncode, r.stderr), (0, ""), r.stdout + r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(sorted(lines[:-1]), WORKER_CLOSED, r.stdout)
        self.assertEqual(lines[-1], "succeeded 3, retried 1, buried 1")

    def test_the_cmake_package_refuses_another_major_version(self):
        work = self.workdir("cmake-next-major")
        major = int(self.version.split(".")[0])
        with open(os.path.join(work, "CMakeLists.txt"), "w") as f:
            f.write("cmake_minimum_required(VERSION 3.16)\nproject(app NONE)\n"
                    f"find_package(delayq {major + 1} CONFIG REQUIRED)\n")
        r = run(["cmake", "-S", work, "-B", os.path.join(work, "build"),
                 f"-DCMAKE_PREFIX_PATH={self.prefix}"])
        self.assertNotEqual(r.returncode, 0, r.stdout)
        said = " ".join(r.stderr.split())
        self.assertIn(f'compatible with requested version "{major + 1}"', said)
        self.assertIn(f"delayqConfig.cmake, version: {self.version}", said)

    def test_pkg_config_gives_what_builds_the_example_and_it_runs(self):
        env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(self.prefix, "lib", "pkgconfig"))
        r = run(["pkg-config", "--modversion", "delayq"], env=env)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, self.version + "\n", ""))
        r = run(["pkg-config", "--cflags", "--libs", "delayq"], env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        flags = r.stdout.split()
        # The prefix as installed (the .pc finds it from where it lies).
        self.assertIn(os.path.join(self.prefix, "include"),
                      [os.path.normpath(f[2:]) for f in flags if f.startswith("-I")])
        self.assertIn("-ldelayq", flags)
        work = self.workdir("pkg-config")
        shutil.copy(EXAMPLE, work)
        program = os.path.join(work, "app")
        r = run(["c++", "-std=c++20", "-O1", os.path.join(work, "embedded.cc"), "-o", program,
                 *flags])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.run_example(program)


if __name__ == "__main__":
    harness.main()
