#!/usr/bin/env python3
"""Black-box tests of the `delayq` client subcommands (add, reserve, finish, ...)
against a real `delayq serve`: every subcommand is run as a subprocess, its
text and --json output and its exit code checked. Each test class starts its
own server on a free loopback port and ends it by PID. Nothing sleeps to wait
for time: the one wait (a job falling due) is the CLI's own long-poll.

    /usr/bin/python3 tests/integration/cli_test.py --binary build/bin/delayq

Exit codes under test (src/cli/README.md): 0 ok, 1 server error, 2 usage,
3 nothing there, 4 cannot talk to the server.
"""
import base64
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import unittest

import redis

import harness
from harness import Server, closed_port, wait_until

OK, SERVER_ERROR, USAGE, EMPTY, UNAVAILABLE = 0, 1, 2, 3, 4

# wire::kDeliveryFields (src/wire/fields.h) in table order: what a reserve
# hands out. RESERVE and PEEK send the first five, or all of them.
DELIVERY_FIELDS = ["id", "topic", "body", "receipt", "attempts", "ttr_ms", "priority",
                   "run_at_ms", "reserved_until_ms", "max_attempts"]
NO_RECEIPT = ("--receipt is required (the receipt from 'delayq reserve'); "
              "--force acts by id alone\n")


