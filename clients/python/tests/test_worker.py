"""The Worker against the real server, on both stores: outcomes, backoff,
touches, batched acks, the drain and what a stop gives back."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import timedelta
from typing import Any, Awaitable, Callable, List, Optional, Tuple

import pytest
from conftest import Server

import delayq
from delayq import AckKind, Backoff, Bury, JobState, Retry, RetryIn, Success

Acked = Tuple[delayq.Delivery, AckKind, Optional[delayq.DelayqError], float]


def run(coro: Awaitable[Any], timeout: float = 30) -> Any:
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def until(pred: Callable[[], Any], timeout: float = 10, what: str = "a condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.01)


class Recorder:
    """on_acknowledged: every final answer, with when it came (Unix ms)."""

    def __init__(self) -> None:
        self.acks: List[Acked] = []

    def __call__(self, job: delayq.Delivery, kind: AckKind, err: Optional[delayq.DelayqError]) -> None:
        self.acks.append((job, kind, err, time.time() * 1000))

    def kinds(self) -> List[Tuple[str, str, Optional[str]]]:
        return [(j.text, k.value, None if e is None else e.code) for j, k, e, _ in self.acks]


@pytest.mark.parametrize("style", ["sync", "async"])
def test_handlers_run_and_their_finishes_are_acknowledged(server: Server, topic: str, style: str) -> None:
    async def main() -> None:
        rec = Recorder()
        async with delayq.AsyncClient(server.address) as client:
            ids = {(await client.add(topic, f"job-{i}")).id for i in range(12)}
            seen: List[str] = []
            worker = delayq.Worker(client, concurrency=4, on_acknowledged=rec)
            if style == "sync":
                worker.handle(topic, lambda job: seen.append(threading.current_thread().name))
            else:

                @worker.handler(topic)
                async def handle(job: delayq.Delivery) -> Success:
                    seen.append("loop")
                    return Success()

            await worker.start()
            await until(lambda: len(rec.acks) == 12, what="12 finishes")
            await worker.stop()
            assert {j.id for j, _, _, _ in rec.acks} == ids
            assert all(k is AckKind.FINISH and e is None for _, k, e, _ in rec.acks)
            s = worker.stats
            assert (s.handled, s.succeeded, s.errors, s.running, s.held) == (12, 12, 0, 0, 0)
            if style == "sync":
                assert all(name.startswith("delayq-handler") for name in seen)
            assert (await client.topic_stats(topic)).ready == 0
            assert all([await client.get(i) is None for i in ids])

    run(main())


def test_retries_wait_the_backoff_then_succeed(server: Server, topic: str) -> None:
    """Retry() and exceptions: released after the topic's backoff (visible
    as the next delivery's run_at), the error kept as last_error."""

    async def main() -> None:
        rec = Recorder()
        deliveries: List[delayq.Delivery] = []
        async with delayq.AsyncClient(server.address) as client:
            await client.add(topic, b"order", id=f"{topic}-r")
            worker = delayq.Worker(client, on_acknowledged=rec, random=lambda: 1.0)

            @worker.handler(topic, backoff=Backoff(base_ms=200, factor=2.0, cap_ms=10_000))
            def handle(job: delayq.Delivery) -> Any:
                deliveries.append(job)
                if job.attempts == 1:
                    raise RuntimeError("payment service busy")
                if job.attempts == 2:
                    return Retry("still busy")
                return None

            await worker.start()
            await until(lambda: len(rec.acks) == 1, what="the first release")
            job = await client.get(f"{topic}-r")
            assert job.state is JobState.DELAYED and job.last_error == "payment service busy"
            await until(lambda: len(rec.acks) == 3, what="the retries and the finish")
            await worker.stop()
            assert rec.kinds() == [("order", "release", None)] * 2 + [("order", "finish", None)]
            assert [d.attempts for d in deliveries] == [1, 2, 3]
            # Attempt 1 waits base (200 ms) exactly; attempt 2 d = 400, jitter 1.0: 400.
            for n, expected in ((0, 200), (1, 400)):
                waited = deliveries[n + 1].run_at_ms - rec.acks[n][3]
                assert expected - 60 <= waited <= expected + 5, (n, waited)
            s = worker.stats
            assert (s.retried, s.succeeded, s.exhausted) == (2, 1, 0)

    run(main())


