"""The client's half of RESP as delayq serves it (docs/api.md §4), with no I/O.

Every client call becomes a :class:`Call`: the commands of one pipeline,
whether it may be repeated on the next server after its reply was lost, and
how its replies are read. The sync and asyncio clients run the same calls
through their own transports (``_transport_sync``, ``_transport_async``), so
what is sent, what is retried and how replies read is written once, here.

Replies are what redis-py's parser hands back (bytes, int, list, None), with
error replies turned into :class:`DelayqError` instances by the transport.
A reply of the wrong shape (a RESERVE answered with an integer, a job array
too short) raises :class:`UnavailableError` "malformed reply to CMD: ...":
the server is not a delayq server, or not one this client can read; the
transport closes the connection that brought it.

Which calls are repeated after a lost reply, and why that is safe (the rule
of the C++ client, src/client/remote_queue.h):

- ADD: always, under the same id and idempotency key (both made by the
  client, once per call). The server remembers an applied (id, key) for its
  dedup window and answers a repeat as it answered the first attempt, so a
  job is added at most once. A repeat that still meets ``exists`` counts as
  success when the live job has our topic and body (checked with GET).
- FINISH, RELEASE, TOUCH, BURY, UNRESERVE with a receipt: a receipt names one
  delivery, so a repeat acts on that delivery or fails. A repeated FINISH
  answered ``not_found`` means the job is gone, as the first attempt may
  have made it: success. Any other error of a repeat says it came after a
  lost reply.
- Reads (GET, PEEK, STATS, TOPICS) and settings (PAUSE, RESUME): always.
- Not once written: RESERVE (a lost reply may have handed jobs to nobody;
  they come back after their TTR), DELETE, KICK, KICKTOPIC and the ``force``
  forms (by id alone a repeat could act on another delivery or job).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Generic, List, Optional, Sequence, Tuple, TypeVar

from .errors import PREFIXES, DelayqError, NotFoundError, UnavailableError, from_reply
from .models import AddResult, Delivery, Job, JobState, Stats, TopicStats

T = TypeVar("T")
Command = Tuple[Any, ...]
Replies = List[Any]  # bytes | int | list | None | DelayqError, one per command

# Appended to the error of a request repeated on another server after its
# first attempt's reply was lost (the C++ client's words).
AFTER_LOST_REPLY = " (after a lost reply: the first attempt, on another server, may have done it)"


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request: a pipeline of ``commands`` sent to one server, whose
    replies ``parse`` reads (``repeated``: an earlier attempt on another
    server was written and its reply lost). ``retry``: the request may go to
    the next server after a lost reply (see the module comment)."""

    commands: Sequence[Command]
    retry: bool
    parse: Callable[[Replies, bool], T]


# --- writing commands ---------------------------------------------------------------


def pack(commands: Sequence[Command]) -> bytes:
    """Commands as RESP multibulk, one buffer (a pipeline is one write).
    redis-py's pack_command does the same, about four times slower. A str
    is sent as UTF-8, a code point that has none (a lone surrogate) as "?":
    packing a str never raises. Names (topics, ids) and str bodies are
    refused before they get here (_validate), so only free texts (ERROR
    texts: last_error, a bury's reason) can be changed by that."""
    out: List[bytes] = []
    for cmd in commands:
        out.append(b"*%d\r\n" % len(cmd))
        for arg in cmd:
            if isinstance(arg, bytes):
                raw = arg
            elif isinstance(arg, str):
                raw = arg.encode("utf-8", "replace")
            elif isinstance(arg, int) and not isinstance(arg, bool):
                raw = b"%d" % arg
            else:
                raise TypeError(f"cannot send {arg!r}")  # the client builds every command: a bug
            out.append(b"$%d\r\n" % len(raw))
            out.append(raw)
            out.append(b"\r\n")
    return b"".join(out)


# --- reading replies ----------------------------------------------------------------


def malformed(command: str, what: str, got: Any) -> UnavailableError:
    shown = repr(got)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return UnavailableError(f"malformed reply to {command}: expected {what}, got {shown}")


def _raise_if_error(reply: Any) -> None:
    if isinstance(reply, DelayqError):
        raise reply


