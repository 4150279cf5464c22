"""The Worker against the real server, on both stores: outcomes, backoff,
touches, batched acks, the drain and what a stop gives back."""

from __future__ import annotations

import asyncio
import math
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


async def waiting_on(client: delayq.AsyncClient, topic: str) -> bool:
    return (await client.topic_stats(topic)).waiting == 1


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


def sleeper(
    style: str, seconds: float, on_start: Callable[[delayq.Delivery], Any]
) -> Callable[[delayq.Delivery], Any]:
    """A handler that calls ``on_start(job)``, then sleeps ``seconds``: in its
    thread (``style`` "sync") or on the event loop ("async")."""
    if style == "sync":

        def handle(job: delayq.Delivery) -> None:
            on_start(job)
            time.sleep(seconds)

        return handle

    async def handle_async(job: delayq.Delivery) -> None:
        on_start(job)
        await asyncio.sleep(seconds)

    return handle_async


async def start_one_slow_job(
    client: delayq.AsyncClient, topic: str, style: str, seconds: float, rec: Recorder
) -> delayq.Worker:
    """Adds the job "x" (id ``{topic}-x``) and a started worker whose handler
    sleeps ``seconds`` (see ``sleeper``); returns once the handler began."""
    await client.add(topic, b"x", id=f"{topic}-x")
    started = threading.Event()
    worker = delayq.Worker(client, on_acknowledged=rec)
    worker.handle(topic, sleeper(style, seconds, lambda job: started.set()))
    await worker.start()
    await until(started.is_set, what="the handler to start")
    return worker


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
            worker.handle(topic, sleeper(style, 2.5, lambda job: calls.append(job.attempts)))
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
            worker = await start_one_slow_job(client, topic, style, 0.5, rec)
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
            # The sync handler's thread runs on; the async one is cancelled by the stop.
            worker = await start_one_slow_job(client, topic, style, 1.0 if style == "sync" else 30, rec)
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
            # The reserve asked again, now for both topics: one waits on `topic`.
            await until(lambda: waiting_on(client, topic), what="a reserve waiting on the topic")
            t0 = time.monotonic()
            await client.add(topic, b"a2")
            await until(lambda: len(rec.acks) == 2, 5, what="a2's finish")
            assert time.monotonic() - t0 < 2
            await worker.stop()
            assert worker.stats.reserves >= 3

    run(main())


def test_exceptions_as_outcome_texts_are_applied_with_the_rest_of_their_batch(server: Server, topic: str) -> None:
    """Retry(exc), RetryIn(..., exc) and Bury(exc) in one batch with other
    handlers' successes: every outcome is applied, the exception's text (its
    class name when empty) as last_error, and the stop returns."""

    async def main() -> None:
        rec = Recorder()
        async with delayq.AsyncClient(server.address) as client:
            names = ["ok-1", "ok-2", "retry", "retry-in", "bury"]
            for n in names:
                await client.add(topic, n, id=f"{topic}-{n}")
            batches: List[int] = []
            send = client._acknowledge

            async def counting(acks: Any) -> Any:
                batches.append(len(acks))
                return await send(acks)

            client._acknowledge = counting  # type: ignore[method-assign]
            all_running = asyncio.Event()
            running: List[str] = []

            async def handle(job: delayq.Delivery) -> Any:
                running.append(job.text)
                if len(running) == len(names):
                    all_running.set()
                await all_running.wait()  # all return in the same turn: one batch
                if job.text == "retry":
                    return Retry(ValueError("x"))  # type: ignore[arg-type]
                if job.text == "retry-in":
                    return RetryIn(timedelta(minutes=1), KeyError())  # type: ignore[arg-type]
                if job.text == "bury":
                    return Bury(RuntimeError("y"))  # type: ignore[arg-type]
                return None

            worker = delayq.Worker(client, concurrency=len(names), on_acknowledged=rec)
            worker.handle(topic, handle, backoff=Backoff(base_ms=60_000))
            await worker.start()
            try:
                await until(lambda: len(rec.acks) == len(names), what="every outcome acknowledged")
            finally:
                await asyncio.wait_for(worker.stop(drain=timedelta(seconds=1)), 10)
            assert batches == [len(names)]
            assert sorted(rec.kinds()) == [
                ("bury", "bury", None),
                ("ok-1", "finish", None),
                ("ok-2", "finish", None),
                ("retry", "release", None),
                ("retry-in", "release", None),
            ]
            for n in ("ok-1", "ok-2"):
                assert await client.get(f"{topic}-{n}") is None
            retry = await client.get(f"{topic}-retry")
            assert retry.state is JobState.DELAYED and retry.last_error == "x"
            retry_in = await client.get(f"{topic}-retry-in")
            assert retry_in.state is JobState.DELAYED and retry_in.last_error == "KeyError"
            bury = await client.get(f"{topic}-bury")
            assert bury.state is JobState.BURIED and bury.last_error == "y"
            s = worker.stats
            assert (s.succeeded, s.retried, s.buried, s.errors) == (2, 2, 1, 0)

    run(main())


