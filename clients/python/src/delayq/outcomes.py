"""What a handler returns, and the backoff of its retries.

    @worker.handler("orders.close")
    def close_order(job):
        if job.body == b"not json":
            return delayq.Bury("cannot parse the order")   # set aside until kicked
        if payment_busy():
            return delayq.RetryIn(timedelta(seconds=30), "payment service busy")
        close(job.json())                                  # returning None: success

An exception raised by a handler is ``Retry(str(exc))`` (the exception's
class name when its text is empty): the job is released after the topic's
backoff, with that text as its ``last_error``. An outcome's text may be an
exception itself (``Retry(exc)``, ``Bury(exc)``): it is read the same way, so
``error``/``reason`` is always a str. A text that is not valid Unicode (a
lone surrogate) is sent with ``?`` in place of what cannot be encoded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from typing import Optional, Union

from . import _validate as v

__all__ = ["Success", "Retry", "RetryIn", "Bury", "Outcome", "Backoff", "backoff_delay_ms"]


def text_of(value: object) -> str:
    """An outcome's text as a str: a str as is; None as ""; an exception as
    ``str(exc)``, its class name when that is empty (as a raised one);
    bytes read as UTF-8 (bad bytes replaced); anything else as ``str()``, its
    class name when that raises. Never raises."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", errors="replace")
    try:
        text = str(value)
    except Exception:
        return type(value).__name__
    if not isinstance(text, str):  # a __str__ that broke its contract
        return type(value).__name__
    if not text and isinstance(value, BaseException):
        return type(value).__name__
    return text


@dataclass(frozen=True)
class Success:
    """Done: the job is finished (gone). Returning None means the same."""


@dataclass(frozen=True)
class Retry:
    """Try again later, after the topic's backoff for this attempt (see
    :class:`Backoff`); ``error`` becomes the job's last_error (a str; an
    exception is read as ``str(exc)``, its class name when that is empty)."""

    error: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "error", text_of(self.error))


class RetryIn:
    """Try again after ``delay`` (a timedelta; or ``delay_ms=``, whole ms);
    ``error`` becomes the job's last_error (a str; an exception is read as
    ``str(exc)``, its class name when that is empty)."""

    __slots__ = ("delay_ms", "error")

    def __init__(
        self, delay: Optional[timedelta] = None, error: str = "", *, delay_ms: Optional[int] = None
    ) -> None:
        ms = v.duration_ms("delay", delay, delay_ms)
        if ms is None:
            raise v.InvalidArgumentError("delay: required (a timedelta), or delay_ms=")
        self.delay_ms: int = v.delay_ms(ms)
        self.error: str = text_of(error)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, RetryIn)
            and other.delay_ms == self.delay_ms
            and other.error == self.error
        )

    def __hash__(self) -> int:
        return hash((self.delay_ms, self.error))

    def __repr__(self) -> str:
        return f"RetryIn(delay_ms={self.delay_ms}, error={self.error!r})"


@dataclass(frozen=True)
class Bury:
    """Give up: the job is buried (kept, with ``reason`` as its last_error,
    until kicked). ``reason``: a str; an exception is read as ``str(exc)``,
    its class name when that is empty."""

    reason: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "reason", text_of(self.reason))


Outcome = Union[Success, Retry, RetryIn, Bury, None]


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff for retries (the C++ Worker's). The n-th attempt
    (``Delivery.attempts``, 1 on the first delivery) that asks for a retry
    waits ``d = min(cap_ms, base_ms * factor**(n-1))``, jittered uniformly to
    [d/2, d] but never below ``base_ms``: the first retry waits ``base_ms``
    exactly, the next ones between half and all of d, and none waits more
    than ``cap_ms``. A ``base_ms`` of 0 retries at once."""

    base_ms: int = 1000  # >= 0. Default: 1 s.
    factor: float = 2.0  # >= 1. Default: 2.
    cap_ms: int = 600_000  # >= base_ms, at most 100 years. Default: 10 min.

    def check(self) -> None:
        """Raises InvalidArgumentError naming the bad field."""
        if isinstance(self.base_ms, bool) or not isinstance(self.base_ms, int) or self.base_ms < 0:
            raise v.InvalidArgumentError(f"backoff.base_ms: must be an integer >= 0, got {self.base_ms!r}")
        if not isinstance(self.factor, (int, float)) or not math.isfinite(self.factor) or self.factor < 1:
            raise v.InvalidArgumentError(f"backoff.factor: must be a finite number >= 1, got {self.factor!r}")
        if isinstance(self.cap_ms, bool) or not isinstance(self.cap_ms, int) or self.cap_ms < self.base_ms:
            raise v.InvalidArgumentError(f"backoff.cap_ms: must be an integer >= backoff.base_ms, got {self.cap_ms!r}")
        if self.cap_ms > v.MAX_DELAY_MS:
            raise v.InvalidArgumentError("backoff.cap_ms: at most 100 years")


def backoff_delay_ms(backoff: Backoff, attempts: int, random: float) -> int:
    """The delay for attempt ``attempts`` (0 is read as 1) with ``random`` in
    [0, 1] (0: the shortest delay, 1: the longest; clamped). The C++
    ``BackoffDelayMs``, the same numbers."""
    if backoff.base_ms <= 0:
        return 0
    attempts = max(attempts, 1)
    if not random >= 0:  # also NaN
        random = 0.0
    random = min(random, 1.0)
    steps = min(attempts - 1, 4096)
    try:
        d = float(backoff.base_ms) * math.pow(backoff.factor, steps)
    except OverflowError:
        d = math.inf
    cap = float(backoff.cap_ms)
    if not d <= cap:
        d = cap
    jittered = int(d / 2 + random * (d / 2))
    return max(backoff.base_ms, min(jittered, backoff.cap_ms))
