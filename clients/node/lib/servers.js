// ServerSet: the delayq servers a Client speaks to, its connections to each
// (ioredis, RESP), and the failover rule every request follows — the rule
// of the C++ network client (src/client/server_set.h, remote_queue.h).
//
// A request goes to the server that answered last (the first one at start)
// and moves on through the list, in order, when that one cannot take it:
//  - a connect that fails (refused, timed out, AUTH refused) marks the
//    server down: later requests skip it until its backoff (50 ms doubling
//    to 2 s, reset by a successful connect) lets one attempt through.
//    Nothing was sent, so every request moves on.
//  - a connection that breaks after the request was written (reset, closed,
//    no reply within requestTimeoutMs) marks the server down too; the
//    request may or may not have run there. It moves on only when the caller
//    said it may (ALWAYS); otherwise it fails with UnavailableError "... the
//    request was sent and may have run" (UNTIL_SENT).
//  - an -UNAVAILABLE reply moves an ALWAYS request on as well (but the last
//    server's answer is returned as it is).
// When no server takes it: UnavailableError "no delayq server answered:
// 127.0.0.1:7701 (connect ECONNREFUSED ...), ...", or UnauthorizedError when
// a server refused the token.
//
// Connections. Each server has one shared connection for every request
// that answers at once: replies come back in the order the commands were
// sent, so any number of callers pipeline on it. A RESERVE that waits parks
// its connection on the server (it holds back what follows it), so each
// waiting reserve takes a connection of its own from a small pool per
// server (idleReserve), given back once answered.
//
// Commands. Each request is a Lean command handed to ioredis's
// sendCommand: ioredis keeps it in its queue, parses the reply and hands it
// to resolve() or reject(), as it does its own Command; but a Lean has no
// Promise of its own (a Batch settles once for all the commands sent
// together), turns only the replies that are text into strings (job bodies
// stay Buffers), and writes its bytes into the connection's `sink`: every
// command made in one tick goes out in one write (flushOut, on the next
// tick), so callers that each send one command (a producer's adds, a
// batch's acks) share system calls and round trips. A Lean has the fields
// ioredis 5.11 reads of a command (the version is pinned in package.json;
// the tests run through it).
//
// ioredis is set up so that it never repeats a command by itself: no
// offline queue (a command is written at once or refused), no reconnect
// (retryStrategy returns null), no resend of unanswered commands. A
// connection that closes rejects what it still owes with a plain Error (not
// a ReplyError): that is a lost reply, and this file alone decides what to
// do with it. The shared connection's socketTimeout (requestTimeoutMs)
// destroys a connection owing replies that sends nothing back for that long.
import Redis from 'ioredis';
import { tlsReason } from './tls.js';
import {
  errorFromReply, InvalidArgumentError as InvalidServers, UnauthorizedError, UnavailableError, SHUTTING_DOWN,
} from './errors.js';

const { ReplyError } = Redis;

/** A request that may be repeated on the next server after a lost reply. */
export const ALWAYS = 1;
/** A request that moves on only while nothing was sent. */
export const UNTIL_SENT = 2;

const BACKOFF_INITIAL_MS = 50;
const BACKOFF_MAX_MS = 2000;
const MAX_IDLE_RESERVE_CONNECTIONS = 16;  // per server

export const DEFAULT_PORT = 7701;

// Command names in lower case: ioredis looks each one up in its flag tables
// several times per command, lower-casing it every time.
const LOWER = new Map();
function lower(name) {
  let l = LOWER.get(name);
  if (l === undefined) {
    l = name.toLowerCase();
    if (LOWER.size < 1000) LOWER.set(name, l);
  }
  return l;
}

/**
 * "a:7701,b:7701" or ["a:7701", "b"] into [{host, port}]; a missing port is 7701.
 * @param {string | string[]} servers
 */
