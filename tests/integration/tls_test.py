"""TLS on `delayq serve`'s listeners, black-box: certificates made by the
`openssl` command in a temporary directory, the real binary over real
sockets, and real clients: curl (--cacert, --cert), redis-cli --tls and
redis-py (ssl=True).

What it shows: both listeners speak TLS only (a plaintext client is answered
in plaintext, "this port speaks TLS", and logged); mutual TLS accepts the
CA's clients and refuses the others in the handshake (no certificate,
another CA, expired), each with a log line that says which; a handshake
that stalls is closed after --tls-handshake-timeout without holding up
other clients; SIGHUP reloads the certificate for new connections while an
open one keeps working, and a bad file keeps the old one serving; large
bodies, pipelines, a waiting reserve and requests sent right before a FIN
work over TLS as without it."""
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree

import redis  # noqa: E402

import harness  # noqa: E402
from harness import wait_until  # noqa: E402

CURL = shutil.which("curl") or "/usr/bin/curl"
REDIS_CLI = shutil.which("redis-cli") or "/usr/bin/redis-cli"


class Certs:
    """A CA and what it signs, made with the openssl command in a temporary
    directory: a server certificate for localhost and 127.0.0.1, a client
    certificate, an expired client certificate; and a second CA with a client
    of its own. Paths: certs.path("server.pem")."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="delayq-itest-tls-")
        self.ca("ca", "delayq test CA")
        self.ca("other-ca", "another CA")
        self.leaf("server", "ca", "localhost", "subjectAltName=DNS:localhost,IP:127.0.0.1")
        self.leaf("server2", "ca", "second.localhost",
                  "subjectAltName=DNS:localhost,IP:127.0.0.1")
        self.leaf("client", "ca", "worker-1", "extendedKeyUsage=clientAuth")
        self.leaf("other-client", "other-ca", "stranger", "extendedKeyUsage=clientAuth")
        self.expired_leaf("expired-client", "ca", "worker-old")

    def path(self, name):
        return os.path.join(self.dir, name)

    def run(self, *args):
        r = subprocess.run(["openssl", *args], cwd=self.dir, capture_output=True, text=True)
        if r.returncode != 0:
            raise AssertionError(f"openssl {' '.join(args)}: {r.stderr}")

    def ca(self, name, cn):
        self.run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                 "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "30",
                 "-subj", f"/CN={cn}")

    def request(self, name, cn):
        self.run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                 "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}")

    def leaf(self, name, ca, cn, ext):
        self.request(name, cn)
        with open(self.path(f"{name}.ext"), "w") as f:
            f.write(ext + "\n")
        self.run("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
                 "-CAcreateserial", "-out", f"{name}.pem", "-days", "30", "-extfile",
                 f"{name}.ext")

    def expired_leaf(self, name, ca, cn):
        """Valid in January 2020 only: `openssl ca` is the command that takes
        the dates."""
        self.request(name, cn)
        open(self.path("index.txt"), "w").close()
        with open(self.path("serial"), "w") as f:
            f.write("1000\n")
        with open(self.path("ca.cnf"), "w") as f:
            f.write("[ca]\ndefault_ca = d\n[d]\ndatabase = index.txt\nnew_certs_dir = .\n"
                    "serial = serial\ndefault_md = sha256\npolicy = p\n[p]\n"
                    "commonName = supplied\n")
        self.run("ca", "-batch", "-config", "ca.cnf", "-cert", f"{ca}.pem", "-keyfile",
                 f"{ca}.key", "-in", f"{name}.csr", "-out", f"{name}.pem", "-notext",
                 "-startdate", "20200101000000Z", "-enddate", "20200201000000Z")

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)


CERTS = None


def setUpModule():
    global CERTS
    CERTS = Certs()


def tearDownModule():
    CERTS.cleanup()


def tls_server(*extra, **kw):
    return harness.Server("--store", "memory", "--tls-cert-file", CERTS.path("server.pem"),
                          "--tls-key-file", CERTS.path("server.key"), *extra, **kw)


def curl(server, path, *args, data=None, cacert=True, host="127.0.0.1"):
    """curl over HTTPS: (exit code, body, stderr)."""
    cmd = [CURL, "-sS", "--max-time", "10"]
    if cacert:
        cmd += ["--cacert", CERTS.path("ca.pem")]
    if data is not None:
        cmd += ["-d", json.dumps(data)]
    cmd += [*args, f"https://{host}:{server.http_port}{path}"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    return r.returncode, r.stdout, r.stderr


def curl_plain(server, path, data):
    """curl over plain HTTP, POSTing `data` as JSON: (exit code, body, stderr)."""
    r = subprocess.run([CURL, "-sS", "--max-time", "10", "-d", json.dumps(data),
                        f"http://127.0.0.1:{server.http_port}{path}"],
                       capture_output=True, text=True, timeout=20)
    return r.returncode, r.stdout, r.stderr


def resp(server, **kw):
    """A redis-py client of the RESP listener over TLS, checking the server
    against the test CA."""
    return redis.Redis(host="127.0.0.1", port=server.port, ssl=True,
                       ssl_ca_certs=CERTS.path("ca.pem"), socket_timeout=10,
                       socket_connect_timeout=10, **kw)


def https_stats(server):
    """GET /v1/stats over HTTPS, as a dict."""
    ctx = ssl.create_default_context(cafile=CERTS.path("ca.pem"))
    conn = http.client.HTTPSConnection("127.0.0.1", server.http_port, timeout=10, context=ctx)
    try:
        conn.request("GET", "/v1/stats")
        return json.loads(conn.getresponse().read())
    finally:
        conn.close()


def log_has(server, text, timeout=10):
    wait_until(lambda: text in server.text, timeout=timeout,
               what=f"the server to log {text!r}: {server.text[-2000:]}")


def handshake(server, port=None, certfile=None, keyfile=None):
    """A TLS handshake with Python's ssl module: the server certificate's
    subject CN, or the SSLError / connection error."""
    ctx = ssl.create_default_context(cafile=CERTS.path("ca.pem"))
    if certfile:
        ctx.load_cert_chain(certfile, keyfile)
    with socket.create_connection(("127.0.0.1", port or server.port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            subject = dict(x[0] for x in s.getpeercert()["subject"])
            # TLS 1.3: a refused client certificate shows on the first read.
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            reply = s.recv(100)
            return subject["commonName"], reply


class TlsServingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = tls_server("--tls-handshake-timeout", "500ms")

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0

    def test_the_tour_over_https_with_curl(self):
        code, out, err = curl(self.server, "/healthz")
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["status"], "ok")
        code, out, err = curl(self.server, "/v1/jobs", data={
            "topic": "tls.https", "id": "https-1", "delay": "0s", "body": {"order": 1}},
            host="localhost")  # the certificate's DNS name as well as its address
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["id"], "https-1")
        code, out, err = curl(self.server, "/v1/reserve",
                              data={"topics": ["tls.https"], "wait_ms": 5000})
        self.assertEqual(code, 0, err)
        job = json.loads(out)["jobs"][0]
        self.assertEqual(json.loads(job["body"]), {"order": 1})
        code, out, err = curl(self.server, "/v1/jobs/https-1/finish",
                              data={"receipt": job["receipt"]})
        self.assertEqual((code, json.loads(out)), (0, {"ok": True}), err)

    def test_curl_without_the_ca_does_not_trust_the_server(self):
        code, _, err = curl(self.server, "/healthz", cacert=False)
        self.assertNotEqual(code, 0)
        self.assertIn("certificate", err)

    def test_resp_over_tls_with_redis_py_and_redis_cli(self):
        r = resp(self.server)
        self.assertTrue(r.ping())
        self.assertEqual(r.execute_command("ADD", "tls.resp", "resp-1", "0s", "60s", "hello"),
                         b"resp-1")
        got = subprocess.run([REDIS_CLI, "--tls", "--cacert", CERTS.path("ca.pem"), "-p",
                              str(self.server.port), "RESERVE", "TIMEOUT", "5s", "FROM",
                              "tls.resp"], capture_output=True, text=True, timeout=20)
        self.assertEqual(got.returncode, 0, got.stderr)
        lines = got.stdout.splitlines()
        self.assertEqual(lines[0], "resp-1", got.stdout)
        self.assertIn("hello", lines)
        self.assertEqual(r.execute_command("FINISH", "resp-1", lines[3]), b"OK")
        r.close()

    def test_large_bodies_in_a_pipeline_cross_many_tls_records(self):
        r = resp(self.server)
        bodies = {f"big-{i}": os.urandom(48 * 1024 + i) for i in range(40)}
        p = r.pipeline(transaction=False)
        for job_id, body in bodies.items():
            p.execute_command("ADD", "tls.big", job_id, "0s", "60s", body)
        self.assertEqual(p.execute(), [j.encode() for j in bodies])
        seen = {}
        deadline = time.monotonic() + 20
        while len(seen) < len(bodies) and time.monotonic() < deadline:
            got = r.execute_command("RESERVE", "TIMEOUT", "1s", "COUNT", "16", "FROM", "tls.big")
            for job in got or []:
                seen[job[0].decode()] = job[2]
                self.assertEqual(r.execute_command("FINISH", job[0], job[3]), b"OK")
        self.assertEqual(seen, bodies)
        r.close()

    def test_a_long_pipeline_is_read_whole(self):
        # More records at once than the server decrypts in one turn: what its
        # session read ahead is read on the next turn, though the socket has
        # nothing more to say.
        ctx = ssl.create_default_context(cafile=CERTS.path("ca.pem"))
        with socket.create_connection(("127.0.0.1", self.server.port), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                count = 40000  # 560 KB of PINGs
                s.sendall(b"*1\r\n$4\r\nPING\r\n" * count)
                want = b"+PONG\r\n" * count
                got = b""
                while len(got) < len(want):
                    chunk = s.recv(1 << 20)
                    if not chunk:
                        break
                    got += chunk
                self.assertEqual(got, want)

    def test_requests_before_a_fin_without_close_notify_are_answered(self):
        # A client that sends its FIN right behind its requests, with no
        # close_notify (`nc -q0` through a TLS tunnel, or delayq's own client
        # leaving a waiting reserve), is answered as without TLS: its input
        # ended, it did not fail (OpenSSL 3 alone would call it a truncated
        # record and answer with a decode_error alert instead of the replies).
        ctx = ssl.create_default_context(cafile=CERTS.path("ca.pem"))
        with socket.create_connection(("127.0.0.1", self.server.port), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                s.sendall(b"*6\r\n$3\r\nADD\r\n$7\r\ntls.fin\r\n$5\r\nfin-1\r\n"
                          b"$1\r\n0\r\n$5\r\n60000\r\n$1\r\nx\r\n*1\r\n$4\r\nPING\r\n")
                # The socket's sending side only: the session stays, unclosed.
                with socket.socket(fileno=os.dup(s.fileno())) as same:
                    same.shutdown(socket.SHUT_WR)
                got = b""
                while True:
                    chunk = s.recv(1 << 16)
                    if not chunk:
                        break
                    got += chunk
                self.assertEqual(got, b"$5\r\nfin-1\r\n+PONG\r\n")
        r = resp(self.server)
        self.assertIsNotNone(r.execute_command("GET", "fin-1"))
        r.close()

    def test_a_waiting_reserve_is_answered_over_tls(self):
        r = resp(self.server)
        result = {}

        def wait():
            result["jobs"] = r.execute_command("RESERVE", "TIMEOUT", "10s", "FROM", "tls.wait")

        t = threading.Thread(target=wait)
        t.start()
        other = resp(self.server)
        # The reserve waits before the add comes (the waiter's count says so).
        wait_until(lambda: https_stats(self.server)["waiting"] >= 1, timeout=10,
                   what="the reserve to wait")
        other.execute_command("ADD", "tls.wait", "wait-1", "0s", "60s", "late")
        t.join(timeout=15)
        self.assertEqual(result["jobs"][0][0], b"wait-1")
        r.close()
        other.close()

    def test_plaintext_clients_are_answered_in_plaintext_and_logged(self):
        with socket.create_connection(("127.0.0.1", self.server.http_port), timeout=10) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            reply = harness.recv_all(s)
        self.assertTrue(reply.startswith(b"HTTP/1.1 400 "), reply)
        self.assertIn(b"this port speaks TLS", reply)
        log_has(self.server, "refused: plaintext HTTP on a TLS port")

        with socket.create_connection(("127.0.0.1", self.server.port), timeout=10) as s:
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            reply = harness.recv_all(s)
        self.assertTrue(reply.startswith(b"-ERR this port speaks TLS"), reply)
        log_has(self.server, "refused: not TLS (a plaintext client on a TLS port?)")

    def test_a_port_probe_is_not_logged(self):
        refusals = self.server.text.count("refused:")
        # Connect and leave (a load balancer's TCP check), then plaintext
        # requests, which are logged.
        # Two of them, each answered before the next: by the second's line
        # the probe, long gone, has been seen.
        socket.create_connection(("127.0.0.1", self.server.port), timeout=10).close()
        for n in (1, 2):
            with socket.create_connection(("127.0.0.1", self.server.port), timeout=10) as s:
                s.sendall(b"*1\r\n$4\r\nPING\r\n")
                self.assertTrue(harness.recv_all(s).startswith(b"-ERR this port speaks TLS"))
            wait_until(lambda: self.server.text.count("refused:") >= refusals + n, timeout=10,
                       what=f"plaintext request {n}'s line")
        self.assertEqual(self.server.text.count("refused:"), refusals + 2, self.server.text)

    def test_a_stalled_handshake_is_closed_and_holds_up_no_one(self):
        # One connection that says nothing, one that stops amid its
        # ClientHello (slowloris on the handshake).
        silent = socket.create_connection(("127.0.0.1", self.server.port), timeout=10)
        partial = socket.create_connection(("127.0.0.1", self.server.http_port), timeout=10)
        partial.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
        try:
            # Others are served meanwhile.
            self.assertEqual(handshake(self.server)[1], b"+PONG\r\n")
            self.assertEqual(curl(self.server, "/healthz")[0], 0)
            # Both are closed once the 500 ms have passed.
            started = time.monotonic()
            self.assertEqual(harness.recv_all(silent), b"")
            self.assertEqual(harness.recv_all(partial), b"")
            self.assertLess(time.monotonic() - started, 5)
        finally:
            silent.close()
            partial.close()
        log_has(self.server, "not complete within 500 ms: closed")

    def test_tls_1_2_is_spoken_and_older_protocols_are_not(self):
        for version, ok in ((ssl.TLSVersion.TLSv1_2, True), (ssl.TLSVersion.TLSv1_3, True)):
            ctx = ssl.create_default_context(cafile=CERTS.path("ca.pem"))
            ctx.minimum_version = ctx.maximum_version = version
            with socket.create_connection(("127.0.0.1", self.server.port), timeout=10) as raw:
                with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                    self.assertEqual(s.version(), version.name.replace("v1_", "v1."))
        # A client that would speak TLS 1.1 (its security level lowered so
        # that it may) is refused by the server, which says so.
        got = subprocess.run(["openssl", "s_client", "-connect",
                              f"127.0.0.1:{self.server.port}", "-tls1_1", "-cipher",
                              "DEFAULT@SECLEVEL=0"],
                             input="", capture_output=True, text=True, timeout=20)
        self.assertNotEqual(got.returncode, 0, got.stdout)
        self.assertIn("alert protocol version", got.stderr + got.stdout)
        log_has(self.server, "refused: no protocol both sides speak")


class TlsLimitsTest(unittest.TestCase):
    """The limits every connection has hold over TLS too: a client that does
    not read its replies, one that leaves mid-request, and the drain."""

    def test_a_client_that_does_not_read_holds_up_no_one(self):
        s = tls_server("--max-output-bytes", 1 << 20)
        try:
            r = resp(s)
            r.execute_command("ADD", "tls.slow", "slow-1", "1h", "60s", b"x" * 60000)
            ctx = ssl.create_default_context(cafile=CERTS.path("ca.pem"))
            raw = socket.create_connection(("127.0.0.1", s.port), timeout=10)
            slow = ctx.wrap_socket(raw, server_hostname="localhost")
            request = b"*2\r\n$3\r\nGET\r\n$6\r\nslow-1\r\n"
            ping = b"*1\r\n$4\r\nPING\r\n"
            slow.sendall(request + ping)
            one = b""
            while not one.endswith(b"+PONG\r\n"):
                one += slow.recv(1 << 16)
            one = one[:-len(b"+PONG\r\n")]
            slow.sendall(request * 200 + ping)  # ~12 MB of replies, and no read for a while:
            # served up to the output bound, then held
            for i in range(50):   # while everyone else is served
                self.assertIn(b"slow-1", r.execute_command("GET", "slow-1"))
            # It reads at last, and gets every reply, in order.
            got = b""
            while len(got) < 200 * len(one) + len(b"+PONG\r\n"):
                chunk = slow.recv(1 << 20)
                if not chunk:
                    break
                got += chunk
            self.assertEqual(got, one * 200 + b"+PONG\r\n")
            slow.close()
            r.close()
        finally:
            self.assertEqual(s.stop(), 0)

    def test_a_client_gone_mid_request_and_the_drain(self):
        s = tls_server()
        try:
            ctx = ssl.create_default_context(cafile=CERTS.path("ca.pem"))
            raw = socket.create_connection(("127.0.0.1", s.port), timeout=10)
            gone = ctx.wrap_socket(raw, server_hostname="localhost")
            gone.sendall(b"*3\r\n$3\r\nGET\r\n$10\r\nhalf-a-req")
            raw.close()  # no close_notify, mid-command
            r = resp(s)
            waiting = resp(s)
            result = {}

            def wait():
                try:
                    waiting.execute_command("RESERVE", "TIMEOUT", "30s", "FROM", "tls.drain")
                except redis.ResponseError as e:
                    result["error"] = str(e)

            t = threading.Thread(target=wait)
            t.start()
            wait_until(lambda: https_stats(s)["waiting"] >= 1, timeout=10,
                       what="the reserve to wait")
            self.assertTrue(r.ping())
            s.signal(signal.SIGTERM)  # the waiting reserve is answered, over TLS, and the
            t.join(timeout=15)        # server exits 0 (stop() below)
            self.assertTrue(result["error"].startswith("UNAVAILABLE shutting down"), result)
            r.close()
            waiting.close()
        finally:
            self.assertEqual(s.stop(), 0)


class MutualTlsTest(unittest.TestCase):
    """--tls-ca-cert-file: client certificates required (the default with a
    CA file), and the token on top of them."""

    @classmethod
    def setUpClass(cls):
        cls.server = tls_server("--tls-ca-cert-file", CERTS.path("ca.pem"),
                                "--auth-token", "s3cret")

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0

    def cert(self, name):
        return ["--cert", CERTS.path(f"{name}.pem"), "--key", CERTS.path(f"{name}.key")]

    def test_a_client_of_the_ca_is_served_and_still_needs_the_token(self):
        code, out, err = curl(self.server, "/v1/stats", *self.cert("client"))
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["error"]["code"], "unauthorized")
        code, out, err = curl(self.server, "/v1/stats", *self.cert("client"), "-H",
                              "Authorization: Bearer s3cret")
        self.assertEqual(code, 0, err)
        self.assertIn("ready", json.loads(out))
        r = resp(self.server, ssl_certfile=CERTS.path("client.pem"),
                 ssl_keyfile=CERTS.path("client.key"), password="s3cret")
        self.assertTrue(r.ping())
        r.close()

    def test_clients_without_a_good_certificate_are_refused_in_the_handshake(self):
        cases = [
            ([], "peer did not return a certificate"),
            (self.cert("other-client"), "certificate verify failed: unable to get local "
                                        "issuer certificate"),
            (self.cert("expired-client"), "certificate verify failed: certificate has expired"),
        ]
        for args, logged in cases:
            with self.subTest(logged=logged):
                code, out, _ = curl(self.server, "/healthz", *args)
                self.assertNotEqual(code, 0, out)
                log_has(self.server, "refused: " + logged)
        # RESP the same: the handshake fails, no command runs.
        with self.assertRaises((ssl.SSLError, ConnectionError, OSError)):
            handshake(self.server, certfile=CERTS.path("other-client.pem"),
                      keyfile=CERTS.path("other-client.key"))
        # And the server is unharmed.
        self.assertEqual(curl(self.server, "/healthz", *self.cert("client"))[0], 0)

    def test_optional_client_certificates(self):
        s = tls_server("--tls-ca-cert-file", CERTS.path("ca.pem"), "--tls-auth-clients",
                       "optional")
        try:
            self.assertEqual(curl(s, "/healthz")[0], 0)
            self.assertEqual(curl(s, "/healthz", *self.cert("client"))[0], 0)
            self.assertNotEqual(curl(s, "/healthz", *self.cert("other-client"))[0], 0)
        finally:
            self.assertEqual(s.stop(), 0)


class ReloadTest(unittest.TestCase):
    def test_sighup_reloads_the_certificate_for_new_connections(self):
        work = tempfile.mkdtemp(prefix="delayq-itest-tls-reload-")
        self.addCleanup(shutil.rmtree, work, True)
        cert, key = os.path.join(work, "cert.pem"), os.path.join(work, "key.pem")
        shutil.copy(CERTS.path("server.pem"), cert)
        shutil.copy(CERTS.path("server.key"), key)
        s = harness.Server("--store", "memory", "--tls-cert-file", cert, "--tls-key-file", key)
        try:
            self.assertEqual(handshake(s)[0], "localhost")
            old = resp(s)
            self.assertTrue(old.ping())
            # Renewed in place, as certbot does; then SIGHUP.
            shutil.copy(CERTS.path("server2.pem"), cert)
            shutil.copy(CERTS.path("server2.key"), key)
            s.signal(signal.SIGHUP)
            log_has(s, "SIGHUP: TLS reloaded: /CN=second.localhost")
            self.assertEqual(handshake(s)[0], "second.localhost")
            self.assertTrue(old.ping())  # the open connection keeps its session
            # A broken file: the old certificate keeps serving, and the log says why.
            with open(key, "w") as f:
                f.write("not a key\n")
            s.signal(signal.SIGHUP)
            log_has(s, "SIGHUP: TLS not reloaded, the old certificate still serves")
            self.assertEqual(handshake(s)[0], "second.localhost")
            old.close()
        finally:
            self.assertEqual(s.stop(), 0)


class CommandLineTlsTest(unittest.TestCase):
    """The `delayq` client commands over TLS: --tls --cacert (--cert --key),
    or DELAYQ_TLS, DELAYQ_CACERT, DELAYQ_CERT, DELAYQ_KEY."""

    @classmethod
    def setUpClass(cls):
        cls.server = tls_server("--tls-ca-cert-file", CERTS.path("ca.pem"),
                                "--tls-auth-clients", "optional")
        cls.mutual = tls_server("--tls-ca-cert-file", CERTS.path("ca.pem"))

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0
        assert cls.mutual.stop() == 0

    def delayq(self, *args, env=None):
        r = subprocess.run([harness.BINARY, *args], capture_output=True, text=True, timeout=30,
                           env=harness.server_env(env))
        return r.returncode, r.stdout, r.stderr

    def test_the_client_commands_over_tls(self):
        server = f"localhost:{self.server.port}"
        code, out, err = self.delayq("add", "tls.cli", "hello", "--id", "cli-1", "--server",
                                     server, "--tls", "--cacert", CERTS.path("ca.pem"))
        self.assertEqual((code, out.strip()), (0, "cli-1"), err)
        # The same from the environment, and the server's address as its IP.
        env = {"DELAYQ_TLS": "1", "DELAYQ_CACERT": CERTS.path("ca.pem"),
               "DELAYQ_SERVER": f"127.0.0.1:{self.server.port}"}
        code, out, err = self.delayq("reserve", "tls.cli", "--wait", "5s", "--json", env=env)
        self.assertEqual(code, 0, err)
        job = json.loads(out)["jobs"][0]
        self.assertEqual((job["id"], job["body"]), ("cli-1", "hello"))
        code, _, err = self.delayq("finish", "cli-1", "--receipt", job["receipt"], env=env)
        self.assertEqual(code, 0, err)

    def test_delayq_work_waits_for_jobs_over_tls(self):
        # The jobs fall due while the worker's reserves wait (its waiting
        # reserves poll TLS connections).
        env = {"DELAYQ_TLS": "yes", "DELAYQ_CACERT": CERTS.path("ca.pem"),
               "DELAYQ_SERVER": f"localhost:{self.server.port}"}
        for i in range(3):
            code, _, err = self.delayq("add", "tls.work", f"job-{i}", "--id", f"work-{i}",
                                       "--delay", "700ms", env=env)
            self.assertEqual(code, 0, err)
        worker = subprocess.Popen(
            [harness.BINARY, "work", "tls.work", "--concurrency", "2", "--log-level", "warn",
             "--", "sh", "-c", 'echo "$DELAYQ_JOB_ID $(cat)"'],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=harness.server_env(env))
        try:
            lines = []
            while len(lines) < 3:
                line = worker.stdout.readline()
                if not line:
                    break
                lines.append(line.strip())
            self.assertEqual(sorted(lines), [f"work-{i} job-{i}" for i in range(3)])
        finally:
            worker.terminate()
            _, err = worker.communicate(timeout=30)
        self.assertEqual(worker.returncode, 0, err)

    def test_mutual_tls_from_the_command_line(self):
        server = f"127.0.0.1:{self.mutual.port}"
        base = ["ping", "--server", server, "--tls", "--cacert", CERTS.path("ca.pem")]
        code, out, err = self.delayq(*base, "--cert", CERTS.path("client.pem"), "--key",
                                     CERTS.path("client.key"))
        self.assertEqual((code, out.strip()), (0, "PONG"), err)
        code, out, err = self.delayq(*base)  # no certificate: refused in the handshake
        self.assertNotEqual(code, 0, out)
        self.assertIn(server, err)
        log_has(self.mutual, "refused: peer did not return a certificate")

    def test_a_server_the_ca_did_not_sign_and_a_plaintext_server(self):
        code, out, err = self.delayq("ping", "--server", f"127.0.0.1:{self.server.port}",
                                     "--tls", "--cacert", CERTS.path("other-ca.pem"))
        self.assertNotEqual(code, 0, out)
        self.assertIn("certificate verify failed", err)
        plain = harness.Server("--store", "memory")
        try:
            code, out, err = self.delayq("ping", "--server", f"127.0.0.1:{plain.port}", "--tls",
                                         "--cacert", CERTS.path("ca.pem"))
            self.assertNotEqual(code, 0, out)
            self.assertIn("not TLS", err)
            self.assertIn("the server does not speak TLS: leave --tls", err)
            # And TLS is not spoken unasked: a plaintext client of a TLS server is told.
            code, out, err = self.delayq("ping", "--server", f"127.0.0.1:{self.server.port}")
            self.assertNotEqual(code, 0, out)
            self.assertIn("this port speaks TLS", err + out)
            self.assertIn("the server speaks TLS: add --tls", err + out)
        finally:
            self.assertEqual(plain.stop(), 0)

    def test_tls_options_that_do_not_fit_are_usage_errors(self):
        for args, message in (
                (["--cacert", CERTS.path("ca.pem")], "--cacert given without --tls"),
                (["--tls", "--cert", CERTS.path("client.pem")], "--cert given without --key"),
                (["--tls", "--key", CERTS.path("client.key")], "--key given without --cert")):
            with self.subTest(message=message):
                code, _, err = self.delayq("ping", "--server",
                                           f"127.0.0.1:{self.server.port}", *args)
                self.assertEqual(code, 2, err)
                self.assertIn(message, err)


class RedisOverTlsTest(unittest.TestCase):
    """`delayq serve --store redis` on a TLS-only redis-server: rediss:// with
    --redis-tls-ca-cert-file serves; a CA that did not sign Redis's
    certificate, or a redis:// URL, stops the start saying why."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="delayq-itest-tls-redis-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.port = harness.closed_port()
        self.redis = subprocess.Popen(
            ["redis-server", "--port", "0", "--tls-port", str(self.port), "--bind", "127.0.0.1",
             "--tls-cert-file", CERTS.path("server.pem"), "--tls-key-file",
             CERTS.path("server.key"), "--tls-ca-cert-file", CERTS.path("ca.pem"),
             "--tls-auth-clients", "no", "--save", "", "--dir", self.dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(self.stop_redis)
        wait_until(self.redis_answers, timeout=10, what="redis-server to answer over TLS")

    def stop_redis(self):
        self.redis.terminate()
        self.redis.wait(timeout=10)

    def redis_answers(self):
        try:
            r = redis.Redis(host="127.0.0.1", port=self.port, ssl=True,
                            ssl_ca_certs=CERTS.path("ca.pem"), socket_timeout=2)
            return r.ping()
        except (redis.RedisError, OSError):
            return False

    def test_the_redis_store_over_tls(self):
        s = harness.Server("--store", "redis", "--redis", f"rediss://localhost:{self.port}",
                           "--redis-tls-ca-cert-file", CERTS.path("ca.pem"), "--redis-prefix",
                           "tls")
        try:
            code, out, err = curl_plain(s, "/v1/jobs", {"topic": "tls.redis", "id": "r-1",
                                                        "body": "over tls"})
            self.assertEqual(json.loads(out)["id"], "r-1", err)
            code, out, err = curl_plain(s, "/v1/reserve", {"topics": ["tls.redis"],
                                                           "wait_ms": 5000})
            self.assertEqual(json.loads(out)["jobs"][0]["body"], "over tls", err)
        finally:
            self.assertEqual(s.stop(), 0)

    def test_a_start_that_cannot_trust_redis_says_why(self):
        code, err = harness.run_serve("--store", "redis", "--redis",
                                      f"rediss://localhost:{self.port}",
                                      "--redis-tls-ca-cert-file", CERTS.path("other-ca.pem"))
        self.assertEqual(code, 1, err)
        self.assertIn("certificate verify failed", err)
        self.assertIn("(--redis-tls-ca-cert-file)", err)
        code, err = harness.run_serve("--store", "redis", "--redis",
                                      f"redis://127.0.0.1:{self.port}",
                                      "--redis-tls-ca-cert-file", CERTS.path("ca.pem"))
        self.assertEqual(code, 1, err)
        self.assertIn("--redis-tls-ca-cert-file given, but the Redis URL is redis://", err)


class TlsFlagsTest(unittest.TestCase):
    def test_options_that_do_not_fit_are_usage_errors(self):
        cases = [
            (["--tls-cert-file", CERTS.path("server.pem")],
             "--tls-cert-file given without --tls-key-file"),
            (["--tls-key-file", CERTS.path("server.key")],
             "--tls-key-file given without --tls-cert-file"),
            (["--tls-ca-cert-file", CERTS.path("ca.pem")],
             "the --tls-* options need --tls-cert-file and --tls-key-file"),
            (["--tls-cert-file", CERTS.path("server.pem"), "--tls-key-file",
              CERTS.path("server.key"), "--tls-auth-clients", "yes"],
             "--tls-auth-clients yes needs --tls-ca-cert-file"),
        ]
        for args, message in cases:
            with self.subTest(message=message):
                code, err = harness.run_serve("--store", "memory", *args)
                self.assertEqual(code, 2, err)
                self.assertIn(message, err)

    def test_files_that_do_not_serve_fail_the_start_naming_them(self):
        cases = [
            (["--tls-key-file", CERTS.path("client.key")], "does not match"),
            (["--tls-key-file", CERTS.path("server.key"), "--tls-protocols", "TLSv1.1"],
             "TLSv1.1"),
        ]
        for args, message in cases:
            with self.subTest(message=message):
                code, err = harness.run_serve("--store", "memory", "--tls-cert-file",
                                              CERTS.path("server.pem"), *args)
                self.assertEqual(code, 1, err)
                self.assertIn(message, err)


if __name__ == "__main__":
    harness.main()
