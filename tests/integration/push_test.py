#!/usr/bin/env python3
"""Push delivery (service mode) black-box: the real `delayq serve` POSTing
due jobs to a real receiver (push_receiver.py) on loopback, registered over
the HTTP API. What only real processes, sockets and time can show: signatures
checked by an independent implementation (Python's hmac), receivers that
misbehave at the socket level, restarts, lapses on the wall clock, two
servers on one Redis, and a shutdown with a request in flight. The outcome
rules on a manual clock are in tests/push/pusher_test.cc.

    /usr/bin/python3 tests/integration/push_test.py --binary build/bin/delayq
"""
import http.client
import http.server
import ssl
import threading
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest
import urllib.parse

import harness
from harness import Server, wait_until
from push_receiver import Receiver
from redis_server_test import RedisProcess

SECRET_NEW = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SECRET_OLD = "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0NTY3ODk="


def call(server, method, path, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=10)
    try:
        data = None if body is None else json.dumps(body).encode()
        conn.request(method, path, body=data)
        resp = conn.getresponse()
        raw = resp.read()
        return resp.status, (json.loads(raw) if raw else None)
    finally:
        conn.close()


def subscribe(server, name, url, topics, **fields):
    status, body = call(server, "PUT", "/v1/subscriptions/" + name,
                        {"topics": topics, "url": url, **fields})
    assert status in (200, 201), (status, body)
    return body


def add(server, topic, job_id, body="{}", **fields):
    status, reply = call(server, "POST", "/v1/jobs",
                         {"topic": topic, "id": job_id, "body": body, **fields})
    assert status in (200, 201), (status, reply)


def get(server, job_id):
    return call(server, "GET", "/v1/jobs/" + urllib.parse.quote(job_id, safe=""))


