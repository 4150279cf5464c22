"""The README's first screen, exactly as written: its install commands in a
temporary directory, then its first example with the installed interpreter;
and examples/worker.py as a newcomer starts it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from typing import Iterator, List

import pytest
from conftest import CLIENT_DIR, REPO, Server, wait_for

import delayq

README = os.path.join(CLIENT_DIR, "README.md")


def blocks(lang: str) -> List[str]:
    with open(README, encoding="utf-8") as f:
        return re.findall(rf"```{lang}\n(.*?)```", f.read(), re.S)


class Program:
    """A started program whose stdout lines are collected by a thread."""

    def __init__(self, argv: List[str], env: dict, cwd: str) -> None:
        self.proc = subprocess.Popen(
            argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.out: List[str] = []
        self.err: List[str] = []
        for stream, into in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            threading.Thread(target=self._read, args=(stream, into), daemon=True).start()

    @staticmethod
    def _read(stream, into: List[str]) -> None:  # type: ignore[no-untyped-def]
        for line in stream:
            into.append(line.rstrip("\n"))

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 40) -> int:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            raise AssertionError("did not exit after the signal:\n" + "\n".join(self.err))


@pytest.fixture(scope="module")
def venv_python() -> Iterator[str]:
    """The README's install commands, run as written in a fresh directory
    (``./clients/python`` reaches this repository's through a symlink), the
    apt-get line left out (the packages are installed here)."""
    [install] = blocks("sh")[:1]
    commands = [
        line for line in install.splitlines()
        if line.strip() and not line.lstrip().startswith(("#", "sudo apt-get"))
    ]  # fmt: skip
    assert any("pip install" in c for c in commands), install
    with tempfile.TemporaryDirectory(prefix="delayq-readme-") as d:
        os.symlink(os.path.join(REPO, "clients"), os.path.join(d, "clients"))
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env["PIP_NO_INPUT"] = "1"
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", "\n".join(commands)],
            cwd=d, env=env, capture_output=True, text=True, timeout=240,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        yield os.path.join(d, ".venv", "bin", "python")


def test_the_readme_installs_and_its_first_example_runs(venv_python: str, memory_server: Server) -> None:
    example = blocks("python")[0]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["DELAYQ_SERVER"] = memory_server.address
    with tempfile.TemporaryDirectory(prefix="delayq-readme-run-") as d:
        # The installed package, not the source tree.
        where = subprocess.run(
            [venv_python, "-c", "import delayq; print(delayq.__file__)"],
            cwd=d, env=env, capture_output=True, text=True, check=True,
        )  # fmt: skip
        assert "site-packages" in where.stdout and os.path.join(CLIENT_DIR, "src") not in where.stdout
        with open(os.path.join(d, "orders.py"), "w", encoding="utf-8") as f:
            f.write(example)
        started = time.monotonic()
        p = Program([venv_python, "orders.py"], env, d)
        wait_for(lambda: "closing order 42 attempt 1" in p.out, 15, "the order to be closed")
        assert time.monotonic() - started >= 1.5  # added with a 2 s delay
        assert p.stop(signal.SIGTERM) == 0, "\n".join(p.err)
        assert p.out == ["closing order 42 attempt 1"]
    assert delayq.Client(memory_server.address).topic_stats("orders.close").ready == 0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_the_example_worker_prints_each_finish_and_drains_on_a_signal(memory_server: Server, sig: int) -> None:
    topic = f"orders.example.{sig}"
    client = delayq.Client(memory_server.address)
    ids = [client.add(topic, '{"order": %d}' % i).id for i in range(20)]
    env = dict(os.environ, DELAYQ_SERVER=memory_server.address, DELAYQ_TOPIC=topic,
               PYTHONPATH=os.path.join(CLIENT_DIR, "src"))  # fmt: skip
    p = Program(["/usr/bin/python3", os.path.join(CLIENT_DIR, "examples", "worker.py")], env, REPO)
    try:
        wait_for(lambda: len(p.out) >= 20, 15, "20 done lines")
        later = client.add(topic, b'{"order": 99}').id
        wait_for(lambda: f"done {later}" in p.out, 10, "the job added while it waited")
    finally:
        code = p.stop(sig)
    assert code == 0, "\n".join(p.err)
    assert sorted(p.out) == sorted(f"done {i}" for i in ids + [later])
    client.close()


def test_the_add_docs_say_who_makes_an_id() -> None:
    """README's add row and Client.add's docstring: id None is made by the
    client, except with an idempotency_key (the server makes it, test_client's
    test_an_add_with_an_idempotency_key_and_no_id_is_named_by_the_server)."""
    with open(README, encoding="utf-8") as f:
        [row] = [line for line in f if line.startswith("| `add(")]
    docs = {"README": row, "Client.add": " ".join(delayq.Client.add.__doc__.split()),
            "AsyncClient.add": " ".join(delayq.AsyncClient.add.__doc__.split())}  # fmt: skip
    for where, text in docs.items():
        assert "the client makes one" in text, where
        assert "except with `idempotency_key` given: then no id is sent and the server makes it" in (
            text.replace("``", "`")
        ), where