export function parseServers(servers) {
  const parts = Array.isArray(servers) ? servers : String(servers).split(',');
  if (parts.length === 0) throw new InvalidServers('servers: give at least one host:port');
  return parts.map(raw => {
    const part = typeof raw === 'string' ? raw.trim() : raw;
    if (typeof part !== 'string' || part === '') {
      throw new InvalidServers(`servers: empty address in '${servers}' (expected host:port[,host:port...])`);
    }
    const colon = part.lastIndexOf(':');
    let host = part;
    let port = DEFAULT_PORT;
    if (colon >= 0 && !part.endsWith(']')) {
      host = part.slice(0, colon);
      const p = part.slice(colon + 1);
      port = /^\d{1,5}$/.test(p) ? Number(p) : NaN;
      if (!(port >= 1 && port <= 65535)) {
        throw new InvalidServers(`servers: bad address '${part}': the port must be 1-65535`);
      }
    }
    if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
    if (host === '') throw new InvalidServers(`servers: bad address '${part}': no host`);
    return { host, port };
  });
}

// When the next connect to a server may be tried: shared by its connections.
class Backoff {
  failing = false;  // the last connect failed, or a connection broke
  retryAt = 0;      // ms (performance.now()) before which no connect is tried
  delay = BACKOFF_INITIAL_MS;
  lastError = '';

  // 0 when a connect may be tried now (claiming the attempt while failing:
  // others wait meanwhile), else the ms left to wait.
  tryStart() {
    if (!this.failing) return 0;
    const now = performance.now();
    if (now < this.retryAt) return Math.ceil(this.retryAt - now);
    this.retryAt = now + this.delay;
    return 0;
  }
  failed(reason) {
    this.failing = true;
    this.retryAt = performance.now() + this.delay;
    this.delay = Math.min(this.delay * 2, BACKOFF_MAX_MS);
    this.lastError = reason;
  }
  succeeded() {
    this.failing = false;
    this.delay = BACKOFF_INITIAL_MS;
  }
}

// One ioredis connection to one server.
class Connection {
  /** @param {Server} server @param {boolean} shared */
  constructor(server, options, shared) {
    this.server = server;
    this.dead = false;
    // Bytes of the commands made this tick, written by flushOut: text, and
    // the pieces before it when some command was binary (a Buffer body).
    this.out = null;
    this.outBuffers = null;
    this.sink = {
      write: chunk => {
        if (typeof chunk === 'string') {
          this.out += chunk;
        } else {
          if (this.outBuffers === null) this.outBuffers = [];
          if (this.out !== '') this.outBuffers.push(Buffer.from(this.out, 'utf8'));
          this.out = '';
          this.outBuffers.push(chunk);
        }
      },
    };
    this.reason = '';  // why it closed, from ioredis's 'error' event
    this.redis = new Redis({
      host: server.host,
      port: server.port,
      lazyConnect: true,
      enableOfflineQueue: false,           // written now or refused: never sent later by itself
      retryStrategy: () => null,           // no reconnect: a lost connection is ours to handle
      autoResendUnfulfilledCommands: false,
      maxRetriesPerRequest: 0,
      enableReadyCheck: false,             // no INFO round trip on connect
      disableClientInfo: true,             // no CLIENT SETINFO either
      connectTimeout: options.connectTimeoutMs,
      // A waiting reserve's connection is silent for the whole wait: its
      // deadline is kept by the reserve itself.
      socketTimeout: shared ? options.requestTimeoutMs : undefined,
      keepAlive: 30_000,
      tls: options.tls,                    // {secureContext} (tls.js), or undefined: plain TCP
    });
    this.redis.on('error', err => { this.reason = options.tls ? tlsReason(err) : err.message; });
    this.redis.on('close', () => {
      // ioredis leaves the socketTimeout timer of replies owed armed after
      // a close (5 s that hold the process up; a TLS 1.3 server refusing
      // this client's certificate closes right after the first write).
      clearTimeout(this.redis.socketTimeoutTimer);
      this.dead = true;
      server.closed(this);
    });
  }