class PushTest(unittest.TestCase):
    def setUp(self):
        self.server = Server("--store", "memory")
        self.addCleanup(self.server.stop)
        self.receiver = Receiver()
        self.receiver.start()
        self.addCleanup(self.receiver.stop)

    def test_a_signed_job_is_the_request_body_and_a_2xx_finishes_it(self):
        subscribe(self.server, "orders", self.receiver.url("/close"), ["order.close"],
                  secrets=[SECRET_NEW, SECRET_OLD])
        add(self.server, "order.close", "order-1001", body='{"order":1001}')
        [req] = self.receiver.wait_for(1, timeout=10)
        self.assertEqual(req.method, "POST")
        self.assertEqual(req.path, "/close")
        self.assertEqual(req.headers["Content-Type"], "application/json")
        # The job itself, no envelope, no receipt.
        self.assertEqual(req.json["id"], "order-1001")
        self.assertEqual(req.json["topic"], "order.close")
        self.assertEqual(req.json["body"], '{"order":1001}')
        self.assertEqual(req.json["attempts"], 1)
        self.assertNotIn("receipt", req.json)
        # Both keys of the rotation sign it, verified by Python's hmac.
        self.assertEqual(self.receiver.verify_signature(req, [SECRET_NEW, SECRET_OLD]),
                         [SECRET_NEW, SECRET_OLD])
        self.assertEqual(self.receiver.verify_signature(req, [SECRET_OLD]), [SECRET_OLD])
        self.assertEqual(req.headers["webhook-id"], "order-1001")
        wait_until(lambda: get(self.server, "order-1001")[0] == 404, timeout=10,
                   what="the job finished after its 2xx")
        status, listed = call(self.server, "GET", "/v1/subscriptions/orders")
        self.assertEqual(status, 200)
        wait_until(lambda: call(self.server, "GET", "/v1/subscriptions/orders")[1]
                   ["instances"][0]["delivered"] == 1, timeout=10, what="delivered counted")

    def test_never_early_on_the_wall_clock(self):
        subscribe(self.server, "late", self.receiver.url(), ["t.late"], concurrency=20)
        run_at = int(time.time() * 1000) + 1500
        for i in range(20):
            add(self.server, "t.late", "j%d" % i, run_at_ms=run_at + i * 10)
        reqs = self.receiver.wait_for(20, timeout=15)
        for r in reqs:
            self.assertGreaterEqual(r.time * 1000, r.json["run_at_ms"], r.json)

    def test_misbehaving_receivers_neither_crash_nor_stall_the_server(self):
        for mode in ("garbage", "endless", "reset"):
            self.receiver.on("/" + mode, mode)
            subscribe(self.server, "bad-" + mode, self.receiver.url("/" + mode), ["t." + mode],
                      timeout_ms=2000)
            add(self.server, "t." + mode, "job-" + mode)
        # A healthy subscription is served meanwhile.
        subscribe(self.server, "good", self.receiver.url("/good"), ["t.good"])
        add(self.server, "t.good", "job-good")
        self.receiver.wait_for(1, timeout=10, path="/good")
        for mode in ("garbage", "endless", "reset"):
            def released(mode=mode):
                status, job = get(self.server, "job-" + mode)
                return status == 200 and job["state"] == "delayed" and job["last_error"]
            wait_until(released, timeout=15, what="job-%s released" % mode)
            self.assertEqual(get(self.server, "job-" + mode)[1]["attempts"], 1)
        self.assertEqual(call(self.server, "GET", "/healthz")[0], 200)
        self.assertIsNone(self.server.proc.poll())

    def test_an_instance_not_renewed_lapses_on_the_wall_clock(self):
        subscribe(self.server, "short", self.receiver.url(), ["t.short"], ttl_ms=1000)
        wait_until(lambda: call(self.server, "GET", "/v1/subscriptions/short")[0] == 404,
                   timeout=10, what="the instance lapsed")
        add(self.server, "t.short", "unpushed")
        status, job = get(self.server, "unpushed")
        self.assertEqual(job["state"], "ready")
        subscribe(self.server, "short", self.receiver.url(), ["t.short"], ttl_ms=60000)
        self.receiver.wait_for(1, timeout=10)

    def test_bad_subscriptions_are_refused_naming_the_field(self):
        cases = [
            ({"topics": ["t"], "url": "ftp://x/"}, "url"),
            ({"topics": ["t"], "url": "not a url"}, "url"),
            ({"topics": ["t"], "url": "http://127.0.0.1:1/", "concurrency": -1}, "concurrency"),
            ({"topics": ["t"], "url": "http://127.0.0.1:1/", "timeout_ms": 10 ** 12},
             "timeout_ms"),
            ({"topics": ["t"], "url": "http://127.0.0.1:1/", "secret": "hunter2"}, "secret"),
            ({"topics": [], "url": "http://127.0.0.1:1/"}, "topics"),
            ({"topics": ["t"], "url": "http://127.0.0.1:1/", "concurency": 5}, "concurency"),
        ]
        for body, field in cases:
            status, reply = call(self.server, "PUT", "/v1/subscriptions/x", body)
            self.assertEqual(status, 400, (body, reply))
            self.assertEqual(reply["error"]["code"], "invalid_argument", reply)
            self.assertIn(field, reply["error"]["message"], (body, reply))
        self.assertEqual(call(self.server, "GET", "/v1/subscriptions/x")[0], 404)


class DurableTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="delayq-push-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.receiver = Receiver()
        self.receiver.start()
        self.addCleanup(self.receiver.stop)

    def serve(self):
        s = Server("--data-dir", os.path.join(self.dir, "data"), "--shutdown-timeout", "1s")
        self.addCleanup(lambda: s.proc.poll() is None and s.stop())
        return s

    def test_a_restart_keeps_subscriptions(self):
        s = self.serve()
        subscribe(s, "orders", self.receiver.url(), ["order.close"], concurrency=3)
        self.assertEqual(s.stop(), 0)
        s = self.serve()
        status, listed = call(s, "GET", "/v1/subscriptions/orders")
        self.assertEqual(status, 200, listed)
        self.assertEqual(listed["instances"][0]["concurrency"], 3)
        add(s, "order.close", "after-restart")
        self.receiver.wait_for(1, timeout=10)

    def test_shutdown_gives_back_a_job_whose_request_is_in_flight(self):
        self.receiver.on("/stuck", "hang")
        s = self.serve()
        subscribe(s, "stuck", self.receiver.url("/stuck"), ["t.stuck"], timeout_ms=60000)
        add(s, "t.stuck", "held")
        self.receiver.wait_for(1, timeout=10, path="/stuck")
        started = time.monotonic()
        self.assertEqual(s.stop(), 0)
        self.assertLess(time.monotonic() - started, 8)  # the 1 s drain, not the 60 s timeout
        self.receiver.on("/stuck", 200)
        call_server = self.serve()
        self.receiver.wait_for(2, timeout=10, path="/stuck")
        wait_until(lambda: get(call_server, "held")[0] == 404, timeout=10,
                   what="the job pushed again and finished")


