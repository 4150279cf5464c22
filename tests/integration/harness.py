"""What the black-box tests share: a `delayq serve` process on free loopback
ports, started per test class and ended by PID, and a deadline-bounded wait.
Nothing here sleeps to wait for time.

Every `Server()` gets a fresh temporary `--data-dir` of its own (removed by
stop/kill), so suites never share the default `./data` of the working
directory or collide on its lock. A caller that passes `--data-dir` or
`--store` itself, or `data_dir=`, decides instead."""
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from polling import wait_until  # noqa: E402,F401  (harness.wait_until: the tests' one poll)

BINARY = None  # set by main() (below) from --binary

# A marker for Server(data_dir=...): give the server a fresh temporary dir.
TEMP = object()


def recv_all(sock):
    """Everything the peer sends until it closes the connection (bounded by
    the socket's timeout)."""
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk


def closed_port():
    """A loopback port nothing listens on (bound for a moment, then freed)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def server_env(env=None):
    """The environment for a `delayq serve`: the test runner's, without any
    DELAYQ_* setting (those would change the server's flags), plus `env`."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("DELAYQ_")}
    e.update(env or {})
    return e


def _has_flag(args, name):
    return any(a == name or str(a).startswith(name + "=") for a in args)


def run_serve(*extra, cwd=None, env=None, timeout=10.0):
    """Runs `delayq serve` expecting it to exit on its own (it refuses to
    start). Returns (exit code, stderr). A server that does start instead is
    killed by PID after `timeout` and reported as an AssertionError."""
    proc = subprocess.Popen(
        [BINARY, "serve", "--http-port", "0", "--resp-port", "0", *[str(a) for a in extra]],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=cwd,
        env=server_env(env))
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"delayq serve {extra} did not exit within {timeout}s: {err}")
    return proc.returncode, err


class Server:
    """`delayq serve` with both protocols on ports the kernel picks.

    data_dir: TEMP (default) gives a fresh temporary data dir removed on
    stop/kill, unless `extra` has --data-dir or --store; a path passes
    `--data-dir path` (the caller owns it); None passes nothing, so the
    server uses its default (`./data` of `cwd`). preexec_fn runs in the child
    before the binary starts (e.g. to lower its RLIMIT_NOFILE)."""

    def __init__(self, *extra, data_dir=TEMP, cwd=None, env=None, start_timeout=10.0,
                 preexec_fn=None):
        extra = [str(a) for a in extra]
        self.extra = list(extra)  # as the caller gave them, for a restart
        self.cwd = cwd
        self._temp = None
        self.data_dir = None
        if data_dir is TEMP:
            if not _has_flag(extra, "--data-dir") and not _has_flag(extra, "--store"):
                self._temp = tempfile.mkdtemp(prefix="delayq-itest-")
                self.data_dir = os.path.join(self._temp, "data")
                extra = ["--data-dir", self.data_dir, *extra]
        elif data_dir is not None:
            self.data_dir = str(data_dir)
            extra = ["--data-dir", self.data_dir, *extra]
        self.args = extra
        self.proc = subprocess.Popen(
            [BINARY, "serve", "--http-port", "0", "--resp-port", "0", *extra],
            stderr=subprocess.PIPE, text=True, cwd=cwd, env=server_env(env),
            preexec_fn=preexec_fn)
        self.http_port = None
        self.port = None  # RESP
        self.log = []
        self._started = threading.Condition()
        self._eof = False
        # stderr is read by a thread from the start, so a slow or silent
        # start cannot block the constructor past its deadline, and the
        # server never blocks on a full pipe.
        self.reader = threading.Thread(target=self._read_log, daemon=True)
        self.reader.start()
        with self._started:
            self._started.wait_for(
                lambda: self._eof or (self.http_port is not None and self.port is not None),
                timeout=start_timeout)
        if self.http_port is None or self.port is None:
            self.stop()
            raise RuntimeError("server did not start: " + "".join(self.log))

    def _read_log(self):
        for line in self.proc.stderr:
            self.log.append(line)
            m = re.search(r"serving HTTP on 127\.0\.0\.1:(\d+)", line)
            if m:
                with self._started:
                    self.http_port = int(m.group(1))
                    self._started.notify_all()
            m = re.search(r"serving RESP on 127\.0\.0\.1:(\d+)", line)
            if m:
                with self._started:
                    self.port = int(m.group(1))
                    self._started.notify_all()
        with self._started:
            self._eof = True
            self._started.notify_all()

    @property
    def address(self):
        """host:port of the RESP listener, as the command line takes it."""
        return "127.0.0.1:%d" % self.port

    @property
    def text(self):
        """Everything the server logged so far."""
        return "".join(self.log)

    def signal(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def stats(self, headers=None):
        """GET /v1/stats, as a dict."""
        conn = http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=10)
        try:
            conn.request("GET", "/v1/stats", headers=headers or {})
            resp = conn.getresponse()
            body = resp.read()
            if resp.status != 200:
                raise AssertionError(f"/v1/stats answered {resp.status}: {body!r}")
            return json.loads(body)
        finally:
            conn.close()

    def _finish(self, code, keep_data):
        self.reader.join(timeout=10)
        self.proc.stderr.close()
        if self._temp is not None and not keep_data:
            shutil.rmtree(self._temp, ignore_errors=True)
            self._temp = None
        return code

    def stop(self, keep_data=False):
        """SIGTERM, then the exit code; the rest of stderr goes to self.log.
        A temporary data dir is removed unless keep_data."""
        self.signal()
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        return self._finish(code, keep_data)

    def kill(self, keep_data=False):
        """SIGKILL by PID (a crash: nothing is flushed), then the exit code."""
        if self.proc.poll() is None:
            self.proc.kill()
        code = self.proc.wait(timeout=10)
        return self._finish(code, keep_data)


def main(arguments=None, setup=None):
    """A test script's entry point: `--binary PATH` names the delayq under test
    (harness.BINARY); arguments(parser) may add a script's own options, and
    setup(args) runs once they are read; every other argument goes to unittest."""
    import argparse
    import unittest
    global BINARY
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    if arguments:
        arguments(parser)
    args, rest = parser.parse_known_args()
    BINARY = os.path.abspath(args.binary)
    if setup:
        setup(args)
    unittest.main(module="__main__", argv=[sys.argv[0], *rest], verbosity=2)
