// Every client call, and every error code as its own type, against a real
// `delayq serve` on the memory store and on the embedded one.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  Client, Delivery, FORCE, DelayqError, InvalidArgumentError, NotFoundError, ExistsError,
  StaleReceiptError, NotReservedError, TooLargeError, UnauthorizedError, UnavailableError,
  InternalError,
} from '../index.js';
import { freePort, poll, startDelayq, startWithClient } from './support/servers.mjs';

const WRONG_RECEIPT = '0123456789abcdef01234567';
let seq = 0;
const topicName = () => `node.client.${process.pid}.${++seq}`;

for (const store of ['memory', 'embedded']) {
  describe(`client on --store ${store}`, () => {
    let server;
    let client;
    let stop;
    before(async () => { ({ server, client, stop } = await startWithClient({ store })); });
    after(() => stop());

    test('add: delay, run_at, ttr, priority, max_attempts, id and bodies, read back with get', async () => {
      const t = topicName();
      const before = Date.now();
      const a = await client.add(t, { order: 42 }, { delay: '1h', ttr: '90s', priority: 7, maxAttempts: 3 });
      assert.match(a.id, /^[0-9a-f]{32}$/);
      assert.equal(a.state, 'delayed');
      assert.ok(a.runAtMs >= before + 3_600_000 && a.runAtMs <= Date.now() + 3_600_000, `${a.runAtMs}`);
      const job = await client.get(a.id);
      assert.equal(job.id, a.id);
      assert.equal(job.topic, t);
      assert.equal(job.state, 'delayed');
      assert.deepEqual(job.json(), { order: 42 });
      assert.equal(job.ttrMs, 90_000);
      assert.equal(job.priority, 7);
      assert.equal(job.maxAttempts, 3);
      assert.equal(job.attempts, 0);
      assert.equal(job.runAtMs, a.runAtMs);
      assert.ok(job.createdAtMs >= before - 1000);
      assert.equal(job.receipt, '');

      const at = new Date(Date.now() + 60_000);
      const b = await client.add(t, Buffer.from([0, 1, 2, 255]), { runAt: at, id: 'node-b' });
      assert.deepEqual(b, { id: 'node-b', state: 'delayed', runAtMs: at.getTime() });
      assert.deepEqual((await client.get('node-b')).body, Buffer.from([0, 1, 2, 255]));

      const c = await client.add(t, 'héllo', { delay: 0 });
      assert.equal(c.state, 'ready');
      assert.equal((await client.get(c.id)).text(), 'héllo');
      const d = await client.add(t);  // no body
      assert.equal((await client.get(d.id)).body.length, 0);
      const e = await client.add(t, new Uint8Array([7, 8]), { delay: 1500 });
      assert.deepEqual([...(await client.get(e.id)).body], [7, 8]);

      // replace re-creates a live job; without it the add is refused (ExistsError)
      await assert.rejects(client.add(t, 'again', { id: 'node-b' }), ExistsError);
      await client.add(t, 'replaced', { id: 'node-b', replace: true, priority: 1 });
      const replaced = await client.get('node-b');
      assert.equal(replaced.text(), 'replaced');
      assert.equal(replaced.state, 'ready');
      assert.equal(await client.get('no-such-job'), null);
    });

    test('an idempotency key makes the whole add safe to repeat', async () => {
      const t = topicName();
      const first = await client.add(t, 'x', { idempotencyKey: `key-${process.pid}-${store}` });
      const again = await client.add(t, 'x', { idempotencyKey: `key-${process.pid}-${store}` });
      assert.deepEqual(again, first);
      assert.equal((await client.topicStats(t)).ready, 1);
    });

    test('reserve: count, wait, best first; finish with the delivery or with id and receipt', async () => {
      const t = topicName();
      for (let i = 0; i < 5; i++) await client.add(t, `job ${i}`, { priority: 10 - i });
      const jobs = await client.reserve(t, { count: 3 });
      assert.equal(jobs.length, 3);
      assert.ok(jobs[0] instanceof Delivery);
      assert.deepEqual(jobs.map(j => j.text()), ['job 4', 'job 3', 'job 2']);  // lower priority first
      const j = jobs[0];
      assert.match(j.receipt, /^[0-9a-f]{24}$/);
      assert.equal(j.topic, t);
      assert.equal(j.attempts, 1);
      assert.equal(j.ttrMs, 60_000);
      assert.equal(j.priority, 6);
      assert.ok(j.reservedUntilMs > Date.now());
      assert.ok(j.runAtMs <= Date.now());
      assert.equal(j.maxAttempts, 0);
      assert.equal((await client.get(j.id)).state, 'reserved');
      await client.finish(j);
      await client.finish(jobs[1].id, jobs[1].receipt);
      assert.equal(await client.get(j.id), null);
      assert.equal(await client.get(jobs[1].id), null);
      // (5 added, 3 reserved, 2 finished)
      assert.deepEqual(await client.topicStats(t), {
        topic: t, delayed: 0, ready: 2, reserved: 1, buried: 0, waiting: 0, paused: false, pausedForMs: 0,
      });
      // nothing ready in time: []
      const u = topicName();
      const t0 = performance.now();
      assert.deepEqual(await client.reserve(u, { wait: 200 }), []);
      assert.ok(performance.now() - t0 >= 150);
      assert.deepEqual(await client.reserve(u), []);
      // a waiting reserve gets a job as soon as it is added (its own connection: others go on)
      const waiting = client.reserve([u, t + '.other'], { wait: '5s' });
      await poll(async () => (await client.topicStats(u)).waiting === 1, 5000, 'the reserve to wait');
      const added = await client.add(u, 'late');
      const got = await waiting;
      assert.deepEqual(got.map(d => d.id), [added.id]);
    });

    test('a waiting reserve withdrawn by its signal takes no job', async () => {
      const t = topicName();
      const ac = new AbortController();
      const waiting = client.reserve(t, { wait: '10s', signal: ac.signal });
      await poll(async () => (await client.topicStats(t)).waiting === 1, 5000, 'the reserve to wait');
      ac.abort();
      await assert.rejects(waiting, { name: 'AbortError' });
      await poll(async () => (await client.topicStats(t)).waiting === 0, 5000, 'the reserve to be withdrawn');
      const a = await client.add(t, 'after');
      const job = await client.get(a.id);
      assert.equal(job.state, 'ready');
      assert.equal(job.attempts, 0);
      await assert.rejects(client.reserve(t, { wait: '1s', signal: AbortSignal.abort() }), { name: 'AbortError' });
    });

    test('release, touch, bury, kick, kickTopic, unreserve, delete, peek', async () => {
      const t = topicName();
      const a = await client.add(t, 'a', { id: `${t}-a` });
      let [d] = await client.reserve(t);
      await client.touch(d);
      await client.touch(d.id, d.receipt);
      const released = Date.now();
      await client.release(d, { delay: '1h', error: 'smtp timeout' });
      let job = await client.get(a.id);
      assert.equal(job.state, 'delayed');
      assert.equal(job.lastError, 'smtp timeout');
      assert.ok(job.runAtMs >= released + 3_600_000 - 50, `${job.runAtMs - released}`);
      assert.equal((await client.peek(t, 'delayed')).id, a.id);
      assert.equal(await client.peek(t, 'ready'), null);
      await client.kick(a.id);  // a delayed job: now due
      assert.equal((await client.peek(t, 'READY')).id, a.id);

      [d] = await client.reserve(t);
      assert.equal(d.attempts, 2);
      await client.bury(d, 'cannot parse');
      job = await client.get(a.id);
      assert.equal(job.state, 'buried');
      assert.equal(job.lastError, 'cannot parse');
      assert.equal((await client.peek(t, 'buried')).lastError, 'cannot parse');
      assert.equal(await client.kickTopic(t, 10), 1);
      assert.equal(await client.kickTopic(t, 10), 0);

      [d] = await client.reserve(t);
      assert.equal(d.attempts, 3);
      await client.unreserve(d);  // never begun: not counted
      job = await client.get(a.id);
      assert.equal(job.state, 'ready');
      assert.equal(job.attempts, 2);
      await assert.rejects(client.unreserve(d), StaleReceiptError);  // that delivery is over

      [d] = await client.reserve(t);
      await client.release(d.id, d.receipt, { delay: 0 });
      [d] = await client.reserve(t);
      await client.bury(d.id, d.receipt, new Error('as an Error'));
      assert.equal((await client.get(a.id)).lastError, 'as an Error');
      await client.delete(a.id);
      assert.equal(await client.get(a.id), null);
      await assert.rejects(client.delete(a.id), NotFoundError);
    });

    test('FORCE acts by id alone; not_reserved when the job is not reserved', async () => {
      const t = topicName();
      const a = await client.add(t, 'x');
      await assert.rejects(client.finish(a.id, FORCE), e => e instanceof NotReservedError && e.code === 'not_reserved' &&
        /is ready, not reserved/.test(e.message));
      await client.reserve(t);
      await client.touch(a.id, FORCE);
      await client.release(a.id, FORCE, { delay: 0, error: 'forced' });
      await client.reserve(t);
      await client.bury(a.id, FORCE, 'forced bury');
      assert.equal((await client.get(a.id)).state, 'buried');
      await client.kick(a.id);
      await client.reserve(t);
      await client.finish(a.id, FORCE);
      assert.equal(await client.get(a.id), null);
    });

    test('acknowledge: several outcomes in one pipeline, one write', async () => {
      const t = topicName();
      for (let i = 0; i < 4; i++) await client.add(t, `${i}`);
      const jobs = await client.reserve(t, { count: 4 });
      const conn = client.servers.servers[0].shared;
      const write = conn.redis.stream.write;
      let writes = 0;
      conn.redis.stream.write = function (...args) { writes++; return write.apply(this, args); };
      let answers;
      try {
        answers = await client.acknowledge([
          { kind: 'finish', job: jobs[0] },
          { kind: 'release', job: jobs[1], delay: '1h', error: 'later' },
          { kind: 'bury', id: jobs[2].id, receipt: jobs[2].receipt, error: 'bad' },
          { kind: 'finish', id: jobs[3].id, receipt: WRONG_RECEIPT },
          { kind: 'finish', id: jobs[3].id, receipt: 'nope' },  // refused here, not sent
        ]);
      } finally {
        conn.redis.stream.write = write;
      }
      assert.equal(writes, 1);
      assert.deepEqual(answers.slice(0, 3), [null, null, null]);
      assert.ok(answers[3] instanceof StaleReceiptError);
      assert.ok(answers[4] instanceof InvalidArgumentError);
      assert.equal(await client.get(jobs[0].id), null);
      assert.equal((await client.get(jobs[1].id)).state, 'delayed');
      assert.equal((await client.get(jobs[2].id)).state, 'buried');
      assert.equal((await client.get(jobs[3].id)).state, 'reserved');
    });

    test('stats, topics, pause and resume, ping, command', async () => {
      const t = topicName();
      await client.add(t, 'x');
      const s = await client.stats();
      for (const k of ['jobs', 'delayed', 'ready', 'reserved', 'buried', 'topics', 'waiting', 'added', 'finished', 'timedOut', 'buriedTotal', 'connections']) {
        assert.equal(typeof s[k], 'number', k);
      }
      assert.ok(s.added >= 1);
      assert.ok((await client.topics()).includes(t));
      await client.pause(t, '10m');
      let ts = await client.topicStats(t);
      assert.equal(ts.paused, true);
      assert.ok(ts.pausedForMs > 590_000);
      assert.deepEqual(await client.reserve(t), []);  // paused: nothing handed out
      await client.resume(t);
      await client.pause(t);  // until resume
      assert.equal((await client.topicStats(t)).pausedForMs, -1);
      await client.resume(t);
      ts = await client.topicStats(t);
      assert.equal(ts.paused, false);
      assert.equal((await client.reserve(t)).length, 1);
      assert.equal(await client.ping(), 'PONG');
      assert.equal(await client.command('echo', 'hi there'), 'hi there');
    });

    test('every server error is its own type, with the server text as message', async () => {
      const t = topicName();
      const a = await client.add(t, 'x', { id: `${t}-1` });
      const check = async (call, Type, code, re) => {
        await assert.rejects(call, e => {
          assert.ok(e instanceof Type, `${e.constructor.name}: ${e.message}`);
          assert.ok(e instanceof DelayqError);
          assert.equal(e.code, code);
          assert.match(e.message, re);
          return true;
        });
      };
      await check(client.kick(a.id), InvalidArgumentError, 'invalid_argument', /^job '.*' is ready; only buried or delayed jobs can be kicked/);
      await check(client.finish('gone-job', WRONG_RECEIPT), NotFoundError, 'not_found', /^job 'gone-job' does not exist/);
      await check(client.add(t, 'y', { id: a.id }), ExistsError, 'exists', /already exists/);
      await client.reserve(t);
      await check(client.finish(a.id, WRONG_RECEIPT), StaleReceiptError, 'stale_receipt', /^receipt does not match/);
      const b = await client.add(t, 'z', { delay: '1h' });
      await check(client.touch(b.id, FORCE), NotReservedError, 'not_reserved', /is delayed, not reserved/);
      await check(client.add(t, Buffer.alloc(262_145)), TooLargeError, 'too_large', /^body: 262145 bytes, at most 262144 allowed/);
      await check(client.command('FROB', 'a'), InternalError, 'internal', /^ERR unknown command 'FROB'/);
      // A lost connection's message says whether the request may have run.
      const c = new Client({ servers: `127.0.0.1:${await freePort()}` });
      await check(c.get('x'), UnavailableError, 'unavailable', /^no delayq server answered: 127\.0\.0\.1:\d+ \(connect ECONNREFUSED/);
      // a server marked down fails fast until its backoff lets a connect through
      await check(c.get('x'), UnavailableError, 'unavailable', /unreachable, next connect attempt in \d+ ms \(last error: connect ECONNREFUSED/);
      await c.close();
      const closed = new Client({ servers: server.address });
      await closed.ping();
      await closed.close();
      await check(closed.get('x'), UnavailableError, 'unavailable', /the client is closed/);
    });
  });
}

describe('auth', () => {
  let server;
  before(async () => { server = await startDelayq({ args: ['--auth-token', 's3cret'] }); });
  after(async () => { await server.stop(); });

  test('the token is sent with AUTH on connect; none or a wrong one is unauthorized', async () => {
    const good = new Client({ servers: server.address, authToken: 's3cret' });
    assert.equal((await good.add('auth.t', 'x')).state, 'ready');
    await good.close();
    const none = new Client({ servers: server.address });
    await assert.rejects(none.add('auth.t', 'x'), e => e instanceof UnauthorizedError && e.code === 'unauthorized' &&
      /^Authentication required/.test(e.message));
    await none.close();
    const wrong = new Client({ servers: server.address, authToken: 'wrong' });
    await assert.rejects(wrong.stats(), e => e instanceof UnauthorizedError && /^no delayq server accepted: 127\.0\.0\.1:\d+ \(invalid token\)/.test(e.message));
    await wrong.close();
    const saved = process.env.DELAYQ_AUTH_TOKEN;
    process.env.DELAYQ_AUTH_TOKEN = 's3cret';
    try {
      const fromEnv = new Client({ servers: server.address });
      assert.equal(await fromEnv.ping(), 'PONG');
      assert.ok((await fromEnv.stats()).connections >= 1);
      await fromEnv.close();
    } finally {
      if (saved === undefined) delete process.env.DELAYQ_AUTH_TOKEN; else process.env.DELAYQ_AUTH_TOKEN = saved;
    }
  });
});

describe('a server shutting down', () => {
  test('ends a waiting reserve with UnavailableError "shutting down", never "no job"', async () => {
    const server = await startDelayq();
    const client = new Client({ servers: server.address });
    const t = topicName();
    const waiting = client.reserve(t, { wait: '20s' });
    await poll(async () => (await client.topicStats(t)).waiting === 1, 5000, 'the reserve to wait');
    const stopped = server.stop();
    await assert.rejects(waiting, e => e instanceof UnavailableError && e.shuttingDown &&
      /^shutting down: .* \(delayq server 127\.0\.0\.1:\d+\)$/.test(e.message));
    await stopped;
    await client.close();
  });
});
