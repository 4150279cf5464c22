"""Each client method's checks and request, shared by Client and AsyncClient.

A function here takes the public arguments, checks them (raising
InvalidArgumentError, nothing sent) and returns the :class:`Call` to run;
the two clients differ only in how they run it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Iterable, List, Optional, Tuple, Union

from . import _validate as v
from ._protocol import (
    Ack,
    Call,
    IdMaker,
    acks_call,
    each_ok_call,
    ok_call,
    parse_added,
    parse_deliveries,
    parse_delivery,
    parse_job,
    parse_names,
    parse_stats,
    parse_topic_stats,
    reserve_command,
    single,
)
from .errors import DelayqError, ExistsError, InvalidArgumentError
from .models import AddResult, Delivery, Job, JobState, Stats, TopicStats

JobRef = Union[Delivery, str]

DEFAULT_TTR_MS = 60_000
DEFAULT_PRIORITY = 1024


class ExistsAfterRepeat(ExistsError):
    """An add repeated after a lost reply met ``exists``: the live job may be
    our own first attempt's. The client reads it (GET) to tell."""


@dataclass(frozen=True)
class AddRequest:
    call: Call[AddResult]
    id: str  # "" when the server names the job by the caller's key
    topic: str
    body: bytes

    def own(self, job: Optional[Job]) -> Optional[AddResult]:
        """The add's result if the live job is what this add asked for."""
        if job is None or job.topic != self.topic or job.body != self.body:
            return None
        state = JobState.DELAYED if job.state == JobState.DELAYED else JobState.READY
        return AddResult(job.id, state, job.run_at_ms)


def add(
    ids: IdMaker,
    topic: str,
    body: v.Body,
    *,
    id: Optional[str],
    delay: Optional[timedelta],
    delay_ms: Optional[int],
    run_at: Optional[datetime],
    run_at_ms: Optional[int],
    ttr: Optional[timedelta],
    ttr_ms: Optional[int],
    priority: Optional[int],
    max_attempts: Optional[int],
    replace: bool,
    idempotency_key: Optional[str],
) -> AddRequest:
    topic = v.topic(topic)
    raw = v.body(body)
    if id is not None:
        v.job_id(id)
        if id == "*":
            raise InvalidArgumentError(
                "id: '*' asks a server for a generated id; leave id out instead"
            )
    due_in = v.duration_ms("delay", delay, delay_ms)
    due_at = v.run_at_ms(run_at, run_at_ms)
    if due_in is not None and due_at is not None:
        raise InvalidArgumentError(
            "delay and run_at: give at most one of them (a delay from now, or a time)"
        )
    if due_in is not None:
        v.delay_ms(due_in)
    ttr_value = v.duration_ms("ttr", ttr, ttr_ms)
    ttr_value = DEFAULT_TTR_MS if ttr_value is None else ttr_value
    v.integer("ttr_ms", ttr_value, 1, v.MAX_UINT32)
    prio = DEFAULT_PRIORITY if priority is None else v.integer("priority", priority, 0, v.MAX_UINT32)
    attempts = 0 if max_attempts is None else v.integer("max_attempts", max_attempts, 0, v.MAX_UINT32)
    # One key for every attempt of this call: a server answers a repeat
    # whose first attempt ran as it answered that attempt. The caller's own
    # key with no id goes as "*": the server names the job by the key, so
    # repeating the whole call is safe too.
    if idempotency_key is None:
        key = ids.new_key()
        sent_id = id if id is not None else ids.new_id()
    else:
        key = v.idempotency_key(idempotency_key)
        sent_id = id if id is not None else ""
    cmd: Tuple[object, ...] = ("ADD", topic, sent_id or "*", due_in or 0, ttr_value, raw)
    cmd += ("PRIORITY", prio, "MAXATTEMPTS", attempts)
    if due_at is not None:
        cmd += ("AT", due_at)
    if replace:
        cmd += ("REPLACE",)
    cmd += ("IDEMPOTENCY", key, "WITHSTATE")

    def parse(replies: list, repeated: bool) -> AddResult:
        reply = replies[0]
        if isinstance(reply, ExistsError) and repeated and not replace and sent_id:
            raise ExistsAfterRepeat(reply.message)
        return parse_added(reply)

    return AddRequest(Call([cmd], True, parse), sent_id, topic, raw)