def run_cli(*args, server=None, input=None, env=None, timeout=30):
    """Runs `delayq ARGS` with DELAYQ_SERVER pointing at `server`; stdout
    and stderr as bytes."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("DELAYQ_")}
    if server is not None:
        e["DELAYQ_SERVER"] = server.address
    e.update(env or {})
    return subprocess.run([harness.BINARY, *[str(a) for a in args]], input=input, env=e,
                          capture_output=True, timeout=timeout)


def fields(stdout):
    """Human output `key: value` lines -> dict."""
    out = {}
    for line in stdout.decode().splitlines():
        key, _, value = line.partition(":")
        out[key] = value.strip()
    return out


def blocks(stdout):
    """Human output of several jobs, separated by blank lines -> dicts."""
    return [fields(b.encode()) for b in stdout.decode().split("\n\n") if b.strip()]


class CliTestBase(unittest.TestCase):
    server_args = ()

    @classmethod
    def setUpClass(cls):
        cls.server = Server(*cls.server_args)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def cli(self, *args, **kw):
        kw.setdefault("server", self.server)
        return run_cli(*args, **kw)

    def ok(self, *args, **kw):
        r = self.cli(*args, **kw)
        self.assertEqual(r.returncode, OK, (args, r.stderr))
        self.assertEqual(r.stderr, b"")
        return r.stdout

    def ok_json(self, *args, **kw):
        out = self.ok(*args, "--json", **kw)
        self.assertTrue(out.endswith(b"\n") and out.count(b"\n") == 1, out)
        return json.loads(out)

    def fails(self, code, *args, stderr=None, **kw):
        r = self.cli(*args, **kw)
        self.assertEqual(r.returncode, code, (args, r.stdout, r.stderr))
        if stderr is not None:
            self.assertRegex(r.stderr.decode(), stderr)
        return r

    def usage_error(self, *args):
        r = self.cli(*args)
        self.assertEqual(r.returncode, USAGE, (args, r.stderr))
        self.assertEqual(r.stdout, b"")
        self.assertNotEqual(r.stderr, b"")
        return r

    def reserve_one(self, topic):
        got = self.ok_json("reserve", topic)["jobs"]
        self.assertEqual(len(got), 1)
        return got[0]

    def get(self, job_id):
        return self.ok_json("get", job_id)


class ClientCommandsTest(CliTestBase):
    def test_ping_human_and_json(self):
        self.assertEqual(self.ok("ping"), b"PONG\n")
        self.assertEqual(self.ok_json("ping"), {"ok": True})

    def test_add_prints_the_id_human_and_json(self):
        generated = self.ok("add", "add.t", "hello").decode().strip()
        self.assertRegex(generated, r"^\S+$")
        self.assertEqual(self.get(generated)["body"], "hello")
        self.assertEqual(self.ok_json("add", "add.t", "x", "--id", "add-1"), {"id": "add-1"})

    def test_add_reads_a_binary_body_from_stdin(self):
        body = b"from\x00stdin\xff\n"
        self.ok("add", "stdin.t", "-", "--id", "stdin-1", input=body)
        info = self.get("stdin-1")
        self.assertNotIn("body", info)
        self.assertEqual(base64.b64decode(info["body_base64"]), body)
        human = fields(self.ok("get", "stdin-1"))
        self.assertEqual(human["body"], r"from\x00stdin\xff\n")

    def test_add_options_reach_the_server(self):
        self.ok("add", "opt.t", "b", "--id", "opt-1", "--delay-ms", 60000, "--ttr-ms", 1234,
                "--priority", 7, "--max-attempts", 3)
        info = self.get("opt-1")
        self.assertEqual(info["state"], "delayed")
        self.assertEqual((info["ttr_ms"], info["priority"], info["max_attempts"]), (1234, 7, 3))
        self.assertGreaterEqual(info["run_at_ms"] - info["created_at_ms"], 60000)
        run_at = 253402300799000
        self.ok("add", "opt.t", "--id", "opt-2", "--run-at-ms", run_at)
        info = self.get("opt-2")
        self.assertEqual((info["run_at_ms"], info["body"]), (run_at, ""))

    def test_add_of_a_live_id_is_exists_and_replace_updates_it(self):
        self.ok("add", "dup.t", "one", "--id", "dup-1")
        self.fails(SERVER_ERROR, "add", "dup.t", "two", "--id", "dup-1",
                   stderr=r"^delayq add: EXISTS: .*dup-1")
        self.assertEqual(self.get("dup-1")["body"], "one")
        self.ok("add", "dup.t", "two", "--id", "dup-1", "--replace")
        self.assertEqual(self.get("dup-1")["body"], "two")

    def test_reserve_prints_one_block_per_job_and_finish_removes_it(self):
        self.ok("add", "rf.t", "work", "--id", "rf-1")
        jobs = blocks(self.ok("reserve", "rf.t"))
        self.assertEqual(len(jobs), 1)
        job = jobs[0]
        self.assertEqual((job["id"], job["topic"], job["attempts"], job["body"]),
                         ("rf-1", "rf.t", "1", "work"))
        self.assertEqual(self.ok("finish", "rf-1", "--receipt", job["receipt"]), b"")
        self.fails(EMPTY, "get", "rf-1", stderr=r"^delayq get: no job 'rf-1'")

    def test_reserve_json_takes_count_jobs_from_several_topics(self):
        self.ok("add", "multi.a", "a", "--id", "multi-a", "--priority", 1)
        self.ok("add", "multi.b", "b", "--id", "multi-b", "--priority", 2)
        self.ok("add", "multi.b", "c", "--id", "multi-c", "--priority", 3)
        jobs = self.ok_json("reserve", "multi.a", "multi.b", "--count", 2)["jobs"]
        self.assertEqual(len(jobs), 2)
        for j in jobs:
            self.assertEqual(list(j), DELIVERY_FIELDS)  # every field, as HTTP gives it
            self.assertEqual(j["attempts"], 1)
        self.assertEqual(len(blocks(self.ok("reserve", "multi.a", "multi.b", "--count", 5))), 1)

    def sent_fields(self, command, *args):
        """How many values the server sends per delivery, asked directly."""
        r = redis.Redis(port=self.server.port, socket_timeout=10)
        try:
            got = r.execute_command(command, *args)
        finally:
            r.close()
        return len(got[0] if command == "RESERVE" else got)

    def test_reserve_and_peek_print_every_field_the_server_sends(self):
        self.ok("add", "all.t", "x", "--id", "all-0", "--ttr", "45s", "--priority", 9)
        n = self.sent_fields("RESERVE", "FROM", "all.t")
        self.assertEqual(n, len(DELIVERY_FIELDS))  # every row of wire::kDeliveryFields
        names = DELIVERY_FIELDS[:n]

        self.ok("add", "all.t", "x", "--id", "all-1", "--ttr", "45s", "--priority", 9)
        job = self.ok_json("reserve", "all.t")["jobs"][0]
        self.assertEqual(list(job), names)
        info = self.get("all-1")
        for name in names:
            if name == "reserved_until_ms":
                # Kept as a monotonic deadline and told in wall time at each
                # read (now + what is left), so two reads may differ by a ms.
                self.assertAlmostEqual(job[name], info[name], delta=2, msg=name)
            elif name != "receipt":
                self.assertEqual(job[name], info[name], name)
        self.ok("add", "all.t", "x", "--id", "all-2", "--ttr", "45s", "--priority", 9)
        human = blocks(self.ok("reserve", "all.t"))[0]
        self.assertEqual(set(human), set(names))
        self.assertEqual(list(human)[-1], "body")  # the body, which may be long, last

        self.ok("add", "allp.t", "x", "--id", "allp-1", "--ttr", "45s", "--priority", 9)
        n = self.sent_fields("PEEK", "allp.t", "READY")
        self.assertEqual(n, len(DELIVERY_FIELDS))
        peeked = self.ok_json("peek", "allp.t")
        self.assertEqual(list(peeked), DELIVERY_FIELDS[:n])
        self.assertEqual(set(fields(self.ok("peek", "allp.t"))), set(DELIVERY_FIELDS[:n]))

    def test_reserve_with_nothing_due_exits_3(self):
        r = self.fails(EMPTY, "reserve", "nothing.t", "--wait-ms", 20, stderr=r"^delayq reserve: no job")
        self.assertEqual(r.stdout, b"")
        r = self.fails(EMPTY, "reserve", "nothing.t", "--json")
        self.assertEqual(json.loads(r.stdout), {"jobs": []})
        self.assertEqual(r.stderr, b"")

    def test_reserve_waits_for_a_job_that_falls_due(self):
        start = time.monotonic()  # before the add: however long it takes to exit
        self.ok("add", "due.t", "later", "--id", "due-1", "--delay-ms", 200)
        job = self.ok_json("reserve", "due.t", "--wait-ms", 10000)["jobs"][0]
        self.assertEqual(job["id"], "due-1")
        self.assertGreaterEqual(time.monotonic() - start, 0.19)  # never early (ms rounding)

    def test_stale_receipt_and_not_reserved_are_server_errors(self):
        self.ok("add", "stale.t", "x", "--id", "stale-1")
        self.fails(SERVER_ERROR, "finish", "stale-1", "--receipt", "0" * 24,
                   stderr=r"^delayq finish: STALE: ")
        self.reserve_one("stale.t")
        for cmd in ("finish", "touch", "bury", "release"):
            self.fails(SERVER_ERROR, cmd, "stale-1", "--receipt", "0" * 24,
                       stderr=r"^delayq %s: STALE: " % cmd)
        self.assertEqual(self.get("stale-1")["state"], "reserved")

    def test_unknown_id(self):
        for cmd in ("delete", "kick"):
            self.fails(SERVER_ERROR, cmd, "no-such-job", stderr=r"^delayq %s: NOTFOUND: " % cmd)
        for cmd in ("finish", "touch", "bury", "release"):
            self.fails(SERVER_ERROR, cmd, "no-such-job", "--receipt", "0" * 24,
                       stderr=r"^delayq %s: NOTFOUND: " % cmd)
        r = self.fails(EMPTY, "get", "no-such-job", "--json")
        self.assertEqual((json.loads(r.stdout), r.stderr), (None, b""))
        self.fails(EMPTY, "get", "no-such-job", stderr=r"^delayq get: no job 'no-such-job'\n$")

    def test_release_reschedules_with_the_error_text(self):
        self.ok("add", "rel.t", "x", "--id", "rel-1")
        receipt = self.reserve_one("rel.t")["receipt"]
        self.assertEqual(self.ok_json("release", "rel-1", "--receipt", receipt,
                                      "--delay-ms", 60000, "--error", "boom \"quoted\""),
                         {"ok": True})
        info = self.get("rel-1")
        self.assertEqual((info["state"], info["last_error"]), ("delayed", "boom \"quoted\""))
        self.assertEqual(info["attempts"], 1)
        self.ok("delete", "rel-1")

    def test_without_a_receipt_nothing_is_sent(self):
        self.ok("add", "norc.t", "x", "--id", "norc-1")
        self.reserve_one("norc.t")
        for cmd in ("finish", "release", "touch", "bury"):
            with self.subTest(cmd=cmd):
                r = self.fails(USAGE, cmd, "norc-1")
                self.assertEqual(r.stderr.decode(), "delayq %s: %s" % (cmd, NO_RECEIPT))
                self.assertEqual(r.stdout, b"")
        self.assertEqual(self.get("norc-1")["state"], "reserved")
        # Refused before connecting: no server is needed to be told.
        r = run_cli("finish", "norc-1", "--server", "127.0.0.1:%d" % closed_port())
        self.assertEqual((r.returncode, r.stderr.decode()), (USAGE, "delayq finish: " + NO_RECEIPT))
        # A receipt and --force together say two different things.
        r = self.fails(USAGE, "finish", "norc-1", "--receipt", "r", "--force")
        self.assertIn(b"--force", r.stderr)
        self.assertEqual(self.get("norc-1")["state"], "reserved")

    def test_force_acts_by_id_alone_and_says_so(self):
        self.ok("add", "force.t", "x", "--id", "force-1")
        self.fails(SERVER_ERROR, "finish", "force-1", "--force", stderr=r"^delayq finish: NOTRESERVED: ")
        self.reserve_one("force.t")
        self.assertEqual(self.ok("touch", "force-1", "--force"),
                         b"touched force-1 (forced: no receipt checked)\n")
        self.assertEqual(self.ok("release", "force-1", "--force", "--delay", "10m"),
                         b"released force-1 (forced: no receipt checked)\n")
        self.assertEqual(self.get("force-1")["state"], "delayed")
        self.ok("add", "force.t", "x", "--id", "force-1", "--replace")  # due again now
        self.reserve_one("force.t")
        self.assertEqual(self.ok_json("bury", "force-1", "--force"), {"ok": True, "forced": True})
        self.assertEqual(self.get("force-1")["state"], "buried")
        self.ok("kick", "force-1")
        self.reserve_one("force.t")
        self.assertEqual(self.ok("finish", "force-1", "--force"),
                         b"finished force-1 (forced: no receipt checked)\n")
        self.fails(EMPTY, "get", "force-1")

    def test_touch_extends_the_reservation(self):
        self.ok("add", "touch.t", "x", "--id", "touch-1", "--ttr-ms", 60000)
        receipt = self.reserve_one("touch.t")["receipt"]
        before = self.get("touch-1")["reserved_until_ms"]

        def touch():  # until the clock moved, so the new deadline is later
            self.assertEqual(self.ok("touch", "touch-1", "--receipt", receipt), b"")
            after = self.get("touch-1")["reserved_until_ms"]
            return after if after > before else None

        after = wait_until(touch, what="a touch that moves the deadline later")
        self.assertGreater(after, before)

    def test_bury_peek_kick_and_kicktopic(self):
        for i in range(3):
            self.ok("add", "bury.t", "b%d" % i, "--id", "bury-%d" % i, "--priority", i)
        for i in range(3):
            job = self.reserve_one("bury.t")
            self.assertEqual(job["id"], "bury-%d" % i)
            self.ok("bury", job["id"], "--receipt", job["receipt"])
        peeked = self.ok_json("peek", "bury.t", "--state", "buried")
        self.assertEqual((peeked["id"], peeked["topic"], peeked["body"]),
                         ("bury-0", "bury.t", "b0"))
        self.assertEqual(fields(self.ok("peek", "bury.t", "--state", "BURIED"))["id"], "bury-0")
        self.ok("kick", "bury-0")
        self.assertEqual(self.get("bury-0")["state"], "ready")
        self.assertEqual(self.ok("kicktopic", "bury.t", 1), b"1\n")
        self.assertEqual(self.ok_json("kicktopic", "bury.t", 10), {"kicked": 1})
        self.assertEqual(self.ok_json("kicktopic", "bury.t", 10), {"kicked": 0})
        self.fails(EMPTY, "peek", "bury.t", "--state", "buried",
                   stderr=r"^delayq peek: no buried job in topic 'bury.t'")

    def test_peek_ready_and_delayed(self):
        self.ok("add", "peek.t", "now", "--id", "peek-now")
        self.ok("add", "peek.t", "later", "--id", "peek-later", "--delay-ms", 600000)
        self.assertEqual(fields(self.ok("peek", "peek.t"))["id"], "peek-now")
        self.assertEqual(self.ok_json("peek", "peek.t", "--state", "delayed")["id"], "peek-later")
        r = self.fails(EMPTY, "peek", "peek.empty", "--json")
        self.assertEqual((json.loads(r.stdout), r.stderr), (None, b""))

    def test_delete(self):
        self.ok("add", "del.t", "x", "--id", "del-1")
        self.assertEqual(self.ok_json("delete", "del-1"), {"ok": True})
        self.fails(EMPTY, "get", "del-1")

    def test_topics_human_and_json(self):
        self.ok("add", "topics.one", "x")
        self.ok("add", "topics.two", "x")
        names = self.ok_json("topics")["topics"]
        self.assertTrue({"topics.one", "topics.two"} <= set(names))
        self.assertTrue({"topics.one", "topics.two"} <= set(self.ok("topics").decode().split()))

    def test_stats_of_the_server_and_of_a_topic(self):
        self.ok("add", "stats.t", "x", "--id", "stats-1", "--delay-ms", 600000)
        total = self.ok_json("stats")
        self.assertGreaterEqual(total["added"], 1)
        self.assertTrue(all(type(v) is int for v in total.values()), total)
        topic = self.ok_json("stats", "stats.t")
        self.assertEqual((topic["topic"], topic["delayed"], topic["ready"]), ("stats.t", 1, 0))
        human = fields(self.ok("stats", "stats.t"))
        self.assertEqual((human["topic"], human["delayed"]), ("stats.t", "1"))

    def test_pause_and_resume(self):
        self.ok("add", "pause.t", "x", "--id", "pause-1")
        self.assertEqual(self.ok("pause", "pause.t", 0), b"")
        self.assertEqual(self.ok_json("stats", "pause.t")["paused"], 1)
        self.fails(EMPTY, "reserve", "pause.t")
        self.assertEqual(self.ok_json("resume", "pause.t"), {"ok": True})
        self.assertEqual(self.reserve_one("pause.t")["id"], "pause-1")

    def test_json_escapes_text_and_carries_bytes_as_base64(self):
        text = "quote\" back\\slash\nnew\ttab\x01ctl \u00e9\u20ac\U0001F600 \u2028"
        self.ok("add", "esc.t", "-", "--id", "esc-1", input=text.encode())
        job = self.reserve_one("esc.t")
        self.assertEqual(job["body"], text)
        self.assertEqual(self.get("esc-1")["body"], text)
        for raw in (b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"abc\xe2\x82"):
            self.ok("add", "esc.t", "-", "--id", "esc-raw", "--replace", input=raw)
            info = self.get("esc-raw")
            self.assertEqual(base64.b64decode(info["body_base64"]), raw)

    def test_human_output_escapes_control_characters(self):
        self.ok("add", "tty.t", "-", "--id", "tty-1", input=b"a\x1b[31mb\nc")
        self.assertEqual(fields(self.ok("get", "tty-1"))["body"], r"a\x1b[31mb\nc")

    def test_server_errors_name_the_code(self):
        self.fails(SERVER_ERROR, "add", "bad topic!", "x", stderr=r"^delayq add: INVALID: topic")
        self.fails(SERVER_ERROR, "add", "long.t", "x", "--id", "i" * 300,
                   stderr=r"^delayq add: INVALID: id")
        self.fails(SERVER_ERROR, "reserve", "bad topic!", stderr=r"^delayq reserve: INVALID: topic")

    def test_bad_arguments_are_usage_errors(self):
        self.usage_error("add")                                   # topic missing
        self.usage_error("add", "t", "--no-such-option")
        self.usage_error("add", "t", "--delay-ms", "soon")
        self.usage_error("add", "t", "--delay-ms", 1, "--run-at-ms", 2)
        # Numbers out of the server's ranges are refused here, naming the option.
        self.assertIn(b"--delay-ms", self.usage_error("add", "t", "--delay-ms", -5).stderr)
        self.assertIn(b"--count", self.usage_error("reserve", "t", "--count", 0).stderr)
        self.usage_error("reserve")
        self.usage_error("peek", "t", "--state", "reserved")
        self.usage_error("kicktopic", "t")
        self.usage_error("finish", "a", "b")
        r = self.fails(USAGE, "ping", "--server", "127.0.0.1:notaport",
                       stderr=r"^delayq ping: --server: .*port")
        self.assertEqual(r.stdout, b"")
        self.fails(USAGE, "ping", "--server", "[::1")

    def test_help_lists_the_exit_codes(self):
        for args in ([], ["add"], ["reserve"]):
            r = run_cli(*args, "--help")
            self.assertEqual(r.returncode, 0)
            self.assertIn(b"Exit codes", r.stdout)
            self.assertIn(b"3  nothing there", r.stdout)

    def test_server_flag_wins_over_the_environment(self):
        env = {"DELAYQ_SERVER": "127.0.0.1:1"}
        self.assertEqual(run_cli("ping", "--server", self.server.address, env=env).returncode, OK)
        self.assertEqual(run_cli("ping", env=env).returncode, UNAVAILABLE)


class SubscriptionsTest(CliTestBase):
    """delayq subscribe | subscriptions | unsubscribe: push delivery's
    registrations over RESP's SUBSCRIPTION; the instances shown as HTTP
    shows them (--json) or as key: value lines."""
    URL = "http://127.0.0.1:9/close"
    URL2 = "http://127.0.0.1:9/close-2"
    # Standard Webhooks keys of 24 and 32 bytes.
    SECRET_A = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    SECRET_B = "whsec_" + base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()

    def tearDown(self):
        for name in ("orders", "plain"):
            self.cli("unsubscribe", name)

    def test_subscribe_prints_the_instance_as_stored(self):
        out = self.ok("subscribe", "orders", self.URL, "--topic", "order.close",
                      "--topic", "order.open", "--concurrency", 3, "--timeout", "10s",
                      "--ttl", "1m", "--secret", self.SECRET_A, "--secret", self.SECRET_B,
                      "--rate", 2.5, "--min-backoff", "2s", "--max-backoff", "1m",
                      "--max-doublings", 4)
        self.assertNotIn(b"whsec_", out)  # the keys never come back
        f = fields(out)
        self.assertEqual(f["name"], "orders")
        self.assertEqual(f["url"], self.URL)
        self.assertEqual(f["topics"], "order.close,order.open")
        self.assertEqual(f["concurrency"], "3")
        self.assertEqual(f["timeout_ms"], "10000")
        self.assertEqual(f["ttl_ms"], "60000")
        self.assertEqual((f["signed"], f["secret_count"]), ("1", "2"))
        self.assertEqual(f["retry_min_backoff_ms"], "2000")
        self.assertEqual(f["retry_max_backoff_ms"], "60000")
        self.assertEqual(f["retry_max_doublings"], "4")
        self.assertEqual(f["rate_per_s"], "2.5")
        self.assertEqual(int(f["expires_ms"]), int(f["renewed_ms"]) + 60000)
        # Subscribing again renews it; what is left out takes its default.
        j = self.ok_json("subscribe", "orders", self.URL, "--topic", "order.close",
                         "--min-backoff", "3s")
        self.assertEqual(j["topics"], ["order.close"])
        self.assertEqual(j["concurrency"], 10)
        self.assertEqual(j["ttl_ms"], 0)
        self.assertEqual(j["expires_ms"], 0)
        self.assertIs(j["signed"], False)
        self.assertEqual(j["retry_min_backoff_ms"], 3000)
        self.assertEqual(j["retry_max_backoff_ms"], 300000)  # RETRY's others: their defaults
        self.assertEqual(j["rate_per_s"], 0)
        self.assertEqual(j["created_ms"], int(f["created_ms"]))

    def test_subscriptions_lists_and_unsubscribe_removes(self):
        self.ok("subscribe", "orders", self.URL, "--topic", "order.close")
        self.ok("subscribe", "orders", self.URL2, "--topic", "order.close", "--rate", 0.5)
        self.ok("subscribe", "plain", self.URL, "--topic", "t")
        one = self.ok_json("subscriptions", "orders")
        self.assertEqual(one["name"], "orders")
        self.assertEqual([i["url"] for i in one["instances"]], [self.URL, self.URL2])
        self.assertEqual(one["instances"][1]["rate_per_s"], 0.5)
        for figure in ("in_flight", "slots_held", "delivered", "failed", "last_success_ms", "last_error_ms"):
            self.assertIsInstance(one["instances"][0][figure], int, figure)
        self.assertEqual(one["instances"][0]["last_error"], "")
        every = self.ok_json("subscriptions")["subscriptions"]
        self.assertEqual([(s["name"], len(s["instances"])) for s in every],
                         [("orders", 2), ("plain", 1)])
        people = blocks(self.ok("subscriptions"))
        self.assertEqual([(b["name"], b["url"]) for b in people],
                         [("orders", self.URL), ("orders", self.URL2), ("plain", self.URL)])
        self.assertEqual(people[0]["delivered"], "0")

        self.assertEqual(self.ok("unsubscribe", "orders", self.URL2),
                         b"removed 1 instance of orders\n")
        self.fails(EMPTY, "unsubscribe", "orders", self.URL2,
                   stderr="^delayq unsubscribe: no subscription 'orders' at '%s'\n$" % self.URL2)
        self.assertEqual(self.ok_json("unsubscribe", "orders"), {"deleted": 1})
        self.fails(EMPTY, "subscriptions", "orders",
                   stderr="^delayq subscriptions: no subscription 'orders'")
        r = self.fails(EMPTY, "subscriptions", "orders", "--json")
        self.assertEqual(r.stdout, b"null\n")
        self.assertEqual(self.ok_json("subscriptions")["subscriptions"][0]["name"], "plain")

    def test_bad_subscriptions_are_refused_naming_the_option_or_field(self):
        self.usage_error("subscribe", "orders", self.URL)  # no --topic
        self.usage_error("subscribe", "orders")             # no url
        self.assertIn(b"--concurrency",
                      self.usage_error("subscribe", "o", self.URL, "--topic", "t",
                                       "--concurrency", 0).stderr)
        self.fails(USAGE, "subscribe", "o", self.URL, "--topic", "t", "--ttl", "5x",
                   stderr="^delayq subscribe: --ttl: ")
        self.fails(USAGE, "subscribe", "o", self.URL, "--topic", "t", "--ttl", "10ms",
                   stderr="^delayq subscribe: --ttl: .10ms. is shorter than the least allowed, 1s")
        self.fails(USAGE, "subscribe", "o", self.URL, "--topic", "t", "--max-doublings", 99,
                   stderr="--max-doublings")
        self.fails(USAGE, "subscribe", "o", self.URL, "--topic", "t", "--rate", -1,
                   stderr=r"^delayq subscribe: --rate takes 0 to 1000000 requests per second "
                          r"\(0: no limit\), not -1\n$")
        # What only the server checks: its code and the field.
        self.fails(SERVER_ERROR, "subscribe", "o", "ftp://127.0.0.1/x", "--topic", "t",
                   stderr=r"^delayq subscribe: INVALID: url: scheme must be http or https")
        self.fails(SERVER_ERROR, "subscribe", "o", self.URL, "--topic", "t",
                   "--secret", "hunter2", stderr=r"^delayq subscribe: INVALID: secret: ")
        self.fails(SERVER_ERROR, "subscribe", "o", self.URL, "--topic", "t",
                   "--min-backoff", "1m", "--max-backoff", "1s",
                   stderr=r"^delayq subscribe: INVALID: retry.max_backoff_ms: ")
        self.fails(EMPTY, "subscriptions", "o")  # none of them registered


class StatsTest(CliTestBase):
    """`delayq stats`: for people, what an operator reads first; --all and
    --json every figure the server sends. A server of its own, so the
    counts are exact."""

    def test_the_human_form_shows_states_counts_since_start_lateness_and_health(self):
        self.ok("add", "st.t", "a", "--id", "st-1")
        self.ok("add", "st.t", "b", "--id", "st-2", "--delay", "10m")
        job = self.reserve_one("st.t")
        self.ok("finish", job["id"], "--receipt", job["receipt"])
        out = self.ok("stats").decode()
        # The first line stays "jobs: N": the README's tour reads it.
        self.assertEqual(out,
                         "jobs:        1\n"
                         "ready:       0\n"
                         "delayed:     1\n"
                         "reserved:    0\n"
                         "buried:      0\n"
                         "waiting:     0\n"
                         "rates:       0 added/s, 0 handed out/s, 0 finished/s (over the last "
                         "second)\n"
                         "since start: 2 added, 1 handed out, 1 finished, 0 released, 0 timed "
                         "out, 0 buried, 0 kicked, 0 deleted\n"
                         "lateness:    none measured yet\n"
                         "health:      ok\n")
        # A reserve waiting when its job falls due is measured. The reserve
        # waits before the add, so a slow start of the CLI (a sanitizer
        # build) cannot find the job already due and leave nothing measured.
        env = {k: v for k, v in os.environ.items() if not k.startswith("DELAYQ_")}
        reserve = subprocess.Popen([harness.BINARY, "reserve", "st.t", "--wait", "30s",
                                    "--server", self.server.address], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, env=env)
        try:
            wait_until(lambda: self.server.stats()["waiting"] == 1, timeout=10,
                       what="the reserve waiting on the server")
            self.ok("add", "st.t", "c", "--id", "st-3", "--delay", "100ms")
            out, err = reserve.communicate(timeout=20)
            self.assertEqual(reserve.returncode, OK, err)
            self.assertEqual(fields(out)["id"], "st-3")
        finally:
            if reserve.poll() is None:
                reserve.kill()
                reserve.wait()
        lateness = fields(self.ok("stats"))["lateness"]
        self.assertRegex(lateness, r"^p50 \d+(\.\d)?(us|ms|s), p99 \S+, max \S+, over 1 job$")

    def test_all_and_json_show_every_figure(self):
        every = self.ok_json("stats")
        self.assertIn("due_lateness_p999_us", every)
        self.assertIn("connections", every)
        listed = fields(self.ok("stats", "--all"))
        self.assertEqual(list(listed), list(every))
        self.assertEqual(listed["added"], str(every["added"]))
        first = self.ok("stats", "--all").decode().splitlines()[0]
        self.assertEqual(first.split(), ["jobs:", "%d" % every["jobs"]])
        self.assertEqual(self.ok_json("stats", "--all"), every)


class StatsRatesTest(CliTestBase):
    """`delayq stats` for people measures rates: two STATS a second apart.
    A server of its own, so StatsTest's counts stay exact."""

    def test_the_rates_are_measured_over_a_second(self):
        # Jobs added while stats measures (a bounded loop that stops when
        # stats has answered) show as a rate above 0.
        done = threading.Event()

        def add():
            for n in range(100000):
                if done.is_set():
                    return
                self.ok("add", "rate.t", "x")

        adder = threading.Thread(target=add)
        adder.start()
        try:
            rates = fields(self.ok("stats"))["rates"]
        finally:
            done.set()
            adder.join()
        m = re.fullmatch(r"(\d+(?:\.\d)?) added/s, 0 handed out/s, 0 finished/s "
                         r"\(over the last second\)", rates)
        self.assertIsNotNone(m, rates)
        self.assertGreater(float(m.group(1)), 0)


