// Worker: runs a handler per topic over a Client, with the C++ Worker's
// behaviour (include/delayq/worker.h): per-topic concurrency, retries with
// exponential backoff and jitter, touches at half the TTR, batched
// acknowledgements and a graceful stop.
//
// How it works, on Node's one thread:
//
// Every job the worker holds is an Entry in `held`, from the reserve that
// brought it until its outcome has been applied (or it was given back).
// Entries not yet started wait in `waiting`, in the order the server gave
// them; dispatch() starts the first whose topic has room while fewer than
// `concurrency` handlers run. A slot is a job waiting or running: a reserve
// asks for the free slots (COUNT), plus what the worker reads ahead (as many
// jobs as it acknowledged in the last 10 ms, at most 1000), so jobs of fast
// handlers are already here when a slot frees.
//
// At most one reserve is open: a long poll (`reserveWait`, 30 s) over the
// topics with room, on a connection of its own, so an idle worker holds one
// waiting reserve and polls nothing. pump() opens one after every event that
// can free a slot. When a topic that was full gains room while the reserve
// waits on the others, the reserve is withdrawn and made again.
//
// Outcomes become acks: a handler's return joins `acks`, and all the acks of
// one turn of the event loop go as ONE pipeline of FINISH / RELEASE / BURY
// (Client#acknowledge: one write, one round trip). While a batch is on its
// way the next one gathers. An ack answered unavailable or internal (the
// server out of reach, a reply lost) is sent again after 100 ms, doubling
// to 5 s, its job touched meanwhile; not_found / stale_receipt end it.
//
// One timer serves every held job: it is armed for the earliest of the next
// touch, the next ack resend and the next reserve retry, and each firing
// scans the held jobs (at most concurrency + read-ahead + acks in flight).
// A job held for half its TTR is touched, and again every half TTR.
// No job has a timer or a promise of its own beyond its handler's call.
import { InvalidArgumentError, DelayqError, UnavailableError } from './errors.js';
import { checkTopic, checkInt, toMs, describe, MAX_WAIT_MS, MAX_DELAY_MS, MAX_RESERVE_COUNT, MAX_RESERVE_TOPICS } from './validate.js';

const MAX_CONCURRENCY = 1024;
const MAX_RESERVE_RETRY_MS = 5000;
const TOUCH_RETRY_MS = 100;
const ACK_RETRY_MS = 100;
const MAX_ACK_RETRY_MS = 5000;
const AHEAD_WINDOW_MS = 10;
export const STOPPED_ERROR = 'worker stopped while the handler ran';

// Entry states.
const WAITING = 0;    // reserved, not started: in `waiting`
const RUNNING = 1;    // its handler runs
const ACKING = 2;     // its handler returned; its ack waits for (or is in) a batch
const ABANDONED = 3;  // stop gave it back while its handler ran

const KIND_FINISH = 'finish';
const KIND_RELEASE = 'release';
const KIND_BURY = 'bury';

/** What a handler decided about its job. Returning nothing means success. */
export class Outcome {
  constructor(kind, delayMs, text) {
    this.kind = kind;        // 'success' | 'retry' | 'bury'
    this.delayMs = delayMs;  // retry: the delay asked for; -1: the topic's backoff
    this.text = text;        // retry: the error; bury: the reason
  }
  /** Done: the job is finished (gone). */
  static success() { return SUCCESS; }
  /** Try again after the topic's backoff; `error` becomes the job's last_error. */
  static retry(error = '') { return new Outcome('retry', -1, errorText(error)); }
  /** Try again after `delay` (ms or a duration such as "30s"). */
  static retryIn(delay, error = '') {
    const ms = typeof delay === 'number' && delay < 0 ? -1 : toMs(delay, 'delay', 0, MAX_DELAY_MS);
    return new Outcome('retry', ms, errorText(error));
  }
  /** Give up: the job is buried, `reason` as its last_error, until kicked. */
  static bury(reason = '') { return new Outcome('bury', -1, errorText(reason)); }
}
const SUCCESS = new Outcome('success', -1, '');

/**
 * The backoff of the n-th attempt (1 on the first delivery):
 * d = min(capMs, baseMs * factor^(n-1)), jittered uniformly to [d/2, d] by
 * `random` in [0, 1], never below baseMs nor above capMs — so the first
 * retry waits baseMs exactly. As BackoffDelayMs in the C++ worker.
 */
