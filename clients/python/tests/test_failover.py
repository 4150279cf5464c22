"""Failover over two `delayq serve --store redis` on one redis-server: what
is repeated on the next server after a lost reply, and that an add is never
lost nor doubled."""

from __future__ import annotations

import asyncio
import signal
import socket
import threading
import time
import uuid
from datetime import timedelta
from typing import Iterator, List, Tuple

import pytest
from conftest import RedisServer, Server, wait_for
from test_client import make

import delayq
from delayq import JobState


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    r = RedisServer()
    yield r
    r.stop()


def pair(redis_server: RedisServer) -> Tuple[Server, Server]:
    """Two servers sharing one prefix in Redis: the same jobs."""
    url = f"redis://127.0.0.1:{redis_server.port}"
    prefix = f"dqpy{uuid.uuid4().hex[:8]}"
    args = ("--store", "redis", "--redis", url, "--redis-prefix", prefix)
    return Server(*args), Server(*args)


class LossyProxy:
    """Forwards one loopback port to a server; ``lose_next_reply()`` makes it
    swallow the next reply the server sends and cut the connection: the
    request ran, its answer is lost."""

    def __init__(self, target_port: int) -> None:
        self.target = target_port
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self._lose = threading.Event()
        self.lost = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def lose_next_reply(self) -> None:
        self._lose.set()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            threading.Thread(target=self._pipe, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, True), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, replies: bool) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if replies and self._lose.is_set():
                    self._lose.clear()
                    self.lost += 1
                    break  # swallowed: cut both sides
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        self.listener.close()


def test_adds_go_on_while_a_server_is_killed(redis_server: RedisServer) -> None:
    a, b = pair(redis_server)
    topic = f"t.{uuid.uuid4().hex[:10]}"
    client = delayq.Client([a.address, b.address])
    acked: List[str] = []
    errors: List[BaseException] = []
    stop = threading.Event()

    def adder() -> None:
        n = 0
        while not stop.is_set():
            try:
                acked.append(client.add(topic, f"job-{n}").id)
            except delayq.DelayqError as e:
                errors.append(e)
            n += 1

    threads = [threading.Thread(target=adder) for _ in range(3)]
    try:
        for t in threads:
            t.start()
        wait_for(lambda: len(acked) >= 150, 20, "adds on the first server")
        a.kill()  # SIGKILL, adds in flight
        at_kill = len(acked)
        wait_for(lambda: len(acked) >= at_kill + 150, 20, "adds on the second server")
        stop.set()
        for t in threads:
            t.join(10)
        assert errors == []
        assert len(set(acked)) == len(acked)
        # The kill cut connections with adds on them: the client marked the
        # first server down and repeated those adds on the second.
        assert client._transport.servers[0].backoff.last_error != ""
        check = delayq.Client(b.address)
        # Every acknowledged add exists, once: nothing lost, nothing doubled.
        assert check.topic_stats(topic).ready == len(acked)
        for job_id in acked[at_kill - 5 : at_kill + 5]:
            assert check.get(job_id) is not None
        check.close()
    finally:
        stop.set()
        client.close()
        a.stop()
        b.stop()


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_lost_reply_is_repeated_only_when_safe(redis_server: RedisServer, kind: str) -> None:
    a, b = pair(redis_server)
    proxy = LossyProxy(a.port)
    topic = f"t.{uuid.uuid4().hex[:10]}"
    check = delayq.Client(b.address)
    # A fresh client for each step, so that each starts on the proxy (a
    # client goes on with the server that answered last).
    fresh = lambda: make(kind, [proxy.address, b.address])  # noqa: E731
    try:
        # ADD: ran on the first server, its reply lost; repeated on the
        # second under the same id and key, answered as the first was.
        c = fresh()
        proxy.lose_next_reply()
        added = c.add(topic, b"once", delay=timedelta(minutes=10))
        assert proxy.lost == 1 and added.state is JobState.DELAYED
        assert check.topic_stats(topic).delayed == 1 and check.get(added.id).body == b"once"
        c.close()
        c = fresh()
        # A pipeline of adds likewise: every job once.
        proxy.lose_next_reply()
        many = c.add_many(topic, [b"m1", b"m2", b"m3"], delay=timedelta(minutes=10))
        assert proxy.lost == 2 and check.topic_stats(topic).delayed == 4
        assert [check.get(r.id).body for r in many] == [b"m1", b"m2", b"m3"]
        c.close()
        # FINISH with a receipt: repeated; "not found" then means done.
        c = fresh()
        c.kick(added.id)
        [d] = c.reserve(topic)
        proxy.lose_next_reply()
        c.finish(d)
        assert proxy.lost == 3 and check.get(added.id) is None
        c.close()
        # RELEASE with a receipt: repeated; the first did it, so the repeat
        # finds the delivery over and says so.
        c = fresh()
        job = c.add(topic, b"rel")
        [d] = c.reserve(topic)
        proxy.lose_next_reply()
        with pytest.raises(delayq.StaleReceiptError, match="after a lost reply"):
            c.release(d, error="x")
        assert proxy.lost == 4 and check.get(job.id).state is JobState.READY
        c.close()
        # DELETE (by id alone): not repeated once written.
        c = fresh()
        proxy.lose_next_reply()
        with pytest.raises(delayq.UnavailableError, match="the request was sent and may have run"):
            c.delete(job.id)
        assert proxy.lost == 5 and check.get(job.id) is None  # it did run
        c.close()
    finally:
        check.close()
        proxy.close()
        a.stop()
        b.stop()


