"""Worker: runs a handler per topic, with the C++ Worker's behaviour
(include/delayq/worker.h): concurrency, retries with backoff and jitter,
touches at half the TTR, batched acknowledgments and a graceful stop.

    worker = delayq.Worker(delayq.Client(), concurrency=4)

    @worker.handler("orders.close")
    def close_order(job):            # or `async def`: run on the event loop
        close(job.json())            # raise to retry later with backoff

    worker.run_forever()             # until SIGTERM/SIGINT, then drains 30 s

How it works. The worker is asyncio-based. Async handlers run as tasks on its
event loop; sync handlers run in a thread pool of ``concurrency`` threads. It
keeps at most one RESERVE open at a time (long-poll ``reserve_wait``, 30 s by
default) over the topics that have room, for as many jobs as it has free
slots (at most 1000), so an idle worker holds one waiting reserve and jobs
that become ready reach it at once. When a topic that was full gains room
while the reserve waits, the reserve is withdrawn and asked again with it.
A reserve that fails is asked again after 100 ms, doubling up to 5 s; one
that a server's shutdown ended (``shutting down``) is asked again at once
(the client has moved to the next server).

Acknowledgments. What a handler returns becomes a FINISH, RELEASE or BURY;
outcomes are collected while one batch is on its way and sent as one
pipeline (one round trip) per batch. An ack answered ``unavailable`` or
``internal`` (a server out of reach, a reply lost) is sent again after 100 ms,
doubling up to 5 s, and its job touched meanwhile; that is safe because an
ack carries its receipt: one already applied is answered ``not_found`` or
``stale_receipt``, which ends it. An ack call that raises anything else (a
bug) counts as a failed try of each ack in it, answered ``internal``, and is
sent again the same way: no outcome is dropped. ``on_acknowledged(job, kind,
error)`` hears each outcome's final answer (error None: accepted).

Touches. Every job the worker holds (running, or reserved and waiting for a
slot) is touched when it has been held for half its TTR, and again every half
TTR, so a long handler keeps its job while a worker that died loses it after
one TTR. A touch answered ``stale_receipt``, ``not_found`` or
``not_reserved`` ends that job's touches (another worker has it now); other
failures are tried again after 100 ms, doubling, within what is left of the
reservation.

Stop (``stop(drain)``, or SIGTERM/SIGINT under ``run()``), in this order: no
more reserves, the waiting one withdrawn (jobs on their way are given back);
jobs held but not started are given back with UNRESERVE (ready at once, the
attempt not counted); running handlers may finish for up to ``drain``, their
outcomes applied and their jobs touched meanwhile; the jobs of handlers still
running then are released with delay 0 and the error "worker stopped while
the handler ran" (an attempt counted: the handler did run), async handlers
cancelled. Acks on their way then may take as long as one call may (the
client's timeouts: each server's connect_timeout plus twice its
request_timeout, and 1 s); one still unanswered after that is given up
(on_acknowledged hears ``unavailable``), so a stop always returns. A sync
handler cannot be interrupted: its thread runs on, its outcome ignored, and
the process exits once it returns.

Threads. A Worker belongs to one event loop. Handlers run several at once
(up to ``concurrency``, and a topic's own), so they must be safe to run
concurrently. ``on_acknowledged`` runs on the event loop: it must be quick.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import random as _random
import signal
from collections import deque
from dataclasses import dataclass
from datetime import timedelta
from enum import Enum
from typing import Any, Awaitable, Callable, Deque, Dict, List, Optional, Set, Tuple, Union

from . import _validate as v
from ._protocol import Ack
from .aio import AsyncClient
from .client import Client
from .errors import (
    DelayqError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    NotReservedError,
    StaleReceiptError,
    UnavailableError,
)
from .models import Delivery
from .outcomes import Backoff, Bury, Outcome, Retry, RetryIn, Success, backoff_delay_ms, text_of

__all__ = ["Worker", "WorkerStats", "AckKind", "Handler"]

log = logging.getLogger("delayq.worker")

Handler = Callable[[Delivery], Union[Outcome, Awaitable[Outcome]]]

STOPPED_ERROR = "worker stopped while the handler ran"
MAX_CONCURRENCY = 1024
_RESERVE_RETRY_MAX = 5.0  # s
_ACK_RETRY = 0.1  # s, doubling while acks keep failing ...
_ACK_RETRY_MAX = 5.0  # ... up to this
_TOUCH_RETRY = 0.1  # s, doubling up to half the TTR
_IDLE_TICK = 30.0  # s: the timer's horizon when nothing is due


class AckKind(str, Enum):
    """What an outcome asked of the server."""

    FINISH = "finish"
    RELEASE = "release"
    BURY = "bury"

    def __str__(self) -> str:
        return self.value


AckHook = Callable[[Delivery, AckKind, Optional[DelayqError]], Any]


@dataclass(frozen=True)
class WorkerStats:
    """Figures since the worker was made (``Worker.stats``)."""

    handled: int = 0  # handlers that returned or raised
    succeeded: int = 0  # ... with success, and the finish was accepted
    retried: int = 0  # ... with a retry or an exception, and released (the server buries those out of attempts)
    exhausted: int = 0  # ... of those, the ones buried: their max_attempts were used up
    buried: int = 0  # ... with Bury, and buried
    touched: int = 0  # touches accepted
    running: int = 0  # handlers running now
    held: int = 0  # jobs reserved and not yet started
    reserves: int = 0  # reserves made
    ack_batches: int = 0  # acknowledgment pipelines sent (each carries 1 or more outcomes)
    given_back: int = 0  # jobs given back by stop (UNRESERVE or RELEASE)
    errors: int = 0  # calls that failed: each failed try of a reserve, touch or ack, ...
    last_error: str = ""  # ... and the last one's error


class _Counters:
    """WorkerStats' figures, counted in place (a frozen copy is made on read)."""

    __slots__ = tuple(f for f in WorkerStats.__dataclass_fields__ if f not in ("running", "held"))

    def __init__(self) -> None:
        for f in self.__slots__:
            setattr(self, f, "" if f == "last_error" else 0)