class DurationsTest(CliTestBase):
    """--delay, --ttr and --wait take durations as people type them, read by
    the one parser (src/common/duration.h) and sent as milliseconds."""

    def test_add_delay_and_ttr(self):
        self.ok("add", "dur.t", "x", "--id", "dur-1", "--delay", "30m", "--ttr", "90s")
        info = self.get("dur-1")
        self.assertEqual((info["state"], info["ttr_ms"]), ("delayed", 90000))
        due_in = info["run_at_ms"] - info["created_at_ms"]
        self.assertGreaterEqual(due_in, 30 * 60000)
        self.assertLess(due_in, 30 * 60000 + 60000)
        self.ok("add", "dur.t", "x", "--id", "dur-2", "--delay", "1h30m")
        info = self.get("dur-2")
        self.assertGreaterEqual(info["run_at_ms"] - info["created_at_ms"], 90 * 60000)

    def test_reserve_waits_and_release_delays(self):
        start = time.monotonic()
        self.ok("add", "durw.t", "x", "--id", "durw-1", "--delay", "200ms")
        job = self.ok_json("reserve", "durw.t", "--wait", "10s")["jobs"][0]
        self.assertEqual(job["id"], "durw-1")
        self.assertGreaterEqual(time.monotonic() - start, 0.19)
        self.ok("release", "durw-1", "--receipt", job["receipt"], "--delay", "5m")
        info = self.get("durw-1")
        self.assertEqual(info["state"], "delayed")
        self.assertGreaterEqual(info["run_at_ms"] - int(time.time() * 1000), 4 * 60000)

    def test_both_forms_or_a_bad_duration_are_usage_errors(self):
        self.usage_error("add", "t", "--delay", "5s", "--delay-ms", 5000)
        self.usage_error("add", "t", "--ttr", "5s", "--ttr-ms", 5000)
        self.usage_error("add", "t", "--delay", "5s", "--run-at-ms", 1)
        self.usage_error("reserve", "t", "--wait", "5s", "--wait-ms", 5000)
        self.usage_error("release", "j", "--receipt", "r", "--delay", "5s", "--delay-ms", 1)
        r = self.usage_error("add", "t", "--delay", "5x")
        self.assertEqual(r.stderr.decode(),
                         "delayq add: --delay: unknown unit 'x' in '5x' (the units are ms, s, m, "
                         "h and d: 1500ms, 5s, 30m, 2h, 1d, or 1h30m)\n")
        # Once "a number expected at 'ec'": the unit is read whole.
        r = self.usage_error("add", "t", "--delay", "30sec")
        self.assertEqual(r.stderr.decode(),
                         "delayq add: --delay: unknown unit 'sec' in '30sec': write 30s (the units "
                         "are ms, s, m, h and d: 1500ms, 5s, 30m, 2h, 1d, or 1h30m)\n")
        r = self.usage_error("add", "t", "--delay", "30")
        self.assertTrue(r.stderr.startswith(b"delayq add: --delay: no unit after 30"), r.stderr)
        r = self.usage_error("add", "t", "--ttr", "0")
        self.assertEqual(r.stderr, b"delayq add: --ttr: '0' is shorter than the least allowed, "
                                   b"1ms\n")
        r = self.usage_error("reserve", "t", "--wait", "2d")
        self.assertEqual(r.stderr, b"delayq reserve: --wait: '2d' is longer than the longest "
                                   b"allowed, 1d\n")
        self.usage_error("release", "j", "--receipt", "r", "--delay", "-5s")


