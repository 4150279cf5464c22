#!/usr/bin/env python3
"""The crash test of issue 4: `delayq serve --fsync always` is killed with
SIGKILL at a random moment while client threads add, reserve and finish
jobs, then started again on the same data directory, many times over. After
each restart:

- every acknowledged add that was not acknowledged-finished is there, with
  its exact body (and, if its reservation was acknowledged, still reserved
  with that receipt — which then finishes it);
- no acknowledged finish came back;
- nothing else is there: the store holds exactly the jobs the clients know
  of. Operations in flight at the kill (sent, no reply) may go either way.

The data directory carries over from round to round, so state accumulates,
segments roll (--segment-bytes 65536) and compaction runs between kills.

    /usr/bin/python3 tests/integration/crash_test.py --binary build/bin/delayq

DELAYQ_CRASH_SEED=n replays the random choices of a run (the kill points
are counted in acknowledged operations, so a replay kills at about the same
count,
though thread interleaving differs); DELAYQ_CRASH_ROUNDS=n sets the number of
kills of the --fsync always test (default 40; the everysec one does a
quarter as many).
"""
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
import unittest

import redis

import harness
from harness import Server, wait_until

THREADS = 8
HOUR = 3_600_000
TTR = 600_000  # no reservation runs out during the test
SEGMENT_BYTES = 65536
BODY_SIZES = [0, 1, 16, 100, 700, 3000, 12000]
SEED = int(os.environ.get("DELAYQ_CRASH_SEED") or random.SystemRandom().getrandbits(32))
ROUNDS = int(os.environ.get("DELAYQ_CRASH_ROUNDS") or 40)


class Worker:
    """One client thread's jobs, on its own topic, and what it knows of
    them. Only its own thread changes it while a round runs."""

    def __init__(self, index, near_delays=False):
        self.index = index
        # With a memory window: some delayed adds fall due seconds later, so
        # they are added far, brought back near and handed out across kills.
        self.near_delays = near_delays
        self.due = {}            # id -> client clock ms at or after which it may be handed out
        self.topic = "crash.t%d" % index
        self.live = {}           # id -> body: add acknowledged, no acknowledged finish
        self.delayed = set()     # ids in live added with a long delay
        self.reserved = {}       # id -> receipt: reservation acknowledged (or adopted)
        self.finished = set()    # finish acknowledged
        self.maybe_added = {}    # id -> body: add sent, no reply
        self.maybe_finished = {} # id -> receipt: finish sent, no reply
        self.maybe_reserving = False  # a RESERVE was sent, no reply
        self.acked = 0           # acknowledged operations this round
        self.error = None        # anything but the connection dying at the kill
        self.serial = 0

    def run_round(self, port, rnd, rng, stop):
        r = None
        try:
            # (This connects at once: the kill may already have happened.)
            r = redis.Redis(host="127.0.0.1", port=port, socket_timeout=20,
                            single_connection_client=True)
            while not stop.is_set():
                self.step(r, rnd, rng)
        except redis.ConnectionError:
            pass  # the kill: whatever was in flight stays a maybe
        except Exception as e:  # noqa: BLE001 - reported by the main thread
            self.error = e
        finally:
            try:
                if r is not None:
                    r.close()
            except Exception:  # noqa: BLE001
                pass

    def step(self, r, rnd, rng):
        x = rng.random()
        if self.reserved and x < 0.35:
            job_id = rng.choice(list(self.reserved))
            receipt = self.reserved.pop(job_id)
            self.maybe_finished[job_id] = receipt
            reply = r.execute_command("FINISH", job_id, receipt)
            if reply != b"OK":
                raise AssertionError(f"FINISH {job_id} answered {reply!r}")
            del self.maybe_finished[job_id]
            del self.live[job_id]
            self.finished.add(job_id)
        elif x < 0.55:
            self.maybe_reserving = True
            jobs = r.execute_command("RESERVE", "COUNT", rng.randint(1, 4), "FROM", self.topic)
            self.maybe_reserving = False
            for job_id, topic, body, receipt, attempts, *_ in jobs or []:
                job_id = job_id.decode()
                if topic.decode() != self.topic or self.live.get(job_id) != body:
                    raise AssertionError(f"RESERVE handed out {job_id} {topic!r} with a body "
                                         f"that was not added: {body[:60]!r}")
                if job_id in self.reserved or (job_id in self.delayed
                                               and not self.may_be_due(job_id)):
                    raise AssertionError(
                        f"RESERVE handed out {job_id}, which is "
                        f"{'reserved' if job_id in self.reserved else 'delayed'} (due at "
                        f"{self.due.get(job_id)}, now {time.time() * 1000:.0f}; never early)")
                self.delayed.discard(job_id)
                self.reserved[job_id] = receipt
        else:
            self.serial += 1
            job_id = "r%d.t%d.%d" % (rnd, self.index, self.serial)
            body = job_id.encode() + b"|" + rng.randbytes(rng.choice(BODY_SIZES))
            # With a window, far jobs are most of the store (a stop writes
            # a checkpoint only then).
            delay = HOUR if rng.random() < (0.6 if self.near_delays else 0.1) else 0
            if delay and self.near_delays and rng.random() < 0.3:
                delay = rng.randint(1500, 4000)
            if delay:
                # The server's run_at is its clock in whole ms (read after this) + delay.
                self.due[job_id] = int(time.time() * 1000) + delay
            self.maybe_added[job_id] = body
            reply = r.execute_command("ADD", self.topic, job_id, delay, TTR, body)
            if reply != job_id.encode():
                raise AssertionError(f"ADD {job_id} answered {reply!r}")
            del self.maybe_added[job_id]
            self.live[job_id] = body
            if delay:
                self.delayed.add(job_id)
        self.acked += 1

    def may_be_due(self, job_id):
        return time.time() * 1000 >= self.due.get(job_id, 0)


