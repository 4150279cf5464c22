"""Bad input is refused before anything is sent, naming the field; the
backoff formula; where the client connects. No server needed: the client
points at a port nothing listens on, so anything sent would show as
UnavailableError instead of InvalidArgumentError."""

from __future__ import annotations

import asyncio
import math
from datetime import datetime, timedelta, timezone

import pytest
from conftest import free_port

import delayq
from delayq import Backoff, InvalidArgumentError, backoff_delay_ms
from delayq._config import parse_servers
from delayq._protocol import error_from_redis

RECEIPT = "0123456789abcdef01234567"


@pytest.fixture(scope="module")
def client() -> delayq.Client:
    return delayq.Client(f"127.0.0.1:{free_port()}")


def refused(call, field_message: str) -> None:
    with pytest.raises(InvalidArgumentError) as e:
        call()
    assert str(e.value).startswith(field_message), str(e.value)


ADD_CASES = [
    (dict(topic=""), "topic: required"),
    (dict(topic="orders close"), "topic: only [A-Za-z0-9._:-] allowed, found byte 0x20"),
    (dict(topic="é"), "topic: only [A-Za-z0-9._:-] allowed, found byte 0xc3"),
    (dict(topic="t" * 201), "topic: 201 bytes, at most 200 allowed"),
    (dict(topic=5), "topic: expected a str"),
    (dict(topic="t", delay_ms=-1), "delay_ms: must be >= 0, got -1"),
    (dict(topic="t", delay=timedelta(seconds=-1)), "delay_ms: must be >= 0, got -1000"),
    (dict(topic="t", delay=5), "delay: expected a timedelta"),
    (dict(topic="t", delay=timedelta(1), delay_ms=5), "delay and delay_ms: give one, not both"),
    (dict(topic="t", delay_ms=1, run_at=datetime.now(timezone.utc)), "delay and run_at: give at most one"),
    (dict(topic="t", run_at_ms=1795659700), "run_at_ms: 1795659700 is before 2001-09-09 — it looks like seconds"),
    (dict(topic="t", run_at=datetime(1999, 1, 1, tzinfo=timezone.utc)), "run_at_ms: 915148800000 is before 2001-09-09"),
    (dict(topic="t", run_at="tomorrow"), "run_at: expected a datetime"),
    (dict(topic="t", ttr_ms=0), "ttr_ms: must be 1..4294967295, got 0"),
    (dict(topic="t", ttr=timedelta(0)), "ttr_ms: must be 1..4294967295, got 0"),
    (dict(topic="t", priority=-1), "priority: must be 0..4294967295, got -1"),
    (dict(topic="t", priority=2**32), "priority: must be 0..4294967295, got 4294967296"),
    (dict(topic="t", max_attempts=-2), "max_attempts: must be 0..4294967295"),
    (dict(topic="t", id=""), "id: must not be empty"),
    (dict(topic="t", id="*"), "id: '*' asks a server for a generated id"),
    (dict(topic="t", id="a\nb"), "id: control characters are not allowed"),
    (dict(topic="t", id="x" * 257), "id: 257 bytes, at most 256 allowed"),
    (dict(topic="t", body={"a": 1}), "body: expected bytes or str, got dict"),
    (dict(topic="t", idempotency_key="a b"), "idempotency_key: only [A-Za-z0-9_-] allowed"),
    (dict(topic="t", idempotency_key="k" * 65), "idempotency_key: 1-64 bytes, got 65"),
]


@pytest.mark.parametrize("kwargs,message", ADD_CASES)
def test_add_refuses_bad_input_before_sending(client: delayq.Client, kwargs, message) -> None:
    refused(lambda: client.add(**kwargs), message)


