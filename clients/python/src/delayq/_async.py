"""The asyncio transport: redis.asyncio connections and the same failover
rule as the sync one (``_sync`` says it in full; the C++ client's
src/client/server_set.h is the model).

Besides the sync transport's rules, a waiting RESERVE can be withdrawn: when
the task awaiting it is cancelled, the client shuts down the sending side of
that connection (FIN), which the server takes as the client leaving (it
withdraws the reserve and closes), and reads what comes back first. Over
TLS, whose transport cannot half-close, the TCP socket under it is shut
down for writing: the same FIN, the TLS session still read. Jobs
already on their way are given back at once (UNRESERVE: ready again, the
attempt not counted), so a cancelled reserve takes no job. The reply is read
by a task of its own, shielded from the cancellation, so a cancel never
leaves half a reply in the connection.

Thread-safety: an AsyncClient belongs to the event loop it is first used on.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import time
from typing import Any, List, Optional, Tuple, TypeVar

import redis.asyncio
import redis.exceptions as rx

from ._config import MAX_IDLE_PER_SERVER, Backoff, Config, reason
from ._failover import CONNECT_FAILED, LOST, NotConnected, Tried, connect_failed, gone_away
from ._failover import may_connect, moves_on, reserve_lost, sent_and_lost
from ._protocol import Call, error_from_redis, pack, parse_deliveries, reserve_command
from .errors import DelayqError, UnauthorizedError, UnavailableError
from .models import Delivery

if sys.version_info >= (3, 11):
    _timeout = asyncio.timeout
else:  # redis-py 4.x depends on async_timeout below 3.11
    from async_timeout import timeout as _timeout

T = TypeVar("T")
LOST_ASYNC = LOST + (asyncio.TimeoutError,)


class Server:
    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.name = f"{host}:{port}"
        self.backoff = Backoff()
        self.idle: List[Any] = []


async def read_reply(conn: Any) -> Any:
    """One reply; an error reply as its DelayqError (not raised). Straight
    from redis-py's parser, which hands error replies back rather than
    raising them: each request holds its connection alone, so the
    connection's lock and per-read timeout (ours is per request) are not
    needed. A socket error is raised as is (LOST), -NOAUTH as
    UnauthorizedError."""
    try:
        reply = await conn._parser.read_response()
    except rx.AuthenticationError as e:
        raise UnauthorizedError(str(e)) from None
    if isinstance(reply, rx.ResponseError):
        return error_from_redis(reply)
    return reply


def _usable(conn: Any) -> bool:
    """An idle connection the server has not closed meanwhile."""
    reader = getattr(conn, "_reader", None)
    writer = getattr(conn, "_writer", None)
    if reader is None or writer is None:
        return False
    return not (reader.at_eof() or writer.is_closing() or reader.exception() is not None)


class AsyncTransport:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.servers = [Server(h, p) for h, p in config.servers]
        self._preferred = 0
        self._closed = False

    # --- connections ----------------------------------------------------------------

    async def _acquire(self, s: Server) -> Any:
        if self._closed:
            raise NotConnected("the client is closed")
        while s.idle:
            conn = s.idle.pop()
            if _usable(conn):
                return conn
            await _disconnect(conn)
        may_connect(s.backoff)
        cls = redis.asyncio.SSLConnection if self.config.tls else redis.asyncio.Connection
        conn = cls(
            **self.config.connection_kwargs(s.host, s.port),
            socket_timeout=None,  # timeouts are applied per request, here
            socket_connect_timeout=self.config.connect_timeout,
        )
        try:
            await conn.connect()
            if self.config.tls and not self.config.auth_token:  # as SyncTransport's
                async with _timeout(self.config.request_timeout):
                    await conn.send_command("PING", check_health=False)
                    await conn.read_response()
        except CONNECT_FAILED + (asyncio.TimeoutError,) as e:
            await _disconnect(conn)
            raise connect_failed(s.backoff, e) from None
        except BaseException:
            await _disconnect(conn)
            raise
        s.backoff.succeeded()
        return conn

    async def _release(self, s: Server, conn: Any) -> None:
        if len(s.idle) < MAX_IDLE_PER_SERVER and not self._closed:
            s.idle.append(conn)
        else:
            await _disconnect(conn)

    async def _broken(self, s: Server, conn: Any, why: str) -> None:
        s.backoff.failed(why)
        await _disconnect(conn)
        await self._drop_idle(s)

    async def _drop_idle(self, s: Server) -> None:
        idle, s.idle = s.idle, []
        for c in idle:
            await _disconnect(c)

    async def close(self) -> None:
        self._closed = True
        for s in self.servers:
            await self._drop_idle(s)

    # --- requests -------------------------------------------------------------------

    async def run(self, call: Call[T]) -> T:
        tried = Tried()
        repeated = False
        n = len(self.servers)
        first = self._preferred
        timeout = self.config.request_timeout
        for k in range(n):
            i = (first + k) % n
            s = self.servers[i]
            try:
                conn = await self._acquire(s)
            except NotConnected as e:
                tried.not_connected(s.name, e)
                continue
            try:
                async with _timeout(timeout):
                    conn._writer.write(pack(call.commands))
                    await conn._writer.drain()
                    replies = [await read_reply(conn) for _ in call.commands]
            except LOST_ASYNC as e:
                why = _why_lost(e, timeout)
                await self._broken(s, conn, why)
                if not call.retry:
                    raise sent_and_lost(s.name, why) from None
                tried.add(s.name, why)
                repeated = True
                continue
            except BaseException:
                await _disconnect(conn)  # cancelled mid-reply: its state is unknown
                raise
            if moves_on(call, k, n, replies):
                await self._release(s, conn)
                tried.add(s.name, "answered UNAVAILABLE")
                repeated = True
                continue
            self._preferred = i
            try:
                result = call.parse(replies, repeated)
            except UnavailableError:
                await _disconnect(conn)
                raise
            except BaseException:
                await self._release(s, conn)
                raise
            await self._release(s, conn)
            return result
        raise tried.error()

    async def _connect_any(self, going_away: Optional[DelayqError]) -> Tuple[Server, Any]:
        tried = Tried()
        n = len(self.servers)
        first = self._preferred
        for k in range(n):
            s = self.servers[(first + k) % n]
            try:
                conn = await self._acquire(s)
            except NotConnected as e:
                tried.not_connected(s.name, e)
                continue
            self._preferred = (first + k) % n
            return s, conn
        if going_away is not None:
            raise going_away
        raise tried.error()

    async def reserve_wait(
        self, topics: List[str], count: int, wait_ms: int, max_bytes: int
    ) -> List[Delivery]:
        """As SyncTransport.reserve_wait, and withdrawn when cancelled (see
        the module comment)."""
        deadline = time.monotonic() + wait_ms / 1000
        left = wait_ms
        going_away: Optional[UnavailableError] = None
        while True:
            s, conn = await self._connect_any(going_away)
            try:
                conn._writer.write(pack([reserve_command(topics, count, left, max_bytes)]))
            except BaseException:
                await _disconnect(conn)
                raise
            # From here the server may have the reserve: a cancel withdraws it.
            limit = left / 1000 + self.config.request_timeout
            read = asyncio.ensure_future(_flush_and_read(conn, limit))
            try:
                reply = await asyncio.shield(read)
            except asyncio.CancelledError:
                await self._withdraw(conn, read)
                raise
            except LOST_ASYNC as e:
                why = _why_lost(e, limit)
                await self._broken(s, conn, why)
                raise reserve_lost(s.name, why) from None
            except BaseException:
                await _disconnect(conn)
                raise
            if isinstance(reply, UnavailableError) and reply.shutting_down:
                await _disconnect(conn)
                s.backoff.failed("shutting down")
                await self._drop_idle(s)
                going_away = gone_away(reply, s.name)
                left = int((deadline - time.monotonic()) * 1000)
                if len(self.servers) > 1 and left > 0:
                    continue
                raise going_away
            try:
                jobs = parse_deliveries(reply)
            except UnavailableError:
                await _disconnect(conn)
                raise
            except BaseException:
                await self._release(s, conn)
                raise
            await self._release(s, conn)
            return jobs

    async def _withdraw(self, conn: Any, read: "asyncio.Future[Any]") -> None:
        """Shuts down our sending side and reads until the server closes; jobs
        that were already on their way are given back."""
        try:
            if conn._writer.can_write_eof():
                conn._writer.write_eof()
            else:  # TLS: a FIN under the TLS session, which reads on
                conn._writer.transport.get_extra_info("socket").shutdown(socket.SHUT_WR)
        except (OSError, RuntimeError, AttributeError):
            pass
        reply: Any = None
        try:
            reply = await asyncio.wait_for(read, self.config.request_timeout)
        except BaseException:  # closed (nothing was on its way), or no answer in time
            reply = None
        finally:
            await _disconnect(conn)
        if not isinstance(reply, list) or not reply:
            return
        try:
            jobs = parse_deliveries(reply)
        except DelayqError:
            return
        from ._ops import unreserve_many

        try:
            await self.run(unreserve_many(jobs))
        except DelayqError:
            pass  # they come back after their TTR


def _why_lost(e: BaseException, limit: float) -> str:
    if isinstance(e, asyncio.TimeoutError):
        return f"no reply within {limit:g} s"
    return reason(e)


async def _flush_and_read(conn: Any, limit: float) -> Any:
    async with _timeout(limit):
        await conn._writer.drain()
        return await read_reply(conn)


async def _disconnect(conn: Any) -> None:
    try:
        await conn.disconnect()
    except Exception:
        pass