def test_a_lone_surrogate_in_an_outcome_text_is_sent_replaced(memory_server: Server, topic: str) -> None:
    """A str that is not valid UTF-8 (a lone surrogate) as an outcome's text,
    or as release's error: sent with '?' in its place, the batch intact."""

    async def main() -> None:
        rec = Recorder()
        async with delayq.AsyncClient(memory_server.address) as client:
            names = ["ok", "bury", "raise"]
            for n in names:
                await client.add(topic, n, id=f"{topic}-{n}")
            all_running = asyncio.Event()
            running: List[str] = []

            async def handle(job: delayq.Delivery) -> Any:
                running.append(job.text)
                if len(running) == len(names):
                    all_running.set()
                await all_running.wait()
                if job.text == "bury":
                    return Bury("bad \ud800 text")
                if job.text == "raise":
                    raise ValueError("\udcff!")
                return None

            worker = delayq.Worker(client, concurrency=len(names), on_acknowledged=rec)
            worker.handle(topic, handle, backoff=Backoff(base_ms=60_000))
            await worker.start()
            try:
                await until(lambda: len(rec.acks) == len(names), what="every outcome acknowledged")
            finally:
                await asyncio.wait_for(worker.stop(drain=timedelta(seconds=1)), 10)
            assert sorted(rec.kinds()) == [("bury", "bury", None), ("ok", "finish", None), ("raise", "release", None)]
            assert await client.get(f"{topic}-ok") is None
            assert (await client.get(f"{topic}-bury")).last_error == "bad ? text"
            assert (await client.get(f"{topic}-raise")).last_error == "?!"
            # The client's own release and bury alike.
            await client.add(topic, b"c", id=f"{topic}-c")
            [d] = await client.reserve(topic, wait=timedelta(seconds=2))
            await client.release(d, error="e\ud834")
            assert (await client.get(f"{topic}-c")).last_error == "e?"

    run(main())
    with delayq.Client(memory_server.address) as sync:
        sync.add(topic + ".s", b"s", id=f"{topic}-s")
        [d] = sync.reserve(topic + ".s", wait=timedelta(seconds=2))
        sync.bury(d, reason="\udc80r")
        assert sync.get(f"{topic}-s").last_error == "?r"


def _raises() -> float:
    raise RuntimeError("no randomness today")


def _none() -> Any:
    return None


def _word() -> Any:
    return "soon"


def _nan() -> float:
    return math.nan


@pytest.mark.parametrize("random", [_raises, _none, _word, _nan], ids=["raises", "none", "word", "nan"])
def test_a_random_that_fails_never_strands_a_job(memory_server: Server, topic: str, random: Any) -> None:
    """A `random` that raises or gives no number: the retry waits the longest
    jitter (as if 1.0); the job is released, runs again, and stop returns."""

    async def main() -> None:
        rec = Recorder()
        async with delayq.AsyncClient(memory_server.address) as client:
            await client.add(topic, b"j", id=f"{topic}-j")
            worker = delayq.Worker(client, random=random, on_acknowledged=rec)

            def handle(job: delayq.Delivery) -> Any:
                if job.attempts == 1:
                    raise ValueError("first")
                return None

            worker.handle(topic, handle, backoff=Backoff(base_ms=100))
            await worker.start()
            try:
                await until(lambda: len(rec.acks) == 2, what="the release, then the finish")
            finally:
                await asyncio.wait_for(worker.stop(drain=timedelta(seconds=1)), 10)
            assert rec.kinds() == [("j", "release", None), ("j", "finish", None)]
            assert rec.acks[1][0].attempts == 2
            assert await client.get(f"{topic}-j") is None

    run(main())


def test_jitter_of_a_bad_random_is_the_longest() -> None:
    c = delayq.AsyncClient("127.0.0.1:1")
    b = Backoff(base_ms=1000, factor=2.0, cap_ms=600_000)
    cases = [(_raises, 1.0), (_none, 1.0), (_word, 1.0), (_nan, 1.0)]
    cases += [((lambda n: lambda: n)(n), want) for n, want in [(7.0, 1.0), (-3, 0.0), (0.25, 0.25)]]
    for random, expected in cases:
        w = delayq.Worker(c, random=random)
        r = w._jitter()
        assert r == expected, random
        assert delayq.backoff_delay_ms(b, 3, r) == int(2000 + expected * 2000)


