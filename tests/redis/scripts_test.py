#!/usr/bin/python3
"""The Redis store's Lua scripts (src/redis_store/scripts/, docs/redis-store.md) against
a real redis-server: every operation's semantics as the conformance suite states
them for the engine (tests/conformance/), plus what only the Redis store has:
promotion batches and next-due replies, wake-up publishes, memory per job and
Redis commands per job lifecycle, and a 3-master Redis Cluster the test creates
(one slot per script call, buckets spread over the masters, publishes crossing
nodes).

Time is driven exactly: every script takes now_ms from the caller, so the tests
pass it and never sleep. Servers are started on free loopback ports, waited for
with a deadline, and stopped by PID.

Run: /usr/bin/python3 tests/redis/scripts_test.py [-v]
"""

import itertools
import os
import sys
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import redis  # noqa: E402

from script_harness import (Bucket, Cluster, RedisServer, ScriptError,  # noqa: E402
                            load_scripts)

T0 = 1_700_000_000_000  # a wall-clock time, ms
LONG = 600_000
SCRIPTS = load_scripts()
_prefixes = itertools.count(1)


def setUpModule():
    global SERVER
    SERVER = RedisServer()


def tearDownModule():
    SERVER.stop()


class ScriptTest(unittest.TestCase):
    """Each test gets its own key prefix on the shared server."""

    def setUp(self):
        self.r = SERVER.client
        self.prefix = 'dq%d' % next(_prefixes)
        self.shas = {}
        self.b = self.bucket(0)

    def bucket(self, n, client=None):
        return Bucket(client or self.r, self.prefix, n, SCRIPTS, self.shas)

    def assertCode(self, code, fn, *args, **kw):
        with self.assertRaises(ScriptError) as cm:
            fn(*args, **kw)
        self.assertEqual(cm.exception.code, code, str(cm.exception))
        return cm.exception

    def keys(self):
        return sorted(k.decode() for k in self.r.scan_iter(match='{%s:*' % self.prefix))


# --- add and get --------------------------------------------------------------------


class AddAndGet(ScriptTest):

    def test_add_then_get_round_trips_every_field(self):
        b = self.b
        body = b'bin\x00ary \xff\x01 body'
        self.assertEqual(b.add(T0, b.job('rt-1', 'rt.topic', T0 + LONG, ttr=12345, priority=7,
                                         max_attempts=3, body=body)), ['delayed'])
        info = b.get(T0, 'rt-1')
        self.assertEqual(info['id'], 'rt-1')
        self.assertEqual(info['topic'], 'rt.topic')
        self.assertEqual(info['state'], 'delayed')
        self.assertEqual(info['body'], body)
        self.assertEqual(info['priority'], 7)
        self.assertEqual(info['ttr_ms'], 12345)
        self.assertEqual(info['max_attempts'], 3)
        self.assertEqual(info['attempts'], 0)
        self.assertEqual(info['created_at_ms'], T0)
        self.assertEqual(info['run_at_ms'], T0 + LONG)
        self.assertEqual(info['reserved_until_ms'], 0)
        self.assertEqual(info['receipt'], '')
        self.assertEqual(info['last_error'], '')

        self.assertEqual(b.add_one(T0 + 5, 'rt-2', 'rt.topic'), 'ready')
        d = b.get(T0 + 5, 'rt-2')
        self.assertEqual((d['state'], d['run_at_ms'], d['created_at_ms']), ('ready', T0 + 5, T0 + 5))
        self.assertGreater(d['seq'], info['seq'])

    def test_values_at_the_limits(self):
        b = self.b
        topic = ('Az09._:-' * 30)[:200]
        id_ = (b'sp ace \xc3\xa9t\xc3\xa9 ~!@#$%^&*()[]{}/\\' + b'x' * 256)[:256]
        big = bytes((i * 7) % 256 for i in range(256 * 1024))
        self.assertEqual(b.add(T0, b.job(id_, topic, T0, ttr=4294967295, priority=4294967295,
                                         max_attempts=4294967295, body=big)), ['ready'])
        b.add_one(T0, 'prio-zero', topic, priority=0)
        info = b.get(T0, id_)
        self.assertEqual((info['topic'], info['priority'], info['max_attempts'], info['ttr_ms']),
                         (topic, 4294967295, 4294967295, 4294967295))
        self.assertTrue(info['body'] == big, 'a 256 KiB body did not come back unchanged')
        got = b.reserve(T0, [topic], 2)
        self.assertEqual([d['id'] for d in got], ['prio-zero', id_.decode()])
        self.assertTrue(got[1]['body'] == big)
        self.assertEqual(got[1]['reserved_until_ms'], T0 + 4294967295)
        self.assertEqual(b.finish(T0, (id_, got[1]['receipt'])), ['ok'])

    def test_a_past_run_at_is_due_now(self):
        b = self.b
        self.assertEqual(b.add_one(T0, 'past', 'runat', T0 - 5000), 'ready')
        self.assertEqual(b.add_one(T0, 'epoch', 'runat', 0), 'ready')
        self.assertEqual(b.add_one(T0, 'now', 'runat', T0), 'ready')
        self.assertEqual(b.add_one(T0, 'later', 'runat', T0 + 1), 'delayed')
        self.assertEqual([d['id'] for d in b.reserve(T0, ['runat'], 10)], ['epoch', 'past', 'now'])

    def test_a_seq_floor_raises_the_seq_and_later_adds_follow_it(self):
        b = self.b
        seq_floor = (T0 + 5000) * 1024 + 7
        self.assertEqual(b.add(T0, b.job('f', 'floor', T0, seq_floor=seq_floor)), ['ready'])
        self.assertEqual(b.get(T0, 'f')['seq'], seq_floor)
        # Below the bucket's last seq (another server's adds went first), a
        # floor gives way: the record is stored with the next seq.
        self.assertEqual(b.add(T0, b.job('g', 'floor', T0, seq_floor=T0 * 1024, body='kept')),
                         ['ready'])
        info = b.get(T0, 'g')
        self.assertEqual((info['seq'], info['body'], info['topic']), (seq_floor + 1, b'kept', 'floor'))

    def test_bad_input_is_rejected_naming_the_field_and_changes_nothing(self):
        b = self.b
        good = b.job('good', 'bad.input', T0)
        rec = b.record
        cases = [
            ('topic', b.job('j', '', T0)), ('topic', b.job('j', 'has space', T0)),
            ('topic', b.job('j', 'a/b', T0)), ('topic', b.job('j', 't' * 201, T0)),
            ('id', b.job('i' * 257, 't', T0)), ('id', b.job('', 't', T0)),
            ('run_at_ms', b.job('j', 't', 253402300800000)),
            ('run_at_ms', b.job('j', 't', 2 ** 48 - 1)),
            ('ttr_ms', b.job('j', 't', T0, ttr=0)),
            ('flags', ['j', 'x', rec(1, 't', T0)]),
            ('record', ['j', '', rec(1, 't', T0)[:32]]),
            ('record', ['j', '', rec(1, 'topic', T0)[:36]]),  # cut inside the topic
            ('record', ['j', '', rec(0, 't', T0)]),  # due, yet delayed
            ('record', ['j', '', rec(1, 't', T0 + 1)]),  # not due, yet ready
            ('record', ['j', '', rec(1, 't', T0, attempts=1)]),
            ('record', ['j', '', rec(1, 't', T0, error=b'old')]),
            ('seq', ['j', '', rec(1, 't', T0, seq=(2 ** 43 - 1) * 1024 + 1)]),
        ]
        for field, job in cases:
            with self.subTest(field=field, job=job[:2]):
                e = self.assertCode('invalid_argument', b.add, T0, good, job)
                self.assertIn(field, e.message)
                self.assertIn('(job 2)', e.message)
        self.assertIn('now_ms', self.assertCode('invalid_argument', b.add, 'now', good).message)
        self.assertCode('invalid_argument', b.call, 'add', T0, 'id', '')  # not 3 fields
        self.assertEqual(self.keys(), [], 'a rejected batch wrote something')
        # A bad replace of a live job leaves it as it was.
        b.add(T0, b.job('keep', 'bad.input', T0 + LONG, body='original'))
        self.assertCode('invalid_argument', b.add, T0,
                        b.job('keep', 'bad.input', T0, ttr=0, replace=True, body='changed'))
        info = b.get(T0, 'keep')
        self.assertEqual((info['body'], info['state']), (b'original', 'delayed'))
        self.assertEqual(b.stats(T0)['added'], 1)

    def test_a_bad_bucket_tag_is_rejected(self):
        for tag in ('dq:0', '{dq}', '{:1}', '{dq:x}'):
            with self.subTest(tag=tag):
                with self.assertRaises(redis.ResponseError) as cm:
                    self.r.evalsha(self.r.script_load(SCRIPTS['get']), 1, tag, T0, 'x')
                self.assertTrue(str(cm.exception).startswith('invalid_argument KEYS[1]'))

    def test_adding_a_live_id_fails_with_exists_and_changes_nothing(self):
        b = self.b
        b.add(T0, b.job('dup', 'dup.a', T0 + LONG, priority=7, body='one'))
        self.assertEqual(b.add(T0, b.job('dup', 'dup.a', T0, priority=1, body='two'),
                               b.job('dup', 'dup.b', T0), b.job('other', 'dup.a', T0)),
                         ['exists', 'exists', 'ready'])
        info = b.get(T0, 'dup')
        self.assertEqual((info['topic'], info['body'], info['priority'], info['state'],
                          info['run_at_ms']), ('dup.a', b'one', 7, 'delayed', T0 + LONG))
        # An id twice in one batch: the second sees the first.
        self.assertEqual(b.add(T0, b.job('twice', 't2', T0, body='1'), b.job('twice', 't2', T0)),
                         ['ready', 'exists'])
        self.assertEqual(b.add(T0, b.job('thrice', 't2', T0, body='1'),
                               b.job('thrice', 't2', T0 + LONG, body='2', replace=True)),
                         ['ready', 'delayed'])
        self.assertEqual(b.get(T0, 'thrice')['body'], b'2')
        s = b.stats(T0)
        self.assertEqual((s['jobs'], s['added'], s['replaced']), (4, 5, 1))
        self.assertEqual(b.topics(T0)['t2'], dict(delayed=1, ready=1, reserved=0, buried=0,
                                                  paused_until=0))
        # Also while reserved: the reservation is untouched.
        b.add_one(T0, 'res', 'dup.r')
        d = b.reserve(T0, ['dup.r'])[0]
        self.assertEqual(b.add_one(T0, 'res', 'dup.r'), 'exists')
        self.assertEqual(b.finish(T0, ('res', d['receipt'])), ['ok'])

    def test_a_finished_or_deleted_id_can_be_added_again(self):
        b = self.b
        b.add_one(T0, 'x', 'again')
        d = b.reserve(T0, ['again'])[0]
        self.assertEqual(b.finish(T0, ('x', d['receipt'])), ['ok'])
        b.add(T0, b.job('x', 'again', T0, body='second'))
        self.assertEqual((b.get(T0, 'x')['body'], b.get(T0, 'x')['attempts']), (b'second', 0))
        self.assertEqual(b.delete(T0, 'x'), ['ok'])
        self.assertEqual(b.add_one(T0, 'x', 'again'), 'ready')


