#!/usr/bin/env python3
"""Black-box tests of `delayq serve` over HTTP/JSON (SPEC §6) and the seed's
`POST /command` protocol, with http.client and raw sockets: every endpoint,
receipts, long-poll, auth, limits, adversarial input. Each test class starts
its own server on free loopback ports and ends it by PID.

    /usr/bin/python3 tests/integration/http_server_test.py --binary build/bin/delayq
"""
import base64
import http.client
import json
import socket
import subprocess
import threading
import time
import unittest
import urllib.parse

import harness
from harness import Server, recv_all, wait_until


class Client:
    """One keep-alive HTTP connection."""

    def __init__(self, port, token=None):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        self.token = token

    def call(self, method, path, body=None, raw=None, headers=None):
        h = dict(headers or {})
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        data = raw if raw is not None else (json.dumps(body) if body is not None else None)
        if data is not None:
            h.setdefault("Content-Type", "application/json")
        self.conn.request(method, path, body=data, headers=h)
        resp = self.conn.getresponse()
        text = resp.read()
        ctype = resp.getheader("Content-Type", "")
        value = json.loads(text) if ctype.startswith("application/json") else text
        return resp.status, value

    def close(self):
        self.conn.close()


class HttpApiTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server("--max-body", "4096")
        cls.c = Client(cls.server.http_port)

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        assert cls.server.stop() == 0

    def call(self, *a, **kw):
        return self.c.call(*a, **kw)

    def assertError(self, result, status, code, message_part=""):
        got_status, body = result
        self.assertEqual(got_status, status, body)
        self.assertEqual(body["error"]["code"], code, body)
        self.assertIn(message_part, body["error"]["message"])

    def test_healthz(self):
        self.assertEqual(self.call("GET", "/healthz"),
                         (200, {"status": "ok", "version": VERSION}))

    def test_add_reserve_finish_round_trip(self):
        st, added = self.call("POST", "/v1/jobs", {"topic": "rt", "id": "order-1",
                                                   "body": "close it", "ttr_ms": 5000,
                                                   "max_attempts": 3})
        self.assertEqual(st, 201)
        self.assertEqual(added["id"], "order-1")
        self.assertEqual(added["state"], "ready")
        st, got = self.call("POST", "/v1/reserve", {"topics": ["rt"]})
        self.assertEqual(st, 200)
        [job] = got["jobs"]
        self.assertEqual((job["id"], job["topic"], job["body"], job["attempts"], job["ttr_ms"],
                          job["max_attempts"]), ("order-1", "rt", "close it", 1, 5000, 3))
        st, info = self.call("GET", "/v1/jobs/order-1")
        self.assertEqual((st, info["state"], info["receipt"]), (200, "reserved", job["receipt"]))
        self.assertEqual(self.call("POST", "/v1/jobs/order-1/finish",
                                   {"receipt": job["receipt"]}), (200, {"ok": True}))
        self.assertError(self.call("GET", "/v1/jobs/order-1"), 404, "not_found")

    def test_generated_ids_and_delays(self):
        before = int(time.time() * 1000)
        st, added = self.call("POST", "/v1/jobs", {"topic": "gen", "delay_ms": 60000})
        self.assertEqual((st, added["state"]), (201, "delayed"))
        self.assertEqual(len(added["id"]), 24)
        self.assertGreaterEqual(added["run_at_ms"], before + 60000)
        st, added = self.call("POST", "/v1/jobs", {"topic": "gen", "run_at_ms": before - 5000})
        self.assertEqual((st, added["state"]), (201, "ready"))  # a past time is due now

    def test_body_rules(self):
        # A string is its content; any other JSON value is its compact text.
        self.call("POST", "/v1/jobs", {"topic": "b", "id": "b1", "body": {"order": 7, "x": [1, 2]}})
        self.assertEqual(self.call("GET", "/v1/jobs/b1")[1]["body"], '{"order":7,"x":[1,2]}')
        self.call("POST", "/v1/jobs", {"topic": "b", "id": "b2", "body": "héllo \"q\"\n"})
        self.assertEqual(self.call("GET", "/v1/jobs/b2")[1]["body"], "héllo \"q\"\n")
        # Bytes travel as base64 both ways.
        raw = bytes(range(256))
        self.call("POST", "/v1/jobs", {"topic": "b", "id": "b3",
                                       "body_base64": base64.b64encode(raw).decode()})
        info = self.call("GET", "/v1/jobs/b3")[1]
        self.assertNotIn("body", info)
        self.assertEqual(base64.b64decode(info["body_base64"]), raw)
        self.assertError(self.call("POST", "/v1/jobs", {"topic": "b", "body": "x",
                                                        "body_base64": "eA=="}),
                         400, "invalid_argument", "body")
        self.assertError(self.call("POST", "/v1/jobs", {"topic": "b", "body_base64": "!!"}),
                         400, "invalid_argument", "body_base64")

    def test_errors_name_the_field_and_change_nothing(self):
        self.call("POST", "/v1/jobs", {"topic": "err", "id": "e1", "body": "orig"})
        cases = [
            ({"topic": "err", "id": "e1"}, 409, "exists", ""),
            ({"id": "x"}, 400, "invalid_argument", "topic"),
            ({"topic": "bad topic!"}, 400, "invalid_argument", "topic"),
            ({"topic": "err", "delay_ms": -1}, 400, "invalid_argument", "delay_ms"),
            ({"topic": "err", "delay_ms": "10"}, 400, "invalid_argument", "delay_ms"),
            ({"topic": "err", "delay_ms": 1.5}, 400, "invalid_argument", "delay_ms"),
            ({"topic": "err", "ttr_ms": 0}, 400, "invalid_argument", "ttr_ms"),
            ({"topic": "err", "priority": 4294967296}, 400, "invalid_argument", "priority"),
            ({"topic": "err", "delay": 5}, 400, "invalid_argument", "use delay_ms"),
            ({"topic": "err", "dealy_ms": 5}, 400, "invalid_argument",
             "unknown field 'dealy_ms' (did you mean 'delay_ms'?)"),
            ({"topic": "err", "replace": "yes"}, 400, "invalid_argument", "replace"),
            ({"topic": "err", "body": "x" * 5000}, 413, "too_large", "body"),
            ({"topic": 7}, 400, "invalid_argument", "topic"),
        ]
        for body, status, code, part in cases:
            with self.subTest(body=str(body)[:60]):
                self.assertError(self.call("POST", "/v1/jobs", body), status, code, part)
        # "request", not "body" (a job's field), and where parsing stopped.
        any_value = "expected a value (an object, array, string, number, true, false or null)"
        for raw, message in [
                ('{"topic":', "request: not valid JSON at byte 9: expected a value, but the "
                              "request ended there"),
                ('[1,2]', "request: expected a JSON object, got an array"),
                ('"str"', "request: expected a JSON object, got a string"),
                ('nul', f"request: not valid JSON at byte 0: {any_value}, found 'n'"),
                ('{"topic":"a"}}', "request: not valid JSON at byte 13: text after the JSON "
                                   "value, found '}'"),
                ('\x00\xff', f"request: not valid JSON at byte 0: {any_value}, found byte 0x00")]:
            with self.subTest(raw=raw):
                st, got = self.call("POST", "/v1/jobs", raw=raw.encode("latin-1"))
                self.assertEqual((st, got["error"]["code"], got["error"]["message"]),
                                 (400, "invalid_argument", message))
        info = self.call("GET", "/v1/jobs/e1")[1]
        self.assertEqual((info["state"], info["body"], info["attempts"]), ("ready", "orig", 0))

    def test_force_and_durations(self):
        st, added = self.call("POST", "/v1/jobs",
                              {"topic": "frc", "id": "f1", "delay": "1h", "ttr": "90s"})
        self.assertEqual((st, added["state"]), (201, "delayed"))
        info = self.call("GET", "/v1/jobs/f1")[1]
        self.assertEqual(info["ttr_ms"], 90000)
        self.assertEqual(info["run_at_ms"] - info["created_at_ms"], 3600000)
        self.assertError(self.call("POST", "/v1/jobs", {"topic": "frc", "delay": 5}),
                         400, "invalid_argument", "use delay_ms")
        self.assertError(self.call("POST", "/v1/jobs", {"topic": "frc", "run_at_ms": 1795659700}),
                         400, "invalid_argument",
                         "run_at_ms: 1795659700 is before 2001-09-09 — it looks like seconds; "
                         "give milliseconds (1795659700000)")
        self.assertEqual(self.call("POST", "/v1/jobs/f1/kick")[0], 200)
        [job] = self.call("POST", "/v1/reserve", {"topics": ["frc"], "wait": "1s"})[1]["jobs"]
        self.assertEqual(job["id"], "f1")
        for action in ("finish", "release", "touch", "bury"):
            with self.subTest(action=action):
                self.assertError(self.call("POST", f"/v1/jobs/f1/{action}", {}), 400,
                                 "invalid_argument", "receipt: required")
                self.assertError(self.call("POST", f"/v1/jobs/f1/{action}", {"receipt": "abc"}),
                                 400, "invalid_argument",
                                 "receipt: expected the 24 hex digits a reserve hands out")
        self.assertEqual(self.call("GET", "/v1/jobs/f1")[1]["receipt"], job["receipt"])
        self.assertEqual(self.call("POST", "/v1/jobs/f1/finish", {"force": True}),
                         (200, {"ok": True, "forced": True}))
        self.assertError(self.call("GET", "/v1/jobs/f1"), 404, "not_found")

    def test_receipts_and_job_actions(self):
        self.call("POST", "/v1/jobs", {"topic": "act", "id": "a1", "max_attempts": 5})
        [job] = self.call("POST", "/v1/reserve", {"topics": ["act"]})[1]["jobs"]
        self.assertError(self.call("POST", "/v1/jobs/a1/finish", {"receipt": "0" * 24}),
                         409, "stale_receipt")
        self.assertEqual(self.call("POST", "/v1/jobs/a1/touch", {"receipt": job["receipt"]})[0],
                         200)
        self.assertEqual(self.call("POST", "/v1/jobs/a1/release",
                                   {"receipt": job["receipt"], "delay_ms": 60000,
                                    "error": "smtp down"})[0], 200)
        info = self.call("GET", "/v1/jobs/a1")[1]
        self.assertEqual((info["state"], info["last_error"]), ("delayed", "smtp down"))
        self.assertError(self.call("POST", "/v1/jobs/a1/finish", {"receipt": job["receipt"]}),
                         409, "stale_receipt")
        self.assertEqual(self.call("POST", "/v1/jobs/a1/kick")[0], 200)
        [job] = self.call("POST", "/v1/reserve", {"topics": ["act"]})[1]["jobs"]
        self.assertEqual(job["attempts"], 2)
        self.assertEqual(self.call("POST", "/v1/jobs/a1/bury",
                                   {"receipt": job["receipt"], "reason": "poison"})[0], 200)
        st, peek = self.call("GET", "/v1/topics/act/peek?state=buried")
        self.assertEqual((st, peek["id"], peek["last_error"]), (200, "a1", "poison"))
        self.assertEqual(self.call("POST", "/v1/topics/act/kick?n=10"), (200, {"kicked": 1}))
        self.assertError(self.call("POST", "/v1/jobs/a1/finish"), 400, "invalid_argument",
                         "receipt: required")
        self.assertError(self.call("POST", "/v1/jobs/a1/finish", {"force": True}), 409,
                         "not_reserved")
        self.assertEqual(self.call("DELETE", "/v1/jobs/a1"), (200, {"ok": True}))
        self.assertError(self.call("DELETE", "/v1/jobs/a1"), 404, "not_found")
        self.assertError(self.call("POST", "/v1/jobs/a1/explode"), 404, "not_found", "explode")

    def test_ids_with_reserved_characters(self):
        job_id = "orders/42?x=1 #é"
        self.call("POST", "/v1/jobs", {"topic": "ids", "id": job_id})
        path = "/v1/jobs/" + urllib.parse.quote(job_id, safe="")
        self.assertEqual(self.call("GET", path)[1]["id"], job_id)
        self.assertError(self.call("GET", "/v1/jobs/%zz"), 400, "invalid_argument", "percent")

    def test_topics_stats_metrics_pause(self):
        self.call("POST", "/v1/jobs", {"topic": "tp", "id": "t1"})
        self.call("POST", "/v1/jobs", {"topic": "tp", "id": "t2", "delay_ms": 60000})
        names = [t["name"] for t in self.call("GET", "/v1/topics")[1]["topics"]]
        self.assertIn("tp", names)
        st, t = self.call("GET", "/v1/topics/tp")
        self.assertEqual((st, t["ready"], t["delayed"], t["paused"]), (200, 1, 1, False))
        self.assertEqual(self.call("POST", "/v1/topics/tp/pause?ms=0")[0], 200)
        self.assertTrue(self.call("GET", "/v1/topics/tp")[1]["paused"])
        self.assertEqual(self.call("POST", "/v1/reserve", {"topics": ["tp"]}), (200, {"jobs": []}))
        self.assertEqual(self.call("POST", "/v1/topics/tp/resume")[0], 200)
        self.assertEqual(self.call("GET", "/v1/topics/tp/peek?state=delayed")[1]["id"], "t2")
        self.assertError(self.call("GET", "/v1/topics/tp/peek?state=reserved"),
                         400, "invalid_argument", "state")
        self.assertError(self.call("GET", "/v1/topics/bad!/peek"), 400, "invalid_argument")
        st, stats = self.call("GET", "/v1/stats")
        self.assertEqual(st, 200)
        self.assertGreaterEqual(stats["added"], 2)
        st, text = self.call("GET", "/metrics")
        self.assertEqual(st, 200)
        self.assertIn(b'delayq_topic_jobs{topic="tp",state="delayed"} 1', text)
        self.assertIn(b"# TYPE delayq_added_total counter", text)
        self.assertIn(b'delayq_due_lateness_seconds_bucket{le="+Inf"}', text)
        self.assertIn("due_lateness_p99_us", stats)

    def test_head_is_get_without_a_body(self):
        s = socket.create_connection(("127.0.0.1", self.server.http_port), timeout=5)
        s.sendall(b"HEAD /healthz HTTP/1.1\r\n\r\nHEAD /v1/jobs HTTP/1.1\r\n\r\n"
                  b"GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n")
        data = recv_all(s)
        s.close()
        head_ok, head_405, get_ok = data.split(b"HTTP/1.1 ")[1:]
        self.assertTrue(head_ok.startswith(b"200") and head_ok.endswith(b"\r\n\r\n"), head_ok)
        # the length GET's body would have
        self.assertIn(b"Content-Length: %d\r\n" % len(HEALTHZ_OK), head_ok)
        self.assertTrue(head_405.startswith(b"405") and head_405.endswith(b"\r\n\r\n"))
        self.assertTrue(get_ok.endswith(HEALTHZ_OK))

    def test_bad_query_encoding_is_an_error_not_a_default(self):
        self.assertError(self.call("GET", "/v1/topics/q/peek?state=%zz"),
                         400, "invalid_argument", "query")
        self.assertError(self.call("POST", "/v1/topics/q/kick?n=%zz"),
                         400, "invalid_argument", "query")

    def test_methods_and_unknown_endpoints(self):
        self.assertError(self.call("GET", "/v1/jobs"), 405, "invalid_argument", "POST")
        self.assertError(self.call("PUT", "/v1/stats"), 405, "invalid_argument")
        self.assertError(self.call("GET", "/v2/nothing"), 404, "not_found", "/v2/nothing")

    def test_long_poll_gets_a_job_that_falls_due_never_early(self):
        waiter = Client(self.server.http_port)
        got = {}

        def wait():
            got["r"] = waiter.call("POST", "/v1/reserve", {"topics": ["lp"], "wait_ms": 5000})
            got["at"] = time.time() * 1000

        t = threading.Thread(target=wait)
        t.start()
        wait_until(lambda: self.call("GET", "/v1/topics/lp")[1]["waiting"] == 1,
                   what="the reserve to park")
        added = self.call("POST", "/v1/jobs", {"topic": "lp", "delay_ms": 200})[1]
        t.join(timeout=10)
        status, body = got["r"]
        self.assertEqual(body["jobs"][0]["id"], added["id"])
        self.assertGreaterEqual(got["at"], added["run_at_ms"])  # never early
        self.assertLess(got["at"], added["run_at_ms"] + 2000)   # not a poll later
        waiter.close()

    def test_a_head_request_does_not_strip_a_waiting_reserves_answer(self):
        waiter = Client(self.server.http_port)
        got = {}

        def wait():
            got["r"] = waiter.call("POST", "/v1/reserve", {"topics": ["headrace"],
                                                           "wait_ms": 5000})

        t = threading.Thread(target=wait)
        t.start()
        wait_until(lambda: self.call("GET", "/v1/topics/headrace")[1]["waiting"] == 1,
                   what="the reserve to park")
        s = socket.create_connection(("127.0.0.1", self.server.http_port), timeout=5)
        s.sendall(b"HEAD /healthz HTTP/1.1\r\nConnection: close\r\n\r\n")
        recv_all(s)
        s.close()
        self.call("POST", "/v1/jobs", {"topic": "headrace", "id": "hr-1", "body": "intact"})
        t.join(timeout=10)
        status, body = got["r"]
        self.assertEqual((status, body["jobs"][0]["body"]), (200, "intact"))
        waiter.close()

    def test_reserve_wait_runs_out_empty(self):
        self.assertEqual(self.call("POST", "/v1/reserve", {"topics": ["none"], "wait_ms": 30}),
                         (200, {"jobs": []}))
        self.assertError(self.call("POST", "/v1/reserve", {"topics": "none"}),
                         400, "invalid_argument", "topics")
        self.assertError(self.call("POST", "/v1/reserve", {"topics": ["x"], "count": 0}),
                         400, "invalid_argument", "count")

    def test_seed_command_protocol(self):
        cmd = lambda **b: self.call("POST", "/command", b)
        st, r = cmd(command="add", topic="orderclose", id="ordercloseorderNo1", delay=0,
                    TTR=60, body={"order": "No1"})
        self.assertEqual((st, r), (200, {"success": True, "error": None,
                                         "id": "ordercloseorderNo1", "value": None}))
        st, r = cmd(command="add", topic="orderclose", id="ordercloseorderNo1", delay=0, TTR=60,
                    body="x")
        self.assertEqual((st, r["success"]), (200, False))
        self.assertIn("exists", r["error"])
        st, r = cmd(command="pop", topic="orderclose")
        self.assertEqual(r, {"success": True, "error": None, "id": "ordercloseorderNo1",
                             "value": '{"order":"No1"}'})
        self.assertEqual(cmd(command="finish", id="ordercloseorderNo1")[1]["success"], True)
        self.assertEqual(cmd(command="pop", topic="orderclose", timeout=0.05)[1],
                         {"success": True, "error": None, "id": None, "value": None})
        self.assertEqual(cmd(command="delete", id="ordercloseorderNo1")[1]["success"], False)
        cmd(command="add", topic="oc", id="later", delay=30, TTR=1, body="b")
        info = self.call("GET", "/v1/jobs/later")[1]
        self.assertEqual((info["state"], info["ttr_ms"]), ("delayed", 1000))
        self.assertEqual(cmd(command="delete", id="later")[1]["success"], True)
        self.assertFalse(cmd(command="fly")[1]["success"])
        self.assertFalse(cmd(command="add", topic="oc", id="neg", delay=-1)[1]["success"])

    def test_pipelined_requests_are_answered_in_order_in_one_write(self):
        def req(i):
            body = b'{"topic":"pipe","id":"pp-%d"}' % i
            return b"POST /v1/jobs HTTP/1.1\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        payload = b"".join(req(i) for i in range(50))
        payload += b"GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n"
        s = socket.create_connection(("127.0.0.1", self.server.http_port), timeout=5)
        s.sendall(payload)
        data = recv_all(s)
        s.close()
        self.assertEqual(data.count(b"HTTP/1.1 201 Created"), 50)
        self.assertTrue(data.rstrip().endswith(HEALTHZ_OK))
        self.assertLess(data.index(b'"pp-3"'), data.index(b'"pp-4"'))

    def test_http10_expect_continue_and_chunked(self):
        s = socket.create_connection(("127.0.0.1", self.server.http_port), timeout=5)
        s.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
        data = recv_all(s)  # HTTP/1.0 without keep-alive: closed after the answer
        self.assertTrue(data.startswith(b"HTTP/1.0 200"), data)
        s.close()
        s = socket.create_connection(("127.0.0.1", self.server.http_port), timeout=5)
        body = b'{"topic":"chunky","id":"ch1","body":"abc"}'
        s.sendall(b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body))
        self.assertEqual(s.recv(100), b"HTTP/1.1 100 Continue\r\n\r\n")
        s.sendall(body)
        self.assertIn(b"201 Created", s.recv(1000))
        s.sendall(b"POST /v1/jobs HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
                  b"Connection: close\r\n\r\n"
                  b"10\r\n{\"topic\":\"chunky\r\n13\r\n\",\"id\":\"ch2\",\"x\":1}\r\n0\r\n\r\n")
        data = recv_all(s)
        self.assertIn(b"400 Bad Request", data)  # decoded and parsed: "x" is unknown
        self.assertIn(b"unknown field 'x'", data)
        s.close()


