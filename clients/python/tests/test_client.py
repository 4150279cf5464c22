"""Every client call, on both clients (sync, and asyncio driven from a
thread) and both stores (memory, embedded), and every error code as its own
type, against the real server."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Iterator

import pytest
from conftest import Server, free_port, wait_for

import delayq
from delayq import JobState
from delayq._protocol import ok_call

WRONG_RECEIPT = "0123456789abcdef01234567"


class AsyncAsSync:
    """An AsyncClient whose coroutines run on a loop in a thread, so the
    same test body checks both clients."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.inner = delayq.AsyncClient(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not asyncio.iscoroutinefunction(attr):
            return attr

        def call(*a: Any, **k: Any) -> Any:
            return asyncio.run_coroutine_threadsafe(attr(*a, **k), self.loop).result(30)

        return call

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.inner.close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


def make(kind: str, *args: Any, **kwargs: Any) -> Any:
    return delayq.Client(*args, **kwargs) if kind == "sync" else AsyncAsSync(*args, **kwargs)


@pytest.fixture(params=["sync", "async"])
def kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def client(kind: str, server: Server) -> Iterator[Any]:
    c = make(kind, server.address)
    yield c
    c.close()


def now_ms() -> int:
    return int(time.time() * 1000)


def test_add_get_reserve_finish(client: Any, topic: str) -> None:
    added = client.add(topic, '{"order": 42}', priority=7, max_attempts=3, ttr=timedelta(seconds=90))
    assert re.fullmatch(r"[0-9a-f]{32}", added.id), added.id  # made by the client
    assert added.state is JobState.READY and abs(added.run_at_ms - now_ms()) < 5000
    job = client.get(added.id)
    assert (job.topic, job.state, job.body, job.priority, job.ttr_ms, job.max_attempts) == (
        topic, JobState.READY, b'{"order": 42}', 7, 90_000, 3,
    )  # fmt: skip
    assert job.json() == {"order": 42} and job.attempts == 0 and job.receipt == ""

    [d] = client.reserve(topic, count=10)
    assert (d.id, d.topic, d.body, d.attempts, d.ttr_ms, d.priority, d.max_attempts) == (
        added.id, topic, b'{"order": 42}', 1, 90_000, 7, 3,
    )  # fmt: skip
    assert re.fullmatch(r"[0-9a-f]{24}", d.receipt) and d.reserved_until_ms > now_ms()
    assert d.text == '{"order": 42}' and not d.release_buries
    assert client.get(d.id).state is JobState.RESERVED
    client.finish(d)
    assert client.get(d.id) is None


def test_delays_and_due_times(client: Any, topic: str) -> None:
    before = now_ms()
    a = client.add(topic, b"a", delay=timedelta(minutes=5))
    assert a.state is JobState.DELAYED and before + 300_000 <= a.run_at_ms <= now_ms() + 300_000
    b = client.add(topic, b"b", delay_ms=60_000)
    assert b.state is JobState.DELAYED and b.run_at_ms >= before + 60_000
    when = datetime.now(timezone.utc) + timedelta(hours=1)
    c = client.add(topic, b"c", run_at=when)
    assert c.run_at_ms == int(when.timestamp() * 1000) and c.run_at == when.replace(
        microsecond=when.microsecond // 1000 * 1000
    )
    d = client.add(topic, b"d", run_at_ms=now_ms() - 1000)  # past: due now, its time kept
    assert d.state is JobState.READY
    assert client.reserve(topic, count=10) != [] and client.topic_stats(topic).delayed == 3


def test_ids_replace_and_idempotency_keys(client: Any, topic: str) -> None:
    job_id = f"{topic}-order-1"
    client.add(topic, b"one", id=job_id, delay=timedelta(hours=1))
    with pytest.raises(delayq.ExistsError, match=job_id):
        client.add(topic, b"two", id=job_id)
    r = client.add(topic, b"two", id=job_id, replace=True)
    assert r.state is JobState.READY and client.get(job_id).body == b"two"
    # An application's own key with no id: the server names the job by the
    # key, and repeating the whole call adds nothing.
    key = topic.replace(".", "-")
    first = client.add(topic, b"k", idempotency_key=key)
    again = client.add(topic, b"k", idempotency_key=key)
    assert first == again
    assert client.topic_stats(topic).ready == 2


def test_add_many_is_one_pipeline(client: Any, topic: str) -> None:
    results = client.add_many(topic, [b"a", "b", b"c"], delay=timedelta(minutes=1), priority=5)
    assert [client.get(r.id).body for r in results] == [b"a", b"b", b"c"]
    assert len({r.id for r in results}) == 3 and all(r.state is JobState.DELAYED for r in results)
    assert client.get(results[0].id).priority == 5
    assert client.add_many(topic, []) == []
    with pytest.raises(delayq.TooLargeError) as e:
        client.add_many(topic, [b"ok", b"z" * 262_145, b"ok too"])
    first, err, last = e.value.results  # type: ignore[attr-defined]
    assert isinstance(err, delayq.TooLargeError) and client.get(first.id) and client.get(last.id)
    with pytest.raises(delayq.InvalidArgumentError, match="^priority"):
        client.add_many(topic, [b"x"], priority=-1)
    ts = client.topic_stats(topic)
    assert (ts.delayed, ts.ready) == (3, 2)