def test_retry_in_bury_and_an_empty_exception(server: Server, topic: str) -> None:
    async def main() -> None:
        rec = Recorder()
        async with delayq.AsyncClient(server.address) as client:
            await client.add(topic, b"later", id=f"{topic}-later")
            await client.add(topic, b"bad", id=f"{topic}-bad")
            await client.add(topic, b"empty", id=f"{topic}-empty")
            worker = delayq.Worker(client, on_acknowledged=rec)

            @worker.handler(topic, backoff=Backoff(base_ms=60_000))
            async def handle(job: delayq.Delivery) -> Any:
                if job.text == "later":
                    return RetryIn(timedelta(milliseconds=300), "come back later") if job.attempts == 1 else None
                if job.text == "bad":
                    return Bury("cannot parse the order")
                raise ValueError()  # no text: its class name is the error

            await worker.start()
            await until(lambda: len(rec.acks) == 4, what="four outcomes")
            await worker.stop()
            by = {(j.text, j.attempts): (k, t) for j, k, _, t in rec.acks}
            assert by[("bad", 1)][0] is AckKind.BURY and by[("empty", 1)][0] is AckKind.RELEASE
            assert by[("later", 1)][0] is AckKind.RELEASE and by[("later", 2)][0] is AckKind.FINISH
            bad = await client.get(f"{topic}-bad")
            assert bad.state is JobState.BURIED and bad.last_error == "cannot parse the order"
            empty = await client.get(f"{topic}-empty")
            assert empty.state is JobState.DELAYED and empty.last_error == "ValueError"
            assert await client.get(f"{topic}-later") is None
            s = worker.stats
            assert (s.buried, s.retried, s.succeeded) == (1, 2, 1)

    run(main())


def test_max_attempts_used_up_buries_the_job(server: Server, topic: str) -> None:
    async def main() -> None:
        rec = Recorder()
        async with delayq.AsyncClient(server.address) as client:
            await client.add(topic, b"doomed", id=f"{topic}-d", max_attempts=2)
            worker = delayq.Worker(client, on_acknowledged=rec)
            worker.handle(topic, lambda job: 1 / 0, backoff=Backoff(base_ms=0))
            await worker.start()
            await until(lambda: len(rec.acks) == 2, what="two releases")
            await worker.stop()
            assert [(j.attempts, j.release_buries, k) for j, k, _, _ in rec.acks] == [
                (1, False, AckKind.RELEASE),
                (2, True, AckKind.RELEASE),
            ]
            job = await client.get(f"{topic}-d")
            assert job.state is JobState.BURIED and job.attempts == 2
            assert job.last_error.startswith("division by zero") and "max_attempts (2) used up" in job.last_error
            s = worker.stats
            assert (s.retried, s.exhausted) == (2, 1)

    run(main())


@pytest.mark.parametrize("style", ["sync", "async"])
def test_a_handler_that_outlives_its_ttr_keeps_its_job(server: Server, topic: str, style: str) -> None:
    """TTR 1 s, handler 2.5 s: touched at half the TTR, never handed out again."""

    async def main() -> None:
        rec = Recorder()
        async with delayq.AsyncClient(server.address) as client:
            await client.add(topic, b"slow", id=f"{topic}-slow", ttr=timedelta(seconds=1))
            calls: List[int] = []
            worker = delayq.Worker(client, on_acknowledged=rec)
            if style == "sync":
                worker.handle(topic, lambda job: (calls.append(job.attempts), time.sleep(2.5)) and None)
            else:

                async def slow(job: delayq.Delivery) -> None:
                    calls.append(job.attempts)
                    await asyncio.sleep(2.5)

                worker.handle(topic, slow)
            await worker.start()
            await until(lambda: calls, what="the handler to start")
            # Another worker asking meanwhile gets nothing: the job stays ours.
            assert await client.reserve(topic, wait=timedelta(seconds=2.2)) == []
            await until(lambda: rec.acks, what="the finish")
            await worker.stop()
            assert calls == [1] and rec.kinds() == [("slow", "finish", None)]
            assert worker.stats.touched >= 3  # every 500 ms for 2.5 s

    run(main())