export function backoffDelayMs(backoff, attempts, random) {
  const { baseMs, factor, capMs } = backoff;
  if (baseMs <= 0) return 0;
  if (!(attempts >= 1)) attempts = 1;
  if (!(random >= 0)) random = 0;  // also NaN
  random = Math.min(random, 1);
  const steps = Math.min(attempts - 1, 4096);
  let d = baseMs * Math.pow(factor, steps);
  if (!(d <= capMs)) d = capMs;  // also Infinity and NaN
  const jittered = Math.trunc(d / 2 + random * (d / 2));
  return Math.min(Math.max(jittered, baseMs), capMs);
}

function checkBackoff(b, topic) {
  const o = b ?? {};
  if (typeof o !== 'object') throw new InvalidArgumentError(`backoff of topic '${topic}': expected an object, got ${describe(o)}`);
  const backoff = { baseMs: o.baseMs ?? 1000, factor: o.factor ?? 2, capMs: o.capMs ?? 600_000 };
  if (typeof backoff.baseMs !== 'number' || !(backoff.baseMs >= 0)) throw new InvalidArgumentError('backoff.baseMs: must be >= 0');
  if (typeof backoff.factor !== 'number' || !(backoff.factor >= 1) || !Number.isFinite(backoff.factor)) {
    throw new InvalidArgumentError('backoff.factor: must be a finite number >= 1');
  }
  if (typeof backoff.capMs !== 'number' || !(backoff.capMs >= backoff.baseMs)) {
    throw new InvalidArgumentError('backoff.capMs: must be >= backoff.baseMs');
  }
  if (backoff.capMs > MAX_DELAY_MS) throw new InvalidArgumentError('backoff.capMs: at most 100 years');
  return backoff;
}

function errorText(e) {
  if (typeof e === 'string') return e;
  if (e instanceof Error) return e.message || e.name || String(e);
  if (e === undefined || e === null) return '';
  return String(e);
}

// Answers after which an ack is sent again: they say nothing of the ack
// itself (the server out of reach, a reply lost, a store that failed).
// Resending is safe: an ack carries its receipt, so one already applied is
// answered not_found or stale_receipt, never applied twice.
const transient = err => err.code === 'unavailable' || err.code === 'internal';
// Answers that say a delivery is over for this worker: nothing sent with
// its receipt can succeed again.
const deliveryOver = err => err.code === 'stale_receipt' || err.code === 'not_found' || err.code === 'not_reserved';
const touchInterval = job => Math.max(1, Math.floor(job.ttrMs / 2));

class Topic {
  constructor(name, handler, limit, backoff) {
    this.name = name;
    this.handler = handler;
    this.limit = limit;     // handlers of this topic at once
    this.backoff = backoff;
    this.held = 0;          // jobs of this topic held (any state)
    this.running = 0;       // of which running their handler
    this.acking = 0;        // of which done, their ack not yet answered
  }
  get busy() { return this.held - this.acking; }
}

// A job the worker holds. It is also the ack the client sends (kind, job,
// delay, error), so an outcome allocates nothing more.
class Entry {
  constructor(job, topic, now) {
    this.job = job;
    this.topic = topic;
    this.state = WAITING;
    this.touchAt = now + touchInterval(job);  // performance.now() ms of its next touch (or retry)
    this.heldSince = now;    // when its reservation last started a full TTR
    this.touchRetryMs = 0;   // the last failed touch's retry delay; 0: none failed
    this.lost = false;       // a touch found the delivery over: touch no more
    this.resend = false;     // its ack failed transiently: waits in `retry`, touched meanwhile
    this.kind = KIND_FINISH;
    this.delay = 0;
    this.error = '';
    this.lastAnswer = null;  // the last error of its ack, while resent
  }
}