class AdversarialTest(unittest.TestCase):
    """Bad input gets a clear error, never a crash, never a changed job."""

    @classmethod
    def setUpClass(cls):
        cls.server = Server("--max-body", "1024", "--max-header-bytes", "2048",
                            "--request-timeout-ms", "1000", "--idle-timeout-ms", "2000",
                            "--max-connections", "300")
        cls.c = Client(cls.server.http_port)
        cls.c.call("POST", "/v1/jobs", {"topic": "keep", "id": "k1", "body": "kept"})

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        assert cls.server.stop() == 0

    def tearDown(self):
        # After every attack: the server answers and the stored job is intact.
        c = Client(self.server.http_port)
        st, info = c.call("GET", "/v1/jobs/k1")
        c.close()
        self.assertEqual((st, info["body"], info["state"]), (200, "kept", "ready"))

    def raw(self, payload, shutdown=False):
        s = socket.create_connection(("127.0.0.1", self.server.http_port), timeout=5)
        s.sendall(payload)
        if shutdown:
            s.shutdown(socket.SHUT_WR)
        data = recv_all(s)
        s.close()
        return data

    def test_oversize_headers_get_431(self):
        data = self.raw(b"GET /healthz HTTP/1.1\r\nX-Big: " + b"a" * 4000 + b"\r\n\r\n")
        self.assertTrue(data.startswith(b"HTTP/1.1 431"), data[:100])

    def test_oversize_body_gets_413_before_it_is_read(self):
        data = self.raw(b"POST /v1/jobs HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n")
        self.assertTrue(data.startswith(b"HTTP/1.1 413"), data[:100])
        self.assertIn(b"too_large", data)

    def test_binary_garbage_gets_400(self):
        data = self.raw(bytes(range(256)) * 4 + b"\r\n\r\n")
        self.assertTrue(data.startswith(b"HTTP/1.1 400"), data[:100])

    def test_half_sent_request_completes(self):
        s = socket.create_connection(("127.0.0.1", self.server.http_port), timeout=5)
        s.sendall(b"GET /heal")
        s.sendall(b"thz HTTP/1.1\r\nHo")
        s.sendall(b"st: x\r\n\r\n")
        self.assertIn(HEALTHZ_OK, s.recv(1000))
        s.close()

    def test_slow_request_is_cut_with_408(self):
        s = socket.create_connection(("127.0.0.1", self.server.http_port), timeout=5)
        s.sendall(b"POST /v1/jobs HTTP/1.1\r\nContent-Length: 100\r\n\r\n{\"topic\"")
        data = recv_all(s)  # the server gives up after --request-timeout-ms
        s.close()
        self.assertTrue(data.startswith(b"HTTP/1.1 408"), data[:100])

    def test_a_busy_pipelining_client_is_not_cut_by_the_request_timeout(self):
        # Every write completes one request and begins the next, for twice
        # the request timeout: a request is always half-received, and yet
        # the client makes progress all along.
        s = socket.create_connection(("127.0.0.1", self.server.http_port), timeout=5)
        s.sendall(b"GET /heal")
        start = time.monotonic()
        answered = 0
        while time.monotonic() - start < 2.0:
            s.sendall(b"thz HTTP/1.1\r\n\r\nGET /heal")
            data = b""
            while not data.endswith(HEALTHZ_OK):
                chunk = s.recv(4096)
                self.assertNotEqual(chunk, b"", "closed after %d answers" % answered)
                data += chunk
            self.assertNotIn(b"408", data)
            answered += 1
        s.close()

    def test_idle_connection_is_closed(self):
        s = socket.create_connection(("127.0.0.1", self.server.http_port), timeout=5)
        self.assertEqual(recv_all(s), b"")  # closed by the server after --idle-timeout-ms
        s.close()

    def test_flood_of_idle_connections_is_refused_past_the_limit(self):
        socks = []
        try:
            for _ in range(310):
                socks.append(socket.create_connection(("127.0.0.1", self.server.http_port)))
            # Those past --max-connections are answered 503 and closed; the
            # rest stay open and idle while real clients are still served.
            socks[-1].settimeout(5)
            self.assertIn(b"503", recv_all(socks[-1]))
        finally:
            for s in socks:
                s.close()
        # The server sees the closes when it next reads them: until then it
        # is still at its limit and answers a new connection 503, as it must.
        # Wait (bounded) until it takes connections again.
        def served():
            c = Client(self.server.http_port)
            try:
                return c.call("GET", "/healthz")[0] == 200
            finally:
                c.close()
        wait_until(served, timeout=10, what="the server serving again after the flood",
                   ignore=(OSError, http.client.HTTPException))

    def test_unknown_method_and_absurd_target(self):
        data = self.raw(b"BREW /pot HTTP/1.1\r\nConnection: close\r\n\r\n")
        self.assertTrue(data.startswith(b"HTTP/1.1 404") or data.startswith(b"HTTP/1.1 405")
                        or data.startswith(b"HTTP/1.1 400"), data[:100])
        data = self.raw(b"GET /" + b"%" * 1500 + b" HTTP/1.1\r\nConnection: close\r\n\r\n")
        self.assertTrue(data.startswith(b"HTTP/1.1 400"), data[:100])

    def test_wrong_json_types_everywhere(self):
        c = Client(self.server.http_port)
        for path, body in [("/v1/jobs/k1/finish", {"receipt": 5}),
                           ("/v1/jobs/k1/release", {"delay_ms": "soon"}),
                           ("/v1/reserve", {"topics": [1, 2]}),
                           ("/v1/topics/keep/pause", {"ms": -1}),
                           ("/command", {"command": 5})]:
            with self.subTest(path=path):
                st, r = c.call("POST", path, body)
                if path == "/command":
                    self.assertFalse(r["success"])
                else:
                    self.assertEqual(st, 400, r)
        c.close()