class GlobalFlagsTest(CliTestBase):
    """--server, --auth-token and --json work before or after the subcommand."""

    def test_server_before_or_after_the_subcommand(self):
        env = {"DELAYQ_SERVER": "127.0.0.1:%d" % closed_port()}  # the flag must win
        for args in (["--server", self.server.address, "ping"],
                     ["ping", "--server", self.server.address],
                     ["--server=" + self.server.address, "ping"]):
            with self.subTest(args=args):
                r = run_cli(*args, env=env)
                self.assertEqual((r.returncode, r.stdout, r.stderr), (OK, b"PONG\n", b""))
        self.assertEqual(run_cli("ping", env=env).returncode, UNAVAILABLE)

    def test_json_before_or_after_the_subcommand(self):
        self.assertEqual(json.loads(self.ok("--json", "ping")), {"ok": True})
        self.assertEqual(json.loads(self.ok("ping", "--json")), {"ok": True})
        self.ok("add", "glob.t", "x", "--id", "glob-1")
        jobs = json.loads(self.ok("--json", "reserve", "glob.t", "--wait", "1s"))["jobs"]
        self.assertEqual(jobs[0]["id"], "glob-1")

    def test_client_flags_before_serve_are_refused(self):
        for flag in (["--json"], ["--auth-token", "s3cret"], ["--server", "127.0.0.1:1"]):
            with self.subTest(flag=flag):
                r = run_cli(*flag, "serve", "--store", "memory", "--http-port", 0,
                            "--resp-port", 0)
                self.assertEqual(r.returncode, USAGE, r.stderr)
                self.assertEqual(r.stderr.decode(),
                                 "delayq serve: %s before 'serve' is an option of the client "
                                 "commands; serve's own options go after 'serve'\n" % flag[0])