def test_async_client_refuses_the_same_before_sending() -> None:
    async def main() -> None:
        async with delayq.AsyncClient(f"127.0.0.1:{free_port()}") as a:
            for kwargs, message in ADD_CASES:
                with pytest.raises(InvalidArgumentError) as e:
                    await a.add(**kwargs)
                assert str(e.value).startswith(message)
            with pytest.raises(InvalidArgumentError, match="^count: must be 1..1000, got 0"):
                await a.reserve("t", count=0)
            with pytest.raises(InvalidArgumentError, match="^receipt: expected the 24 hex digits"):
                await a.finish("j", "0123")

    asyncio.run(main())


def test_reserve_refuses_bad_input(client: delayq.Client) -> None:
    refused(lambda: client.reserve([]), "topics: give at least one topic")
    refused(lambda: client.reserve([f"t{i}" for i in range(101)]), "topics: at most 100 per reserve")
    refused(lambda: client.reserve(["ok", "not ok"]), "topic: only [A-Za-z0-9._:-] allowed, found byte 0x20")
    refused(lambda: client.reserve("t", count=0), "count: must be 1..1000, got 0")
    refused(lambda: client.reserve("t", count=1001), "count: must be 1..1000, got 1001")
    refused(lambda: client.reserve("t", wait=timedelta(days=2)), "wait_ms: must be 0..86400000")
    refused(lambda: client.reserve("t", wait_ms=-1), "wait_ms: must be 0..86400000")
    refused(lambda: client.reserve("t", wait=30), "wait: expected a timedelta")


def test_receipts_are_checked(client: delayq.Client) -> None:
    refused(lambda: client.finish("j"), "receipt: required")
    refused(lambda: client.finish("j", ""), "receipt: required")
    refused(lambda: client.finish("j", "0123"), "receipt: expected the 24 hex digits a reserve hands out, got 4 characters")
    refused(lambda: client.touch("j", "g" * 24), "receipt: expected the 24 hex digits a reserve hands out, got 24 characters, not all hex")
    refused(lambda: client.release("j", "12"), "receipt: expected the 24 hex digits")
    refused(lambda: client.bury("j", None), "receipt: required")
    refused(lambda: client.unreserve("j"), "receipt: required")
    refused(lambda: client.finish("j", RECEIPT, force=True), "receipt and force: give one, not both")
    refused(lambda: client.release("j", RECEIPT, delay_ms=-5), "delay_ms: must be >= 0, got -5")
    refused(lambda: client.finish("", RECEIPT), "id: must not be empty")


def test_other_calls_check_their_input(client: delayq.Client) -> None:
    refused(lambda: client.kick_topic("t", -1), "n: must be 0..")
    refused(lambda: client.kick_topic("", 1), "topic: required")
    refused(lambda: client.pause("t", duration_ms=-1), "duration_ms: must be >= 0")
    refused(lambda: client.peek("t", "reserved"), "state: peek shows ready, delayed or buried jobs")
    refused(lambda: client.topic_stats("a/b"), "topic: only [A-Za-z0-9._:-] allowed, found byte 0x2f")


def test_nothing_was_sent_but_a_good_call_reaches_for_the_server(client: delayq.Client) -> None:
    with pytest.raises(delayq.UnavailableError, match="^no delayq server answered: 127.0.0.1:"):
        client.add("t", b"x")


def test_outcomes_and_backoffs_check_their_fields() -> None:
    with pytest.raises(InvalidArgumentError, match="^delay_ms: must be >= 0, got -1000"):
        delayq.RetryIn(timedelta(seconds=-1))
    with pytest.raises(InvalidArgumentError, match="^delay: expected a timedelta"):
        delayq.RetryIn(5)  # type: ignore[arg-type]
    assert delayq.RetryIn(delay_ms=250).delay_ms == 250
    assert delayq.RetryIn(timedelta(seconds=2), "x") == delayq.RetryIn(delay_ms=2000, error="x")
    with pytest.raises(InvalidArgumentError, match="^backoff.factor"):
        Backoff(factor=0.5).check()
    with pytest.raises(InvalidArgumentError, match="^backoff.cap_ms"):
        Backoff(base_ms=10, cap_ms=5).check()
    with pytest.raises(InvalidArgumentError, match="^backoff.base_ms"):
        Backoff(base_ms=-1).check()


