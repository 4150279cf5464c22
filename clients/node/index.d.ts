// Types of the `delayq` package: a client of `delayq serve` (RESP, over
// ioredis) and a worker that runs handlers over it. See README.md.

/// <reference types="node" />

/** A time span: milliseconds, or a duration such as "500ms", "30s", "30m", "1h30m", "2d". */
export type Duration = number | string;

/**
 * A job's body as given to add: a string or bytes (Buffer, Uint8Array) as
 * they are; any other value is sent as its JSON; undefined: empty.
 */
export type Body = unknown;

export interface ClientOptions {
  /**
   * The servers, "host:port" each ("a:7701,b:7701" or a list), tried in
   * order for failover; they must serve the same jobs (one Redis behind
   * them). Default: $DELAYQ_SERVER, else "127.0.0.1:7701".
   */
  servers?: string | string[];
  /** The servers' --auth-token, sent with AUTH on connect. Default: $DELAYQ_AUTH_TOKEN. */
  authToken?: string;
  /** Bound on each connect, ms. Default: 1000. */
  connectTimeoutMs?: number;
  /** A connection owing replies that answers nothing for this long is taken as broken, ms; also the most a withdrawn reserve waits for the server. Default: 5000. */
  requestTimeoutMs?: number;
  /**
   * Speak TLS to the servers (their --tls-cert-file), checking each one's
   * certificate against tlsCaFile (else Node's trust store) and against the
   * host of its address (a DNS name or an IP address SAN).
   * Default: $DELAYQ_TLS (1, yes, true: on; 0, no, false: off), else off.
   */
  tls?: boolean;
  /** With tls: the CA (PEM) that signs the servers' certificates. Default: $DELAYQ_CACERT, else Node's trust store. */
  tlsCaFile?: string;
  /** With tls: this client's certificate (PEM), for servers with --tls-ca-cert-file (mutual TLS); needs tlsKeyFile. Default: $DELAYQ_CERT. */
  tlsCertFile?: string;
  /** With tls: the key (PEM) of tlsCertFile. Default: $DELAYQ_KEY. */
  tlsKeyFile?: string;
}

export interface AddOptions {
  /** Due after this long (ms or a duration). Give at most one of delay and runAt. Default: due now. */
  delay?: Duration;
  /** Due at this time (a Date, or Unix ms). */
  runAt?: Date | number;
  /** Time to run: how long a reservation lasts (ms or a duration, >= 1 ms). Default: 60 s. */
  ttr?: Duration;
  /** 0..4294967295, lower first. Default: 1024. */
  priority?: number;
  /** Deliveries before the job is buried; 0: unlimited. Default: 0. */
  maxAttempts?: number;
  /** The job's id: 1-256 bytes, no control characters, unique among live jobs. Default: one the client makes. */
  id?: string;
  /** Adding a live id updates the job instead of failing with ExistsError. Default: false. */
  replace?: boolean;
  /** 1-64 bytes of [A-Za-z0-9_-]: makes the whole call safe to repeat. Default: one per call, made by the client. */
  idempotencyKey?: string;
}

export interface AddResult {
  id: string;
  state: 'delayed' | 'ready';
  runAtMs: number;
}

export interface ReserveOptions {
  /** How long to wait for a job when none is ready (ms or a duration, at most 1d). Default: 0 (answer at once). */
  wait?: Duration;
  /** Jobs at most, 1..1000. Default: 1. */
  count?: number;
  /** Bound on the bodies of one reply, bytes (0: the server's own). Default: 0. */
  maxBytes?: number;
  /** Withdraws a waiting reserve: jobs already on their way are given back, then the promise rejects with the signal's reason (within about requestTimeoutMs). */
  signal?: AbortSignal;
}

export interface ReleaseOptions {
  /** Due again after this long. Default: 0. */
  delay?: Duration;
  /** Kept as the job's last_error. */
  error?: string | Error;
}

export type JobState = 'delayed' | 'ready' | 'reserved' | 'buried';