class UnknownWordsTest(unittest.TestCase):
    """A mistyped subcommand or option is named, with the nearest one
    suggested; nothing runs and nothing is sent (exit 2)."""

    def refused(self, *args):
        r = run_cli(*args, env={"DELAYQ_SERVER": "127.0.0.1:%d" % closed_port()})
        self.assertEqual((r.returncode, r.stdout), (USAGE, b""), (args, r.stderr))
        return r.stderr.decode()

    def test_an_unknown_command_suggests_the_nearest(self):
        self.assertEqual(self.refused("reserv", "orders.close"),
                         "delayq: unknown command 'reserv' \u2014 did you mean 'reserve'?\n")
        self.assertEqual(self.refused("--server", "127.0.0.1:1", "fnish", "x"),
                         "delayq: unknown command 'fnish' \u2014 did you mean 'finish'?\n")
        self.assertEqual(self.refused("serv"),
                         "delayq: unknown command 'serv' \u2014 did you mean 'serve'?\n")
        self.assertEqual(self.refused("frobnicate"),
                         "delayq: unknown command 'frobnicate' ('delayq --help' lists the "
                         "commands)\n")

    def test_an_unknown_option_suggests_the_nearest(self):
        self.assertEqual(self.refused("serve", "--htp-port", "7799"),
                         "delayq serve: unknown option '--htp-port' \u2014 did you mean "
                         "'--http-port'?\n")
        self.assertEqual(self.refused("serve", "--data-dri=/tmp/x"),
                         "delayq serve: unknown option '--data-dri' \u2014 did you mean "
                         "'--data-dir'?\n")
        self.assertEqual(self.refused("reserve", "t", "--wiat", "5s"),
                         "delayq reserve: unknown option '--wiat' \u2014 did you mean '--wait'?\n")
        # The options every client command shares are candidates too.
        self.assertEqual(self.refused("ping", "--srever", "127.0.0.1:1"),
                         "delayq ping: unknown option '--srever' \u2014 did you mean "
                         "'--server'?\n")
        self.assertEqual(self.refused("finish", "j", "--reciept", "r"),
                         "delayq finish: unknown option '--reciept' \u2014 did you mean "
                         "'--receipt'?\n")
        self.assertEqual(self.refused("ping", "--verbose"),
                         "delayq ping: unknown option '--verbose' ('delayq ping --help' lists "
                         "the options)\n")

    def test_an_extra_argument_is_named(self):
        self.assertEqual(self.refused("finish", "a", "b", "--receipt", "r"),
                         "delayq finish: unexpected argument 'b'\n")

    def test_no_command_at_all_says_how_to_start(self):
        err = self.refused()
        self.assertIn("'delayq serve' runs the server", err)
        self.assertIn("delayq --help", err)


