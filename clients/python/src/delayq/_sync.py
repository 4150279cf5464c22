"""The sync transport: blocking redis-py connections to each server, and the
failover rule every request follows (the C++ client's ServerSet,
src/client/server_set.h).

A request goes to the server that answered last (the first one at start)
and moves on through the list, in order, when that one cannot take it:

- a connect that fails (refused, timed out, AUTH refused) marks the server
  down: later requests skip it until its backoff (50 ms doubling to 2 s, reset
  by a success) lets one attempt through. Nothing was sent, so every request
  moves on.
- a connection that breaks after the request was written (reset, closed, no
  reply within the request timeout) marks the server down too; the request
  may or may not have run there. It moves on only when its Call says it may
  (``retry``); otherwise it fails with UnavailableError saying so.
- an ``-UNAVAILABLE`` reply (that server's store is unreachable, or it is
  shutting down) moves a retryable request on as well.

When no server takes it: UnavailableError "no delayq server answered:
127.0.0.1:7701 (Connection refused), ...", or UnauthorizedError when a server
refused the token.

Thread-safety: any number of threads at once. A connection is used by one
thread at a time: taken out of its server's pool for one request and put
back after it.
"""

from __future__ import annotations

import threading
import time
from typing import Any, List, Optional, Tuple, TypeVar

import redis
import redis.exceptions as rx

from ._config import MAX_IDLE_PER_SERVER, Backoff, Config, reason
from ._failover import CONNECT_FAILED, LOST, NotConnected, Tried, connect_failed, gone_away
from ._failover import may_connect, moves_on, reserve_lost, sent_and_lost
from ._protocol import Call, Command, error_from_redis, pack, parse_deliveries, reserve_command
from .errors import DelayqError, UnauthorizedError, UnavailableError
from .models import Delivery

T = TypeVar("T")


class Server:
    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.name = f"{host}:{port}"
        self.backoff = Backoff()
        self.lock = threading.Lock()
        self.idle: List[Any] = []  # GUARDED_BY(lock)


def read_reply(conn: Any) -> Any:
    """One reply; an error reply as its DelayqError (not raised), so a
    pipeline's other replies are still read."""
    try:
        return conn.read_response()
    except rx.AuthenticationError as e:  # -NOAUTH: redis-py has closed the connection
        raise UnauthorizedError(str(e)) from None
    except rx.ResponseError as e:
        return error_from_redis(e)


