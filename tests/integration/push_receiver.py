#!/usr/bin/env python3
"""A programmable HTTP receiver for black-box tests of push delivery: the
application endpoint a subscription points at, on 127.0.0.1 and a port the
kernel picks. Standard library only (http.server); no sleeps to wait for time.

    with Receiver() as r:
        r.on("/jobs", 200)                                       # the default
        r.on("/busy", {"status": 503, "headers": {"Retry-After": "2"}})
        r.on("/slow", {"status": 200, "delay": 1.5})
        r.on("/flaky", [500, 500, 200])                          # in turn; the last repeats
        r.on("/stuck", "hang")     # never answers until stop()
        r.on("/junk", "garbage")   # non-HTTP bytes, then close
        r.on("/flood", "endless")  # a 200 whose body never ends
        r.on("/cut", "reset")      # the connection reset at once
        r.on("/x", lambda req: 200 if req.json else 400)        # any of the above, per request
        ... subscribe r.url("/jobs") ...
        [req] = r.wait_for(1, timeout=5)
        assert r.verify_signature(req, ["whsec_..."]) == ["whsec_..."]
        assert r.connections == 1   # keep-alive reused

Every request is recorded before it is answered (a hung or reset one too):
`Request.time` (time.time() when its body had been read), `method`, `path`
(as sent, with any query), `headers` (case-insensitive), `body` (bytes),
`json` (parsed, or None) and `connection` (the number of the connection it
came on, from 1, so reuse shows as equal numbers)."""
import base64
import binascii
import hashlib
import hmac
import http.server
import json
import socket
import struct
import threading
import time
import urllib.parse

HANG = "hang"
GARBAGE = "garbage"
ENDLESS = "endless"
RESET = "reset"
_MODES = (HANG, GARBAGE, ENDLESS, RESET)


class Request:
    """One request as the receiver read it."""

    def __init__(self, method, path, headers, body, connection):
        self.time = time.time()
        self.method = method
        self.path = path
        self.headers = headers  # http.client.HTTPMessage: headers["webhook-id"] in any case
        self.body = body
        self.connection = connection
        try:
            self.json = json.loads(body) if body else None
        except ValueError:
            self.json = None

    @property
    def route(self):
        """The path without its query string (what behaviours are chosen by)."""
        return urllib.parse.urlsplit(self.path).path

    def __repr__(self):
        return f"Request({self.method} {self.path}, {len(self.body)} bytes, conn {self.connection})"


def _spec(value):
    """A behaviour value as a dict: an int is a status; a mode name a mode."""
    if value is None:
        return {"status": 200}
    if isinstance(value, int):
        return {"status": value}
    if isinstance(value, str):
        if value not in _MODES:
            raise ValueError(f"unknown receiver mode {value!r} (one of {', '.join(_MODES)})")
        return {"mode": value}
    if isinstance(value, dict):
        unknown = set(value) - {"status", "headers", "body", "delay", "mode", "close"}
        if unknown:
            raise ValueError(f"unknown receiver spec keys: {sorted(unknown)}")
        if "mode" in value and value["mode"] not in _MODES:
            raise ValueError(f"unknown receiver mode {value['mode']!r}")
        return value
    raise TypeError(f"a receiver behaviour is an int, a mode name, a dict, a list of those, "
                    f"or a callable, not {type(value).__name__}")


def _secret_key(secret):
    """The HMAC key of a "whsec_..." secret (Standard Webhooks)."""
    if not secret.startswith("whsec_"):
        raise ValueError("a Standard Webhooks secret starts with whsec_")
    return base64.b64decode(secret[len("whsec_"):], validate=True)


