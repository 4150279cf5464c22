#!/usr/bin/env node
// BullMQ's job lifecycle rate on one Redis: the peer of delayq's Redis store
// (SPEC §12, issue 5). Jobs are added by --producers Queue connections, each
// processed by one Worker (--concurrency 50) whose processor does nothing,
// completed and removed (removeOnComplete: true). At most --window jobs are
// outstanding (added, not yet completed), so the figure is steady-state
// throughput, not how fast a queue fills or drains.
//
//   node lifecycle.js --port P [--seconds 10] [--warmup 2] [--concurrency 50]
//     [--producers 2] [--body 100] [--delay 0] [--add-mode bulk|add]
//     [--batch 50] [--add-depth 64] [--window 1000] [--processes 1] [--rate R]
//
// --processes 1: producers and the Worker in this process (BullMQ's best
// figure on 2 vCPUs: that process takes one CPU, redis-server most of the
// other; a third busy process adds run-queue waits to every round trip); 2:
// the Worker in a child process (forked), producers here. --add-mode bulk:
// one addBulk of up to --batch jobs in flight per producer; add: Queue.add,
// up to --add-depth unanswered per producer. --rate R paces the adds at R
// jobs/s in all (0: as fast as the window lets them): a lateness figure wants
// a rate below the maximum, or it measures the window's backlog.
//
// Counted between the warm-up's end and the end: lifecycles (Worker
// 'completed' events), adds (jobs whose add was answered), Redis commands
// (INFO commandstats deltas: every command Redis ran, those inside scripts
// included), the requests the clients sent (ioredis commands, scripts by name:
// a script call is one), CPU of the node processes and of redis-server
// (/proc/PID/stat, the PID from INFO server), the machine's other busy CPU
// (/proc/stat), and with --delay > 0 lateness = processedOn - (timestamp +
// delay) of the jobs completed (BullMQ's fields, both Date.now() here).
//
// Keys: BullMQ prefix "dqbench-bullmq-<pid>-<random>", so a shared Redis only
// ever sees (and loses at the end: obliterate, then UNLINK of what matches the
// prefix) keys of this run. One JSON object on stdout; exit 1 on errors.
'use strict';

const { fork } = require('child_process');
const crypto = require('crypto');
const fs = require('fs');
const os = require('os');
const IORedis = require('ioredis');

// --- options ---------------------------------------------------------------------
const defaults = {
  host: '127.0.0.1', port: 6379, seconds: 10, warmup: 2, concurrency: 50,
  producers: 2, body: 100, delay: 0, 'add-mode': 'bulk', batch: 50, 'add-depth': 64,
  window: 1000, processes: 1, rate: 0, 'drain-seconds': 15, prefix: '', queue: 'lifecycle',
};
function parseArgs(argv) {
  const o = { ...defaults };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) usage(`unexpected argument ${a}`);
    const k = a.slice(2);
    if (!(k in defaults) && k !== 'role') usage(`unknown option ${a}`);
    if (i + 1 >= argv.length) usage(`${a} needs a value`);
    const v = argv[++i];
    o[k] = typeof defaults[k] === 'number' ? Number(v) : v;
    if (typeof defaults[k] === 'number' && !Number.isFinite(o[k])) usage(`bad number for ${a}`);
  }
  if (!['add', 'bulk'].includes(o['add-mode'])) usage('--add-mode is add or bulk');
  if (![1, 2].includes(o.processes)) usage('--processes is 1 or 2');
  if (o.producers < 1 || o.concurrency < 1 || o.window < 1 || o.seconds <= 0) usage('bad sizes');
  return o;
}
function usage(msg) {
  process.stderr.write(`lifecycle.js: ${msg}\n`);
  process.exit(2);
}