class Replace(ScriptTest):

    def test_replace_updates_and_reschedules_a_job_in_any_state(self):
        b = self.b
        b.add_one(T0, 'r1', 'repl', T0 + LONG)
        self.assertEqual(b.add(T0, b.job('r1', 'repl', T0, ttr=5000, priority=3, max_attempts=2,
                                         replace=True, body='new body')), ['ready'])
        info = b.get(T0, 'r1')
        self.assertEqual((info['state'], info['body'], info['priority'], info['ttr_ms'],
                          info['max_attempts'], info['run_at_ms']),
                         ('ready', b'new body', 3, 5000, 2, T0))
        self.assertEqual(b.add(T0, b.job('r1', 'repl', T0 + LONG, replace=True)), ['delayed'])
        self.assertEqual(b.reserve(T0, ['repl']), [])
        b.add_one(T0, 'r2', 'repl')
        d = b.reserve(T0, ['repl'])[0]
        b.bury(T0, 'r2', d['receipt'])
        self.assertEqual(b.add(T0, b.job('r2', 'repl', T0, replace=True)), ['ready'])
        self.assertEqual(b.add(T0, b.job('r3', 'repl', T0, replace=True)), ['ready'])
        s = b.stats(T0)
        self.assertEqual((s['jobs'], s['replaced'], s['added'], s['delayed'], s['ready'],
                          s['buried']), (3, 3, 6, 1, 2, 0))
        # A replace may move the job to another topic; counts follow.
        self.assertEqual(b.add(T0, b.job('r3', 'repl.other', T0, replace=True)), ['ready'])
        t = b.topics(T0)
        self.assertEqual((t['repl']['ready'], t['repl.other']['ready']), (1, 1))

    def test_replacing_a_reserved_job_makes_its_receipt_stale(self):
        b = self.b
        b.add_one(T0, 'j', 'repl.res')
        old = b.reserve(T0, ['repl.res'])[0]
        b.add(T0, b.job('j', 'repl.res', T0, replace=True, body='v2'))
        self.assertEqual(b.state(T0, 'j'), 'ready')
        self.assertEqual(b.topics(T0)['repl.res']['reserved'], 0)
        self.assertEqual(b.finish(T0, ('j', old['receipt'])), ['stale_receipt'])
        now = b.reserve(T0, ['repl.res'])[0]
        self.assertEqual((now['body'], now['attempts']), (b'v2', 1))
        self.assertNotEqual(now['receipt'], old['receipt'])
        self.assertEqual(b.finish(T0, ('j', old['receipt']), ('j', now['receipt'])),
                         ['stale_receipt', 'ok'])

    def test_a_replaced_job_goes_to_the_back_of_its_line(self):
        b = self.b
        for i in range(3):
            b.add_one(T0, 'f%d' % i, 'line')
        b.add(T0, b.job('f0', 'line', T0, replace=True))
        self.assertEqual([d['id'] for d in b.reserve(T0, ['line'], 3)], ['f1', 'f2', 'f0'])


# --- timing ---------------------------------------------------------------------------


class Timing(ScriptTest):

    def test_a_delayed_job_is_never_handed_out_early(self):
        b = self.b
        b.add_one(T0, 'e1', 'early', T0 + 30)
        self.assertEqual(b.promote(T0 + 29), [0, 0, T0 + 30])
        self.assertEqual(b.reserve(T0 + 29, ['early']), [])
        self.assertEqual(b.state(T0 + 29, 'e1'), 'delayed')
        self.assertIsNone(b.peek(T0 + 29, 'early', 'ready'))
        self.assertEqual(b.topics(T0 + 29)['early']['ready'], 0)
        got = b.reserve(T0 + 30, ['early'])  # due now; reserve settles without a promote
        self.assertEqual([(d['id'], d['run_at_ms']) for d in got], [('e1', T0 + 30)])

    def test_get_of_a_due_job_reads_it_as_ready(self):
        b = self.b
        b.add_one(T0, 'j', 'due', T0 + 10)
        self.assertEqual(b.state(T0 + 10, 'j'), 'ready')
        self.assertEqual(b.peek(T0 + 10, 'due', 'ready')['id'], 'j')

    def test_delivery_round_trips_every_field(self):
        b = self.b
        body = b'payload\x00\x80'
        b.add(T0, b.job('d1', 'deliv', T0, ttr=45000, priority=9, max_attempts=4, body=body))
        d = b.reserve(T0 + 3, ['deliv'])[0]
        self.assertEqual(d, dict(id='d1', topic='deliv', body=body, receipt=d['receipt'],
                                 attempts=1, ttr_ms=45000, priority=9, run_at_ms=T0,
                                 reserved_until_ms=T0 + 3 + 45000))
        self.assertRegex(d['receipt'], r'^[0-9a-f]{24}$')
        info = b.get(T0 + 4, 'd1')
        self.assertEqual((info['state'], info['attempts'], info['receipt'],
                          info['reserved_until_ms']), ('reserved', 1, d['receipt'], T0 + 45003))


    def test_a_reserves_own_ttr_is_kept_while_reserved_and_dropped_after(self):
        b = self.b
        rttr = b.tag + ':rttr'
        for i in range(4):
            b.add(T0, b.job('o%d' % i, 'own', T0, ttr=600000))
        got = b.reserve(T0, ['own'], 4, ttr=50)
        self.assertEqual([(d['ttr_ms'], d['reserved_until_ms']) for d in got], [(50, T0 + 50)] * 4)
        self.assertEqual(b.get(T0, 'o0')['ttr_ms'], 600000)
        self.assertEqual(b.r.hlen(rttr), 4)
        self.assertEqual(b.touch(T0 + 10, ('o0', got[0]['receipt'])), ['ok'])
        self.assertEqual(b.get(T0 + 10, 'o0')['reserved_until_ms'], T0 + 60)
        # Every way out of reserved drops the entry: finish, release, TTR.
        self.assertEqual(b.finish(T0 + 10, ('o1', got[1]['receipt'])), ['ok'])
        b.release(T0 + 10, 'o2', got[2]['receipt'])
        self.assertEqual(b.r.hlen(rttr), 2)
        info = b.get(T0 + 50, 'o3')  # its reservation ran out
        self.assertEqual((info['state'], info['last_error']), ('ready', 'ttr of 50 ms ran out (attempt 1)'))
        b.promote(T0 + 60)
        self.assertEqual(b.r.exists(rttr), 0)
        again = b.reserve(T0 + 60, ['own'])[0]  # a plain reserve: the job's own TTR
        self.assertEqual(again['reserved_until_ms'], T0 + 60 + 600000)


class Order(ScriptTest):

    def test_ready_jobs_come_out_by_priority_then_run_at_then_order_of_adding(self):
        b = self.b
        base = T0 - 10000
        for id_, prio, at in (('p5-late', 5, base + 2), ('p5-early-1st', 5, base + 1),
                              ('p1', 1, base + 9), ('p5-early-2nd', 5, base + 1),
                              ('pmax', 4294967295, base), ('p0', 0, base + 50)):
            b.add(T0, b.job(id_, 'order', at, priority=prio))
        got = [b.reserve(T0, ['order'])[0]['id'] for _ in range(6)]
        self.assertEqual(got, ['p0', 'p1', 'p5-early-1st', 'p5-early-2nd', 'p5-late', 'pmax'])
        # Added one after another in the same ms: that order.
        b.add(T0, *[b.job('f%d' % (100 + i), 'fifo', T0) for i in range(20)])
        self.assertEqual([d['id'] for d in b.reserve(T0, ['fifo'], 20)],
                         ['f%d' % (100 + i) for i in range(20)])

    def test_run_at_order_beats_byte_order_of_ids_and_big_numbers_sort_right(self):
        b = self.b
        # run_at values whose big-endian bytes differ in a high byte only.
        ats = [T0 - 1, T0 - 256, T0 - 65536, T0 - 2 ** 24, T0 - 2 ** 32, 1]
        for i, at in enumerate(ats):
            b.add(T0, b.job('z%d' % (9 - i), 'bytes', at))
        self.assertEqual([d['run_at_ms'] for d in b.reserve(T0, ['bytes'], 10)], sorted(ats))

    def test_jobs_falling_due_come_out_by_run_at(self):
        b = self.b
        for id_, off in (('t30', 30), ('t10', 10), ('t20', 20)):
            b.add_one(T0, id_, 'due', T0 + off)
        self.assertEqual([d['id'] for d in b.reserve(T0 + 30, ['due'], 3)], ['t10', 't20', 't30'])

    def test_order_holds_across_the_topics_of_one_reserve(self):
        b = self.b
        base = T0 - 10000
        for topic, id_, prio, at in (('x.a', 'a-p10', 10, base), ('x.b', 'b-p5', 5, base + 1),
                                     ('x.a', 'a-p5', 5, base + 1), ('x.b', 'b-p20', 20, base),
                                     ('x.a', 'a-p5-earlier', 5, base), ('x.c', 'c-p0', 0, base)):
            b.add(T0, b.job(id_, topic, at, priority=prio))
        got = [b.reserve(T0, ['x.a', 'x.b'])[0]['id'] for _ in range(4)]
        self.assertEqual(got, ['a-p5-earlier', 'b-p5', 'a-p5', 'a-p10'])
        self.assertEqual([d['id'] for d in b.reserve(T0, ['x.a', 'x.b'], 10)], ['b-p20'])
        self.assertEqual(b.state(T0, 'c-p0'), 'ready')
        self.assertEqual([d['id'] for d in b.reserve(T0, ['x.c', 'x.c'], 5)], ['c-p0'])

    def test_one_batch_merges_several_topics(self):
        b = self.b
        for i in range(6):
            b.add(T0, b.job('m%d' % i, 'm.%d' % (i % 3), T0 - 100 + i, priority=i % 2))
        got = b.reserve(T0, ['m.0', 'm.1', 'm.2', 'm.none'], 5)
        self.assertEqual([d['id'] for d in got], ['m0', 'm2', 'm4', 'm1', 'm3'])
        self.assertEqual(b.topics(T0)['m.2']['ready'], 1)
        self.assertEqual(b.topics(T0)['m.2']['reserved'], 1)
        self.assertEqual([d['id'] for d in b.reserve(T0, ['m.0', 'm.1', 'm.2'], 5)], ['m5'])

    def test_reserve_count_hands_out_a_batch_of_the_best(self):
        b = self.b
        for i in range(5):
            b.add(T0, b.job('b%d' % i, 'batch', T0, priority=10 - i))
        first = b.reserve(T0, ['batch'], 3)
        self.assertEqual([d['id'] for d in first], ['b4', 'b3', 'b2'])
        self.assertEqual(len({d['receipt'] for d in first}), 3)
        self.assertEqual([d['id'] for d in b.reserve(T0, ['batch'], 3)], ['b1', 'b0'])
        self.assertEqual(b.reserve(T0, ['batch'], 1000), [])
        self.assertEqual(b.topics(T0)['batch']['reserved'], 5)
        self.assertEqual(b.stats(T0)['reserves'], 5)

    def test_reserve_rejects_bad_requests_naming_the_field(self):
        b = self.b
        b.add_one(T0, 'keep', 'rq.ok')
        many = tuple('t%d' % i for i in range(100))
        # now, ttr_ms, G, then per group: count, k, k topics.
        for args, field in (((T0, 0, 1, 1, 0), 'topics'), ((T0, 0, 1, 1, 1, 'bad topic'), 'topics'),
                            ((T0, 0, 1, 1, 2, 'rq.ok', ''), 'topics'),
                            ((T0, 0, 1, 0, 1, 'rq.ok'), 'count'),
                            ((T0, 0, 1, 1001, 1, 'rq.ok'), 'count'),
                            ((T0, 0, 1, 1, 101) + many + ('t100',), 'topics'),
                            ((T0, 0, 1, 1, 2, 'rq.ok'), 'topics'),  # fewer topics than k
                            ((T0, 0, 0), 'groups'), ((T0, 0, 1001), 'groups'), ((T0, 0), 'groups'),
                            ((T0, 0, 1), 'count'), ((T0, 0, 2, 1, 1, 'rq.ok'), 'count'),
                            ((T0, 0, 1, 1, 1, 'rq.ok', 'rq.ok'), 'groups'),  # left over
                            # The bounds of one call: counts and topics over all groups.
                            ((T0, 0, 2, 600, 1, 'rq.ok', 401, 1, 'rq.ok'), 'count'),
                            ((T0, 0, 11) + sum(((1, 100) + many for _ in range(11)), ()),
                             'topics'),
                            ((T0,), 'ttr_ms'), ((T0, -1, 1, 1, 1, 'rq.ok'), 'ttr_ms'),
                            ((T0, 2**32, 1, 1, 1, 'rq.ok'), 'ttr_ms'),
                            # A bad group after a good one: nothing is reserved.
                            ((T0, 0, 2, 1, 1, 'rq.ok', 1, 1, 'bad topic'), 'topics')):
            with self.subTest(args=args[:6], field=field):
                e = self.assertCode('invalid_argument', b.call, 'reserve', *args)
                self.assertTrue(e.message.startswith(field + ':'), e.message)
        self.assertEqual(b.state(T0, 'keep'), 'ready')
        # At the bounds exactly: 1000 jobs and 1000 topics over all groups.
        self.assertEqual(b.call('reserve', T0, 0, 2, 999, 1, 'rq.none', 1, 1, 'rq.none'), [0, 0])
        self.assertEqual(b.call('reserve', T0, 0, *((10,) + sum(((1, 100) + many for _ in range(10)),
                                                             ()))), [0] * 10)

    def test_heads_rejects_bad_requests_naming_the_field(self):
        b = self.b
        for args, field in (((T0, 'ready', 1, 1, 0), 'topics'),
                            ((T0, 'ready', 1, 0, 1, 'h.ok'), 'm'),
                            ((T0, 'ready', 2, 600, 1, 'h.ok', 401, 1, 'h.ok'), 'm'),
                            ((T0, 'ready', 0), 'groups'),
                            ((T0, 'ready', 1, 1, 1, 'h.ok', 'extra'), 'groups'),
                            ((T0, 'reserved', 1, 1, 1, 'h.ok'), 'state')):
            with self.subTest(args=args, field=field):
                e = self.assertCode('invalid_argument', b.call, 'heads', *args)
                self.assertTrue(e.message.startswith(field + ':'), e.message)