def test_outcomes_are_acknowledged_in_one_pipeline(server: Server, topic: str) -> None:
    async def main() -> None:
        async with delayq.AsyncClient(server.address) as client:
            for i in range(20):
                await client.add(topic, f"{i}")
            batches: List[int] = []
            send = client._acknowledge

            async def counting(acks: Any) -> Any:
                batches.append(len(acks))  # one call: one pipeline, one round trip
                return await send(acks)

            client._acknowledge = counting  # type: ignore[method-assign]
            all_running = asyncio.Event()
            running: List[int] = []

            async def handle(job: delayq.Delivery) -> None:
                running.append(1)
                if len(running) == 20:
                    all_running.set()
                await all_running.wait()  # all 20 return in the same turn of the loop

            finished0 = (await client.stats()).finished
            worker = delayq.Worker(client, concurrency=20)
            worker.handle(topic, handle)
            await worker.start()
            await until(lambda: worker.stats.succeeded == 20, what="20 finishes")
            await worker.stop()
            assert batches == [20] and worker.stats.ack_batches == 1
            assert (await client.stats()).finished - finished0 >= 20

    run(main())


@pytest.mark.parametrize("style", ["sync", "async"])
def test_stop_drains_a_running_handler(server: Server, topic: str, style: str) -> None:
    async def main() -> None:
        rec = Recorder()
        async with delayq.AsyncClient(server.address) as client:
            await client.add(topic, b"x", id=f"{topic}-x")
            started = threading.Event()
            worker = delayq.Worker(client, on_acknowledged=rec)
            if style == "sync":
                worker.handle(topic, lambda job: (started.set(), time.sleep(0.5)) and None)
            else:

                async def handle(job: delayq.Delivery) -> None:
                    started.set()
                    await asyncio.sleep(0.5)

                worker.handle(topic, handle)
            await worker.start()
            await until(started.is_set, what="the handler to start")
            await worker.stop(drain=timedelta(seconds=10))
            # stop returned after the handler did, and its finish landed.
            assert rec.kinds() == [("x", "finish", None)]
            assert await client.get(f"{topic}-x") is None
            assert worker.stats.given_back == 0

    run(main())


@pytest.mark.parametrize("style", ["sync", "async"])
def test_a_handler_longer_than_the_drain_has_its_job_released(server: Server, topic: str, style: str) -> None:
    async def main() -> None:
        rec = Recorder()
        async with delayq.AsyncClient(server.address) as client:
            await client.add(topic, b"x", id=f"{topic}-x")
            started = threading.Event()
            worker = delayq.Worker(client, on_acknowledged=rec)
            if style == "sync":
                worker.handle(topic, lambda job: (started.set(), time.sleep(1.0)) and None)
            else:

                async def handle(job: delayq.Delivery) -> None:
                    started.set()
                    await asyncio.sleep(30)  # cancelled by the stop

                worker.handle(topic, handle)
            await worker.start()
            await until(started.is_set, what="the handler to start")
            t0 = time.monotonic()
            await worker.stop(drain=timedelta(milliseconds=300))
            assert time.monotonic() - t0 < 2
            job = await client.get(f"{topic}-x")
            assert job.state is JobState.READY and job.attempts == 1
            assert job.last_error == "worker stopped while the handler ran"
            assert rec.acks == [] and worker.stats.given_back == 1
            if style == "sync":
                await asyncio.sleep(1.0)  # the thread runs on; its outcome is ignored
                assert (await client.get(f"{topic}-x")).state is JobState.READY

    run(main())


