"""Checks of what a caller passes, made before anything is sent.

Each failure is an :class:`InvalidArgumentError` naming the field, in the
server's words where it has some (src/common/job.cc), so a mistake reads the
same whether the client or the server caught it.

Durations are ``timedelta``s, or whole milliseconds through the ``*_ms``
twin of each parameter (``delay=timedelta(seconds=5)`` or ``delay_ms=5000``).
A bare number for ``delay`` is refused: seconds or milliseconds would be a
guess, as the server's HTTP API refuses a number for ``"delay"``.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Iterable, List, Optional, Tuple, Union

from .errors import InvalidArgumentError

MAX_TOPIC_BYTES = 200
MAX_ID_BYTES = 256
MAX_DELAY_MS = 100 * 365 * 24 * 3600 * 1000  # 100 years
MIN_RUN_AT_MS = 1_000_000_000_000  # 2001-09-09: anything earlier is seconds
MAX_RUN_AT_MS = 253_402_300_799_999  # 9999-12-31
MAX_UINT32 = 4_294_967_295
MAX_RESERVE_COUNT = 1000
MAX_RESERVE_TOPICS = 100
MAX_WAIT_MS = 86_400_000  # a day: the longest a server waits
RECEIPT_CHARS = 24

_TOPIC = re.compile(rb"[A-Za-z0-9._:-]+")
_KEY = re.compile(r"[A-Za-z0-9_-]{1,64}")
_HEX24 = re.compile(r"[0-9a-fA-F]{24}")
_ONE_MS = timedelta(milliseconds=1)

Body = Union[bytes, bytearray, memoryview, str]


def utf8(field: str, value: str) -> bytes:
    """``value`` as UTF-8; InvalidArgumentError naming ``field`` when it has
    a code point UTF-8 cannot carry (a lone surrogate, as from a bad decode
    with ``surrogateescape``), instead of a UnicodeEncodeError."""
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidArgumentError(
            f"{field}: not valid Unicode text (a lone surrogate, U+{ord(value[e.start]):04X}, "
            f"at index {e.start})"
        ) from None


def _name(value: object, field: str, most: int) -> Tuple[str, bytes]:
    """A name (topic, id): a str, and its UTF-8 of at most ``most`` bytes.
    Empty is left to the caller, whose message says what the name may be."""
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{field}: expected a str, got {type(value).__name__}")
    raw = utf8(field, value)
    if len(raw) > most:
        raise InvalidArgumentError(f"{field}: {len(raw)} bytes, at most {most} allowed")
    return value, raw


def topic(name: object, field: str = "topic") -> str:
    text, raw = _name(name, field, MAX_TOPIC_BYTES)
    if not raw:
        raise InvalidArgumentError(f"{field}: required, 1-200 bytes of [A-Za-z0-9._:-]")
    if _TOPIC.fullmatch(raw) is None:
        bad = next(b for b in raw if _TOPIC.fullmatch(bytes([b])) is None)
        raise InvalidArgumentError(f"{field}: only [A-Za-z0-9._:-] allowed, found byte 0x{bad:02x}")
    return text


def topics(names: Union[str, Iterable[str]]) -> List[str]:
    out = [names] if isinstance(names, str) else list(names)
    if not out:
        raise InvalidArgumentError("topics: give at least one topic")
    if len(out) > MAX_RESERVE_TOPICS:
        raise InvalidArgumentError(f"topics: at most {MAX_RESERVE_TOPICS} per reserve, got {len(out)}")
    return [topic(t) for t in out]


def job_id(value: object, field: str = "id") -> str:
    text, raw = _name(value, field, MAX_ID_BYTES)
    if not raw:
        raise InvalidArgumentError(f"{field}: must not be empty")
    if any(b < 0x20 or b == 0x7F for b in raw):
        raise InvalidArgumentError(f"{field}: control characters are not allowed")
    return text


def body(value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return utf8("body", value)
    raise InvalidArgumentError(
        f"body: expected bytes or str, got {type(value).__name__} "
        "(serialise it first, e.g. json.dumps(...))"
    )


def integer(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentError(f"{name}: expected an integer {low}..{high}, got {value!r}")
    if not low <= value <= high:
        raise InvalidArgumentError(f"{name}: must be {low}..{high}, got {value}")
    return value


def duration_ms(
    name: str, value: Optional[timedelta], value_ms: Optional[int]
) -> Optional[int]:
    """``value`` (a timedelta) or ``value_ms`` (int ms) as whole ms, or None
    when neither is given. Sub-millisecond parts are dropped."""
    if value is not None and value_ms is not None:
        raise InvalidArgumentError(f"{name} and {name}_ms: give one, not both")
    if value is not None:
        if isinstance(value, timedelta):
            return value // _ONE_MS
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            raise InvalidArgumentError(
                f"{name}: expected a timedelta, such as timedelta(seconds=5); "
                f"for a number of milliseconds use {name}_ms="
            )
        raise InvalidArgumentError(f"{name}: expected a timedelta, got {type(value).__name__}")
    if value_ms is not None:
        if isinstance(value_ms, bool) or not isinstance(value_ms, int):
            raise InvalidArgumentError(
                f"{name}_ms: expected an integer number of milliseconds, got {value_ms!r}"
            )
        return value_ms
    return None


def delay_ms(ms: int, field: str = "delay_ms") -> int:
    if ms < 0:
        raise InvalidArgumentError(f"{field}: must be >= 0, got {ms}")
    if ms > MAX_DELAY_MS:
        raise InvalidArgumentError(f"{field}: at most 100 years ({MAX_DELAY_MS}), got {ms}")
    return ms


def run_at_ms(run_at: Optional[datetime], run_at_ms_: Optional[int]) -> Optional[int]:
    """A due time as Unix ms. A naive datetime is local time, as
    ``datetime.timestamp()`` takes it."""
    if run_at is not None and run_at_ms_ is not None:
        raise InvalidArgumentError("run_at and run_at_ms: give one, not both")
    if run_at is not None:
        if not isinstance(run_at, datetime):
            raise InvalidArgumentError(f"run_at: expected a datetime, got {type(run_at).__name__}")
        ms = int(run_at.timestamp() * 1000)
    elif run_at_ms_ is not None:
        if isinstance(run_at_ms_, bool) or not isinstance(run_at_ms_, int):
            raise InvalidArgumentError(f"run_at_ms: expected an integer Unix time in ms, got {run_at_ms_!r}")
        ms = run_at_ms_
    else:
        return None
    if 0 <= ms < MIN_RUN_AT_MS:
        raise InvalidArgumentError(
            f"run_at_ms: {ms} is before 2001-09-09 — it looks like seconds; "
            f"give milliseconds ({ms}000)"
        )
    if not MIN_RUN_AT_MS <= ms <= MAX_RUN_AT_MS:
        raise InvalidArgumentError(
            f"run_at_ms: must be a Unix time in ms between {MIN_RUN_AT_MS} (2001-09-09) "
            f"and {MAX_RUN_AT_MS} (9999-12-31), got {ms}"
        )
    return ms


def idempotency_key(key: object) -> str:
    if not isinstance(key, str) or _KEY.fullmatch(key) is None:
        if isinstance(key, str) and not 1 <= len(key) <= 64:
            raise InvalidArgumentError(f"idempotency_key: 1-64 bytes, got {len(key)}")
        raise InvalidArgumentError("idempotency_key: only [A-Za-z0-9_-] allowed")
    return key


def receipt(value: object) -> str:
    if value is None or value == "":
        raise InvalidArgumentError(
            "receipt: required — the receipt from the reserve that handed the job out "
            "(pass the Delivery itself, or force=True to act by id alone)"
        )
    if not isinstance(value, str):
        raise InvalidArgumentError(f"receipt: expected a str, got {type(value).__name__}")
    if _HEX24.fullmatch(value) is None:
        got = (
            "24 characters, not all hex digits"
            if len(value) == RECEIPT_CHARS
            else f"{len(value)} characters"
        )
        raise InvalidArgumentError(f"receipt: expected the 24 hex digits a reserve hands out, got {got}")
    return value


def count(value: object) -> int:
    return integer("count", value, 1, MAX_RESERVE_COUNT)


def wait_ms(ms: int) -> int:
    if not 0 <= ms <= MAX_WAIT_MS:
        raise InvalidArgumentError(f"wait_ms: must be 0..{MAX_WAIT_MS} (a day), got {ms}")
    return ms