  async open(authToken) {
    try {
      await this.redis.connect();
    } catch (err) {
      this.dead = true;
      throw new UnavailableError(this.reason || err.message);
    }
    if (authToken) {
      const batch = new Batch(1);
      this.send({ name: 'AUTH', args: [authToken] }, batch, 0);
      await batch.promise;
      if (batch.kinds[0] !== OK) {
        this.close();
        if (batch.kinds[0] === LOST) throw new UnavailableError(this.why());
        const e = errorFromReply(batch.values[0].message);
        throw e.code === 'unauthorized' ? e : new UnauthorizedError(`AUTH refused: ${e.message}`);
      }
    }
  }

  get usable() { return !this.dead && this.redis.status === 'ready'; }

  // Writes `cmd` ({name, args}); its answer goes to batch slot `k`.
  send(cmd, batch, k) {
    if (this.out === null) {
      this.out = '';
      process.nextTick(this.flushOut);
    }
    this.redis.sendCommand(new Lean(cmd, batch, k), this.sink);
  }

  // Writes the commands sent this tick.
  flushOut = () => {
    const out = this.out;
    const bufs = this.outBuffers;
    this.out = null;
    this.outBuffers = null;
    // Written already (by close() or finish()), or dead: ioredis rejects
    // what it owes (lost replies).
    if (out === null || this.dead) return;
    if (bufs === null) {
      this.redis.stream.write(out);
    } else {
      if (out !== '') bufs.push(Buffer.from(out, 'utf8'));
      this.redis.stream.write(bufs.length === 1 ? bufs[0] : Buffer.concat(bufs));
    }
  };

  // Why the connection is gone, for messages.
  why() { return this.reason || 'connection closed'; }

  /** Closes it at once: replies still owed are lost. */
  destroy(reason) {
    if (reason && !this.reason) this.reason = reason;
    this.dead = true;
    this.redis.stream?.destroy();
  }
  /**
   * Closes it; what is owed may still be answered. Commands made this tick
   * and not yet written (flushOut runs on the next tick) are written first:
   * a call made before close() is sent, not lost.
   */
  close() {
    if (this.out !== null && this.usable) this.flushOut();
    this.dead = true;
    // (Not once closed: ioredis would arm a timer for a close that came already.)
    if (this.redis.status !== 'end' && this.redis.status !== 'close') this.redis.disconnect();
  }
  /**
   * Shuts down the sending side (FIN): the server takes a waiting reserve
   * as withdrawn, answers what it owes and closes.
   */
  finish() {
    // The reserve may still wait for this tick's write: written before the FIN.
    if (this.out !== null && this.usable) this.flushOut();
    if (this.redis.stream && !this.redis.stream.writableEnded) this.redis.stream.end();
  }
}

class Server {
  constructor(endpoint) {
    this.host = endpoint.host;
    this.port = endpoint.port;
    this.name = endpoint.host.includes(':') ? `[${endpoint.host}]:${endpoint.port}` : `${endpoint.host}:${endpoint.port}`;
    this.backoff = new Backoff();
    this.shared = null;        // Connection, usable or being opened
    this.opening = null;       // Promise<Connection> of the shared one being opened
    this.idleReserve = [];     // Connections for waiting reserves, free
    this.all = new Set();      // every open Connection (close() ends them)
  }
  closed(conn) {
    this.all.delete(conn);
    if (this.shared === conn) this.shared = null;
    const k = this.idleReserve.indexOf(conn);
    if (k >= 0) this.idleReserve.splice(k, 1);
  }
}

export class ServerSet {
  /**
   * @param {{host: string, port: number}[]} endpoints
   * @param {{authToken?: string, connectTimeoutMs: number, requestTimeoutMs: number,
   *   tls?: {secureContext: import('node:tls').SecureContext}}} options
   */
  constructor(endpoints, options) {
    this.options = options;
    this.servers = endpoints.map(e => new Server(e));
    this.preferred = 0;  // the server that answered last
    this.isClosed = false;
  }