// --- counting the requests the clients send ----------------------------------------
// Every ioredis command (pipelines included) goes through Redis#sendCommand;
// scripts are EVALSHA <sha> (EVAL <lua> after a NOSCRIPT), named here by the
// defineCommand that BullMQ registered them with.
const sent = new Map();
let counting = false;
const scriptBySha = new Map();
const scriptByLua = new Map();
{
  const defineCommand = IORedis.prototype.defineCommand;
  IORedis.prototype.defineCommand = function (name, def) {
    if (def && typeof def.lua === 'string' && !scriptByLua.has(def.lua)) {
      scriptByLua.set(def.lua, name);
      scriptBySha.set(crypto.createHash('sha1').update(def.lua).digest('hex'), name);
    }
    return defineCommand.call(this, name, def);
  };
  const sendCommand = IORedis.prototype.sendCommand;
  IORedis.prototype.sendCommand = function (command, stream, node) {
    if (counting) {
      let name = command.name;
      if (name === 'evalsha' || name === 'eval') {
        const a0 = command.args && command.args[0];
        const s = typeof a0 === 'string'
          ? (name === 'evalsha' ? scriptBySha.get(a0) : scriptByLua.get(a0)) : undefined;
        name = `${name} ${s || '?'}`;
      }
      sent.set(name, (sent.get(name) || 0) + 1);
    }
    return sendCommand.call(this, command, stream, node);
  };
}
const { Queue, Worker } = require('bullmq');

const cpuNow = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1e6; };
const connection = o => ({ host: o.host, port: o.port, maxRetriesPerRequest: null });

// --- the worker side (in this process or in the child) ------------------------------
// hooks: onDone(n) called as jobs complete. Lateness samples and the counters
// cover only what happens between start() and stop().
function makeWorker(o, hooks) {
  const st = { measuring: false, late: [], procLate: [], failed: 0, firstError: null, cpu0: 0 };
  const worker = new Worker(o.queue, async job => {
    // (job.delay is 0 once BullMQ has promoted a delayed job; opts keep it)
    const delay = job.opts && job.opts.delay;
    if (st.measuring && delay > 0) {
      const due = job.timestamp + delay;
      st.late.push(job.processedOn - due);
      st.procLate.push(Date.now() - due);
    }
  }, { connection: connection(o), prefix: o.prefix, concurrency: o.concurrency });
  worker.on('completed', () => hooks.onDone(1));
  worker.on('failed', (job, err) => {
    st.failed++;
    if (!st.firstError) st.firstError = String(err && err.message);
  });
  worker.on('error', err => {
    st.failed++;
    if (!st.firstError) st.firstError = String(err && err.message);
  });
  return {
    ready: () => worker.waitUntilReady(),
    start() { st.measuring = true; counting = true; sent.clear(); st.cpu0 = cpuNow(); },
    stop() {
      st.measuring = false; counting = false;
      return {
        cpu_s: cpuNow() - st.cpu0, late: st.late, procLate: st.procLate,
        sent: Object.fromEntries(sent), failed: st.failed, firstError: st.firstError,
      };
    },
    close: () => worker.close(),
  };
}

// Child (--processes 2): the Worker; reports completions every 5 ms.
async function child(o) {
  let pending = 0;
  const w = makeWorker(o, { onDone: n => { pending += n; } });
  const tick = setInterval(() => {
    if (pending) { process.send({ t: 'done', n: pending }); pending = 0; }
  }, 5);
  process.on('disconnect', () => process.exit(1));  // the parent is gone
  process.on('message', async m => {
    if (m.t === 'start') w.start();
    else if (m.t === 'stop') process.send({ t: 'stats', s: w.stop() });
    else if (m.t === 'close') {
      await w.close();
      clearInterval(tick);
      if (pending) process.send({ t: 'done', n: pending });
      process.send({ t: 'closed' }, () => process.exit(0));
    }
  });
  await w.ready();
  process.send({ t: 'ready' });
}