def sign(secret, msg_id, timestamp, body):
    """The "v1,<base64>" signature of one message under one secret, computed
    here independently of the server (Python's hmac), for tests that build
    their own expectation."""
    if isinstance(body, str):
        body = body.encode()
    signed = msg_id.encode() + b"." + str(timestamp).encode() + b"." + body
    mac = hmac.new(_secret_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def verify_signature(request, secrets, tolerance_s=None):
    """The secrets (of `secrets`, "whsec_..." strings, in their order) whose
    signature is among the request's Standard Webhooks `webhook-signature`
    entries, over its `webhook-id`, `webhook-timestamp` and body. [] when the
    headers are missing or malformed or nothing matches. With tolerance_s, a
    timestamp further than that from when the request arrived matches nothing
    (the replay check receivers make)."""
    msg_id = request.headers.get("webhook-id")
    timestamp = request.headers.get("webhook-timestamp")
    header = request.headers.get("webhook-signature")
    if not msg_id or not timestamp or not header or not timestamp.isdigit():
        return []
    if tolerance_s is not None and abs(request.time - int(timestamp)) > tolerance_s:
        return []
    given = []
    for entry in header.split(" "):
        version, sep, sig = entry.partition(",")
        if version != "v1" or not sep:
            continue  # another scheme (v1a: asymmetric) or not an entry
        try:
            given.append(base64.b64decode(sig, validate=True))
        except (binascii.Error, ValueError):
            continue
    matched = []
    for secret in secrets:
        expected = base64.b64decode(sign(secret, msg_id, timestamp, request.body)[3:])
        if any(hmac.compare_digest(expected, g) for g in given):
            matched.append(secret)
    return matched


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so connection reuse can be seen
    server_version = "push-receiver"

    def setup(self):
        super().setup()
        self.number = self.server.receiver._connected(self.connection)

    def finish(self):
        try:
            super().finish()
        except OSError:
            pass  # the peer or reset() closed it first
        self.server.receiver._disconnected(self.connection)

    def log_message(self, format, *args):
        pass  # the tests' output stays theirs

    def _read_body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            body = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return body
                body += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _any(self):
        receiver = self.server.receiver
        request = Request(self.command, self.path, self.headers, self._read_body(), self.number)
        spec = _spec(receiver._record(request))
        stop = receiver._stop
        if spec.get("delay") and stop.wait(spec["delay"]):
            self.close_connection = True  # stopped while waiting: no answer
            return
        mode = spec.get("mode")
        if mode == HANG:
            stop.wait()
            self.close_connection = True
        elif mode == GARBAGE:
            self.wfile.write(b"\x00\xff\xfe this is not HTTP \x01\x02\r\n\r\n\x7f")
            self.close_connection = True
        elif mode == RESET:
            self._reset()
        elif mode == ENDLESS:
            self._endless(stop)
        else:
            self._reply(spec)

    do_POST = do_GET = do_PUT = do_DELETE = do_PATCH = _any

    def _reply(self, spec):
        body = spec.get("body", b"")
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        elif isinstance(body, str):
            body = body.encode()
        self.send_response(spec.get("status", 200))
        for name, value in (spec.get("headers") or {}).items():
            self.send_header(name, str(value))
        self.send_header("Content-Length", str(len(body)))
        if spec.get("close"):
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def _reset(self):
        # SO_LINGER 0 makes close() send RST instead of FIN; the reader file
        # holds a reference to the socket, so it is closed first.
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.rfile.close()
        self.connection.close()
        self.close_connection = True

    def _endless(self, stop):
        # No Content-Length and no chunking: the body runs to the close, which
        # never comes from this side. Ends when the client goes or stop().
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n[")
        self.connection.settimeout(0.2)  # so a client that stops reading cannot pin stop()
        chunk = b'"endless",' * 6554
        while not stop.is_set():
            try:
                self.wfile.write(chunk)
            except socket.timeout:
                continue
            except OSError:
                break
        self.close_connection = True


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 128

    def handle_error(self, request, client_address):
        pass  # a client that goes mid-request is part of the tests, not an error


class Receiver:
    """The HTTP server. start() (or `with`) binds 127.0.0.1:0; stop() closes
    the listener and every open connection, and releases hung answers."""

    def __init__(self, default=200):
        self._default = default
        self._behaviours = {}  # route -> behaviour (a value, or a list [specs, next index])
        self._lock = threading.Condition()
        self._requests = []  # guarded by _lock
        self._connections = 0  # accepted so far; guarded by _lock
        self._open = set()  # sockets of open connections; guarded by _lock
        self._stop = threading.Event()
        self._server = None
        self._thread = None

    def start(self):
        self._stop = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.receiver = self
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self):
        if self._server is None:
            return
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            open_sockets = list(self._open)
        for s in open_sockets:  # wakes handlers blocked reading the next request
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(timeout=10)
        self._server = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    @property
    def port(self):
        return self._server.server_address[1]

    def url(self, path="/"):
        if not path.startswith("/"):
            path = "/" + path
        return f"http://127.0.0.1:{self.port}{path}"

    def on(self, path, behaviour):
        """How requests to `path` (without query) are answered from now on:
        a status (int), a mode ("hang", "garbage", "endless", "reset"), a
        dict {"status", "headers", "body" (bytes, str or JSON-able),
        "delay" (seconds before answering), "close" (Connection: close),
        "mode"}, a list of those used in turn (the last repeats), or a
        callable(Request) returning one of those."""
        with self._lock:
            if isinstance(behaviour, (list, tuple)):
                if not behaviour:
                    raise ValueError("an empty list of behaviours")
                for b in behaviour:
                    _spec(b)  # refuse a bad one now, not in the handler thread
                self._behaviours[path] = [list(behaviour), 0]
            else:
                if not callable(behaviour):
                    _spec(behaviour)
                self._behaviours[path] = behaviour

    @property
    def requests(self):
        """Every request so far, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    def received(self, path=None):
        """The requests so far, those to `path` (without query) only if given."""
        return [r for r in self.requests if path is None or r.route == path]

    @property
    def connections(self):
        """Connections accepted so far (equal to the requests with keep-alive
        reuse only when it is 1)."""
        with self._lock:
            return self._connections

    @property
    def open_connections(self):
        with self._lock:
            return len(self._open)

    def wait_for(self, n, timeout=5.0, path=None):
        """Blocks until at least n requests (to `path`, if given) have arrived;
        returns them. AssertionError after `timeout` seconds, naming what came."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                got = [r for r in self._requests if path is None or r.route == path]
                if len(got) >= n:
                    return got
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"timed out after {timeout}s waiting for {n} request(s)"
                        f"{' to ' + path if path else ''}; got {len(got)}: {got}")
                self._lock.wait(left)

    def wait_idle(self, timeout=5.0):
        """Blocks until no connection is open (every client has gone).
        AssertionError after `timeout` seconds."""
        with self._lock:
            if not self._lock.wait_for(lambda: not self._open, timeout):
                raise AssertionError(f"timed out after {timeout}s waiting for the receiver's "
                                     f"{len(self._open)} open connection(s) to close")

    verify_signature = staticmethod(verify_signature)
    sign = staticmethod(sign)

    # The handler's side.

    def _connected(self, sock):
        with self._lock:
            self._connections += 1
            self._open.add(sock)
            return self._connections

    def _disconnected(self, sock):
        with self._lock:
            self._open.discard(sock)
            self._lock.notify_all()

    def _record(self, request):
        """Records `request`; returns its behaviour's value for it."""
        with self._lock:
            self._requests.append(request)
            self._lock.notify_all()
            behaviour = self._behaviours.get(request.route, self._default)
            if isinstance(behaviour, list):
                specs, i = behaviour
                behaviour[1] = i + 1
                return specs[min(i, len(specs) - 1)]
        # A callable runs outside the lock: it may call back into the receiver.
        return behaviour(request) if callable(behaviour) else behaviour


