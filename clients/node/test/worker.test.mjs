// The worker against a real `delayq serve`: success, retry with backoff,
// retryIn, bury, a throw, max_attempts used up, touches at half the TTR,
// batched acks, and the stop: drain, a drain that runs out, held jobs
// given back. Memory store; the first cases on the embedded store too.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Client, Worker, Outcome, STOPPED_ERROR } from '../index.js';
import { poll, startWithClient } from './support/servers.mjs';

let seq = 0;
const topicName = () => `node.worker.${process.pid}.${++seq}`;
const sleep = ms => new Promise(r => setTimeout(r, ms));

// A worker whose acks are recorded: acked[k] = {id, kind, error, job}.
function recordingWorker(client, options = {}) {
  const acked = [];
  const worker = new Worker(client, {
    concurrency: 4,
    random: () => 0,
    ...options,
    onAcknowledged: (job, kind, error) => acked.push({ id: job.id, kind, error, job }),
  });
  return { worker, acked };
}

for (const store of ['memory', 'embedded']) {
  describe(`worker on --store ${store}`, () => {
    let client;
    let stop;
    before(async () => { ({ client, stop } = await startWithClient({ store })); });
    after(() => stop());

    test('success finishes the job; onAcknowledged hears the finish accepted', async () => {
      const t = topicName();
      const ids = [];
      for (let i = 0; i < 6; i++) ids.push((await client.add(t, { n: i })).id);
      const { worker, acked } = recordingWorker(client);
      const seen = [];
      worker.handle(t, async job => { seen.push(job.json().n); });
      await worker.start();
      await poll(() => acked.length === 6, 5000, 'six acks');
      await worker.stop({ drain: 1000 });
      assert.deepEqual(acked.map(a => [a.kind, a.error]), Array(6).fill(['finish', null]));
      assert.deepEqual(new Set(acked.map(a => a.id)), new Set(ids));
      assert.deepEqual(seen.sort(), [0, 1, 2, 3, 4, 5]);
      for (const id of ids) assert.equal(await client.get(id), null);
      const s = worker.stats();
      assert.equal(s.handled, 6);
      assert.equal(s.succeeded, 6);
      assert.equal(s.errors, 0, s.lastError);
    });

    test('a throw is a retry after the backoff, its message as last_error', async () => {
      const t = topicName();
      const a = await client.add(t, 'x');
      const { worker, acked } = recordingWorker(client);
      worker.handle(t, async () => { throw new Error('payment service busy'); }, { backoff: { baseMs: 5000 } });
      await worker.start();
      await poll(() => acked.length === 1, 5000, 'the release');
      const releasedAt = Date.now();
      await worker.stop({ drain: 1000 });
      assert.equal(acked[0].kind, 'release');
      assert.equal(acked[0].error, null);
      const job = await client.get(a.id);
      assert.equal(job.state, 'delayed');
      assert.equal(job.lastError, 'payment service busy');
      // the first retry waits base exactly: run_at about now + 5 s
      assert.ok(Math.abs(job.runAtMs - (releasedAt + 5000)) < 1000, `${job.runAtMs - releasedAt}`);
      assert.equal(worker.stats().retried, 1);
    });
  });
}

