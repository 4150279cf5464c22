"""Where the client connects, with what token and TLS, and how a server is
marked down.

Shared by the sync and asyncio transports (``_sync``, ``_async``).
"""

from __future__ import annotations

import os
import re
import ssl
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

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


def env_flag(name: str) -> Optional[bool]:
    """A yes/no variable as the CLI reads it: unset or empty: None; 0, no or
    false: off; anything else: on."""
    value = os.environ.get(name)
    if not value:
        return None
    return value not in ("0", "no", "false")


@dataclass(frozen=True)
class Tls:
    """TLS to the servers (their --tls-cert-file): each one's certificate is
    checked against ``ca_file`` (None: the system's trust store) and against
    the host of its address (a name or an IP address). ``cert_file`` and
    ``key_file``: this client's certificate, for servers that ask for one
    (--tls-ca-cert-file); both or neither. PEM files, read at each connect."""

    ca_file: Optional[str]
    cert_file: Optional[str]
    key_file: Optional[str]

    def redis_kwargs(self) -> Dict[str, Any]:
        """What redis-py's SSLConnection (sync and asyncio) takes for it.
        redis-py checks no host name unless told to."""
        return {
            "ssl_ca_certs": self.ca_file,
            "ssl_certfile": self.cert_file,
            "ssl_keyfile": self.key_file,
            "ssl_cert_reqs": "required",
            "ssl_check_hostname": True,
        }

    @staticmethod
    def make(
        tls: Optional[bool],
        ca_file: Optional[str],
        cert_file: Optional[str],
        key_file: Optional[str],
    ) -> Optional["Tls"]:
        """None when off. Each None argument: its variable (DELAYQ_TLS,
        DELAYQ_CACERT, DELAYQ_CERT, DELAYQ_KEY; empty counts as unset).
        InvalidArgumentError for a file given without tls, or a certificate
        without its key or the reverse."""
        if tls is None:
            tls = env_flag("DELAYQ_TLS") or False
        files = {}
        for name, value, env in (
            ("tls_ca_file", ca_file, "DELAYQ_CACERT"),
            ("tls_cert_file", cert_file, "DELAYQ_CERT"),
            ("tls_key_file", key_file, "DELAYQ_KEY"),
        ):
            given = value is not None
            if value is None:
                value = os.environ.get(env) or None
            if value is not None and not isinstance(value, (str, os.PathLike)):
                raise InvalidArgumentError(f"{name}: expected a path, got {type(value).__name__}")
            value = os.fspath(value) if value else None
            if value and not tls:
                where = name if given else f"{name} (${env})"
                raise InvalidArgumentError(
                    f"{where} given without tls (tls=True or DELAYQ_TLS=1): it is for TLS only"
                )
            if value:
                try:
                    open(value, "rb").close()  # a typo fails here, not at each connect
                except OSError as e:
                    raise InvalidArgumentError(f"{name}: cannot read {value}: {e.strerror}") from None
            files[name] = value
        cert, key = files["tls_cert_file"], files["tls_key_file"]
        if bool(cert) != bool(key):
            raise InvalidArgumentError(
                "tls_key_file given without tls_cert_file"
                if key
                else "tls_cert_file given without tls_key_file"
            )
        if not tls:
            return None
        return Tls(ca_file=files["tls_ca_file"], cert_file=cert, key_file=key)


@dataclass(frozen=True)
class Config:
    servers: List[Tuple[str, int]]
    auth_token: Optional[str]
    connect_timeout: float  # seconds
    request_timeout: float  # seconds
    tls: Optional[Tls] = None  # None: plaintext

    @staticmethod
    def make(
        servers: Servers,
        auth_token: Optional[str],
        connect_timeout: Union[timedelta, float],
        request_timeout: Union[timedelta, float],
        tls: Optional[bool] = None,
        tls_ca_file: Optional[str] = None,
        tls_cert_file: Optional[str] = None,
        tls_key_file: Optional[str] = None,
    ) -> "Config":
        if auth_token is None:
            auth_token = os.environ.get("DELAYQ_AUTH_TOKEN") or None
        return Config(
            servers=parse_servers(servers),
            auth_token=auth_token or None,
            connect_timeout=seconds("connect_timeout", connect_timeout),
            request_timeout=seconds("request_timeout", request_timeout),
            tls=Tls.make(tls, tls_ca_file, tls_cert_file, tls_key_file),
        )

    def connection_kwargs(self, host: str, port: int) -> Dict[str, Any]:
        """redis-py Connection arguments for one server, timeouts aside."""
        kwargs: Dict[str, Any] = {"host": host, "port": port, "password": self.auth_token}
        if self.tls is not None:
            kwargs.update(self.tls.redis_kwargs())
        return kwargs

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
    e: Optional[BaseException] = exc
    for _ in range(4):  # redis-py wraps a TLS error once or twice
        if e is None:
            break
        if isinstance(e, ssl.SSLError):  # its errno is OpenSSL's, not the system's
            return tls_reason(e)
        e = e.__cause__ or e.__context__
    # redis.asyncio keeps only the text of a TLS error read later ("Error
    # while reading from socket: (1, '[SSL: ...] tlsv13 alert ... (_ssl.c:2546)')").
    m = re.search(r"\[SSL: [A-Z0-9_]+\] (.+?) \(_ssl\.c:\d+\)", str(exc))
    if m:
        return "TLS: " + m.group(1)
    for e in (exc.__cause__ or exc.__context__, exc):
        if isinstance(e, OSError) and not isinstance(e, TimeoutError):
            if e.errno:  # asyncio says "Connect call failed (...)": the errno says why
                return os.strerror(e.errno)
            if e.strerror:
                return e.strerror
    text = str(exc) or type(exc).__name__
    return text.rstrip(".")


def tls_reason(e: ssl.SSLError) -> str:
    """"TLS: certificate verify failed: unable to get local issuer
    certificate", "TLS: Hostname mismatch, ...", "TLS: tlsv13 alert
    certificate required" (the server wants a client certificate)."""
    if isinstance(e, ssl.SSLCertVerificationError) and e.verify_message:
        return f"TLS: certificate verify failed: {e.verify_message}".rstrip(".")
    if isinstance(e, ssl.SSLEOFError):
        return "TLS: the server closed the connection in the handshake"
    return "TLS: " + (e.reason or e.strerror or str(e)).replace("_", " ").lower()