# --- finish, receipts and TTR ------------------------------------------------------------


class Receipts(ScriptTest):

    def test_finish_removes_the_job_with_or_without_its_receipt(self):
        b = self.b
        b.add_one(T0, 'with', 'fin')
        b.add_one(T0, 'without', 'fin')
        got = b.reserve(T0, ['fin'], 2)
        self.assertEqual(b.finish(T0, ('with', got[0]['receipt']), ('without', '')), ['ok', 'ok'])
        self.assertEqual(b.finish(T0, ('with', got[0]['receipt']), ('without', '')),
                         ['not_found', 'not_found'])
        s = b.stats(T0)
        self.assertEqual((s['jobs'], s['finished'], s['reserved']), (0, 2, 0))
        self.assertEqual(b.topics(T0), {})
        self.assertEqual(self.keys(), ['{%s:0}:meta' % self.prefix])

    def test_a_batch_finish_with_an_id_twice(self):
        b = self.b
        b.add_one(T0, 'a', 'fin2')
        d = b.reserve(T0, ['fin2'])[0]
        self.assertEqual(b.finish(T0, ('a', 'bogus'), ('a', d['receipt']), ('a', d['receipt'])),
                         ['stale_receipt', 'ok', 'not_found'])

    def test_an_expired_reservation_goes_back_to_ready_and_its_receipt_is_stale(self):
        b = self.b
        b.add(T0, b.job('t1', 'ttr', T0, ttr=50))
        first = b.reserve(T0, ['ttr'])[0]
        self.assertEqual(b.state(T0 + 49, 't1'), 'reserved')
        self.assertEqual(b.reserve(T0 + 49, ['ttr']), [])
        info = b.get(T0 + 50, 't1')
        self.assertEqual((info['state'], info['attempts'], info['receipt'], info['last_error']),
                         ('ready', 1, '', 'ttr of 50 ms ran out (attempt 1)'))
        now = T0 + 50
        self.assertEqual(b.finish(now, ('t1', first['receipt'])), ['stale_receipt'])
        self.assertEqual(b.touch(now, ('t1', first['receipt'])), ['stale_receipt'])
        self.assertCode('stale_receipt', b.release, now, 't1', first['receipt'])
        self.assertCode('stale_receipt', b.bury, now, 't1', first['receipt'])
        second = b.reserve(now, ['ttr'])[0]
        self.assertEqual((second['id'], second['attempts']), ('t1', 2))
        self.assertNotEqual(second['receipt'], first['receipt'])
        self.assertEqual(b.finish(now, ('t1', first['receipt'])), ['stale_receipt'])
        self.assertEqual(b.get(now, 't1')['receipt'], second['receipt'])
        self.assertEqual(b.finish(now, ('t1', second['receipt'])), ['ok'])
        self.assertEqual(b.stats(now)['timed_out'], 1)

    def test_the_ttr_runs_out_inside_finish_itself(self):
        b = self.b
        b.add(T0, b.job('t', 'ttr2', T0, ttr=10))
        d = b.reserve(T0, ['ttr2'])[0]
        self.assertEqual(b.finish(T0 + 10, ('t', d['receipt'])), ['stale_receipt'])
        self.assertEqual(b.finish(T0 + 10, ('t', '')), ['not_reserved ready'])
        s = b.stats(T0 + 10)
        self.assertEqual((s['timed_out'], s['ready'], s['reserved']), (1, 1, 0))

    def test_a_timed_out_job_keeps_its_place_in_line(self):
        b = self.b
        b.add(T0, b.job('first', 'line', T0 - 2, ttr=10), b.job('second', 'line', T0 - 1))
        b.reserve(T0, ['line'])
        self.assertEqual(b.promote(T0 + 10)[:2], [0, 1])
        self.assertEqual([d['id'] for d in b.reserve(T0 + 10, ['line'], 2)], ['first', 'second'])

    def test_each_delivery_has_its_own_receipt(self):
        b = self.b
        b.add_one(T0, 'j', 'rcpt')
        receipts = []
        for _ in range(3):
            d = b.reserve(T0, ['rcpt'])[0]
            receipts.append(d['receipt'])
            self.assertEqual(b.release(T0, 'j', d['receipt']), 'ready')
        b.delete(T0, 'j')
        b.add_one(T0, 'j', 'rcpt')
        last = b.reserve(T0, ['rcpt'])[0]
        receipts.append(last['receipt'])
        self.assertEqual(len(set(receipts)), 4)
        self.assertEqual(b.finish(T0, *[('j', r) for r in receipts[:3]]), ['stale_receipt'] * 3)
        self.assertEqual(b.finish(T0, ('j', last['receipt'])), ['ok'])

    def test_a_delivery_given_back_is_never_the_next_ones_receipt(self):
        b = self.b
        b.add_one(T0, 'j', 'given')
        first = b.reserve(T0, ['given'])[0]
        self.assertEqual(b.unreserve(T0, 'j', first['receipt']), 'ready')
        second = b.reserve(T0, ['given'])[0]
        self.assertEqual(second['attempts'], 1)
        self.assertNotEqual(second['receipt'], first['receipt'])
        self.assertEqual(b.get(T0, 'j')['receipt'], second['receipt'])
        self.assertEqual(b.finish(T0, ('j', first['receipt'])), ['stale_receipt'])
        self.assertEqual(b.touch(T0, ('j', first['receipt'])), ['stale_receipt'])
        self.assertCode('stale_receipt', b.release, T0, 'j', first['receipt'])
        self.assertCode('stale_receipt', b.bury, T0, 'j', first['receipt'])
        self.assertCode('stale_receipt', b.unreserve, T0, 'j', first['receipt'])
        self.assertEqual(b.touch(T0, ('j', second['receipt'])), ['ok'])
        self.assertEqual(b.finish(T0, ('j', second['receipt'])), ['ok'])
        # Gone with the job: a new one of that id starts from nothing.
        self.assertEqual(b.r.exists(b.tag + ':given'), 0)

    def test_a_surplus_given_back_is_not_counted_in_reserves(self):
        # The caller cuts a batch to its byte budget and gives the rest back
        # as "surplus": reserves counts the jobs handed out, so not those.
        b = self.b
        b.add_one(T0, 'a', 'surplus')
        b.add_one(T0, 'b', 'surplus')
        got = b.reserve(T0, ['surplus'], 2)
        self.assertEqual(b.stats(T0)['reserves'], 2)
        self.assertEqual(b.unreserve(T0, 'b', got[1]['receipt'], surplus=True), 'ready')
        self.assertEqual(b.stats(T0)['reserves'], 1)
        # Any other give-back was handed out: still counted.
        self.assertEqual(b.unreserve(T0, 'a', got[0]['receipt']), 'ready')
        self.assertEqual(b.stats(T0)['reserves'], 1)

    def test_operations_needing_a_reservation_fail_on_other_states(self):
        b = self.b
        b.add_one(T0, 'ready', 'nr')
        b.add_one(T0, 'delayed', 'nr', T0 + LONG)
        b.add_one(T0, 'buried', 'nr.b')
        b.bury(T0, 'buried', b.reserve(T0, ['nr.b'])[0]['receipt'])
        for id_ in ('ready', 'delayed', 'buried'):
            with self.subTest(id=id_):
                # The id names its state here.
                self.assertEqual(b.finish(T0, (id_, '')), ['not_reserved ' + id_])
                self.assertEqual(b.touch(T0, (id_, '')), ['not_reserved ' + id_])
                e = self.assertCode('not_reserved', b.release, T0, id_)
                self.assertIn('is %s, not reserved' % id_, e.message)
                self.assertCode('not_reserved', b.bury, T0, id_)
                self.assertEqual(b.finish(T0, (id_, 'bogus-receipt')), ['stale_receipt'])
                self.assertEqual(b.touch(T0, (id_, 'bogus-receipt')), ['stale_receipt'])
                self.assertCode('stale_receipt', b.release, T0, id_, 'bogus-receipt')
                self.assertCode('stale_receipt', b.bury, T0, id_, 'bogus-receipt')
                self.assertEqual(b.state(T0, id_), id_)
        b.add_one(T0, 'reserved', 'nr.r')
        r = b.reserve(T0, ['nr.r'])[0]
        self.assertEqual(b.finish(T0, ('reserved', r['receipt'] + 'x'), ('reserved', 'bogus')),
                         ['stale_receipt', 'stale_receipt'])
        self.assertEqual(b.state(T0, 'reserved'), 'reserved')

    def test_operations_on_an_unknown_id_fail_with_not_found(self):
        b = self.b
        self.assertEqual(b.finish(T0, ('ghost', ''), ('ghost', 'r')), ['not_found'] * 2)
        self.assertEqual(b.delete(T0, 'ghost'), ['not_found'])
        self.assertEqual(b.touch(T0, ('ghost', '')), ['not_found'])
        for fn in (b.release, b.bury, b.kick, b.get):
            e = self.assertCode('not_found', fn, T0, 'ghost')
            self.assertEqual(e.message, "job 'ghost' does not exist")
        e = self.assertCode('not_found', b.get, T0, 'y' * 100)
        self.assertEqual(e.message, "job '%s...' does not exist" % ('y' * 64))
        self.assertCode('invalid_argument', b.get, T0, 'x' * 300)
        self.assertCode('invalid_argument', b.call, 'get', T0)  # no id at all

    def test_touch_extends_the_reservation_to_a_full_ttr(self):
        b = self.b
        b.add(T0, b.job('t2', 'touch', T0, ttr=30))
        e = b.reserve(T0, ['touch'])[0]
        self.assertEqual(b.touch(T0 + 20, ('t2', e['receipt'])), ['ok'])
        info = b.get(T0 + 20, 't2')
        self.assertEqual((info['reserved_until_ms'], info['receipt']), (T0 + 50, e['receipt']))
        self.assertEqual(b.touch(T0 + 21, ('t2', '')), ['ok'])
        self.assertEqual(b.state(T0 + 50, 't2'), 'reserved')
        self.assertEqual(b.state(T0 + 51, 't2'), 'ready')
        self.assertEqual(b.touch(T0 + 51, ('t2', e['receipt'])), ['stale_receipt'])

    def test_touch_does_not_announce_a_later_deadline(self):
        b = self.b
        b.add(T0, b.job('t', 'touch.q', T0, ttr=30))
        d = b.reserve(T0, ['touch.q'])[0]
        with Listener(self) as w:
            b.touch(T0 + 5, ('t', d['receipt']))
            self.assertEqual(w.messages(), [])