def test_reserve_counts_waits_and_topics(client: Any, topic: str) -> None:
    other = topic + ".b"
    for i in range(3):
        client.add(topic, f"{i}", priority=10 + i)
    client.add(other, b"x", priority=1)
    got = client.reserve([topic, other], count=3)
    assert [d.body for d in got] == [b"x", b"0", b"1"]  # best first, across topics
    start = time.monotonic()
    assert client.reserve(other, wait=timedelta(milliseconds=200)) == []
    assert time.monotonic() - start >= 0.15
    # A waiting reserve is answered as soon as a job is added.
    client.add(other, b"late", delay_ms=150)
    [late] = client.reserve(other, wait=timedelta(seconds=5))
    assert late.body == b"late"


def test_release_touch_bury_kick_unreserve_delete(client: Any, topic: str) -> None:
    client.add(topic, b"j", id=f"{topic}-j")
    [d] = client.reserve(topic)
    client.touch(d)
    client.release(d, delay=timedelta(minutes=1), error="smtp timeout")
    job = client.get(d.id)
    assert job.state is JobState.DELAYED and job.last_error == "smtp timeout"
    with pytest.raises(delayq.StaleReceiptError):
        client.finish(d)  # that delivery is over
    client.kick(d.id)  # delayed -> ready
    [d2] = client.reserve(topic)
    assert d2.attempts == 2 and d2.receipt != d.receipt
    client.unreserve(d2)  # never begun: not counted
    [d3] = client.reserve(topic)
    assert d3.attempts == 2
    client.bury(d3, reason="cannot parse")
    assert client.get(d.id).state is JobState.BURIED and client.get(d.id).last_error == "cannot parse"
    peeked = client.peek(topic, "buried")
    assert peeked.id == d.id and peeked.state is JobState.BURIED
    assert client.kick_topic(topic, 10) == 1
    assert client.peek(topic, JobState.READY).id == d.id
    assert client.peek(topic, JobState.DELAYED) is None
    client.delete(d.id)
    with pytest.raises(delayq.NotFoundError, match="does not exist"):
        client.delete(d.id)


def test_force_acts_by_id_alone(client: Any, topic: str) -> None:
    client.add(topic, b"f", id=f"{topic}-f")
    with pytest.raises(delayq.NotReservedError, match="not reserved"):
        client.finish(f"{topic}-f", force=True)
    [d] = client.reserve(topic)
    client.touch(d.id, force=True)
    client.release(d.id, force=True, error="by hand")
    [d] = client.reserve(topic)
    client.bury(d, force=True)
    client.kick(d.id)
    [d] = client.reserve(topic)
    client.finish(d.id, force=True)
    assert client.get(d.id) is None


def test_each_server_error_is_its_own_type(client: Any, topic: str) -> None:
    client.add(topic, b"x", id=f"{topic}-x")
    with pytest.raises(delayq.ExistsError) as exists:
        client.add(topic, b"x", id=f"{topic}-x")
    assert exists.value.code == "exists"
    with pytest.raises(delayq.InvalidArgumentError, match="is ready; only buried or delayed jobs can be kicked") as inv:
        client.kick(f"{topic}-x")  # checked by the server
    assert inv.value.code == "invalid_argument"
    with pytest.raises(delayq.NotFoundError) as nf:
        client.finish("nope", WRONG_RECEIPT)
    assert nf.value.code == "not_found"
    [d] = client.reserve(topic)
    with pytest.raises(delayq.StaleReceiptError, match="receipt does not match") as stale:
        client.finish(d.id, WRONG_RECEIPT)
    assert stale.value.code == "stale_receipt"
    client.finish(d)
    client.add(topic, b"y", id=f"{topic}-y")
    with pytest.raises(delayq.NotReservedError) as nr:
        client.release(f"{topic}-y", force=True)
    assert nr.value.code == "not_reserved"
    with pytest.raises(delayq.TooLargeError, match="262145 bytes, at most 262144 allowed") as tl:
        client.add(topic, b"z" * 262_145)
    assert tl.value.code == "too_large"
    assert all(isinstance(e.value, delayq.DelayqError) for e in (exists, inv, nf, stale, nr, tl))


def test_stats_topics_pause_resume_ping(client: Any, topic: str) -> None:
    client.ping()
    client.add(topic, b"p")
    assert topic in client.topics()
    client.pause(topic)
    ts = client.topic_stats(topic)
    assert ts.paused and ts.paused_for_ms == -1 and ts.ready == 1
    assert client.reserve(topic) == []  # a paused topic hands out nothing
    client.resume(topic)
    assert not client.topic_stats(topic).paused
    client.pause(topic, timedelta(minutes=1))
    assert 0 < client.topic_stats(topic).paused_for_ms <= 60_000
    client.resume(topic)
    s = client.stats()
    assert s.added >= 1 and s.jobs >= 1 and s.connections >= 1
    assert isinstance(s.extra, dict)
    [d] = client.reserve(topic)
    client.finish(d)