/** A job handed out by a reserve: the RESP job array's ten fields. */
export class Delivery {
  readonly id: string;
  readonly topic: string;
  /** The job's bytes. */
  readonly body: Buffer;
  /** Proof of this delivery: finish, release, touch, bury and unreserve need it. */
  readonly receipt: string;
  /** Deliveries so far, this one included. */
  readonly attempts: number;
  readonly ttrMs: number;
  readonly priority: number;
  readonly runAtMs: number;
  /** Wall-clock estimate of the end of this reservation, Unix ms. */
  readonly reservedUntilMs: number;
  /** 0: unlimited. */
  readonly maxAttempts: number;
  /** Whether a release of this delivery buries the job (its max_attempts are used up). */
  readonly releaseBuries: boolean;
  /** The body as text (UTF-8 unless told). */
  text(encoding?: BufferEncoding): string;
  /** The body parsed as JSON. */
  json<T = any>(): T;
}

/** A job as get and peek show it: every field. */
export class Job {
  readonly id: string;
  readonly topic: string;
  readonly state: JobState;
  readonly body: Buffer;
  readonly priority: number;
  readonly ttrMs: number;
  readonly maxAttempts: number;
  readonly attempts: number;
  readonly createdAtMs: number;
  readonly runAtMs: number;
  readonly reservedUntilMs: number;
  /** Empty unless reserved. */
  readonly receipt: string;
  readonly lastError: string;
  text(encoding?: BufferEncoding): string;
  json<T = any>(): T;
}

/** What a delivery's id and receipt are read from. */
export interface DeliveryRef {
  id: string;
  receipt: string;
}

/** In place of a receipt: act on the job by id alone, whoever holds it (not repeated after a lost reply). */
export const FORCE: unique symbol;
export type Receipt = string | typeof FORCE;

export type AckKind = 'finish' | 'release' | 'bury';

export interface Ack {
  kind: AckKind;
  /** The delivery, or id and receipt. */
  job?: DeliveryRef;
  id?: string;
  receipt?: Receipt;
  /** release: due again after this long. Default: 0. */
  delay?: Duration;
  /** release: kept as last_error; bury: the reason. */
  error?: string;
}

export interface ServerStats {
  jobs: number;
  delayed: number;
  ready: number;
  reserved: number;
  buried: number;
  topics: number;
  waiting: number;
  added: number;
  replaced: number;
  reserves: number;
  finished: number;
  deleted: number;
  released: number;
  timedOut: number;
  buriedTotal: number;
  kicked: number;
  connections: number;
  /** The store's own figures and newer fields, camelCase. */
  [field: string]: number | string;
}

export interface TopicStats {
  topic: string;
  delayed: number;
  ready: number;
  reserved: number;
  buried: number;
  waiting: number;
  paused: boolean;
  /** -1: until resumed. */
  pausedForMs: number;
}

export class Client {
  /** The servers ("a:7701,b:7701" or a list), or the options. */
  constructor(options?: ClientOptions | string | string[]);
  /** The servers, "host:port", in the order tried. */
  readonly serverNames: string[];

