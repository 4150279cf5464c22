"""The parts of the failover rule (``_sync`` says it in full) that do no I/O,
shared by the sync and asyncio transports: how a failed connect is read,
what a request met on each server it tried, and the errors it ends with.
"""

from __future__ import annotations

from typing import Any, List

import redis.exceptions as rx

from ._config import Backoff, reason
from ._protocol import Call, error_from_redis
from .errors import DelayqError, UnauthorizedError, UnavailableError

# What a broken connection raises in redis-py 4.3+: ConnectionError (reset,
# closed, refused), TimeoutError (no reply in time), InvalidResponse (bytes
# that are not RESP), and a bare OSError from the socket in a few paths.
LOST = (rx.ConnectionError, rx.TimeoutError, rx.InvalidResponse, OSError)

# What a connect that did not work raises: a LOST one, or AUTH refused.
CONNECT_FAILED = LOST + (rx.ResponseError, rx.AuthenticationError)


class NotConnected(Exception):
    """No connection could be had to a server: nothing was sent."""

    def __init__(self, why: str, unauthorized: bool = False) -> None:
        super().__init__(why)
        self.why = why
        self.unauthorized = unauthorized


def may_connect(backoff: Backoff) -> None:
    """Raises NotConnected while the server's backoff holds attempts off."""
    wait = backoff.try_start()
    if wait > 0:
        raise NotConnected(f"{backoff.last_error}; next try in {int(wait * 1000)} ms")


def connect_failed(backoff: Backoff, e: BaseException) -> NotConnected:
    """Marks the server down for ``e`` (one of CONNECT_FAILED) and says why."""
    if isinstance(e, rx.ResponseError):  # AUTH answered with an error
        backoff.failed(f"AUTH refused: {e}")
        return NotConnected(f"AUTH refused: {error_from_redis(e)}", unauthorized=True)
    if isinstance(e, rx.AuthenticationError):  # before LOST: it is a ConnectionError
        backoff.failed(f"AUTH refused: {e}")
        return NotConnected(f"AUTH refused: {e}", unauthorized=True)
    why = reason(e)
    backoff.failed(why)
    return NotConnected(why)


class Tried:
    """The servers one request went to, each with why it did not take it."""

    def __init__(self) -> None:
        self.notes: List[str] = []
        self.unauthorized = False

    def not_connected(self, name: str, e: NotConnected) -> None:
        self.notes.append(f"{name} ({e.why})")
        self.unauthorized = self.unauthorized or e.unauthorized

    def add(self, name: str, why: str) -> None:
        self.notes.append(f"{name} ({why})")

    def error(self) -> DelayqError:
        """The error when no server took the request."""
        if self.unauthorized:
            return UnauthorizedError("no delayq server accepted: " + ", ".join(self.notes))
        return UnavailableError("no delayq server answered: " + ", ".join(self.notes))


def sent_and_lost(name: str, why: str, what: str = "the request") -> UnavailableError:
    """A reply lost after a request that is not repeated was written."""
    return UnavailableError(f"delayq server {name}: {why}; {what} was sent and may have run")


def reserve_lost(name: str, why: str) -> UnavailableError:
    """A waiting reserve's reply lost."""
    return UnavailableError(
        f"delayq server {name}: {why}; the reserve was sent and may have taken "
        "jobs (they come back after their TTR)"
    )


def gone_away(reply: UnavailableError, name: str) -> UnavailableError:
    """A waiting reserve ended by a server that is shutting down."""
    return UnavailableError(f"{reply.message} (delayq server {name})")


def moves_on(call: Call[Any], k: int, n: int, replies: List[Any]) -> bool:
    """Whether the ``k``-th of ``n`` servers answered UNAVAILABLE to a request
    that may go on to the next one."""
    return call.retry and k + 1 < n and any(isinstance(r, UnavailableError) for r in replies)
