"""Helpers for tests/redis/scripts_test.py: real redis-server processes and the
delayq Lua scripts (src/redis_store/scripts/) behind a small typed client.

Servers run on free loopback ports in temporary directories, are waited for by
polling PING with a deadline (never a fixed sleep), and are stopped by PID.
"""

import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile

import redis

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'pylib'))
from polling import wait_until  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
SCRIPTS_DIR = os.path.join(REPO, 'src', 'redis_store', 'scripts')
INCLUDE_LINE = '--!include lib.lua'
BASE_INCLUDE_LINE = '--!include base.lua'
PARTS = ('schedule_record.lua',)
REDIS_SERVER = shutil.which('redis-server') or '/usr/bin/redis-server'
REDIS_CLI = shutil.which('redis-cli') or '/usr/bin/redis-cli'
DEADLINE_S = 10.0

SCRIPT_NAMES = ('init', 'add', 'reserve', 'finish', 'delete', 'release', 'touch', 'bury',
                'kick', 'kick_topic', 'get', 'peek', 'promote', 'pause', 'topics', 'stats',
                'heads', 'unreserve', 'subscriptions', 'schedules', 'schedule_fire',
                'push_ledger')


def _splice(lines, include_line, text, name):
    at = [i for i, line in enumerate(lines) if line == include_line]
    if len(at) != 1:
        raise AssertionError(f'{name} must have exactly one "{include_line}" line')
    return lines[:at[0]] + [text] + lines[at[0] + 1:]


def _read(name):
    with open(os.path.join(SCRIPTS_DIR, name), encoding='utf-8') as f:
        return f.read().rstrip('\n')


def assemble(name):
    """The text sent to Redis: the script with its include line replaced by
    lib.lua (itself with base.lua spliced in), or by base.lua alone, then
    each line "--!include <part>" by that part."""
    with open(os.path.join(SCRIPTS_DIR, name + '.lua'), encoding='utf-8') as f:
        lines = f.read().split('\n')
    base = _read('base.lua')
    if BASE_INCLUDE_LINE in lines:
        lines = _splice(lines, BASE_INCLUDE_LINE, base, name + '.lua')
    else:
        lib = '\n'.join(_splice(_read('lib.lua').split('\n'), BASE_INCLUDE_LINE, base, 'lib.lua'))
        lines = _splice(lines, INCLUDE_LINE, lib, name + '.lua')
    # Parts a script may add after lib.lua or base.lua.
    for part in PARTS:
        if '--!include ' + part in lines:
            lines = _splice(lines, '--!include ' + part, _read(part), name + '.lua')
    return '\n'.join(lines)


def load_scripts():
    return {name: assemble(name) for name in SCRIPT_NAMES}