if __name__ == "__main__":
    # The receiver's self-test, against itself with the standard library's
    # clients: python3 tests/integration/push_receiver.py
    import http.client
    import unittest
    import urllib.error
    import urllib.request

    # The Standard Webhooks reference libraries' signing vector (TestWebhookSign,
    # libraries/go/webhook_test.go, github.com/standard-webhooks/standard-webhooks).
    VECTOR_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    VECTOR = {"webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp": "1614265330",
              "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}
    VECTOR_BODY = b'{"test": 2432232314}'

    def post(url, body=b"{}", headers=None, timeout=5):
        req = urllib.request.Request(url, data=body, method="POST", headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status, dict(resp.headers), resp.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    class ReceiverSelfTest(unittest.TestCase):
        def setUp(self):
            self.r = Receiver().start()
            self.addCleanup(self.r.stop)

        def test_records_requests_and_answers_200_by_default(self):
            status, _, _ = post(self.r.url("/jobs?x=1"), b'{"id": "7"}',
                                {"Content-Type": "application/json", "X-Thing": "a"})
            self.assertEqual(status, 200)
            [req] = self.r.wait_for(1, path="/jobs")
            self.assertEqual((req.method, req.path, req.route), ("POST", "/jobs?x=1", "/jobs"))
            self.assertEqual(req.json, {"id": "7"})
            self.assertEqual(req.headers["x-thing"], "a")
            self.assertLessEqual(abs(req.time - time.time()), 5)

        def test_status_headers_body_and_sequence(self):
            self.r.on("/busy", {"status": 503, "headers": {"Retry-After": "2"}, "body": "later"})
            status, headers, body = post(self.r.url("/busy"))
            self.assertEqual((status, headers.get("Retry-After"), body), (503, "2", b"later"))
            self.r.on("/flaky", [500, 429, 200])
            self.assertEqual([post(self.r.url("/flaky"))[0] for _ in range(4)],
                             [500, 429, 200, 200])
            self.r.on("/fn", lambda req: 201 if req.json == {"ok": True} else 400)
            self.assertEqual(post(self.r.url("/fn"), b'{"ok": true}')[0], 201)
            self.assertEqual(post(self.r.url("/fn"), b"nope")[0], 400)

        def test_delay_answers_late(self):
            self.r.on("/slow", {"status": 204, "delay": 0.3})
            start = time.monotonic()
            self.assertEqual(post(self.r.url("/slow"))[0], 204)
            self.assertGreaterEqual(time.monotonic() - start, 0.3)

        def test_keep_alive_reuses_one_connection(self):
            conn = http.client.HTTPConnection("127.0.0.1", self.r.port, timeout=5)
            for _ in range(3):
                conn.request("POST", "/k", body=b"{}")
                self.assertEqual(conn.getresponse().read(), b"")
            conn.close()
            self.assertEqual([q.connection for q in self.r.wait_for(3)], [1, 1, 1])
            self.assertEqual(self.r.connections, 1)
            post(self.r.url("/k"))
            self.assertEqual(self.r.connections, 2)

        def test_hang_never_answers_until_stop(self):
            self.r.on("/stuck", HANG)
            with self.assertRaises(OSError):  # socket.timeout is an OSError
                post(self.r.url("/stuck"), timeout=0.3)
            self.r.wait_for(1, path="/stuck")
            result = {}

            def hung():
                try:
                    post(self.r.url("/stuck"), timeout=10)
                except Exception as e:  # noqa: BLE001 (any way of ending is an end)
                    result["error"] = e
            t = threading.Thread(target=hung)
            t.start()
            self.r.wait_for(2, path="/stuck")
            self.r.stop()  # releases it: the connection closes unanswered
            t.join(timeout=5)
            self.assertFalse(t.is_alive())
            self.assertIn("error", result)

        def test_garbage_is_not_http(self):
            self.r.on("/junk", GARBAGE)
            conn = http.client.HTTPConnection("127.0.0.1", self.r.port, timeout=5)
            conn.request("POST", "/junk", body=b"{}")
            with self.assertRaises(http.client.HTTPException):
                conn.getresponse()
            conn.close()

        def test_reset_resets(self):
            self.r.on("/cut", RESET)
            conn = http.client.HTTPConnection("127.0.0.1", self.r.port, timeout=5)
            with self.assertRaises(ConnectionResetError):
                conn.request("POST", "/cut", body=b"{}")
                conn.getresponse()
            conn.close()
            self.r.wait_for(1, path="/cut")

        def test_endless_body_never_ends(self):
            self.r.on("/flood", ENDLESS)
            conn = http.client.HTTPConnection("127.0.0.1", self.r.port, timeout=5)
            conn.request("POST", "/flood", body=b"{}")
            resp = conn.getresponse()
            self.assertEqual(resp.status, 200)
            got = 0
            while got < 4 << 20:
                got += len(resp.read(65536))
            resp.close()
            conn.close()  # the receiver notices and ends its writer
            self.r.wait_idle()

        def test_verify_signature_against_the_reference_vector(self):
            other = "whsec_" + base64.b64encode(b"\x2a" * 32).decode()
            headers = dict(VECTOR)
            headers["webhook-signature"] = (sign(other, VECTOR["webhook-id"], 1614265330,
                                                 VECTOR_BODY) + " v1a,AAAA " +
                                            VECTOR["webhook-signature"])
            post(self.r.url("/signed"), VECTOR_BODY, headers)
            [req] = self.r.wait_for(1)
            self.assertEqual(sign(VECTOR_SECRET, VECTOR["webhook-id"], 1614265330, VECTOR_BODY),
                             VECTOR["webhook-signature"])
            self.assertEqual(self.r.verify_signature(req, [VECTOR_SECRET, other]),
                             [VECTOR_SECRET, other])
            self.assertEqual(verify_signature(req, [VECTOR_SECRET], tolerance_s=300), [])  # 2021
            post(self.r.url("/signed"), VECTOR_BODY + b" ", headers)  # body changed
            self.assertEqual(verify_signature(self.r.wait_for(2)[1], [VECTOR_SECRET, other]), [])
            post(self.r.url("/signed"), VECTOR_BODY)  # unsigned
            self.assertEqual(verify_signature(self.r.wait_for(3)[2], [VECTOR_SECRET]), [])

        def test_wait_for_times_out_naming_what_came(self):
            post(self.r.url("/a"))
            with self.assertRaisesRegex(AssertionError, "waiting for 2 request.*got 1"):
                self.r.wait_for(2, timeout=0.1)

    unittest.main(verbosity=2)