class ParseErrorsTest(UnknownWordsTest):
    """Every mistake the argument parser finds is said under its command's
    name, with what to type instead (src/cli/left_over.cc,
    DescribeParseError); nothing is sent (exit 2)."""

    def assertRefused(self, args, message):
        self.assertEqual(self.refused(*args), message + "\n", args)

    def test_a_missing_argument_shows_the_usage(self):
        # Once "topic is required".
        self.assertRefused(["add"], "delayq add: TOPIC is required (delayq add TOPIC [BODY] "
                                    "[OPTIONS]; see delayq add --help)")
        self.assertRefused(["reserve"], "delayq reserve: TOPICS is required (delayq reserve "
                                        "TOPICS... [OPTIONS]; see delayq reserve --help)")
        self.assertRefused(["kicktopic", "t"], "delayq kicktopic: N is required (delayq "
                                               "kicktopic TOPIC N [OPTIONS]; see delayq "
                                               "kicktopic --help)")
        self.assertRefused(["work"], "delayq work: TOPICS is required (delayq work "
                                     "TOPIC[,TOPIC...] [OPTIONS] -- COMMAND [ARGS...]; see "
                                     "delayq work --help)")

    def test_milliseconds_given_as_a_duration_point_to_the_duration_option(self):
        # Once "Value 30s not in range 0 to 3153600000000".
        self.assertRefused(["add", "t", "--delay-ms", "30s"],
                           "delayq add: --delay-ms takes whole milliseconds, not '30s': use "
                           "--delay 30s")
        self.assertRefused(["reserve", "t", "--wait-ms", "5m"],
                           "delayq reserve: --wait-ms takes whole milliseconds, not '5m': use "
                           "--wait 5m")
        self.assertRefused(["add", "t", "--delay-ms", "soon"],
                           "delayq add: --delay-ms takes whole milliseconds, not 'soon' (or "
                           "--delay with a duration: 30s, 5m, 1h30m)")
        self.assertRefused(["pause", "t", "5m"],
                           "delayq pause: MS takes whole milliseconds, not '5m': 5m is 300000")
        self.assertRefused(["serve", "--idle-timeout-ms", "5s"],
                           "delayq serve: --idle-timeout-ms takes whole milliseconds, not '5s': "
                           "use --idle-timeout 5s")

    def test_numbers_out_of_range_or_not_numbers_say_the_range(self):
        self.assertRefused(["reserve", "t", "--count", "0"],
                           "delayq reserve: --count takes 1 to 1000, not 0")
        self.assertRefused(["add", "t", "--priority", "high"],
                           "delayq add: --priority takes a whole number from 0 to 4294967295, "
                           "not 'high'")
        self.assertRefused(["work", "t", "--concurrency", "0", "--", "true"],
                           "delayq work: --concurrency takes 1 to 1024, not 0")
        self.assertRefused(["serve", "--max-connections", "-5"],
                           "delayq serve: --max-connections takes 1 to 1000000, not -5")

    def test_a_value_not_among_the_choices_lists_them(self):
        self.assertRefused(["peek", "t", "--state", "reserved"],
                           "delayq peek: --state takes ready, delayed or buried, not 'reserved'")
        self.assertRefused(["work", "t", "--log-level", "loud", "--", "true"],
                           "delayq work: --log-level takes debug, info, warn or error, not 'loud'")
        self.assertRefused(["serve", "--store", "disk"],
                           "delayq serve: --store takes embedded, redis or memory, not 'disk'")

    def test_options_that_exclude_each_other_and_a_missing_value(self):
        self.assertRefused(["add", "t", "--delay", "5s", "--delay-ms", "5000"],
                           "delayq add: give --delay or --delay-ms, not both")
        self.assertRefused(["finish", "j", "--receipt", "r", "--force"],
                           "delayq finish: give --force or --receipt, not both")
        self.assertRefused(["add", "t", "--delay-ms"],
                           "delayq add: --delay-ms needs a value (see delayq add --help)")
        self.assertRefused(["ping", "--auth-token", ""],
                           "delayq ping: --auth-token: must not be empty: leave --auth-token "
                           "out to send no AUTH")

    def test_a_bad_server_address_names_the_command(self):
        self.assertRefused(["ping", "--server", "127.0.0.1:x"],
                           "delayq ping: --server: bad address '127.0.0.1:x': address "
                           "'127.0.0.1:x': port 'x' is not a number in 1..65535")


