#!/usr/bin/env python3
"""Black-box tests of `delayq serve --store redis` when a Redis master dies
(issue 28): real redis-server processes, the master killed with SIGKILL under
load, over RESP with redis-py and over HTTP with http.client.

Every redis-server runs on a free loopback port in a temporary directory with
`--appendonly yes --appendfsync always` and no RDB snapshots; every process is
stopped by PID in cleanups that run even when a test fails, and killed at exit
if one is left. Nothing sleeps to wait for something: waits poll with a
deadline, and the only sleeps are poll intervals and the pause between retries
of a client whose server said `unavailable`.

The load (redis_support.Load): 4 producers add jobs with unique ids through
two delayq servers, half over HTTP (POST /v1/jobs), half over RESP (ADD);
6 consumers reserve and finish them over both (TTR 30 s: no reservation runs
out within a test).

After about 2 s of it one master's replica falls behind: it is stopped
(SIGSTOP) and its link closed on the master (CLIENT KILL TYPE replica) until
the master has made changes it has not seen (10,000 bytes of them; with
--redis-wait-replicas, until delayq has also answered some change
`unavailable`), as over a slow link. Then the master is killed with SIGKILL
and the replica resumed (SIGCONT). (Killed without that, a master on
loopback has sent its replica everything it acknowledged: nothing is lost
with or without WAIT, and the tests could not tell them apart.) Once Redis
has promoted the replica, the killed node is started again as a supervisor
would (on its own port and directory), so the new master has a replica
again; the load runs on until delayq's adds have succeeded for a while after
Redis's own recovery, then the producers stop and the consumers take what
is left, through either server.

"Redis's recovery" is what the test's own redis-py probe sees, writing to
every master every 20 ms from the kill on: the moment each takes a write and,
with --redis-wait-replicas 1, `WAIT 1 100` after it confirms a replica. The
ADDs delayq answers `unavailable` (to slots whose master is gone, or whose
WAIT falls short) all come before that moment + 1 s.

- test_cluster_with_wait_replicas_loses_no_acknowledged_change: a Redis
  Cluster of 3 masters and 3 replicas (`--cluster-node-timeout 2000
  --cluster-replica-validity-factor 0`), 16 buckets (the default on a
  cluster), `--redis-wait-replicas 1`:
  every acknowledged add was either delivered and finished or is still there
  (GET finds it through both servers and a third started after the failover),
  no acknowledged finish comes back (GET finds nothing, no reserve hands it
  out), nothing is delivered twice within its TTR or before its run_at, both
  servers stay up; the killed node rejoins as the new master's replica
  (ROLE, CLUSTER NODES); /metrics counts the failover on both servers and
  /healthz names the 3 masters as they are now, status "ok" again.
- test_cluster_without_wait_replicas_reports_what_a_failover_loses: the same
  run with the default (no WAIT). Redis replicates asynchronously, so changes
  acknowledged while the replica was behind are gone: the acknowledged adds lost
  (GET finds them through no server), the acknowledged finishes that came
  back and the reservations handed out again are counted and printed, not
  asserted away. Still asserted: no crash, nothing delivered early, no second
  delivery within the TTR other than that of a lost reservation (the same
  receipt handed out again), recovery within Redis's own + 1 s.
- test_sentinel_with_wait_replicas_loses_no_acknowledged_change: one master,
  one replica and 3 sentinels (`down-after-milliseconds 1000`), delayq on
  `redis+sentinel://S1,S2,S3/mymaster` with `--redis-wait-replicas 1`; the
  master killed, the old master started again as the new one's replica once
  the sentinels name the new one; the same checks as on the cluster.
- test_sentinel_without_wait_replicas_reports_what_a_failover_loses: a
  shorter run of the same without the option, reporting the loss.
- test_a_stopped_replica_makes_changes_unavailable_until_it_is_back: a master
  whose only replica is stopped (SIGSTOP), `--redis-wait-timeout 200ms`: an
  add is answered `unavailable` (HTTP 503, RESP -UNAVAILABLE) after about
  200 ms (so is a retry of it) and /healthz says "degraded"; after SIGCONT the
  next add succeeds, /healthz says "ok", and the retry of the refused add
  (same id and idempotency key) is answered as its first attempt was made.

    /usr/bin/python3 tests/integration/redis_failover_test.py --binary build/bin/delayq [-v]

DELAYQ_ITR_SEED=n replays the random choices of a run (thread interleaving
and the moment of the kill still differ).
"""
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree

import redis  # noqa: E402

import harness  # noqa: E402
from harness import wait_until  # noqa: E402
from redis_support import (REDIS_SERVER, REQUEST_LIMIT_MS, SEED, TOPICS,  # noqa: E402
                           Load, RedisProcess, RedisServerTestCase, client, now_ms, pairs)

