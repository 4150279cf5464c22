"""The sync client: every delayq call over RESP, with failover between servers.

    from datetime import timedelta
    import delayq

    with delayq.Client() as client:              # $DELAYQ_SERVER, else 127.0.0.1:7701
        client.add("orders.close", b'{"order": 42}', delay=timedelta(minutes=30))
        for job in client.reserve("orders.close", wait=timedelta(seconds=5)):
            client.finish(job)

Durations are ``timedelta``s, or whole milliseconds through the ``*_ms`` twin
of each parameter (``delay=timedelta(seconds=5)`` or ``delay_ms=5000``); a
bare number for ``delay`` is refused, since seconds or milliseconds would be
a guess. A due time is a ``datetime`` (``run_at=``; naive means local time).

Every error is a :class:`delayq.DelayqError` of the type of its code (see
``delayq.errors``); what the client can check is checked before sending.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Iterable, List, Optional, Union

from . import _ops
from ._config import Config, Servers
from ._protocol import IdMaker
from ._sync import SyncTransport
from .errors import ExistsError
from .models import AddResult, Delivery, Job, JobState, Stats, TopicStats

JobRef = Union[Delivery, str]

__all__ = ["Client"]


class Client:
    """A connection pool to one or more delayq servers (RESP), safe to share
    between threads.

    ``servers``: a list (``["10.0.0.5:7701", "10.0.0.6:7701"]``) or a
    comma-separated string; None: ``$DELAYQ_SERVER``, else 127.0.0.1:7701. A
    missing port is 7701. Several servers are for failover, not sharding:
    they must serve the same jobs (``--store redis``, one Redis behind them).
    ``auth_token``: the servers' ``--auth-token``; None: ``$DELAYQ_AUTH_TOKEN``.
    ``connect_timeout`` (default 1 s) bounds a connect, ``request_timeout``
    (default 5 s) a reply (a waiting reserve's: its wait plus this); each a
    timedelta or seconds.
    ``tls``: speak TLS to the servers (their ``--tls-cert-file``), checking
    each one's certificate against ``tls_ca_file`` (PEM; None: the system's
    trust store) and against the host of its address (a name or an IP
    address); ``tls_cert_file`` and ``tls_key_file``: this client's
    certificate for servers that ask for one (mutual TLS), both or neither.
    None: ``$DELAYQ_TLS`` (1/yes/true), ``$DELAYQ_CACERT``, ``$DELAYQ_CERT``,
    ``$DELAYQ_KEY``. A file given without tls is an InvalidArgumentError.

    Nothing connects until the first call. Each call goes to the server that
    answered last and moves on when it cannot be reached; a request whose
    reply was lost is repeated on the next server only when that is safe
    (adds, receipt-bearing changes, reads; see the README's "Failover").
    """

    def __init__(
        self,
        servers: Servers = None,
        *,
        auth_token: Optional[str] = None,
        connect_timeout: Union[timedelta, float] = 1.0,
        request_timeout: Union[timedelta, float] = 5.0,
        tls: Optional[bool] = None,
        tls_ca_file: Optional[str] = None,
        tls_cert_file: Optional[str] = None,
        tls_key_file: Optional[str] = None,
    ) -> None:
        self._config = Config.make(
            servers,
            auth_token,
            connect_timeout,
            request_timeout,
            tls,
            tls_ca_file,
            tls_cert_file,
            tls_key_file,
        )
        self._transport = SyncTransport(self._config)
        self._ids = IdMaker()

    @property
    def servers(self) -> List[str]:
        """The servers, "host:port", in the order they are tried."""
        return self._config.server_list

    def __repr__(self) -> str:
        return f"Client(servers={self.servers!r})"

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes every connection. Later calls fail with UnavailableError."""
        self._transport.close()

    # --- producing ----------------------------------------------------------------

    def add(
        self,
        topic: str,
        body: Union[bytes, str] = b"",
        *,
        id: Optional[str] = None,
        delay: Optional[timedelta] = None,
        delay_ms: Optional[int] = None,
        run_at: Optional[datetime] = None,
        run_at_ms: Optional[int] = None,
        ttr: Optional[timedelta] = None,
        ttr_ms: Optional[int] = None,
        priority: Optional[int] = None,
        max_attempts: Optional[int] = None,
        replace: bool = False,
        idempotency_key: Optional[str] = None,
    ) -> AddResult:
        """Adds a job to ``topic``; due now, after ``delay`` (or ``delay_ms``),
        or at ``run_at`` (a datetime; or ``run_at_ms``, Unix ms).

        ``body``: bytes, or str (sent as UTF-8). ``id``: 1-256 bytes, unique
        among live jobs; None: the client makes one (32 hex digits,
        time-ordered), except with ``idempotency_key`` given: then no id is
        sent and the server makes it (a repeat of the call with that key
        within the server's dedup window, 5 min by default, answers the same
        id and adds nothing). ``ttr`` (default 60 s): how long a reservation lasts
        before the job is handed out again. ``priority`` 0..4294967295 (default
        1024, lower first). ``max_attempts``: deliveries before it is buried
        (0, the default: unlimited). ``replace``: adding a live id updates
        that job instead of raising ExistsError.

        Safe to repeat after a lost reply: every attempt carries the same
        idempotency key (made here, or ``idempotency_key`` as given) and the
        same id (``id``, or the one made here; none when the server makes
        it), so a failover never adds the job twice.

        Raises InvalidArgumentError (nothing sent), ExistsError, TooLargeError,
        UnavailableError, UnauthorizedError.
        """
        req = _ops.add(
            self._ids, topic, body, id=id, delay=delay, delay_ms=delay_ms, run_at=run_at,
            run_at_ms=run_at_ms, ttr=ttr, ttr_ms=ttr_ms, priority=priority,
            max_attempts=max_attempts, replace=replace, idempotency_key=idempotency_key,
        )  # fmt: skip
        try:
            return self._transport.run(req.call)
        except _ops.ExistsAfterRepeat as e:
            # Our own first attempt, whose reply was lost, if the job is ours.
            own = req.own(self.get(req.id))
            if own is None:
                raise ExistsError(e.message) from None
            return own

    def add_many(
        self,
        topic: str,
        bodies: Iterable[Union[bytes, str]],
        *,
        delay: Optional[timedelta] = None,
        delay_ms: Optional[int] = None,
        run_at: Optional[datetime] = None,
        run_at_ms: Optional[int] = None,
        ttr: Optional[timedelta] = None,
        ttr_ms: Optional[int] = None,
        priority: Optional[int] = None,
        max_attempts: Optional[int] = None,
    ) -> List[AddResult]:
        """Adds one job per body to ``topic``, all with these options (as
        ``add``'s), in one pipeline: one round trip. Ids and idempotency keys
        are made by the client, one per job, so a failover repeats the
        pipeline without adding any job twice. Returns the results in order.
        If any add failed, raises the first error, whose ``results`` lists
        each add's AddResult or error (the others were added)."""
        req = _ops.add_many(
            self._ids, topic, bodies, delay=delay, delay_ms=delay_ms, run_at=run_at,
            run_at_ms=run_at_ms, ttr=ttr, ttr_ms=ttr_ms, priority=priority,
            max_attempts=max_attempts,
        )  # fmt: skip
        if not req.adds:
            return []
        results = self._transport.run(req.call)
        for i, r in enumerate(results):
            if isinstance(r, _ops.ExistsAfterRepeat):
                own = req.adds[i].own(self.get(req.adds[i].id))
                results[i] = own if own is not None else ExistsError(r.message)
        return _ops.all_added(results)

    # --- consuming ----------------------------------------------------------------

    def reserve(
        self,
        topics: Union[str, Iterable[str]],
        *,
        count: int = 1,
        wait: Optional[timedelta] = None,
        wait_ms: Optional[int] = None,
        max_bytes: int = 0,
    ) -> List[Delivery]:
        """Takes up to ``count`` (1..1000) ready jobs of ``topics`` (one name
        or up to 100), best first; waits up to ``wait`` (at most a day) when
        none is ready. Returns [] when none came in time.

        Never repeated once written: a lost reply raises UnavailableError
        (jobs it may have taken come back after their TTR). A server that
        shuts down while the reserve waits answers "shutting down"; the
        reserve then goes to the next server for what is left of its wait.
        """
        req = _ops.reserve(topics, count, wait, wait_ms, max_bytes)
        if req.wait_ms > 0:
            return self._transport.reserve_wait(req.topics, req.count, req.wait_ms, req.max_bytes)
        return self._transport.run(req.call())

    def finish(self, job: JobRef, receipt: Optional[str] = None, *, force: bool = False) -> None:
        """Done: the job is removed. ``job``: the Delivery (its receipt is
        used), or an id with its ``receipt``; ``force=True`` acts by id alone
        (an operator's tool: not repeated after a lost reply).

        Raises StaleReceiptError (the delivery is over: its TTR ran out and
        another worker has it), NotFoundError, NotReservedError (force on a
        job not reserved), InvalidArgumentError, UnavailableError.
        """
        self._transport.run(_ops.finish(job, receipt, force))

    def release(
        self,
        job: JobRef,
        receipt: Optional[str] = None,
        *,
        delay: Optional[timedelta] = None,
        delay_ms: Optional[int] = None,
        error: Optional[str] = None,
        force: bool = False,
    ) -> None:
        """Gives the job back, due again after ``delay`` (default: now);
        ``error`` is kept as its last_error. A delivery that used up its
        max_attempts is buried instead (``Delivery.release_buries``)."""
        self._transport.run(_ops.release(job, receipt, force, delay, delay_ms, error))

    def touch(self, job: JobRef, receipt: Optional[str] = None, *, force: bool = False) -> None:
        """Restarts the reservation's full TTR from now."""
        self._transport.run(_ops.touch(job, receipt, force))

    def bury(
        self,
        job: JobRef,
        receipt: Optional[str] = None,
        *,
        reason: Optional[str] = None,
        force: bool = False,
    ) -> None:
        """Sets the job aside (buried) until kicked; ``reason`` becomes its
        last_error."""
        self._transport.run(_ops.bury(job, receipt, force, reason))

    def unreserve(self, job: JobRef, receipt: Optional[str] = None) -> None:
        """Gives back a job never begun: ready again at once, in its place in
        line, the delivery not counted in its attempts. Needs the receipt."""
        self._transport.run(_ops.unreserve(job, receipt))

    # --- managing -----------------------------------------------------------------

    def delete(self, job: JobRef) -> None:
        """Removes the job, whatever its state. Raises NotFoundError. Not
        repeated after a lost reply."""
        self._transport.run(_ops.delete(job))

    def kick(self, job: JobRef) -> None:
        """Makes a buried or delayed job ready now. Raises NotFoundError,
        InvalidArgumentError (a ready or reserved job)."""
        self._transport.run(_ops.kick(job))

    def kick_topic(self, topic: str, n: int) -> int:
        """Kicks up to ``n`` buried jobs of ``topic``; returns how many."""
        return self._transport.run(_ops.kick_topic(topic, n))

    def get(self, job: JobRef) -> Optional[Job]:
        """The job with that id, or None when there is no live one."""
        return self._transport.run(_ops.get(job))

    def peek(self, topic: str, state: Union[JobState, str] = JobState.READY) -> Optional[Job]:
        """The next job of ``topic`` in ``state`` (ready, delayed or buried),
        read whole; None when there is none."""
        call, st = _ops.peek(topic, state)
        for _ in range(5):  # a job that leaves the state between PEEK and GET is peeked again
            peeked = self._transport.run(call)
            if peeked is None:
                return None
            job = self.get(peeked.id)
            if job is not None and job.state == st:
                return job
        return None

    def stats(self) -> Stats:
        """The server's figures (STATS)."""
        return self._transport.run(_ops.stats())

    def topic_stats(self, topic: str) -> TopicStats:
        """One topic's figures."""
        return self._transport.run(_ops.topic_stats(topic))

    def topics(self) -> List[str]:
        """Topics with jobs, waiting reserves or a pause, sorted."""
        return self._transport.run(_ops.topics())

    def pause(
        self,
        topic: str,
        duration: Optional[timedelta] = None,
        *,
        duration_ms: Optional[int] = None,
    ) -> None:
        """Hands out no job of ``topic`` for ``duration`` (None or 0: until
        resumed; at most 100 years, more raises InvalidArgumentError)."""
        self._transport.run(_ops.pause(topic, duration, duration_ms))

    def resume(self, topic: str) -> None:
        """Ends a pause at once."""
        self._transport.run(_ops.resume(topic))

    def ping(self) -> None:
        """Raises UnavailableError (or UnauthorizedError) unless a server answers."""
        self._transport.run(_ops.ping())