class Release(ScriptTest):

    def test_release_with_delay_makes_the_job_delayed_and_keeps_the_error(self):
        b = self.b
        b.add_one(T0, 'j', 'rel')
        d = b.reserve(T0, ['rel'])[0]
        self.assertEqual(b.release(T0 + 1, 'j', d['receipt'], 20, 'boom: upstream 503'), 'delayed')
        info = b.get(T0 + 1, 'j')
        self.assertEqual((info['state'], info['last_error'], info['attempts'], info['run_at_ms'],
                          info['receipt']), ('delayed', 'boom: upstream 503', 1, T0 + 21, ''))
        self.assertEqual(b.reserve(T0 + 20, ['rel']), [])
        self.assertEqual(b.finish(T0 + 20, ('j', d['receipt'])), ['stale_receipt'])
        again = b.reserve(T0 + 21, ['rel'])[0]
        self.assertEqual((again['id'], again['attempts']), ('j', 2))
        self.assertEqual(b.get(T0 + 21, 'j')['last_error'], 'boom: upstream 503')
        self.assertEqual(b.stats(T0 + 21)['released'], 1)

    def test_release_without_delay_is_ready_at_once_behind_earlier_jobs(self):
        b = self.b
        b.add_one(T0, 'j', 'rel0')
        for attempt in range(1, 6):
            d = b.reserve(T0 + attempt, ['rel0'])[0]
            self.assertEqual(d['attempts'], attempt)
            self.assertEqual(b.release(T0 + attempt, 'j', d['receipt'] if attempt % 2 else ''),
                             'ready')
        b.add_one(T0 + 10, 'k', 'rel0', T0 + 7)
        d = b.reserve(T0 + 10, ['rel0'])[0]
        self.assertEqual(b.release(T0 + 10, 'j', '', 0, ''), 'ready')
        self.assertEqual([x['id'] for x in b.reserve(T0 + 10, ['rel0'], 2)], ['k', 'j'])
        self.assertEqual(d['id'], 'j')

    def test_a_bad_delay_fails_and_changes_nothing(self):
        b = self.b
        b.add_one(T0, 'j', 'relneg')
        d = b.reserve(T0, ['relneg'])[0]
        for delay in (-1, 'x', 3153600000001):
            self.assertIn('delay_ms', self.assertCode('invalid_argument', b.release, T0, 'j',
                                                      d['receipt'], delay, 'x').message)
        info = b.get(T0, 'j')
        self.assertEqual((info['state'], info['receipt'], info['last_error']),
                         ('reserved', d['receipt'], ''))

    def test_using_up_max_attempts_by_release_buries_the_job(self):
        b = self.b
        b.add(T0, b.job('j', 'maxrel', T0, max_attempts=2))
        d1 = b.reserve(T0, ['maxrel'])[0]
        self.assertEqual(b.release(T0, 'j', d1['receipt'], 0, 'first failure'), 'ready')
        d2 = b.reserve(T0, ['maxrel'])[0]
        self.assertEqual(d2['attempts'], 2)
        self.assertEqual(b.release(T0, 'j', d2['receipt'], 0, 'second failure'), 'buried')
        info = b.get(T0, 'j')
        self.assertEqual((info['state'], info['attempts'], info['last_error']),
                         ('buried', 2, 'second failure; max_attempts (2) used up'))
        self.assertEqual(b.reserve(T0, ['maxrel']), [])
        b.add(T0, b.job('once', 'maxrel', T0, max_attempts=1))
        o = b.reserve(T0, ['maxrel'])[0]
        self.assertEqual(b.release(T0, 'once', o['receipt'], LONG, ''), 'buried')
        self.assertEqual(b.get(T0, 'once')['last_error'], 'max_attempts (1) used up')
        s = b.stats(T0)
        self.assertEqual((s['buried_total'], s['released'], s['buried']), (2, 3, 2))

    def test_using_up_max_attempts_by_ttr_buries_the_job(self):
        b = self.b
        b.add(T0, b.job('j', 'maxttr', T0, max_attempts=1, ttr=20))
        d = b.reserve(T0, ['maxttr'])[0]
        self.assertEqual(b.promote(T0 + 20)[:2], [0, 1])
        info = b.get(T0 + 20, 'j')
        self.assertEqual((info['state'], info['last_error']),
                         ('buried', 'ttr of 20 ms ran out (attempt 1); max_attempts (1) used up'))
        self.assertEqual(b.reserve(T0 + 20, ['maxttr']), [])
        self.assertEqual(b.finish(T0 + 20, ('j', d['receipt'])), ['stale_receipt'])
        self.assertEqual(b.kick(T0 + 20, 'j'), 'OK')
        self.assertEqual(b.reserve(T0 + 20, ['maxttr'])[0]['attempts'], 2)
        s = b.stats(T0 + 20)
        self.assertEqual((s['timed_out'], s['buried_total'], s['kicked']), (1, 1, 1))


# --- bury, kick, delete, peek -----------------------------------------------------------


class BuryKickDelete(ScriptTest):

    def test_a_buried_job_is_not_handed_out_until_kicked(self):
        b = self.b
        b.add_one(T0, 'a', 'bury')
        b.add_one(T0, 'b', 'bury')
        a = b.reserve(T0, ['bury'])[0]
        self.assertEqual(b.bury(T0, 'a', a['receipt'], 'poison message'), 'OK')
        info = b.get(T0, 'a')
        self.assertEqual((info['state'], info['last_error'], info['receipt']),
                         ('buried', 'poison message', ''))
        self.assertEqual(b.finish(T0, ('a', a['receipt'])), ['stale_receipt'])
        self.assertEqual([d['id'] for d in b.reserve(T0, ['bury'], 10)], ['b'])
        self.assertEqual(b.kick(T0, 'a'), 'OK')
        again = b.reserve(T0, ['bury'])[0]
        self.assertEqual((again['id'], again['attempts']), ('a', 2))
        s = b.stats(T0)
        self.assertEqual((s['buried_total'], s['kicked']), (1, 1))
        self.assertEqual(b.bury(T0, 'a', '', ''), 'OK')
        self.assertEqual(b.get(T0, 'a')['last_error'], '')

    def test_kick_makes_a_delayed_job_ready_now_and_rejects_ready_or_reserved_ones(self):
        b = self.b
        b.add_one(T0, 'later', 'kick.d', T0 + LONG)
        self.assertEqual(b.kick(T0 + 7, 'later'), 'OK')
        info = b.get(T0 + 7, 'later')
        self.assertEqual((info['state'], info['run_at_ms']), ('ready', T0 + 7))
        self.assertEqual(b.topics(T0 + 7)['kick.d']['delayed'], 0)
        self.assertEqual(b.promote(T0 + 7)[2], -1)
        b.add_one(T0, 'ready', 'kick.bad')
        b.add_one(T0, 'reserved', 'kick.bad2')
        d = b.reserve(T0, ['kick.bad2'])[0]
        e = self.assertCode('invalid_argument', b.kick, T0, 'ready')
        self.assertIn('only buried or delayed jobs can be kicked', e.message)
        self.assertCode('invalid_argument', b.kick, T0, 'reserved')
        self.assertEqual((b.state(T0, 'ready'), b.state(T0, 'reserved')), ('ready', 'reserved'))
        self.assertEqual(b.finish(T0, ('reserved', d['receipt'])), ['ok'])

    def test_kick_topic_kicks_at_most_n_buried_jobs_oldest_first(self):
        b = self.b
        for id_ in ('k1', 'k2', 'k3'):
            b.add_one(T0, id_, 'kt')
        b.add_one(T0, 'other', 'kt.other')
        b.add_one(T0, 'delayed', 'kt', T0 + LONG)
        # Bury in the reverse order of adding: kicking still goes by age.
        got = b.reserve(T0, ['kt'], 3)
        for d in reversed(got):
            b.bury(T0, d['id'], d['receipt'])
        b.bury(T0, 'other', b.reserve(T0, ['kt.other'])[0]['receipt'])
        self.assertEqual(b.topics(T0)['kt']['buried'], 3)
        self.assertEqual(b.peek(T0, 'kt', 'buried')['id'], 'k1')
        self.assertEqual(b.heads(T0, 'buried', 10, ['kt'])[1:],
                         [b.get(T0, k)['seq'] for k in ('k1', 'k2', 'k3')])
        self.assertEqual(b.kick_topic(T0, 'kt', 2), 2)
        self.assertEqual([b.state(T0, k) for k in ('k1', 'k2', 'k3', 'other', 'delayed')],
                         ['ready', 'ready', 'buried', 'buried', 'delayed'])
        self.assertEqual(b.kick_topic(T0, 'kt', 10), 1)
        self.assertEqual(b.kick_topic(T0, 'kt', 10), 0)
        self.assertEqual(b.kick_topic(T0, 'kt', 0), 0)
        self.assertEqual(b.stats(T0)['kicked'], 3)
        self.assertEqual([d['id'] for d in b.reserve(T0, ['kt'], 10)], ['k1', 'k2', 'k3'])
        self.assertEqual(b.kick_topic(T0, 'no.such.topic', 5), 0)
        self.assertIn('topic', self.assertCode('invalid_argument', b.kick_topic, T0, 'bad topic',
                                               1).message)
        self.assertIn('n', self.assertCode('invalid_argument', b.kick_topic, T0, 'kt',
                                           1001).message)

    def test_delete_removes_a_job_in_every_state(self):
        b = self.b
        b.add_one(T0, 'delayed', 'del', T0 + LONG)
        b.add_one(T0, 'ready', 'del')
        b.add_one(T0, 'reserved', 'del.r')
        b.add_one(T0, 'buried', 'del.b')
        r = b.reserve(T0, ['del.r'])[0]
        b.bury(T0, 'buried', b.reserve(T0, ['del.b'])[0]['receipt'])
        for id_ in ('delayed', 'ready', 'reserved', 'buried'):
            with self.subTest(id=id_):
                self.assertEqual(b.state(T0, id_), id_)
                self.assertEqual(b.delete(T0, id_), ['ok'])
                self.assertEqual(b.state(T0, id_), 'gone')
                self.assertEqual(b.delete(T0, id_), ['not_found'])
        self.assertEqual(b.finish(T0, ('reserved', r['receipt'])), ['not_found'])
        self.assertEqual(b.reserve(T0, ['del', 'del.r', 'del.b'], 10), [])
        s = b.stats(T0)
        self.assertEqual((s['jobs'], s['deleted']), (0, 4))
        self.assertEqual(b.topics(T0), {})
        self.assertEqual(b.promote(T0)[2], -1, 'a deleted delayed job left a timer')
        self.assertEqual(self.keys(), ['{%s:0}:meta' % self.prefix])

    def test_peek_shows_the_next_job_of_each_state_without_changing_it(self):
        b = self.b
        b.add(T0, b.job('ready-p10', 'peek', T0, priority=10),
              b.job('ready-p5', 'peek', T0, priority=5, body='peeked body'),
              b.job('delayed-far', 'peek', T0 + LONG + 5000),
              b.job('delayed-near-2', 'peek', T0 + LONG), b.job('delayed-near-1', 'peek', T0 + LONG),
              b.job('to-bury', 'peek', T0, priority=1))
        b.bury(T0, 'to-bury', b.reserve(T0, ['peek'])[0]['receipt'], 'peek me')
        ready = b.peek(T0, 'peek', 'ready')
        self.assertEqual((ready['id'], ready['state'], ready['body'], ready['priority'],
                          ready['topic']), ('ready-p5', 'ready', b'peeked body', 5, 'peek'))
        self.assertEqual(b.peek(T0, 'peek', 'delayed')['id'], 'delayed-near-2',
                         'equal run_at: the one added first')
        buried = b.peek(T0, 'peek', 'buried')
        self.assertEqual((buried['id'], buried['state'], buried['last_error']),
                         ('to-bury', 'buried', 'peek me'))
        self.assertEqual(b.peek(T0, 'peek', 'ready')['id'], 'ready-p5')
        self.assertEqual(b.reserve(T0, ['peek'])[0]['id'], 'ready-p5')
        for state in ('ready', 'delayed', 'buried'):
            self.assertIsNone(b.peek(T0, 'peek.none', state))
        self.assertIn('state', self.assertCode('invalid_argument', b.peek, T0, 'peek',
                                               'reserved').message)
        self.assertIn('topic', self.assertCode('invalid_argument', b.peek, T0, 'bad topic',
                                               'ready').message)