class SyncTransport:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.servers = [Server(h, p) for h, p in config.servers]
        self._preferred = 0
        self._closed = False

    # --- connections ----------------------------------------------------------------

    def _acquire(self, s: Server) -> Any:
        if self._closed:
            raise NotConnected("the client is closed")
        conn = None
        with s.lock:
            if s.idle:
                conn = s.idle.pop()
        if conn is not None:
            # A connection the server closed while it sat here (its idle
            # timeout, a restart) shows as readable: drop it, make another.
            try:
                if not conn.can_read(timeout=0):
                    return conn
            except LOST:
                pass
            conn.disconnect()
        may_connect(s.backoff)
        conn = (redis.SSLConnection if self.config.tls else redis.Connection)(
            **self.config.connection_kwargs(s.host, s.port),
            socket_timeout=self.config.request_timeout,
            socket_connect_timeout=self.config.connect_timeout,
        )
        try:
            conn.connect()
            if self.config.tls and not self.config.auth_token:
                # TLS 1.3: a server refusing our certificate (or its absence)
                # says so after the handshake, at our first read. A PING
                # makes that a failed connect, before any request is sent
                # (AUTH, when there is a token, does the same).
                conn.send_command("PING", check_health=False)
                conn.read_response()
        except CONNECT_FAILED as e:
            conn.disconnect()
            raise connect_failed(s.backoff, e) from None
        s.backoff.succeeded()
        return conn

    def _release(self, s: Server, conn: Any) -> None:
        with s.lock:
            if len(s.idle) < MAX_IDLE_PER_SERVER and not self._closed:
                s.idle.append(conn)
                return
        conn.disconnect()

    def _broken(self, s: Server, conn: Any, why: str) -> None:
        conn.disconnect()
        s.backoff.failed(why)
        self._drop_idle(s)

    def _drop_idle(self, s: Server) -> None:
        # Its other connections are most likely dead too (a killed server).
        with s.lock:
            idle, s.idle = s.idle, []
        for c in idle:
            c.disconnect()

    def close(self) -> None:
        self._closed = True
        for s in self.servers:
            self._drop_idle(s)

    # --- requests -------------------------------------------------------------------

    def run(self, call: Call[T]) -> T:
        tried = Tried()
        repeated = False  # an earlier attempt was written and its reply lost
        n = len(self.servers)
        first = self._preferred
        packed = None
        for k in range(n):
            i = (first + k) % n
            s = self.servers[i]
            try:
                conn = self._acquire(s)
            except NotConnected as e:
                tried.not_connected(s.name, e)
                continue
            try:
                if packed is None:
                    packed = [pack(call.commands)]
                conn.send_packed_command(packed, check_health=False)
                replies = [read_reply(conn) for _ in call.commands]
            except LOST as e:
                why = reason(e)
                self._broken(s, conn, why)
                if not call.retry:
                    raise sent_and_lost(s.name, why) from None
                tried.add(s.name, why)
                repeated = True
                continue
            except BaseException:
                conn.disconnect()  # an interrupt mid-reply: its state is unknown
                raise
            if moves_on(call, k, n, replies):
                self._release(s, conn)
                tried.add(s.name, "answered UNAVAILABLE")
                repeated = True
                continue
            self._preferred = i
            try:
                result = call.parse(replies, repeated)
            except UnavailableError:
                conn.disconnect()  # malformed: this connection cannot be trusted
                raise
            except BaseException:
                self._release(s, conn)
                raise
            self._release(s, conn)
            return result
        raise tried.error()

    def _send(self, cmd: Command, going_away: Optional[DelayqError]) -> Tuple[Server, Any]:
        """A connection with ``cmd`` written to it and its reply owed (a
        reserve that waits). Moves on while nothing was sent."""
        tried = Tried()
        n = len(self.servers)
        first = self._preferred
        for k in range(n):
            s = self.servers[(first + k) % n]
            try:
                conn = self._acquire(s)
            except NotConnected as e:
                tried.not_connected(s.name, e)
                continue
            try:
                conn.send_packed_command([pack([cmd])], check_health=False)
            except LOST as e:
                why = reason(e)
                self._broken(s, conn, why)
                raise sent_and_lost(s.name, why, "the reserve") from None
            self._preferred = (first + k) % n
            return s, conn
        if going_away is not None:
            raise going_away
        raise tried.error()

    def reserve_wait(
        self, topics: List[str], count: int, wait_ms: int, max_bytes: int
    ) -> List[Delivery]:
        """A RESERVE that waits: never repeated once written, except when the
        server answers that it is shutting down (it took nothing): then the
        server is marked down and, with another in the list and time left,
        the reserve goes there for what is left of its wait."""
        deadline = time.monotonic() + wait_ms / 1000
        left = wait_ms
        going_away: Optional[UnavailableError] = None
        while True:
            s, conn = self._send(reserve_command(topics, count, left, max_bytes), going_away)
            sock = getattr(conn, "_sock", None)
            if sock is not None:
                sock.settimeout(left / 1000 + self.config.request_timeout)
            try:
                reply = read_reply(conn)
            except LOST as e:
                why = reason(e)
                self._broken(s, conn, why)
                raise reserve_lost(s.name, why) from None
            except BaseException:
                conn.disconnect()
                raise
            if sock is not None:
                sock.settimeout(self.config.request_timeout)
            if isinstance(reply, UnavailableError) and reply.shutting_down:
                conn.disconnect()
                s.backoff.failed("shutting down")
                self._drop_idle(s)
                going_away = gone_away(reply, s.name)
                left = int((deadline - time.monotonic()) * 1000)
                if len(self.servers) > 1 and left > 0:
                    continue
                raise going_away
            try:
                jobs = parse_deliveries(reply)
            except UnavailableError:
                conn.disconnect()
                raise
            except BaseException:
                self._release(s, conn)
                raise
            self._release(s, conn)
            return jobs
