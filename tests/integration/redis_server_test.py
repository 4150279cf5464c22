#!/usr/bin/env python3
"""Black-box tests of several `delayq serve --store redis` processes sharing real
`redis-server` processes (issue 5, "Tests"), over RESP with redis-py.

Every test starts its own redis-server on a free loopback port in a temporary
directory (`--save ""`; `--appendonly yes --appendfsync always` where Redis is
restarted), waits for PING with a deadline, starts its delayq servers on ports the
kernel picks (harness.Server), and stops everything it started by PID (SIGTERM,
then SIGKILL after a deadline) in cleanups that run even when the test fails.
Nothing sleeps to wait for something: waits poll with a deadline, long-polls are
bounded by their own timeouts, and the only sleeps are poll intervals and the
pause between retries of a client whose server said `unavailable`.

- test_two_then_three_servers_under_concurrent_load: 4 producers and 6
  consumers over 2, then 3 servers: every acknowledged add delivered, none twice
  within its TTR, none before its run_at, every finish OK, 0 jobs left.
- test_add_through_one_server_wakes_a_reserve_waiting_on_another (due now and
  delayed), test_ttr_running_out_hands_the_job_out_again_through_another_server,
- test_sigkill_of_one_server_mid_load_loses_nothing,
- test_redis_restart_mid_load_gives_unavailable_then_serves_again,
- test_bad_redis_url_and_unreachable_redis_at_start,
- test_two_prefixes_on_one_redis_do_not_see_each_other,
- PipeliningTest: pipelined commands share the store's rounds and reply in
  order; a RESERVE sees the changes before it, what follows a waiting
  RESERVE waits for it; replies owed are written before QUIT closes; a call
  waiting on Redis (Redis paused with CLIENT PAUSE) holds up no other
  connection, RESP or HTTP; the seed's POST /command and /metrics.

    /usr/bin/python3 tests/integration/redis_server_test.py --binary build/bin/delayq [-v]

DELAYQ_ITR_SEED=n replays the random choices of a run (thread interleaving
still differs).
"""
import atexit
import http.client
import json
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import zlib

sys.dont_write_bytecode = True  # no __pycache__ in the source tree

import redis  # noqa: E402

import harness  # noqa: E402
from harness import Server, recv_all, run_serve, wait_until  # noqa: E402

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
SEED = int(os.environ.get("DELAYQ_ITR_SEED") or random.SystemRandom().getrandbits(32))
LONG_TTR = 30_000          # no reservation runs out during a load test
SHORT_TTR = 3_000          # failure tests: jobs taken by reserves whose answer was lost come back
TOPICS = ("itr.a", "itr.b", "itr.c")
REQUEST_LIMIT_MS = 5_000   # every request of a load returns within this, outage or not

_started = []  # every process this script started, for the atexit safety net


@atexit.register
def _kill_leftovers():
    for p in _started:
        if p.poll() is None:
            p.kill()
            p.wait()


def now_ms():
    return time.time() * 1000.0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pairs(flat):
    """A flat [k, v, k, v, ...] RESP reply as a dict of str -> bytes."""
    return {k.decode(): v for k, v in zip(flat[::2], flat[1::2])}


def client(server, **kw):
    kw.setdefault("socket_timeout", 10)
    return redis.Redis(host="127.0.0.1", port=server.port, socket_connect_timeout=5, **kw)


def stats(server, topic=None):
    r = client(server)
    try:
        flat = r.execute_command("STATS", topic) if topic else r.execute_command("STATS")
        return {k: int(v) if v.lstrip(b"-").isdigit() else v for k, v in pairs(flat).items()}
    finally:
        r.close()


