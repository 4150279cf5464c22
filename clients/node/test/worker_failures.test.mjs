// The worker when its calls fail, over a scripted client (no server): an
// ack answered unavailable is sent again and its job touched meanwhile;
// acks still failing when stop's drain ends are given up and reported;
// failed touches are retried, and a touch that finds the delivery over
// ends its touches; a failed reserve is retried.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Delivery, Worker, UnavailableError, StaleReceiptError } from '../index.js';

const sleep = ms => new Promise(r => setTimeout(r, ms));
let n = 0;
const delivery = (topic, ttrMs = 60_000) => {
  n++;
  const hex = n.toString(16).padStart(24, '0');
  return new Delivery(`job-${n}`, topic, Buffer.from('x'), hex, 1, ttrMs, 1024, Date.now(), Date.now() + ttrMs, 0);
};

// What the worker calls, scripted: `ready` jobs go to the next reserve;
// answers come from the `ackAnswer` and `touchAnswer` functions.
class ScriptedClient {
  constructor() {
    this.ready = [];
    this.batches = [];       // every acknowledge call's acks
    this.touches = [];       // ids touched, in order
    this.unreserved = [];
    this.released = [];
    this.reserveFailures = 0;
    this.reserves = 0;
    this.ackAnswer = () => null;
    this.touchAnswer = () => null;
  }
  async reserve(topics, { count, signal }) {
    this.reserves++;
    if (this.reserveFailures > 0) {
      this.reserveFailures--;
      throw new UnavailableError('no delayq server answered: scripted');
    }
    for (;;) {
      signal.throwIfAborted();
      if (this.ready.length > 0) return this.ready.splice(0, count);
      await sleep(5);
    }
  }
  async acknowledge(acks) {
    this.batches.push(acks.map(a => `${a.kind} ${a.job.id}`));
    return acks.map(a => this.ackAnswer(a));
  }
  async touch(job) {
    this.touches.push(job.id);
    const err = this.touchAnswer(job);
    if (err) throw err;
  }
  async unreserve(job) { this.unreserved.push(job.id); }
  async release(job, o) { this.released.push([job.id, o.error]); }
}

test('an ack answered unavailable is sent again after 100 ms, its job touched meanwhile', async () => {
  const client = new ScriptedClient();
  let failures = 3;
  client.ackAnswer = () => (failures-- > 0 ? new UnavailableError('no delayq server answered: down') : null);
  const acked = [];
  const worker = new Worker(client, { onAcknowledged: (job, kind, err) => acked.push([job.id, kind, err]) });
  worker.handle('t', async () => {});
  const job = delivery('t', 400);  // touched every 200 ms while its ack waits
  client.ready.push(job);
  const t0 = performance.now();
  await worker.start();
  for (let i = 0; i < 300 && acked.length === 0; i++) await sleep(10);
  const took = performance.now() - t0;
  assert.deepEqual(acked, [[job.id, 'finish', null]]);
  // sent 4 times: after 100, 200 and 400 ms
  assert.equal(client.batches.length, 4);
  assert.ok(took >= 650, `${took} ms`);
  assert.ok(client.touches.includes(job.id), 'touched while its ack waited');
  const s = worker.stats();
  assert.equal(s.succeeded, 1);
  assert.equal(s.errors, 3);
  assert.match(s.lastError, /^unavailable: no delayq server answered/);
  await worker.stop({ drain: 0 });
});

test('acks still failing when the drain ends are given up, and reported', async () => {
  const client = new ScriptedClient();
  client.ackAnswer = () => new UnavailableError('no delayq server answered: down');
  const acked = [];
  const worker = new Worker(client, { onAcknowledged: (job, kind, err) => acked.push([job.id, kind, err]) });
  worker.handle('t', async () => {});
  const job = delivery('t');
  client.ready.push(job);
  await worker.start();
  while (client.batches.length === 0) await sleep(5);
  await worker.stop({ drain: 250 });
  assert.equal(acked.length, 1);
  const [id, kind, err] = acked[0];
  assert.deepEqual([id, kind], [job.id, 'finish']);
  assert.ok(err instanceof UnavailableError);
  assert.match(err.message, /^the worker stopped before the server took the outcome; the last try: no delayq server answered/);
  assert.equal(worker.stats().succeeded, 0);
});

test('a failed touch is tried again soon; one that finds the delivery over ends its touches', async () => {
  const client = new ScriptedClient();
  const a = delivery('t', 400);
  const b = delivery('t', 400);
  client.touchAnswer = job => {
    if (job.id === b.id) return new StaleReceiptError('receipt does not match');
    const tries = client.touches.filter(id => id === a.id).length;
    return tries === 1 ? new UnavailableError('no delayq server answered: down') : null;
  };
  const worker = new Worker(client, { concurrency: 2 });
  let release;
  const blocked = new Promise(r => { release = r; });
  worker.handle('t', async () => { await blocked; });
  client.ready.push(a, b);
  await worker.start();
  const count = id => client.touches.filter(x => x === id).length;
  for (let i = 0; i < 300 && count(a.id) < 3; i++) await sleep(10);
  const touchesOfA = count(a.id);
  const touchesOfB = count(b.id);
  // a: at 200 ms (failed), retried 100 ms later (accepted), then every 200 ms
  assert.ok(touchesOfA >= 3, `a touched ${touchesOfA} times`);
  assert.equal(touchesOfB, 1, 'b is touched no more once stale');
  assert.equal(worker.stats().touched, touchesOfA - 1);
  release();
  await worker.stop({ drain: 1000 });
});

test('a failed reserve is tried again after 100 ms, then 200 ms', async () => {
  const client = new ScriptedClient();
  client.reserveFailures = 2;
  const errors = [];
  const worker = new Worker(client, { onError: e => errors.push(e.message) });
  worker.handle('t', async () => {});
  const t0 = performance.now();
  await worker.start();
  while (client.reserves < 3) await sleep(5);
  const took = performance.now() - t0;
  assert.ok(took >= 290, `${took} ms`);
  assert.deepEqual(errors, Array(2).fill('no delayq server answered: scripted'));
  await worker.stop({ drain: 0 });
});

test('a second signal cuts the drain short', async () => {
  const client = new ScriptedClient();
  const worker = new Worker(client);
  let running = false;
  worker.handle('t', async () => { running = true; await new Promise(() => {}); });
  client.ready.push(delivery('t'));
  const remove = worker.stopOnSignals({ drain: '1h', signals: ['SIGUSR2'] });
  await worker.start();
  while (!running) await sleep(5);
  process.kill(process.pid, 'SIGUSR2');
  while (!worker.stopping) await sleep(5);  // the first signal began the drain
  process.kill(process.pid, 'SIGUSR2');
  await worker.wait();
  remove();
  assert.deepEqual(client.released.map(r => r[1]), ['worker stopped while the handler ran']);
});
