#!/usr/bin/env node
// The Node worker's job lifecycle rate against `delayq serve`: the peer of
// bench/bullmq/lifecycle.js (BullMQ's Worker on Redis). A Worker with a
// no-op handler (CONCURRENCY, 50) finishes jobs that PRODUCERS clients (2)
// add, 100-byte bodies due now, with at most WINDOW (1000) jobs outstanding
// (added, not yet finished), so the figure is steady-state throughput, not
// how fast a queue fills or drains. A lifecycle is a job whose FINISH the
// server accepted (the worker's onAcknowledged), counted over RUN_SECONDS
// (5) after WARMUP_SECONDS (2).
//
//   DELAYQ_SERVER=127.0.0.1:7701 node bench/lifecycle.mjs
//
// Environment (defaults): DELAYQ_SERVER (127.0.0.1:7701), DELAYQ_AUTH_TOKEN,
// CONCURRENCY 50, WINDOW 1000, RUN_SECONDS 5, WARMUP_SECONDS 2, PRODUCERS 2,
// ADD_DEPTH 64 (unanswered adds per producer), BODY 100, TOPIC
// (bench.lifecycle.<pid>), PRODUCER=0 (the worker alone: another process
// feeds TOPIC), ROLE=producer (the producers alone, keeping the topic's
// jobs under WINDOW by its STATS, for a worker in another process).
// Prints one JSON line; exit 1 on errors.
import { Client, Worker } from '../index.js';

const env = process.env;
const num = (name, dflt) => {
  const v = env[name] === undefined || env[name] === '' ? dflt : Number(env[name]);
  if (!Number.isFinite(v) || v < 0) {
    process.stderr.write(`lifecycle.mjs: ${name} must be a number >= 0\n`);
    process.exit(2);
  }
  return v;
};
const o = {
  concurrency: num('CONCURRENCY', 50),
  window: num('WINDOW', 1000),
  seconds: num('RUN_SECONDS', 5),
  warmup: num('WARMUP_SECONDS', 2),
  producers: num('PRODUCERS', 2),
  addDepth: num('ADD_DEPTH', 64),
  body: num('BODY', 100),
  topic: env.TOPIC || `bench.lifecycle.${process.pid}`,
  role: env.ROLE || (env.PRODUCER === '0' ? 'worker' : 'both'),
};
if (!['both', 'worker', 'producer'].includes(o.role)) {
  process.stderr.write('lifecycle.mjs: ROLE is producer (or unset), PRODUCER=0 runs the worker alone\n');
  process.exit(2);
}
const sleep = ms => new Promise(r => setTimeout(r, ms));
const cpuNow = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1e6; };
const r2 = x => Math.round(x * 100) / 100;

const errors = { count: 0, first: null };
const noteError = e => { errors.count++; if (!errors.first) errors.first = String(e?.message ?? e); };

let measuring = false;
let lifecycles = 0;
let adds = 0;
let outstanding = 0;  // added (or being added) and not finished: role both
let stopping = false;

// --- producers ---------------------------------------------------------------------
const body = 'x'.repeat(o.body);  // as bench/bullmq/lifecycle.js's job data
const producerClients = [];
let limit = () => outstanding < o.window;  // role producer: replaced by the STATS-based one
function startProducers() {
  const perProducer = Math.max(1, Math.floor(o.window / Math.max(1, o.producers)));
  for (let i = 0; i < o.producers; i++) {
    const client = new Client();
    producerClients.push(client);
    const p = { inflight: 0, out: 0 };
    const pump = () => {
      while (!stopping && p.inflight < o.addDepth && (o.role === 'producer' ? limit() : p.out < perProducer)) {
        p.inflight++;
        p.out++;
        outstanding++;
        client.add(o.topic, body).then(() => { if (measuring) adds++; }, e => {
          noteError(e);
          outstanding--;
          p.out--;
        }).finally(() => { p.inflight--; pump(); });
      }
    };
    p.pump = pump;
    producers.push(p);
    pump();
  }
}
const producers = [];
// A finish frees room in the producers' windows, one producer after the other.
let turn = 0;
function onDone() {
  outstanding--;
  for (let tries = 0; tries < producers.length; tries++) {
    const p = producers[turn];
    turn = (turn + 1) % producers.length;
    if (p.out > 0) { p.out--; p.pump(); break; }
  }
}

