// Replies read back into the public types (docs/api.md §4): the 10-element
// job array of RESERVE and PEEK, GET's 13 field/value pairs, STATS.
// A reply of the wrong shape is an UnavailableError naming what was
// expected: the server is not a delayq server, or not one this client reads.
import { UnavailableError } from './errors.js';

/** A job handed out by a reserve (or shown by a peek). */
export class Delivery {
  constructor(id, topic, body, receipt, attempts, ttrMs, priority, runAtMs, reservedUntilMs, maxAttempts) {
    this.id = id;
    this.topic = topic;
    this.body = body;  // Buffer: the job's bytes
    this.receipt = receipt;
    this.attempts = attempts;
    this.ttrMs = ttrMs;
    this.priority = priority;
    this.runAtMs = runAtMs;
    this.reservedUntilMs = reservedUntilMs;
    this.maxAttempts = maxAttempts;
  }
  /** The body as text (UTF-8 unless told). */
  text(encoding = 'utf8') { return this.body.toString(encoding); }
  /** The body parsed as JSON. */
  json() { return JSON.parse(this.body.toString('utf8')); }
  /** Whether a release of this delivery buries the job: its max_attempts are used up. */
  get releaseBuries() { return this.maxAttempts !== 0 && this.attempts >= this.maxAttempts; }
}

/** A job as GET shows it: every field. */
export class Job {
  constructor() {
    this.id = '';
    this.topic = '';
    this.state = '';
    this.body = EMPTY;
    this.priority = 0;
    this.ttrMs = 0;
    this.maxAttempts = 0;
    this.attempts = 0;
    this.createdAtMs = 0;
    this.runAtMs = 0;
    this.reservedUntilMs = 0;
    this.receipt = '';
    this.lastError = '';
  }
  text(encoding = 'utf8') { return this.body.toString(encoding); }
  json() { return JSON.parse(this.body.toString('utf8')); }
}

const EMPTY = Buffer.alloc(0);

export function malformed(command, what, got) {
  let shown;
  try {
    shown = JSON.stringify(got, (k, v) => (v && v.type === 'Buffer' ? Buffer.from(v.data).toString() : v));
  } catch {
    shown = String(got);
  }
  if (shown && shown.length > 200) shown = `${shown.slice(0, 200)}…`;
  return new UnavailableError(`malformed reply to ${command}: expected ${what}, got ${shown}`);
}

const str = b => (Buffer.isBuffer(b) ? b.toString('utf8') : String(b));
const num = v => (typeof v === 'number' ? v : Number(Buffer.isBuffer(v) ? v.toString('latin1') : v));

/** One job array: [id, topic, body, receipt, attempts, ttr_ms, priority, run_at_ms, reserved_until_ms, max_attempts]. */
export function parseDelivery(command, a) {
  if (!Array.isArray(a) || a.length < 5 || !Buffer.isBuffer(a[0]) || !Buffer.isBuffer(a[2])) {
    throw malformed(command, 'a job array [id, topic, body, receipt, attempts, ...]', a);
  }
  // Older servers sent five fields, then nine: the missing ones read as 0.
  return new Delivery(a[0].toString('utf8'), a[1].toString('latin1'), a[2], a[3].toString('latin1'),
    a[4], a.length > 5 ? a[5] : 0, a.length > 6 ? a[6] : 0, a.length > 7 ? a[7] : 0,
    a.length > 8 ? a[8] : 0, a.length > 9 ? a[9] : 0);
}

/** RESERVE's reply: null (nothing) or an array of job arrays. */
export function parseDeliveries(reply) {
  if (reply === null) return [];
  if (!Array.isArray(reply)) throw malformed('RESERVE', 'an array of jobs or nil', reply);
  const out = new Array(reply.length);
  for (let i = 0; i < reply.length; i++) out[i] = parseDelivery('RESERVE', reply[i]);
  return out;
}

const JOB_FIELDS = {
  id: (j, v) => { j.id = str(v); },
  topic: (j, v) => { j.topic = str(v); },
  state: (j, v) => { j.state = str(v); },
  body: (j, v) => { j.body = Buffer.isBuffer(v) ? v : Buffer.from(String(v)); },
  priority: (j, v) => { j.priority = num(v); },
  ttr_ms: (j, v) => { j.ttrMs = num(v); },
  max_attempts: (j, v) => { j.maxAttempts = num(v); },
  attempts: (j, v) => { j.attempts = num(v); },
  created_at_ms: (j, v) => { j.createdAtMs = num(v); },
  run_at_ms: (j, v) => { j.runAtMs = num(v); },
  reserved_until_ms: (j, v) => { j.reservedUntilMs = num(v); },
  receipt: (j, v) => { j.receipt = str(v); },
  last_error: (j, v) => { j.lastError = str(v); },
};

/** GET's reply: field/value pairs, or null (no such job). */
export function parseJob(reply) {
  if (reply === null) return null;
  if (!Array.isArray(reply) || reply.length % 2 !== 0) throw malformed('GET', 'field/value pairs', reply);
  const j = new Job();
  for (let i = 0; i < reply.length; i += 2) {
    const set = JOB_FIELDS[str(reply[i])];
    if (set !== undefined) set(j, reply[i + 1]);  // a field this client does not know: skipped
  }
  if (j.id === '' || j.state === '') throw malformed('GET', 'a job with id and state', reply);
  return j;
}

// "due_lateness_p50_us" -> "dueLatenessP50Us"
const camel = name => name.replace(/_([a-z0-9])/g, (_, c) => c.toUpperCase());

/**
 * STATS / STATS topic: field/value pairs into an object with camelCase
 * names; numbers as numbers (a value that is not one is kept as text).
 */
export function parsePairs(command, reply) {
  if (!Array.isArray(reply) || reply.length % 2 !== 0) throw malformed(command, 'field/value pairs', reply);
  const out = {};
  for (let i = 0; i < reply.length; i += 2) {
    const v = reply[i + 1];
    const n = typeof v === 'number' ? v : v === '' ? NaN : Number(v);
    out[camel(String(reply[i]))] = Number.isNaN(n) ? v : n;
  }
  return out;
}

/** +OK or +FORCED. */
export function parseOk(command, reply) {
  if (reply !== 'OK' && reply !== 'FORCED') throw malformed(command, 'OK', reply);
}