export class Worker {
  /**
   * @param {import('./client.js').Client} client
   * @param {import('../index.js').WorkerOptions} [options]
   */
  constructor(client, options = {}) {
    if (client === null || typeof client !== 'object' || typeof client.reserve !== 'function') {
      throw new InvalidArgumentError('client: expected a delayq Client');
    }
    const o = options ?? {};
    this.client = client;
    this.concurrency = checkInt(o.concurrency ?? 4, 'concurrency', 1, MAX_CONCURRENCY);
    this.reserveWaitMs = toMs(o.reserveWait ?? 30_000, 'reserveWait', 1, MAX_WAIT_MS);
    this.reserveRetryMs = checkInt(o.reserveRetryMs ?? 100, 'reserveRetryMs', 1, 3_600_000);
    if (o.random !== undefined && typeof o.random !== 'function') throw new InvalidArgumentError('random: expected a function returning a number in [0, 1]');
    if (o.onAcknowledged !== undefined && typeof o.onAcknowledged !== 'function') throw new InvalidArgumentError('onAcknowledged: expected a function');
    if (o.onError !== undefined && typeof o.onError !== 'function') throw new InvalidArgumentError('onError: expected a function');
    this.random = o.random ?? Math.random;
    this.onAcknowledged = o.onAcknowledged ?? null;
    this.onError = o.onError ?? null;

    this.topics = new Map();  // name -> Topic
    this.topicList = [];
    this.started = false;
    this.stopping = false;
    this.stopPromise = null;
    this.stoppedPromise = new Promise(resolve => { this.resolveStopped = resolve; });

    this.held = new Set();  // Entry
    this.waiting = [];      // Entry, not started, in the order reserved
    this.running = 0;       // handlers running (abandoned ones included)
    this.dispatching = false;

    this.acks = [];         // Entry (ACKING), to go in the next batch
    this.flushing = false;  // a batch is on its way
    this.flushQueued = false;
    this.retry = [];        // Entry (ACKING, resend): acks to send again at ackRetryAt
    this.ackRetryAt = Infinity;
    this.ackRetryMs = 0;
    this.drainOver = false;
    this.acking = 0;

    // Reading ahead: acks answered in the last full window of AHEAD_WINDOW_MS.
    this.ahead = 0;
    this.paceStart = 0;
    this.paceDone = 0;

    // The open reserve.
    this.reserving = false;
    this.reserveAbort = null;   // its AbortController
    this.reserveDone = null;    // a promise settled when it is answered
    this.openTopics = null;     // Set of topic names it asked for
    this.rotation = 0;          // first topic of the next reserve (more than 100 topics)
    this.retryPending = false;  // a reserve failed: reopened at retryAt
    this.retryAt = 0;
    this.retryMs = this.reserveRetryMs;
    this.givingBack = 0;        // unreserves of jobs that came during stop, under way

    this.timer = null;
    this.timerAt = Infinity;
    this.touching = 0;
    this.onChange = null;       // stop's check, run when what it waits for may have changed
    this.drainDeadline = Infinity;

    this.counters = {
      handled: 0, succeeded: 0, retried: 0, exhausted: 0, buried: 0, touched: 0,
      reserves: 0, ackBatches: 0, givenBack: 0, errors: 0, lastError: '',
    };
  }

  /**
   * Registers the handler of `topic`. Before start().
   * @param {string} topic
   * @param {(job: import('./codec.js').Delivery) => any} handler
   * @param {{concurrency?: number, backoff?: {baseMs?: number, factor?: number, capMs?: number}}} [options]
   */
  handle(topic, handler, options = {}) {
    if (this.started || this.stopping) throw new InvalidArgumentError('handle after start: register handlers first');
    checkTopic(topic);
    if (typeof handler !== 'function') throw new InvalidArgumentError(`handler of topic '${topic}': expected a function`);
    if (this.topics.has(topic)) throw new InvalidArgumentError(`topic '${topic}' already has a handler`);
    const o = options ?? {};
    const concurrency = o.concurrency === undefined || o.concurrency === 0
      ? this.concurrency
      : Math.min(checkInt(o.concurrency, 'concurrency', 0, MAX_CONCURRENCY), this.concurrency);
    const t = new Topic(topic, handler, concurrency, checkBackoff(o.backoff, topic));
    this.topics.set(topic, t);
    this.topicList.push(t);
    return this;
  }

  /** Starts reserving and running handlers. Resolves at once. */
  async start() {
    if (this.started || this.stopping) throw new InvalidArgumentError('a worker starts once');
    if (this.topics.size === 0) throw new InvalidArgumentError('no handlers: call handle() before start()');
    this.started = true;
    this.pump();
  }

  /**
   * Starts, stops on SIGTERM or SIGINT (a drain of `drain`, default 30 s;
   * a second signal cuts the drain short), and resolves once stopped.
   */
  async run(options = {}) {
    const remove = this.stopOnSignals(options);
    try {
      await this.start();
      await this.stoppedPromise;
    } finally {
      remove();
    }
  }