  /** Adds a job. Repeated on the next server after a lost reply, never added twice. */
  add(topic: string, body?: Body, options?: AddOptions): Promise<AddResult>;
  /** Reserves up to `count` jobs of the topics, best first; [] when none came in time. Not repeated after a lost reply. */
  reserve(topics: string | string[], options?: ReserveOptions): Promise<Delivery[]>;
  /** Finishes a delivery: the job is gone. */
  finish(job: DeliveryRef): Promise<void>;
  finish(id: string, receipt: Receipt): Promise<void>;
  /** Gives a delivery back, due after `delay`; buried instead when its max_attempts are used up. */
  release(job: DeliveryRef, options?: ReleaseOptions): Promise<void>;
  release(id: string, receipt: Receipt, options?: ReleaseOptions): Promise<void>;
  /** Restarts the delivery's TTR from now. */
  touch(job: DeliveryRef): Promise<void>;
  touch(id: string, receipt: Receipt): Promise<void>;
  /** Sets the job aside (buried), `reason` as its last_error, until kicked. */
  bury(job: DeliveryRef, reason?: string | Error): Promise<void>;
  bury(id: string, receipt: Receipt, reason?: string | Error): Promise<void>;
  /** Gives back a delivery its holder never began: ready again at once, the attempt not counted. */
  unreserve(job: DeliveryRef): Promise<void>;
  unreserve(id: string, receipt: string): Promise<void>;
  /** Several finish / release / bury in one round trip: null (done) or the error, per ack. Never rejects. */
  acknowledge(acks: Ack[]): Promise<(DelayqError | null)[]>;
  /** Deletes a job in any state. Not repeated after a lost reply. */
  delete(id: string): Promise<void>;
  /** Makes a buried or delayed job ready. Not repeated after a lost reply. */
  kick(id: string): Promise<void>;
  /** Kicks up to `n` buried jobs of a topic; how many. Not repeated after a lost reply. */
  kickTopic(topic: string, n: number): Promise<number>;
  /** The job, every field; null when there is none. */
  get(id: string): Promise<Job | null>;
  /** The first job of a topic in that state; null when there is none. */
  peek(topic: string, state: 'ready' | 'delayed' | 'buried'): Promise<Job | null>;
  /** The server's figures. */
  stats(): Promise<ServerStats>;
  /** One topic's figures. */
  topicStats(topic: string): Promise<TopicStats>;
  /** Topics with jobs, waiting reserves or a pause, sorted. */
  topics(): Promise<string[]>;
  /** No jobs of the topic handed out for `duration` (0 or none: until resume). */
  pause(topic: string, duration?: Duration): Promise<void>;
  resume(topic: string): Promise<void>;
  /** "PONG" once a server answers. */
  ping(): Promise<string>;
  /** Any command as is (SCHEDULE, SUBSCRIPTION, ...): the reply as text. Not repeated after a lost reply. */
  command(name: string, ...args: (string | number | Buffer)[]): Promise<unknown>;
  /** Closes every connection; calls already made are still sent. Waiting reserves and later calls reject with UnavailableError. */
  close(): Promise<void>;
}

export interface Backoff {
  /** >= 0. Default: 1000. */
  baseMs?: number;
  /** >= 1. Default: 2. */
  factor?: number;
  /** >= baseMs. Default: 600000 (10 min). */
  capMs?: number;
}

export interface HandleOptions {
  /** Handlers of this topic at once, at most the worker's concurrency. Default (0): the worker's. */
  concurrency?: number;
  /** Retries' backoff. Default: 1 s, x2, at most 10 min. */
  backoff?: Backoff;
}

export interface WorkerOptions {
  /** Handlers running at once, over all topics, 1..1024. Default: 4. */
  concurrency?: number;
  /** How long one reserve waits for a job before the worker asks again. Default: 30 s. */
  reserveWait?: Duration;
  /** After a reserve fails, ask again after this (ms), doubling up to 5 s. Default: 100. */
  reserveRetryMs?: number;
  /** The backoff's jitter: a number in [0, 1] per retry. Default: Math.random. */
  random?: () => number;
  /**
   * Called once per handler outcome with the server's final answer to its
   * ack: null (accepted), or the error (not_found / stale_receipt: the job
   * was no longer this delivery's; or, when stop's drain ended first, the
   * last transient error). A release accepted for which job.releaseBuries
   * is true left the job buried. Not called for jobs stop gave back.
   */
  onAcknowledged?: (job: Delivery, kind: AckKind, error: DelayqError | null) => void;
  /** Called for each call of the worker that failed (reserve, touch, ack tries), e.g. to log it. */
  onError?: (error: Error) => void;
}

export interface StopOptions {
  /** How long running handlers may finish. Default: 30 s. */
  drain?: Duration;
}

export interface RunOptions extends StopOptions {
  /** Default: ["SIGTERM", "SIGINT"]. */
  signals?: NodeJS.Signals[];
}