class TlsTest(unittest.TestCase):
    """https receivers: the certificate is verified, against the system's CAs
    or --push-ca-file's; a receiver whose certificate is not trusted gets
    nothing and the job is retried with the reason."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="delayq-push-tls-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.cert = os.path.join(self.dir, "cert.pem")
        key = os.path.join(self.dir, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                        "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                        "-keyout", key, "-out", self.cert], check=True, capture_output=True)
        self.received = []
        received = self.received

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert, key)
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.addCleanup(self.httpd.server_close)
        self.addCleanup(self.httpd.shutdown)
        self.url = "https://127.0.0.1:%d/" % self.httpd.server_address[1]

    def test_a_receiver_trusted_through_the_ca_file_gets_the_job(self):
        server = Server("--store", "memory", "--push-ca-file", self.cert)
        self.addCleanup(server.stop)
        subscribe(server, "tls", self.url, ["t.tls"])
        add(server, "t.tls", "secure-1")
        wait_until(lambda: len(self.received) == 1, timeout=10, what="the https push")
        self.assertEqual(self.received[0]["id"], "secure-1")
        wait_until(lambda: get(server, "secure-1")[0] == 404, timeout=10, what="finished")

    def test_an_untrusted_certificate_gets_nothing_and_the_job_says_why(self):
        server = Server("--store", "memory")  # the system's CAs: ours is not among them
        self.addCleanup(server.stop)
        subscribe(server, "tls", self.url, ["t.tls"])
        add(server, "t.tls", "refused-1")

        def released():
            status, job = get(server, "refused-1")
            return status == 200 and job["state"] == "delayed" and job["last_error"]
        wait_until(released, timeout=10, what="the job released")
        self.assertIn("certificate", get(server, "refused-1")[1]["last_error"])
        self.assertEqual(self.received, [])


class RedisTest(unittest.TestCase):
    """Two servers on one Redis share the subscriptions and the work: each job
    is pushed by one of them, once, and an instance's concurrency holds
    across both (its slots are counted in Redis)."""

    def test_two_servers_push_each_job_once_within_the_concurrency(self):
        redis_proc = RedisProcess()
        self.addCleanup(redis_proc.cleanup)
        servers = []
        for _ in range(2):
            s = Server("--store", "redis", "--redis", redis_proc.url, "--redis-prefix", "pt")
            self.addCleanup(s.stop)
            servers.append(s)
        receiver = Receiver()
        receiver.start()
        self.addCleanup(receiver.stop)
        receiver.on("/", {"status": 200, "delay": 0.05})
        # Registered through one server; the other reads it from Redis.
        subscribe(servers[0], "shared", receiver.url(), ["t.shared"], concurrency=4)
        wait_until(lambda: call(servers[1], "GET", "/v1/subscriptions/shared")[0] == 200,
                   timeout=10, what="the other server to see the subscription")
        for i in range(60):
            add(servers[i % 2], "t.shared", "s%d" % i)
        reqs = receiver.wait_for(60, timeout=30)
        ids = sorted(r.json["id"] for r in reqs)
        self.assertEqual(ids, sorted("s%d" % i for i in range(60)))  # each once
        for s in servers:
            wait_until(lambda s=s: call(s, "GET", "/v1/stats")[1]["jobs"] == 0, timeout=10,
                       what="every job finished")
        # Each request is answered 50 ms after it arrived, and a slot is taken
        # again only after its answer: no more than 4 overlap, over both servers.
        spans = sorted((r.time, r.time + 0.05) for r in reqs)
        most = max(sum(1 for a, b in spans if a <= t < b) for t, _ in spans)
        self.assertLessEqual(most, 4)
        self.assertEqual(len(receiver.received()), 60)  # and nothing pushed twice


if __name__ == "__main__":
    harness.main()