# A held job's states.
_WAITING, _RUNNING, _ACKING, _ABANDONED = range(4)

# Answers that say a delivery is over for its worker: nothing sent with that
# receipt can succeed again.
_OVER = (StaleReceiptError, NotFoundError, NotReservedError)
# Answers after which an ack is sent again: they say nothing about the ack.
_TRANSIENT = (UnavailableError, InternalError)


class _Topic:
    __slots__ = ("name", "handler", "is_async", "limit", "backoff", "waiting", "running", "acking")

    def __init__(self, name: str, handler: Handler, limit: int, backoff: Backoff) -> None:
        self.name = name
        self.handler = handler
        self.is_async = inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
            getattr(handler, "__call__", None)
        )
        self.limit = limit
        self.backoff = backoff
        self.waiting = 0  # held, not started
        self.running = 0  # handlers running
        self.acking = 0  # handlers done, outcome not yet acknowledged

    @property
    def busy(self) -> int:
        """Slots taken: jobs waiting or running."""
        return self.waiting + self.running


class _Held:
    """A job the worker holds, from the reserve's answer until its outcome is
    acknowledged (or it was given back)."""

    __slots__ = (
        "delivery", "topic", "state", "touch_at", "held_since", "touch_retry", "lost", "resend",
        "task", "ack_kind",
    )  # fmt: skip

    def __init__(self, delivery: Delivery, topic: _Topic, now: float) -> None:
        self.delivery = delivery
        self.topic = topic
        self.state = _WAITING
        self.held_since = now  # when its reservation last started a full TTR
        self.touch_at = now + _touch_interval(delivery)
        self.touch_retry = 0.0  # the last failed touch's retry delay; 0: none failed
        self.lost = False  # a touch found the delivery over: touch no more
        self.resend = False  # acking, its ack failed transiently: touched until resent
        self.task: Optional["asyncio.Task[None]"] = None
        self.ack_kind = ""  # acking: what its outcome asked ("finish", "release", "bury")