  /**
   * Opt-in: on SIGTERM or SIGINT (or `signals`), stop({drain}); a second
   * signal cuts the drain short. Returns a function that removes the
   * handlers. While they are installed the signals do not end the process.
   */
  stopOnSignals(options = {}) {
    const o = options ?? {};
    const drain = o.drain ?? 30_000;
    toMs(drain, 'drain');
    const signals = o.signals ?? ['SIGTERM', 'SIGINT'];
    let seen = 0;
    const onSignal = () => {
      if (seen++ === 0) {
        this.stop({ drain }).catch(() => {});
      } else {
        this.drainDeadline = 0;  // a second signal: give back what still runs, now
        this.changed();
      }
    };
    for (const s of signals) process.on(s, onSignal);
    return () => { for (const s of signals) process.removeListener(s, onSignal); };
  }

  /** Resolves once the worker has stopped (by stop() or a signal). */
  wait() { return this.stoppedPromise; }

  /**
   * Stops, in this order: no more reserves (the waiting one is withdrawn);
   * jobs held but not started go back at once, their attempt not counted
   * (unreserve); running handlers may finish for up to `drain` (ms or a
   * duration; default 30 s), their outcomes applied and their jobs touched
   * meanwhile; the jobs of handlers still running then are released with
   * delay 0 and the error "worker stopped while the handler ran". Resolves
   * once nothing is held. A second call returns the first one's promise.
   */
  stop(options = {}) {
    if (this.stopPromise !== null) return this.stopPromise;
    const drainMs = toMs((options ?? {}).drain ?? 30_000, 'drain');
    this.stopping = true;
    this.stopPromise = this.stopSteps(drainMs).finally(() => this.resolveStopped());
    return this.stopPromise;
  }

  async stopSteps(drainMs) {
    if (!this.started) return;
    this.drainDeadline = performance.now() + drainMs;
    if (this.acks.length > 0) this.flush();
    if (this.reserveAbort !== null) this.reserveAbort.abort(new StopAbort());
    // No reserve open, no touch under way, what a reserve answered during
    // the stop given back: what is held is final.
    await this.until(() => !this.reserving && this.touching === 0 && this.givingBack === 0, Infinity);
    const unstarted = this.waiting;
    this.waiting = [];
    for (const e of unstarted) this.drop(e);
    await Promise.all(unstarted.map(e => this.giveBack(e.job)));
    // Handlers finish, acks are sent (and sent again), jobs are touched.
    await this.until(() => this.held.size === 0, () => this.drainDeadline);
    // Past the deadline: the jobs of handlers still running go back, the
    // acks still failing are given up.
    this.drainOver = true;
    const abandoned = [];
    for (const e of this.held) {
      if (e.state === RUNNING) {
        e.state = ABANDONED;
        abandoned.push(e);
      }
    }
    const givenUp = this.retry;
    this.retry = [];
    this.ackRetryAt = Infinity;
    for (const e of givenUp) {
      const last = e.lastAnswer;
      const err = new (last.constructor)(`the worker stopped before the server took the outcome; the last try: ${last.message}`);
      this.noteError(err);
      this.conclude(e, err);
    }
    await Promise.all(abandoned.map(e => this.client.release(e.job, { delay: 0, error: STOPPED_ERROR }).then(
      () => { this.counters.givenBack++; },
      err => { this.counters.givenBack++; this.noteError(err); })));
    // Outcomes being applied now end with their batch.
    await this.until(() => { for (const e of this.held) if (e.state !== ABANDONED) return false; return true; }, Infinity);
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.timerAt = Infinity;
  }

  /** Figures since the worker was made. */
  stats() {
    return { ...this.counters, running: this.running, held: this.waiting.length };
  }

  // --- reserving ---------------------------------------------------------------------

  busy() { return this.waiting.length + this.running; }

