"""Where the client connects, with what token, and how a server is marked down.

Shared by the sync and asyncio transports (``_sync``, ``_async``).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import List, Optional, Sequence, Tuple, Union

from .errors import InvalidArgumentError

DEFAULT_SERVER = "127.0.0.1:7701"
DEFAULT_PORT = 7701
# Connections kept open per server between requests (as the C++ client's
# ServerSet::kMaxIdlePerServer): a worker with N handlers in flight uses up
# to about N at once.
MAX_IDLE_PER_SERVER = 64

Servers = Union[str, Sequence[str], None]


def parse_servers(servers: Servers) -> List[Tuple[str, int]]:
    """``"a:7701,b:7701"`` or ``["a:7701", "b"]`` into (host, port) pairs; a
    missing port is 7701. None: ``$DELAYQ_SERVER``, else 127.0.0.1:7701."""
    if servers is None:
        servers = os.environ.get("DELAYQ_SERVER") or DEFAULT_SERVER
    parts = servers.split(",") if isinstance(servers, str) else list(servers)
    shown = servers if isinstance(servers, str) else ",".join(map(str, parts))
    if not parts:
        raise InvalidArgumentError("servers: give at least one host:port")
    out = []
    for part in parts:
        if not isinstance(part, str):
            raise InvalidArgumentError(f"servers: expected 'host:port' strings, got {part!r}")
        part = part.strip()
        if not part:
            raise InvalidArgumentError(
                f"servers: empty address in '{shown}' (expected host:port[,host:port...])"
            )
        if part.startswith("["):  # [v6]:port
            host, _, rest = part[1:].partition("]")
            port = rest[1:] if rest.startswith(":") else str(DEFAULT_PORT)
        elif ":" in part:
            host, _, port = part.rpartition(":")
        else:
            host, port = part, str(DEFAULT_PORT)
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise InvalidArgumentError(f"servers: bad address '{part}' (expected host:port)")
        out.append((host, int(port)))
    return out


def seconds(name: str, value: Union[timedelta, float, int]) -> float:
    """A timeout option: a timedelta, or seconds (documented as such)."""
    if isinstance(value, timedelta):
        s = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        s = float(value)
    else:
        raise InvalidArgumentError(f"{name}: expected a timedelta, got {type(value).__name__}")
    if s <= 0:
        raise InvalidArgumentError(f"{name}: must be > 0, got {value!r}")
    return s


@dataclass(frozen=True)
class Config:
    servers: List[Tuple[str, int]]
    auth_token: Optional[str]
    connect_timeout: float  # seconds
    request_timeout: float  # seconds

    @staticmethod
    def make(
        servers: Servers,
        auth_token: Optional[str],
        connect_timeout: Union[timedelta, float],
        request_timeout: Union[timedelta, float],
    ) -> "Config":
        if auth_token is None:
            auth_token = os.environ.get("DELAYQ_AUTH_TOKEN") or None
        return Config(
            servers=parse_servers(servers),
            auth_token=auth_token or None,
            connect_timeout=seconds("connect_timeout", connect_timeout),
            request_timeout=seconds("request_timeout", request_timeout),
        )

    @property
    def server_list(self) -> List[str]:
        return [f"{h}:{p}" for h, p in self.servers]


class Backoff:
    """When the next connect to a server may be tried: after a failure, 50 ms,
    doubling to 2 s while it keeps failing; a success resets it. Shared by the
    connections to one server, so a dead server costs one failed connect per
    period, not one per request (the C++ client's redis::Backoff)."""

    INITIAL = 0.05
    MAX = 2.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failing = False
        self._retry_at = 0.0
        self._delay = self.INITIAL
        self.last_error = ""

    def try_start(self) -> float:
        """0 when a connect may be tried now (and, while failing, claims that
        attempt: others are told to wait); else the seconds left to wait."""
        with self._lock:
            if not self._failing:
                return 0.0
            now = time.monotonic()
            if now < self._retry_at:
                return self._retry_at - now
            self._retry_at = now + self._delay
            return 0.0

    def failed(self, error: str) -> None:
        with self._lock:
            self._failing = True
            self._retry_at = time.monotonic() + self._delay
            self._delay = min(self._delay * 2, self.MAX)
            self.last_error = error

    def succeeded(self) -> None:
        with self._lock:
            self._failing = False
            self._delay = self.INITIAL


def reason(exc: BaseException) -> str:
    """Why a connection failed, short: "Connection refused", "no reply within
    5.0 s", ... (redis-py wraps the OSError in a longer sentence)."""
    for e in (exc.__cause__ or exc.__context__, exc):
        if isinstance(e, OSError) and not isinstance(e, TimeoutError):
            if e.errno:  # asyncio says "Connect call failed (...)": the errno says why
                return os.strerror(e.errno)
            if e.strerror:
                return e.strerror
    text = str(exc) or type(exc).__name__
    return text.rstrip(".")
