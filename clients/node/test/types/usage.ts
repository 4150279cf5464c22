// Uses the public API as a TypeScript program would; `tsc --noEmit` on it
// (test/types.test.mjs) proves index.d.ts matches that use. Not run.
import {
  Client, Worker, Outcome, FORCE, Delivery, Job, DelayqError, NotFoundError, StaleReceiptError,
  UnavailableError, backoffDelayMs, parseDuration, type AddResult, type WorkerStats, type Ack,
} from 'delayq';

async function producer(): Promise<void> {
  const client = new Client({ servers: ['127.0.0.1:7701', '127.0.0.1:7702'], authToken: 's3cret' });
  const a: AddResult = await client.add('orders.close', { order: 42 }, { delay: '30m', ttr: 90_000, priority: 10 });
  const b = await client.add('orders.close', Buffer.from('bytes'), { runAt: new Date(Date.now() + 60_000), id: 'order-43', replace: true });
  const state: 'delayed' | 'ready' = b.state;
  const jobs: Delivery[] = await client.reserve(['orders.close'], { wait: '5s', count: 10, signal: AbortSignal.timeout(10_000) });
  for (const job of jobs) {
    const order = job.json<{ order: number }>();
    const text: string = job.text();
    if (order.order === 42) await client.finish(job);
    else await client.release(job, { delay: 1000, error: 'later' });
    await client.touch(job.id, job.receipt);
    await client.bury(job, 'bad input');
    await client.bury(job.id, FORCE, new Error('bad'));
    void text;
  }
  const acks: Ack[] = jobs.map(job => ({ kind: 'finish', job }));
  const answers = await client.acknowledge(acks);
  if (answers[0] instanceof StaleReceiptError) console.log(answers[0].code);
  const got: Job | null = await client.get(a.id);
  if (got !== null) console.log(got.state, got.lastError, got.createdAtMs);
  const peeked = await client.peek('orders.close', 'buried');
  const n: number = await client.kickTopic('orders.close', 10);
  const stats = await client.stats();
  const t = await client.topicStats('orders.close');
  const paused: boolean = t.paused;
  await client.pause('orders.close', '10m');
  await client.resume('orders.close');
  await client.kick('order-43');
  await client.delete('order-43');
  const pong: string = await client.ping();
  const topics: string[] = await client.topics();
  await client.command('SCHEDULE', 'LIST');
  try {
    await client.finish('order-43', '0123456789abcdef01234567');
  } catch (err) {
    if (err instanceof NotFoundError) console.log(err.code === 'not_found');
    else if (err instanceof UnavailableError && err.shuttingDown) console.log('going away');
    else if (err instanceof DelayqError) console.log(err.code, err.message);
  }
  console.log(state, peeked?.id, n, stats.jobs, stats.timedOut, paused, pong, topics);
  await client.close();
}

async function worker(): Promise<void> {
  const client = new Client({
    servers: 'delayq.internal:7701', tls: true, tlsCaFile: 'ca.pem', tlsCertFile: 'worker.pem', tlsKeyFile: 'worker.key',
  });
  const w = new Worker(client, {
    concurrency: 8,
    reserveWait: '30s',
    random: () => 0.5,
    onAcknowledged: (job, kind, error) => { if (kind === 'finish' && error === null) console.log(`done ${job.id}`); },
    onError: err => console.error(err.message),
  });
  w.handle('orders.close', async job => {
    if (job.attempts > 3) return Outcome.bury('too many tries');
    if (job.body.length === 0) return Outcome.retryIn('5s', 'empty');
    if (job.priority > 100) throw new Error('busy');
    return undefined;
  }, { concurrency: 2, backoff: { baseMs: 200, factor: 2, capMs: 60_000 } })
    .handle('emails.send', job => { void job.id; return Outcome.retry(new Error('smtp down')); });
  await w.start();
  const s: WorkerStats = w.stats();
  console.log(s.succeeded, s.lastError);
  const remove = w.stopOnSignals({ drain: '30s' });
  await w.stop({ drain: 30_000 });
  remove();
  await w.run({ drain: '10s', signals: ['SIGTERM'] });
  await w.wait();
  const ms: number = backoffDelayMs({ baseMs: 1000, factor: 2, capMs: 600_000 }, 3, 0.5) + parseDuration('1h30m', 'delay');
  console.log(ms);
}

void producer;
void worker;