# --- pause, topics, stats ----------------------------------------------------------------


class PauseTopicsStats(ScriptTest):

    def test_a_paused_topic_hands_out_nothing_until_resumed_while_jobs_keep_falling_due(self):
        b = self.b
        b.add_one(T0, 'ready', 'pause')
        b.add_one(T0, 'falls-due', 'pause', T0 + 20)
        self.assertEqual(b.pause(T0, 'pause', -1), 'OK')
        self.assertEqual(b.topics(T0)['pause']['paused_until'], -1)
        self.assertEqual(b.reserve(T0, ['pause'], 10), [])
        self.assertEqual(b.state(T0 + 20, 'falls-due'), 'ready')
        self.assertEqual(b.reserve(T0 + 20, ['pause'], 10), [])
        self.assertEqual(b.peek(T0 + 20, 'pause', 'ready')['id'], 'ready')
        self.assertEqual(b.promote(T0 + 20)[2], -1, 'an open-ended pause is not a due time')
        self.assertEqual(b.pause(T0 + 20, 'pause', 0), 'OK')
        self.assertEqual(b.topics(T0 + 20)['pause']['paused_until'], 0)
        self.assertEqual([d['id'] for d in b.reserve(T0 + 20, ['pause'], 10)],
                         ['ready', 'falls-due'])

    def test_a_pause_with_a_duration_ends_by_itself(self):
        b = self.b
        self.assertEqual(b.pause(T0, 'pause.d', T0 + 20), 'OK')
        self.assertEqual(b.topics(T0), {'pause.d': dict(delayed=0, ready=0, reserved=0, buried=0,
                                                        paused_until=T0 + 20)})
        b.add_one(T0, 'j', 'pause.d')
        self.assertEqual(b.promote(T0)[2], T0 + 20, 'the pause end is the next due time')
        self.assertEqual(b.reserve(T0 + 19, ['pause.d']), [])
        self.assertEqual([d['id'] for d in b.reserve(T0 + 20, ['pause.d'])], ['j'])
        self.assertEqual(b.topics(T0 + 20)['pause.d']['paused_until'], 0)
        # A pause end in the past is a resume.
        self.assertEqual(b.pause(T0 + 20, 'pause.d', T0 + 20), 'OK')
        self.assertEqual(b.topics(T0 + 20)['pause.d']['paused_until'], 0)

    def test_reserve_over_a_paused_and_an_open_topic_gets_only_the_open_one(self):
        b = self.b
        b.add(T0, b.job('paused-p0', 'mix.paused', T0, priority=0),
              b.job('open-p100', 'mix.open', T0, priority=100))
        b.pause(T0, 'mix.paused', -1)
        self.assertEqual([d['id'] for d in b.reserve(T0, ['mix.paused', 'mix.open'], 10)],
                         ['open-p100'])
        self.assertEqual(b.state(T0, 'paused-p0'), 'ready')
        self.assertEqual(b.heads(T0, 'ready', 10, ['mix.paused', 'mix.open']), [T0 + 60000],
                         'nothing ready outside the pause; the reservation is due next')

    def test_pause_rejects_bad_input(self):
        b = self.b
        self.assertIn('topic', self.assertCode('invalid_argument', b.pause, T0, 'bad topic',
                                               -1).message)
        self.assertIn('until_ms', self.assertCode('invalid_argument', b.pause, T0, 'ok.topic',
                                                  -2).message)
        self.assertEqual(b.pause(T0, 'never.paused', 0), 'OK')
        self.assertEqual(b.topics(T0), {})

    def test_topics_and_stats_count_jobs_by_state(self):
        b = self.b
        b.add_one(T0, 'a-delayed', 'stats.a', T0 + LONG)
        b.add_one(T0, 'a-buried', 'stats.a')
        b.bury(T0, 'a-buried', b.reserve(T0, ['stats.a'])[0]['receipt'])
        b.add_one(T0, 'a-ready', 'stats.a')
        b.add_one(T0, 'b-reserved', 'stats.b')
        br = b.reserve(T0, ['stats.b'])[0]
        b.pause(T0, 'stats.d', -1)
        self.assertEqual(b.topics(T0), {
            'stats.a': dict(delayed=1, ready=1, reserved=0, buried=1, paused_until=0),
            'stats.b': dict(delayed=0, ready=0, reserved=1, buried=0, paused_until=0),
            'stats.d': dict(delayed=0, ready=0, reserved=0, buried=0, paused_until=-1)})
        self.assertEqual(b.topics(T0, 'stats.a'), {'stats.a': dict(delayed=1, ready=1, reserved=0,
                                                                   buried=1, paused_until=0)})
        self.assertEqual(b.topics(T0, 'no.such'), {'no.such': dict(delayed=0, ready=0, reserved=0,
                                                                   buried=0, paused_until=0)})
        s = b.stats(T0)
        self.assertEqual([s[k] for k in ('jobs', 'delayed', 'ready', 'reserved', 'buried')],
                         [4, 1, 1, 1, 1])
        b.pause(T0, 'stats.d', 0)
        b.finish(T0, ('b-reserved', br['receipt']))
        self.assertEqual(list(b.topics(T0)), ['stats.a'])
        self.assertEqual(b.stats(T0)['jobs'], 3)

    def test_stats_counters_count_each_operation(self):
        b = self.b
        b.add(T0, *[b.job(j, 'ctr', T0) for j in ('j1', 'j2', 'j3', 'j4')])
        got = b.reserve(T0, ['ctr'], 4)
        self.assertEqual(b.finish(T0, ('j1', got[0]['receipt'])), ['ok'])
        self.assertEqual(b.delete(T0, 'j2'), ['ok'])
        b.release(T0, 'j3', got[2]['receipt'])
        b.bury(T0, 'j4', got[3]['receipt'])
        b.kick(T0, 'j4')
        b.add(T0, b.job('j5', 'ctr.ttr', T0, ttr=20))
        b.reserve(T0, ['ctr.ttr'])
        self.assertEqual(b.state(T0 + 20, 'j5'), 'ready')
        s1 = b.stats(T0 + 20)
        self.assertEqual({k: s1[k] for k in Bucket.STATS[5:]},
                         dict(added=5, replaced=0, reserves=5, finished=1, deleted=1, released=1,
                              timed_out=1, buried_total=1, kicked=1))
        b.add(T0 + 20, b.job('j3', 'ctr', T0, replace=True))
        self.assertEqual(b.stats(T0 + 20)['replaced'], 1)
        # Failed operations count nothing.
        b.finish(T0 + 20, ('j1', ''))
        b.add(T0 + 20, b.job('j3', 'ctr', T0))
        s2 = b.stats(T0 + 20)
        self.assertEqual((s2['finished'], s2['replaced'], s2['added'], s2['jobs']), (1, 1, 6, 3))


# --- promotion, next due time, wake-ups -----------------------------------------------


class Listener:
    """Collects the wake messages of a test's prefix. messages() publishes a marker
    and reads up to it, so "nothing was published" needs no waiting."""

    def __init__(self, test, client=None):
        self.client = client or test.r
        self.channel = test.prefix + ':wake'
        self.pubsub = self.client.pubsub()

    def __enter__(self):
        self.pubsub.subscribe(self.channel)
        self._until('subscribe')
        return self

    def __exit__(self, *exc):
        self.pubsub.close()

    def _until(self, kind, data=None, timeout=5.0):
        got = []
        while True:
            m = self.pubsub.get_message(timeout=timeout)
            if m is None:
                raise AssertionError('no %s message within %ss (got %r)' % (kind, timeout, got))
            if m['type'] == kind and (data is None or m['data'] == data):
                return got
            if m['type'] == 'message':
                got.append(m['data'].decode())

    def messages(self, publisher=None):
        (publisher or self.client).publish(self.channel, b'--marker--')
        return self._until('message', b'--marker--')