// --- the worker --------------------------------------------------------------------
let worker = null;
let workerClient = null;
function startWorker() {
  workerClient = new Client();
  worker = new Worker(workerClient, {
    concurrency: o.concurrency,
    onAcknowledged: (job, kind, err) => {
      if (err !== null) { noteError(err); return; }
      if (measuring) lifecycles++;
      if (o.role === 'both') onDone();
    },
  });
  worker.handle(o.topic, async () => {});
  return worker.start();
}

async function main() {
  const hard = setTimeout(() => {
    process.stderr.write('lifecycle.mjs: run overran its time limit\n');
    process.exit(1);
  }, (o.warmup + o.seconds + 60) * 1000);
  hard.unref();
  const admin = new Client();
  await admin.ping();
  if (o.role !== 'producer') await startWorker();
  if (o.role === 'producer') {
    // No completions to count here: keep the topic's live jobs under WINDOW.
    let live = 0;
    limit = () => live + outstanding < o.window;
    const poll = async () => {
      while (!stopping) {
        const t = await admin.topicStats(o.topic).catch(e => { noteError(e); return null; });
        if (t) live = t.delayed + t.ready + t.reserved;
        outstanding = 0;
        for (const p of producers) { p.out = 0; p.pump(); }
        await sleep(2);
      }
    };
    startProducers();
    poll();
  } else if (o.role === 'both') {
    startProducers();
  }
  await sleep(o.warmup * 1000);
  const cpu0 = cpuNow();
  const s0 = await admin.stats();
  const w0 = worker ? worker.stats() : null;
  measuring = true;
  const t0 = performance.now();
  await sleep(o.seconds * 1000);
  measuring = false;
  const wall = (performance.now() - t0) / 1000;
  const cpu = cpuNow() - cpu0;
  const s1 = await admin.stats();
  const w1 = worker ? worker.stats() : null;
  stopping = true;
  if (worker) await worker.stop({ drain: 5000 });
  // What is left of the run's jobs goes, so a shared server is left as found
  // (by the worker's process: producers alone leave them to it).
  let leftover = 0;
  while (o.role !== 'producer') {
    const jobs = await admin.reserve(o.topic, { count: 1000 }).catch(() => []);
    if (jobs.length === 0) break;
    leftover += jobs.length;
    await admin.acknowledge(jobs.map(job => ({ kind: 'finish', job })));
  }
  const result = {
    lifecycles_per_s: Math.round(lifecycles / wall),
    adds_per_s: Math.round(adds / wall),
    lifecycles,
    adds,
    seconds: r2(wall),
    warmup_s: o.warmup,
    role: o.role,
    concurrency: o.concurrency,
    window: o.window,
    producers: o.role === 'worker' ? 0 : o.producers,
    add_depth: o.addDepth,
    body: o.body,
    node_cpu_util: r2(cpu / wall),
    node_cpu_us_per_lifecycle: lifecycles ? r2((cpu * 1e6) / lifecycles) : null,
    server_finished_per_s: Math.round((s1.finished - s0.finished) / wall),
    worker: w1 && {
      reserves_per_s: Math.round((w1.reserves - w0.reserves) / wall),
      jobs_per_reserve: w1.reserves > w0.reserves ? r2((w1.handled - w0.handled) / (w1.reserves - w0.reserves)) : null,
      jobs_per_ack_batch: w1.ackBatches > w0.ackBatches ? r2((w1.succeeded - w0.succeeded) / (w1.ackBatches - w0.ackBatches)) : null,
      errors: w1.errors,
      last_error: w1.lastError || null,
    },
    errors: errors.count,
    first_error: errors.first,
    leftover_jobs_finished: leftover,
    server: env.DELAYQ_SERVER || '127.0.0.1:7701',
    versions: { node: process.version },
  };
  process.stdout.write(JSON.stringify(result) + '\n');
  await Promise.all([admin, workerClient, ...producerClients].filter(Boolean).map(c => c.close()));
  process.exit(result.errors ? 1 : 0);
}

main().catch(e => {
  process.stderr.write(`lifecycle.mjs: ${e?.stack ?? e}\n`);
  process.exit(1);
});