  // A usable connection to server i: the open one, or a new one (unless the
  // server's backoff says to wait). Throws UnavailableError or
  // UnauthorizedError, nothing sent.
  async connection(i, shared) {
    const s = this.servers[i];
    if (this.isClosed) throw new UnavailableError('the client is closed');
    if (shared) {
      if (s.shared !== null && s.shared.usable) return s.shared;
      if (s.opening !== null) return s.opening;
    } else {
      while (s.idleReserve.length > 0) {
        const conn = s.idleReserve.pop();
        if (conn.usable) return conn;
      }
    }
    const wait = s.backoff.tryStart();
    if (wait > 0) {
      throw new UnavailableError(`unreachable, next connect attempt in ${wait} ms` +
        (s.backoff.lastError ? ` (last error: ${s.backoff.lastError})` : ''));
    }
    const conn = new Connection(s, this.options, shared);
    s.all.add(conn);
    const opened = conn.open(this.options.authToken).then(() => {
      s.backoff.succeeded();
      if (this.isClosed) {
        conn.close();
        throw new UnavailableError('the client is closed');
      }
      return conn;
    }, err => {
      s.all.delete(conn);
      s.backoff.failed(err.message);
      throw err;
    });
    if (!shared) return opened;
    s.opening = opened;
    s.shared = conn;
    try {
      return await opened;
    } catch (err) {
      if (s.shared === conn) s.shared = null;
      throw err;
    } finally {
      if (s.opening === opened) s.opening = null;
    }
  }

  // A connection broke with a request's reply owed: closed, server marked down.
  broken(conn) {
    conn.destroy();
    conn.server.backoff.failed(conn.why());
  }

  /**
   * Sends `cmds` ({name, args, raw?}) to one server, in one write, by the rule
   * above, and returns what each got: `replies[k]` is the reply, or the
   * DelayqError of an error reply (or of no server answering);
   * `repeated[k]` says an earlier attempt of it, on another server, may have
   * run (its reply was lost), or is null when none was repeated.
   * @returns {Promise<{replies: any[], repeated: boolean[] | null}>}
   */
  async exec(cmds, retry) {
    const replies = new Array(cmds.length);
    let repeated = null;
    let pending = cmds.length === 1 ? ONE : cmds.map((_, k) => k);
    let tried = '';
    let unauthorized = false;
    const n = this.servers.length;
    const first = this.preferred;
    for (let k = 0; k < n; k++) {
      const i = (first + k) % n;
      const s = this.servers[i];
      let conn;
      try {
        conn = s.shared !== null && s.shared.usable ? s.shared : await this.connection(i, true);
      } catch (err) {
        if (err instanceof UnauthorizedError) unauthorized = true;
        tried = note(tried, s, err.message);
        continue;
      }
      const batch = new Batch(pending.length);
      for (let j = 0; j < pending.length; j++) conn.send(cmds[pending[j]], batch, j);
      await batch.promise;
      let lost = null;        // indexes whose reply was lost
      let unavailable = null; // indexes answered -UNAVAILABLE, moved on
      for (let j = 0; j < pending.length; j++) {
        const idx = pending[j];
        const kind = batch.kinds[j];
        if (kind === OK) {
          replies[idx] = batch.values[j];
        } else if (kind === ERROR) {
          const e = errorFromReply(batch.values[j].message);
          replies[idx] = e;
          if (retry === ALWAYS && k + 1 < n && e.code === 'unavailable') (unavailable ??= []).push(idx);
        } else {
          (lost ??= []).push(idx);
        }
      }
      if (lost !== null) {
        const why = conn.why();
        this.broken(conn);
        if (retry === UNTIL_SENT) {
          for (const idx of lost) {
            replies[idx] = new UnavailableError(`delayq server ${s.name}: ${why}; the request was sent and may have run`);
          }
          return { replies, repeated };
        }
        tried = note(tried, s, why);
      } else if (unavailable !== null) {
        tried = note(tried, s, 'answered UNAVAILABLE');
      }
      const again = lost === null ? unavailable : unavailable === null ? lost : lost.concat(unavailable).sort((a, b) => a - b);
      if (again === null) {
        this.preferred = i;
        return { replies, repeated };
      }
      repeated ??= new Array(cmds.length).fill(false);
      for (const idx of again) repeated[idx] = true;
      pending = again;
    }
    const msg = tried;
    for (const idx of pending) {
      replies[idx] = unauthorized
        ? new UnauthorizedError(`no delayq server accepted: ${msg}`)
        : new UnavailableError(`no delayq server answered: ${msg}`);
    }
    return { replies, repeated };
  }

