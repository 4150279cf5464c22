"""Fixtures: real `delayq serve` processes (and a redis-server) on free
loopback ports, started and stopped by PID.

The binary: $DELAYQ_BINARY, else <repo>/build/bin/delayq found from this
file. Tests import the package from ../src (not an installed copy), except
test_readme.py, which installs it as the README says.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from typing import Callable, Iterator, List, Optional

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT_DIR = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(CLIENT_DIR))
sys.path.insert(0, os.path.join(CLIENT_DIR, "src"))

BINARY = os.environ.get("DELAYQ_BINARY") or os.path.join(REPO, "build", "bin", "delayq")
REDIS_SERVER = os.environ.get("REDIS_SERVER") or "/usr/bin/redis-server"


def wait_for(pred: Callable[[], object], timeout: float = 10.0, what: str = "a condition") -> object:
    """Polls ``pred`` until it returns something true, or fails the test."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.01)


class Process:
    """A child process whose stderr is collected by a thread."""

    def __init__(self, argv: List[str]) -> None:
        self.argv = argv
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        self.lines: List[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> Optional[int]:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self._reader.join(5)
        return self.proc.returncode

    def kill(self) -> None:
        self.stop(signal.SIGKILL)


class Server(Process):
    """`delayq serve` on free ports; ``address`` is its RESP host:port."""

    def __init__(self, *args: str) -> None:
        if not os.access(BINARY, os.X_OK):
            pytest.fail(f"no delayq binary at {BINARY} (set DELAYQ_BINARY)")
        super().__init__([BINARY, "serve", "--http-port", "0", "--resp-port", "0", *args])
        line = wait_for(
            lambda: next((l for l in self.lines if "serving RESP on " in l), None)
            or (self.proc.poll() is not None and "exited"),
            10,
            "the server's RESP port",
        )
        if line == "exited":
            raise AssertionError("delayq serve exited:\n" + "\n".join(self.lines))
        self.address = str(line).split("serving RESP on ")[1].strip()
        self.port = int(self.address.rsplit(":", 1)[1])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer(Process):
    def __init__(self) -> None:
        self.port = free_port()
        super().__init__(
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        )

        def answers() -> bool:
            try:
                with socket.create_connection(("127.0.0.1", self.port), 0.2) as c:
                    c.sendall(b"PING\r\n")
                    return c.recv(16).startswith(b"+PONG")
            except OSError:
                return False

        wait_for(answers, 10, "redis-server")


@pytest.fixture(scope="session")
def memory_server() -> Iterator[Server]:
    s = Server("--store", "memory")
    yield s
    s.stop()


@pytest.fixture(scope="session")
def embedded_server() -> Iterator[Server]:
    with tempfile.TemporaryDirectory(prefix="delayq-py-") as d:
        s = Server("--store", "embedded", "--data-dir", d)
        yield s
        s.stop()


@pytest.fixture(params=["memory", "embedded"])
def server(request: pytest.FixtureRequest) -> Server:
    """Each test that takes it runs on both stores."""
    return request.getfixturevalue(f"{request.param}_server")


@pytest.fixture
def topic() -> str:
    """A topic of this test's own, so tests sharing a server do not meet."""
    return f"t.{uuid.uuid4().hex[:12]}"