def test_worker_checks_its_options() -> None:
    c = delayq.Client(f"127.0.0.1:{free_port()}")
    with pytest.raises(InvalidArgumentError, match="^concurrency: must be 1..1024, got 0"):
        delayq.Worker(c, concurrency=0)
    with pytest.raises(InvalidArgumentError, match="^reserve_wait: expected a timedelta"):
        delayq.Worker(c, reserve_wait=30)  # type: ignore[arg-type]
    w = delayq.Worker(c)
    with pytest.raises(InvalidArgumentError, match="^topic: required"):
        w.handle("", lambda job: None)
    with pytest.raises(InvalidArgumentError, match="^backoff.factor"):
        w.handle("t", lambda job: None, backoff=Backoff(factor=math.nan))
    w.handle("t", lambda job: None)
    with pytest.raises(InvalidArgumentError, match="^topic 't' already has a handler"):
        w.handle("t", lambda job: None)
    with pytest.raises(InvalidArgumentError, match="^no handlers"):
        asyncio.run(delayq.Worker(c).start())


def test_backoff_matches_the_cpp_formula() -> None:
    b = Backoff(base_ms=1000, factor=2.0, cap_ms=600_000)
    # The first retry waits base exactly, whatever the jitter.
    assert backoff_delay_ms(b, 1, 0.0) == 1000
    assert backoff_delay_ms(b, 1, 1.0) == 1000
    assert backoff_delay_ms(b, 0, 0.5) == 1000  # 0 is read as 1
    # Later ones: d = base * factor^(n-1), jittered to [d/2, d], never below base.
    assert backoff_delay_ms(b, 2, 0.0) == 1000
    assert backoff_delay_ms(b, 2, 1.0) == 2000
    assert backoff_delay_ms(b, 3, 0.5) == 3000
    assert backoff_delay_ms(b, 4, 0.0) == 4000
    # Never above the cap, even far out (no overflow).
    assert backoff_delay_ms(b, 30, 1.0) == 600_000
    assert backoff_delay_ms(b, 10_000, 0.0) == 300_000
    assert backoff_delay_ms(b, 2, math.nan) == 1000  # NaN reads as 0
    assert backoff_delay_ms(b, 2, 7.0) == 2000  # clamped to 1
    assert backoff_delay_ms(Backoff(base_ms=0), 5, 1.0) == 0


def test_servers_come_from_the_argument_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_servers("a:1,b:2") == [("a", 1), ("b", 2)]
    assert parse_servers(["10.0.0.5:7701", "10.0.0.6"]) == [("10.0.0.5", 7701), ("10.0.0.6", 7701)]
    monkeypatch.setenv("DELAYQ_SERVER", "127.0.0.1:7799,127.0.0.2:7798")
    assert delayq.Client().servers == ["127.0.0.1:7799", "127.0.0.2:7798"]
    monkeypatch.delenv("DELAYQ_SERVER")
    assert delayq.Client().servers == ["127.0.0.1:7701"]
    with pytest.raises(InvalidArgumentError, match="^servers: empty address"):
        delayq.Client("a:1,,b:2")
    with pytest.raises(InvalidArgumentError, match="^servers: bad address 'a:x'"):
        delayq.Client("a:x")


def test_redis_errors_map_to_their_types() -> None:
    import redis.exceptions as rx

    cases = {
        "INVALID topic: required": delayq.InvalidArgumentError,
        "NOTFOUND job 'x' does not exist": delayq.NotFoundError,
        "EXISTS job 'x' already exists": delayq.ExistsError,
        "STALE receipt does not match": delayq.StaleReceiptError,
        "NOTRESERVED job 'x' is delayed, not reserved": delayq.NotReservedError,
        "TOOLARGE body: 5 bytes": delayq.TooLargeError,
        "UNAVAILABLE shutting down: the server is stopping": delayq.UnavailableError,
        "unknown command 'FROB'": delayq.InternalError,  # redis-py strips "ERR "
    }
    for text, cls in cases.items():
        err = error_from_redis(rx.ResponseError(text))
        assert type(err) is cls, text
        assert isinstance(err, delayq.DelayqError)
    assert error_from_redis(rx.ResponseError("INVALID topic: required")).message == "topic: required"
    noauth = error_from_redis(rx.AuthenticationError("invalid token"))
    assert type(noauth) is delayq.UnauthorizedError and noauth.code == "unauthorized"
    assert delayq.UnavailableError("shutting down: x").shutting_down