class HelpTest(unittest.TestCase):
    COMMANDS = ["serve", "add", "reserve", "finish", "release", "touch", "bury", "delete", "kick",
                "kicktopic", "get", "peek", "topics", "stats", "pause", "resume", "ping",
                "subscribe", "unsubscribe", "subscriptions"]

    def test_the_top_level_help_lists_every_command_with_a_line_of_its_own(self):
        r = run_cli("--help")
        self.assertEqual((r.returncode, r.stderr), (0, b""))
        out = r.stdout.decode()
        for name in self.COMMANDS:
            self.assertRegex(out, r"\n  %s +\S.*\n" % name)
        for word in ("--server", "--json", "--auth-token", "--version", "Exit codes",
                     "before or after", "Durations: "):
            self.assertIn(word, out)
        self.assertNotIn("seed", out.lower())
        self.assertNotIn("SPEC", out)

    def test_each_command_has_help(self):
        for name in self.COMMANDS:
            with self.subTest(name=name):
                r = run_cli(name, "--help")
                self.assertEqual((r.returncode, r.stderr), (0, b""))
                self.assertIn(b"Usage:", r.stdout)
                self.assertNotIn(b"seed", r.stdout.lower())
        for name in ("finish", "release", "touch", "bury"):
            out = run_cli(name, "--help").stdout
            self.assertIn(b"--receipt", out)
            self.assertIn(b"--force", out)
        self.assertIn(b"--delay TEXT", run_cli("add", "--help").stdout)
        self.assertIn(b"--wait TEXT", run_cli("reserve", "--help").stdout)
        self.assertIn(b"--server host:port", run_cli("ping", "--help").stdout)


class ConnectionFailureTest(unittest.TestCase):
    def test_a_closed_port_exits_4_with_a_hint(self):
        port = closed_port()
        for args in (["ping"], ["add", "t", "x"], ["reserve", "t", "--json"], ["get", "x"]):
            r = run_cli(*args, "--server", "127.0.0.1:%d" % port)
            self.assertEqual(r.returncode, UNAVAILABLE, (args, r.stderr))
            self.assertEqual(r.stdout, b"")
            self.assertRegex(r.stderr.decode(),
                             r"^delayq \w+: cannot connect to 127\.0\.0\.1:%d: Connection refused"
                             r" .* is `delayq serve` running\?\n$" % port)

    def test_a_server_that_closes_the_connection_exits_4(self):
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)

        def accept_and_close():
            conn, _ = listener.accept()
            conn.close()

        t = threading.Thread(target=accept_and_close)
        t.start()
        r = run_cli("ping", "--server", "127.0.0.1:%d" % listener.getsockname()[1])
        t.join(timeout=10)
        listener.close()
        self.assertEqual(r.returncode, UNAVAILABLE, r.stderr)
        self.assertRegex(r.stderr.decode(), r"^delayq ping: .*127\.0\.0\.1")