class PromoteAndWake(ScriptTest):

    def test_promote_moves_at_most_k_and_says_when_work_is_left(self):
        b = self.b
        b.add(T0, *[b.job('d%02d' % i, 'p.%d' % (i % 3), T0 + 1 + i) for i in range(25)])
        b.add(T0, b.job('far', 'p.0', T0 + 1000))
        self.assertEqual(b.promote(T0, 10), [0, 0, T0 + 1])
        now = T0 + 25
        # Work left: next_due <= now says "call again at once".
        moved, timed_out, next_due = b.promote(now, 10)
        self.assertEqual((moved, timed_out), (10, 0))
        self.assertLessEqual(next_due, now)
        self.assertEqual(b.promote(now, 10)[0], 10)
        self.assertEqual(b.promote(now, 10), [5, 0, T0 + 1000])
        s = b.stats(now)
        self.assertEqual((s['ready'], s['delayed']), (25, 1))
        # Each topic's jobs came out earliest first.
        for t in ('p.0', 'p.1', 'p.2'):
            ats = [d['run_at_ms'] for d in b.reserve(now, [t], 100)]
            self.assertEqual(ats, sorted(ats))
        # Reservations time out in batches too, and their deadlines are due times.
        self.assertEqual(b.promote(now, 10), [0, 0, T0 + 1000])
        b.delete(now, 'far')
        self.assertEqual(b.promote(now, 10), [0, 0, now + 60000])
        self.assertEqual(b.promote(now + 60000, 10), [0, 10, now + 60000])
        self.assertEqual(b.promote(now + 60000, 1000), [0, 15, -1])
        self.assertEqual(b.stats(now + 60000)['timed_out'], 25)
        self.assertIn('limit', self.assertCode('invalid_argument', b.promote, now, 0).message)
        self.assertIn('limit', self.assertCode('invalid_argument', b.promote, now, 1001).message)

    def test_ordinary_calls_settle_at_most_a_bounded_number(self):
        b = self.b
        b.add(T0, *[b.job('d%03d' % i, 'big', T0 + 1) for i in range(150)])
        self.assertEqual(len(b.reserve(T0 + 1, ['big'], 1000)), 100)
        self.assertEqual(len(b.reserve(T0 + 1, ['big'], 1000)), 50)

    def test_publishes_only_when_a_ready_set_goes_from_empty_to_non_empty(self):
        b = self.b
        with Listener(self) as w:
            b.add_one(T0, 'a1', 'w.a')
            self.assertEqual(w.messages(), ['r 0 w.a'])
            b.add_one(T0, 'a2', 'w.a')
            b.add(T0, b.job('a3', 'w.a', T0), b.job('b1', 'w.b', T0), b.job('b2', 'w.b', T0))
            self.assertEqual(w.messages(), ['r 0 w.b'])
            got = b.reserve(T0, ['w.a', 'w.b'], 10)
            self.assertEqual(w.messages(), [], 'TTR deadlines are not announced')
            b.finish(T0, *[(d['id'], d['receipt']) for d in got])
            # Under load the ready sets are not empty and nothing is published.
            b.add(T0, *[b.job('l%d' % i, 'w.a', T0) for i in range(10)])
            self.assertEqual(w.messages(), ['r 0 w.a'])
            for i in range(20):
                b.add(T0, *[b.job('m%d-%d' % (i, k), 'w.a', T0) for k in range(5)])
                got = b.reserve(T0, ['w.a'], 5)
                b.finish(T0, *[(d['id'], d['receipt']) for d in got])
            self.assertEqual(w.messages(), [])
            # A release to an empty ready set, a kick, a timed-out reservation.
            got = b.reserve(T0, ['w.a'], 1000)
            b.release(T0, got[0]['id'], got[0]['receipt'])
            self.assertEqual(w.messages(), ['r 0 w.a'])
            b.bury(T0, got[1]['id'], got[1]['receipt'])
            b.reserve(T0, ['w.a'])
            b.kick(T0, got[1]['id'])
            self.assertEqual(w.messages(), ['r 0 w.a'])

    def test_publishes_a_new_earliest_due_time_and_ready_after_promotion(self):
        b = self.b
        with Listener(self) as w:
            b.add_one(T0, 'd1', 'w.d', T0 + 500)
            self.assertEqual(w.messages(), ['d 0 %d' % (T0 + 500)])
            b.add_one(T0, 'd2', 'w.d', T0 + 700)  # later: not announced
            b.add_one(T0, 'd3', 'w.other', T0 + 600)
            self.assertEqual(w.messages(), [])
            b.add(T0, b.job('d4', 'w.d', T0 + 300), b.job('d5', 'w.d', T0 + 200))
            self.assertEqual(w.messages(), ['d 0 %d' % (T0 + 200)])
            self.assertEqual(b.promote(T0 + 500), [3, 0, T0 + 600])
            self.assertEqual(w.messages(), ['r 0 w.d'])
            b.pause(T0 + 500, 'w.p', T0 + 550)
            self.assertEqual(w.messages(), ['d 0 %d' % (T0 + 550)])
            b.pause(T0 + 500, 'w.p2', T0 + 590)
            self.assertEqual(w.messages(), [])

    def test_pause_resume_and_pause_end_announce_ready_jobs(self):
        b = self.b
        with Listener(self) as w:
            b.pause(T0, 'w.p', -1)
            b.add_one(T0, 'p1', 'w.p')
            self.assertEqual(w.messages(), [], 'a paused topic wakes nobody')
            b.pause(T0, 'w.p', 0)
            self.assertEqual(w.messages(), ['r 0 w.p'])
            b.pause(T0, 'w.p', T0 + 50)
            self.assertEqual(w.messages(), ['d 0 %d' % (T0 + 50)])
            self.assertEqual(b.promote(T0 + 50)[2], -1)
            self.assertEqual(w.messages(), ['r 0 w.p'])
            b.pause(T0 + 50, 'w.empty', -1)
            b.pause(T0 + 50, 'w.empty', 0)
            self.assertEqual(w.messages(), [], 'resuming a topic without ready jobs')


# --- bodies, batches, memory, commands ------------------------------------------------