def test_held_jobs_not_started_are_given_back_uncounted(server: Server, topic: str) -> None:
    """Two jobs of a topic that runs one at a time come in one reserve (over
    two topics with room): one runs, one waits held; the stop gives the
    waiting one back with UNRESERVE (its attempt not counted)."""

    async def main() -> None:
        rec = Recorder()
        async with delayq.AsyncClient(server.address) as client:
            await client.add(topic, b"first", id=f"{topic}-1", priority=0)
            await client.add(topic, b"second", id=f"{topic}-2", priority=1)
            started = asyncio.Event()

            async def slow(job: delayq.Delivery) -> None:
                started.set()
                await asyncio.sleep(0.4)

            worker = delayq.Worker(client, concurrency=2, on_acknowledged=rec)
            worker.handle(topic, slow, concurrency=1)
            worker.handle(topic + ".other", slow, concurrency=1)
            await worker.start()
            await started.wait()
            await until(lambda: worker.stats.held == 1, what="a job held, not started")
            assert (await client.get(f"{topic}-2")).state is JobState.RESERVED
            await worker.stop(drain=timedelta(seconds=5))
            second = await client.get(f"{topic}-2")
            assert second.state is JobState.READY and second.attempts == 0
            assert rec.kinds() == [("first", "finish", None)]
            assert worker.stats.given_back == 1

    run(main())


def test_a_stop_withdraws_the_waiting_reserve(server: Server, topic: str) -> None:
    async def main() -> None:
        async with delayq.AsyncClient(server.address) as client:
            waiting0 = (await client.stats()).waiting
            worker = delayq.Worker(client, reserve_wait=timedelta(seconds=20))
            worker.handle(topic, lambda job: None)
            await worker.start()
            await until(
                lambda: _waiting_is(client, waiting0 + 1), what="the worker's reserve to wait"
            )
            t0 = time.monotonic()
            await worker.stop()
            assert time.monotonic() - t0 < 2
            await until(lambda: _waiting_is(client, waiting0), what="the reserve withdrawn")
            added = await client.add(topic, b"after")
            [d] = await client.reserve(topic, wait=timedelta(seconds=2))
            assert d.id == added.id and d.attempts == 1

    run(main())


async def _waiting_is(client: delayq.AsyncClient, n: int) -> bool:
    return (await client.stats()).waiting == n


def test_a_sync_client_works_with_run_and_stop(memory_server: Server, topic: str) -> None:
    """A Worker over a sync Client (it makes its own AsyncClient), run() and
    stop() from another task."""
    client = delayq.Client(memory_server.address)
    client.add(topic, b"x")
    done: List[str] = []
    worker = delayq.Worker(client, on_acknowledged=lambda job, kind, err: done.append(job.text))
    worker.handle(topic, lambda job: None)

    async def main() -> None:
        runner = asyncio.ensure_future(worker.run(handle_signals=False))
        await until(lambda: done, what="the finish")
        await worker.stop()
        await asyncio.wait_for(runner, 5)

    run(main())
    assert done == ["x"]
    assert client.topic_stats(topic).ready == 0
    client.close()


def test_a_topic_that_gains_room_joins_the_waiting_reserve(memory_server: Server, topic: str) -> None:
    """The open reserve names the topics that had room; when a full topic's
    handler returns, the reserve is withdrawn and asked again with it, so its
    next job does not wait for the reserve's whole wait."""

    async def main() -> None:
        rec = Recorder()
        async with delayq.AsyncClient(memory_server.address) as client:
            await client.add(topic, b"a1")

            async def slow(job: delayq.Delivery) -> None:
                await asyncio.sleep(0.3)

            worker = delayq.Worker(
                client, concurrency=2, reserve_wait=timedelta(seconds=20), on_acknowledged=rec
            )
            worker.handle(topic, slow, concurrency=1)
            worker.handle(topic + ".b", slow, concurrency=1)
            await worker.start()
            await until(lambda: rec.acks, what="a1's finish")
            await asyncio.sleep(0.1)  # the reserve asked again, for both topics
            t0 = time.monotonic()
            await client.add(topic, b"a2")
            await until(lambda: len(rec.acks) == 2, 5, what="a2's finish")
            assert time.monotonic() - t0 < 2
            await worker.stop()
            assert worker.stats.reserves >= 3

    run(main())