  pump() {
    if (this.reserving) {
      if (this.shouldReopen()) this.reserveAbort.abort(new ReopenAbort());
      return;
    }
    if (!this.started || this.stopping || this.retryPending) return;
    // Slots free once their handlers return; their acks may still be on
    // the way, up to another `concurrency` of them.
    const busy = this.busy();
    const slots = this.concurrency + this.ahead;
    const cap = slots + this.concurrency;
    if (busy >= slots || this.held.size >= cap) return;
    // Every handler busy: top the read-ahead up once half of it is gone.
    if (busy >= this.concurrency && slots - busy < (this.ahead + 1) / 2) return;
    const names = [];
    const open = new Set();
    let room = 0;
    const n = this.topicList.length;
    for (let i = 0; i < n && names.length < MAX_RESERVE_TOPICS; i++) {
      const t = this.topicList[(this.rotation + i) % n];
      const limit = t.limit + this.ahead;
      if (t.busy >= limit) continue;
      room += limit - t.busy;
      names.push(t.name);
      open.add(t.name);
    }
    if (room === 0) return;
    this.rotation = (this.rotation + 1) % n;
    const count = Math.min(slots - busy, cap - this.held.size, room, MAX_RESERVE_COUNT);
    this.reserving = true;
    this.openTopics = open;
    this.counters.reserves++;
    const abort = new AbortController();
    this.reserveAbort = abort;
    const started = performance.now();
    this.client.reserve(names, { wait: this.reserveWaitMs, count, signal: abort.signal }).then(
      jobs => this.reserved(jobs, started),
      err => this.reserveFailed(err));
  }

  // The open reserve leaves out a topic that has room now.
  shouldReopen() {
    if (this.stopping || this.reserveAbort.signal.aborted) return false;
    if (this.busy() >= this.concurrency + this.ahead) return false;
    if (this.openTopics.size >= MAX_RESERVE_TOPICS) return false;  // a full list rotates instead
    for (const t of this.topicList) {
      if (!this.openTopics.has(t.name) && t.busy < t.limit + this.ahead) return true;
    }
    return false;
  }

  reserved(jobs, started) {
    this.reserving = false;
    this.reserveAbort = null;
    const now = performance.now();
    this.retryMs = this.reserveRetryMs;
    if (this.stopping) {
      // Came while stopping: back at once, the attempts not counted.
      this.givingBack++;
      Promise.all(jobs.map(d => this.giveBack(d))).finally(() => { this.givingBack--; this.changed(); });
      this.changed();
      return;
    }
    if (jobs.length === 0 && now - started < this.reserveWaitMs / 2) {
      // Answered at once with nothing despite the wait: ask again later, not in a loop.
      this.retryLater(now);
    }
    for (const d of jobs) {
      const t = this.topics.get(d.topic);
      if (t === undefined) {  // not asked for: a server's bug
        this.noteError(new DelayqError(`reserve handed out job '${d.id}' of topic '${d.topic}', which the worker did not ask for`));
        this.giveBack(d);
        continue;
      }
      const e = new Entry(d, t, now);
      this.held.add(e);
      t.held++;
      this.waiting.push(e);
      if (e.touchAt < this.timerAt) this.arm(e.touchAt);
    }
    this.dispatch();
    this.pump();
  }

  reserveFailed(err) {
    this.reserving = false;
    this.reserveAbort = null;
    if (err instanceof StopAbort || this.stopping) {
      this.changed();
      return;
    }
    if (err instanceof ReopenAbort) {
      this.pump();
      return;
    }
    this.noteError(err);
    const now = performance.now();
    if (err instanceof UnavailableError && err.shuttingDown) {
      // The server ended the wait because it is going away: reserve again
      // at once (on the next server, or this one once back); a failure after
      // that backs off from the base as usual.
      this.retryMs = this.reserveRetryMs;
      this.retryPending = true;
      this.retryAt = now;
      this.arm(now);
      return;
    }
    this.retryLater(now);
    this.retryMs = Math.min(this.retryMs * 2, Math.max(MAX_RESERVE_RETRY_MS, this.reserveRetryMs));
  }

  retryLater(now) {
    this.retryPending = true;
    this.retryAt = now + this.retryMs;
    this.arm(this.retryAt);
  }

  giveBack(job) {
    return this.client.unreserve(job).then(
      () => { this.counters.givenBack++; },
      err => { this.counters.givenBack++; this.noteError(err); });
  }

  // --- running handlers ------------------------------------------------------------

  dispatch() {
    if (this.dispatching || this.stopping) return;
    this.dispatching = true;
    try {
      while (this.running < this.concurrency && this.waiting.length > 0) {
        const e = this.pick();
        if (e === null) break;
        this.begin(e);
      }
    } finally {
      this.dispatching = false;
    }
  }

  // The first waiting entry whose topic has room, taken out of `waiting`.
  pick() {
    const w = this.waiting;
    for (let i = 0; i < w.length; i++) {
      const t = w[i].topic;
      if (t.running < t.limit) return i === 0 ? w.shift() : w.splice(i, 1)[0];
    }
    return null;
  }