class CrashTest(unittest.TestCase):
    def test_sigkill_loses_no_acknowledged_operation(self):
        self.crash_rounds("always", ROUNDS)

    def test_sigkill_under_everysec_loses_nothing_either(self):
        # SPEC section 4: everysec "survives a killed process" (a reply
        # leaves after the write(2); only the fdatasync is once a second).
        self.crash_rounds("everysec", max(1, ROUNDS // 4))

    def test_sigterm_under_load_loses_nothing_and_exits_cleanly(self):
        # The same workload ended by SIGTERM instead: a drain, not a crash.
        self.crash_rounds("everysec", max(1, ROUNDS // 8), how="term")

    # With a memory window of a second and a time index of 64 entries in
    # memory: delayed jobs live in the log only, runs are sealed every few
    # adds and far jobs are brought back near all along, so kills land
    # amid seals and loads; a SIGTERM leaves a checkpoint the next start
    # resumes from, and checkpoints are written while serving every 256 KiB
    # of log, so kills land amid those too and starts resume from them.
    WINDOW = ("--memory-window", "1s", "--far-index-memory-entries", "64",
              "--far-checkpoint-bytes", "262144")

    def test_sigkill_amid_far_jobs_sealed_and_loaded_loses_nothing(self):
        self.crash_rounds("always", max(1, ROUNDS // 2), window=True)

    def test_sigterm_amid_far_jobs_resumes_from_the_checkpoint_losing_nothing(self):
        self.crash_rounds("everysec", max(1, ROUNDS // 4), how="term", window=True)

    def crash_rounds(self, fsync, rounds, how="kill", window=False):
        seed = SEED
        print(f"\ncrash_test: --fsync {fsync}, {how}, seed {seed}, {rounds} rounds"
              f"{', memory window' if window else ''} (replay with DELAYQ_CRASH_SEED={seed})",
              file=sys.stderr, flush=True)
        rng = random.Random(seed)
        tmp = tempfile.mkdtemp(prefix="delayq-crash-")
        self.addCleanup(shutil.rmtree, tmp, True)
        data_dir = os.path.join(tmp, "data")
        flags = ("--fsync", fsync, "--segment-bytes", SEGMENT_BYTES) + (self.WINDOW if window
                                                                         else ())
        workers = [Worker(i, near_delays=window) for i in range(THREADS)]
        started = time.monotonic()
        killed_with = []
        checkpoints = 0  # stops that left a far-future checkpoint
        resumed = 0  # starts that resumed from one
        kept = False
        totals = {"log_bytes": 0, "log_syncs": 0, "removed_segments": 0, "rewritten_bytes": 0}
        if window:
            totals.update({"far_index_seals": 0, "far_loads": 0, "far_checkpoints": 0})

        server = Server(*flags, data_dir=data_dir)
        self.addCleanup(lambda s=server: s.proc.poll() is not None or s.kill())
        for rnd in range(rounds):
            # Kill after a random number of acknowledged operations, so the
            # kill lands anywhere: before any, amid adds, finishes, segment
            # rolls and compaction.
            target = rng.choice([0, rng.randint(1, 50), rng.randint(50, 500),
                                 rng.randint(500, 5000)])
            stop = threading.Event()
            for w in workers:
                w.acked = 0
            threads = [threading.Thread(target=w.run_round,
                                        args=(server.port, rnd,
                                              random.Random(rng.getrandbits(64)), stop))
                       for w in workers]
            for t in threads:
                t.start()
            try:
                wait_until(lambda: sum(w.acked for w in workers) >= target
                           or any(w.error for w in workers) or server.proc.poll() is not None,
                           timeout=60, what=f"{target} acknowledged operations")
                st = server.stats()  # a millisecond or two: traffic goes on
                for k in totals:
                    totals[k] += st[k]
            finally:
                stop.set()
                self.assertIsNone(server.proc.poll(),
                                  f"round {rnd}: the server died on its own: {server.text}")
                if how == "kill":
                    self.assertEqual(server.kill(keep_data=True), -signal.SIGKILL)
                else:
                    self.assertEqual(server.stop(keep_data=True), 0, server.text)
                    kept = "far jobs kept" in server.text
                    checkpoints += kept
                for t in threads:
                    t.join(timeout=30)
            self.assertFalse(any(t.is_alive() for t in threads))
            for w in workers:
                self.assertIsNone(w.error, f"round {rnd}, worker {w.index}: {w.error!r} "
                                  f"(seed {seed})")
            killed_with.append(sum(w.acked for w in workers))

            server = Server(*flags, data_dir=data_dir)
            self.addCleanup(lambda s=server: s.proc.poll() is not None or s.kill())
            self.check(server, workers, f"after kill {rnd + 1} (seed {seed})")
            self.assertNotIn("checkpoint not used", server.text)
            if how == "term" and kept:  # the start resumed from it
                self.assertIn("far jobs restored", server.text)
            resumed += "far jobs restored" in server.text

        st = server.stats()
        self.assertEqual(server.stop(), 0, server.text)
        # A clean stop after all that comes back the same too.
        server = Server(*flags, data_dir=data_dir)
        self.addCleanup(lambda s=server: s.proc.poll() is not None or s.kill())
        self.check(server, workers, f"after the final clean stop (seed {seed})")
        self.assertEqual(server.stop(), 0, server.text)
        print(f"crash_test: {rounds} {how}s after {killed_with} acknowledged operations; "
              f"{sum(len(w.live) for w in workers)} jobs live, "
              f"{sum(len(w.finished) for w in workers)} finished; the killed servers wrote "
              f"{totals['log_bytes']} bytes in {totals['log_syncs']} fdatasyncs, "
              f"compaction rewrote {totals['rewritten_bytes']} bytes and removed "
              f"{totals['removed_segments']} segments; at the end {st['log_segments']} "
              f"segments, {st['disk_bytes']} bytes on disk; "
              f"{time.monotonic() - started:.1f} s", file=sys.stderr)
        if window:
            print(f"crash_test: far jobs: {totals['far_index_seals']} runs sealed, "
                  f"{totals['far_loads']} brought back near; {totals['far_checkpoints']} "
                  f"checkpoints written while serving, {checkpoints} stops left one; "
                  f"{resumed} of {rounds} starts resumed from one", file=sys.stderr)
            if how == "term" and rounds >= 4:
                self.assertGreater(checkpoints, 0)
            # What the workload must have reached when it ran long enough:
            # ~4 % of the operations are far adds (64 of them seal a run),
            # and the nearest fall due 1.5 s after their add.
            if sum(killed_with) >= 5000:
                self.assertGreater(totals["far_index_seals"], 0)
                # Checkpoints written while serving: kills' restarts resume too.
                self.assertGreater(totals["far_checkpoints"], 0)
                if how == "kill" and rounds >= 8:
                    self.assertGreater(resumed, 0)
            if time.monotonic() - started >= 10:
                self.assertGreater(totals["far_loads"], 0)

    def check(self, server, workers, when):
        """Compares the restarted store with what the workers know, settles
        what was in flight at the kill, and adopts the outcome."""
        r = redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=30)
        expected = 0
        for w in workers:
            ids = (list(w.live) + list(w.maybe_added) + list(w.finished))
            pipe = r.pipeline(transaction=False)
            for job_id in ids:
                pipe.execute_command("GET", job_id)
            found = {}
            for job_id, flat in zip(ids, pipe.execute()):
                found[job_id] = None if flat is None else {
                    k.decode(): v for k, v in zip(flat[::2], flat[1::2])}

            for job_id in w.finished:
                self.assertIsNone(found[job_id],
                                  f"{when}: acknowledged finish of {job_id} came back")
            for job_id, body in w.maybe_added.items():
                info = found[job_id]
                if info is not None:  # the add made it: now a job like any other
                    self.assertEqual(info["body"], body, f"{when}: {job_id} (add in flight)")
                    w.live[job_id] = body
                    if info["state"] == b"delayed":
                        w.delayed.add(job_id)
            w.maybe_added.clear()
            for job_id, receipt in w.maybe_finished.items():
                info = found[job_id]
                if info is None:  # the finish made it
                    del w.live[job_id]
                    w.finished.add(job_id)
                else:
                    self.assertEqual((info["state"], info["receipt"]), (b"reserved", receipt),
                                     f"{when}: {job_id} (finish in flight)")
                    w.reserved[job_id] = receipt
            w.maybe_finished.clear()

            for job_id, body in w.live.items():
                info = found[job_id]
                self.assertIsNotNone(info, f"{when}: acknowledged add of {job_id} was lost")
                self.assertEqual((info["topic"], info["body"]), (w.topic.encode(), body),
                                 f"{when}: {job_id}")
                if job_id in w.reserved:
                    self.assertEqual((info["state"], info["receipt"]),
                                     (b"reserved", w.reserved[job_id]),
                                     f"{when}: acknowledged reservation of {job_id}")
                elif job_id in w.delayed and not w.may_be_due(job_id):
                    self.assertEqual(info["state"], b"delayed", f"{when}: {job_id}")
                elif info["state"] == b"reserved" and w.maybe_reserving:
                    w.reserved[job_id] = info["receipt"]  # the reserve in flight took it
                    w.delayed.discard(job_id)
                elif job_id in w.delayed:  # due by now, or about to be
                    self.assertIn(info["state"], (b"delayed", b"ready"), f"{when}: {job_id}")
                else:
                    self.assertEqual(info["state"], b"ready", f"{when}: {job_id}")
            w.maybe_reserving = False
            expected += len(w.live)

        # Nothing else: no finished job, no double, no stranger.
        stats = r.execute_command("STATS")
        jobs = int(dict(zip(stats[::2], stats[1::2]))[b"jobs"])
        self.assertEqual(jobs, expected, f"{when}: the store holds {jobs} jobs, "
                         f"the clients know of {expected}")
        self.assertIn(f"recovered {expected} jobs", server.text, when)
        r.close()


class DamageTest(unittest.TestCase):
    """Damage amid acknowledged records (issue 23, item 10), black-box: the
    refusal names what to run, and `delayq serve --repair` runs it."""

    def test_a_flipped_length_bit_refuses_and_repair_keeps_every_record_after_it(self):
        scratch = tempfile.mkdtemp(prefix="delayq-damage-")
        self.addCleanup(shutil.rmtree, scratch, ignore_errors=True)
        data_dir = os.path.join(scratch, "data")
        server = Server("--fsync", "always", data_dir=data_dir)
        self.addCleanup(lambda: server.proc.poll() is not None or server.kill())
        r = redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=30)
        ids = ["job-%02d" % i for i in range(50)]
        for job_id in ids:
            r.execute_command("ADD", "dmg", job_id, 0, TTR, b"body of " + job_id.encode())
        finished = set()
        for _ in range(10):
            (job_id, _, _, receipt, *_), = r.execute_command("RESERVE", "FROM", "dmg")
            self.assertEqual(r.execute_command("FINISH", job_id, receipt), b"OK")
            finished.add(job_id.decode())
        r.close()
        self.assertEqual(server.stop(keep_data=True), 0, server.text)

        segment = max((os.path.join(data_dir, n) for n in os.listdir(data_dir)
                       if n.startswith("log-")), key=os.path.getsize)
        with open(segment, "rb") as f:
            data = f.read()
        at = 32
        for _ in range(5):  # to the 6th record
            at += 8 + int.from_bytes(data[at + 4:at + 8], "little")
        sixth = 8 + int.from_bytes(data[at + 4:at + 8], "little")
        with open(segment, "r+b") as f:
            f.seek(at + 7)
            f.write(bytes([data[at + 7] ^ 0x10]))  # bit 28 of its length

        code, err = harness.run_serve("--data-dir", data_dir, "--fsync", "always")
        self.assertEqual(code, 1, err)
        self.assertIn("%s is damaged at byte %d" % (segment, at), err)
        self.assertIn("--repair", err)
        self.assertIn("truncate -s %d '%s'" % (at, segment), err)
        self.assertEqual(os.path.getsize(segment), len(data), "a refused start changed the log")

        server = Server("--fsync", "always", "--repair", data_dir=data_dir)
        self.assertRegex(server.text, r"repair dropped %d bytes at byte %d\b" % (sixth, at))
        r = redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=30)
        present = {job_id for job_id in ids if r.execute_command("GET", job_id) is not None}
        r.close()
        self.assertEqual(present, set(ids) - finished)
        self.assertEqual(server.stop(), 0, server.text)


if __name__ == "__main__":
    harness.main()