def _touch_interval(d: Delivery) -> float:
    return max(1, d.ttr_ms // 2) / 1000


def _seconds(name: str, value: Union[timedelta, int, float]) -> float:
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        raise InvalidArgumentError(
            f"{name}: expected a timedelta, such as timedelta(seconds=30), got {value!r}"
        )
    raise InvalidArgumentError(f"{name}: expected a timedelta, got {type(value).__name__}")


class Worker:
    """Runs handlers for topics over a delayq client.

    ``client``: an :class:`AsyncClient`, or a sync :class:`Client` (the worker
    then makes an AsyncClient of the same servers, token and TLS, and closes it
    when it stops). ``concurrency`` (1..1024, default 4): handlers running at
    once over all topics. ``reserve_wait`` (default 30 s, at most a day): how
    long one reserve waits for a job. ``reserve_retry`` (default 100 ms): the
    first wait after a reserve fails, doubling up to 5 s. ``random``: the
    backoff's jitter, a number in [0, 1] per retry (default: uniform; tests
    set a constant); one out of range is clamped, and one that raises or
    gives no number (or NaN) counts as 1.0, the longest wait.
    ``on_acknowledged(job, kind, error)``: each outcome's final answer, error
    None when the server accepted it (kind RELEASE accepted for a job whose
    ``release_buries`` is true left it buried); may be a coroutine function.
    Not called for jobs the stop gave back.
    """

    def __init__(
        self,
        client: Union[AsyncClient, Client],
        *,
        concurrency: int = 4,
        reserve_wait: timedelta = timedelta(seconds=30),
        reserve_retry: timedelta = timedelta(milliseconds=100),
        random: Optional[Callable[[], float]] = None,
        on_acknowledged: Optional[AckHook] = None,
    ) -> None:
        if not isinstance(client, (AsyncClient, Client)):
            raise InvalidArgumentError(
                f"client: expected a delayq.Client or delayq.AsyncClient, got {type(client).__name__}"
            )
        v.integer("concurrency", concurrency, 1, MAX_CONCURRENCY)
        wait = _seconds("reserve_wait", reserve_wait)
        if not 0 < wait <= v.MAX_WAIT_MS / 1000:
            raise InvalidArgumentError(f"reserve_wait: must be > 0 and at most a day, got {reserve_wait}")
        retry = _seconds("reserve_retry", reserve_retry)
        if retry <= 0:
            raise InvalidArgumentError(f"reserve_retry: must be > 0, got {reserve_retry}")
        self._given_client = client
        self._client: Optional[AsyncClient] = client if isinstance(client, AsyncClient) else None
        self._concurrency = concurrency
        self._reserve_wait_ms = max(1, int(wait * 1000))
        self._reserve_retry_base = retry
        self._random = random or _random.Random().random
        self._random_failed = False  # a bad `random` was logged once
        self._on_acknowledged = on_acknowledged

        self._topics: Dict[str, _Topic] = {}
        self._order: List[_Topic] = []  # registration order; reserves rotate over it
        self._rotation = 0
        self._c = _Counters()
        # State below belongs to the event loop the worker started on.
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._executor: Optional[concurrent.futures.ThreadPoolExecutor] = None
        self._held: Set[_Held] = set()
        self._waiting: Deque[_Held] = deque()
        self._running = 0
        self._acks: List[Tuple[_Held, Ack]] = []  # outcomes for the next batch
        self._flushing = False
        self._retry: List[Tuple[_Held, Ack, DelayqError]] = []  # acks to resend
        self._ack_retry_at: Optional[float] = None
        self._ack_retry_delay = 0.0
        self._reserve_task: Optional["asyncio.Task[None]"] = None
        self._open_topics: Set[str] = set()
        self._reopening = False
        self._reserve_retry_at: Optional[float] = None
        self._reserve_retry_delay = retry
        self._reserve_failing_since: Optional[float] = None  # loop time of the first failure in a row
        self._reserve_logged_at = 0.0
        self._touching = 0
        self._timer: Optional["asyncio.Task[None]"] = None
        self._timer_armed = 0.0  # loop time the timer sleeps until
        self._wake: Optional[asyncio.Event] = None  # the timer: something is due sooner
        self._changed: Optional[asyncio.Event] = None  # stop: a job or a reserve ended
        self._stop_requested: Optional[asyncio.Event] = None
        self._started = False
        self._stopping = False
        self._drain_over = False
        self._deadline: Optional[float] = None
        self._stop_task: Optional["asyncio.Task[None]"] = None
        self._background: Set["asyncio.Task[Any]"] = set()

    # --- registering ------------------------------------------------------------------

    def handle(
        self,
        topic: str,
        handler: Handler,
        *,
        concurrency: int = 0,
        backoff: Optional[Backoff] = None,
    ) -> None:
        """Registers ``handler`` for ``topic``: a function (run in the thread
        pool) or a coroutine function (run on the event loop) taking the
        :class:`Delivery` and returning None/Success, Retry, RetryIn or Bury.
        ``concurrency``: this topic's handlers running at once, at most (0,
        the default: the worker's). ``backoff``: its retries' (default 1 s,
        x2, at most 10 min). Before start only."""
        if self._started or self._stopping:
            raise InvalidArgumentError("handle after start: register handlers first")
        v.topic(topic)
        if not callable(handler):
            raise InvalidArgumentError(f"the handler of topic '{topic}' is not callable")
        v.integer("concurrency", concurrency, 0, MAX_CONCURRENCY)
        backoff = backoff or Backoff()
        if not isinstance(backoff, Backoff):
            raise InvalidArgumentError(f"backoff: expected a delayq.Backoff, got {type(backoff).__name__}")
        backoff.check()
        if topic in self._topics:
            raise InvalidArgumentError(f"topic '{topic}' already has a handler")
        limit = self._concurrency if concurrency == 0 else min(concurrency, self._concurrency)
        t = _Topic(topic, handler, limit, backoff)
        self._topics[topic] = t
        self._order.append(t)

    def handler(
        self, topic: str, *, concurrency: int = 0, backoff: Optional[Backoff] = None
    ) -> Callable[[Handler], Handler]:
        """``handle`` as a decorator: ``@worker.handler("orders.close")``."""

        def register(fn: Handler) -> Handler:
            self.handle(topic, fn, concurrency=concurrency, backoff=backoff)
            return fn

        return register

    @property
    def stats(self) -> WorkerStats:
        c = self._c
        figures = {f: getattr(c, f) for f in _Counters.__slots__}
        return WorkerStats(running=self._running, held=len(self._waiting), **figures)

    # --- running ----------------------------------------------------------------------

    async def start(self) -> None:
        """Starts reserving. Raises InvalidArgumentError without handlers or
        when started before."""
        if self._started or self._stopping:
            raise InvalidArgumentError("a worker starts once")
        if not self._topics:
            raise InvalidArgumentError("no handlers: call handle (or @worker.handler) before start")
        self._loop = asyncio.get_running_loop()
        if self._client is None:
            sync = self._given_client
            assert isinstance(sync, Client)
            cfg = sync._config
            self._client = AsyncClient(
                cfg.server_list,
                auth_token=cfg.auth_token,
                connect_timeout=cfg.connect_timeout,
                request_timeout=cfg.request_timeout,
                tls=cfg.tls is not None,
                tls_ca_file=cfg.tls.ca_file if cfg.tls else None,
                tls_cert_file=cfg.tls.cert_file if cfg.tls else None,
                tls_key_file=cfg.tls.key_file if cfg.tls else None,
            )
        if any(not t.is_async for t in self._order):
            self._executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=self._concurrency, thread_name_prefix="delayq-handler"
            )
        self._wake = asyncio.Event()
        self._changed = asyncio.Event()
        if self._stop_requested is None:
            self._stop_requested = asyncio.Event()
        self._started = True
        self._timer = self._loop.create_task(self._run_timer())
        self._pump()

    async def stop(self, drain: timedelta = timedelta(seconds=30)) -> None:
        """Stops as the module comment says, draining running handlers for up
        to ``drain``. Returns once nothing is held. A second call waits for
        the first."""
        drain_s = _seconds("drain", drain)
        if self._stop_requested is not None:
            self._stop_requested.set()
        if self._stop_task is None:
            self._stop_task = asyncio.get_running_loop().create_task(self._stop(drain_s))
        await asyncio.shield(self._stop_task)

    async def run(self, *, drain: timedelta = timedelta(seconds=30), handle_signals: bool = True) -> None:
        """Starts, runs until SIGTERM or SIGINT (or ``stop()``), then stops
        with ``drain``. A second signal cuts the drain short. Signals are
        caught only in the main thread (``handle_signals=False``: never)."""
        _seconds("drain", drain)
        self._stop_requested = asyncio.Event()
        loop = asyncio.get_running_loop()
        installed = []
        if handle_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                try:
                    loop.add_signal_handler(sig, self._on_signal)
                    installed.append(sig)
                except (NotImplementedError, RuntimeError, ValueError):
                    pass  # not the main thread, or no signals here
        try:
            await self.start()
            await self._stop_requested.wait()
            await self.stop(drain)
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)

    def run_forever(self, *, drain: timedelta = timedelta(seconds=30)) -> None:
        """``asyncio.run(worker.run(drain=drain))``: blocks until SIGTERM or
        SIGINT, then drains and returns."""
        asyncio.run(self.run(drain=drain))

    async def __aenter__(self) -> "Worker":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def _on_signal(self) -> None:
        assert self._stop_requested is not None
        if not self._stop_requested.is_set():
            self._stop_requested.set()
        else:  # a second signal: no more drain
            self._deadline = 0.0
            self._notify()

    # --- reserving ------------------------------------------------------------------

    def _busy(self) -> int:
        return len(self._waiting) + self._running

    def _pump(self) -> None:
        """Opens a reserve if one should be open and none is."""
        if not self._started or self._stopping:
            return
        c = self._concurrency
        if self._reserve_task is not None:
            # A topic that had no room when the open reserve was made has
            # room now: withdraw it and ask again for every topic with room.
            if (
                not self._reopening
                and self._busy() < c
                and len(self._open_topics) < v.MAX_RESERVE_TOPICS
                and any(t.name not in self._open_topics and t.busy < t.limit for t in self._order)
            ):
                self._reopening = True
                self._reserve_task.cancel()
            return
        if self._reserve_retry_at is not None:
            return
        busy = self._busy()
        if busy >= c or len(self._held) >= 2 * c:
            return
        n = len(self._order)
        names: List[str] = []
        room = 0
        for k in range(n):
            t = self._order[(self._rotation + k) % n]
            if t.busy >= t.limit:
                continue
            room += t.limit - t.busy
            names.append(t.name)
            if len(names) == v.MAX_RESERVE_TOPICS:
                break
        if room == 0:
            return
        self._rotation = (self._rotation + 1) % n
        count = min(c - busy, 2 * c - len(self._held), room, v.MAX_RESERVE_COUNT)
        self._open_topics = set(names)
        self._c.reserves += 1
        assert self._loop is not None
        self._reserve_task = self._loop.create_task(self._reserve(names, count))
        self._reserve_task.add_done_callback(self._reserve_ended)

    def _reserve_ended(self, task: "asyncio.Task[None]") -> None:
        # A reserve cancelled before it began never runs its body: its end
        # is noted here (a reserve that ran has done so itself).
        if self._reserve_task is task:
            self._reserve_done()

    async def _reserve(self, names: List[str], count: int) -> None:
        assert self._client is not None and self._loop is not None
        started = self._loop.time()
        try:
            jobs = await self._client.reserve(names, count=count, wait_ms=self._reserve_wait_ms)
        except asyncio.CancelledError:
            # Withdrawn (stop, or a topic gained room): the client gave back
            # what was on its way. _reserve_ended follows.
            return
        except Exception as e:  # DelayqError; anything else is a bug, kept as one
            err = e if isinstance(e, DelayqError) else InternalError(f"reserve: {e!r}")
            self._note(err)
            now = self._loop.time()
            # Said on stderr (logging's default) once per streak of failures,
            # then every 30 s while it lasts: a wrong address shows at once.
            if self._reserve_failing_since is None or now - self._reserve_logged_at >= 30:
                log.warning("delayq worker: reserve failed (retrying): %s", err)
                self._reserve_logged_at = now
            if self._reserve_failing_since is None:
                self._reserve_failing_since = now
            if isinstance(err, UnavailableError) and err.shutting_down:
                # The server ended the wait because it is going away: reserve
                # again at once (the client has marked it down, so this goes
                # to the next server); a failure after that backs off as usual.
                self._reserve_retry_at = now
                self._reserve_retry_delay = self._reserve_retry_base
            else:
                self._reserve_retry_at = now + self._reserve_retry_delay
                self._reserve_retry_delay = min(
                    self._reserve_retry_delay * 2, max(_RESERVE_RETRY_MAX, self._reserve_retry_base)
                )
            self._reserve_done()
            return
        now = self._loop.time()
        self._reserve_retry_delay = self._reserve_retry_base
        if self._reserve_failing_since is not None:
            log.warning("delayq worker: reserving again after %.1f s of failures", now - self._reserve_failing_since)
            self._reserve_failing_since = None
        if not jobs and now - started < self._reserve_wait_ms / 2000:
            # Answered with nothing long before its wait: ask again later, not in a loop.
            self._reserve_retry_at = now + self._reserve_retry_base
        give_back: List[Delivery] = []
        for d in jobs:
            t = self._topics.get(d.topic)
            if t is None or self._stopping:
                if t is None:
                    self._note(InternalError(
                        f"reserve handed out job '{d.id}' of topic '{d.topic}', which the worker did not ask for"
                    ))  # fmt: skip
                give_back.append(d)
                continue
            h = _Held(d, t, now)
            self._kick_timer(h.touch_at)
            self._held.add(h)
            self._waiting.append(h)
            t.waiting += 1
        if give_back:
            self._spawn(self._give_back(give_back))
        self._start_jobs()
        self._reserve_done()

    def _reserve_done(self) -> None:
        self._reserve_task = None
        self._reopening = False
        self._open_topics = set()
        self._notify()
        if self._reserve_retry_at is not None:
            self._kick_timer(self._reserve_retry_at)
        self._pump()

    async def _give_back(self, jobs: List[Delivery]) -> None:
        assert self._client is not None
        try:
            answers: List[Optional[DelayqError]] = await self._client._unreserve_many(jobs)
        except Exception as e:  # a bug: the jobs come back after their TTR
            log.exception("delayq worker: giving back %d jobs failed", len(jobs))
            answers = [InternalError(f"unreserve: {e!r}")] * len(jobs)
        self._c.given_back += len(jobs)
        for err in answers:
            if err is not None:
                self._note(err)

    # --- running handlers ---------------------------------------------------------------

    def _start_jobs(self) -> None:
        if self._stopping:
            return
        assert self._loop is not None
        while self._waiting and self._running < self._concurrency:
            pick = None
            for h in self._waiting:
                if h.topic.running < h.topic.limit:
                    pick = h
                    break
            if pick is None:
                return
            self._waiting.remove(pick)
            t = pick.topic
            t.waiting -= 1
            t.running += 1
            self._running += 1
            pick.state = _RUNNING
            pick.task = self._loop.create_task(self._run_handler(pick))

    async def _run_handler(self, h: _Held) -> None:
        t = h.topic
        outcome: Any
        try:
            if t.is_async:
                outcome = await t.handler(h.delivery)  # type: ignore[misc]
            else:
                assert self._loop is not None
                outcome = await self._loop.run_in_executor(self._executor, t.handler, h.delivery)
                if inspect.isawaitable(outcome):
                    outcome = await outcome
        except asyncio.CancelledError:
            if h.state == _ABANDONED:  # stop gave its job back
                self._finished(h, None)
                return
            outcome = Retry("CancelledError")
        except Exception as e:
            outcome = Retry(e)  # type: ignore[arg-type]  # its text, or its class name
        self._finished(h, outcome)

    def _jitter(self) -> float:
        """The user's ``random``, in [0, 1]: clamped; 1.0 (the longest wait)
        when it raises or gives no number. Never raises."""
        try:
            r = float(self._random())
        except Exception as e:
            if not self._random_failed:
                self._random_failed = True
                log.warning("delayq worker: random failed (retries wait the longest jitter): %r", e)
            return 1.0
        if r != r:  # NaN
            return 1.0
        return min(max(r, 0.0), 1.0)

    def _ack_of(self, h: _Held, outcome: Any) -> Ack:
        """The ack of what a handler returned. Never raises: anything that
        goes wrong reading the outcome makes it a release after the backoff,
        the error saying what, so the job is never left unacknowledged."""
        d = h.delivery
        try:
            if outcome is None or outcome is Success or isinstance(outcome, Success):
                return Ack("finish", d.id, d.receipt)
            if isinstance(outcome, RetryIn):
                return Ack("release", d.id, d.receipt, outcome.delay_ms, text_of(outcome.error))
            if isinstance(outcome, Retry):
                delay = backoff_delay_ms(h.topic.backoff, d.attempts, self._jitter())
                return Ack("release", d.id, d.receipt, delay, text_of(outcome.error))
            if isinstance(outcome, Bury):
                return Ack("bury", d.id, d.receipt, 0, text_of(outcome.reason))
            text = (
                f"the handler returned {type(outcome).__name__}, not an outcome "
                "(None, Success(), Retry(...), RetryIn(...) or Bury(...))"
            )
        except Exception as e:  # a bug, the user's (an outcome subclass) or ours
            log.exception("delayq worker: reading the outcome of job %s failed", d.id)
            text = (
                f"the worker could not read the handler's outcome ({type(outcome).__name__}): "
                + text_of(e)
            )
        try:
            delay = backoff_delay_ms(h.topic.backoff, d.attempts, self._jitter())
        except Exception:
            delay = h.topic.backoff.base_ms
        return Ack("release", d.id, d.receipt, delay, text)

    def _finished(self, h: _Held, outcome: Any) -> None:
        t = h.topic
        t.running -= 1
        self._running -= 1
        self._c.handled += 1
        if h.state == _ABANDONED:  # its outcome is not ours to apply
            self._held.discard(h)
            self._notify()
            return
        ack = self._ack_of(h, outcome)
        h.state = _ACKING
        h.ack_kind = ack.kind
        t.acking += 1
        self._acks.append((h, ack))
        self._flush_soon()
        self._start_jobs()
        self._pump()

    # --- acknowledging ------------------------------------------------------------------

    def _flush_soon(self) -> None:
        # A task, not a call: outcomes of handlers that finish in this turn
        # of the loop join the same batch.
        if not self._flushing and self._acks:
            self._flushing = True
            self._spawn(self._flush())

    async def _flush(self) -> None:
        assert self._client is not None
        try:
            while self._acks:
                batch, self._acks = self._acks, []
                self._c.ack_batches += 1
                try:
                    answers: List[Optional[DelayqError]] = await self._client._acknowledge(
                        [a for _, a in batch]
                    )
                    if len(answers) != len(batch):
                        raise AssertionError(f"{len(answers)} answers to {len(batch)} acks")
                except Exception as e:
                    # Not a DelayqError (the client answers those per ack): a
                    # bug. Each ack of the batch has had a failed try, as with
                    # a lost reply: it is sent again (the C++ worker's rule
                    # for kInternal), never dropped with its batch.
                    log.exception("delayq worker: sending %d acks failed (sent again)", len(batch))
                    err = InternalError(f"acknowledge: {e!r}")
                    answers = [err] * len(batch)
                await self._answered(batch, answers)
                self._pump()
        finally:
            self._flushing = False

    async def _answered(
        self, batch: List[Tuple[_Held, Ack]], answers: List[Optional[DelayqError]]
    ) -> None:
        c = self._c
        done: List[Tuple[_Held, str, Optional[DelayqError]]] = []
        for (h, ack), err in zip(batch, answers):
            if err is None:
                self._ack_retry_delay = 0.0
                if ack.kind == "finish":
                    c.succeeded += 1
                elif ack.kind == "release":
                    c.retried += 1
                    c.exhausted += 1 if h.delivery.release_buries else 0
                else:
                    c.buried += 1
            else:
                self._note(err)
                if isinstance(err, _TRANSIENT) and not self._drain_over:
                    h.resend = True
                    self._retry.append((h, ack, err))
                    continue
            done.append((h, ack.kind, err))
        if self._retry and self._ack_retry_at is None:
            assert self._loop is not None
            self._ack_retry_delay = (
                _ACK_RETRY if self._ack_retry_delay == 0 else min(self._ack_retry_delay * 2, _ACK_RETRY_MAX)
            )
            self._ack_retry_at = self._loop.time() + self._ack_retry_delay
            self._kick_timer(self._ack_retry_at)
        await self._conclude(done)

    async def _conclude(self, done: List[Tuple[_Held, str, Optional[DelayqError]]]) -> None:
        """Reports each outcome to on_acknowledged, then lets go of its job
        (once: one the stop gave up already is skipped)."""
        for h, kind, err in done:
            if h not in self._held:
                continue
            if self._on_acknowledged is not None:
                try:
                    r = self._on_acknowledged(h.delivery, AckKind(kind), err)
                    if inspect.isawaitable(r):
                        await r
                except Exception:
                    log.exception("delayq: on_acknowledged raised")
            h.topic.acking -= 1
            self._held.discard(h)
        if done:
            self._notify()

    # --- the timer: touches, resends, reserve retries --------------------------------------

    def _kick_timer(self, at: Optional[float] = None) -> None:
        """Wakes the timer if something is due before it would wake (``at``
        None: now)."""
        if self._wake is not None and (at is None or at < self._timer_armed):
            self._wake.set()

    async def _run_timer(self) -> None:
        assert self._loop is not None and self._wake is not None
        while True:
            now = self._loop.time()
            if self._reserve_retry_at is not None and now >= self._reserve_retry_at:
                self._reserve_retry_at = None
                self._pump()
            nxt = self._reserve_retry_at if self._reserve_retry_at is not None else now + _IDLE_TICK
            due: List[_Held] = []
            for h in self._held:
                # Stop's drain included: a running job keeps its reservation
                # until its handler returns or stop gives it back; one whose
                # ack waits to be sent again, until the server takes it.
                if h.lost or h.state == _ABANDONED or (h.state == _ACKING and not h.resend):
                    continue
                if h.touch_at <= now:
                    due.append(h)
                    h.touch_at = now + _touch_interval(h.delivery)
                nxt = min(nxt, h.touch_at)
            if due:
                self._touching += 1
                self._spawn(self._touch(due, now))
            if self._retry and self._ack_retry_at is not None:
                if now >= self._ack_retry_at:
                    for h, ack, _ in self._retry:
                        h.resend = False
                        self._acks.append((h, ack))
                    self._retry.clear()
                    self._ack_retry_at = None
                    self._flush_soon()
                else:
                    nxt = min(nxt, self._ack_retry_at)
            if self._wake.is_set():
                self._wake.clear()
                continue
            self._timer_armed = nxt
            try:
                await asyncio.wait_for(self._wake.wait(), max(0.0, nxt - self._loop.time()))
            except asyncio.TimeoutError:
                pass
            self._wake.clear()

    async def _touch(self, jobs: List[_Held], sent_at: float) -> None:
        assert self._client is not None and self._loop is not None
        try:
            try:
                answers: List[Optional[DelayqError]] = await self._client._touch_many(
                    [h.delivery for h in jobs]
                )
            except Exception as e:  # a bug: a failed try of each touch, tried again soon
                log.exception("delayq worker: touching %d jobs failed", len(jobs))
                answers = [InternalError(f"touch: {e!r}")] * len(jobs)
            now = self._loop.time()
            for h, err in zip(jobs, answers):
                self._touched(h, sent_at, now, err)
        finally:
            self._touching -= 1
            self._notify()

    def _touched(self, h: _Held, sent_at: float, now: float, err: Optional[DelayqError]) -> None:
        gone = h.state == _ABANDONED or h not in self._held
        if err is None:
            self._c.touched += 1
            if not gone:
                h.held_since = max(h.held_since, sent_at)
                h.touch_retry = 0.0
            return
        # Given back, or its outcome applied, while the touch was on its way:
        # its answer is no news.
        if gone or (h.state == _ACKING and isinstance(err, _OVER)):
            return
        self._note(err)
        if isinstance(err, _OVER):  # another worker has it now
            h.lost = True
            return
        # Transient as far as we can tell: again soon, before the reservation
        # runs out (and past it, until the server says it is over).
        interval = _touch_interval(h.delivery)
        h.touch_retry = _TOUCH_RETRY if h.touch_retry == 0 else min(h.touch_retry * 2, interval)
        left = h.held_since + h.delivery.ttr_ms / 1000 - now
        h.touch_at = now + max(0.001, min(h.touch_retry, left / 2) if left > 0 else h.touch_retry)
        self._kick_timer(h.touch_at)

    # --- stopping -----------------------------------------------------------------------

    async def _stop(self, drain: float) -> None:
        if not self._started:
            self._stopping = True
            return
        assert self._loop is not None and self._client is not None
        self._stopping = True
        loop = self._loop
        self._deadline = loop.time() + max(0.0, drain)
        bound = self._call_bound()  # the longest one call to the servers may take
        # No more reserves; the waiting one withdrawn (the client gives back
        # what was on its way).
        self._reserve_retry_at = None
        task = self._reserve_task
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        # Held but not started: given back, the attempt not counted.
        unstarted = list(self._waiting)
        self._waiting.clear()
        for h in unstarted:
            h.topic.waiting -= 1
            self._held.discard(h)
        if unstarted:
            try:
                await asyncio.wait_for(self._give_back([h.delivery for h in unstarted]), bound)
            except asyncio.TimeoutError:  # they come back after their TTR
                self._note(InternalError("unreserve: no answer within the client's timeouts"))
        # Handlers finish, acks are sent (and sent again), jobs are touched.
        await self._wait(lambda: not self._held, use_deadline=True)
        # Past the deadline: the jobs of handlers still running go back now.
        self._drain_over = True
        running = [h for h in self._held if h.state == _RUNNING]
        for h in running:
            h.state = _ABANDONED
            if h.task is not None:
                h.task.cancel()  # an async handler stops; a sync one's thread runs on
        given_up = []
        for h, ack, last in self._retry:
            h.resend = False
            err = type(last)(
                "the worker stopped before the server took the outcome; the last try: " + last.message
            )
            self._note(err)
            given_up.append((h, ack.kind, err))
        self._retry.clear()
        self._ack_retry_at = None
        await self._conclude(given_up)
        if running:
            acks = [Ack("release", h.delivery.id, h.delivery.receipt, 0, STOPPED_ERROR) for h in running]
            try:
                answers: List[Optional[DelayqError]] = await asyncio.wait_for(
                    self._client._acknowledge(acks), bound
                )
            except Exception as e:  # a bug, or no answer within the client's timeouts
                answers = [InternalError(f"acknowledge: {e!r}")] * len(acks)  # back after their TTR
            self._c.given_back += len(running)
            for err in answers:
                if err is not None:
                    self._note(err)
        # Outcomes being acknowledged now end with their call, which the
        # client's timeouts bound; one that outlasts that (a call that hangs)
        # is given up, and so is any other call still going then (touches,
        # give-backs), so the stop returns. A second signal cuts this short.
        end = self._deadline = loop.time() + bound
        if not await self._wait(lambda: all(h.state == _ABANDONED for h in self._held), use_deadline=True):
            unanswered = []
            for h in self._held:
                if h.state == _ACKING:
                    err = UnavailableError(
                        "the worker stopped before the server answered the outcome "
                        "(it may have been applied)"
                    )
                    self._note(err)
                    unanswered.append((h, h.ack_kind, err))
            await self._conclude(unanswered)
        if self._timer is not None:
            self._timer.cancel()
            await asyncio.gather(self._timer, return_exceptions=True)
        if self._background:
            _, late = await asyncio.wait(list(self._background), timeout=max(0.0, end - loop.time()))
            for t in late:
                t.cancel()
            if late:
                await asyncio.gather(*late, return_exceptions=True)
        if self._executor is not None:
            self._executor.shutdown(wait=False)
        if self._client is not self._given_client:
            await self._client.close()

    def _call_bound(self) -> float:
        """How long one call may take at most, in seconds: every server tried,
        each with a connect and a request (and an AUTH), plus a second."""
        assert self._client is not None
        cfg = self._client._config
        return len(cfg.servers) * (cfg.connect_timeout + 2 * cfg.request_timeout) + 1.0

    async def _wait(self, pred: Callable[[], bool], use_deadline: bool) -> bool:
        assert self._loop is not None and self._changed is not None
        while not pred():
            timeout = None
            if use_deadline:
                timeout = (self._deadline or 0.0) - self._loop.time()
                if timeout <= 0:
                    return False
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), timeout)
            except asyncio.TimeoutError:
                pass
        return True

    # --- helpers ------------------------------------------------------------------------

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()

    def _note(self, err: DelayqError) -> None:
        self._c.errors += 1
        self._c.last_error = f"{err.code}: {err.message}"

    def _spawn(self, coro: Any) -> None:
        assert self._loop is not None
        task = self._loop.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