// --- Redis-side measures ------------------------------------------------------------
function parseCommandstats(text) {
  const m = new Map();
  for (const line of text.split('\n')) {
    const r = /^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/.exec(line.trim());
    if (r) m.set(r[1], { calls: Number(r[2]), usec: Number(r[3]) });
  }
  return m;
}
function infoField(text, field) {
  const r = new RegExp(`^${field}:(.*)$`, 'm').exec(text);
  return r ? r[1].trim() : null;
}
function procCpu(pid) {  // user + system seconds of a local process, or null
  try {
    const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = f.slice(f.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;  // CLK_TCK is 100 on Linux
  } catch (e) { return null; }
}
function machineCpu() {  // [busy, all] jiffies of all CPUs
  const v = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const all = v.reduce((a, b) => a + b, 0);
  return [all - v[3] - v[4], all];
}
function quantile(sorted, q) {
  if (!sorted.length) return null;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}
function latenessSummary(a) {
  const s = Float64Array.from(a).sort();
  return {
    count: s.length, early: s.filter(x => x < 0).length,
    p50_ms: quantile(s, 0.5), p90_ms: quantile(s, 0.9), p99_ms: quantile(s, 0.99),
    p999_ms: quantile(s, 0.999), max_ms: s.length ? s[s.length - 1] : null,
  };
}
// UNLINK every key under the prefix; how many there were.
async function removeKeys(client, prefix) {
  let n = 0;
  let cursor = '0';
  do {
    const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length) { n += keys.length; await client.unlink(...keys); }
  } while (cursor !== '0');
  return n;
}
const r2 = x => (x == null ? null : Math.round(x * 100) / 100);
const sleep = ms => new Promise(r => setTimeout(r, ms));