def test_a_waiting_reserve_moves_on_when_its_server_shuts_down(redis_server: RedisServer) -> None:
    a, b = pair(redis_server)
    topic = f"t.{uuid.uuid4().hex[:10]}"
    client = delayq.Client([a.address, b.address])
    got: List[object] = []
    try:
        client.ping()  # a answers first
        t = threading.Thread(target=lambda: got.append(client.reserve(topic, wait=timedelta(seconds=10))))
        t.start()
        probe_a = delayq.Client(a.address)
        wait_for(lambda: probe_a.topic_stats(topic).waiting == 1, 5, "the reserve on the first server")
        probe_a.close()
        a.stop(signal.SIGTERM)  # answers "shutting down": the reserve goes to b
        added = delayq.Client(b.address).add(topic, b"for whoever waits")
        t.join(10)
        [jobs] = got
        assert [d.id for d in jobs] == [added.id]  # type: ignore[union-attr]
    finally:
        client.close()
        a.stop()
        b.stop()


def test_a_worker_finishes_every_job_across_a_kill(redis_server: RedisServer) -> None:
    a, b = pair(redis_server)
    topic = f"t.{uuid.uuid4().hex[:10]}"

    async def main() -> None:
        async with delayq.AsyncClient([a.address, b.address]) as client:
            ids = {(await client.add(topic, f"{i}", ttr=timedelta(seconds=1))).id for i in range(300)}
            finished: List[str] = []
            worker = delayq.Worker(
                client,
                concurrency=8,
                on_acknowledged=lambda job, kind, err: err is None and finished.append(job.id),
            )

            async def handle(job: delayq.Delivery) -> None:
                await asyncio.sleep(0.005)
                if len(finished) >= 60 and a.proc.poll() is None:
                    a.kill()

            worker.handle(topic, handle)
            await worker.start()
            deadline = time.monotonic() + 20
            while not ids <= set(finished) and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            await worker.stop()
            assert ids <= set(finished), len(ids - set(finished))
            assert a.proc.poll() is not None  # it was killed mid-run
            assert (await client.topic_stats(topic)).ready == 0

    try:
        asyncio.run(asyncio.wait_for(main(), 40))
    finally:
        a.stop()
        b.stop()
