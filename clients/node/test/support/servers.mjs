// Real servers for the tests: `delayq serve` (DELAYQ_BINARY, else
// <repo>/build/bin/delayq) on free loopback ports, and redis-server for the
// failover tests. Each is stopped by its PID: SIGTERM, then SIGKILL after a
// deadline. Also: a server with a client on it, and a program run with its
// output captured. (node --test also loads this file as a test file: it has
// none.)
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '../../index.js';

const here = path.dirname(fileURLToPath(import.meta.url));
export const clientDir = path.resolve(here, '../..');
export const repoDir = path.resolve(clientDir, '../..');
export const binary = process.env.DELAYQ_BINARY || path.join(repoDir, 'build/bin/delayq');
export const REDIS_SERVER = process.env.REDIS_SERVER || '/usr/bin/redis-server';

const started = new Set();  // processes to stop when the test process exits
process.on('exit', () => {
  for (const child of started) {
    try { child.kill('SIGKILL'); } catch { /* gone */ }
  }
});

/** A temporary directory, removed by the returned function. */
export function tempDir(prefix = 'delayq-node-test-') {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * Starts `delayq serve` on free ports and resolves once it serves RESP.
 * `tls`: its --tls-cert-file and --tls-key-file, and --tls-ca-cert-file
 * (mutual TLS) when `caFile` is given.
 * @param {{store?: string, dataDir?: string, redis?: string, args?: string[], env?: object,
 *   tls?: {certFile: string, keyFile: string, caFile?: string}}} [o]
 */
export async function startDelayq(o = {}) {
  const store = o.store ?? 'memory';
  const args = ['serve', '--http-port', '0', '--resp-port', '0', '--store', store, '--log-level', 'info'];
  let temp = null;
  if (store === 'embedded') {
    let dataDir = o.dataDir;
    if (!dataDir) {
      temp = tempDir('delayq-node-data-');
      dataDir = temp.dir;
    }
    args.push('--data-dir', dataDir);
  }
  if (store === 'redis') args.push('--redis', o.redis, '--redis-prefix', o.prefix ?? `nodetest${process.pid}`);
  if (o.tls) {
    args.push('--tls-cert-file', o.tls.certFile, '--tls-key-file', o.tls.keyFile);
    if (o.tls.caFile) args.push('--tls-ca-cert-file', o.tls.caFile);
  }
  args.push(...(o.args ?? []));
  const env = { ...process.env, ...(o.env ?? {}) };
  for (const k of Object.keys(env)) if (k.startsWith('DELAYQ_') && k !== 'DELAYQ_BINARY' && !(o.env && k in o.env)) delete env[k];
  const child = spawn(binary, args, { stdio: ['ignore', 'ignore', 'pipe'], env });
  started.add(child);
  let log = '';
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`delayq serve did not start in 10 s:\n${log}`)), 10_000);
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', chunk => {
      log += chunk;
      const m = /serving RESP on 127\.0\.0\.1:(\d+)/.exec(log);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    child.on('exit', code => {
      clearTimeout(timer);
      reject(new Error(`delayq serve exited (${code}) before serving:\n${log}`));
    });
  });
  child.stderr.on('data', () => {});  // keep draining its log
  const server = {
    port,
    address: `127.0.0.1:${port}`,
    pid: child.pid,
    child,
    log: () => log,
    exited: once(child, 'exit'),
    /** SIGTERM, then SIGKILL after `ms`. */
    async stop(ms = 5000) {
      await stopProcess(child, ms);
      started.delete(child);
      temp?.remove();
    },
    /** SIGKILL at once. */
    async kill() {
      await stopProcess(child, 0);
      started.delete(child);
    },
  };
  return server;
}

/**
 * startDelayq(o) and a Client on it; stop() closes the client, then stops
 * the server.
 */
export async function startWithClient(o = {}) {
  const server = await startDelayq(o);
  const client = new Client({ servers: server.address });
  return {
    server,
    client,
    async stop() {
      await client.close();
      await server.stop();
    },
  };
}

/**
 * Spawns `command` with `args`, stdin ignored; what it writes is collected:
 * `out()`, `err()`. `exited` resolves with [code, signal].
 * @param {{cwd?: string, env?: object}} [o]
 */
export function spawnCapturing(command, args, o = {}) {
  const child = spawn(command, args, { ...o, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', c => { out += c; });
  child.stderr.on('data', c => { err += c; });
  return { child, out: () => out, err: () => err, exited: once(child, 'exit') };
}

async function stopProcess(child, ms) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill(ms === 0 ? 'SIGKILL' : 'SIGTERM');
  const timer = ms === 0 ? null : setTimeout(() => child.kill('SIGKILL'), ms);
  await exited;
  if (timer) clearTimeout(timer);
}

/** A free loopback port (bound, then let go). */
export async function freePort() {
  const srv = net.createServer();
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const { port } = srv.address();
  srv.close();
  await once(srv, 'close');
  return port;
}

/** redis-server on a free loopback port, no persistence. */
export async function startRedis() {
  const port = await freePort();
  const child = spawn(REDIS_SERVER, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  started.add(child);
  let log = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', c => { log += c; });
  await poll(async () => {
    if (child.exitCode !== null) throw new Error(`redis-server exited:\n${log}`);
    return log.includes('Ready to accept connections');
  }, 10_000, 'redis-server to start');
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    async stop() {
      await stopProcess(child, 5000);
      started.delete(child);
    },
  };
}

/**
 * Polls `check` (sync or async) until it returns a truthy value, every
 * `every` ms, for at most `ms`; resolves with that value.
 */
export async function poll(check, ms = 5000, what = 'a condition', every = 10) {
  const deadline = performance.now() + ms;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (performance.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise(r => setTimeout(r, every));
  }
}