def port_is_free(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(('127.0.0.1', port))
            return True
        except OSError:
            return False


def free_port(cluster_bus=False):
    """A free loopback port (and port + 10000 free too, for a cluster bus)."""
    for _ in range(200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(('127.0.0.1', 0))
            port = s.getsockname()[1]
        if not cluster_bus or (port + 10000 < 65536 and port_is_free(port + 10000)):
            return port
    raise RuntimeError('no free port')


# Exceptions that mean "the server is still starting": polled again.
NOT_UP_YET = (redis.ConnectionError, redis.ResponseError, OSError)


class RedisServer:
    """One redis-server in its own temporary directory on a free loopback port."""

    def __init__(self, extra_args=(), cluster=False, wrap=()):
        """wrap: a command to run redis-server under (e.g. valgrind and its options)."""
        self.dir = tempfile.mkdtemp(prefix='delayq-redis-')
        self.port = free_port(cluster_bus=cluster)
        args = list(wrap) + [REDIS_SERVER, '--port', str(self.port), '--bind', '127.0.0.1',
                '--dir', self.dir, '--save', '', '--appendonly', 'no',
                '--logfile', os.path.join(self.dir, 'redis.log'), '--daemonize', 'no']
        if cluster:
            args += ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf',
                     '--cluster-node-timeout', '5000']
        args += list(extra_args)
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.client = redis.Redis(host='127.0.0.1', port=self.port, socket_timeout=DEADLINE_S)
        wait_until(self._up, DEADLINE_S, f'redis-server on port {self.port}', NOT_UP_YET)

    def _up(self):
        if self.proc.poll() is not None:
            raise RuntimeError(f'redis-server exited: see {self.dir}/redis.log')
        return self.client.ping()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=DEADLINE_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.client.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class Cluster:
    """A Redis Cluster of `masters` masters and no replicas, created with redis-cli."""

    def __init__(self, masters=3):
        self.nodes = []
        try:
            for _ in range(masters):
                self.nodes.append(RedisServer(cluster=True))
            subprocess.run([REDIS_CLI, '--cluster', 'create']
                           + [f'127.0.0.1:{n.port}' for n in self.nodes]
                           + ['--cluster-replicas', '0', '--cluster-yes'],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           timeout=60)
            for n in self.nodes:
                wait_until(lambda n=n: n.client.cluster('info')['cluster_state'] == 'ok', 30,
                           'cluster_state:ok', NOT_UP_YET)
            self.slot_owner = [None] * 16384
            for start, end, master, *_ in self.nodes[0].client.execute_command('CLUSTER SLOTS'):
                port = master[1]
                node = next(n for n in self.nodes if n.port == port)
                for s in range(start, end + 1):
                    self.slot_owner[s] = node
        except Exception:
            self.stop()
            raise

    def owner(self, key):
        return self.slot_owner[self.nodes[0].client.cluster('keyslot', key)]

    def stop(self):
        for n in self.nodes:
            n.stop()


class ScriptError(Exception):
    """An error reply of a delayq script: code (a SPEC §5 code) and message."""

    def __init__(self, text):
        super().__init__(text)
        self.code, _, self.message = text.partition(' ')


STATE_FIELDS = ('id', 'topic', 'state', 'body', 'priority', 'ttr_ms', 'max_attempts',
                'attempts', 'created_at_ms', 'run_at_ms', 'reserved_until_ms', 'receipt',
                'last_error', 'seq')
DELIVERY_FIELDS = ('id', 'topic', 'body', 'receipt', 'attempts', 'ttr_ms', 'priority',
                   'run_at_ms', 'reserved_until_ms')
TEXT_FIELDS = {'id', 'topic', 'state', 'receipt', 'last_error'}


def _s(v):
    return v.decode() if isinstance(v, bytes) else v


def delivery(now, job_id, rec, given=0, reserve_ttr=0):
    """A reserve reply's job (its id, its record as stored after the
    reserve, docs/redis-store.md "The record", and its deliveries given
    back) as DELIVERY_FIELDS; reserve_ttr: the reserve's own TTR (0: none)."""
    state, attempts, priority, ttr, _max_attempts = struct.unpack('>BIIII', rec[:17])
    ttr = reserve_ttr or ttr
    if state != 2:
        raise AssertionError('a delivered record that is not reserved: %r' % (rec,))
    run_at = int.from_bytes(rec[17:23], 'big')
    seq = int.from_bytes(rec[23:30], 'big')
    topic_len = rec[30]
    topic = rec[31:31 + topic_len]
    err_len = int.from_bytes(rec[31 + topic_len:33 + topic_len], 'big')
    body = rec[33 + topic_len + err_len:]
    number = (attempts + given) % 2**32  # the delivery number: never lowered
    return _record(DELIVERY_FIELDS, (job_id, topic, body, '%016x%08x' % (seq, number),
                                     attempts, ttr, priority, run_at, now + ttr))


def receipt_arg(receipt):
    """A receipt as finish, touch, release and bury take it (docs/redis-store.md):
    "" as is; 24 lowercase hex digits as 11 bytes (seq 7, attempts 4); anything
    else as "?", which matches no job (as the server does)."""
    r = _s(receipt)
    if r == '':
        return ''
    if len(r) != 24 or not r.startswith('00') or any(c not in '0123456789abcdef' for c in r):
        return '?'
    return bytes.fromhex(r[2:])


def _record(fields, values):
    return {f: (_s(v) if f in TEXT_FIELDS else v) for f, v in zip(fields, values)}


def flat_groups(groups):
    """heads' and reserve's per-group arguments: G, then n, k, topics per group."""
    args = [len(groups)]
    for n, topics in groups:
        args += [n, len(topics)] + list(topics)
    return args


def split_groups(flat, groups, width):
    """A per-group reply (n, then n entries of `width` fields, per group) as one
    list of entries per group; the whole reply must be consumed."""
    out, at = [], 0
    for _ in range(groups):
        n = flat[at]
        entries = flat[at + 1:at + 1 + n * width]
        if len(entries) != n * width:
            raise AssertionError('short reply: %r' % (flat,))
        out.append([entries[i:i + width] for i in range(0, len(entries), width)])
        at += 1 + n * width
    if at != len(flat):
        raise AssertionError('reply longer than its groups: %r' % (flat,))
    return out


class Bucket:
    """The scripts of one bucket, called through one connection (EVALSHA, loading
    a script on NOSCRIPT). Arguments and replies as docs/redis-store.md says."""

    def __init__(self, client, prefix, bucket, scripts, shas):
        self.r = client
        self.prefix = prefix
        self.bucket = bucket
        self.tag = '{%s:%d}' % (prefix, bucket)
        self.scripts = scripts
        self.shas = shas  # shared cache name -> sha
        self.last_floor = 0  # the last seq floor add() gave

    def call(self, name, now, *args):
        argv = [str(now)] + [a if isinstance(a, bytes) else str(a) for a in args]
        sha = self.shas.get(name)
        for _ in range(2):
            try:
                if sha is None:
                    sha = self.r.script_load(self.scripts[name])
                    self.shas[name] = sha
                return self.r.execute_command('EVALSHA', sha, 1, self.tag, *argv)
            except redis.exceptions.NoScriptError:
                sha = None
            except redis.ResponseError as e:
                raise ScriptError(str(e)) from None
        raise AssertionError('script could not be loaded')

    # --- typed wrappers ---------------------------------------------------------
    def init(self, now, buckets, fmt=1):
        return _s(self.call('init', now, fmt, buckets))

    class Record:
        """A job for add, its record built at the call (its state depends on now_ms)."""

        def __init__(self, topic, run_at, ttr, priority, max_attempts, body, seq_floor):
            self.topic = topic.encode() if isinstance(topic, str) else topic
            self.run_at, self.ttr, self.priority = run_at, ttr, priority
            self.max_attempts, self.body, self.seq_floor = max_attempts, body, seq_floor

        def encode(self, now, seq):
            return Bucket.record(1 if self.run_at <= now else 0, self.topic, self.run_at,
                                 ttr=self.ttr, priority=self.priority,
                                 max_attempts=self.max_attempts, body=self.body, seq=seq)

    @staticmethod
    def record(state, topic, run_at, ttr=60000, priority=1024, max_attempts=0, body=b'',
               seq=0, attempts=0, error=b''):
        """A record as docs/redis-store.md "The record" lays it out."""
        topic = topic.encode() if isinstance(topic, str) else topic
        return (struct.pack('>BIIII', state, attempts, priority, ttr, max_attempts)
                + run_at.to_bytes(6, 'big') + seq.to_bytes(7, 'big') + bytes([len(topic)])
                + topic + len(error).to_bytes(2, 'big') + error + body)

    @staticmethod
    def job(id, topic, run_at, ttr=60000, priority=1024, max_attempts=0, replace=False,
            body=b'', seq_floor=None):
        """add's 3 fields for one job; its record is built by add()."""
        return [id, 'r' if replace else '',
                Bucket.Record(topic, run_at, ttr, priority, max_attempts,
                              body if isinstance(body, bytes) else body.encode(), seq_floor)]

    def add(self, now, *jobs):
        """Adds jobs (from job(), or raw 3-field lists). As the server does, each
        record carries a seq floor from one counter: max(now_ms * 1024, last + 1)."""
        at = now if isinstance(now, int) else 0  # a bad now_ms is the script's to reject
        args = []
        for j in jobs:
            for a in j:
                if isinstance(a, Bucket.Record):
                    seq = a.seq_floor
                    if seq is None:
                        seq = self.last_floor = max(at * 1024, self.last_floor + 1)
                    a = a.encode(at, seq)
                args.append(a)
        return [_s(s) for s in self.call('add', now, *args)]

    def add_one(self, now, id, topic, run_at=None, **kw):
        return self.add(now, self.job(id, topic, now if run_at is None else run_at, **kw))[0]

    def reserve_groups(self, now, groups, ttr=0):
        """groups: [(count, topics)]; returns one list of deliveries per group
        (dicts of DELIVERY_FIELDS, read from each job's id and record).
        ttr: the reserve's own TTR for every job (0: each job's)."""
        flat = self.call('reserve', now, ttr, *flat_groups(groups))
        return [[delivery(now, job_id, rec, given, ttr) for job_id, rec, given in part]
                for part in split_groups(flat, len(groups), 3)]

    def reserve(self, now, topics, count=1, ttr=0):
        return self.reserve_groups(now, [(count, topics)], ttr)[0]

    def heads_groups(self, now, state, groups):
        """groups: [(m, topics)]; returns next_due_ms and one list of keys per
        group (tuples: priority, run_at_ms, seq for ready; seq for buried)."""
        flat = self.call('heads', now, state, *flat_groups(groups))
        parts = split_groups(flat[1:], len(groups), 3 if state == 'ready' else 1)
        return flat[0], [[tuple(k) for k in part] for part in parts]

    def heads(self, now, state, m, topics):
        """One group: next_due_ms then its keys, flat."""
        next_due, (keys,) = self.heads_groups(now, state, [(m, topics)])
        return [next_due] + [v for k in keys for v in k]

    def finish(self, now, *pairs):
        return [_s(s) for s in self.call('finish', now, *[a for id_, r in pairs
                                                           for a in (id_, receipt_arg(r))])]

    def touch(self, now, *pairs):
        return [_s(s) for s in self.call('touch', now, *[a for id_, r in pairs
                                                          for a in (id_, receipt_arg(r))])]

    def delete(self, now, *ids):
        return [_s(s) for s in self.call('delete', now, *ids)]

    def release(self, now, id, receipt='', delay=0, error=''):
        return _s(self.call('release', now, id, receipt_arg(receipt), delay, error))

    def bury(self, now, id, receipt='', reason=''):
        return _s(self.call('bury', now, id, receipt_arg(receipt), reason))

    def unreserve(self, now, id, receipt, surplus=False):
        extra = ('surplus',) if surplus else ()
        return _s(self.call('unreserve', now, id, receipt_arg(receipt), *extra))

    def kick(self, now, id):
        return _s(self.call('kick', now, id))

    def kick_topic(self, now, topic, n):
        return self.call('kick_topic', now, topic, n)

    def get(self, now, id):
        return _record(STATE_FIELDS, self.call('get', now, id))

    def state(self, now, id):
        try:
            return self.get(now, id)['state']
        except ScriptError as e:
            if e.code == 'not_found':
                return 'gone'
            raise

    def peek(self, now, topic, state):
        r = self.call('peek', now, topic, state)
        return None if r is None else _record(STATE_FIELDS, r)

    def promote(self, now, limit=1000):
        return self.call('promote', now, limit)

    def pause(self, now, topic, until):
        return _s(self.call('pause', now, topic, until))

    def topics(self, now, only=None):
        flat = self.call('topics', now, *([] if only is None else [only]))
        out = {}
        for i in range(0, len(flat), 6):
            name, d, r, res, b, p = flat[i:i + 6]
            out[_s(name)] = dict(delayed=d, ready=r, reserved=res, buried=b, paused_until=p)
        return out

    STATS = ('jobs', 'delayed', 'ready', 'reserved', 'buried', 'added', 'replaced', 'reserves',
             'finished', 'deleted', 'released', 'timed_out', 'buried_total', 'kicked')

    def stats(self, now):
        return dict(zip(self.STATS, self.call('stats', now)))

