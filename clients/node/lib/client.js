// Client: every call of delayq's RESP API (docs/api.md §4) as a Promise,
// over one or more servers with the C++ network client's failover rules
// (servers.js says how a request moves between servers; this file says
// which requests may move after their reply was lost, and why that is safe):
//
//  - add: always, under the same id and the same idempotency key. The
//    client makes an id when none is given (32 hex digits: the wall-clock
//    ms, a counter and this client's random tag) and a key for every add
//    call (the tag and a counter), sent on every attempt of it. The server
//    remembers an applied (id, key) for its dedup window, so a retry whose
//    first attempt ran is answered as that attempt was, and the job is added
//    at most once. A retry that still meets `exists` (its first attempt did
//    not run, and another add of that id is live) counts as success when the
//    live job has our topic and body (read with GET).
//  - finish, release, touch, bury, unreserve with a receipt: a receipt names
//    one delivery, so a repeat acts on that delivery or fails. A repeated
//    finish answered not_found means the job is gone — what the first
//    attempt may have done — and counts as success; any other error of a
//    repeat gets " (after a lost reply: ...)" appended.
//  - get, peek, topics, stats, topicStats (reads); pause, resume (settings).
// Not repeated once written (UnavailableError "... may have run"): reserve
// (a lost reply may have reserved jobs for nobody; they come back after
// their TTR), delete, kick, kickTopic, command, and changes with FORCE in
// place of the receipt (by id alone, a repeat could act on another
// delivery).
import { randomBytes } from 'node:crypto';
import {
  DelayqError, ExistsError, InvalidArgumentError, NotFoundError, UnavailableError,
} from './errors.js';
import { ALWAYS, UNTIL_SENT, ServerSet, parseServers } from './servers.js';
import { tlsSettings } from './tls.js';
import { Delivery, Job, parseDeliveries, parseDelivery, parseJob, parseOk, parsePairs, malformed } from './codec.js';
import {
  checkId, checkIdempotencyKey, checkInt, checkReceipt, checkTopic, describe, toMs, toUnixMs,
  MAX_DELAY_MS, MAX_RESERVE_COUNT, MAX_RESERVE_TOPICS, MAX_U32, MAX_WAIT_MS,
} from './validate.js';

/** In place of a receipt: act on the job by id alone, whoever holds it. */
export const FORCE = Symbol('delayq.FORCE');

const DEFAULT_TTR_MS = 60_000;
const EMPTY = Object.freeze({});
const AFTER_REPEAT = ' (after a lost reply: the first attempt, on another server, may have done it)';
const PEEK_STATES = { ready: 'READY', delayed: 'DELAYED', buried: 'BURIED' };

export class Client {
  /**
   * @param {string | string[] | import('../index.js').ClientOptions} [options]
   *   the servers ("a:7701,b:7701" or a list), or the options.
   */
  constructor(options = {}) {
    if (typeof options === 'string' || Array.isArray(options)) options = { servers: options };
    const env = process.env;
    const servers = options.servers ?? (env.DELAYQ_SERVER || '127.0.0.1:7701');
    const authToken = options.authToken ?? (env.DELAYQ_AUTH_TOKEN || undefined);
    const connectTimeoutMs = options.connectTimeoutMs ?? 1000;
    const requestTimeoutMs = options.requestTimeoutMs ?? 5000;
    checkInt(connectTimeoutMs, 'connectTimeoutMs', 1, 3_600_000);
    checkInt(requestTimeoutMs, 'requestTimeoutMs', 1, 3_600_000);
    if (authToken !== undefined && (typeof authToken !== 'string' || authToken === '')) {
      throw new InvalidArgumentError(`authToken: expected a non-empty string, got ${describe(authToken)}`);
    }
    const tls = tlsSettings(options, env);
    this.servers = new ServerSet(parseServers(servers), { authToken, connectTimeoutMs, requestTimeoutMs, tls });
    this.tag = randomBytes(8).toString('hex');  // 16 hex digits, this client's
    this.idMs = 0;
    this.idSeq = 0;
    this.idHead = '';
    this.adds = 0;
  }

  /** The servers, "host:port", in the order tried. */
  get serverNames() { return this.servers.servers.map(s => s.name); }

