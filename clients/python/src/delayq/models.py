"""What the client hands back: deliveries, jobs, add results and statistics.

Times are Unix milliseconds as the server sends them (``run_at_ms``), with
``datetime`` views (``run_at``) in UTC for reading. Bodies are bytes; a
delivery's ``text`` and ``json()`` read them as UTF-8 or JSON.
"""

from __future__ import annotations

import json as _json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum
from typing import Any, Dict

__all__ = ["JobState", "AddResult", "Delivery", "Job", "Stats", "TopicStats"]


class JobState(str, Enum):
    """A job's state (docs/api.md §1 "States"). A ``str``: compares equal to
    ``"ready"`` and the others."""

    DELAYED = "delayed"
    READY = "ready"
    RESERVED = "reserved"
    BURIED = "buried"

    def __str__(self) -> str:
        return self.value


def _utc(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


class _Due:
    """``run_at``: the ``datetime`` view of a record's ``run_at_ms``."""

    run_at_ms: int

    @property
    def run_at(self) -> datetime:
        """When it is (or was) due, in UTC."""
        return _utc(self.run_at_ms)


class _Body(_Due):
    """``text`` and ``json()``: a job's body read as UTF-8 or JSON."""

    body: bytes

    @property
    def text(self) -> str:
        """The body as UTF-8 text."""
        return self.body.decode("utf-8")

    def json(self) -> Any:
        """The body parsed as JSON."""
        return _json.loads(self.body)


@dataclass(frozen=True)
class AddResult(_Due):
    """What an add answered: the job's id (the client makes one when none
    was given), its state (``DELAYED``, or ``READY`` when due now) and when
    it is due."""

    id: str
    state: JobState
    run_at_ms: int


@dataclass(frozen=True)
class Delivery(_Body):
    """A job handed out by reserve: the RESP job array's ten fields, in its
    order. ``receipt`` proves this delivery; finish, release, touch and bury
    need it (pass the delivery itself and it is taken from there)."""

    id: str
    topic: str
    body: bytes
    receipt: str
    attempts: int  # deliveries so far, this one included
    ttr_ms: int
    priority: int
    run_at_ms: int
    reserved_until_ms: int  # wall-clock estimate of the end of the reservation; 0 from peek
    max_attempts: int  # 0: unlimited

    @property
    def release_buries(self) -> bool:
        """Whether releasing this delivery buries the job instead: its
        ``max_attempts`` are used up (the server applies that rule)."""
        return self.max_attempts != 0 and self.attempts >= self.max_attempts


@dataclass(frozen=True)
class Job(_Body):
    """A job as ``get`` reads it: GET's 13 fields."""

    id: str
    topic: str
    state: JobState
    body: bytes
    priority: int
    ttr_ms: int
    max_attempts: int
    attempts: int
    created_at_ms: int
    run_at_ms: int
    reserved_until_ms: int  # 0 unless reserved
    receipt: str  # "" unless reserved
    last_error: str  # from the last release, or why it was buried

    @property
    def created_at(self) -> datetime:
        return _utc(self.created_at_ms)


@dataclass(frozen=True)
class Stats:
    """The server's STATS (docs/api.md, ``GET /v1/stats`` for the meanings).
    Figures a store adds of its own (``log_*`` for embedded, ``redis_*`` for
    redis) are in ``extra``."""

    jobs: int = 0
    delayed: int = 0
    ready: int = 0
    reserved: int = 0
    buried: int = 0
    topics: int = 0
    waiting: int = 0
    added: int = 0
    replaced: int = 0
    reserves: int = 0
    finished: int = 0
    deleted: int = 0
    released: int = 0
    timed_out: int = 0
    buried_total: int = 0
    kicked: int = 0
    connections: int = 0
    due_lateness_count: int = 0
    due_lateness_p50_us: int = 0
    due_lateness_p99_us: int = 0
    due_lateness_p999_us: int = 0
    due_lateness_max_us: int = 0
    extra: Dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class TopicStats:
    """One topic's figures (STATS topic)."""

    topic: str
    delayed: int
    ready: int
    reserved: int
    buried: int
    waiting: int  # reserves waiting on it
    paused: bool
    paused_for_ms: int  # -1: until resumed; 0 when not paused