class ShutdownTest(unittest.TestCase):
    """A waiting reserve that the server's shutdown ends is not "no job".
    Needs the server side of issue 24 (the RESP reply that says so, the
    client's kUnavailable "shutting down ..."): before it, this exits 3."""

    def test_a_reserve_whose_wait_the_shutdown_ends_exits_4_saying_so(self):
        server = Server("--store", "memory")
        env = {k: v for k, v in os.environ.items() if not k.startswith("DELAYQ_")}
        reserve = subprocess.Popen([harness.BINARY, "reserve", "shut.t", "--wait", "30s",
                                    "--server", server.address], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, env=env)
        try:
            wait_until(lambda: server.stats()["waiting"] == 1, timeout=10,
                       what="the reserve waiting on the server")
            server.signal(signal.SIGTERM)
            out, err = reserve.communicate(timeout=20)
            self.assertEqual((reserve.returncode, out), (UNAVAILABLE, b""), err)
            self.assertEqual(err.decode(),
                             "delayq reserve: the server is shutting down and ended the wait; "
                             "run it again, or give another server (--server a,b)\n")
        finally:
            if reserve.poll() is None:
                reserve.kill()
                reserve.wait()
            server.stop()


class FailoverTest(CliTestBase):
    """--server takes a list (the network client's): a server that is down is
    passed over; with every one down, the message names each."""

    def test_a_down_server_first_in_the_list_is_passed_over(self):
        servers = "127.0.0.1:%d,%s" % (closed_port(), self.server.address)
        env = {"DELAYQ_SERVER": servers}
        self.assertEqual(self.ok_json("add", "fo.t", "x", "--id", "fo-1", server=None, env=env),
                         {"id": "fo-1"})
        job = self.ok_json("reserve", "fo.t", server=None, env=env)["jobs"][0]
        self.assertEqual(job["id"], "fo-1")
        self.ok("finish", "fo-1", "--receipt", job["receipt"], "--server", servers, server=None)
        self.fails(EMPTY, "get", "fo-1")

    def test_every_server_down_names_each(self):
        a, b = closed_port(), closed_port()
        for args in (["add", "t", "x"], ["reserve", "t"], ["finish", "j", "--force"], ["ping"]):
            with self.subTest(args=args):
                r = run_cli(*args, "--server", "127.0.0.1:%d,127.0.0.1:%d" % (a, b))
                self.assertEqual((r.returncode, r.stdout), (UNAVAILABLE, b""), r.stderr)
                self.assertEqual(r.stderr.decode(),
                                 "delayq %s: cannot connect to any server: 127.0.0.1:%d (Connection "
                                 "refused), 127.0.0.1:%d (Connection refused) \u2014 is `delayq "
                                 "serve` running?\n" % (args[0], a, b))

    def test_a_bad_address_in_the_list_is_a_usage_error(self):
        r = run_cli("ping", "--server", "%s,127.0.0.1:x" % self.server.address)
        self.assertEqual(r.returncode, USAGE, r.stderr)
        self.assertRegex(r.stderr.decode(),
                         r"^delayq ping: --server: bad address '127\.0\.0\.1:x'")
        self.assertEqual(run_cli("ping", "--server", self.server.address + ",").returncode, USAGE)


class PingWaitTest(unittest.TestCase):
    """`delayq ping --wait D`: a readiness check for scripts, asking every
    50 ms until a server answers."""

    def test_wait_answers_pong_once_a_server_starts_listening(self):
        port = closed_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("DELAYQ_")}
        ping = subprocess.Popen([harness.BINARY, "ping", "--server", "127.0.0.1:%d" % port,
                                 "--wait", "20s"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env)
        server = None
        try:
            # Started after ping: its first tries are refused.
            server = subprocess.Popen(
                [harness.BINARY, "serve", "--store", "memory", "--http-port", "0",
                 "--resp-port", str(port)], stderr=subprocess.DEVNULL, env=env)
            out, err = ping.communicate(timeout=30)
            self.assertEqual((ping.returncode, out, err), (OK, b"PONG\n", b""))
        finally:
            if ping.poll() is None:
                ping.kill()
                ping.wait()
            if server is not None:
                server.terminate()
                server.wait(timeout=10)

    def test_a_wait_that_runs_out_exits_4_naming_the_server(self):
        port = closed_port()
        start = time.monotonic()
        r = run_cli("ping", "--server", "127.0.0.1:%d" % port, "--wait", "300ms")
        self.assertGreaterEqual(time.monotonic() - start, 0.3)
        self.assertEqual((r.returncode, r.stdout), (UNAVAILABLE, b""))
        self.assertTrue(r.stderr.decode().startswith(
            "delayq ping: cannot connect to 127.0.0.1:%d: Connection refused" % port), r.stderr)

    def test_with_a_list_the_first_server_that_answers_is_enough(self):
        server = Server("--store", "memory")
        try:
            r = run_cli("ping", "--server", "127.0.0.1:%d,%s" % (closed_port(), server.address),
                        "--wait", "5s")
            self.assertEqual((r.returncode, r.stdout), (OK, b"PONG\n"), r.stderr)
        finally:
            server.stop()


class AuthTest(CliTestBase):
    server_args = ("--auth-token", "s3cret")

    def test_commands_need_the_token(self):
        self.fails(SERVER_ERROR, "stats", stderr=r"^delayq stats: NOAUTH: ")
        self.fails(SERVER_ERROR, "stats", "--auth-token", "wrong",
                   stderr=r"^delayq stats: NOAUTH: invalid token")

    def test_ping_proves_the_token_or_says_that_the_server_wants_one(self):
        # Once PONG without a token: PING is open on the server.
        r = self.fails(SERVER_ERROR, "ping")
        self.assertEqual(r.stderr.decode(),
                         "delayq ping: %s answers, but wants a token: give it with --auth-token T "
                         "or DELAYQ_AUTH_TOKEN=T\n" % self.server.address)
        self.assertEqual(r.stdout, b"")
        self.fails(SERVER_ERROR, "ping", "--auth-token", "wrong",
                   stderr=r"^delayq ping: NOAUTH: invalid token \(127\.0\.0\.1:\d+ refused the "
                          r"token\)\n$")
        self.assertEqual(self.ok("ping", "--auth-token", "s3cret"), b"PONG\n")
        self.assertEqual(self.ok("ping", env={"DELAYQ_AUTH_TOKEN": "s3cret"}), b"PONG\n")
        self.assertEqual(self.fails(SERVER_ERROR, "ping", "--json").stdout, b"")

    def test_the_token_from_the_flag_or_the_environment(self):
        self.assertEqual(self.ok_json("add", "auth.t", "x", "--id", "auth-1",
                                      "--auth-token", "s3cret"), {"id": "auth-1"})
        info = self.ok_json("get", "auth-1", env={"DELAYQ_AUTH_TOKEN": "s3cret"})
        self.assertEqual(info["id"], "auth-1")


if __name__ == "__main__":
    harness.main()