class ConnectionLimitsTest(unittest.TestCase):
    """Limits that must not hurt well-behaved clients."""

    @classmethod
    def setUpClass(cls):
        cls.server = Server("--idle-timeout-ms", "1000", "--max-output-bytes", "100000",
                            "--max-body", "60000")

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0

    def test_a_long_poll_longer_than_the_idle_timeout_keeps_its_connection(self):
        c = Client(self.server.http_port)
        self.assertEqual(c.call("POST", "/v1/reserve", {"topics": ["idle"], "wait_ms": 2000}),
                         (200, {"jobs": []}))
        # The same connection, right away: the wait was not idleness.
        self.assertEqual(c.call("GET", "/healthz")[0], 200)
        c.close()

    def test_pipelined_replies_beyond_the_output_limit_meet_backpressure_not_a_drop(self):
        c = Client(self.server.http_port)
        c.call("POST", "/v1/jobs", {"topic": "big", "id": "big-1", "body": "x" * 50000})
        c.close()
        n = 40  # 40 x 50 KB of replies: 20 times --max-output-bytes
        s = socket.create_connection(("127.0.0.1", self.server.http_port), timeout=10)
        s.sendall(b"GET /v1/jobs/big-1 HTTP/1.1\r\n\r\n" * (n - 1) +
                  b"GET /v1/jobs/big-1 HTTP/1.1\r\nConnection: close\r\n\r\n")
        data = recv_all(s)
        s.close()
        self.assertEqual(data.count(b"HTTP/1.1 200 OK"), n)
        self.assertNotIn("unread replies", "".join(self.server.log))