def test_pause_refuses_more_than_100_years(client: delayq.Client) -> None:
    """As the server does (PAUSE ms 0 ... 3153600000000): refused, not capped."""
    most = 100 * 365 * 24 * 3600 * 1000
    refused(
        lambda: client.pause("t", duration_ms=most + 1),
        f"duration_ms: at most 100 years ({most}), got {most + 1}",
    )
    refused(lambda: client.pause("t", duration=timedelta(days=365 * 101)), "duration_ms: at most 100 years")
    # 100 years exactly is allowed: the call reaches for the server.
    with pytest.raises(delayq.UnavailableError):
        client.pause("t", duration_ms=most)


def test_outcome_texts_are_strs_whatever_was_given() -> None:
    """An exception as an outcome's text is its str() (its class name when
    that is empty), as a raised one is; bytes are read as UTF-8."""

    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    assert delayq.Retry(ValueError("x")).error == "x"  # type: ignore[arg-type]
    assert delayq.Retry(KeyError()).error == "KeyError"  # type: ignore[arg-type]
    assert delayq.Retry(Unprintable()).error == "Unprintable"  # type: ignore[arg-type]
    assert delayq.Retry(None).error == ""  # type: ignore[arg-type]
    assert delayq.Retry().error == ""
    assert delayq.Bury(RuntimeError("y")).reason == "y"  # type: ignore[arg-type]
    assert delayq.Bury(b"caf\xc3\xa9").reason == "café"  # type: ignore[arg-type]
    assert delayq.Bury(42).reason == "42"  # type: ignore[arg-type]
    assert delayq.RetryIn(delay_ms=5, error=OSError("z")).error == "z"  # type: ignore[arg-type]
    assert delayq.RetryIn(delay_ms=5, error=ValueError("x")) == delayq.RetryIn(delay_ms=5, error="x")  # type: ignore[arg-type]
    assert delayq.Retry(ValueError("x")) == delayq.Retry("x")  # type: ignore[arg-type]


def test_pack_never_fails_on_a_str() -> None:
    from delayq._protocol import pack

    assert pack([("BURY", "j", "r", "ERROR", "a\ud800b")]) == (
        b"*5\r\n$4\r\nBURY\r\n$1\r\nj\r\n$1\r\nr\r\n$5\r\nERROR\r\n$3\r\na?b\r\n"
    )
    assert pack([("X", "\udcff")]) == b"*2\r\n$1\r\nX\r\n$1\r\n?\r\n"


def test_text_that_is_not_valid_unicode_is_refused_where_it_names_something(client: delayq.Client) -> None:
    """A lone surrogate in a topic, an id or a str body: InvalidArgumentError
    naming the field (not UnicodeEncodeError), nothing sent; pass bytes for a
    body that is not text."""
    refused(lambda: client.add("t\ud800"), "topic: not valid Unicode text (a lone surrogate, U+D800, at index 1)")
    refused(lambda: client.add("t", b"", id="j\udcff"), "id: not valid Unicode text (a lone surrogate, U+DCFF, at index 1)")
    refused(lambda: client.add("t", "ab\ud800"), "body: not valid Unicode text (a lone surrogate, U+D800, at index 2)")
    refused(lambda: client.get("j\ud800"), "id: not valid Unicode text")
    refused(lambda: client.reserve(["ok", "x\ud800"]), "topic: not valid Unicode text")
