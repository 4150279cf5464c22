"""What the Redis-store black-box tests share (redis_server_test.py,
redis_failover_test.py): redis-server processes on free loopback ports,
the delayq servers on them, and the Load of producers and consumers that
writes down what every client was told, for the checks after it.

Every process started here is ended by PID: by the test's cleanups, and at
exit by _kill_leftovers for whatever a failed test left."""
import atexit
import base64
import http.client
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse
import zlib

sys.dont_write_bytecode = True  # no __pycache__ in the source tree

import redis  # noqa: E402

from harness import Server, wait_until  # noqa: E402

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
    stop() and start() again reuse the port and the directory (and so the AOF).
    args: more redis-server options for every start (the caller may change
    self.args before a start again, e.g. to restart a master as a replica)."""

    def __init__(self, aof=False, args=()):
        self.dir = tempfile.mkdtemp(prefix="delayq-itr-redis-")
        self.aof = aof
        self.args = [str(a) for a in args]
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

    @property
    def address(self):
        return "127.0.0.1:%d" % self.port

    def command(self):
        """The redis-server command line of a start."""
        args = [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", self.dir, "--save", "", "--daemonize", "no",
                "--logfile", os.path.join(self.dir, "redis.log")]
        args += (["--appendonly", "yes", "--appendfsync", "always"] if self.aof
                 else ["--appendonly", "no"])
        return args + self.args

    def start(self, timeout=15.0):
        self.proc = subprocess.Popen(self.command(), stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        _started.append(self.proc)
        wait_until(self._up, timeout, f"redis-server on port {self.port} to answer PING")

    def client(self, timeout=1.0):
        """A redis-py client of this server (the caller closes it)."""
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=timeout,
                           socket_connect_timeout=timeout)

    def _up(self):
        if self.proc.poll() is not None:
            raise RuntimeError(f"redis-server exited with {self.proc.returncode}: "
                               f"{self.log()[-2000:]}")
        r = self.client()
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
            self.proc.send_signal(signal.SIGCONT)  # one a test stopped (SIGSTOP) too
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def kill(self):
        """SIGKILL by PID (a crash: nothing more is written), then the exit code."""
        if self.proc.poll() is None:
            self.proc.kill()
        return self.proc.wait(timeout=10)

    def signal(self, sig):
        """Sends `sig` (SIGSTOP, SIGCONT) to it by PID, if it runs."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class RedisServerTestCase(unittest.TestCase):
    """Starts redis-servers and delayq servers, each stopped by a cleanup."""

    def start_redis(self, aof=False, args=()):
        r = RedisProcess(aof=aof, args=args)
        self.addCleanup(r.cleanup)
        return r

    def start_delayq(self, redis_proc, prefix, *extra):
        """`delayq serve --store redis` on redis_proc.url (a RedisProcess, or
        anything with a URL: a cluster, sentinels)."""
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


# HTTP error codes (docs/api.md, "Error codes") as RESP names them.
RESP_CODE = {"not_found": "NOTFOUND", "stale_receipt": "STALE", "not_reserved": "NOTRESERVED",
             "exists": "EXISTS", "unavailable": "UNAVAILABLE", "invalid_argument": "INVALID",
             "too_large": "TOOLARGE"}


class HttpError(Exception):
    """An HTTP error answer, its text as RESP's would begin: "NOTFOUND job ..."."""

    def __init__(self, status, body):
        try:
            error = json.loads(body)["error"]
            text = f"{RESP_CODE.get(error['code'], error['code'])} {error['message']}"
        except (ValueError, KeyError, TypeError):
            text = f"HTTP {body[:200]!r}"
        super().__init__(f"{text} (HTTP {status})")
        self.status = status


def body_bytes(job):
    """The body of an HTTP job object as bytes ("body" or "body_base64")."""
    if "body" in job:
        return job["body"].encode()
    return base64.b64decode(job["body_base64"])


