// Withdrawing a waiting reserve, and closing the client, when the network
// misbehaves: a reply carrying jobs that crosses the withdrawal (its jobs
// are given back before reserve() rejects, even when close() follows at
// once); calls made just before close() are still written; a server host
// that vanished silently (no reply, no FIN, no RST) holds a withdrawal, and
// so a worker's stop, no longer than requestTimeoutMs.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { Client, Worker } from '../index.js';
import { poll, startWithClient } from './support/servers.mjs';

let seq = 0;
const topicName = () => `node.withdraw.${process.pid}.${++seq}`;

// A TCP proxy to `port`. On a connection that sent a RESERVE, what the
// server answers is held back until the client shuts down its sending side
// (FIN), then passed on: the reserve's reply crosses the withdrawal.
// Everything else passes through as it comes.
async function startCrossingProxy(port) {
  const sockets = new Set();
  const proxy = { held: 0 };
  const srv = net.createServer({ allowHalfOpen: true }, down => {
    const up = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    sockets.add(down);
    sockets.add(up);
    let holding = false;
    let held = [];
    down.on('data', chunk => {
      if (chunk.includes('\r\nRESERVE\r\n')) holding = true;
      up.write(chunk);
    });
    up.on('data', chunk => {
      if (holding) {
        held.push(chunk);
        proxy.held++;
      } else {
        down.write(chunk);
      }
    });
    down.on('end', () => {  // the client's FIN: the held reply goes now, then the FIN on
      holding = false;
      for (const c of held) down.write(c);
      held = [];
      up.end();
    });
    up.on('end', () => down.end());
    for (const s of [up, down]) {
      s.on('error', () => { up.destroy(); down.destroy(); });
      s.on('close', () => sockets.delete(s));
    }
  });
  return listenOnLoopback(srv, sockets, proxy);
}

// A server host gone silent: accepts, reads, never answers, never closes
// (not even after the client's FIN). Only AUTH, should one come, is
// answered, so that a connection opens.
async function startSilentServer() {
  const sockets = new Set();
  const silent = { received: '' };
  const srv = net.createServer({ allowHalfOpen: true }, sock => {
    sockets.add(sock);
    sock.setEncoding('utf8');
    sock.on('data', chunk => {
      silent.received += chunk;
      if (chunk.includes('\r\nAUTH\r\n') || chunk.includes('\r\nHELLO\r\n')) sock.write('+OK\r\n');
    });
    sock.on('error', () => {});
    sock.on('close', () => sockets.delete(sock));
  });
  return listenOnLoopback(srv, sockets, silent);
}

// Starts `srv` on a free loopback port; resolves with `into`, given the
// `address` and a `close()` that destroys `sockets`, then closes `srv`.
async function listenOnLoopback(srv, sockets, into) {
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  into.address = `127.0.0.1:${srv.address().port}`;
  into.close = async () => {
    for (const s of sockets) s.destroy();
    srv.close();
    await once(srv, 'close');
  };
  return into;
}

// How a promise settles within `ms`: 'resolved', its error, or `late`.
async function within(p, ms, late) {
  let timer;
  const r = await Promise.race([
    p.then(() => 'resolved', err => err),
    new Promise(resolve => { timer = setTimeout(resolve, ms, late); }),
  ]);
  clearTimeout(timer);
  return r;
}

describe('withdrawal and close', () => {
  let server;
  let direct;  // a client straight to the server, to look
  let stop;
  before(async () => { ({ server, client: direct, stop } = await startWithClient()); });
  after(() => stop());

  test('jobs of a reply that crosses the withdrawal are given back before reserve() rejects, close() right after', async () => {
    const t = topicName();
    const a = await direct.add(t, 'crosses the FIN');
    const proxy = await startCrossingProxy(server.port);
    const client = new Client({ servers: proxy.address });
    try {
      const ac = new AbortController();
      const reserving = client.reserve(t, { wait: '10s', count: 5, signal: ac.signal });
      await poll(() => proxy.held > 0, 5000, 'the reserve reply to be held back');
      assert.equal((await direct.get(a.id)).state, 'reserved');
      ac.abort(new Error('stopping'));
      await assert.rejects(reserving, /stopping/);
      await client.close();  // as an idle worker's run() and then close() do
      // Given back by now: ready, the attempt not counted.
      const job = await direct.get(a.id);
      assert.deepEqual([job.state, job.attempts], ['ready', 0]);
    } finally {
      await client.close();
      await proxy.close();
    }
  });

  test('a worker stopped while the reply crosses the withdrawal gives its jobs back before stop() resolves', async () => {
    const t = topicName();
    const proxy = await startCrossingProxy(server.port);
    const client = new Client({ servers: proxy.address });
    try {
      const worker = new Worker(client, { concurrency: 4 });
      const handled = [];
      worker.handle(t, async job => { handled.push(job.id); });
      await worker.start();
      await poll(async () => (await direct.topicStats(t)).waiting === 1, 5000, 'the reserve to wait');
      const ids = [(await direct.add(t, 'one')).id, (await direct.add(t, 'two')).id];
      await poll(() => proxy.held > 0, 5000, 'the reserve reply to be held back');
      await worker.stop({ drain: '30s' });
      await client.close();
      assert.deepEqual(handled, []);
      for (const id of ids) {
        const job = await direct.get(id);
        assert.deepEqual([job.state, job.attempts], ['ready', 0], id);
      }
    } finally {
      await client.close();
      await proxy.close();
    }
  });

  test('a call made just before close() is still written, and answered', async () => {
    const t = topicName();
    const client = new Client({ servers: server.address });
    try {
      await client.ping();  // the shared connection is open: the add goes into this tick's write
      const adding = client.add(t, 'sent before the close');
      await client.close();
      const a = await adding;
      assert.equal((await direct.get(a.id)).topic, t);
    } finally {
      await client.close();
    }
  });
});

describe('a server host gone silent', () => {
  let silent;
  before(async () => { silent = await startSilentServer(); });
  after(async () => { await silent.close(); });

  test('a withdrawn reserve settles within requestTimeoutMs of the abort', async () => {
    const client = new Client({ servers: silent.address, requestTimeoutMs: 300 });
    try {
      const ac = new AbortController();
      const reserving = client.reserve('silent.reserve', { wait: '30s', signal: ac.signal });
      const seen = silent.received.length;
      await poll(() => silent.received.indexOf('RESERVE', seen) >= 0, 5000, 'the RESERVE to arrive');
      const t0 = performance.now();
      ac.abort(new Error('withdrawn'));
      const r = await within(reserving, 3000, 'still waiting 3 s after the abort');
      const took = performance.now() - t0;
      assert.equal(r instanceof Error ? r.message : r, 'withdrawn');
      assert.ok(took >= 250 && took < 1500, `${took} ms`);
    } finally {
      await client.close();
    }
  });

  test('worker.stop() returns within about requestTimeoutMs', async () => {
    const client = new Client({ servers: silent.address, requestTimeoutMs: 300 });
    try {
      const worker = new Worker(client, { reserveWait: '30s' });
      worker.handle('silent.worker', async () => {});
      const seen = silent.received.length;
      await worker.start();
      await poll(() => silent.received.indexOf('RESERVE', seen) >= 0, 5000, 'the RESERVE to arrive');
      const t0 = performance.now();
      const r = await within(worker.stop({ drain: '30s' }), 3000, 'not stopped 3 s after stop()');
      const took = performance.now() - t0;
      assert.equal(r, 'resolved');
      assert.ok(took < 1500, `${took} ms`);
    } finally {
      await client.close();
    }
  });
});