@pytest.mark.parametrize("kind_", ["sync", "async"])
def test_err_replies_are_internal_errors(kind_: str, memory_server: Server) -> None:
    c = make(kind_, memory_server.address)
    try:
        transport = c._transport if kind_ == "sync" else c.inner._transport
        call = ok_call(("FROB", "a"), True)
        if kind_ == "sync":
            run = lambda: transport.run(call)  # noqa: E731
        else:
            run = lambda: asyncio.run_coroutine_threadsafe(transport.run(call), c.loop).result(10)  # noqa: E731
        with pytest.raises(delayq.InternalError, match="unknown command 'FROB'") as e:
            run()
        assert e.value.code == "internal"
    finally:
        c.close()


def test_no_server_is_unavailable(kind: str) -> None:
    c = make(kind, [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"])
    try:
        with pytest.raises(delayq.UnavailableError, match=r"^no delayq server answered: 127\.0\.0\.1:\d+ \(Connection refused\), 127") as e:
            c.ping()
        assert e.value.code == "unavailable"
    finally:
        c.close()


@pytest.fixture(scope="module")
def auth_server() -> Iterator[Server]:
    s = Server("--store", "memory", "--auth-token", "s3cret")
    yield s
    s.stop()


def test_tokens(kind: str, auth_server: Server, monkeypatch: pytest.MonkeyPatch, topic: str) -> None:
    monkeypatch.delenv("DELAYQ_AUTH_TOKEN", raising=False)
    c = make(kind, auth_server.address)
    with pytest.raises(delayq.UnauthorizedError, match="Authentication required") as e:
        c.add(topic, b"x")  # no token: the server answers NOAUTH
    assert e.value.code == "unauthorized"
    c.close()
    c = make(kind, auth_server.address, auth_token="wrong")
    with pytest.raises(delayq.UnauthorizedError, match="^no delayq server accepted: .*AUTH refused"):
        c.add(topic, b"x")
    c.close()
    monkeypatch.setenv("DELAYQ_AUTH_TOKEN", "s3cret")
    c = make(kind, auth_server.address)
    assert c.add(topic, b"x").state is JobState.READY
    c.close()


def test_a_waiting_reserve_on_a_server_shutting_down_is_unavailable(kind: str, topic: str) -> None:
    s = Server("--store", "memory")
    c = make(kind, s.address)
    try:
        c.ping()
        result: dict = {}

        def reserve() -> None:
            try:
                result["jobs"] = c.reserve(topic, wait=timedelta(seconds=20))
            except delayq.DelayqError as e:
                result["error"] = e

        t = threading.Thread(target=reserve)
        t.start()
        probe = delayq.Client(s.address)
        wait_for(lambda: probe.stats().waiting == 1, 5, "the reserve to wait")
        probe.close()
        s.stop()
        t.join(10)
        err = result["error"]
        assert isinstance(err, delayq.UnavailableError) and err.shutting_down, err
        assert s.address in err.message
    finally:
        c.close()
        s.stop()


def test_a_cancelled_async_reserve_is_withdrawn_and_takes_no_job(memory_server: Server, topic: str) -> None:
    async def main() -> None:
        async with delayq.AsyncClient(memory_server.address) as a:
            before = (await a.stats()).waiting
            task = asyncio.ensure_future(a.reserve(topic, wait=timedelta(seconds=20)))
            while (await a.stats()).waiting == before:
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            while (await a.stats()).waiting != before:  # withdrawn on the server
                await asyncio.sleep(0.01)
            added = await a.add(topic, b"after")
            [d] = await a.reserve(topic, wait=timedelta(seconds=2))
            assert d.id == added.id and d.attempts == 1

    asyncio.run(asyncio.wait_for(main(), 20))


def test_context_managers_close(memory_server: Server, topic: str) -> None:
    with delayq.Client(memory_server.address) as c:
        c.add(topic, b"x")
    with pytest.raises(delayq.UnavailableError, match="the client is closed"):
        c.ping()

    async def main() -> None:
        async with delayq.AsyncClient(memory_server.address) as a:
            await a.ping()
        with pytest.raises(delayq.UnavailableError, match="the client is closed"):
            await a.ping()

    asyncio.run(main())


def test_an_add_with_an_idempotency_key_and_no_id_is_named_by_the_server(client: Any, topic: str) -> None:
    """What the README and add's docstring say: with no id the client makes
    one (32 hex digits), unless an idempotency_key is given: then the server
    makes it (not in the client's form), and a repeat with the key gets the
    same id."""
    import re

    made = client.add(topic, b"a")
    assert re.fullmatch(r"[0-9a-f]{32}", made.id), made.id
    key = topic.replace(".", "-") + "-named"
    named = client.add(topic, b"b", idempotency_key=key)
    assert not re.fullmatch(r"[0-9a-f]{32}", named.id), named.id
    assert client.add(topic, b"b", idempotency_key=key).id == named.id
    mine = client.add(topic, b"c", id=f"{topic}-mine", idempotency_key=key + "2")
    assert mine.id == f"{topic}-mine"