class Load:
    """Producers add jobs with unique ids through random servers (delays 0-300 ms,
    half of them as `delay_ms`, half as `AT run_at_ms`); consumers reserve from
    random servers and finish each job with its receipt through a random server.
    What was acknowledged, what was in flight and every delivery are written down
    for verify().

    http_share: the share of requests sent over HTTP (POST /v1/jobs, /v1/reserve,
    /v1/jobs/{id}/finish) instead of RESP, chosen request by request.

    A server that drops a connection (`down`) is avoided by that thread from then
    on; a request it had in flight stays a maybe. An `UNAVAILABLE` answer (Redis
    away) leaves the request a maybe too, and the thread retries after a poll
    interval. Either is only accepted when the test allows it.

    allow_loss: Redis may have lost changes the clients were told of (a failover
    without WAIT): a FINISH answered NOTFOUND, STALE or NOTRESERVED is written
    down in finish_refused instead of being an error."""

    def __init__(self, tag, servers, jobs, producers=4, consumers=6, ttr=LONG_TTR,
                 max_delay=300, allow_down=False, allow_unavailable=False, http_share=0.0,
                 allow_loss=False, seed=SEED):
        self.tag = tag
        self.servers = list(servers)
        self.ports = [s.port for s in servers]
        self.http_ports = {s.port: s.http_port for s in servers}
        self.jobs = jobs
        self.n_producers = producers
        self.n_consumers = consumers
        self.ttr = ttr
        self.max_delay = max_delay
        self.allow_down = allow_down
        self.allow_unavailable = allow_unavailable
        self.http_share = http_share
        self.allow_loss = allow_loss
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.stop_producers = threading.Event()
        self.stop_consumers = threading.Event()
        self.abort = threading.Event()  # stop(): no more retries of finishes either
        # what the clients know
        self.planned = {}          # id -> earliest run_at the add can have (ms); set before sending
        self.exact_run_at = set()  # ids added with AT (planned is their exact run_at)
        self.acked = set()         # ADD answered with the id
        self.acked_at = {}         # id -> when its ADD was answered (ms)
        self.maybe_added = set()   # ADD sent, no answer or unavailable
        self.unavailable_at = {}   # id -> when its ADD was answered UNAVAILABLE
        self.deliveries = {}       # id -> [(t_sent, t_received, receipt, attempts, port)]
        self.finished = {}         # id -> when FINISH answered OK (consumer clock)
        self.finish_unsure = set() # FINISH in flight lost, then NOTFOUND on retry
        self.finish_stale = 0      # FINISH answered STALE after the TTR could run out
        self.finish_refused = {}   # allow_loss: id -> the FINISH's NOTFOUND/STALE/NOTRESERVED
        self.in_hand = 0           # delivered, finish not settled yet
        self.lost_reserve_slots = 0  # COUNT of reserves whose answer was lost
        self.acked_count = 0
        # what happened
        self.errors = []           # anything a healthy server must not do
        self.down = {}             # port -> connection errors seen
        self.unavailable = {"add": 0, "reserve": 0, "finish": 0}
        self.last_unavailable = {}  # "add"/"reserve"/"finish" -> when last answered so (ms)
        self.last_unavailable_reply = {}  # "add"/... -> (port, the reply) of that answer
        self.max_request_ms = (0.0, None)
        self.ops = 0
        self.http_ops = 0
        self.adds_by_port = {p: 0 for p in self.ports}
        self.reserves_by_port = {p: 0 for p in self.ports}
        self.threads = []
        self.consumer_threads = []

    # -- plumbing

    def error(self, text):
        with self.lock:
            if len(self.errors) < 50:
                self.errors.append(text)

    def call(self, conns, port, *args):
        """A RESP command: ('ok', reply) | ('down', exc) | ('unavailable', exc) |
        ('error', exc)."""
        def send():
            r = conns.get(port)
            if r is None:
                r = conns[port] = redis.Redis(host="127.0.0.1", port=port, socket_timeout=10,
                                              socket_connect_timeout=5)
            try:
                return ("ok", r.execute_command(*args))
            except redis.TimeoutError as e:  # 10 s without an answer: a hang
                return ("error", e)
            except redis.ConnectionError as e:
                return ("down", e)
            except redis.ResponseError as e:
                return ("unavailable" if str(e).startswith("UNAVAILABLE") else "error", e)
        return self.timed(port, args[0], send)

    def call_http(self, conns, port, path, payload):
        """POST `payload` as JSON to `path` on the HTTP port of the server whose
        RESP port is `port`: as call(), the reply as parsed JSON, an error
        answer as an HttpError (503: 'unavailable')."""
        def send():
            conn = conns.get(("http", port))
            if conn is None:
                conn = conns[("http", port)] = http.client.HTTPConnection(
                    "127.0.0.1", self.http_ports[port], timeout=10)
            try:
                conn.request("POST", path, body=json.dumps(payload),
                             headers={"Content-Type": "application/json"})
                resp = conn.getresponse()
                status, body = resp.status, resp.read()
            except (OSError, http.client.HTTPException) as e:
                conns.pop(("http", port)).close()
                # 10 s without an answer is a hang; anything else a lost connection.
                return ("error" if isinstance(e, TimeoutError) else "down", e)
            if 200 <= status < 300:
                return ("ok", json.loads(body))
            return ("unavailable" if status == 503 else "error", HttpError(status, body))
        with self.lock:
            self.http_ops += 1
        return self.timed(port, "POST " + path.split("/")[2], send)

    def timed(self, port, name, send):
        """Runs send() (a call's request), timing it and noting what it answered."""
        t0 = time.monotonic()
        result = send()
        took = (time.monotonic() - t0) * 1000
        with self.lock:
            self.ops += 1
            if took > self.max_request_ms[0]:
                self.max_request_ms = (took, name)
        status, value = result
        if status == "down":
            with self.lock:
                self.down[port] = self.down.get(port, 0) + 1
            if not self.allow_down:
                self.error(f"{name} on port {port}: connection lost: {value!r}")
        elif status == "unavailable" and not self.allow_unavailable:
            self.error(f"{name} on port {port}: {value}")
        elif status == "error" and isinstance(value, (redis.TimeoutError, TimeoutError)):
            self.error(f"{name} on port {port}: no answer within 10 s (a hang)")
        return result

    def over_http(self, rng):
        return self.http_share > 0 and rng.random() < self.http_share

    def add(self, conns, port, rng, job_id, delay, run_at, exact):
        """Adds job_id (AT run_at if exact, else after delay ms): as call(), the
        reply the id (bytes) when it succeeded."""
        if self.over_http(rng):
            job = {"topic": topic_of(job_id), "id": job_id, "ttr_ms": self.ttr,
                   "body_base64": base64.b64encode(body_of(job_id)).decode()}
            job.update({"run_at_ms": run_at} if exact else {"delay_ms": delay})
            status, reply = self.call_http(conns, port, "/v1/jobs", job)
            return (status, reply["id"].encode()) if status == "ok" else (status, reply)
        if exact:
            return self.call(conns, port, "ADD", topic_of(job_id), job_id, 0, self.ttr,
                             body_of(job_id), "AT", run_at)
        return self.call(conns, port, "ADD", topic_of(job_id), job_id, delay, self.ttr,
                         body_of(job_id))

    def reserve(self, conns, port, rng, count):
        """Reserves up to `count` jobs of TOPICS, waiting up to 200 ms: as call(),
        the reply a list of (id, topic, body, receipt, attempts), the id a str."""
        if self.over_http(rng):
            status, reply = self.call_http(conns, port, "/v1/reserve",
                                           {"topics": list(TOPICS), "wait_ms": 200,
                                            "count": count})
            if status != "ok":
                return status, reply
            return status, [(j["id"], j["topic"].encode(), body_bytes(j), j["receipt"].encode(),
                             j["attempts"]) for j in reply["jobs"]]
        status, reply = self.call(conns, port, "RESERVE", "TIMEOUT", 200, "COUNT", count,
                                  "FROM", *TOPICS)
        if status != "ok":
            return status, reply
        return status, [(j[0].decode(), *j[1:5]) for j in reply or []]

    def finish_call(self, conns, port, rng, job_id, receipt):
        """FINISHes job_id with `receipt`: as call(), the reply b"OK" when it succeeded."""
        if self.over_http(rng):
            status, reply = self.call_http(
                conns, port, f"/v1/jobs/{urllib.parse.quote(job_id, safe='')}/finish",
                {"receipt": receipt.decode()})
            return (status, b"OK" if reply == {"ok": True} else reply) if status == "ok" \
                else (status, reply)
        return self.call(conns, port, "FINISH", job_id, receipt)

    def note_unavailable(self, kind, port, reply):
        with self.lock:
            self.unavailable[kind] += 1
            self.last_unavailable[kind] = now_ms()
            self.last_unavailable_reply[kind] = (port, reply)

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
                run_at = int(now_ms()) + delay  # with a delay, the server's is at least this
                exact = rng.random() < 0.5
                with self.lock:
                    self.planned[job_id] = run_at
                    if exact:
                        self.exact_run_at.add(job_id)
                    self.maybe_added.add(job_id)
                status, reply = self.add(conns, port, rng, job_id, delay, run_at, exact)
                if status == "ok":
                    if reply != job_id.encode():
                        self.error(f"ADD {job_id} answered {reply!r}")
                    with self.lock:
                        self.maybe_added.discard(job_id)
                        self.acked.add(job_id)
                        self.acked_at[job_id] = now_ms()
                        self.acked_count += 1
                        self.adds_by_port[port] += 1
                    made += 1
                elif status == "down":
                    alive.remove(port)
                elif status == "unavailable":
                    self.note_unavailable("add", port, reply)
                    with self.lock:
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
                status, jobs = self.reserve(conns, port, rng, count)
                t1 = now_ms()
                if status != "ok":
                    # The reserve may have taken jobs whose answer is lost: they
                    # stay reserved until their TTR runs out.
                    with self.lock:
                        self.lost_reserve_slots += count
                    if status == "down":
                        alive.remove(port)
                    elif status == "unavailable":
                        self.note_unavailable("reserve", port, jobs)
                        self.retry_pause()
                    else:
                        self.error(f"RESERVE on port {port}: {jobs!r}")
                    continue
                got = []
                with self.lock:
                    self.reserves_by_port[port] += 1
                    for job_id, topic, body, receipt, attempts in jobs:
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
            status, reply = self.finish_call(conns, port, rng, job_id, receipt)
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
                self.note_unavailable("finish", port, reply)
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
            elif self.allow_loss and str(reply).startswith(("NOTFOUND", "STALE", "NOTRESERVED")):
                with self.lock:
                    self.finish_refused[job_id] = str(reply).split()[0]
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

    def acked_after(self, t_ms):
        """How many adds were acknowledged after t_ms (Unix ms)."""
        with self.lock:
            return sum(t > t_ms for t in self.acked_at.values())

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

    def delivery_faults(self):
        """What the deliveries show against what the clients were told, each a
        list: jobs delivered that nobody added ("strangers"), deliveries before
        run_at ("early"), second deliveries within the first's TTR ("dup": id,
        the two receipts, ms between), deliveries after an acknowledged finish
        ("came_back"), and ADDs answered UNAVAILABLE but done after that answer
        ("late_adds"). Once the threads have stopped."""
        early, dup, strangers, came_back = [], [], [], []
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
            ds = sorted(ds)
            for first, second in zip(ds, ds[1:]):
                # A second delivery is only allowed once the first reservation's
                # TTR has run out; that reservation began after first's t_sent.
                if second[1] < first[0] + self.ttr - 1:
                    dup.append((job_id, first[2], second[2], round(second[1] - first[0])))
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
        return {"strangers": strangers, "early": early, "dup": dup, "came_back": came_back,
                "late_adds": late_adds}

    def lookup(self, server, ids=None):
        """GET of each id (default: every id an add was sent for) through
        `server`, pipelined: {id: the job's fields} of those it finds."""
        ids = sorted(self.planned if ids is None else ids)
        r = client(server, socket_timeout=30)
        try:
            pipe = r.pipeline(transaction=False)
            for job_id in ids:
                pipe.execute_command("GET", job_id)
            return {job_id: pairs(flat) for job_id, flat in zip(ids, pipe.execute())
                    if flat is not None}
        finally:
            r.close()

    def verify(self, test, live_server, strict):
        """After drained(): every acknowledged add was delivered and finished,
        none was delivered twice within its TTR nor before its run_at, no
        acknowledged finish came back, and nothing is left in Redis.

        strict: nothing went wrong (no server down, Redis never away), so there
        is no add in flight, no lost reserve answer, and each job was delivered
        exactly once, at its first attempt."""
        test.assertEqual(self.errors, [], f"{self.tag}: unexpected answers (seed {SEED})")
        test.assertFalse(any(t.is_alive() for t in self.threads + self.consumer_threads))

        faults = self.delivery_faults()
        test.assertEqual(faults["strangers"], [], f"{self.tag}: delivered jobs nobody added")
        test.assertEqual(faults["early"], [], f"{self.tag}: delivered before run_at "
                                              "(id, run_at, ms early, port)")
        test.assertEqual(faults["dup"], [], f"{self.tag}: delivered twice within the TTR "
                                            "(id, receipts, ms between)")
        test.assertEqual(faults["came_back"], [],
                         f"{self.tag}: delivered after an acknowledged finish")
        test.assertEqual(faults["late_adds"], [], f"{self.tag}: ADDs answered UNAVAILABLE and "
                                                  "done later (id, ms after the answer)")

        # What Redis holds now, through a live server: nothing.
        present = self.lookup(live_server)
        st = stats(live_server)
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
            test.assertEqual(sum(len(d) - 1 for d in self.deliveries.values()), 0)
            test.assertTrue(all(ds[0][3] == 1 for ds in self.deliveries.values()))
        print(self.summary(), file=sys.stderr, flush=True)
        test.assertLess(self.max_request_ms[0], REQUEST_LIMIT_MS,
                        f"{self.tag}: a request took {self.max_request_ms}")

    def summary(self):
        """One paragraph on what the load did, for the test's output."""
        lateness = sorted(ds[0][1] - self.planned[i] for i, ds in self.deliveries.items()
                          if i in self.planned)

        def pct(p):
            return lateness[min(len(lateness) - 1, int(p * len(lateness)))] if lateness else 0
        redelivered = sum(len(d) - 1 for d in self.deliveries.values())
        taken_by_lost = sum(1 for d in self.deliveries.values() if min(d)[3] > 1)
        took = time.monotonic() - self.started_at
        return (f"\n  {self.tag}: {self.acked_count} adds acknowledged, {len(self.maybe_added)} "
                f"in flight ({len(set(self.deliveries) & self.maybe_added)} of them made it), "
                f"{len(self.exact_run_at)} of all with AT, "
                f"{sum(len(d) for d in self.deliveries.values())} deliveries "
                f"({redelivered} again after a TTR ran out, {taken_by_lost} first seen at a "
                f"later attempt), {len(self.finished)} finishes OK, "
                f"{len(self.finish_unsure)} settled by a lost answer, {self.finish_stale} STALE "
                f"after the TTR; {took:.1f} s ({self.ops / took:.0f} requests/s, "
                f"{self.http_ops} over HTTP); first-delivery lateness (consumer clock - run_at) "
                f"p50 {pct(0.5):.1f} ms, p99 {pct(0.99):.1f} ms, max {pct(1.0):.1f} ms; adds by "
                f"port {self.adds_by_port}, reserves by port {self.reserves_by_port}; connection "
                f"errors {self.down}, unavailable {self.unavailable}, lost reserve answers "
                f"{self.lost_reserve_slots} slots; slowest request "
                f"{self.max_request_ms[0]:.0f} ms ({self.max_request_ms[1]})")