describe('worker on --store memory', () => {
  let client;
  let stop;
  before(async () => { ({ client, stop } = await startWithClient()); });
  after(() => stop());

  test('the backoff grows with the attempts, jittered by the random source', async () => {
    const t = topicName();
    const a = await client.add(t, 'x');
    // attempt 1 waits base (200 ms); attempt 2: d = 400, random 1: 400 ms
    const { worker, acked } = recordingWorker(client, { random: () => 1 });
    const started = [];
    worker.handle(t, async job => {
      started.push(Date.now());
      if (job.attempts < 3) return Outcome.retry(`attempt ${job.attempts}`);
      return undefined;
    }, { backoff: { baseMs: 200, factor: 2, capMs: 10_000 } });
    await worker.start();
    await poll(() => acked.length === 3, 5000, 'three outcomes');
    await worker.stop({ drain: 1000 });
    assert.deepEqual(acked.map(x => x.kind), ['release', 'release', 'finish']);
    const gap1 = started[1] - started[0];
    const gap2 = started[2] - started[1];
    assert.ok(gap1 >= 190 && gap1 < 900, `first retry after ${gap1} ms`);
    assert.ok(gap2 >= 390 && gap2 < 1200, `second retry after ${gap2} ms`);
    assert.equal(await client.get(a.id), null);
  });

  test('retryIn, bury, a returned Error', async () => {
    const t = topicName();
    const ids = {};
    for (const k of ['later', 'bad', 'err']) ids[k] = (await client.add(t, k)).id;
    const { worker, acked } = recordingWorker(client);
    worker.handle(t, async job => {
      const k = job.text();
      if (k === 'later') return Outcome.retryIn('1h', 'try later');
      if (k === 'bad') return Outcome.bury('cannot parse');
      return new Error('returned, not thrown');
    }, { backoff: { baseMs: 60_000 } });
    const before = Date.now();
    await worker.start();
    await poll(() => acked.length === 3, 5000, 'three outcomes');
    await worker.stop({ drain: 1000 });
    const later = await client.get(ids.later);
    assert.equal(later.state, 'delayed');
    assert.equal(later.lastError, 'try later');
    assert.ok(later.runAtMs >= before + 3_600_000 - 50);
    const bad = await client.get(ids.bad);
    assert.equal(bad.state, 'buried');
    assert.equal(bad.lastError, 'cannot parse');
    const err = await client.get(ids.err);
    assert.equal(err.state, 'delayed');
    assert.equal(err.lastError, 'returned, not thrown');
    const s = worker.stats();
    assert.equal(s.buried, 1);
    assert.equal(s.retried, 2);
  });

  test('max_attempts used up: the release buries the job (retried and exhausted)', async () => {
    const t = topicName();
    const a = await client.add(t, 'x', { maxAttempts: 1 });
    const { worker, acked } = recordingWorker(client);
    worker.handle(t, () => { throw 'a string, thrown'; });  // eslint-disable-line no-throw-literal
    await worker.start();
    await poll(() => acked.length === 1, 5000, 'the release');
    await worker.stop({ drain: 1000 });
    assert.equal(acked[0].kind, 'release');
    assert.equal(acked[0].job.releaseBuries, true);
    const job = await client.get(a.id);
    assert.equal(job.state, 'buried');
    assert.match(job.lastError, /^a string, thrown.*max_attempts \(1\) used up/);
    const s = worker.stats();
    assert.equal(s.retried, 1);
    assert.equal(s.exhausted, 1);
  });

  test('a handler that outlives its TTR keeps the job: touched every half TTR', async () => {
    const t = topicName();
    const a = await client.add(t, 'slow', { ttr: 1000 });
    const { worker, acked } = recordingWorker(client);
    let calls = 0;
    worker.handle(t, async () => {
      calls++;
      await sleep(2500);
    });
    await worker.start();
    await poll(() => acked.length === 1, 8000, 'the finish');
    await worker.stop({ drain: 1000 });
    assert.equal(calls, 1);
    assert.deepEqual([acked[0].kind, acked[0].error], ['finish', null]);
    assert.equal(await client.get(a.id), null);
    const s = worker.stats();
    assert.ok(s.touched >= 3, `touched ${s.touched}`);
    assert.equal(s.errors, 0, s.lastError);
  });

  test('outcomes of one turn go in one pipeline', async () => {
    const t = topicName();
    for (let i = 0; i < 20; i++) await client.add(t, `${i}`);
    const { worker, acked } = recordingWorker(client, { concurrency: 20 });
    worker.handle(t, async () => {});
    await worker.start();
    await poll(() => acked.length === 20, 5000, 'twenty acks');
    await worker.stop({ drain: 1000 });
    const s = worker.stats();
    assert.equal(s.succeeded, 20);
    assert.equal(s.reserves >= 1, true);
    assert.ok(s.ackBatches <= 2, `${s.ackBatches} batches for 20 outcomes`);
  });

  test('stop drains a running handler: it finishes and is acknowledged', async () => {
    const t = topicName();
    const a = await client.add(t, 'x');
    const { worker, acked } = recordingWorker(client);
    let running = false;
    worker.handle(t, async () => {
      running = true;
      await sleep(300);
    });
    await worker.start();
    await poll(() => running, 5000, 'the handler to start');
    await worker.stop({ drain: 5000 });
    assert.deepEqual(acked.map(x => [x.kind, x.error]), [['finish', null]]);
    assert.equal(await client.get(a.id), null);
    assert.equal(worker.stats().givenBack, 0);
  });

  test('a handler longer than the drain: its job is released with the error, at once due', async () => {
    const t = topicName();
    const a = await client.add(t, 'x');
    const { worker, acked } = recordingWorker(client);
    let running = false;
    let release;
    const blocked = new Promise(r => { release = r; });
    worker.handle(t, async () => {
      running = true;
      await blocked;
    });
    await worker.start();
    await poll(() => running, 5000, 'the handler to start');
    const t0 = performance.now();
    await worker.stop({ drain: 200 });
    assert.ok(performance.now() - t0 >= 190);
    const job = await client.get(a.id);
    assert.equal(job.state, 'ready');
    assert.equal(job.lastError, STOPPED_ERROR);
    assert.equal(job.attempts, 1);  // the handler did run
    assert.equal(worker.stats().givenBack, 1);
    assert.equal(worker.stats().running, 1);
    release();  // its outcome comes back into a job no longer its own: ignored
    await poll(() => worker.stats().running === 0, 5000, 'the abandoned handler to return');
    assert.equal(acked.length, 0);
    assert.equal((await client.get(a.id)).state, 'ready');
  });

  test('jobs held but not started go back at stop, their attempt not counted', async () => {
    const ta = topicName();
    const tb = topicName();
    const ids = [(await client.add(ta, 'first')).id, (await client.add(ta, 'second')).id];
    // Two slots over two topics, one handler at a time for ta: one reserve
    // brings both ta jobs; one runs, the other waits in the worker.
    const { worker } = recordingWorker(client, { concurrency: 2 });
    let release;
    const blocked = new Promise(r => { release = r; });
    worker.handle(ta, async () => { await blocked; }, { concurrency: 1 });
    worker.handle(tb, async () => {}, { concurrency: 1 });
    await worker.start();
    await poll(() => worker.stats().running === 1 && worker.stats().held === 1, 5000, 'one running, one held');
    await worker.stop({ drain: 100 });
    const jobs = await Promise.all(ids.map(id => client.get(id)));
    const held = jobs.find(j => j.lastError === '');
    const ran = jobs.find(j => j.lastError === STOPPED_ERROR);
    assert.ok(held && ran, JSON.stringify(jobs));
    assert.deepEqual([held.state, held.attempts], ['ready', 0]);
    assert.deepEqual([ran.state, ran.attempts], ['ready', 1]);
    assert.equal(worker.stats().givenBack, 2);
    release();
  });

  test('a reserve waiting when stop comes is withdrawn: no job taken', async () => {
    const t = topicName();
    const { worker } = recordingWorker(client);
    worker.handle(t, async () => {});
    await worker.start();
    await poll(async () => (await client.topicStats(t)).waiting === 1, 5000, 'the reserve to wait');
    await worker.stop({ drain: 1000 });
    await poll(async () => (await client.topicStats(t)).waiting === 0, 5000, 'the reserve to be withdrawn');
    const a = await client.add(t, 'after the stop');  // no reserve waits (polled above) to take it
    assert.deepEqual([(await client.get(a.id)).state, (await client.get(a.id)).attempts], ['ready', 0]);
    await worker.stop();  // a second stop: the same, done
  });

  test('a topic that gains room while the reserve waits on others gets a reserve of its own', async () => {
    const busy = topicName();
    const idle = topicName();
    const { worker, acked } = recordingWorker(client, { concurrency: 2 });
    let release;
    const blocked = new Promise(r => { release = r; });
    worker.handle(busy, async () => { await blocked; }, { concurrency: 1 });
    worker.handle(idle, async () => {}, { concurrency: 1 });
    await client.add(busy, 'blocks');
    await worker.start();
    await poll(() => worker.stats().running === 1, 5000, 'the busy handler');
    // the open reserve asks for `idle` only; once `busy` frees, it is made again for both
    release();
    await poll(() => acked.length === 1, 5000, 'the busy job done');
    await poll(async () => (await client.topicStats(busy)).waiting === 1, 5000, 'a reserve on busy again');
    const b = await client.add(busy, 'quick');
    await poll(() => acked.length === 2, 5000, 'the second busy job');
    assert.equal(acked[1].id, b.id);
    await worker.stop({ drain: 1000 });
  });
});