@dataclass(frozen=True)
class AddManyRequest:
    call: Call[List[Union[AddResult, DelayqError]]]
    adds: List[AddRequest]


def add_many(ids: IdMaker, topic: str, bodies: Iterable[v.Body], **options: object) -> AddManyRequest:
    """One add per body, all with the same options, as one pipeline. Each
    has its own id and key, so the pipeline is repeated whole after a lost
    reply, as a single add is. Each answer is an AddResult or its error."""
    adds = [
        add(ids, topic, b, id=None, replace=False, idempotency_key=None, **options)  # type: ignore[arg-type]
        for b in bodies
    ]

    def parse(replies: list, repeated: bool) -> List[Union[AddResult, DelayqError]]:
        out: List[Union[AddResult, DelayqError]] = []
        for a, reply in zip(adds, replies):
            try:
                out.append(a.call.parse([reply], repeated))
            except DelayqError as e:
                if e.message.startswith("malformed reply"):
                    raise
                out.append(e)
        return out

    return AddManyRequest(Call([a.call.commands[0] for a in adds], True, parse), adds)


@dataclass(frozen=True)
class ReserveRequest:
    topics: List[str]
    count: int
    wait_ms: int
    max_bytes: int

    def call(self) -> Call[List[Delivery]]:
        """Without a wait: answered at once, never repeated once written."""
        cmd = reserve_command(self.topics, self.count, 0, self.max_bytes)
        return single(cmd, False, parse_deliveries)


def reserve(
    topics: Union[str, Iterable[str]],
    count: int,
    wait: Optional[timedelta],
    wait_ms: Optional[int],
    max_bytes: int,
) -> ReserveRequest:
    names = v.topics(topics)
    v.count(count)
    ms = v.duration_ms("wait", wait, wait_ms)
    ms = v.wait_ms(0 if ms is None else ms)
    v.integer("max_bytes", max_bytes, 0, 2**63 - 1)
    return ReserveRequest(names, count, ms, max_bytes)


def target(job: JobRef, receipt: Optional[str], force: bool) -> Tuple[str, str, bool]:
    """(id, the receipt argument, whether the call may be repeated)."""
    if isinstance(job, Delivery):
        job_id = job.id
        if receipt is None and not force:
            receipt = job.receipt
    else:
        job_id = v.job_id(job)
    if force:
        if receipt is not None:
            raise InvalidArgumentError("receipt and force: give one, not both")
        return job_id, "FORCE", False
    return job_id, v.receipt(receipt), True


def finish(job: JobRef, receipt: Optional[str], force: bool) -> Call[None]:
    job_id, arg, retry = target(job, receipt, force)
    return ok_call(("FINISH", job_id, arg), retry, gone_is_done=True)


def touch(job: JobRef, receipt: Optional[str], force: bool) -> Call[None]:
    job_id, arg, retry = target(job, receipt, force)
    return ok_call(("TOUCH", job_id, arg), retry)


def release(
    job: JobRef,
    receipt: Optional[str],
    force: bool,
    delay: Optional[timedelta],
    delay_ms: Optional[int],
    error: Optional[str],
) -> Call[None]:
    job_id, arg, retry = target(job, receipt, force)
    ms = v.duration_ms("delay", delay, delay_ms)
    ms = v.delay_ms(0 if ms is None else ms)
    cmd: Tuple[object, ...] = ("RELEASE", job_id, ms, arg)
    if error:
        cmd += ("ERROR", _text("error", error))
    return ok_call(cmd, retry)


def bury(job: JobRef, receipt: Optional[str], force: bool, reason: Optional[str]) -> Call[None]:
    job_id, arg, retry = target(job, receipt, force)
    cmd: Tuple[object, ...] = ("BURY", job_id, arg)
    if reason:
        cmd += ("ERROR", _text("reason", reason))
    return ok_call(cmd, retry)


def unreserve(job: JobRef, receipt: Optional[str]) -> Call[None]:
    job_id, arg, retry = target(job, receipt, False)
    return ok_call(("UNRESERVE", job_id, arg), retry)


