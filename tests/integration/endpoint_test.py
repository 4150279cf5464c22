#!/usr/bin/env python3
"""delayq::Endpoint end to end (examples/service_endpoint.cc): the example
registers subscription "orders" with a real `delayq serve`, which POSTs due
jobs of "order.close" to it; no fake on either side. What the unit tests
(tests/endpoint/endpoint_test.cc) cannot show: the server and the library
agree on the registration, the job's JSON, the signature and the outcomes;
SIGTERM deregisters the instance.

    /usr/bin/python3 tests/integration/endpoint_test.py --binary build/bin/delayq

The example is found beside the binary (build/bin/delayq-example-service-endpoint).
"""
import http.client
import json
import os
import queue
import re
import signal
import subprocess
import threading
import unittest
import urllib.parse

import harness
from harness import Server, wait_until

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def call(server, method, path, body=None, token=None):
    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=10)
    try:
        headers = {"Authorization": "Bearer " + token} if token else {}
        data = None if body is None else json.dumps(body).encode()
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        raw = resp.read()
        return resp.status, (json.loads(raw) if raw else None)
    finally:
        conn.close()


def add(server, job_id, body, token=None, **fields):
    status, reply = call(server, "POST", "/v1/jobs",
                         {"topic": "order.close", "id": job_id, "body": body, **fields},
                         token=token)
    assert status in (200, 201), (status, reply)


def job(server, job_id, token=None):
    return call(server, "GET", "/v1/jobs/" + urllib.parse.quote(job_id, safe=""), token=token)


class Example:
    """The example process; its stdout lines are read by a thread into a queue."""

    def __init__(self, server, env=None):
        path = os.path.join(os.path.dirname(harness.BINARY), "delayq-example-service-endpoint")
        if not os.path.exists(path):
            raise AssertionError(f"{path} is not built (`make build` builds it)")
        e = harness.server_env({"DELAYQ_HTTP": "127.0.0.1:%d" % server.http_port, **(env or {})})
        self.proc = subprocess.Popen([path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=e)
        self.lines = queue.Queue()
        self.seen = []
        threading.Thread(target=self._read, daemon=True).start()
        first = self.next_line()
        m = re.fullmatch(r"serving orders at (http://127\.0\.0\.1:\d+/)", first)
        assert m, first + self.proc.stderr.read()
        self.url = m.group(1)

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def next_line(self, timeout=10):
        line = self.lines.get(timeout=timeout)
        assert line is not None, "the example ended: " + self.proc.stderr.read()
        self.seen.append(line)
        return line

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        rest = []
        while True:
            line = self.lines.get(timeout=10)
            if line is None:
                break
            rest.append(line)
        err = self.proc.stderr.read()
        self.proc.stdout.close()
        self.proc.stderr.close()
        return code, rest, err


class EndpointTest(unittest.TestCase):
    def start(self, server_args=(), env=None):
        self.server = Server("--store", "memory", *server_args)
        self.addCleanup(self.server.stop)
        self.example = Example(self.server, env)
        self.addCleanup(lambda: self.example.proc.stdout.closed or self.example.stop())

    def instances(self, token=None):
        status, reply = call(self.server, "GET", "/v1/subscriptions/orders", token=token)
        return reply["instances"] if status == 200 else []

    def test_registered_jobs_are_pushed_and_sigterm_deregisters(self):
        self.start()
        [inst] = self.instances()
        self.assertEqual(inst["url"], self.example.url)
        self.assertEqual(inst["topics"], ["order.close"])
        self.assertEqual(inst["concurrency"], 4)
        self.assertEqual(inst["ttl_ms"], 30000)

        add(self.server, "order-1", '{"order":1}')
        self.assertEqual(self.example.next_line(), 'closed order-1 (attempt 1): {"order":1}')
        wait_until(lambda: job(self.server, "order-1")[0] == 404, timeout=10,
                   what="order-1 finished from the 200")

        # A handler's Bury is the server's bury: the dead letters.
        add(self.server, "order-bad", "not json")
        wait_until(lambda: job(self.server, "order-bad")[1].get("state") == "buried",
                   timeout=10, what="order-bad buried")
        self.assertIn("cannot parse the order", job(self.server, "order-bad")[1]["last_error"])

        # A handler's exception is a retry with the subscription's backoff (1 s).
        add(self.server, "order-2", '{"order":2,"busy":true}')
        self.assertEqual(self.example.next_line(timeout=15),
                         'closed order-2 (attempt 2): {"order":2,"busy":true}')

        code, rest, err = self.example.stop()
        self.assertEqual(code, 0, err)
        self.assertEqual(rest, ["stopped: succeeded 2, retried 1, buried 1"])
        self.assertEqual(self.instances(), [])
        # With no instance, a job waits in the queue.
        add(self.server, "order-3", '{"order":3}')
        self.assertEqual(job(self.server, "order-3")[1]["state"], "ready")

    def test_signed_requests_with_a_token_protected_server(self):
        self.start(server_args=("--auth-token", "t0ken"),
                   env={"DELAYQ_AUTH_TOKEN": "t0ken", "DELAYQ_SECRET": SECRET})
        [inst] = self.instances(token="t0ken")
        self.assertTrue(inst["signed"])
        add(self.server, "order-9", '{"order":9}', token="t0ken")
        self.assertEqual(self.example.next_line(), 'closed order-9 (attempt 1): {"order":9}')
        wait_until(lambda: job(self.server, "order-9", token="t0ken")[0] == 404, timeout=10,
                   what="order-9 finished")

    def test_an_unsigned_request_to_a_signed_endpoint_is_refused(self):
        self.start(env={"DELAYQ_SECRET": SECRET})
        conn = http.client.HTTPConnection("127.0.0.1", urllib.parse.urlsplit(self.example.url).port,
                                          timeout=10)
        conn.request("POST", "/", body=json.dumps({"id": "x", "topic": "order.close",
                                                   "body": "{}"}))
        resp = conn.getresponse()
        self.assertEqual(resp.status, 401)
        resp.read()
        conn.close()
        self.assertTrue(self.example.lines.empty())


if __name__ == "__main__":
    harness.main()