export interface WorkerStats {
  /** Handlers that returned or threw. */
  handled: number;
  /** ... with success, and the finish was accepted. */
  succeeded: number;
  /** ... with a retry or an error, released. */
  retried: number;
  /** ... of those, the ones the server buried: their max_attempts were used up. */
  exhausted: number;
  /** ... with bury, and buried. */
  buried: number;
  /** Touches accepted. */
  touched: number;
  /** Handlers running now. */
  running: number;
  /** Jobs reserved and not yet started. */
  held: number;
  /** Reserves made. */
  reserves: number;
  /** Ack pipelines sent (each carries 1 or more outcomes). */
  ackBatches: number;
  /** Jobs given back by stop (unreserve or release). */
  givenBack: number;
  /** Calls of the worker that failed, and the last one's error. */
  errors: number;
  lastError: string;
}

/**
 * What a handler returns: nothing (or any value that is not an Outcome or
 * an Error) for success, an Outcome, or an Error (a retry with its message).
 */
export type HandlerResult = unknown;
export type Handler = (job: Delivery) => HandlerResult | Promise<HandlerResult>;

/** What a handler decided. Returning nothing means success; a throw is a retry with its message. */
export class Outcome {
  readonly kind: 'success' | 'retry' | 'bury';
  /** retry: the delay asked for, ms; -1: the topic's backoff. */
  readonly delayMs: number;
  /** retry: the error; bury: the reason. */
  readonly text: string;
  static success(): Outcome;
  /** Again after the topic's backoff; `error` becomes the job's last_error. */
  static retry(error?: string | Error): Outcome;
  /** Again after `delay`. */
  static retryIn(delay: Duration, error?: string | Error): Outcome;
  /** Buried, `reason` as its last_error, until kicked. */
  static bury(reason?: string | Error): Outcome;
}

export class Worker {
  constructor(client: Client, options?: WorkerOptions);
  /** Registers the handler of a topic. Before start. */
  handle(topic: string, handler: Handler, options?: HandleOptions): this;
  /** Starts reserving and running handlers. */
  start(): Promise<void>;
  /** Starts, stops on SIGTERM / SIGINT (a second one cuts the drain short), resolves once stopped. */
  run(options?: RunOptions): Promise<void>;
  /** Opt-in: stop on these signals. Returns a function that removes the handlers. */
  stopOnSignals(options?: RunOptions): () => void;
  /**
   * No more reserves; jobs not started given back (unreserve); running
   * handlers drained up to `drain`, touched meanwhile; the rest released
   * with delay 0 and error "worker stopped while the handler ran".
   */
  stop(options?: StopOptions): Promise<void>;
  /** Resolves once the worker has stopped. */
  wait(): Promise<void>;
  stats(): WorkerStats;
}

/** The backoff of the n-th attempt with `random` in [0, 1], as the C++ worker's BackoffDelayMs. */
export function backoffDelayMs(backoff: Required<Backoff>, attempts: number, random: number): number;

/** The error the worker releases a job with when stop's drain ends before its handler. */
export const STOPPED_ERROR: string;

/** Milliseconds of a duration string such as "1h30m"; InvalidArgumentError naming `field`. */
export function parseDuration(text: string, field: string): number;

export type ErrorCode =
  | 'invalid_argument' | 'not_found' | 'exists' | 'stale_receipt' | 'not_reserved'
  | 'too_large' | 'unauthorized' | 'unavailable' | 'internal';

export class DelayqError extends Error {
  readonly code: ErrorCode;
}
export class InvalidArgumentError extends DelayqError { readonly code: 'invalid_argument'; }
export class NotFoundError extends DelayqError { readonly code: 'not_found'; }
export class ExistsError extends DelayqError { readonly code: 'exists'; }
export class StaleReceiptError extends DelayqError { readonly code: 'stale_receipt'; }
export class NotReservedError extends DelayqError { readonly code: 'not_reserved'; }
export class TooLargeError extends DelayqError { readonly code: 'too_large'; }
export class UnauthorizedError extends DelayqError { readonly code: 'unauthorized'; }
export class UnavailableError extends DelayqError {
  readonly code: 'unavailable';
  /** True when a server ended a waiting reserve because it is stopping. */
  readonly shuttingDown: boolean;
}
export class InternalError extends DelayqError { readonly code: 'internal'; }
