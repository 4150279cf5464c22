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
        # "serving RESP on 127.0.0.1:7701", with " (TLS)" after it on a TLS port
        self.address = str(line).split("serving RESP on ")[1].split()[0]
        self.port = int(self.address.rsplit(":", 1)[1])


class Certs:
    """A CA and what it signs, made with the openssl command (as
    tests/integration/tls_test.py does): a server certificate for localhost
    and 127.0.0.1, one for localhost only, a client certificate; and another
    CA with a server of its own. Paths: certs.path("server.pem")."""

    def __init__(self, directory: str) -> None:
        self.dir = directory
        self.ca("ca", "delayq test CA")
        self.ca("other-ca", "another CA")
        self.leaf("server", "ca", "localhost", "subjectAltName=DNS:localhost,IP:127.0.0.1")
        self.leaf("named-server", "ca", "localhost", "subjectAltName=DNS:localhost")
        self.leaf("stranger", "other-ca", "localhost", "subjectAltName=DNS:localhost,IP:127.0.0.1")
        self.leaf("client", "ca", "worker-1", "extendedKeyUsage=clientAuth")

    def path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    def run(self, *args: str) -> None:
        r = subprocess.run(["openssl", *args], cwd=self.dir, capture_output=True, text=True)
        if r.returncode != 0:
            raise AssertionError(f"openssl {' '.join(args)}: {r.stderr}")

    def ca(self, name: str, cn: str) -> None:
        self.run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                 "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "30",
                 "-subj", f"/CN={cn}")

    def leaf(self, name: str, ca: str, cn: str, ext: str) -> None:
        self.run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                 "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}")
        with open(self.path(f"{name}.ext"), "w") as f:
            f.write(ext + "\n")
        self.run("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
                 "-CAcreateserial", "-out", f"{name}.pem", "-days", "30", "-extfile",
                 f"{name}.ext")


@pytest.fixture(scope="session")
def certs() -> Iterator[Certs]:
    with tempfile.TemporaryDirectory(prefix="delayq-py-tls-") as d:
        yield Certs(d)


def tls_server(certs: Certs, name: str = "server", *args: str) -> Server:
    """`delayq serve --store memory` speaking TLS with certificate ``name``."""
    return Server("--store", "memory", "--tls-cert-file", certs.path(f"{name}.pem"),
                  "--tls-key-file", certs.path(f"{name}.key"), *args)


@pytest.fixture(scope="session")
def tls_memory_server(certs: Certs) -> Iterator[Server]:
    s = tls_server(certs)
    yield s
    s.stop()


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