  /**
   * A RESERVE that waits, on a connection of its own: sent to one server,
   * moving on while nothing was sent; a server that answers "shutting
   * down" is marked down (its connections closed) and the reserve goes to
   * the next one for what is left of its wait. `build(waitMs)` makes the
   * command for a wait. Resolves with the raw reply (null: no job).
   * `signal` withdraws it: the sending side is shut down (FIN), the server
   * withdraws the reserve and closes; jobs already on their way are handed
   * to `giveBack` (which returns a promise settled once they are given back)
   * and, once that has settled, the promise rejects with the signal's
   * reason. So when the reserve has ended, its jobs are back on the server,
   * and a close() that follows cannot drop their UNRESERVE. The withdrawal
   * waits at most requestTimeoutMs for the server to answer or close (a
   * host gone silent would otherwise hold it for the whole wait).
   */
  async reserveWaiting(build, waitMs, signal, giveBack) {
    const deadline = performance.now() + waitMs;
    const n = this.servers.length;
    let tried = '';
    let unauthorized = false;
    let k = 0;
    let start = this.preferred;
    while (k < n) {
      signal?.throwIfAborted();
      const i = (start + k) % n;
      const s = this.servers[i];
      let conn;
      try {
        conn = await this.connection(i, false);
      } catch (err) {
        if (err instanceof UnauthorizedError) unauthorized = true;
        tried = note(tried, s, err.message);
        k++;
        continue;
      }
      if (signal?.aborted) {
        this.giveBackConnection(conn);
        signal.throwIfAborted();
      }
      const left = Math.max(0, Math.ceil(deadline - performance.now()));
      const cmd = build(left);
      const result = await waitOne(conn, cmd, left + this.options.requestTimeoutMs, this.options.requestTimeoutMs, signal);
      if (result.aborted) {
        if (result.value) await giveBack(result.value);
        throw signal.reason;
      }
      if (result.lost) {
        const why = conn.why();
        this.broken(conn);
        throw new UnavailableError(`delayq server ${s.name}: ${why}; the request was sent and may have run`);
      }
      if (result.error) {
        const e = errorFromReply(result.error.message);
        if (e.code === 'unavailable' && e.message.startsWith(SHUTTING_DOWN)) {
          this.goingAway(s, conn);
          if (k + 1 < n && deadline - performance.now() > 0) {
            tried = note(tried, s, 'shutting down');
            k++;
            continue;
          }
          throw new UnavailableError(`${e.message} (delayq server ${s.name})`);
        }
        this.giveBackConnection(conn);
        throw e;
      }
      this.giveBackConnection(conn);
      this.preferred = i;
      return result.value;
    }
    if (unauthorized) throw new UnauthorizedError(`no delayq server accepted: ${tried}`);
    throw new UnavailableError(`no delayq server answered: ${tried}`);
  }

  giveBackConnection(conn) {
    const s = conn.server;
    if (conn.usable && !this.isClosed && s.idleReserve.length < MAX_IDLE_RESERVE_CONNECTIONS) {
      s.idleReserve.push(conn);
    } else {
      conn.close();
    }
  }

  // The server said it is shutting down: its connections (which it is
  // closing) are closed now and it is marked down, so the next request
  // goes to the next server at once.
  goingAway(s, conn) {
    conn.destroy();
    for (const c of [...s.all]) c.close();
    s.backoff.failed(SHUTTING_DOWN);
  }

  // Commands already made are written before their connections close
  // (Connection#close); their replies may still come.
  close() {
    this.isClosed = true;
    for (const s of this.servers) {
      for (const c of [...s.all]) c.close();
      s.idleReserve.length = 0;
    }
  }
}

const ONE = [0];

// The list of servers tried, for "no delayq server answered: a (why), b (why)".
const note = (tried, s, why) => `${tried}${tried ? ', ' : ''}${s.name} (${why})`;

// How a command ended.
const OK = 0;     // a reply
const ERROR = 1;  // an error reply (a ReplyError)
const LOST = 2;   // no reply: the connection closed, or the command was refused unsent