def test_an_unexpected_error_sending_acks_is_a_failed_try(memory_server: Server, topic: str) -> None:
    """_acknowledge raising something not a DelayqError (a bug): every ack of
    the batch counts a failed try (internal) and is sent again, as the C++
    worker does for kInternal; none is dropped."""

    async def main() -> None:
        rec = Recorder()
        async with delayq.AsyncClient(memory_server.address) as client:
            for i in range(3):
                await client.add(topic, f"{i}")
            calls: List[int] = []
            send = client._acknowledge

            async def flaky(acks: Any) -> Any:
                calls.append(len(acks))
                if len(calls) == 1:
                    raise RuntimeError("boom")
                return await send(acks)

            client._acknowledge = flaky  # type: ignore[method-assign]
            all_running = asyncio.Event()
            running: List[int] = []

            async def handle(job: delayq.Delivery) -> None:
                running.append(1)
                if len(running) == 3:
                    all_running.set()
                await all_running.wait()

            worker = delayq.Worker(client, concurrency=3, on_acknowledged=rec)
            worker.handle(topic, handle)
            await worker.start()
            try:
                await until(lambda: len(rec.acks) == 3, what="three finishes")
            finally:
                await asyncio.wait_for(worker.stop(drain=timedelta(seconds=1)), 10)
            assert calls == [3, 3]
            assert sorted(rec.kinds()) == [("0", "finish", None), ("1", "finish", None), ("2", "finish", None)]
            s = worker.stats
            assert s.succeeded == 3 and s.errors == 3 and "boom" in s.last_error
            assert s.last_error.startswith("internal: ")
            assert (await client.topic_stats(topic)).ready == 0

    run(main())


def test_stop_returns_when_an_ack_never_gets_an_answer(memory_server: Server, topic: str) -> None:
    """An ack call that never ends (here: hangs on purpose) does not hold the
    stop forever: after the drain, it waits as long as one ack call may take
    (the client's timeouts), then gives the outcome up."""

    async def main() -> None:
        rec = Recorder()
        async with delayq.AsyncClient(
            memory_server.address, connect_timeout=0.2, request_timeout=0.5
        ) as client:
            await client.add(topic, b"h", id=f"{topic}-h")

            async def hang(acks: Any) -> Any:
                await asyncio.Event().wait()

            client._acknowledge = hang  # type: ignore[method-assign]
            worker = delayq.Worker(client, on_acknowledged=rec)
            worker.handle(topic, lambda job: None)
            await worker.start()
            await until(lambda: worker.stats.handled == 1, what="the handler to return")
            t0 = time.monotonic()
            await asyncio.wait_for(worker.stop(drain=timedelta(milliseconds=200)), 10)
            assert time.monotonic() - t0 < 5
            assert rec.kinds() == [("h", "finish", "unavailable")]
            assert "stopped before the server answered" in rec.acks[0][2].message  # type: ignore[union-attr]

    run(main())


def test_sigterm_ends_a_worker_whose_handler_returned_an_exception(memory_server: Server, topic: str) -> None:
    """run_forever with a handler that returns Retry(exc): the outcome is
    applied, and SIGTERM makes the process exit."""
    import os
    import signal
    import subprocess
    import sys

    from conftest import CLIENT_DIR, wait_for

    client = delayq.Client(memory_server.address)
    client.add(topic, b"x", id=f"{topic}-x")
    script = (
        "import sys\n"
        "from datetime import timedelta\n"
        "import delayq\n"
        f"w = delayq.Worker(delayq.Client({memory_server.address!r}))\n"
        f"@w.handler({topic!r}, backoff=delayq.Backoff(base_ms=60000))\n"
        "def h(job):\n"
        "    print('handled', flush=True)\n"
        "    return delayq.Retry(ValueError('x'))\n"
        "w.run_forever(drain=timedelta(seconds=1))\n"
        "print('exited', flush=True)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.path.join(CLIENT_DIR, "src"))
    p = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:

        def released() -> bool:
            job = client.get(f"{topic}-x")
            return job is not None and job.state is JobState.DELAYED

        wait_for(released, 10, "the job released")
        assert client.get(f"{topic}-x").last_error == "x"
        os.kill(p.pid, signal.SIGTERM)
        out, err = p.communicate(timeout=10)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate(timeout=5)
    assert p.returncode == 0, err
    assert out.split() == ["handled", "exited"]
    client.close()


def test_an_outcome_that_cannot_be_read_is_a_release() -> None:
    """Reading the outcome raising (an outcome subclass with an unset field):
    the job is released after the backoff, the error saying why, not left
    without an ack."""
    from delayq.worker import _Held, _Topic

    class Unread(RetryIn):
        __slots__ = ()

        def __init__(self) -> None:  # delay_ms never set: reading it raises
            pass

    w = delayq.Worker(delayq.AsyncClient("127.0.0.1:1"), random=lambda: 0.0)
    d = delayq.Delivery(id="j", topic="t", body=b"", receipt="0" * 24, attempts=1, ttr_ms=1000,
                        priority=0, run_at_ms=0, reserved_until_ms=0, max_attempts=0)  # fmt: skip
    h = _Held(d, _Topic("t", lambda job: None, 1, Backoff(base_ms=250)), 0.0)
    ack = w._ack_of(h, Unread())
    assert (ack.kind, ack.delay_ms) == ("release", 250)
    assert ack.text.startswith("the worker could not read the handler's outcome (Unread): ")
    ack = w._ack_of(h, Retry(ValueError("x")))  # type: ignore[arg-type]
    assert (ack.kind, ack.delay_ms, ack.text) == ("release", 250, "x")