  begin(e) {
    e.state = RUNNING;
    e.topic.running++;
    this.running++;
    let r;
    try {
      r = e.topic.handler(e.job);
    } catch (err) {
      this.finished(e, thrown(err));
      return;
    }
    if (r !== null && typeof r === 'object' && typeof r.then === 'function') {
      r.then(v => this.finished(e, v), err => this.finished(e, thrown(err)));
    } else {
      this.finished(e, r);
    }
  }

  finished(e, result) {
    const t = e.topic;
    t.running--;
    this.running--;
    this.counters.handled++;
    if (e.state === ABANDONED) {  // stop gave its job back: the outcome is not ours to apply
      this.drop(e);
      this.changed();
      return;
    }
    if (result instanceof Outcome) {
      if (result.kind === 'retry') {
        e.kind = KIND_RELEASE;
        e.delay = result.delayMs >= 0 ? result.delayMs : this.backoff(e);
        e.error = result.text;
      } else if (result.kind === 'bury') {
        e.kind = KIND_BURY;
        e.error = result.text;
      }
    } else if (result instanceof Error) {  // returned, not thrown: a retry all the same
      e.kind = KIND_RELEASE;
      e.delay = this.backoff(e);
      e.error = errorText(result);
    }
    e.state = ACKING;
    t.acking++;
    this.acking++;
    this.acks.push(e);
    if (!this.flushing && !this.flushQueued) {
      this.flushQueued = true;
      setImmediate(this.flushSoon);  // after this turn's other outcomes: one batch
    }
    this.dispatch();
    this.pump();
  }

  backoff(e) {
    let r;
    try {
      r = this.random();
    } catch {
      r = 0;
    }
    return backoffDelayMs(e.topic.backoff, e.job.attempts, r);
  }

  // --- acknowledging ----------------------------------------------------------------

  flushSoon = () => {
    this.flushQueued = false;
    this.flush();
  };

  flush() {
    if (this.flushing || this.acks.length === 0) return;
    this.flushing = true;
    const batch = this.acks;
    this.acks = [];
    this.counters.ackBatches++;
    this.client.acknowledge(batch).then(
      answers => this.answered(batch, answers),
      err => this.answered(batch, batch.map(() => err)));  // (acknowledge does not reject)
  }

  answered(batch, answers) {
    const now = performance.now();
    this.pace(now, batch.length);
    const c = this.counters;
    for (let k = 0; k < batch.length; k++) {
      const e = batch[k];
      const err = answers[k];
      if (err === null) {
        this.ackRetryMs = 0;
        if (e.kind === KIND_FINISH) c.succeeded++;
        else if (e.kind === KIND_RELEASE) {
          c.retried++;
          if (e.job.releaseBuries) c.exhausted++;
        } else c.buried++;
      } else {
        this.noteError(err);
        if (transient(err) && !this.drainOver) {
          e.resend = true;
          e.lastAnswer = err;
          this.retry.push(e);
          continue;
        }
      }
      this.conclude(e, err);
    }
    if (this.retry.length > 0 && this.ackRetryAt === Infinity) {
      this.ackRetryMs = this.ackRetryMs === 0 ? ACK_RETRY_MS : Math.min(this.ackRetryMs * 2, MAX_ACK_RETRY_MS);
      this.ackRetryAt = now + this.ackRetryMs;
      this.arm(this.ackRetryAt);
    }
    this.flushing = false;
    if (this.acks.length > 0) this.flush();
    this.pump();
    this.changed();
  }

  // An outcome with its final answer: reported, then its job let go.
  conclude(e, err) {
    if (this.onAcknowledged !== null) {
      try {
        this.onAcknowledged(e.job, e.kind, err);
      } catch (hookErr) {
        this.noteError(hookErr);
      }
    }
    e.topic.acking--;
    this.acking--;
    this.drop(e);
  }

  drop(e) {
    if (this.held.delete(e)) e.topic.held--;
  }

  pace(now, done) {
    if (now - this.paceStart >= AHEAD_WINDOW_MS) {
      const last = now - this.paceStart < 2 * AHEAD_WINDOW_MS;  // the window just ended
      this.ahead = last ? Math.min(this.paceDone, MAX_RESERVE_COUNT) : 0;
      this.paceStart = now;
      this.paceDone = 0;
    }
    this.paceDone += done;
  }