def _text(command: str, value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    raise malformed(command, "a bulk string", value)


def _int(command: str, value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, bytes):
        try:
            return int(value)
        except ValueError:
            pass
    raise malformed(command, "an integer", value)


def parse_ok(command: str, reply: Any) -> None:
    """+OK or +FORCED."""
    _raise_if_error(reply)
    if reply not in (b"OK", b"FORCED"):
        raise malformed(command, "+OK", reply)


def status_of(command: str, reply: Any) -> Optional[DelayqError]:
    """The error of an acknowledgment's reply, None for +OK."""
    try:
        parse_ok(command, reply)
    except DelayqError as e:
        return e
    return None


def after_repeat(
    err: Optional[DelayqError], repeated: bool, gone_is_done: bool
) -> Optional[DelayqError]:
    """How an answer reads when an earlier attempt's reply was lost."""
    if not repeated or err is None or isinstance(err, UnavailableError):
        return err
    if gone_is_done and isinstance(err, NotFoundError):
        return None
    return type(err)(err.message + AFTER_LOST_REPLY)


def parse_delivery(command: str, reply: Any) -> Delivery:
    """One job array: [id, topic, body, receipt, attempts, ttr_ms, priority,
    run_at_ms, reserved_until_ms, max_attempts]. Older servers sent the first
    five, then nine: the missing ones read as 0."""
    if not isinstance(reply, list) or len(reply) < 5:
        raise malformed(command, "a job array of at least 5 elements", reply)
    body = _body(command, reply[2])
    nums = [_int(command, v) for v in reply[4:10]]
    nums += [0] * (6 - len(nums))
    return Delivery(
        id=_text(command, reply[0]),
        topic=_text(command, reply[1]),
        body=body,
        receipt=_text(command, reply[3]),
        attempts=nums[0],
        ttr_ms=nums[1],
        priority=nums[2],
        run_at_ms=nums[3],
        reserved_until_ms=nums[4],
        max_attempts=nums[5],
    )


def parse_deliveries(reply: Any) -> List[Delivery]:
    _raise_if_error(reply)
    if reply is None:
        return []
    if not isinstance(reply, list):
        raise malformed("RESERVE", "an array of job arrays", reply)
    return [parse_delivery("RESERVE", r) for r in reply]


def _pairs(command: str, reply: Any) -> Dict[str, Any]:
    if isinstance(reply, dict):  # RESP3 (not used here, but harmless)
        return {_text(command, k): v for k, v in reply.items()}
    if not isinstance(reply, list) or len(reply) % 2:
        raise malformed(command, "field/value pairs", reply)
    return {_text(command, reply[i]): reply[i + 1] for i in range(0, len(reply), 2)}


def _body(command: str, value: Any) -> bytes:
    if not isinstance(value, bytes):
        raise malformed(command, "a bulk string body", value)
    return value


class _Fields:
    """A reply of field/value pairs, read by name; a missing field is a
    malformed reply."""

    def __init__(self, command: str, reply: Any) -> None:
        self.command = command
        self.reply = reply
        self.pairs = _pairs(command, reply)

    def __getitem__(self, name: str) -> Any:
        try:
            return self.pairs[name]
        except KeyError:
            raise malformed(self.command, f"the field {name}", self.reply) from None

    def text(self, name: str) -> str:
        return _text(self.command, self[name])

    def integer(self, name: str) -> int:
        return _int(self.command, self[name])


def _state(command: str, value: Any) -> JobState:
    text = _text(command, value)
    try:
        return JobState(text)
    except ValueError:
        raise malformed(command, "a job state", value) from None


def parse_job(reply: Any) -> Optional[Job]:
    _raise_if_error(reply)
    if reply is None:
        return None
    f = _Fields("GET", reply)
    body = _body("GET", f["body"])
    return Job(
        id=f.text("id"),
        topic=f.text("topic"),
        state=_state("GET", f["state"]),
        body=body,
        priority=f.integer("priority"),
        ttr_ms=f.integer("ttr_ms"),
        max_attempts=f.integer("max_attempts"),
        attempts=f.integer("attempts"),
        created_at_ms=f.integer("created_at_ms"),
        run_at_ms=f.integer("run_at_ms"),
        reserved_until_ms=f.integer("reserved_until_ms"),
        receipt=f.text("receipt"),
        last_error=f.text("last_error"),
    )


_STATS_FIELDS = frozenset(Stats.__dataclass_fields__) - {"extra"}


def parse_stats(reply: Any) -> Stats:
    _raise_if_error(reply)
    known: Dict[str, int] = {}
    extra: Dict[str, int] = {}
    for name, value in _pairs("STATS", reply).items():
        try:
            number = _int("STATS", value)
        except UnavailableError:
            continue  # a figure that is not a number: not ours to read
        (known if name in _STATS_FIELDS else extra)[name] = number
    return Stats(**known, extra=extra)


def parse_topic_stats(reply: Any) -> TopicStats:
    _raise_if_error(reply)
    f = _Fields("STATS", reply)
    return TopicStats(
        topic=f.text("topic"),
        delayed=f.integer("delayed"),
        ready=f.integer("ready"),
        reserved=f.integer("reserved"),
        buried=f.integer("buried"),
        waiting=f.integer("waiting"),
        paused=f.integer("paused") != 0,
        paused_for_ms=f.integer("paused_for_ms"),
    )


def parse_added(reply: Any) -> AddResult:
    """ADD ... WITHSTATE: [id, state, run_at_ms]."""
    _raise_if_error(reply)
    if not isinstance(reply, list) or len(reply) != 3:
        raise malformed("ADD", "[id, state, run_at_ms]", reply)
    return AddResult(
        id=_text("ADD", reply[0]), state=_state("ADD", reply[1]), run_at_ms=_int("ADD", reply[2])
    )


def parse_names(reply: Any) -> List[str]:
    _raise_if_error(reply)
    if not isinstance(reply, list):
        raise malformed("TOPICS", "an array of names", reply)
    return [_text("TOPICS", n) for n in reply]


# --- calls ------------------------------------------------------------------------


def ok_call(command: Command, retry: bool, gone_is_done: bool = False) -> Call[None]:
    name = str(command[0])

    def parse(replies: Replies, repeated: bool) -> None:
        err = after_repeat(status_of(name, replies[0]), repeated, gone_is_done)
        if err is not None:
            raise err

    return Call([command], retry, parse)


def single(command: Command, retry: bool, read: Callable[[Any], T]) -> Call[T]:
    return Call([command], retry, lambda replies, _repeated: read(replies[0]))


@dataclass(frozen=True)
class Ack:
    """An outcome to acknowledge: FINISH, RELEASE (after ``delay_ms``, with
    ``text`` as last_error) or BURY (``text`` the reason), with a receipt."""

    kind: str  # "finish" | "release" | "bury"
    id: str
    receipt: str
    delay_ms: int = 0
    text: str = ""


def ack_command(a: Ack) -> Command:
    if a.kind == "finish":
        return ("FINISH", a.id, a.receipt)
    if a.kind == "release":
        cmd: Command = ("RELEASE", a.id, a.delay_ms, a.receipt)
    else:
        cmd = ("BURY", a.id, a.receipt)
    if a.text:
        cmd += ("ERROR", a.text)
    return cmd


def acks_call(acks: Sequence[Ack]) -> Call[List[Optional[DelayqError]]]:
    """One pipeline of FINISH/RELEASE/BURY, one round trip; each answer is
    None (accepted) or its error. Every ack carries its receipt, so the
    pipeline is repeated whole on the next server after a lost reply."""
    commands = [ack_command(a) for a in acks]

    def parse(replies: Replies, repeated: bool) -> List[Optional[DelayqError]]:
        out = []
        for a, cmd, reply in zip(acks, commands, replies):
            err = status_of(str(cmd[0]), reply)
            if err is not None and err.message.startswith("malformed reply"):
                raise err
            out.append(after_repeat(err, repeated, a.kind == "finish"))
        return out

    return Call(commands, True, parse)


def each_ok_call(commands: Sequence[Command]) -> Call[List[Optional[DelayqError]]]:
    """A pipeline of receipt-bearing commands answered +OK (TOUCH, UNRESERVE):
    each answer None or its error; repeated whole after a lost reply."""

    def parse(replies: Replies, repeated: bool) -> List[Optional[DelayqError]]:
        out = []
        for cmd, reply in zip(commands, replies):
            err = status_of(str(cmd[0]), reply)
            if err is not None and err.message.startswith("malformed reply"):
                raise err
            out.append(after_repeat(err, repeated, False))
        return out

    return Call(list(commands), True, parse)


def reserve_command(topics: Sequence[str], count: int, wait_ms: int, max_bytes: int) -> Command:
    cmd: Command = ("RESERVE",)
    if wait_ms > 0:
        cmd += ("TIMEOUT", wait_ms)
    cmd += ("COUNT", count)
    if max_bytes > 0:
        cmd += ("MAXBYTES", max_bytes)
    return cmd + ("FROM",) + tuple(topics)


def error_from_redis(exc: Exception) -> DelayqError:
    """A redis-py ResponseError (or AuthenticationError) read back into its
    delayq error. redis-py strips the prefix of ``-ERR`` and ``-NOAUTH``
    replies (the latter raised as AuthenticationError) and keeps the others
    (``INVALID topic: ...``)."""
    import redis.exceptions as rx

    text = str(exc)
    if isinstance(exc, rx.AuthenticationError):
        return from_reply(text, "NOAUTH")
    head = text.partition(" ")[0]
    if head != "ERR" and head in PREFIXES:
        return from_reply(text)
    return from_reply(text, "ERR")


# --- ids and idempotency keys ------------------------------------------------------


class IdMaker:
    """Ids and idempotency keys made by the client (the C++ client's formats,
    src/client/remote_queue.cc): an id is 12 hex digits of wall-clock ms, 4 of
    a counter within the ms and 16 of this client's random tag (unique, and
    time-ordered for one client); a key is the tag and 16 hex digits of a
    counter, one per add call, sent on every attempt of it."""

    def __init__(self) -> None:
        self.tag = os.urandom(8).hex()
        self._lock = threading.Lock()
        self._ms = 0
        self._seq = 0
        self._adds = 0

    def new_id(self) -> str:
        with self._lock:
            now = int(time.time() * 1000)
            if now > self._ms:
                self._ms, self._seq = now, 0
            else:
                self._seq += 1
                if self._seq > 0xFFFF:  # 65536 ids in one ms: borrow the next ms
                    self._ms, self._seq = self._ms + 1, 0
            ms, seq = self._ms, self._seq
        return f"{ms & 0xFFFFFFFFFFFF:012x}{seq:04x}{self.tag}"

    def new_key(self) -> str:
        with self._lock:
            n = self._adds
            self._adds += 1
        return f"{self.tag}{n:016x}"
