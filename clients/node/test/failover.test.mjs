// Failover over two `delayq serve --store redis` on one redis-server: the
// first is killed (SIGKILL) while adds go on, and every add the client
// acknowledged exists exactly once — the adds in flight at the kill
// included, repeated on the second server under the same id and
// idempotency key. A waiting reserve on a server that shuts down moves to
// the next one for what is left of its wait.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Client, Worker } from '../index.js';
import { poll, startDelayq, startRedis } from './support/servers.mjs';

describe('failover', () => {
  let redis;
  before(async () => { redis = await startRedis(); });
  after(async () => { await redis.stop(); });

  // Two servers on one Redis (key prefix per test), and a client over both, the first first.
  async function startPair(tag) {
    const prefix = `nodefail${process.pid}${tag}`;
    const first = await startDelayq({ store: 'redis', redis: redis.url, prefix });
    const second = await startDelayq({ store: 'redis', redis: redis.url, prefix });
    return { first, second, client: new Client({ servers: [first.address, second.address] }) };
  }

  test('adds go on through a SIGKILL of the first server: none lost, none doubled', async () => {
    const { first, second, client } = await startPair('a');
    const check = new Client({ servers: second.address });
    let stop = false;
    try {
      const t = 'node.failover';
      const acked = new Map();  // id -> body
      let failed = 0;
      let killedAt = -1;
      const adder = async n => {
        for (let i = 0; !stop; i++) {
          const body = `adder ${n} add ${i}`;
          try {
            const { id } = await client.add(t, body);
            assert.ok(!acked.has(id), `id ${id} acknowledged twice`);
            acked.set(id, body);
          } catch (err) {
            failed++;
            throw err;
          }
        }
      };
      // 16 adders, each with one add in flight: several are on their way when the kill comes.
      const adders = Array.from({ length: 16 }, (_, n) => adder(n));
      await poll(() => acked.size >= 300, 10_000, '300 adds');
      killedAt = acked.size;
      await first.kill();
      await poll(() => acked.size >= killedAt + 300, 10_000, '300 adds after the kill');
      stop = true;
      await Promise.all(adders);
      assert.equal(failed, 0);

      assert.equal((await check.topicStats(t)).ready, acked.size, 'jobs in the store = adds acknowledged');
      const jobs = await Promise.all([...acked.keys()].map(id => check.get(id)));
      for (const job of jobs) {
        assert.ok(job !== null);
        assert.equal(job.text(), acked.get(job.id));
      }
      // every body once: a doubled add would be a second job with the same body
      const bodies = new Set();
      for (;;) {
        const got = await check.reserve(t, { count: 1000 });
        if (got.length === 0) break;
        for (const d of got) {
          assert.ok(!bodies.has(d.text()), `body ${d.text()} twice`);
          bodies.add(d.text());
        }
        await check.acknowledge(got.map(job => ({ kind: 'finish', job })));
      }
      assert.equal(bodies.size, acked.size);
    } finally {
      stop = true;
      await Promise.all([check.close(), client.close()]);
      await Promise.all([first.stop(), second.stop()]);
    }
  });

  test('a worker goes on through a SIGKILL of the first server', async () => {
    const { first, second, client } = await startPair('b');
    const producer = new Client({ servers: second.address });
    let worker = null;
    try {
      const t = 'node.failover.worker';
      const done = new Set();
      worker = new Worker(client, {
        concurrency: 8,
        onAcknowledged: (job, kind, err) => { if (err === null) done.add(job.id); },
      });
      worker.handle(t, async () => {});
      await worker.start();
      const ids = [];
      for (let i = 0; i < 100; i++) ids.push((await producer.add(t, `${i}`, { ttr: 1000 })).id);
      await poll(() => done.size >= 100, 10_000, 'the first hundred');
      await first.kill();
      for (let i = 0; i < 100; i++) ids.push((await producer.add(t, `${i}`, { ttr: 1000 })).id);
      await poll(() => ids.every(id => done.has(id)), 15_000, 'every job done');
      await worker.stop({ drain: 1000 });
      assert.equal((await producer.topicStats(t)).ready, 0);
    } finally {
      await worker?.stop({ drain: 0 });
      await Promise.all([producer.close(), client.close()]);
      await Promise.all([first.stop(), second.stop()]);
    }
  });

  test('a waiting reserve on a server shutting down moves to the next one', async () => {
    const { first, second, client } = await startPair('c');
    const onFirst = new Client({ servers: first.address });
    const onSecond = new Client({ servers: second.address });
    try {
      const t = 'node.failover.reserve';
      const waiting = client.reserve(t, { wait: '20s' });
      await poll(async () => (await onFirst.topicStats(t)).waiting === 1, 5000, 'the reserve to wait on the first');
      await first.stop();  // SIGTERM: "-UNAVAILABLE shutting down" to the waiting reserve
      await poll(async () => (await onSecond.topicStats(t)).waiting === 1, 5000, 'the reserve to wait on the second');
      const a = await onSecond.add(t, 'x');
      const got = await waiting;
      assert.deepEqual(got.map(d => d.id), [a.id]);
      await client.finish(got[0]);
    } finally {
      await Promise.all([client.close(), onFirst.close(), onSecond.close()]);
      await Promise.all([first.stop(), second.stop()]);
    }
  });
});