// The answers of commands sent together: one promise for them all.
class Batch {
  constructor(n) {
    this.left = n;
    this.values = new Array(n);
    this.kinds = new Array(n);
    this.promise = new Promise(resolve => { this.done = resolve; });
  }
  settle(k, kind, value) {
    if (this.kinds[k] !== undefined) return;
    this.kinds[k] = kind;
    this.values[k] = value;
    if (--this.left === 0) this.done();
  }
}

// A command as ioredis 5.11's sendCommand, reply handler and queue
// flushes use one: name (lower case: ioredis lower-cases it for each of
// its flag lookups), args, toWritable, resolve, reject; isTraced so that
// sendCommand does not wrap a promise it does not have.
class Lean {
  constructor(cmd, batch, k) {
    this.name = lower(cmd.name);  // what ioredis reads; the command is sent as given (cmd.name)
    this.wire = cmd.name;
    this.args = cmd.args;
    this.raw = cmd.raw === true;  // the reply stays in Buffers (job bodies are bytes); else text
    this.batch = batch;
    this.k = k;
    this.isTraced = true;
    this.inTransaction = false;
    this.isResolved = false;
    this.promise = undefined;
  }
  toWritable() { return encode(this.wire, this.args); }
  resolve(reply) {
    this.isResolved = true;
    this.batch.settle(this.k, OK, this.raw ? reply : asText(reply));
  }
  reject(err) {
    this.batch.settle(this.k, err instanceof ReplyError ? ERROR : LOST, err);
  }
}

// RESP's multibulk form of a command: one string, or a Buffer when an
// argument is one.
function encode(name, args) {
  let out = `*${args.length + 1}\r\n$${name.length}\r\n${name}\r\n`;
  let bufs = null;
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (typeof a === 'string') {
      out += `$${Buffer.byteLength(a)}\r\n${a}\r\n`;
    } else if (Buffer.isBuffer(a)) {
      bufs ??= [];
      bufs.push(Buffer.from(`${out}$${a.length}\r\n`, 'utf8'), a);
      out = '\r\n';
    } else {
      const t = String(a);
      out += `$${t.length}\r\n${t}\r\n`;
    }
  }
  if (bufs === null) return out;
  bufs.push(Buffer.from(out, 'utf8'));
  return Buffer.concat(bufs);
}

// A reply read as text: Buffers (bulk and status replies) as UTF-8 strings.
function asText(reply) {
  if (Buffer.isBuffer(reply)) return reply.toString('utf8');
  if (Array.isArray(reply)) {
    for (let i = 0; i < reply.length; i++) reply[i] = asText(reply[i]);
  }
  return reply;
}

// One command on a connection of its own, with a deadline and a withdrawal.
// Resolves {value} | {error: ReplyError} | {lost: true} | {aborted, value?}.
// A withdrawal has a deadline of its own, `withdrawMs` from the abort: the
// server answers a FIN at once, so a connection still silent by then is
// taken as gone (as the C++, Python and Go clients do).
async function waitOne(conn, cmd, timeoutMs, withdrawMs, signal) {
  let aborted = false;
  let timer = setTimeout(() => conn.destroy(`no reply within ${timeoutMs} ms`), timeoutMs);
  const onAbort = () => {
    aborted = true;
    clearTimeout(timer);
    timer = setTimeout(() => conn.destroy(`no answer within ${withdrawMs} ms of the withdrawal`), withdrawMs);
    conn.finish();  // FIN: the server withdraws the reserve, answers what it owes, closes
  };
  signal?.addEventListener('abort', onAbort, { once: true });
  const batch = new Batch(1);
  conn.send(cmd, batch, 0);
  await batch.promise;
  clearTimeout(timer);
  signal?.removeEventListener('abort', onAbort);
  const kind = batch.kinds[0];
  const value = batch.values[0];
  if (aborted) {
    conn.close();
    return { aborted: true, value: kind === OK ? value : undefined };
  }
  if (kind === OK) return { value };
  if (kind === ERROR) return { error: value };
  return { lost: true };
}