REDIS_CLI = shutil.which("redis-cli") or "/usr/bin/redis-cli"
# Every data node: a replica (re)synchronises at once.
NODE_ARGS = ("--repl-diskless-sync-delay", 0)
CLUSTER_ARGS = NODE_ARGS + ("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                            "--cluster-node-timeout", 2000,
                            # a replica may take over however long it was cut off
                            "--cluster-replica-validity-factor", 0)
MASTER_NAME = "mymaster"
KILL_AFTER_ADDS = 1500    # about 2 s of the load on this machine
ADDS_AFTER_RECOVERY = 300  # acknowledged after Redis's recovery + 1 s, before the load stops
RECOVERY_SLACK_MS = 1000   # delayq's adds succeed again within Redis's recovery + this
# Without WAIT, how far the replica is behind when its master is killed: the
# master holds this many bytes of its replication stream the replica has not
# seen. (Killed without that, on loopback, the replica has everything the
# master wrote to its link, and nothing is lost with or without WAIT.)
REPLICA_BEHIND_BYTES = 10_000


def connect(address, timeout=0.5):
    """A redis-py client of the redis-server at host:port (the caller closes it)."""
    host, port = address.rsplit(":", 1)
    return redis.Redis(host=host, port=int(port), socket_timeout=timeout,
                       socket_connect_timeout=timeout)


def role(address):
    """ROLE of the redis-server at host:port, or None when it does not answer."""
    r = connect(address)
    try:
        return r.execute_command("ROLE")
    except redis.RedisError:
        return None
    finally:
        r.close()


def is_master(address):
    got = role(address)
    return got is not None and got[0] == b"master"


def replica_in_sync(address, master_address):
    """The node at `address` replicates `master_address`, as both say in ROLE:
    the replica's link is up ("connected") and the master lists it (it lists
    a replica once its first synchronisation is done)."""
    mine, master = role(address), role(master_address)
    if mine is None or master is None or mine[0] != b"slave" or master[0] != b"master":
        return False
    return (f"{mine[1].decode()}:{mine[2]}" == master_address and mine[3] == b"connected"
            and any(f"{host.decode()}:{port.decode()}" == address
                    for host, port, _ in master[2]))


def write_confirmed(address, key, replicas):
    """SET `key` on the redis-server at host:port and, with `replicas`, `WAIT
    replicas 100` after it: whether that many replicas confirmed the write.
    redis.RedisError when the node does not take it (down, a replica, ...).
    (A replica whose link is up may not confirm writes yet: after its first
    synchronisation the master waits for its first REPLCONF ACK.)"""
    r = connect(address)
    try:
        r.set(key, "x")
        return not replicas or r.execute_command("WAIT", replicas, 100) >= replicas
    finally:
        r.close()


def replication_offset(node):
    """master_repl_offset of a redis-server: bytes of changes it replicated."""
    r = node.client()
    try:
        return r.info("replication")["master_repl_offset"]
    finally:
        r.close()


def http_request(server, method, path, payload=None):
    """(status, parsed JSON or text) of one HTTP request to `server`."""
    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=10)
    try:
        conn.request(method, path, body=None if payload is None else json.dumps(payload))
        resp = conn.getresponse()
        body = resp.read().decode()
        is_json = resp.getheader("Content-Type", "").startswith("application/json")
        return resp.status, json.loads(body) if is_json else body
    finally:
        conn.close()


def store_figure(server, name):
    """delayq_store_<name> of /metrics, as an int."""
    status, text = http_request(server, "GET", "/metrics")
    m = re.search(rf"^delayq_store_{name} (\d+)$", text, re.M)
    if status != 200 or not m:
        raise AssertionError(f"/metrics ({status}) has no delayq_store_{name}: {text[-2000:]}")
    return int(m.group(1))