// --- the coordinator: producers, timing, results ---------------------------------------
async function main(o) {
  const hard = setTimeout(() => {
    process.stderr.write('lifecycle.js: run overran its time limit\n');
    process.exit(1);
  }, (o.warmup + o.seconds + o['drain-seconds'] + 60) * 1000);
  hard.unref();
  if (!o.prefix) o.prefix = `dqbench-bullmq-${process.pid}-${crypto.randomBytes(4).toString('hex')}`;

  const admin = new IORedis(connection(o));  // INFO, and the cleanup at the end
  const serverInfo = await admin.info('server');
  const redisPid = Number(infoField(serverInfo, 'process_id'));
  const redisVersion = infoField(serverInfo, 'redis_version');
  let w = null;     // the Worker's handle, here (--processes 1)
  let kid = null;   // or the child process running it
  // Stopped early (SIGTERM, SIGINT): the keys of this run still go (at most 5 s).
  for (const sig of ['SIGTERM', 'SIGINT']) {
    process.once(sig, () => {
      process.stderr.write(`lifecycle.js: ${sig}, removing the keys under ${o.prefix}\n`);
      if (kid) kid.kill();
      setTimeout(() => process.exit(1), 5000).unref();
      const cleaner = new IORedis(connection(o));
      removeKeys(cleaner, o.prefix).finally(() => process.exit(1));
    });
  }

  let outstanding = 0;   // added (or being added) and not completed
  let completed = 0;
  let measuring = false;
  let lifecycles = 0;
  let adds = 0;
  let stopping = false;
  const errors = { add: 0, first: null };
  const noteError = e => { errors.add++; if (!errors.first) errors.first = String(e && e.message); };

  const producers = [];
  const perWindow = Math.max(1, Math.floor(o.window / o.producers));
  const body = 'x'.repeat(o.body);
  const jobOpts = o.delay > 0 ? { removeOnComplete: true, delay: o.delay } : { removeOnComplete: true };
  for (let i = 0; i < o.producers; i++) {
    producers.push({ q: new Queue(o.queue, { connection: connection(o), prefix: o.prefix }), inflight: 0, out: 0 });
  }
  // A producer adds while its share of the window has room: single adds, at
  // most --add-depth unanswered (ioredis pipelines them on its connection), or
  // one addBulk of up to --batch jobs at a time (one pipeline of scripts).
  // With --rate, adds spend credits that a 2 ms timer hands out.
  let credits = o.rate > 0 ? 0 : Infinity;
  if (o.rate > 0) {
    let last = process.hrtime.bigint();
    setInterval(() => {
      const now = process.hrtime.bigint();
      credits = Math.min(credits + (Number(now - last) / 1e9) * o.rate, Math.max(o.batch, o.rate / 50));
      last = now;
      for (const p of producers) pump(p);
    }, 2).unref();
  }
  function pump(p) {
    if (stopping) return;
    if (o['add-mode'] === 'add') {
      while (p.out < perWindow && p.inflight < o['add-depth'] && credits >= 1) {
        credits--;
        p.out++; p.inflight++; outstanding++;
        p.q.add('j', body, jobOpts).then(() => {
          if (measuring) adds++;
        }, noteError).finally(() => { p.inflight--; pump(p); });
      }
    } else if (p.inflight === 0 && p.out < perWindow && credits >= 1) {
      const n = Math.min(o.batch, perWindow - p.out, Math.floor(credits));
      credits -= n;
      const jobs = new Array(n);
      for (let k = 0; k < n; k++) jobs[k] = { name: 'j', data: body, opts: jobOpts };
      p.out += n; p.inflight = n; outstanding += n;
      p.q.addBulk(jobs).then(() => {
        if (measuring) adds += n;
      }, noteError).finally(() => { p.inflight = 0; pump(p); });
    }
  }
  // Completions free room in the windows, producer by producer in turn (jobs
  // are not told apart: the window is what matters).
  let turn = 0;
  function onDone(n) {
    completed += n;
    outstanding -= n;
    if (measuring) lifecycles += n;
    for (let k = 0; k < n; k++) {
      for (let tries = 0; tries < producers.length; tries++) {
        const p = producers[turn];
        turn = (turn + 1) % producers.length;
        if (p.out > 0) { p.out--; break; }
      }
    }
    for (const p of producers) pump(p);
  }

  // The worker, here or in a child.
  const waiters = {};
  const waitFor = t => new Promise(res => { waiters[t] = res; });
  if (o.processes === 1) {
    w = makeWorker(o, { onDone });
    await w.ready();
  } else {
    const args = [];
    for (const k of Object.keys(defaults)) args.push(`--${k}`, String(o[k]));
    kid = fork(__filename, [...args, '--role', 'worker'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    kid.on('message', m => {
      if (m.t === 'done') onDone(m.n);
      else if (waiters[m.t]) { const f = waiters[m.t]; delete waiters[m.t]; f(m); }
    });
    kid.on('exit', code => {
      if (!stopping) { process.stderr.write(`lifecycle.js: worker process exited (${code})\n`); process.exit(1); }
    });
    await waitFor('ready');
  }
  await Promise.all(producers.map(p => p.q.waitUntilReady()));

  for (const p of producers) pump(p);
  await sleep(o.warmup * 1000);

  // The measured window.
  const cs0 = parseCommandstats(await admin.info('commandstats'));
  const rcpu0 = procCpu(redisPid);
  const m0 = machineCpu();
  const cpu0 = cpuNow();
  if (w) w.start(); else kid.send({ t: 'start' });
  counting = true; sent.clear();
  measuring = true;
  const t0 = process.hrtime.bigint();
  const load0 = os.loadavg()[0];
  await sleep(o.seconds * 1000);
  measuring = false;
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  counting = false;
  const producerSent = Object.fromEntries(sent);
  const cpuProducers = cpuNow() - cpu0;
  const ws = w ? w.stop() : (kid.send({ t: 'stop' }), (await waitFor('stats')).s);
  const rcpu1 = procCpu(redisPid);
  const m1 = machineCpu();
  const cs1 = parseCommandstats(await admin.info('commandstats'));

  // Drain what is outstanding, close, remove every key of this run.
  stopping = true;
  const drainEnd = Date.now() + o['drain-seconds'] * 1000;
  while (outstanding > 0 && Date.now() < drainEnd) await sleep(20);
  const leftOutstanding = outstanding;
  if (w) await w.close();
  else { kid.send({ t: 'close' }); await waitFor('closed'); }
  await producers[0].q.obliterate({ force: true }).catch(noteError);
  await Promise.all(producers.map(p => p.q.close()));
  const stray = await removeKeys(admin, o.prefix);
  await admin.quit();

  // Results.
  const deltas = [];
  for (const [cmd, v1] of cs1) {
    if (cmd === 'info') continue;  // this script's own INFO
    const v0 = cs0.get(cmd) || { calls: 0, usec: 0 };
    if (v1.calls > v0.calls) deltas.push({ cmd, calls: v1.calls - v0.calls, usec: v1.usec - v0.usec });
  }
  deltas.sort((a, b) => b.calls - a.calls);
  const redisCalls = deltas.reduce((s, d) => s + d.calls, 0);
  const scriptCalls = deltas.filter(d => d.cmd === 'evalsha' || d.cmd === 'eval')
    .reduce((s, d) => s + d.calls, 0);
  const clientSent = {};
  // (one process: the Worker's counts are the same map as the producers')
  for (const src of o.processes === 1 ? [producerSent] : [producerSent, ws.sent]) {
    for (const [k, v] of Object.entries(src)) clientSent[k] = (clientSent[k] || 0) + v;
  }
  const clientTotal = Object.values(clientSent).reduce((s, v) => s + v, 0);
  const perLc = x => (lifecycles ? Math.round((x / lifecycles) * 1000) / 1000 : null);
  const rcpu = rcpu0 != null && rcpu1 != null ? rcpu1 - rcpu0 : null;
  // All CPUs' busy time over the window, in CPUs (2 = both busy), and what of
  // it was neither redis-server nor these node processes: other work on the machine.
  const machineUtil = ((m1[0] - m0[0]) / Math.max(1, m1[1] - m0[1])) * os.cpus().length;
  const ours = ((rcpu || 0) + cpuProducers + (o.processes === 1 ? 0 : ws.cpu_s)) / wall;

  const result = {
    lifecycles_per_s: Math.round(lifecycles / wall),
    adds_per_s: Math.round(adds / wall),
    lifecycles, adds, wall_s: r2(wall),
    redis_commands_per_lifecycle: perLc(redisCalls),
    redis_scripts_per_lifecycle: perLc(scriptCalls),
    client_requests_per_lifecycle: perLc(clientTotal),
    top_redis_commands: deltas.slice(0, 12).map(d => ({
      cmd: d.cmd, per_lifecycle: perLc(d.calls), usec_per_call: r2(d.usec / d.calls),
    })),
    redis_commands: Object.fromEntries(deltas.map(d => [d.cmd, perLc(d.calls)])),
    client_requests: Object.fromEntries(Object.entries(clientSent).sort((a, b) => b[1] - a[1])
      .map(([k, v]) => [k, perLc(v)])),
    redis_cpu_s: r2(rcpu),
    redis_cpu_util: rcpu == null ? null : r2(rcpu / wall),
    redis_cpu_us_per_lifecycle: rcpu == null || !lifecycles ? null : r2((rcpu * 1e6) / lifecycles),
    node_cpu_s: o.processes === 1 ? { all: r2(cpuProducers) }
      : { producers: r2(cpuProducers), worker: r2(ws.cpu_s) },
    node_cpu_util: o.processes === 1 ? { all: r2(cpuProducers / wall) }
      : { producers: r2(cpuProducers / wall), worker: r2(ws.cpu_s / wall) },
    machine_cpu_util: r2(machineUtil),
    other_cpu_util: r2(Math.max(0, machineUtil - ours)),
    lateness: o.delay > 0 ? latenessSummary(ws.late) : null,
    lateness_processor_start: o.delay > 0 ? latenessSummary(ws.procLate) : null,
    errors: errors.add + ws.failed,
    first_error: errors.first || ws.firstError,
    left_outstanding: leftOutstanding,
    keys_removed_after_obliterate: stray,
    seconds: o.seconds, warmup_s: o.warmup, concurrency: o.concurrency, producers: o.producers,
    processes: o.processes, add_mode: o['add-mode'], batch: o['add-mode'] === 'bulk' ? o.batch : null,
    add_depth: o['add-mode'] === 'add' ? o['add-depth'] : null, window: o.window, body: o.body,
    rate: o.rate || null,
    delay_ms: o.delay, prefix: o.prefix,
    load_average_at_start: r2(load0),
    versions: {
      node: process.version,
      bullmq: require('bullmq/package.json').version,
      ioredis: require('ioredis/package.json').version,
      redis: redisVersion,
    },
  };
  process.stdout.write(JSON.stringify(result) + '\n');
  process.exit(result.errors || leftOutstanding ? 1 : 0);
}

const opts = parseArgs(process.argv.slice(2));
const run = opts.role === 'worker' ? child(opts) : main(opts);
run.catch(e => {
  process.stderr.write(`lifecycle.js: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