  // A generated id: 12 hex digits of wall-clock ms, 4 of a counter within
  // the ms, 16 of this client's tag. Strictly increasing per client.
  newId() {
    const now = Date.now();
    if (now > this.idMs) {
      this.idMs = now;
      this.idSeq = 0;
      this.idHead = now.toString(16).padStart(12, '0');
    } else if (++this.idSeq > 0xffff) {  // 65536 ids in one ms: borrow the next ms
      this.idMs++;
      this.idSeq = 0;
      this.idHead = this.idMs.toString(16).padStart(12, '0');
    }
    return this.idHead + (0x10000 | this.idSeq).toString(16).slice(1) + this.tag;
  }

  // An idempotency key, one per add call: this client's tag and a counter.
  newIdempotencyKey() {
    const n = this.adds++;
    return this.tag + n.toString(16).padStart(16, '0');
  }

  /**
   * Adds a job. `body`: a string or bytes as they are; any other value is
   * sent as its JSON.
   * @returns {Promise<{id: string, state: 'delayed' | 'ready', runAtMs: number}>}
   */
  async add(topic, body, options = EMPTY) {
    checkTopic(topic);
    const o = options ?? EMPTY;
    if (typeof o !== 'object') throw new InvalidArgumentError(`options: expected an object, got ${describe(o)}`);
    let bytes = body;
    if (body === undefined) bytes = '';
    else if (typeof body === 'string' || Buffer.isBuffer(body)) bytes = body;
    else if (body instanceof Uint8Array) bytes = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
    else bytes = JSON.stringify(body);
    if (o.delay !== undefined && o.runAt !== undefined) {
      throw new InvalidArgumentError('delay and runAt: give one, not both');
    }
    const delayMs = o.delay === undefined ? 0 : toMs(o.delay, 'delay', 0, MAX_DELAY_MS);
    const ttrMs = o.ttr === undefined ? DEFAULT_TTR_MS : toMs(o.ttr, 'ttr', 1, MAX_U32);
    let id = o.id;
    let key = o.idempotencyKey;
    if (id !== undefined) {
      checkId(id);
      if (id === '*') throw new InvalidArgumentError("id: '*' asks the server for a generated id; leave the id out instead");
    }
    if (key !== undefined) checkIdempotencyKey(key);
    const args = [topic, '', delayMs, ttrMs, bytes];
    if (o.priority !== undefined) args.push('PRIORITY', checkInt(o.priority, 'priority', 0, MAX_U32));
    if (o.maxAttempts !== undefined) args.push('MAXATTEMPTS', checkInt(o.maxAttempts, 'maxAttempts', 0, MAX_U32));
    if (o.runAt !== undefined) args.push('AT', toUnixMs(o.runAt, 'runAt'));
    if (o.replace !== undefined && typeof o.replace !== 'boolean') {
      throw new InvalidArgumentError(`replace: expected true or false, got ${describe(o.replace)}`);
    }
    if (o.replace) args.push('REPLACE');
    // One key for every attempt of this call: the server answers a retry
    // whose first attempt ran as that attempt was answered. A caller's own
    // key with no id is sent as such ("*"): the server then names the job by
    // the key, so repeating the whole call is safe too.
    if (key === undefined) {
      key = this.newIdempotencyKey();
      if (id === undefined) id = this.newId();
    }
    args[1] = id ?? '*';
    args.push('IDEMPOTENCY', key, 'WITHSTATE');
    const { replies, repeated } = await this.servers.exec([{ name: 'ADD', args }], ALWAYS);
    const r = replies[0];
    if (r instanceof DelayqError) {
      if (r instanceof ExistsError && repeated !== null && !o.replace && id !== undefined) {
        // Our own first attempt, whose reply was lost, if the job is ours.
        const job = await this.get(id).catch(() => null);
        if (job !== null && job.topic === topic && job.body.equals(Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes))) {
          return { id, state: job.state === 'delayed' ? 'delayed' : 'ready', runAtMs: job.runAtMs };
        }
      }
      throw r;
    }
    if (!Array.isArray(r) || r.length < 3 || typeof r[2] !== 'number') {
      throw malformed('ADD', '[id, state, run_at_ms] (a server with ADD ... WITHSTATE)', r);
    }
    return { id: r[0], state: r[1], runAtMs: r[2] };
  }

  /**
   * Reserves up to `count` jobs of the topics, waiting up to `wait` for one
   * to be ready. Resolves with the deliveries, best first ([] when none came
   * in time). `signal` withdraws a waiting reserve: jobs already on their
   * way are given back (unreserve) and then the promise rejects with its
   * reason; the withdrawal takes at most requestTimeoutMs (plus the give
   * back's own requests).
   * @returns {Promise<Delivery[]>}
   */
  async reserve(topics, options = EMPTY) {
    const list = typeof topics === 'string' ? [topics] : topics;
    if (!Array.isArray(list) || list.length === 0) {
      throw new InvalidArgumentError('topics: give at least one topic');
    }
    if (list.length > MAX_RESERVE_TOPICS) throw new InvalidArgumentError(`topics: at most ${MAX_RESERVE_TOPICS} per reserve`);
    for (const t of list) checkTopic(t);
    const o = options ?? EMPTY;
    const waitMs = o.wait === undefined ? 0 : toMs(o.wait, 'wait', 0, MAX_WAIT_MS);
    const count = o.count === undefined ? 1 : checkInt(o.count, 'count', 1, MAX_RESERVE_COUNT);
    const maxBytes = o.maxBytes === undefined ? 0 : checkInt(o.maxBytes, 'maxBytes', 0, Number.MAX_SAFE_INTEGER);
    const build = wait => {
      const args = ['TIMEOUT', wait, 'COUNT', count];
      if (maxBytes > 0) args.push('MAXBYTES', maxBytes);
      args.push('FROM', ...list);
      return { name: 'RESERVE', args, raw: true };
    };
    const signal = o.signal;
    signal?.throwIfAborted();
    if (waitMs === 0) {
      const r = await this.one(build(0), UNTIL_SENT);
      return parseDeliveries(r);
    }
    const reply = await this.servers.reserveWaiting(build, waitMs, signal, raw => this.giveBack(raw));
    return parseDeliveries(reply);
  }

  // Jobs a withdrawn reserve received anyway: ready again at once, their
  // attempt not counted. Settles once every UNRESERVE is answered (or has
  // failed): the reserve ends only then, so a close() after it cannot
  // drop them, and the jobs do not wait out their TTR.
  giveBack(raw) {
    let jobs;
    try {
      jobs = parseDeliveries(raw);
    } catch {
      return undefined;  // unreadable: they come back after their TTR
    }
    return Promise.allSettled(jobs.map(d => this.unreserve(d)));
  }

  /** Finishes a delivery: the job is gone. `finish(job)` or `finish(id, receipt)`. */
  async finish(job, receipt) {
    const [id, rc] = target(job, receipt);
    await this.ack('FINISH', [id, rc], rc === 'FORCE', true);
  }

  /**
   * Gives a delivery back: due again after `delay` (default 0), with
   * `error` kept as its last_error. `release(job, options)` or
   * `release(id, receipt, options)`. A delivery whose max_attempts are used
   * up is buried instead (by the server).
   */
  async release(job, receipt, options) {
    let o = options;
    if (typeof job === 'object' && job !== null && options === undefined && typeof receipt !== 'string' && receipt !== FORCE) {
      o = receipt;  // release(job, options)
      receipt = undefined;
    }
    const [id, rc] = target(job, receipt);
    o = o ?? EMPTY;
    const delay = o.delay === undefined ? 0 : toMs(o.delay, 'delay', 0, MAX_DELAY_MS);
    const args = [id, delay, rc];
    if (o.error !== undefined && o.error !== '') args.push('ERROR', text(o.error, 'error'));
    await this.ack('RELEASE', args, rc === 'FORCE', false);
  }

  /** Restarts the delivery's TTR from now. `touch(job)` or `touch(id, receipt)`. */
  async touch(job, receipt) {
    const [id, rc] = target(job, receipt);
    await this.ack('TOUCH', [id, rc], rc === 'FORCE', false);
  }

  /**
   * Sets the job aside (buried) with `reason` as its last_error, until it
   * is kicked. `bury(job, reason)` or `bury(id, receipt, reason)`.
   */
  async bury(job, receipt, reason) {
    if (typeof job === 'object' && job !== null && reason === undefined && receipt !== FORCE) {
      reason = receipt;  // bury(job, reason)
      receipt = undefined;
    }
    const [id, rc] = target(job, receipt);
    const args = [id, rc];
    if (reason !== undefined && reason !== '') args.push('ERROR', text(reason, 'reason'));
    await this.ack('BURY', args, rc === 'FORCE', false);
  }

  /**
   * Gives back a delivery its holder never began: ready again at once, in
   * its place, the attempt not counted. Needs the receipt (not FORCE).
   */
  async unreserve(job, receipt) {
    if (receipt === FORCE) throw new InvalidArgumentError("receipt: unreserve needs the delivery's receipt, not FORCE");
    const [id, rc] = target(job, receipt);
    await this.ack('UNRESERVE', [id, rc], false, false);
  }

  // A change with a receipt: repeated after a lost reply (FORCE: not).
  async ack(name, args, force, goneIsDone) {
    const { replies, repeated } = await this.servers.exec([{ name, args }], force ? UNTIL_SENT : ALWAYS);
    const err = afterRepeat(replies[0], repeated !== null, goneIsDone);
    if (err !== null) throw err;
    parseOk(name, replies[0]);
  }

  /**
   * Several outcomes in one round trip (one pipeline): `acks` of
   * {kind: 'finish' | 'release' | 'bury', job | id + receipt, delay?, error?}.
   * Resolves with one entry per ack: null (done) or its DelayqError.
   * Never rejects: a failure of the whole batch is each ack's error.
   * @returns {Promise<(DelayqError | null)[]>}
   */
  async acknowledge(acks) {
    const out = new Array(acks.length).fill(null);
    const cmds = [];
    const sent = [];  // cmds[k] is acks[sent[k]]
    let retry = ALWAYS;
    for (let i = 0; i < acks.length; i++) {
      const a = acks[i];
      let cmd;
      try {
        let id;
        let rc;
        if (a.job instanceof Delivery) {  // as a reserve handed it out: nothing to check
          id = a.job.id;
          rc = a.job.receipt;
        } else {
          [id, rc] = target(a.job ?? a.id, a.job ? undefined : a.receipt);
          if (rc === 'FORCE') retry = UNTIL_SENT;
        }
        if (a.kind === 'finish') {
          cmd = { name: 'FINISH', args: [id, rc] };
        } else if (a.kind === 'release') {
          const args = [id, a.delay === undefined ? 0 : toMs(a.delay, 'delay', 0, MAX_DELAY_MS), rc];
          if (a.error) args.push('ERROR', text(a.error, 'error'));
          cmd = { name: 'RELEASE', args };
        } else if (a.kind === 'bury') {
          const args = [id, rc];
          if (a.error) args.push('ERROR', text(a.error, 'error'));
          cmd = { name: 'BURY', args };
        } else {
          throw new InvalidArgumentError(`kind: expected 'finish', 'release' or 'bury', got ${describe(a.kind)}`);
        }
      } catch (err) {
        out[i] = err instanceof DelayqError ? err : new InvalidArgumentError(String(err?.message ?? err));
        continue;
      }
      cmds.push(cmd);
      sent.push(i);
    }
    if (cmds.length === 0) return out;
    const { replies, repeated } = await this.servers.exec(cmds, retry);
    for (let k = 0; k < cmds.length; k++) {
      const r = replies[k];
      let err = afterRepeat(r, repeated !== null && repeated[k], cmds[k].name === 'FINISH');
      if (err === null && r !== 'OK' && r !== 'FORCED' && !(r instanceof DelayqError)) err = malformed(cmds[k].name, 'OK', r);
      out[sent[k]] = err;
    }
    return out;
  }

  /** Deletes a job, whatever its state. Not repeated after a lost reply. */
  async delete(id) {
    checkId(id);
    parseOk('DELETE', await this.one({ name: 'DELETE', args: [id] }, UNTIL_SENT));
  }

  /** Makes a buried or delayed job ready. Not repeated after a lost reply. */
  async kick(id) {
    checkId(id);
    parseOk('KICK', await this.one({ name: 'KICK', args: [id] }, UNTIL_SENT));
  }

  /** Kicks up to `n` buried jobs of a topic; resolves with how many. */
  async kickTopic(topic, n) {
    checkTopic(topic);
    checkInt(n, 'n', 0, Number.MAX_SAFE_INTEGER);
    const r = await this.one({ name: 'KICKTOPIC', args: [topic, n] }, UNTIL_SENT);
    if (typeof r !== 'number') throw malformed('KICKTOPIC', 'an integer', r);
    return r;
  }

  /** The job, every field; null when there is no such job. @returns {Promise<Job | null>} */
  async get(id) {
    checkId(id);
    return parseJob(await this.one({ name: 'GET', args: [id], raw: true }, ALWAYS));
  }

  /**
   * The first job of a topic in a state ('ready', 'delayed' or 'buried'),
   * every field (PEEK, then GET); null when there is none.
   * @returns {Promise<Job | null>}
   */
  async peek(topic, state) {
    checkTopic(topic);
    const wire = typeof state === 'string' ? PEEK_STATES[state.toLowerCase()] : undefined;
    if (wire === undefined) {
      throw new InvalidArgumentError(`state: peek shows 'ready', 'delayed' or 'buried' jobs, got ${describe(state)}`);
    }
    // A job that leaves the state between the two (reserved, finished) is
    // peeked again, a few times.
    for (let attempt = 0; attempt < 5; attempt++) {
      const r = await this.one({ name: 'PEEK', args: [topic, wire], raw: true }, ALWAYS);
      if (r === null) return null;
      const d = parseDelivery('PEEK', r);
      const job = await this.get(d.id);
      if (job !== null && job.state === wire.toLowerCase()) return job;
    }
    return null;
  }

  /** The server's figures (STATS), camelCase: {jobs, delayed, ready, ..., addedTotal?...}. */
  async stats() {
    return parsePairs('STATS', await this.one({ name: 'STATS', args: [] }, ALWAYS));
  }

  /** One topic's figures: {topic, delayed, ready, reserved, buried, waiting, paused, pausedForMs}. */
  async topicStats(topic) {
    checkTopic(topic);
    const t = parsePairs('STATS topic', await this.one({ name: 'STATS', args: [topic] }, ALWAYS));
    t.topic = String(t.topic);
    t.paused = t.paused === 1;
    return t;
  }

  /** The topics with jobs, waiting reserves or a pause, sorted. */
  async topics() {
    const r = await this.one({ name: 'TOPICS', args: [] }, ALWAYS);
    if (!Array.isArray(r)) throw malformed('TOPICS', 'an array of names', r);
    return r;
  }

  /** Hands out no jobs of the topic for `duration` (ms or "10m"; 0 or none: until resume). */
  async pause(topic, duration = 0) {
    checkTopic(topic);
    const ms = toMs(duration, 'duration', 0, MAX_DELAY_MS);
    parseOk('PAUSE', await this.one({ name: 'PAUSE', args: [topic, ms] }, ALWAYS));
  }

  /** Ends a topic's pause. */
  async resume(topic) {
    checkTopic(topic);
    parseOk('RESUME', await this.one({ name: 'RESUME', args: [topic] }, ALWAYS));
  }

  /** PING: resolves with "PONG" once a server answers. */
  async ping() {
    return this.one({ name: 'PING', args: [] }, ALWAYS);
  }

  /**
   * Any command, as is (SCHEDULE, SUBSCRIPTION, ...): resolves with the
   * reply as ioredis reads it (text), rejects with the typed error of an
   * error reply. Not repeated after a lost reply.
   */
  async command(name, ...args) {
    if (typeof name !== 'string' || name === '') throw new InvalidArgumentError('name: required');
    return this.one({ name: name.toUpperCase(), args }, UNTIL_SENT);
  }

  /**
   * Closes every connection. Calls already made are still sent (and may be
   * answered); waiting reserves reject with UnavailableError; later calls too.
   */
  async close() {
    this.servers.close();
  }

  // One command; the reply, or its error thrown.
  async one(cmd, retry) {
    const { replies } = await this.servers.exec([cmd], retry);
    const r = replies[0];
    if (r instanceof DelayqError) throw r;
    return r;
  }
}

// (id, receipt) from (job) or (id, receipt): the receipt as sent.
function target(job, receipt) {
  let id = job;
  let rc = receipt;
  if (typeof job === 'object' && job !== null) {
    id = job.id;
    if (rc === undefined) rc = job.receipt;
  }
  checkId(id);
  if (rc === FORCE) return [id, 'FORCE'];
  checkReceipt(rc);
  return [id, rc];
}

function text(v, field) {
  if (typeof v === 'string') return v;
  if (v instanceof Error) return v.message;
  throw new InvalidArgumentError(`${field}: expected a string, got ${describe(v)}`);
}

// The error of a reply (null: none), read as a repeat's: a finish repeated
// after a lost reply and answered not_found did what was asked.
function afterRepeat(r, repeated, goneIsDone) {
  if (!(r instanceof DelayqError)) return null;
  if (!repeated || r instanceof UnavailableError) return r;
  if (goneIsDone && r instanceof NotFoundError) return null;
  r.message += AFTER_REPEAT;
  return r;
}

export { Delivery, Job };