class RedisProcess:
    """One redis-server on a free loopback port in its own temporary directory.
    stop() and start() again reuse the port and the directory (and so the AOF)."""

    def __init__(self, aof=False):
        self.dir = tempfile.mkdtemp(prefix="delayq-itr-redis-")
        self.aof = aof
        self.proc = None
        for attempt in range(5):
            # A port found free may be taken before redis-server binds it (by
            # a parallel test): it then exits, and another port is tried.
            self.port = free_port()
            try:
                self.start()
                break
            except RuntimeError:
                if attempt == 4:
                    raise

    @property
    def url(self):
        return "redis://127.0.0.1:%d" % self.port

    def start(self, timeout=15.0):
        args = [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", self.dir, "--save", "", "--daemonize", "no",
                "--logfile", os.path.join(self.dir, "redis.log")]
        args += (["--appendonly", "yes", "--appendfsync", "always"] if self.aof
                 else ["--appendonly", "no"])
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        _started.append(self.proc)
        wait_until(self._up, timeout, f"redis-server on port {self.port} to answer PING")

    def _up(self):
        if self.proc.poll() is not None:
            raise RuntimeError(f"redis-server exited with {self.proc.returncode}: "
                               f"{self.log()[-2000:]}")
        r = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1,
                        socket_connect_timeout=1)
        try:
            # Ours, not another process that took the port meanwhile.
            return int(r.info("server")["process_id"]) == self.proc.pid
        except redis.ConnectionError:  # refused, or LOADING the AOF
            return False
        finally:
            r.close()

    def log(self):
        try:
            with open(os.path.join(self.dir, "redis.log")) as f:
                return f.read()
        except OSError:
            return ""

    def stop(self, timeout=10.0):
        """SIGTERM (Redis writes out its AOF), SIGKILL after `timeout`; the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class RedisServerTestCase(unittest.TestCase):
    def start_redis(self, aof=False):
        r = RedisProcess(aof=aof)
        self.addCleanup(r.cleanup)
        return r

    def start_delayq(self, redis_proc, prefix, *extra):
        s = Server("--store", "redis", "--redis", redis_proc.url, "--redis-prefix", prefix,
                   *extra)
        _started.append(s.proc)
        self.addCleanup(self._stop_delayq, s)
        return s

    @staticmethod
    def _stop_delayq(s):
        if getattr(s, "_stopped", False):
            return
        s._stopped = True
        if s.proc.poll() is not None:  # killed by the test, or died on its own
            s.kill()
            return
        code = s.stop()  # SIGTERM, SIGKILL after 10 s
        if code != 0:
            raise AssertionError(f"delayq serve exited with {code} on SIGTERM: {s.text}")

    def kill_delayq(self, s):
        s._stopped = True
        return s.kill()

    def assertAlive(self, *servers):
        for s in servers:
            self.assertIsNone(s.proc.poll(), f"delayq serve died: {s.text[-3000:]}")


# --- the load: producers and consumers over several servers -------------------------


def topic_of(job_id):
    return TOPICS[zlib.crc32(job_id.encode()) % len(TOPICS)]


def body_of(job_id):
    return job_id.encode() + b"|" + bytes(range(zlib.crc32(job_id.encode()) % 120))


class Load:
    """Producers add jobs with unique ids through random servers (delays 0-300 ms,
    half of them as `delay_ms`, half as `AT run_at_ms`); consumers reserve from
    random servers and finish each job with its receipt through a random server.
    What was acknowledged, what was in flight and every delivery are written down
    for verify().

    A server that drops a connection (`down`) is avoided by that thread from then
    on; a request it had in flight stays a maybe. An `UNAVAILABLE` answer (Redis
    away) leaves the request a maybe too, and the thread retries after a poll
    interval. Either is only accepted when the test allows it."""

    def __init__(self, tag, servers, jobs, producers=4, consumers=6, ttr=LONG_TTR,
                 max_delay=300, allow_down=False, allow_unavailable=False, seed=SEED):
        self.tag = tag
        self.servers = list(servers)
        self.ports = [s.port for s in servers]
        self.jobs = jobs
        self.n_producers = producers
        self.n_consumers = consumers
        self.ttr = ttr
        self.max_delay = max_delay
        self.allow_down = allow_down
        self.allow_unavailable = allow_unavailable
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.stop_producers = threading.Event()
        self.stop_consumers = threading.Event()
        self.abort = threading.Event()  # stop(): no more retries of finishes either
        # what the clients know
        self.planned = {}          # id -> earliest run_at the add can have (ms); set before sending
        self.exact_run_at = set()  # ids added with AT (planned is their exact run_at)
        self.acked = set()         # ADD answered with the id
        self.maybe_added = set()   # ADD sent, no answer or unavailable
        self.unavailable_at = {}   # id -> when its ADD was answered UNAVAILABLE
        self.deliveries = {}       # id -> [(t_sent, t_received, receipt, attempts, port)]
        self.finished = {}         # id -> when FINISH answered OK (consumer clock)
        self.finish_unsure = set() # FINISH in flight lost, then NOTFOUND on retry
        self.finish_stale = 0      # FINISH answered STALE after the TTR could run out
        self.in_hand = 0           # delivered, finish not settled yet
        self.lost_reserve_slots = 0  # COUNT of reserves whose answer was lost
        self.acked_count = 0
        # what happened
        self.errors = []           # anything a healthy server must not do
        self.down = {}             # port -> connection errors seen
        self.unavailable = {"add": 0, "reserve": 0, "finish": 0}
        self.max_request_ms = (0.0, None)
        self.ops = 0
        self.adds_by_port = {p: 0 for p in self.ports}
        self.reserves_by_port = {p: 0 for p in self.ports}
        self.threads = []

    # -- plumbing

    def error(self, text):
        with self.lock:
            if len(self.errors) < 50:
                self.errors.append(text)

    def call(self, conns, port, *args):
        """('ok', reply) | ('down', exc) | ('unavailable', exc) | ('error', exc)."""
        r = conns.get(port)
        if r is None:
            r = conns[port] = redis.Redis(host="127.0.0.1", port=port, socket_timeout=10,
                                          socket_connect_timeout=5)
        t0 = time.monotonic()
        try:
            result = ("ok", r.execute_command(*args))
        except redis.TimeoutError as e:  # 10 s without an answer: a hang
            result = ("error", e)
        except redis.ConnectionError as e:
            result = ("down", e)
        except redis.ResponseError as e:
            result = ("unavailable" if str(e).startswith("UNAVAILABLE") else "error", e)
        took = (time.monotonic() - t0) * 1000
        with self.lock:
            self.ops += 1
            if took > self.max_request_ms[0]:
                self.max_request_ms = (took, args[0])
        status, value = result
        if status == "down":
            with self.lock:
                self.down[port] = self.down.get(port, 0) + 1
            if not self.allow_down:
                self.error(f"{args[0]} on port {port}: connection lost: {value!r}")
        elif status == "unavailable" and not self.allow_unavailable:
            self.error(f"{args[0]} on port {port}: {value}")
        elif status == "error" and isinstance(value, redis.TimeoutError):
            self.error(f"{args[0]} on port {port}: no answer within 10 s (a hang)")
        return result

    @staticmethod
    def pick(rng, alive):
        return rng.choice(alive) if alive else None

    def retry_pause(self):
        time.sleep(0.02)  # poll interval while Redis is away

    # -- threads

    def producer(self, k, quota, rng):
        conns, alive = {}, list(self.ports)
        made, serial = 0, 0
        try:
            while made < quota and not self.stop_producers.is_set():
                port = self.pick(rng, alive)
                if port is None:
                    self.error(f"producer {k}: no server left")
                    return
                serial += 1
                job_id = f"{self.tag}.p{k}.{serial}"
                delay = 0 if rng.random() < 0.3 else rng.randint(1, self.max_delay)
                t0 = now_ms()
                if rng.random() < 0.5:
                    run_at = int(t0) + delay
                    args = ("ADD", topic_of(job_id), job_id, 0, self.ttr, body_of(job_id),
                            "AT", run_at)
                    exact = True
                else:
                    run_at = int(t0) + delay  # the server's run_at is at least this
                    args = ("ADD", topic_of(job_id), job_id, delay, self.ttr, body_of(job_id))
                    exact = False
                with self.lock:
                    self.planned[job_id] = run_at
                    if exact:
                        self.exact_run_at.add(job_id)
                    self.maybe_added.add(job_id)
                status, reply = self.call(conns, port, *args)
                if status == "ok":
                    if reply != job_id.encode():
                        self.error(f"ADD {job_id} answered {reply!r}")
                    with self.lock:
                        self.maybe_added.discard(job_id)
                        self.acked.add(job_id)
                        self.acked_count += 1
                        self.adds_by_port[port] += 1
                    made += 1
                elif status == "down":
                    alive.remove(port)
                elif status == "unavailable":
                    with self.lock:
                        self.unavailable["add"] += 1
                        self.unavailable_at[job_id] = now_ms()
                    self.retry_pause()
                else:
                    self.error(f"ADD {job_id} on port {port}: {reply!r}")
        except Exception as e:  # noqa: BLE001 - reported by verify()
            self.error(f"producer {k} crashed: {e!r}")
        finally:
            for r in conns.values():
                r.close()

    def consumer(self, k, rng):
        conns, alive = {}, list(self.ports)
        try:
            while not self.stop_consumers.is_set():
                port = self.pick(rng, alive)
                if port is None:
                    self.error(f"consumer {k}: no server left")
                    return
                count = rng.randint(1, 8)
                t0 = now_ms()
                status, jobs = self.call(conns, port, "RESERVE", "TIMEOUT", 200, "COUNT", count,
                                         "FROM", *TOPICS)
                t1 = now_ms()
                if status != "ok":
                    # The reserve may have taken jobs whose answer is lost: they
                    # stay reserved until their TTR runs out.
                    with self.lock:
                        self.lost_reserve_slots += count
                    if status == "down":
                        alive.remove(port)
                    elif status == "unavailable":
                        with self.lock:
                            self.unavailable["reserve"] += 1
                        self.retry_pause()
                    else:
                        self.error(f"RESERVE on port {port}: {jobs!r}")
                    continue
                got = []
                with self.lock:
                    self.reserves_by_port[port] += 1
                    for job_id, topic, body, receipt, attempts, *_ in jobs or []:
                        job_id = job_id.decode()
                        self.deliveries.setdefault(job_id, []).append(
                            (t0, t1, receipt, attempts, port))
                        self.in_hand += 1
                        got.append((job_id, receipt, t0))
                        if topic.decode() != topic_of(job_id) or body != body_of(job_id):
                            self.errors.append(f"{job_id} delivered with topic {topic!r} "
                                               f"and body {body[:40]!r}")
                for job_id, receipt, t_sent in got:
                    self.finish(conns, alive, rng, job_id, receipt, t_sent)
                    with self.lock:
                        self.in_hand -= 1
        except Exception as e:  # noqa: BLE001 - reported by verify()
            self.error(f"consumer {k} crashed: {e!r}")
        finally:
            for r in conns.values():
                r.close()

    def finish(self, conns, alive, rng, job_id, receipt, t_sent):
        """FINISH with the receipt until an answer settles it. After a lost
        answer, NOTFOUND means the lost one did it (or, once the TTR can have run
        out, another consumer). STALE is right only once the TTR can have run
        out: the job is handed out again."""
        unsure = False
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not self.abort.is_set():
            port = self.pick(rng, alive)
            if port is None:
                self.error(f"FINISH {job_id}: no server left")
                return
            status, reply = self.call(conns, port, "FINISH", job_id, receipt)
            t = now_ms()
            if status == "ok":
                if reply == b"OK":
                    with self.lock:
                        self.finished[job_id] = t
                else:
                    self.error(f"FINISH {job_id} answered {reply!r}")
                return
            if status == "down":
                alive.remove(port)
                unsure = True
            elif status == "unavailable":
                with self.lock:
                    self.unavailable["finish"] += 1
                unsure = True
                self.retry_pause()
            elif ((unsure or t >= t_sent + self.ttr) and str(reply).startswith("NOTFOUND")):
                with self.lock:
                    self.finish_unsure.add(job_id)
                return
            elif t >= t_sent + self.ttr and str(reply).startswith("STALE"):
                with self.lock:
                    self.finish_stale += 1
                return
            else:
                self.error(f"FINISH {job_id} {receipt!r} on port {port} "
                           f"{t - t_sent:.0f} ms after the reserve: {reply!r}")
                return
        if not self.abort.is_set():
            self.error(f"FINISH {job_id}: not settled within 30 s")

    def start(self):
        per, extra = divmod(self.jobs, self.n_producers)
        for k in range(self.n_producers):
            self.threads.append(threading.Thread(
                target=self.producer, args=(k, per + (k < extra), random.Random(self.rng.random())),
                daemon=True))
        self.consumer_threads = [
            threading.Thread(target=self.consumer, args=(k, random.Random(self.rng.random())),
                             daemon=True)
            for k in range(self.n_consumers)]
        self.started_at = time.monotonic()
        for t in self.threads + self.consumer_threads:
            t.start()

    def join_producers(self, timeout):
        deadline = time.monotonic() + timeout
        for t in self.threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        if any(t.is_alive() for t in self.threads):
            self.stop_producers.set()
            raise AssertionError(f"{self.tag}: producers did not finish within {timeout}s "
                                 f"({self.acked_count} of {self.jobs} adds acknowledged)")

    def stop(self):
        """Ends every thread (after its request in flight); False if one hangs."""
        self.stop_producers.set()
        self.stop_consumers.set()
        self.abort.set()
        deadline = time.monotonic() + 15
        for t in self.threads + self.consumer_threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self.threads + self.consumer_threads)

    def all_delivered_and_settled(self):
        with self.lock:
            return self.in_hand == 0 and all(i in self.deliveries for i in self.acked)

    def wait_drained(self, server, timeout):
        try:
            wait_until(lambda: self.drained(server), timeout=timeout,
                       what=f"{self.tag}: every job delivered and finished")
        except AssertionError as e:
            raise AssertionError(f"{e}: {self.diagnose(server)}") from None

    def diagnose(self, server):
        """What is missing, for a failure message."""
        with self.lock:
            undelivered = sorted(i for i in self.acked if i not in self.deliveries)
            in_hand = self.in_hand
        r = client(server)
        try:
            st = {k: int(v) for k, v in pairs(r.execute_command("STATS")).items()}
            info = {i: pairs(r.execute_command("GET", i) or []) for i in undelivered[:5]}
        finally:
            r.close()
        info = {i: {k: v for k, v in d.items() if k in ("state", "attempts", "run_at_ms",
                                                        "reserved_until_ms", "last_error")}
                for i, d in info.items()}
        return (f"now {now_ms():.0f}, {in_hand} in hand, {len(undelivered)} acknowledged "
                f"adds never delivered, e.g. {info}; STATS {st}; threads alive: "
                f"{sum(t.is_alive() for t in self.threads + self.consumer_threads)}; "
                f"errors {self.errors[:5]}")

    def drained(self, server):
        """Every acknowledged add delivered, every delivery settled, and nothing
        left in Redis (adds in flight that made it, jobs of lost reserve answers
        once their TTR ran out: all handed out again and finished)."""
        if self.errors:
            return True  # verify() reports them
        return self.all_delivered_and_settled() and stats(server)["jobs"] == 0

    # -- checks

    def verify(self, test, live_server, strict):
        """After drained(): every acknowledged add was delivered and finished,
        none was delivered twice within its TTR nor before its run_at, no
        acknowledged finish came back, and nothing is left in Redis.

        strict: nothing went wrong (no server down, Redis never away), so there
        is no add in flight, no lost reserve answer, and each job was delivered
        exactly once, at its first attempt."""
        test.assertEqual(self.errors, [], f"{self.tag}: unexpected answers (seed {SEED})")
        test.assertFalse(any(t.is_alive() for t in self.threads + self.consumer_threads))

        early, dup, strangers, came_back = [], [], [], []
        lateness = []
        for job_id, ds in self.deliveries.items():
            if job_id not in self.planned:
                strangers.append(job_id)
                continue
            run_at = self.planned[job_id]
            for t_sent, t_recv, receipt, attempts, port in ds:
                # The consumer's clock after the answer is later than the server's
                # clock when it handed the job out, which is at or after run_at.
                # 1 ms allows for the two clock reads (float vs. whole ms).
                if t_recv < run_at - 1:
                    early.append((job_id, run_at, round(t_recv - run_at, 3), port))
                if job_id in self.finished and t_sent > self.finished[job_id]:
                    came_back.append((job_id, receipt))
            lateness.append(ds[0][1] - run_at)
            ds = sorted(ds)
            for first, second in zip(ds, ds[1:]):
                # A second delivery is only allowed once the first reservation's
                # TTR has run out; that reservation began after first's t_sent.
                if second[1] < first[0] + self.ttr - 1:
                    dup.append((job_id, first[2], second[2], round(second[1] - first[0])))
        test.assertEqual(strangers, [], f"{self.tag}: delivered jobs nobody added")
        test.assertEqual(early, [], f"{self.tag}: delivered before run_at "
                                    "(id, run_at, ms early, port)")
        test.assertEqual(dup, [], f"{self.tag}: delivered twice within the TTR "
                                  "(id, receipts, ms between)")
        test.assertEqual(came_back, [], f"{self.tag}: delivered after an acknowledged finish")
        # An ADD answered `unavailable` that made it anyway was in flight when Redis
        # went away: it was done before the answer, never after. (Its seq, the
        # receipt's first 16 hex digits, is 1024 x the ms of the add script's
        # clock: docs/redis-store.md "seq, created_at, receipts".)
        late_adds = []
        for job_id, t_answer in self.unavailable_at.items():
            if job_id in self.deliveries:
                added_ms = int(self.deliveries[job_id][0][2][:16], 16) / 1024
                if added_ms > t_answer + 1:
                    late_adds.append((job_id, round(added_ms - t_answer)))
        test.assertEqual(late_adds, [], f"{self.tag}: ADDs answered UNAVAILABLE and done "
                                        "later (id, ms after the answer)")

        # What Redis holds now, through a live server: nothing.
        r = client(live_server, socket_timeout=30)
        try:
            ids = sorted(self.planned)
            pipe = r.pipeline(transaction=False)
            for job_id in ids:
                pipe.execute_command("GET", job_id)
            present = {job_id: pairs(flat) for job_id, flat in zip(ids, pipe.execute())
                       if flat is not None}
            st = {k: int(v) for k, v in pairs(r.execute_command("STATS")).items()}
        finally:
            r.close()
        test.assertEqual(sorted(set(present) & set(self.finished)), [],
                         f"{self.tag}: acknowledged finishes came back")
        test.assertEqual(present, {}, f"{self.tag}: jobs left in Redis")
        test.assertEqual(st["jobs"], 0, f"{self.tag}: STATS {st}")
        never_delivered = sorted(i for i in self.acked if i not in self.deliveries)
        test.assertEqual(never_delivered, [], f"{self.tag}: acknowledged adds never delivered "
                                              f"(seed {SEED})")
        unfinished = sorted(i for i in self.deliveries
                            if i not in self.finished and i not in self.finish_unsure)
        test.assertEqual(unfinished, [], f"{self.tag}: delivered, never finished")
        redelivered = sum(len(d) - 1 for d in self.deliveries.values())
        # Jobs first seen at a later attempt: an earlier reserve took them and
        # its answer was lost; no more than those reserves asked for.
        taken_by_lost = sum(1 for d in self.deliveries.values() if min(d)[3] > 1)
        test.assertLessEqual(taken_by_lost, self.lost_reserve_slots)
        if strict:
            test.assertEqual(self.maybe_added, set())
            test.assertEqual(self.lost_reserve_slots, 0)
            test.assertEqual(self.finish_unsure, set())
            test.assertEqual(self.finish_stale, 0)
            test.assertEqual(sorted(self.finished), sorted(self.acked),
                             f"{self.tag}: not every delivery was finished")
            test.assertEqual(redelivered, 0)
            test.assertTrue(all(ds[0][3] == 1 for ds in self.deliveries.values()))

        lateness.sort()

        def pct(p):
            return lateness[min(len(lateness) - 1, int(p * len(lateness)))] if lateness else 0
        took = time.monotonic() - self.started_at
        print(f"\n  {self.tag}: {self.acked_count} adds acknowledged, {len(self.maybe_added)} "
              f"in flight ({len(set(self.deliveries) & self.maybe_added)} of them made it), "
              f"{len(self.exact_run_at)} of all with AT, "
              f"{sum(len(d) for d in self.deliveries.values())} deliveries "
              f"({redelivered} again after a TTR ran out, {taken_by_lost} first seen at a later "
              f"attempt), {len(self.finished)} finishes OK, "
              f"{len(self.finish_unsure)} settled by a lost answer, {self.finish_stale} STALE "
              f"after the TTR; {took:.1f} s ({self.ops / took:.0f} requests/s); first-delivery "
              f"lateness (consumer clock - run_at) p50 {pct(0.5):.1f} ms, p99 {pct(0.99):.1f} ms, "
              f"max {pct(1.0):.1f} ms; adds by port {self.adds_by_port}, reserves by port "
              f"{self.reserves_by_port}; connection errors {self.down}, unavailable "
              f"{self.unavailable}, lost reserve answers {self.lost_reserve_slots} slots; "
              f"slowest request {self.max_request_ms[0]:.0f} ms ({self.max_request_ms[1]})",
              file=sys.stderr, flush=True)
        test.assertLess(self.max_request_ms[0], REQUEST_LIMIT_MS,
                        f"{self.tag}: a request took {self.max_request_ms}")


# --- the tests ------------------------------------------------------------------------


class DataDirTest(RedisServerTestCase):
    def test_a_data_dir_given_is_said_not_to_be_used(self):
        """The jobs are in Redis: a --data-dir given is said at start to be
        unused (with the URL, its password hidden), and nothing is made there."""
        rp = self.start_redis()
        d = tempfile.mkdtemp(prefix="delayq-unused-")
        self.addCleanup(shutil.rmtree, d, True)
        s = self.start_delayq(rp, "dd", "--data-dir", d)
        self.assertIn(f"warn  --data-dir {d} is not used by --store redis: the jobs are in Redis "
                      f"at {rp.url}", s.text)
        self.assertEqual(os.listdir(d), [])


class ManyServersTest(RedisServerTestCase):

    def run_load(self, tag, servers, jobs):
        load = Load(tag, servers, jobs)
        load.start()
        try:
            load.join_producers(timeout=60)
            wait_until(load.all_delivered_and_settled, timeout=30,
                       what=f"{tag}: every acknowledged add delivered and finished")
        finally:
            self.assertTrue(load.stop(), "load threads did not stop")
        self.assertAlive(*servers)
        load.verify(self, servers[0], strict=True)
        return load

    def test_two_then_three_servers_under_concurrent_load(self):
        rp = self.start_redis()
        servers = [self.start_delayq(rp, "load") for _ in range(2)]
        self.run_load("two", servers, 1200)
        servers.append(self.start_delayq(rp, "load"))
        load = self.run_load("three", servers, 1500)
        # Each server took part, and each sees the same, empty store.
        self.assertTrue(all(load.adds_by_port.values()), load.adds_by_port)
        self.assertTrue(all(load.reserves_by_port.values()), load.reserves_by_port)
        for s in servers:
            st = stats(s)
            self.assertEqual((st["jobs"], st["delayed"], st["ready"], st["reserved"],
                              st["buried"]), (0, 0, 0, 0, 0), st)
            self.assertEqual(st["added"], 2700, st)      # counters live in Redis
            self.assertEqual(st["finished"], 2700, st)
            self.assertEqual(st["timed_out"], 0, st)

    def test_add_through_one_server_wakes_a_reserve_waiting_on_another(self):
        rp = self.start_redis()
        a = self.start_delayq(rp, "wake")
        b = self.start_delayq(rp, "wake")
        ra, rb = client(a), client(b, socket_timeout=15)
        self.addCleanup(ra.close)
        self.addCleanup(rb.close)
        for job_id, delay in (("wake-now", 0), ("wake-later", 300)):
            got = {}

            def wait():
                got["jobs"] = rb.execute_command("RESERVE", "TIMEOUT", 10000, "FROM", "wake.t")
                got["at"] = now_ms()

            t = threading.Thread(target=wait)
            t.start()
            wait_until(lambda: stats(b, "wake.t")["waiting"] == 1, timeout=5,
                       what="the reserve to wait on B")
            t_add = now_ms()
            self.assertEqual(ra.execute_command("ADD", "wake.t", job_id, delay, 30000, "hi"),
                             job_id.encode())
            run_at = int(pairs(ra.execute_command("GET", job_id))["run_at_ms"])
            t.join(timeout=12)
            self.assertFalse(t.is_alive())
            self.assertIsNotNone(got["jobs"], f"{job_id}: B's reserve timed out empty")
            self.assertEqual(got["jobs"][0][0], job_id.encode())
            self.assertGreaterEqual(got["at"], run_at, f"{job_id}: delivered early")
            # Well before the 10 s timeout: woken by A's announcement, not a poll.
            late = got["at"] - max(run_at, t_add)
            print(f"\n  {job_id}: handed out through B {late:.1f} ms after it was due "
                  f"(added through A)", file=sys.stderr)
            self.assertLess(late, 2000, job_id)
            self.assertEqual(ra.execute_command("FINISH", job_id, got["jobs"][0][3]), b"OK")

    def test_ttr_running_out_hands_the_job_out_again_through_another_server(self):
        rp = self.start_redis()
        a = self.start_delayq(rp, "ttr")
        b = self.start_delayq(rp, "ttr")
        ra, rb = client(a), client(b)
        self.addCleanup(ra.close)
        self.addCleanup(rb.close)
        ra.execute_command("ADD", "ttr.t", "ttr-1", 0, 300, "work")
        t0 = now_ms()
        (job1,) = ra.execute_command("RESERVE", "FROM", "ttr.t")
        t1 = now_ms()
        self.assertEqual((job1[0], job1[4]), (b"ttr-1", 1))
        receipt1 = job1[3]
        again = rb.execute_command("RESERVE", "FROM", "ttr.t")
        if now_ms() < t0 + 300:  # (only meaningful while the TTR surely runs)
            self.assertIsNone(again, "handed out again while its TTR ran")
        jobs = rb.execute_command("RESERVE", "TIMEOUT", 5000, "FROM", "ttr.t")
        t2 = now_ms()
        self.assertIsNotNone(jobs, "B never handed the job out again")
        (job2,) = jobs
        self.assertEqual((job2[0], job2[4]), (b"ttr-1", 2))
        receipt2 = job2[3]
        self.assertNotEqual(receipt1, receipt2)
        self.assertGreaterEqual(t2, t0 + 300, "handed out again before the TTR ran out")
        print(f"\n  ttr-1: handed out again through B {t2 - t1 - 300:.0f} ms after "
              f"A's 300 ms TTR ran out", file=sys.stderr)
        self.assertLess(t2 - t1, 3000)
        for r in (ra, rb):
            with self.assertRaisesRegex(redis.ResponseError, "^STALE"):
                r.execute_command("FINISH", "ttr-1", receipt1)
        info = pairs(ra.execute_command("GET", "ttr-1"))
        self.assertEqual((info["state"], info["receipt"], info["attempts"]),
                         (b"reserved", receipt2, b"2"))
        self.assertIn(b"ttr of 300 ms ran out", info["last_error"])
        self.assertEqual(ra.execute_command("FINISH", "ttr-1", receipt2), b"OK")
        self.assertIsNone(rb.execute_command("GET", "ttr-1"))
        self.assertEqual(stats(b)["jobs"], 0)


class PipeliningTest(RedisServerTestCase):
    """One connection keeps many commands in the store's rounds at once, and
    its replies still come in order (FrontEnd, "Pipelining")."""

    def script_calls(self, rp):
        r = redis.Redis(host="127.0.0.1", port=rp.port, socket_timeout=5)
        try:
            stats = r.info("commandstats")
            return sum(stats.get(k, {}).get("calls", 0) for k in ("cmdstat_evalsha", "cmdstat_eval"))
        finally:
            r.close()

    def test_pipelined_commands_share_rounds_and_reply_in_order(self):
        rp = self.start_redis()
        s = self.start_delayq(rp, "pipe", "--redis-buckets", "4")
        r = client(s)
        self.addCleanup(r.close)
        n = 300
        before = self.script_calls(rp)
        pipe = r.pipeline(transaction=False)
        for i in range(n):
            pipe.execute_command("ADD", "pipe.t", f"p{i}", 0, 30000, f"body {i}")
        self.assertEqual(pipe.execute(), [f"p{i}".encode() for i in range(n)])
        adds = self.script_calls(rp) - before
        # Parked one by one, each add would be a round of its own (n calls).
        # Kept in flight together they share a few rounds of <= 4 calls.
        self.assertLess(adds, n / 5, f"{adds} script calls for {n} pipelined adds")

        before = self.script_calls(rp)
        pipe = r.pipeline(transaction=False)
        for _ in range(n):
            pipe.execute_command("RESERVE", "TIMEOUT", 1000, "FROM", "pipe.t")
        got = pipe.execute()
        reserves = self.script_calls(rp) - before
        self.assertEqual(sorted(j[0][0] for j in got), sorted(f"p{i}".encode() for i in range(n)))
        self.assertLess(reserves, n / 5, f"{reserves} script calls for {n} pipelined reserves")
        # Best first: all priorities and run_ats are equal, so in order of adding.
        self.assertEqual([j[0][0] for j in got], [f"p{i}".encode() for i in range(n)])

        pipe = r.pipeline(transaction=False)
        for j in got:
            pipe.execute_command("FINISH", j[0][0], j[0][3])
        pipe.execute_command("GET", "p0")
        replies = pipe.execute()
        self.assertEqual(replies[:n], [b"OK"] * n)
        self.assertIsNone(replies[n])  # the GET ran after the finishes
        self.assertEqual(stats(s)["jobs"], 0)

    def test_a_reserve_sees_the_changes_pipelined_before_it(self):
        rp = self.start_redis()
        s = self.start_delayq(rp, "pipe")
        r = client(s)
        self.addCleanup(r.close)
        pipe = r.pipeline(transaction=False)
        for i in range(20):
            pipe.execute_command("ADD", "before.t", f"b{i}", 0, 30000, f"b{i}")
        pipe.execute_command("RESERVE", "TIMEOUT", 0, "COUNT", 100, "FROM", "before.t")
        replies = pipe.execute()
        self.assertEqual(sorted(j[0] for j in replies[20]), sorted(f"b{i}".encode() for i in range(20)))

    def test_what_follows_a_waiting_reserve_waits_for_it(self):
        rp = self.start_redis()
        s = self.start_delayq(rp, "pipe")
        r = client(s)
        self.addCleanup(r.close)
        # As with BLPOP: the ADD behind the RESERVE runs only once the
        # reserve has answered (empty, after its wait), so it cannot take it.
        pipe = r.pipeline(transaction=False)
        pipe.execute_command("RESERVE", "TIMEOUT", 300, "FROM", "hold.t")
        pipe.execute_command("ADD", "hold.t", "h1", 0, 30000, "h1")
        pipe.execute_command("GET", "h1")
        pipe.execute_command("QUIT")
        started = time.monotonic()
        reserved, added, info, quit_reply = pipe.execute()
        self.assertGreaterEqual(time.monotonic() - started, 0.29)
        self.assertIsNone(reserved)
        self.assertEqual(added, b"h1")
        self.assertEqual(pairs(info)["state"], b"ready")
        self.assertTrue(quit_reply)

    def test_a_call_waiting_on_redis_does_not_hold_up_other_connections(self):
        rp = self.start_redis()
        s = self.start_delayq(rp, "slow")
        a, b = client(s), client(s)
        self.addCleanup(a.close)
        self.addCleanup(b.close)
        a.execute_command("ADD", "slow.t", "s1", 0, 30000, "x")
        self.assertEqual(b.execute_command("PING"), True)
        admin = redis.Redis(host="127.0.0.1", port=rp.port, socket_timeout=5)
        self.addCleanup(admin.close)
        # Redis answers nothing for 2.5 s: far longer than any PING may take
        # below, so a loaded machine's stalls cannot pass for waiting on it
        # (and less than the server's 3 s command timeout).
        admin.execute_command("CLIENT", "PAUSE", 2500, "ALL")
        got = {}
        started = time.monotonic()
        t = threading.Thread(target=lambda: got.setdefault("job", a.execute_command("GET", "s1")))
        t.start()
        # Meanwhile another connection is served at once: the server's loop does
        # not wait for Redis on A's behalf (GET, STATS, PEEK, ... answer later).
        slowest = 0.0
        while time.monotonic() - started < 0.5:
            t0 = time.monotonic()
            self.assertEqual(b.execute_command("PING"), True)
            slowest = max(slowest, time.monotonic() - t0)
        t.join(timeout=10)
        self.assertLess(slowest, 1.0, "a PING waited for A's GET")
        self.assertGreater(time.monotonic() - started, 0.5)
        self.assertEqual(pairs(got["job"])["body"], b"x")

        # The same over HTTP: a read waiting on Redis holds up neither the
        # HTTP front end's other connections nor the RESP ones.
        admin.execute_command("CLIENT", "PAUSE", 2500, "ALL")
        got = {}

        def http_get(path):
            conn = http.client.HTTPConnection("127.0.0.1", s.http_port, timeout=10)
            try:
                conn.request("GET", path)
                resp = conn.getresponse()
                return resp.status, resp.read()
            finally:
                conn.close()

        started = time.monotonic()
        t = threading.Thread(target=lambda: got.setdefault("job", http_get("/v1/jobs/s1")))
        t.start()
        slowest = 0.0
        while time.monotonic() - started < 0.5:
            t0 = time.monotonic()
            self.assertEqual(http_get("/healthz")[0], 200)
            self.assertEqual(b.execute_command("PING"), True)
            slowest = max(slowest, time.monotonic() - t0)
        t.join(timeout=10)
        self.assertLess(slowest, 1.0, "a request waited for another's GET /v1/jobs")
        status, body = got["job"]
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["body"], "x")
        # A HEAD answered later is still a HEAD: headers, no body.
        conn = http.client.HTTPConnection("127.0.0.1", s.http_port, timeout=10)
        self.addCleanup(conn.close)
        conn.request("HEAD", "/v1/jobs/s1")
        resp = conn.getresponse()
        self.assertEqual((resp.status, resp.read()), (200, b""))
        self.assertGreater(int(resp.getheader("Content-Length")), 0)
        conn.request("GET", "/v1/jobs/s1")  # the same connection goes on
        self.assertEqual(json.loads(conn.getresponse().read())["body"], "x")

    def test_a_client_leaving_while_its_reserve_is_in_redis_holds_nobody_up(self):
        rp = self.start_redis()
        s = self.start_delayq(rp, "leave")
        b = client(s)
        self.addCleanup(b.close)
        b.execute_command("ADD", "leave.t", "l1", 0, 30000, "x")
        admin = redis.Redis(host="127.0.0.1", port=rp.port, socket_timeout=5)
        self.addCleanup(admin.close)
        # Scripts wait for 2.5 s (less than the server's 3 s command timeout);
        # CLIENT LIST still answers and shows them waiting.
        admin.execute_command("CLIENT", "PAUSE", 2500, "WRITE")
        paused_at = time.monotonic()
        sock = socket.create_connection(("127.0.0.1", s.port), timeout=10)
        # 20 long topic names besides leave.t make its script call stand out
        # among the waiting ones (a timer's promote is small): > 3,000 bytes of
        # arguments.
        topics = [b"leave.t"] + [b"leave.%03d.%s" % (i, b"x" * 140) for i in range(20)]
        argv = [b"RESERVE", b"TIMEOUT", b"5000", b"FROM"] + topics
        sock.sendall(b"*%d\r\n" % len(argv) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in argv))

        def reserve_in_redis():
            for line in admin.execute_command("CLIENT", "LIST").decode().splitlines():
                f = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
                if "b" in f.get("flags", "") and f.get("cmd") == "evalsha" \
                        and int(f.get("argv-mem", 0)) > 3000:
                    return True
            return False

        wait_until(reserve_in_redis, timeout=1.5, what="the reserve's script call waiting in Redis")
        # The client leaves while its reserve is inside a round: a reset, as
        # when a worker is killed (after a FIN the server would still write
        # the owed reply, as to a half-closed socket).
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
        # The loop does not wait for that round to learn what the reserve took.
        started = time.monotonic()
        slowest = 0.0
        while time.monotonic() - started < 0.4:
            t0 = time.monotonic()
            self.assertEqual(b.execute_command("PING"), True)
            slowest = max(slowest, time.monotonic() - t0)
        self.assertLess(slowest, 1.0, "a PING waited for the round of a client that left")
        self.assertLess(time.monotonic() - paused_at, 2.4, "the pause ended before the check")
        # Once Redis answers, the job the departed client's reserve took goes
        # back at once, not after its 30 s TTR, and that delivery nobody
        # received is not counted as an attempt.
        got = b.execute_command("RESERVE", "TIMEOUT", 8000, "FROM", "leave.t")
        self.assertIsNotNone(got, "the job did not come back")
        job_id, _, _, _, attempts, *_ = got[0]
        self.assertEqual((job_id, int(attempts)), (b"l1", 1))

    def test_the_seed_protocol_and_metrics_answer_later_too(self):
        rp = self.start_redis()
        s = self.start_delayq(rp, "seed")
        conn = http.client.HTTPConnection("127.0.0.1", s.http_port, timeout=10)
        self.addCleanup(conn.close)

        def post(cmd):
            conn.request("POST", "/command", body=json.dumps(cmd))
            resp = conn.getresponse()
            self.assertEqual(resp.status, 200)
            return json.loads(resp.read())

        self.assertEqual(post({"command": "add", "topic": "seed.t", "id": "o1", "delay": 0,
                               "TTR": 30, "body": "b1"})["id"], "o1")
        self.assertFalse(post({"command": "add", "topic": "seed.t", "id": "o1", "delay": 0,
                               "TTR": 30, "body": "b1"})["success"])  # exists
        popped = post({"command": "pop", "topic": "seed.t"})
        self.assertEqual((popped["id"], popped["value"]), ("o1", "b1"))
        self.assertEqual(post({"command": "finish", "id": "o1"}),
                         {"success": True, "error": None, "id": "o1", "value": None})
        done = post({"command": "delete", "id": "o1"})
        self.assertFalse(done["success"])
        self.assertIsNone(done["id"])
        post({"command": "add", "topic": "seed.m", "id": "m1", "delay": 60, "TTR": 30, "body": "m"})
        conn.request("GET", "/metrics")
        resp = conn.getresponse()
        text = resp.read().decode()
        self.assertEqual(resp.status, 200, text)
        self.assertIn('delayq_jobs{state="delayed"} 1', text)
        self.assertIn('delayq_topic_jobs{topic="seed.m",state="delayed"} 1', text)

    def test_the_redis_stores_own_figures_reach_stats_and_metrics(self):
        # The front ends see a store only through the serving interface: the
        # Redis store's dispatcher counts reach STATS and /metrics like the
        # embedded store's log figures do.
        rp = self.start_redis()
        s = self.start_delayq(rp, "figures")
        r = client(s, socket_timeout=10)
        self.addCleanup(r.close)
        for job_id in ("f1", "f2"):
            self.assertEqual(r.execute_command("ADD", "fig.t", job_id, 0, 30000, "b"),
                             job_id.encode())
        reply = r.execute_command("STATS")
        stats = {reply[i].decode(): reply[i + 1] for i in range(0, len(reply), 2)}
        for key in ("redis_rounds", "redis_commands", "redis_ops"):
            self.assertIn(key, stats)
        self.assertGreaterEqual(int(stats["redis_rounds"]), 2)
        self.assertGreaterEqual(int(stats["redis_ops"]), 2)
        conn = http.client.HTTPConnection("127.0.0.1", s.http_port, timeout=10)
        self.addCleanup(conn.close)
        conn.request("GET", "/metrics")
        resp = conn.getresponse()
        text = resp.read().decode()
        self.assertEqual(resp.status, 200, text)
        self.assertRegex(text, r"\ndelayq_store_redis_rounds [1-9][0-9]*\n")
        conn.request("GET", "/v1/stats")
        resp = conn.getresponse()
        body = json.loads(resp.read())
        self.assertGreaterEqual(body["redis_commands"], 2)

    def test_replies_still_owed_are_written_before_a_quit_closes(self):
        rp = self.start_redis()
        s = self.start_delayq(rp, "pipe")
        with socket.create_connection(("127.0.0.1", s.port), timeout=10) as sock:
            req = b""
            for i in range(50):
                body = b"q%d" % i
                req += b"*6\r\n$3\r\nADD\r\n$6\r\nquit.t\r\n$%d\r\n%s\r\n$1\r\n0\r\n" \
                       b"$5\r\n30000\r\n$%d\r\n%s\r\n" % (len(body), body, len(body), body)
            req += b"*1\r\n$4\r\nQUIT\r\n"
            sock.sendall(req)
            data = recv_all(sock)
        want = b"".join(b"$%d\r\nq%d\r\n" % (len(b"q%d" % i), i) for i in range(50)) + b"+OK\r\n"
        self.assertEqual(data, want)
        self.assertEqual(stats(s, "quit.t")["ready"], 50)


class FailureTest(RedisServerTestCase):

    def test_sigkill_of_one_server_mid_load_loses_nothing(self):
        rp = self.start_redis()
        servers = [self.start_delayq(rp, "kill") for _ in range(3)]
        victim, survivors = servers[0], servers[1:]
        load = Load("kill", servers, 2000, ttr=SHORT_TTR, allow_down=True)
        load.start()
        try:
            wait_until(lambda: load.acked_count >= 800 or load.errors, timeout=30,
                       what="800 acknowledged adds")
            self.assertEqual(self.kill_delayq(victim), -signal.SIGKILL)
            load.join_producers(timeout=60)
            # Everything, including what reserves lost with the victim held until
            # their TTR ran out, is handed out again by the survivors and finished.
            load.wait_drained(survivors[0], timeout=30)
        finally:
            self.assertTrue(load.stop(), "load threads did not stop")
        self.assertAlive(*survivors)
        # The threads that talked to the killed server saw it go, and only it.
        self.assertIn(victim.port, load.down)
        self.assertEqual(set(load.down), {victim.port})
        load.verify(self, survivors[0], strict=False)
        self.assertEqual(stats(survivors[1])["jobs"], 0)

    def test_redis_restart_mid_load_gives_unavailable_then_serves_again(self):
        rp = self.start_redis(aof=True)
        servers = [self.start_delayq(rp, "outage") for _ in range(2)]
        load = Load("outage", servers, 1500, ttr=SHORT_TTR, allow_unavailable=True)
        # A reserve parked on B before the outage, with a long timeout: it is
        # answered after Redis is back, when a job arrives through A (or, at
        # the latest, `unavailable` during the outage): never left hanging.
        parked = {}
        rb = client(servers[1], socket_timeout=25)
        self.addCleanup(rb.close)

        def park():
            try:
                parked["jobs"] = rb.execute_command("RESERVE", "TIMEOUT", 20000,
                                                    "FROM", "parked")
            except redis.ResponseError as e:
                parked["error"] = str(e)
            parked["at"] = time.monotonic()

        parker = threading.Thread(target=park, daemon=True)
        parker.start()
        wait_until(lambda: stats(servers[1], "parked")["waiting"] == 1, timeout=5,
                   what="the reserve to park on B")
        load.start()
        try:
            wait_until(lambda: load.acked_count >= 500 or load.errors, timeout=30,
                       what="500 acknowledged adds")
            self.assertEqual(rp.stop(), 0, rp.log()[-2000:])
            outage_started = time.monotonic()
            # Every kind of request is answered `unavailable`, promptly, by both.
            for s in servers:
                r = client(s)
                try:
                    for cmd in (("ADD", "probe", "probe-1", 0, 1000, "x"),
                                ("RESERVE", "TIMEOUT", 1000, "FROM", "probe"),
                                ("GET", "probe-1"), ("FINISH", "probe-1", "0" * 24),
                                ("STATS",), ("TOPICS",)):
                        t0 = time.monotonic()
                        with self.assertRaisesRegex(redis.ResponseError, "^UNAVAILABLE",
                                                    msg=f"{cmd[0]} on port {s.port}"):
                            r.execute_command(*cmd)
                        self.assertLess(time.monotonic() - t0, 3.0, cmd)
                    self.assertTrue(r.ping())  # the server itself is fine
                finally:
                    r.close()
            # The load's threads meet the outage too.
            # (Until they have seen it many times over: an outage of about a
            # second, so the servers' reconnects back off a few times.)
            try:
                wait_until(lambda: load.errors or (load.unavailable["add"] >= 100 and (
                    load.unavailable["reserve"] + load.unavailable["finish"]) >= 20),
                    timeout=10, what="producers and consumers to see `unavailable`")
            except AssertionError as e:
                raise AssertionError(f"{e}: {load.unavailable}") from None
            self.assertAlive(*servers)
            rp.start()
            outage = time.monotonic() - outage_started
            # Back by themselves: each server serves again without being restarted.
            for s in servers:
                r = client(s)
                try:
                    def serves():
                        try:
                            return r.execute_command("STATS") is not None
                        except redis.ResponseError as e:
                            if not str(e).startswith("UNAVAILABLE"):
                                raise
                            return False
                    wait_until(serves, timeout=15, what=f"port {s.port} to serve again")
                finally:
                    r.close()
            back_after = time.monotonic() - outage_started - outage
            ra = client(servers[0])
            self.addCleanup(ra.close)
            # The probe's ADD, refused while Redis was down, did not happen later.
            self.assertIsNone(ra.execute_command("GET", "probe-1"))
            t_add = time.monotonic()
            ra.execute_command("ADD", "parked", "parked-1", 0, 30000, "after the outage")
            parker.join(timeout=25)
            self.assertFalse(parker.is_alive(), "the parked reserve hangs")
            if "error" in parked:
                self.assertTrue(parked["error"].startswith("UNAVAILABLE"), parked)
                self.assertLess(parked["at"], t_add)
                parked_outcome = "was answered `unavailable` during the outage"
                (job,) = ra.execute_command("RESERVE", "TIMEOUT", 5000, "FROM", "parked")
                self.assertEqual(ra.execute_command("FINISH", "parked-1", job[3]), b"OK")
            else:
                self.assertIsNotNone(parked.get("jobs"), "the parked reserve timed out empty")
                self.assertEqual(parked["jobs"][0][0], b"parked-1")
                self.assertLess(parked["at"] - t_add, 3.0)
                self.assertEqual(ra.execute_command("FINISH", "parked-1", parked["jobs"][0][3]),
                                 b"OK")
                parked_outcome = (f"got the job added through A after the outage "
                                  f"{(parked['at'] - t_add) * 1000:.1f} ms later")
            load.join_producers(timeout=60)
            load.wait_drained(servers[0], timeout=30)
        finally:
            self.assertTrue(load.stop(), "load threads did not stop")
        print(f"\n  outage: Redis away {outage:.2f} s, both servers serving again "
              f"{back_after:.2f} s after it was back; the reserve parked on B "
              f"{parked_outcome}", file=sys.stderr)
        self.assertAlive(*servers)
        self.assertEqual(load.down, {})
        load.verify(self, servers[1], strict=False)

    def test_bad_redis_url_and_unreachable_redis_at_start(self):
        # A malformed URL: refused at start, naming the option and the problem.
        code, err = run_serve("--store", "redis", "--redis", "redis://127.0.0.1:notaport")
        self.assertNotEqual(code, 0, err)
        self.assertIn("redis_url", err)
        self.assertRegex(err, r"redis://127\.0\.0\.1:notaport.*port 'notaport'")
        code, err = run_serve("--store", "redis", "--redis", "http://127.0.0.1:6379")
        self.assertNotEqual(code, 0, err)
        self.assertIn("unsupported scheme 'http'", err)

        # A well-formed URL where nothing listens: `delayq serve` does not start
        # (exit 1, at once) with an `unavailable` error naming the URL; the
        # password stays out of the log. (Once running, a server outlives Redis:
        # see the restart test.)
        port = free_port()
        t0 = time.monotonic()
        code, err = run_serve("--store", "redis", "--redis",
                              f"redis://:s3cretpw@127.0.0.1:{port}")
        took = time.monotonic() - t0
        self.assertEqual(code, 1, err)
        self.assertLess(took, 5.0)
        self.assertRegex(err, rf"unavailable: .*redis://:\*\*\*@127\.0\.0\.1:{port}")
        self.assertIn("Connection refused", err)
        self.assertNotIn("s3cretpw", err)
        self.assertNotIn("serving RESP", err)

    def test_two_prefixes_on_one_redis_do_not_see_each_other(self):
        rp = self.start_redis()
        a = self.start_delayq(rp, "deploy-a")
        b = self.start_delayq(rp, "deploy-b")
        ra, rb = client(a), client(b)
        self.addCleanup(ra.close)
        self.addCleanup(rb.close)
        for i in range(20):
            ra.execute_command("ADD", "shared", f"j{i}", 0, 30000, f"a{i}")
        ra.execute_command("ADD", "shared", "later", 60000, 30000, "a-later")
        self.assertIsNone(rb.execute_command("RESERVE", "TIMEOUT", 200, "FROM", "shared"))
        self.assertIsNone(rb.execute_command("GET", "j0"))
        self.assertIsNone(rb.execute_command("PEEK", "shared", "DELAYED"))
        self.assertEqual(rb.execute_command("TOPICS"), [])
        self.assertEqual(stats(b)["jobs"], 0)
        with self.assertRaisesRegex(redis.ResponseError, "^NOTFOUND"):
            rb.execute_command("DELETE", "j1")
        # The same ids are free in B; each deployment hands out its own.
        for i in range(5):
            self.assertEqual(rb.execute_command("ADD", "shared", f"j{i}", 0, 30000, f"b{i}"),
                             f"j{i}".encode())
        got_b = rb.execute_command("RESERVE", "COUNT", 100, "FROM", "shared")
        self.assertEqual(sorted(j[2] for j in got_b), [b"b%d" % i for i in range(5)])
        # A reserve waiting on B is not woken by A's adds (the wake channel is
        # prefixed too), and B's receipts mean nothing to A's jobs.
        got = {}
        t = threading.Thread(target=lambda: got.setdefault(
            "jobs", rb.execute_command("RESERVE", "TIMEOUT", 3000, "FROM", "shared")))
        t.start()
        wait_until(lambda: stats(b, "shared")["waiting"] == 1, timeout=5,
                   what="the reserve to wait on B")
        ra.execute_command("ADD", "shared", "a-wake", 0, 30000, "a-wake")
        t.join(timeout=10)
        self.assertIsNone(got["jobs"])
        with self.assertRaisesRegex(redis.ResponseError, "^NOTRESERVED"):
            ra.execute_command("FINISH", "j0", "FORCE")
        with self.assertRaisesRegex(redis.ResponseError, "^STALE"):
            ra.execute_command("FINISH", "j0", got_b[0][3])
        got_a = ra.execute_command("RESERVE", "COUNT", 100, "FROM", "shared")
        self.assertEqual(sorted(j[2] for j in got_a),
                         sorted([b"a%d" % i for i in range(20)] + [b"a-wake"]))
        for j in got_b:
            self.assertEqual(rb.execute_command("FINISH", j[0], j[3]), b"OK")
        self.assertEqual(stats(b)["jobs"], 0)
        self.assertEqual(stats(a)["jobs"], 22)  # 21 reserved, 1 delayed
        self.assertEqual(stats(a)["reserved"], 21)


if __name__ == "__main__":
    harness.main(setup=lambda args: print(
        f"redis_server_test: seed {SEED} (replay with DELAYQ_ITR_SEED={SEED})", file=sys.stderr))