class RedisCluster:
    """A Redis Cluster of 3 masters and 3 replicas made by `redis-cli --cluster
    create`, each node a RedisProcess (stopped by the test's cleanups).

    What FailoverTest.run_failover asks of a set-up (this and SentinelSetup):
    url (for --redis), masters_wanted, masters(), victim(), replica_of(),
    promoted(), restart(), rejoined(), write_targets() and processes()."""
    masters_wanted = 3

    def __init__(self, test):
        self.nodes = [test.start_redis(aof=True, args=CLUSTER_ARGS) for _ in range(6)]
        done = subprocess.run([REDIS_CLI, "--cluster", "create",
                               *[n.address for n in self.nodes],
                               "--cluster-replicas", "1", "--cluster-yes"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=60)
        if done.returncode != 0:
            raise AssertionError(f"redis-cli --cluster create failed: {done.stdout[-3000:]}")
        # One key per master, in a slot it serves, for write_targets().
        self.probe_keys = {}  # slot -> key
        slots = self.slots(self.nodes[0])
        for i in range(1000):
            key = f"failover-probe{{{i}}}"
            slot = self.keyslot(key)
            owners = {self.owner(slots, s) for s in self.probe_keys}
            if self.owner(slots, slot) not in owners:
                self.probe_keys[slot] = key
            if len(self.probe_keys) == 3:
                break
        wait_until(self.settled, timeout=30, ignore=(redis.RedisError,),
                   what="every node to see 3 masters with a replica each, cluster_state ok, "
                        "and each master's writes confirmed by its replica")

    @property
    def url(self):
        return "redis://" + ",".join(n.address for n in self.nodes)

    @staticmethod
    def slots(node):
        """CLUSTER SLOTS of `node`: [(first, last, master address, [replica addresses])]."""
        r = node.client()
        try:
            return [(first, last, f"{m[0].decode()}:{m[1]}",
                     [f"{rep[0].decode()}:{rep[1]}" for rep in reps])
                    for first, last, m, *reps in r.execute_command("CLUSTER", "SLOTS")]
        finally:
            r.close()

    def keyslot(self, key):
        r = self.nodes[0].client()
        try:
            return r.execute_command("CLUSTER", "KEYSLOT", key)
        finally:
            r.close()

    @staticmethod
    def owner(slots, slot):
        return next(m for first, last, m, _ in slots if first <= slot <= last)

    def node(self, address):
        return next(n for n in self.nodes if n.address == address)

    def settled(self):
        """Every node: cluster_state ok and 3 masters with one replica each in
        CLUSTER SLOTS; every replica's link up; every master's writes confirmed
        by WAIT 1."""
        for n in self.nodes:
            r = n.client()
            try:
                if r.cluster("info")["cluster_state"] != "ok":
                    return False
            finally:
                r.close()
            masters = {(m, tuple(reps)) for _, _, m, reps in self.slots(n)}
            if len(masters) != 3 or any(len(reps) != 1 for _, reps in masters):
                return False
            if not all(replica_in_sync(reps[0], m) for m, reps in masters):
                return False
        return all(write_confirmed(m, key, 1) for key, m in self.write_targets())

    def masters(self):
        """The masters' addresses, as a node that answers sees them now."""
        for n in self.nodes:
            try:
                return sorted({m for _, _, m, _ in self.slots(n)})
            except redis.RedisError:
                continue
        return []

    def victim(self):
        """The master to kill: the one serving slot 0."""
        return self.node(self.owner(self.slots(self.nodes[0]), 0))

    def replica_of(self, master):
        return self.node(next(reps[0] for _, _, m, reps in self.slots(master)
                              if m == master.address))

    def promoted(self, victim, replica):
        """The cluster has made `replica` the master of the victim's slots."""
        if not is_master(replica.address):
            return False
        return all(replica.address in {m for _, _, m, _ in self.slots(n)}
                   for n in self.nodes if n is not victim)

    def restart(self, victim, new_master):
        """Starts the killed node again: with its nodes.conf it rejoins, and
        the cluster makes it a replica of the master that took its slots."""
        victim.start()

    def rejoined(self, victim, new_master):
        """The restarted node replicates the new master (ROLE) and says so in
        CLUSTER NODES."""
        if not replica_in_sync(victim.address, new_master.address):
            return False
        r = victim.client()
        try:
            lines = r.execute_command("CLUSTER", "NODES").decode().splitlines()
        finally:
            r.close()
        me = next(line.split() for line in lines if "myself" in line.split()[2])
        master_id = next(line.split()[0] for line in lines
                         if line.split()[1].startswith(new_master.address + "@"))
        return "slave" in me[2].split(",") and me[3] == master_id

    def processes(self):
        """(kind, RedisProcess) of every Redis process of the set-up."""
        return [("redis", n) for n in self.nodes]

    def write_targets(self, victim=None):
        """(key, address of the master serving it now) for each probe key, as
        the first node that answers sees it (not the victim: restarted, it
        holds its old view a moment)."""
        for n in self.nodes:
            if n is victim:
                continue
            try:
                slots = self.slots(n)
            except redis.RedisError:
                continue
            return [(key, self.owner(slots, slot)) for slot, key in self.probe_keys.items()]
        return []


class SentinelProcess(RedisProcess):
    """A Redis Sentinel (`redis-server sentinel.conf --sentinel`) watching the
    master at `master_port` as MASTER_NAME; the sentinel.conf in its own
    directory, since sentinels rewrite theirs (written anew at a start: each
    is started once)."""

    def __init__(self, master_port, quorum=2, down_after_ms=1000):
        self.master_port = master_port
        self.quorum = quorum
        self.down_after_ms = down_after_ms
        super().__init__()

    def command(self):
        conf = os.path.join(self.dir, "sentinel.conf")
        with open(conf, "w") as f:
            f.write(f"port {self.port}\n"
                    f"bind 127.0.0.1\n"
                    f"dir {self.dir}\n"
                    f"logfile {os.path.join(self.dir, 'redis.log')}\n"
                    f"sentinel monitor {MASTER_NAME} 127.0.0.1 {self.master_port} "
                    f"{self.quorum}\n"
                    f"sentinel down-after-milliseconds {MASTER_NAME} {self.down_after_ms}\n"
                    f"sentinel failover-timeout {MASTER_NAME} 10000\n")
        return [REDIS_SERVER, conf, "--sentinel"]


class SentinelSetup:
    """One master, one replica (`--replicaof`) and 3 sentinels watching them."""
    masters_wanted = 1

    def __init__(self, test):
        master = test.start_redis(aof=True, args=NODE_ARGS)
        replica = test.start_redis(aof=True, args=NODE_ARGS + (
            "--replicaof", "127.0.0.1", master.port))
        self.nodes = [master, replica]
        self.sentinels = []
        for _ in range(3):
            s = SentinelProcess(master.port)
            test.addCleanup(s.cleanup)
            self.sentinels.append(s)
        self.probe_keys = ["failover-probe"]
        wait_until(self.settled, timeout=30, ignore=(redis.RedisError,),
                   what="the replica to confirm writes (WAIT), each sentinel to know it "
                        "and the 2 other sentinels")

    @property
    def url(self):
        return ("redis+sentinel://" + ",".join(s.address for s in self.sentinels)
                + "/" + MASTER_NAME)

    def ask(self, sentinel, *args):
        r = sentinel.client()
        try:
            return r.execute_command("SENTINEL", *args)
        finally:
            r.close()

    def settled(self):
        """The replica confirms the master's writes, and every sentinel knows
        it and the two other sentinels (a failover needs 2 of them to agree)."""
        if not replica_in_sync(self.nodes[1].address, self.nodes[0].address) or \
                not write_confirmed(self.nodes[0].address, self.probe_keys[0], 1):
            return False
        for s in self.sentinels:
            info = pairs(self.ask(s, "MASTER", MASTER_NAME))
            if int(info["num-slaves"]) != 1 or int(info["num-other-sentinels"]) != 2:
                return False
        return True

    def master_address(self):
        """Where the first sentinel that answers says the master is (or None)."""
        for s in self.sentinels:
            try:
                host, port = self.ask(s, "get-master-addr-by-name", MASTER_NAME)
                return f"{host.decode()}:{port.decode()}"
            except redis.RedisError:
                continue
        return None

    def masters(self):
        address = self.master_address()
        return [address] if address else []

    def victim(self):
        return next(n for n in self.nodes if n.address == self.master_address())

    def replica_of(self, master):
        return next(n for n in self.nodes if n is not master)

    def promoted(self, victim, replica):
        """Every sentinel names `replica` as the master, and it says it is one."""
        for s in self.sentinels:
            host, port = self.ask(s, "get-master-addr-by-name", MASTER_NAME)
            if f"{host.decode()}:{port.decode()}" != replica.address:
                return False
        return is_master(replica.address)

    def restart(self, victim, new_master):
        """Starts the old master again as a replica of the new one."""
        victim.args = list(map(str, NODE_ARGS)) + ["--replicaof", "127.0.0.1",
                                                   str(new_master.port)]
        victim.start()

    def rejoined(self, victim, new_master):
        return replica_in_sync(victim.address, new_master.address)

    def write_targets(self, victim=None):
        return [(self.probe_keys[0], self.master_address())]

    def processes(self):
        return [("redis", n) for n in self.nodes] + [("sentinel", s) for s in self.sentinels]


class RecoveryProbe:
    """Redis's own recovery, as a client sees it: from start() on, every 20 ms
    until stop(), a SET of each probe key on the master serving it now
    (topology.write_targets()) and, with `replicas`, `WAIT replicas 100` after
    it. `at` (Unix ms): the first poll at which every master took the write
    and WAIT confirmed; `relapsed_at`: the last poll after `at` that failed
    (None while none did), as when a sentinel reconfigures a node after the
    failover: delayq may refuse changes then too."""

    def __init__(self, topology, replicas, victim, timeout=45.0):
        self.topology = topology
        self.victim = victim
        self.replicas = replicas
        self.timeout = timeout
        self.at = None
        self.relapsed_at = None
        self.relapses = 0
        self.relapse_failure = None
        self.polls = 0
        self.last_failure = None
        self.recovered = threading.Event()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def start(self):
        self.thread.start()

    def stop(self):
        self.stopped.set()
        self.thread.join(timeout=5)

    def run(self):
        deadline = time.monotonic() + self.timeout
        while not self.stopped.is_set() and (self.at is not None or
                                              time.monotonic() < deadline):
            if self.at is None:
                self.polls += 1
            if self.all_take_writes():
                if self.at is None:
                    self.at = now_ms()
                    self.recovered.set()
            elif self.at is not None:
                self.relapsed_at = now_ms()
                self.relapses += 1
                self.relapse_failure = self.last_failure
            time.sleep(0.02)  # the poll interval

    def all_take_writes(self):
        try:
            targets = self.topology.write_targets(self.victim)
        except redis.RedisError as e:
            self.last_failure = repr(e)
            return False
        for key, address in targets:
            try:
                if address is None or not write_confirmed(address, key, self.replicas):
                    self.last_failure = f"{key} on {address}: WAIT {self.replicas} fell short"
                    return False
            except redis.RedisError as e:
                self.last_failure = f"{key} on {address}: {e!r}"
                return False
        return True

    def wait(self):
        self.recovered.wait(timeout=self.timeout + 5)
        if self.at is None:
            raise AssertionError(f"Redis did not take writes on every master (WAIT "
                                 f"{self.replicas}) within {self.timeout} s of the kill: "
                                 f"{self.last_failure}")
        return self.at


def log_tail(node, size=3000):
    """The end of a Redis process's log file."""
    try:
        with open(os.path.join(node.dir, "redis.log"), errors="replace") as f:
            return f.read()[-size:]
    except OSError as e:
        return repr(e)


def seconds_after(t, since):
    return "never" if t is None else f"{(t - since) / 1000:.2f} s after the kill"


class FailoverTest(RedisServerTestCase):

    def start_servers(self, topology, tag, wait_replicas, count=2):
        extra = ["--redis-wait-replicas", wait_replicas] if wait_replicas else []
        return [self.start_delayq(topology, tag, *extra) for _ in range(count)]

    def run_failover(self, topology, tag, wait_replicas, kill_after=KILL_AFTER_ADDS,
                     adds_after=ADDS_AFTER_RECOVERY):
        """The load over two servers; once `kill_after` adds were acknowledged a
        master's replica falls behind, the master is killed, and started again
        once replaced; the load stops once `adds_after` more adds were
        acknowledged after Redis's recovery + 1 s. What each server and client
        saw is checked (with WAIT: nothing acknowledged lost) or reported
        (without)."""
        servers = self.start_servers(topology, tag, wait_replicas)
        load = Load(tag, servers, 200_000, http_share=0.5, allow_unavailable=True,
                    allow_loss=not wait_replicas)
        load.start()
        try:
            wait_until(lambda: load.acked_count >= kill_after or load.errors,
                       timeout=30, what=f"{kill_after} acknowledged adds")
            victim = topology.victim()
            replica = topology.replica_of(victim)
            cut_off_at = now_ms()
            behind = self.fall_behind(victim, replica, load, wait_replicas)
            self.assertEqual(victim.kill(), -signal.SIGKILL)
            killed_at = now_ms()
            replica.signal(signal.SIGCONT)
            probe = RecoveryProbe(topology, wait_replicas, victim)
            self.addCleanup(probe.stop)
            probe.start()
            wait_until(lambda: topology.promoted(victim, replica), timeout=30,
                       ignore=(redis.RedisError,),
                       what=f"Redis to promote {replica.address} in place of {victim.address}")
            promoted_at = now_ms()
            # As a supervisor would: the killed node started again, as a replica.
            topology.restart(victim, replica)
            wait_until(lambda: topology.rejoined(victim, replica), timeout=20,
                       ignore=(redis.RedisError,),
                       what=f"{victim.address} to replicate the new master {replica.address}")
            recovered_at = probe.wait()
            # The load runs on until delayq has served adds for a while after
            # the moment it must have recovered by.
            wait_until(lambda: load.errors or load.acked_after(recovered_at + RECOVERY_SLACK_MS)
                       >= adds_after, timeout=20, interval=0.05,
                       what=f"{adds_after} adds acknowledged after Redis's recovery + 1 s")
            load.stop_producers.set()
            probe.stop()
            for t in load.threads:
                t.join(timeout=15)
            # A third server, started after the failover, looks too.
            servers.append(self.start_servers(topology, tag, wait_replicas, count=1)[0])
            wait_until(lambda: load.errors or self.nothing_left_to_deliver(load, servers[2]),
                       timeout=20, what="the consumers to take every job left")
        finally:
            self.assertTrue(load.stop(), "load threads did not stop")
        self.assertAlive(*servers)
        print(load.summary(), file=sys.stderr, flush=True)
        self.assertEqual(load.errors, [], f"{tag}: unexpected answers (seed {SEED})")

        self.account(load, servers, strict=bool(wait_replicas),
                     window=(killed_at, recovered_at))
        last_refused = load.last_unavailable.get("add")
        print(f"  {tag}: master {victim.address} killed "
              f"{(killed_at - cut_off_at) / 1000:.2f} s after its replica was cut off "
              f"({behind} bytes of changes behind); Redis promoted {replica.address} "
              f"{seconds_after(promoted_at, killed_at)}, took writes"
              f"{' confirmed by WAIT 1' if wait_replicas else ''} on every master "
              f"{seconds_after(recovered_at, killed_at)} ({probe.polls} polls; "
              f"{probe.relapses} failed after it, the last "
              f"{seconds_after(probe.relapsed_at, killed_at)}"
              f"{': ' + probe.relapse_failure if probe.relapse_failure else ''}); the last "
              f"ADD delayq answered unavailable: {seconds_after(last_refused, killed_at)}, "
              f"RESERVE: {seconds_after(load.last_unavailable.get('reserve'), killed_at)}, "
              f"FINISH: {seconds_after(load.last_unavailable.get('finish'), killed_at)}",
              file=sys.stderr, flush=True)
        if probe.relapses:
            # What the sentinels (or the cluster's nodes) did after the failover.
            for name, n in topology.processes():
                events = [line for line in log_tail(n, 20000).splitlines()
                          if re.search(r" # [+-]|\+convert|\+fix-slave|MASTER MODE|REPLICAOF|"
                                       r"Connecting to MASTER|failover", line)]
                print(f"  {tag}: {name} {n.address}:\n    " + "\n    ".join(events[-25:]),
                      file=sys.stderr, flush=True)
        # Redis took writes for good after its last failed poll (a sentinel may
        # still move a node about after the first success).
        settled_at = max(recovered_at, probe.relapsed_at or 0)
        if last_refused is not None and last_refused > settled_at + RECOVERY_SLACK_MS:
            port, reply = load.last_unavailable_reply["add"]
            logs = "\n".join(f"--- delayq serve (RESP {s.port}, HTTP {s.http_port}):\n"
                             f"{s.text[-4000:]}" for s in servers)
            logs += "\n" + "\n".join(f"--- {name} {n.address}:\n{log_tail(n)}"
                                     for name, n in topology.processes())
            self.fail(f"{tag}: delayq refused adds {last_refused - settled_at:.0f} ms after "
                      f"Redis took writes again; the last refusal, from port {port}: "
                      f"{reply!r}\n{logs}")

        # Each server saw the failover; /healthz names the masters as they are now.
        for s in servers[:2]:
            self.assertGreaterEqual(store_figure(s, "redis_failovers"), 1, s.text[-3000:])
        masters = topology.masters()
        self.assertEqual(len(masters), topology.masters_wanted)
        for s in servers:
            health = self.wait_for_topology(s, masters)
            if wait_replicas:
                self.assertEqual(health["status"], "ok", health)

    def fall_behind(self, master, replica, load, wait_replicas):
        """Stops `replica` (SIGSTOP) and closes its link on `master` (CLIENT KILL
        TYPE replica), then waits until the master has made changes since that
        the replica will not have when it takes over, as over a slow link:
        REPLICA_BEHIND_BYTES of them; with WAIT, until delayq has also refused
        some (a client of the load was answered `unavailable`: WAIT timed out).
        Returns the bytes of changes the replica lacks. The caller resumes the
        replica (SIGCONT) after the kill."""
        replica.signal(signal.SIGSTOP)
        r = master.client()
        try:
            self.assertEqual(r.execute_command("CLIENT", "KILL", "TYPE", "replica"), 1)
        finally:
            r.close()
        cut_at, cut_ms = replication_offset(master), now_ms()

        def behind():
            ahead = replication_offset(master) - cut_at
            if wait_replicas:
                with load.lock:
                    refused = max(load.last_unavailable.values(), default=0)
                return ahead > 0 and refused > cut_ms
            return ahead >= REPLICA_BEHIND_BYTES
        wait_until(behind, timeout=10,
                   what=f"{master.address} to make changes its replica has not seen"
                        f"{' (and delayq to refuse some)' if wait_replicas else ''}")
        return replication_offset(master) - cut_at

    def wait_for_topology(self, server, masters):
        """/healthz of `server` once its "topology" names `masters` (addresses)."""
        def named():
            status, health = http_request(server, "GET", "/healthz")
            found = re.findall(r"(127\.0\.0\.1:\d+) \(", health.get("topology", ""))
            return status == 200 and sorted(found) == masters and health
        try:
            return wait_until(named, timeout=5,
                              what=f"/healthz of port {server.port} to name {masters}")
        except AssertionError as e:
            raise AssertionError(f"{e}: {http_request(server, 'GET', '/healthz')}") from None

    @staticmethod
    def nothing_left_to_deliver(load, server):
        """No delivery in a consumer's hands, and no job ready or delayed in
        any topic (PEEK, which reads the jobs themselves, not counters)."""
        if load.in_hand:
            return False
        r = client(server)
        try:
            return not any(r.execute_command("PEEK", topic, state)
                           for topic in TOPICS for state in ("READY", "DELAYED"))
        finally:
            r.close()

    def account(self, load, servers, strict, window):
        """What became of every acknowledged change, as every server sees it.
        strict (WAIT): nothing acknowledged is lost; otherwise the losses are
        counted, for the report. Either way nothing is early, and a second
        delivery within the TTR is at most (without WAIT) the same delivery
        handed out again after its reservation was lost. window: (kill,
        recovery) in Unix ms. The figures are printed."""
        tag = load.tag
        views = [load.lookup(s) for s in servers]
        for s, view in zip(servers[1:], views[1:]):
            self.assertEqual(sorted(view), sorted(views[0]),
                             f"{tag}: port {s.port} and port {servers[0].port} see different jobs")
        present = set(views[0])
        lost = sorted(load.acked - set(load.finished) - load.finish_unsure - present)
        back = sorted(set(load.finished) & present)
        faults = load.delivery_faults()
        self.assertEqual(faults["strangers"], [], f"{tag}: delivered jobs nobody added")
        self.assertEqual(faults["early"], [], f"{tag}: delivered before run_at "
                                              "(id, run_at, ms early, port)")
        self.assertEqual(faults["late_adds"], [], f"{tag}: ADDs answered UNAVAILABLE and "
                                                  "done later (id, ms after the answer)")
        # A reservation lost with the master: the job is handed out again as it
        # was, with the same receipt. Any other second delivery within the TTR
        # is a fault.
        again = [d for d in faults["dup"] if d[1] == d[2]]
        dup = [d for d in faults["dup"] if d[1] != d[2]]
        self.assertEqual(dup, [], f"{tag}: delivered twice within the TTR "
                                  "(id, receipts, ms between)")
        # Over HTTP too: the jobs finished from a second before the kill to the
        # recovery, and the lost ones, answer 404 through every server.
        killed_at, recovered_at = window
        around = sorted(i for i, t in load.finished.items()
                        if killed_at - 1000 <= t <= recovered_at)
        for job_id in around[:200] + lost[:50]:
            for s in servers:
                status, body = http_request(s, "GET", f"/v1/jobs/{job_id}")
                self.assertEqual(status, 200 if job_id in present else 404,
                                 f"GET /v1/jobs/{job_id} through port {s.port}: {body}")
        # What is still there, by state; a reserved one nobody received was
        # taken by a reserve whose answer was `unavailable` (or lost).
        states = {}
        for job_id, job in views[0].items():
            state = job["state"].decode()
            if state == "reserved" and job_id not in load.deliveries:
                state = "reserved, never received"
            states[state] = states.get(state, 0) + 1
        print(f"  {tag}: lost {len(lost)} of {len(load.acked)} acknowledged adds (window "
              f"{(recovered_at - killed_at) / 1000:.1f} s), {len(back)} of "
              f"{len(load.finished)} acknowledged finishes came back "
              f"({len(faults['came_back'])} delivered again after the finish), "
              f"{len(again)} reservations lost (handed out again with the same receipt), "
              f"{len(load.finish_refused)} finishes refused "
              f"{sorted(set(load.finish_refused.values()))}; {len(present)} jobs still there "
              f"{states}; e.g. lost {lost[:5]}, came back {back[:5]}",
              file=sys.stderr, flush=True)
        if strict:
            self.assertEqual(lost, [], f"{tag}: acknowledged adds lost (seed {SEED})")
            self.assertEqual(back, [], f"{tag}: acknowledged finishes came back")
            self.assertEqual(faults["came_back"], [],
                             f"{tag}: delivered after an acknowledged finish")
            self.assertEqual(again, [], f"{tag}: reservations handed out again")
        # What is still there was acknowledged, or in flight.
        self.assertEqual(sorted(present - load.acked - load.maybe_added), [])
        self.assertLess(load.max_request_ms[0], REQUEST_LIMIT_MS,
                        f"{tag}: a request took {load.max_request_ms}")

    def test_cluster_with_wait_replicas_loses_no_acknowledged_change(self):
        self.run_failover(RedisCluster(self), "cwait", wait_replicas=1)

    def test_cluster_without_wait_replicas_reports_what_a_failover_loses(self):
        self.run_failover(RedisCluster(self), "cnowait", wait_replicas=0)

    def test_sentinel_with_wait_replicas_loses_no_acknowledged_change(self):
        self.run_failover(SentinelSetup(self), "swait", wait_replicas=1)

    def test_sentinel_without_wait_replicas_reports_what_a_failover_loses(self):
        self.run_failover(SentinelSetup(self), "snowait", wait_replicas=0,
                          kill_after=KILL_AFTER_ADDS // 2, adds_after=ADDS_AFTER_RECOVERY // 2)


class StoppedReplicaTest(RedisServerTestCase):

    def test_a_stopped_replica_makes_changes_unavailable_until_it_is_back(self):
        master = self.start_redis(aof=True, args=NODE_ARGS)
        replica = self.start_redis(aof=True, args=NODE_ARGS + (
            "--replicaof", "127.0.0.1", master.port))
        wait_until(lambda: write_confirmed(master.address, "probe", 1), timeout=15,
                   ignore=(redis.RedisError,), what="the replica to confirm writes")
        s = self.start_delayq(master, "stop", "--redis-wait-replicas", 1,
                              "--redis-wait-timeout", "200ms")
        r = client(s)
        self.addCleanup(r.close)
        # The replica is online, but on two busy cores its first acknowledgement
        # may miss a 200 ms WAIT: the add is made again until one is confirmed.
        wait_until(lambda: r.execute_command("ADD", "stop.t", "before", 0, 30000, "b", "REPLACE")
                   == b"before", timeout=10, ignore=(redis.ResponseError,),
                   what="a change confirmed by the replica")
        self.assertEqual(http_request(s, "GET", "/healthz")[1]["status"], "ok")

        replica.signal(signal.SIGSTOP)
        add = ("ADD", "stop.t", "resp-1", 0, 30000, "r", "IDEMPOTENCY", "key-1")
        t0 = time.monotonic()
        with self.assertRaisesRegex(redis.ResponseError, "^UNAVAILABLE .*WAIT confirmed 0 of 1"):
            r.execute_command(*add)
        resp_took = time.monotonic() - t0
        t0 = time.monotonic()
        status, body = http_request(s, "POST", "/v1/jobs",
                                    {"topic": "stop.t", "id": "http-1", "body": "h"})
        http_took = time.monotonic() - t0
        self.assertEqual((status, body["error"]["code"]), (503, "unavailable"), body)
        # The first WAIT waits its whole 200 ms; once it fell short, that
        # master's next WAITs wait a tenth of it, so one master without its
        # replica does not hold every other call up for the whole timeout.
        self.assertGreaterEqual(resp_took, 0.19)
        self.assertLess(resp_took, 1.5)
        self.assertIn("within 20 ms (its last WAIT of 200 ms fell short too)",
                      body["error"]["message"])
        self.assertLess(http_took, 1.0)
        # A retry meets the same: the first attempt's job is on the master only.
        with self.assertRaisesRegex(redis.ResponseError, "^UNAVAILABLE"):
            r.execute_command(*add)
        status, health = http_request(s, "GET", "/healthz")
        self.assertEqual((status, health["status"]), (200, "degraded"), health)
        self.assertIn("WAIT", health["store"])
        print(f"\n  replica stopped: ADD answered UNAVAILABLE after {resp_took * 1000:.0f} ms "
              f"(RESP), {http_took * 1000:.0f} ms (HTTP); /healthz {health}",
              file=sys.stderr, flush=True)

        replica.signal(signal.SIGCONT)
        # The replica catches up and answers the next WAIT (a short one, or
        # the full probe after two timeouts).
        wait_until(lambda: r.execute_command("ADD", "stop.t", "after", 0, 30000, "a", "REPLACE")
                   == b"after", timeout=5, ignore=(redis.ResponseError,),
                   what="an add to succeed once the replica is back")
        status, health = http_request(s, "GET", "/healthz")
        self.assertEqual((status, health["status"]), (200, "ok"), health)
        # The retry of the refused add (same id, same key) is answered as its
        # first attempt was made: one job.
        self.assertEqual(r.execute_command(*add), b"resp-1")
        self.assertEqual(pairs(r.execute_command("GET", "resp-1"))["body"], b"r")
        st = pairs(r.execute_command("STATS", "stop.t"))
        self.assertEqual(int(st["ready"]), 4, st)  # before, resp-1, http-1, after
        st = pairs(r.execute_command("STATS"))
        self.assertGreaterEqual(int(st["redis_wait_shortfalls"]), 3, st)
        self.assertEqual((int(st["redis_wait_replicas"]), int(st["redis_replicas_acked"])),
                         (1, 1), st)


if __name__ == "__main__":
    harness.main(setup=lambda args: print(
        f"redis_failover_test: seed {SEED} (replay with DELAYQ_ITR_SEED={SEED})",
        file=sys.stderr))