class AuthTest(unittest.TestCase):
    def test_bearer_token_is_required_except_for_healthz(self):
        server = Server("--auth-token", "s3cret")
        try:
            anon = Client(server.http_port)
            st, body = anon.call("POST", "/v1/jobs", {"topic": "a"})
            self.assertEqual((st, body["error"]["code"]), (401, "unauthorized"))
            self.assertEqual(anon.call("GET", "/healthz")[0], 200)
            wrong = Client(server.http_port, token="nope")
            self.assertEqual(wrong.call("GET", "/v1/stats")[0], 401)
            ok = Client(server.http_port, token="s3cret")
            self.assertEqual(ok.call("POST", "/v1/jobs", {"topic": "a"})[0], 201)
            for c in (anon, wrong, ok):
                c.close()
        finally:
            self.assertEqual(server.stop(), 0)


class ShutdownTest(unittest.TestCase):
    SHUTTING_DOWN = ("shutting down: the server is stopping; reserve again on another server, "
                     "or on this one once it is back")

    def test_sigterm_answers_waiting_reserves_shutting_down_not_no_job(self):
        """A reserve that SIGTERM cuts short must not read as "no job" (200
        {"jobs":[]}, a nil array), or a worker polls a server going away: HTTP
        503 with Retry-After and Connection: close, RESP -UNAVAILABLE, the
        seed's pop success false; each message begins "shutting down"."""
        server = Server()
        requests = {
            "http": b"POST /v1/reserve HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\n"
                    b'{"topics":["never"],"wait_ms":30000}    ',
            "pop": b"POST /command HTTP/1.1\r\nHost: x\r\nContent-Length: 49\r\n\r\n"
                   b'{"command":"pop","topic":"never","timeout":30}   ',
        }
        socks = {}
        for name, request in requests.items():
            socks[name] = socket.create_connection(("127.0.0.1", server.http_port), timeout=10)
            socks[name].sendall(request)
        socks["resp"] = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        socks["resp"].sendall(b"RESERVE TIMEOUT 30000 FROM never\r\n")
        probe = Client(server.http_port)
        wait_until(lambda: probe.call("GET", "/v1/stats")[1]["waiting"] == 3,
                   what="the three reserves to park")
        probe.close()
        self.assertEqual(server.stop(), 0)
        got = {name: recv_all(s) for name, s in socks.items()}
        for s in socks.values():
            s.close()

        head, _, body = got["http"].partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        self.assertEqual(lines[0], "HTTP/1.1 503 Service Unavailable")
        self.assertIn("Retry-After: 1", lines)
        self.assertIn("Connection: close", lines)
        self.assertEqual(json.loads(body),
                         {"error": {"code": "unavailable", "message": self.SHUTTING_DOWN}})

        head, _, body = got["pop"].partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 200 OK"), head)
        self.assertIn(b"Connection: close", head)
        self.assertEqual(json.loads(body), {"success": False,
                                            "error": "unavailable: " + self.SHUTTING_DOWN,
                                            "id": None, "value": None})

        self.assertEqual(got["resp"], b"-UNAVAILABLE " + self.SHUTTING_DOWN.encode() + b"\r\n")


def _versions(args):
    """What GET /healthz answers a healthy server: its version is the binary's."""
    global VERSION, HEALTHZ_OK
    VERSION = subprocess.run([harness.BINARY, "--version"], capture_output=True, text=True,
                             check=True).stdout.split()[-1]
    HEALTHZ_OK = b'{"status":"ok","version":"%s"}' % VERSION.encode()


if __name__ == "__main__":
    harness.main(setup=_versions)