def unreserve_many(jobs: List[Delivery]) -> Call[List[Optional[DelayqError]]]:
    return each_ok_call([("UNRESERVE", d.id, d.receipt) for d in jobs])


def touch_many(jobs: List[Delivery]) -> Call[List[Optional[DelayqError]]]:
    return each_ok_call([("TOUCH", d.id, d.receipt) for d in jobs])


def acknowledge(acks: List[Ack]) -> Call[List[Optional[DelayqError]]]:
    return acks_call(acks)


def delete(job: JobRef) -> Call[None]:
    job_id = job.id if isinstance(job, Delivery) else v.job_id(job)
    return ok_call(("DELETE", job_id), False)


def kick(job: JobRef) -> Call[None]:
    job_id = job.id if isinstance(job, Delivery) else v.job_id(job)
    return ok_call(("KICK", job_id), False)


def kick_topic(topic: str, n: int) -> Call[int]:
    topic = v.topic(topic)
    v.integer("n", n, 0, 2**63 - 1)

    def read(reply: object) -> int:
        from ._protocol import _int, _raise_if_error

        _raise_if_error(reply)
        return _int("KICKTOPIC", reply)

    return single(("KICKTOPIC", topic, n), False, read)


def get(job: JobRef) -> Call[Optional[Job]]:
    job_id = job.id if isinstance(job, Delivery) else v.job_id(job)
    return single(("GET", job_id), True, parse_job)


_PEEK_STATES = {JobState.READY: "READY", JobState.DELAYED: "DELAYED", JobState.BURIED: "BURIED"}


def peek(topic: str, state: Union[JobState, str]) -> Tuple[Call[Optional[Delivery]], JobState]:
    """PEEK answers a delivery without the job's state or last_error: the
    client reads the job whole with GET afterwards (Client.peek)."""
    topic = v.topic(topic)
    try:
        st = JobState(state.lower() if isinstance(state, str) else state)
    except ValueError:
        st = None  # type: ignore[assignment]
    if st not in _PEEK_STATES:
        raise InvalidArgumentError(
            f"state: peek shows ready, delayed or buried jobs, not {str(state)!r}"
        )

    def read(reply: object) -> Optional[Delivery]:
        from ._protocol import _raise_if_error

        _raise_if_error(reply)
        return None if reply is None else parse_delivery("PEEK", reply)

    return single(("PEEK", topic, _PEEK_STATES[st]), True, read), st


def stats() -> Call[Stats]:
    return single(("STATS",), True, parse_stats)


def topic_stats(topic: str) -> Call[TopicStats]:
    return single(("STATS", v.topic(topic)), True, parse_topic_stats)


def topics() -> Call[List[str]]:
    return single(("TOPICS",), True, parse_names)


def pause(topic: str, duration: Optional[timedelta], duration_ms: Optional[int]) -> Call[None]:
    topic = v.topic(topic)
    ms = v.duration_ms("duration", duration, duration_ms)
    ms = 0 if ms is None else ms
    if ms < 0:
        raise InvalidArgumentError(f"duration_ms: must be >= 0 (0: until resumed), got {ms}")
    if ms > v.MAX_DELAY_MS:  # the server refuses it too (PAUSE ms 0 ... 3153600000000)
        raise InvalidArgumentError(f"duration_ms: at most 100 years ({v.MAX_DELAY_MS}), got {ms}")
    return ok_call(("PAUSE", topic, ms), True)


def resume(topic: str) -> Call[None]:
    return ok_call(("RESUME", v.topic(topic)), True)


def ping() -> Call[None]:
    def read(reply: object) -> None:
        from ._protocol import _raise_if_error, malformed

        _raise_if_error(reply)
        if reply != b"PONG":
            raise malformed("PING", "+PONG", reply)

    return single(("PING",), True, read)


def _text(field: str, value: object) -> str:
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{field}: expected a str, got {type(value).__name__}")
    return value


def all_added(results: List[Union[AddResult, DelayqError]]) -> List[AddResult]:
    """The results of add_many, or its first error carrying them all."""
    for r in results:
        if isinstance(r, DelayqError):
            r.results = results  # type: ignore[attr-defined]
            raise r
    return results  # type: ignore[return-value]