  // --- the timer: touches, ack resends, reserve retries ---------------------------------

  arm(at) {
    if (at >= this.timerAt) return;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(this.fire, Math.max(0, at - performance.now()));
  }

  fire = () => {
    this.timer = null;
    this.timerAt = Infinity;
    const now = performance.now();
    if (this.retryPending && now >= this.retryAt) {
      this.retryPending = false;
      this.pump();
    }
    let next = this.retryPending ? this.retryAt : Infinity;
    for (const e of this.held) {
      // A running job keeps its reservation until its handler returns or
      // stop gives it back; one whose ack waits to be sent again, until the
      // server takes it.
      if (e.lost || e.state === ABANDONED || (e.state === ACKING && !e.resend)) continue;
      if (e.touchAt <= now) {
        this.touch(e, now);
        e.touchAt = now + touchInterval(e.job);
      }
      if (e.touchAt < next) next = e.touchAt;
    }
    if (this.retry.length > 0) {
      if (now >= this.ackRetryAt) {
        for (const e of this.retry) {
          e.resend = false;
          this.acks.push(e);
        }
        this.retry = [];
        this.ackRetryAt = Infinity;
        this.flush();
      } else if (this.ackRetryAt < next) {
        next = this.ackRetryAt;
      }
    }
    if (next !== Infinity) this.arm(next);
  };

  touch(e, sentAt) {
    this.touching++;
    this.client.touch(e.job).then(() => this.touched(e, sentAt, null), err => this.touched(e, sentAt, err));
  }

  // The answer to a touch sent at `sentAt`: an accepted touch restarts the
  // job's TTR; a transient failure is retried within what is left of it;
  // an answer that the delivery is over ends its touches.
  touched(e, sentAt, err) {
    this.touching--;
    this.changed();
    if (err === null) {
      this.counters.touched++;
      if (e.state !== ABANDONED) {
        e.heldSince = Math.max(e.heldSince, sentAt);
        e.touchRetryMs = 0;
      }
      return;
    }
    // Given back, or its outcome applied, while the touch was on its way.
    if (!this.held.has(e) || e.state === ABANDONED || (e.state === ACKING && deliveryOver(err))) return;
    this.noteError(err);
    if (deliveryOver(err)) {
      e.lost = true;
      return;
    }
    const now = performance.now();
    const interval = touchInterval(e.job);
    e.touchRetryMs = e.touchRetryMs === 0 ? TOUCH_RETRY_MS : Math.min(e.touchRetryMs * 2, interval);
    const left = e.heldSince + e.job.ttrMs - now;
    e.touchAt = now + Math.max(1, left > 0 ? Math.min(e.touchRetryMs, left / 2) : e.touchRetryMs);
    this.arm(e.touchAt);
  }

  noteError(err) {
    this.counters.errors++;
    this.counters.lastError = err instanceof DelayqError ? `${err.code}: ${err.message}` : String(err?.message ?? err);
    if (this.onError !== null) {
      try { this.onError(err); } catch { /* a hook's own failure is not the worker's */ }
    }
  }

  // --- stop's waiting ----------------------------------------------------------------

  changed() {
    if (this.onChange !== null) this.onChange();
  }

  // Resolves true once pred() holds, false once `deadline` (ms, or a
  // function giving it) passes first.
  until(pred, deadline) {
    const at = typeof deadline === 'function' ? deadline : () => deadline;
    return new Promise(resolve => {
      let timer = null;
      const check = () => {
        if (timer !== null) clearTimeout(timer);
        timer = null;
        if (pred()) return finish(true);
        const left = at() - performance.now();
        if (left <= 0) return finish(false);
        if (left !== Infinity) timer = setTimeout(check, Math.min(left, 1000));
      };
      const finish = v => {
        this.onChange = null;
        resolve(v);
      };
      this.onChange = check;
      check();
    });
  }
}

function thrown(err) {
  const text = err instanceof Error ? errorText(err) : err === undefined ? 'the handler threw undefined' : errorText(err);
  return new Outcome('retry', -1, text);
}

// Why a reserve was withdrawn.
class StopAbort extends Error {
  constructor() { super('the worker is stopping'); this.name = 'AbortError'; }
}
class ReopenAbort extends Error {
  constructor() { super('reserving again with a topic that gained room'); this.name = 'AbortError'; }
}