class BodiesAndBatches(ScriptTest):

    def test_binary_bodies_survive_every_transition(self):
        b = self.b
        bodies = {'zeros': b'\x00' * 100, 'all': bytes(range(256)) * 4, 'empty': b'',
                  'big': bytes((i * 131 + 7) % 256 for i in range(256 * 1024)),
                  'struct-like': b'\x01\x00\x00\x00\x05' + b'\xff' * 40}
        b.add(T0, *[b.job(k, 'bin', T0 + 5, body=v) for k, v in bodies.items()])
        self.assertEqual(b.promote(T0 + 5)[0], 5)
        got = {d['id']: d for d in b.reserve(T0 + 5, ['bin'], 10)}
        self.assertEqual({k: d['body'] for k, d in got.items()}, bodies)
        for k, d in got.items():
            self.assertEqual(b.release(T0 + 5, k, d['receipt'], 1, 'err\x00or'), 'delayed')
        got = {d['id']: d for d in b.reserve(T0 + 6, ['bin'], 10)}
        self.assertEqual({k: d['body'] for k, d in got.items()}, bodies)
        self.assertEqual(b.get(T0 + 6, 'big')['last_error'], 'err\x00or')
        for k, d in got.items():
            b.bury(T0 + 6, k, d['receipt'], 'b\x00ry')
        self.assertEqual(b.kick_topic(T0 + 6, 'bin', 10), 5)
        for k, v in bodies.items():
            info = b.get(T0 + 6, k)
            self.assertEqual((info['body'], info['last_error']), (v, 'b\x00ry'))

    def test_the_limits_of_a_batch(self):
        b = self.b
        self.assertEqual(b.add(T0, *[b.job('j%04d' % i, 'lim', T0) for i in range(1000)]),
                         ['ready'] * 1000)
        self.assertCode('invalid_argument', b.add, T0, *[b.job('x%04d' % i, 'lim', T0)
                                                         for i in range(1001)])
        got = b.reserve(T0, ['lim'], 1000)
        self.assertEqual(len(got), 1000)
        self.assertEqual(b.finish(T0, *[(d['id'], d['receipt']) for d in got]), ['ok'] * 1000)
        self.assertCode('invalid_argument', b.finish, T0, *[('x', '')] * 1001)
        self.assertCode('invalid_argument', b.call, 'finish', T0, 'a', '', 'b')
        self.assertEqual(b.stats(T0)['jobs'], 0)

    def test_redis_commands_per_job_lifecycle_when_batched(self):
        """add -> promote -> reserve -> finish in batches of 100, measured with
        INFO commandstats; printed for docs/benchmarks.md."""
        b, n, batch = self.b, 1000, 100
        b.promote(T0)  # scripts loaded, nothing to do
        self.r.config_resetstat()
        for i in range(0, n, batch):
            b.add(T0, *[b.job('c%05d' % k, 'cmd', T0 + 1) for k in range(i, i + batch)])
        while b.promote(T0 + 1, 1000)[2] != -1:
            pass
        for _ in range(n // batch):
            got = b.reserve(T0 + 1, ['cmd'], batch)
            b.finish(T0 + 1, *[(d['id'], d['receipt']) for d in got])
        stats = self.r.info('commandstats')
        calls = {k[len('cmdstat_'):]: v['calls'] for k, v in stats.items()}
        scripts = calls.pop('evalsha', 0)
        calls.pop('config|resetstat', None)
        calls.pop('script|load', None)
        inner = sum(calls.values())
        per_job = inner / n
        sys.stderr.write('\n[commands per lifecycle, batches of %d] scripts %.3f, redis commands '
                         'inside scripts %.2f per job: %s\n'
                         % (batch, scripts / n, per_job, dict(sorted(calls.items()))))
        self.assertLessEqual(scripts / n, 0.035)  # 4 calls per 100 jobs, and one promote
        self.assertLessEqual(per_job, 0.5)
        self.assertEqual(b.stats(T0 + 1)['finished'], n)

    def test_memory_per_pending_job(self):
        """100-byte bodies, 24-hex-digit ids, 16 buckets, all delayed; printed for
        docs/redis-store.md."""
        n, buckets = 20000, 16
        self.r.execute_command('MEMORY', 'PURGE')
        before = self.r.info('memory')['used_memory']
        ids = ['%024x' % (0x65000000_00000000_00000000 + i * 7919) for i in range(n)]
        by_bucket = {}
        for i, id_ in enumerate(ids):
            by_bucket.setdefault(i % buckets, []).append(id_)
        for bk, bids in by_bucket.items():
            bb = self.bucket(bk)
            for i in range(0, len(bids), 500):
                bb.add(T0, *[bb.job(x, 'orders.close', T0 + 3_600_000 + k, body=b'b' * 100)
                             for k, x in enumerate(bids[i:i + 500])])
        after = self.r.info('memory')['used_memory']
        usage = sum(self.r.memory_usage(k, samples=0) for k in self.keys())
        sys.stderr.write('\n[memory per pending job, %d jobs, %d buckets, 100-byte bodies] '
                         'MEMORY USAGE %.0f B/job, used_memory delta %.0f B/job\n'
                         % (n, buckets, usage / n, (after - before) / n))
        self.assertLess(usage / n, 530, 'more than the hash+zset peer figure')
        for bk in range(buckets):
            self.bucket(bk).delete(T0, *by_bucket[bk][:1000])


class InitAndHeads(ScriptTest):

    def test_init_writes_then_checks_format_and_bucket_count(self):
        b = self.b
        self.assertEqual(b.init(T0, 16), 'OK')
        self.assertEqual(b.init(T0, 16), 'OK')
        self.assertIn('buckets', self.assertCode('invalid_argument', b.init, T0, 32).message)
        self.assertIn('format', self.assertCode('internal', b.init, T0, 16, 2).message)
        self.r.hset('{%s:0}:meta' % self.prefix, 'format', 7)
        e = self.assertCode('internal', b.init, T0, 16)
        self.assertIn('holds format 7', e.message)
        self.assertCode('invalid_argument', self.bucket(16).init, T0, 16)

    def test_heads_gives_the_sort_keys_for_a_merge_across_buckets(self):
        b0, b1 = self.bucket(0), self.bucket(1)
        b0.add(T0, b0.job('x', 'h', T0 - 5, priority=3), b0.job('y', 'h', T0, priority=1))
        b1.add(T0, b1.job('z', 'h', T0 - 9, priority=3), b1.job('w', 'h2', T0, priority=0))
        b1.add(T0, b1.job('later', 'h', T0 + 40))
        self.assertEqual(b0.heads(T0, 'ready', 10, ['h']),
                         [-1, 1, T0, b0.get(T0, 'y')['seq'], 3, T0 - 5, b0.get(T0, 'x')['seq']])
        self.assertEqual(b1.heads(T0, 'ready', 1, ['h', 'h2']), [T0 + 40, 0, T0,
                                                                 b1.get(T0, 'w')['seq']])
        # Merge the two buckets' heads for a count-3 reserve over h: y, z, x.
        keys = []
        for bk in (b0, b1):
            flat = bk.heads(T0, 'ready', 3, ['h'])[1:]
            keys += [(tuple(flat[i:i + 3]), bk) for i in range(0, len(flat), 3)]
        keys.sort(key=lambda k: k[0])
        take = {}
        for _, bk in keys[:3]:
            take[bk.bucket] = take.get(bk.bucket, 0) + 1
        got = b0.reserve(T0, ['h'], take[0]) + b1.reserve(T0, ['h'], take[1])
        self.assertEqual(sorted(d['id'] for d in got), ['x', 'y', 'z'])

    def test_one_heads_call_gives_each_group_its_own_keys(self):
        b = self.b
        b.add(T0, b.job('a1', 'g.a', T0, priority=5), b.job('a2', 'g.a', T0 - 3, priority=5),
              b.job('b1', 'g.b', T0, priority=1), b.job('c1', 'g.c', T0, priority=0),
              b.job('c2', 'g.c', T0, priority=9), b.job('later', 'g.c', T0 + 70))
        seq = {i: b.get(T0, i)['seq'] for i in ('a1', 'a2', 'b1', 'c1', 'c2')}

        def key(id_, priority, run_at):
            return (priority, run_at, seq[id_])
        groups = [(2, ['g.a']), (2, ['g.b', 'g.c', 'g.b']), (1, ['g.none']), (10, ['g.a', 'g.c'])]
        next_due, keys = b.heads_groups(T0, 'ready', groups)
        self.assertEqual(next_due, T0 + 70)
        self.assertEqual(keys, [
            [key('a2', 5, T0 - 3), key('a1', 5, T0)],
            [key('c1', 0, T0), key('b1', 1, T0)],  # m = 2 cuts c2 off
            [],
            [key('c1', 0, T0), key('a2', 5, T0 - 3), key('a1', 5, T0), key('c2', 9, T0)]])
        # Each group's part is what a call for that group alone answers.
        for (m, topics), part in zip(groups, keys):
            self.assertEqual(b.heads_groups(T0, 'ready', [(m, topics)]), (next_due, [part]))
        # Buried: one seq per key, oldest first, per group.
        got = b.reserve(T0, ['g.a', 'g.b'], 3)
        for d in got:
            b.bury(T0, d['id'], d['receipt'])
        self.assertEqual(b.heads_groups(T0, 'buried', [(1, ['g.a']), (5, ['g.b', 'g.a'])])[1],
                         [[(seq['a1'],)], [(seq['a1'],), (seq['a2'],), (seq['b1'],)]])
        # Nothing changed: heads is read-only.
        self.assertEqual(b.stats(T0)['buried'], 3)

    def test_one_reserve_call_never_hands_a_job_to_two_groups_and_each_gets_best_first(self):
        b = self.b
        b.add(T0, b.job('x1', 'o.x', T0, priority=1), b.job('x2', 'o.x', T0, priority=2),
              b.job('x3', 'o.x', T0, priority=4), b.job('y1', 'o.y', T0, priority=0),
              b.job('y2', 'o.y', T0, priority=3), b.job('y3', 'o.y', T0 + 30, priority=5))
        # Overlapping topics, served in the order given: what one group takes, the
        # next does not see. y3 falls due at T0 + 30: the call settles the bucket
        # once, before any group, so the third group gets it.
        got = b.reserve_groups(T0 + 30, [(2, ['o.x']), (2, ['o.x', 'o.y']),
                                         (5, ['o.y', 'o.x']), (1, ['o.x'])])
        self.assertEqual([[d['id'] for d in part] for part in got],
                         [['x1', 'x2'], ['y1', 'y2'], ['x3', 'y3'], []])
        flat = [d for part in got for d in part]
        self.assertEqual(len({d['receipt'] for d in flat}), 6)
        for d in flat:
            self.assertEqual((d['attempts'], d['reserved_until_ms']), (1, T0 + 30 + 60000))
            self.assertEqual(b.get(T0 + 30, d['id'])['receipt'], d['receipt'])
        s = b.stats(T0 + 30)
        self.assertEqual((s['reserves'], s['reserved'], s['ready']), (6, 6, 0))
        self.assertEqual(b.topics(T0 + 30)['o.x']['reserved'], 3)
        self.assertEqual(b.topics(T0 + 30)['o.y']['reserved'], 3)
        # The one-topic fast path (ZPOPMIN) and the merge in one call, sharing a topic.
        b.add(T0, b.job('z1', 'o.z', T0, priority=2), b.job('z2', 'o.z', T0, priority=1),
              b.job('w1', 'o.w', T0, priority=0), b.job('z3', 'o.z', T0, priority=3))
        got = b.reserve_groups(T0 + 30, [(1, ['o.z']), (3, ['o.z', 'o.w']), (1, ['o.z'])])
        self.assertEqual([[d['id'] for d in part] for part in got], [['z2'], ['w1', 'z1', 'z3'], []])

    def test_a_topic_paused_in_one_group_only_holds_back_only_that_topic(self):
        b = self.b
        b.add(T0, b.job('p1', 'ps.paused', T0, priority=0), b.job('o1', 'ps.open', T0, priority=5),
              b.job('o2', 'ps.open', T0, priority=6))
        b.pause(T0, 'ps.paused', -1)
        groups = [(1, ['ps.paused']), (1, ['ps.paused', 'ps.open']), (5, ['ps.open'])]
        _, keys = b.heads_groups(T0, 'ready', groups)
        self.assertEqual([[k[0] for k in part] for part in keys], [[], [5], [5, 6]])
        got = b.reserve_groups(T0, groups)
        self.assertEqual([[d['id'] for d in part] for part in got], [[], ['o1'], ['o2']])
        self.assertEqual(b.state(T0, 'p1'), 'ready')
        b.pause(T0, 'ps.paused', 0)
        self.assertEqual([[d['id'] for d in part] for part in b.reserve_groups(T0, groups)],
                         [['p1'], [], []])

    def test_every_key_a_script_writes_is_under_its_bucket_tag(self):
        b = self.bucket(5)
        b.add(T0, b.job('a', 't.a', T0), b.job('d', 't.b', T0 + 5), b.job('e', 't:c', T0))
        b.pause(T0, 't.p', T0 + 100)
        got = b.reserve(T0, ['t.a', 't:c'], 2)
        b.bury(T0, got[0]['id'], got[0]['receipt'])
        tag = '{%s:5}:' % self.prefix
        self.assertTrue(all(k.startswith(tag) for k in self.keys()), self.keys())
        self.assertEqual(sorted(k[len(tag):] for k in self.keys()),
                         ['b:t.a', 'd:t.b', 'jobs', 'meta', 'paused', 'reserved', 'reserving',
                          'timers', 'topics'])


# --- schedule_fire (a schedule firing's jobs in their bucket) ------------------------------


class ScheduleFire(ScriptTest):
    """schedule_fire.lua: step 2 of a firing (docs/redis-store.md, "Schedules")."""

    def fire(self, now, *entries):
        """entries: ('a', id, run_at[, body]) or ('w', id); returns the statuses."""
        args = []
        for e in entries:
            if e[0] == 'a':
                body = e[3] if len(e) > 3 else b''
                rec = Bucket.record(1 if e[2] <= now else 0, 'sched.t', e[2], body=body,
                                    seq=now * 1024)
                args += ['a', e[1], rec]
            else:
                args += ['w', e[1], '']
        return [s.decode() for s in self.b.call('schedule_fire', now, *args)]

    def test_a_job_is_added_once_and_not_again_within_ten_minutes_of_finishing(self):
        b = self.b
        self.assertEqual(self.fire(T0, ('a', 's@1', T0 + LONG), ('a', 's@2', T0 - 1)),
                         ['delayed', 'ready'])
        self.assertEqual(b.get(T0, 's@1')['run_at_ms'], T0 + LONG)
        self.assertEqual(b.get(T0, 's@1')['topic'], 'sched.t')
        self.assertEqual(self.fire(T0 + 1, ('a', 's@1', T0 + LONG)), ['fired'])
        d = b.reserve(T0 + 2, ['sched.t'])
        self.assertEqual(b.finish(T0 + 2, ('s@2', d[0]['receipt'])), ['ok'])
        self.assertEqual(self.fire(T0 + 3, ('a', 's@2', T0 - 1)), ['fired'],
                         'a re-run after the job finished adds nothing')
        self.assertEqual(b.stats(T0 + 3)['added'], 2)
        # T:fired forgets after 10 minutes (the documented bound).
        later = T0 + 600_000 + 10
        self.assertEqual(self.fire(later, ('a', 's@2', T0 - 1)), ['ready'])
        self.assertEqual(self.r.zscore('{%s:0}:fired' % self.prefix, 's@2'), later)

    def test_a_job_already_there_is_left_alone(self):
        b = self.b
        b.add_one(T0, 'mine@1', 'other.t', T0 + LONG, body='by hand')
        self.assertEqual(self.fire(T0, ('a', 'mine@1', T0 + 5, b'x')), ['exists'])
        self.assertEqual(b.get(T0, 'mine@1')['body'], b'by hand')

    def test_a_withdrawal_deletes_only_a_delayed_job_and_lets_it_be_planned_again(self):
        b = self.b
        self.assertEqual(self.fire(T0, ('a', 'w@1', T0 + LONG), ('a', 'w@2', T0 + 10)),
                         ['delayed', 'delayed'])
        # w@2 has fallen due by T0 + 10: settled to ready, so kept.
        self.assertEqual(self.fire(T0 + 10, ('w', 'w@1'), ('w', 'w@2'), ('w', 'w@3')),
                         ['deleted', 'kept', 'absent'])
        self.assertCode('not_found', b.get, T0 + 10, 'w@1')
        self.assertEqual(b.get(T0 + 10, 'w@2')['state'], 'ready')
        # Withdrawn then added in one call (a fire time planned again).
        self.assertEqual(self.fire(T0 + 11, ('a', 'w@1', T0 + LONG, b'v1')), ['delayed'])
        self.assertEqual(self.fire(T0 + 12, ('w', 'w@1'), ('a', 'w@1', T0 + LONG, b'v2')),
                         ['deleted', 'delayed'])
        self.assertEqual(b.get(T0 + 12, 'w@1')['body'], b'v2')

    def test_bad_entries_are_refused_before_any_change(self):
        b = self.b
        for args, field in ((['x', 'id', ''], 'kind'), (['a', '', b''], 'id'),
                            (['a', 'id'], 'entries'), (['a', 'id', b'short'], 'record')):
            e = self.assertCode('invalid_argument', b.call, 'schedule_fire', T0, *args)
            self.assertIn(field, e.message)
        good = Bucket.record(0, 'sched.t', T0 + LONG, seq=T0 * 1024)
        self.assertCode('invalid_argument', b.call, 'schedule_fire', T0, 'a', 'ok@1', good,
                        'x', 'id', '')
        self.assertCode('not_found', b.get, T0, 'ok@1')
        self.assertEqual(self.keys(), [])


    # One step (a deployment of one bucket): "c" claims a firing of a schedule
    # kept in bucket 0 and makes the n entries after it only if applied.
    def put_schedule(self, name):
        definition = bytes([len(name)]) + name.encode()
        state, reason = b'', b''
        rec = (bytes([1]) + (0).to_bytes(7, 'big') + (0).to_bytes(7, 'big') +
               (0).to_bytes(6, 'big') + (0).to_bytes(6, 'big') + bytes([0]) +
               len(definition).to_bytes(4, 'big') + definition +
               len(state).to_bytes(4, 'big') + state + len(reason).to_bytes(2, 'big') + reason)
        stored = self.b.call('schedules', 'put', rec)
        return int.from_bytes(stored[1:8], 'big')

    @staticmethod
    def claim(revision, n, state=b'st', reason=b'', paused=0):
        return (revision.to_bytes(7, 'big') + bytes([paused]) + n.to_bytes(2, 'big') +
                len(state).to_bytes(4, 'big') + state + len(reason).to_bytes(2, 'big') + reason)

    def job_args(self, now, id_, run_at):
        return ['a', id_, Bucket.record(1 if run_at <= now else 0, 'sched.t', run_at,
                                        seq=now * 1024)]

    def test_a_claim_makes_its_entries_in_one_step_and_a_stale_one_skips_them(self):
        b = self.b
        rev = self.put_schedule('s')
        got = b.call('schedule_fire', T0, 'c', 's', self.claim(rev, 2),
                     *self.job_args(T0, 's@1', T0 + LONG), *self.job_args(T0, 's@2', T0 - 1))
        self.assertEqual(got[0][0], b'applied')
        stored = got[0][1]
        self.assertEqual(int.from_bytes(stored[1:8], 'big'), rev + 1)
        self.assertEqual(self.r.hget('{%s:0}:sched' % self.prefix, 's'), stored)
        self.assertEqual(got[1:], [b'delayed', b'ready'])
        self.assertEqual(b.get(T0, 's@1')['run_at_ms'], T0 + LONG)
        self.assertEqual(self.r.zcard('{%s:0}:fired' % self.prefix), 0,
                         'one step: no guard against a step run again')
        # The same revision again: stale, its entry skipped.
        got = b.call('schedule_fire', T0 + 1, 'c', 's', self.claim(rev, 1),
                     *self.job_args(T0 + 1, 's@3', T0 + LONG))
        self.assertEqual((got[0][0], got[1]), (b'stale', b'skipped'))
        self.assertCode('not_found', b.get, T0 + 1, 's@3')
        # A claim of no schedule: its error, its entry skipped; an entry after
        # its n is made as any step-2 entry (with the guard).
        got = b.call('schedule_fire', T0 + 2, 'c', 'none', self.claim(1, 1),
                     *self.job_args(T0 + 2, 'none@1', T0 + LONG),
                     *self.job_args(T0 + 2, 'free@1', T0 + LONG))
        self.assertIsInstance(got[0], redis.ResponseError)
        self.assertIn('not_found', str(got[0]))
        self.assertEqual(got[1:], [b'skipped', b'delayed'])
        self.assertCode('not_found', b.get, T0 + 2, 'none@1')
        self.assertEqual(self.r.zcard('{%s:0}:fired' % self.prefix), 1)
        self.assertEqual(b.stats(T0 + 2)['added'], 3)

    def test_a_claim_is_refused_outside_bucket_0_or_past_the_entries_before_any_change(self):
        rev = self.put_schedule('s')
        e = self.assertCode('invalid_argument', self.bucket(1).call, 'schedule_fire', T0,
                            'c', 's', self.claim(rev, 0))
        self.assertIn('bucket 0', e.message)
        for claim, field in ((self.claim(rev, 2), 'claim'), (b'short', 'claim'),
                             (self.claim(rev, 0) + b'x', 'claim'),
                             (self.claim(rev, 0, paused=2), 'claim')):
            e = self.assertCode('invalid_argument', self.b.call, 'schedule_fire', T0,
                                'c', 's', claim, *self.job_args(T0, 's@1', T0 + LONG))
            self.assertIn(field, e.message)
        self.assertCode('not_found', self.b.get, T0, 's@1')
        stored = self.r.hget('{%s:0}:sched' % self.prefix, 's')
        self.assertEqual(int.from_bytes(stored[1:8], 'big'), rev)


# --- Redis Cluster ---------------------------------------------------------------------


class ClusterTest(unittest.TestCase):
    """Three masters created by redis-cli --cluster create."""

    @classmethod
    def setUpClass(cls):
        cls.cluster = Cluster(3)

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()

    def setUp(self):
        self.prefix = 'dqc%d' % next(_prefixes)
        self.shas = {}  # per node: a script cache is per server
        self.node_shas = {n.port: {} for n in self.cluster.nodes}

    def bucket(self, n):
        tag = '{%s:%d}' % (self.prefix, n)
        node = self.cluster.owner(tag)
        return (Bucket(node.client, self.prefix, n, SCRIPTS, self.node_shas[node.port]),
                node)

    def test_buckets_spread_over_the_three_masters(self):
        owners = {self.bucket(n)[1].port for n in range(16)}
        self.assertEqual(len(owners), 3)

    def test_every_script_touches_one_slot_on_the_owner_of_its_bucket(self):
        for n in range(16):
            b, node = self.bucket(n)
            with self.subTest(bucket=n, port=node.port):
                self.assertEqual(b.init(T0, 16), 'OK')
                self.assertEqual(b.add(T0, b.job('a', 'c.a', T0), b.job('b', 'c.b', T0 + 5),
                                       b.job('c', 'c.a', T0), b.job('d', 'c.a', T0, ttr=10)),
                                 ['ready', 'delayed', 'ready', 'ready'])
                self.assertEqual(b.promote(T0 + 5, 100)[0], 1)
                got = b.reserve(T0 + 5, ['c.a', 'c.b'], 4)
                self.assertEqual(len(got), 4)
                r = {d['id']: d['receipt'] for d in got}
                self.assertEqual(b.finish(T0 + 5, ('a', r['a'])), ['ok'])
                self.assertEqual(b.touch(T0 + 5, ('b', r['b'])), ['ok'])
                self.assertEqual(b.release(T0 + 5, 'b', r['b'], 10, 'e'), 'delayed')
                self.assertEqual(b.bury(T0 + 5, 'c', r['c'], 'x'), 'OK')
                self.assertEqual(b.kick(T0 + 5, 'b'), 'OK')
                self.assertEqual(b.kick_topic(T0 + 5, 'c.a', 5), 1)
                self.assertEqual(b.promote(T0 + 20, 100)[1], 1)  # 'd' timed out
                self.assertEqual(b.peek(T0 + 20, 'c.a', 'ready')['id'], 'c')
                self.assertEqual(b.get(T0 + 20, 'd')['state'], 'ready')
                self.assertEqual(b.pause(T0 + 20, 'c.a', T0 + 30), 'OK')
                self.assertEqual(sorted(b.topics(T0 + 20)), ['c.a', 'c.b'])
                self.assertEqual(b.stats(T0 + 20)['jobs'], 3)
                self.assertEqual(b.heads(T0 + 20, 'ready', 5, ['c.b'])[0], T0 + 30)
                self.assertEqual(b.delete(T0 + 20, 'b', 'c', 'd'), ['ok'] * 3)
        # Every key is on the node that owns its slot, and under its bucket's tag.
        for node in self.cluster.nodes:
            for key in node.client.scan_iter(match='{%s:*' % self.prefix):
                k = key.decode()
                self.assertIs(self.cluster.owner(k[:k.index('}') + 1]), node, k)

    def test_a_flagged_script_touching_another_slot_is_refused(self):
        # What makes the test above meaningful: had a script touched a key outside
        # its bucket's slot, Redis would have refused it, even on the same node.
        b, owner = self.bucket(0)
        probe = "#!lua\nredis.call('GET', KEYS[1] .. ':jobs')\nreturn redis.call('GET', ARGV[1])"
        same = next(k for k in ('x%d' % i for i in range(10000))
                    if self.cluster.owner(k) is owner)
        with self.assertRaises(redis.ResponseError) as cm:
            owner.client.eval(probe, 1, b.tag, same)
        self.assertIn('do not hash to the same slot', str(cm.exception))

    def test_a_script_sent_to_another_node_is_redirected(self):
        b, owner = self.bucket(0)
        other = next(n for n in self.cluster.nodes if n is not owner)
        sha = other.client.script_load(SCRIPTS['get'])
        with self.assertRaises(redis.ResponseError) as cm:
            other.client.execute_command('EVALSHA', sha, 1, b.tag, T0, 'x')
        self.assertIn('%d' % owner.port, str(cm.exception))  # MOVED <slot> 127.0.0.1:<port>

    def test_a_wake_published_on_one_node_reaches_a_subscriber_on_another(self):
        b, owner = self.bucket(3)
        other = next(n for n in self.cluster.nodes if n is not owner)
        listener = Listener(self, client=other.client)
        with listener as w:
            self.assertEqual(b.add_one(T0, 'j', 'x.topic'), 'ready')
            self.assertEqual(w.messages(publisher=owner.client), ['r 3 x.topic'])
            b.add_one(T0, 'k', 'x.topic', T0 + 99)
            self.assertEqual(w.messages(publisher=owner.client), ['d 3 %d' % (T0 + 99)])


if __name__ == '__main__':
    unittest.main()
