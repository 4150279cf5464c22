"""The errors of the delayq client: one base type, one subtype per code.

Every failure the client raises is a :class:`DelayqError` whose ``code`` is
one of the server's error codes (docs/api.md §6) and whose message is the
server's own text (or, for what the client checks itself, the same wording
the server would use, naming the field). Catch the subtype you mean::

    try:
        client.finish(job)
    except delayq.StaleReceiptError:
        pass  # its TTR ran out and another worker has it now

Over RESP the server answers ``-PREFIX message``; :func:`from_reply` maps the
prefix back to the type (``-ERR`` and anything unknown: :class:`InternalError`).
"""

from __future__ import annotations

from typing import Dict, Optional, Type

__all__ = [
    "DelayqError",
    "InvalidArgumentError",
    "NotFoundError",
    "ExistsError",
    "StaleReceiptError",
    "NotReservedError",
    "TooLargeError",
    "UnauthorizedError",
    "UnavailableError",
    "InternalError",
    "from_reply",
]


class DelayqError(Exception):
    """Base of every delayq error. ``code`` is the server's code, ``message``
    its text."""

    code: str = "internal"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"


class InvalidArgumentError(DelayqError):
    """Bad input; the message names the field (``topic: required, ...``).
    Raised before anything is sent for what the client can check itself."""

    code = "invalid_argument"


class NotFoundError(DelayqError):
    """No live job with that id."""

    code = "not_found"


class ExistsError(DelayqError):
    """An add of a live id without ``replace=True``."""

    code = "exists"


class StaleReceiptError(DelayqError):
    """The receipt is not the job's current reservation: its TTR ran out and
    it was handed out again, or it was finished, released or given back."""

    code = "stale_receipt"


class NotReservedError(DelayqError):
    """A change with ``force=True`` (no receipt) on a job that is not reserved."""

    code = "not_reserved"


class TooLargeError(DelayqError):
    """A body (or request) over the server's limit (``--max-body``)."""

    code = "too_large"


class UnauthorizedError(DelayqError):
    """The server wants a token (``DELAYQ_AUTH_TOKEN``), or refused the one sent."""

    code = "unauthorized"


class UnavailableError(DelayqError):
    """No server could serve the request now: none answered (each one tried
    is named with why), a server's store is out of reach, a server is
    shutting down, or a reply was lost after a request that is not safe to
    repeat was written (the message then says it "may have run")."""

    code = "unavailable"

    @property
    def shutting_down(self) -> bool:
        """True when a server ended a waiting reserve because it is stopping
        (``shutting down: ...``): reserve again, elsewhere or once it is back."""
        return self.message.startswith("shutting down")


class InternalError(DelayqError):
    """``-ERR`` from the server (a bug, an unknown command) or anything the
    client cannot classify."""

    code = "internal"


# RESP error prefixes (docs/api.md §6), read backwards.
PREFIXES: Dict[str, Type[DelayqError]] = {
    "INVALID": InvalidArgumentError,
    "NOTFOUND": NotFoundError,
    "EXISTS": ExistsError,
    "STALE": StaleReceiptError,
    "NOTRESERVED": NotReservedError,
    "TOOLARGE": TooLargeError,
    "NOAUTH": UnauthorizedError,
    "UNAVAILABLE": UnavailableError,
    "ERR": InternalError,
}

_BY_CODE: Dict[str, Type[DelayqError]] = {cls.code: cls for cls in PREFIXES.values()}


def from_reply(text: str, prefix: Optional[str] = None) -> DelayqError:
    """The error of a RESP error reply. ``text`` is the reply without its
    ``-``; when the prefix was already split off (redis-py does that for
    ``ERR`` and ``NOAUTH``), pass it as ``prefix``."""
    if prefix is None:
        head, _, rest = text.partition(" ")
        cls = PREFIXES.get(head)
        if cls is None:
            return InternalError(text)
        return cls(rest)
    return PREFIXES.get(prefix, InternalError)(text)


def by_code(code: str, message: str) -> DelayqError:
    """An error of the type of ``code`` (``"not_found"``, ...)."""
    return _BY_CODE.get(code, InternalError)(message)
