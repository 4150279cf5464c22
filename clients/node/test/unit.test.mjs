// What needs no server: the backoff formula, durations, the checks made
// before anything is sent (against a client whose server does not exist:
// an InvalidArgumentError, not an UnavailableError, shows nothing was sent).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  Client, Worker, Outcome, FORCE, backoffDelayMs, parseDuration, InvalidArgumentError, DelayqError,
  NotFoundError, UnavailableError,
} from '../index.js';
import { freePort } from './support/servers.mjs';

const B = { baseMs: 1000, factor: 2, capMs: 600_000 };

test('backoff: the first retry waits base exactly, later ones are jittered to [d/2, d], never below base nor above cap', () => {
  assert.equal(backoffDelayMs(B, 1, 0), 1000);
  assert.equal(backoffDelayMs(B, 1, 1), 1000);
  assert.equal(backoffDelayMs(B, 0, 0.7), 1000);      // 0 is read as 1
  assert.equal(backoffDelayMs(B, 2, 0), 1000);        // d = 2000: [1000, 2000]
  assert.equal(backoffDelayMs(B, 2, 1), 2000);
  assert.equal(backoffDelayMs(B, 3, 0.5), 3000);      // d = 4000: 2000 + 0.5 * 2000
  assert.equal(backoffDelayMs(B, 40, 1), 600_000);    // capped
  assert.equal(backoffDelayMs(B, 40, 0), 300_000);
  assert.equal(backoffDelayMs(B, 5000, 0.5), 450_000);  // factor^n overflows: the cap
  assert.equal(backoffDelayMs({ baseMs: 0, factor: 2, capMs: 0 }, 9, 1), 0);
  assert.equal(backoffDelayMs(B, 3, NaN), 2000);       // NaN reads as 0
  assert.equal(backoffDelayMs(B, 3, 7), 4000);         // clamped to 1
  assert.equal(backoffDelayMs({ baseMs: 1000, factor: 1, capMs: 5000 }, 9, 0), 1000);  // never below base
});

test('durations are read as the server reads them', () => {
  assert.equal(parseDuration('0', 'delay'), 0);
  assert.equal(parseDuration('1500ms', 'delay'), 1500);
  assert.equal(parseDuration('5s', 'delay'), 5000);
  assert.equal(parseDuration('30m', 'delay'), 1_800_000);
  assert.equal(parseDuration('1h30m', 'delay'), 5_400_000);
  assert.equal(parseDuration('2d', 'delay'), 172_800_000);
  const bad = (text, re) => assert.throws(() => parseDuration(text, 'delay'), e => e instanceof InvalidArgumentError && re.test(e.message));
  bad('5 min', /^delay: unknown unit ' min' in '5 min': write 5m \(the units are ms, s, m, h and d/);
  bad('30sec', /write 30s/);
  bad('1.5s', /^delay: a fraction/);
  bad('-5s', /^delay: a negative duration in '-5s'/);
  bad('5', /^delay: no unit after 5/);
  bad('', /^delay: nothing/);
  bad('soon', /^delay: a number expected at 'soon'/);
  bad('40000d', /more than 100 years/);
});

test('Outcome: the kinds a handler can return', () => {
  assert.equal(Outcome.success().kind, 'success');
  assert.deepEqual({ ...Outcome.retry(new Error('boom')) }, { kind: 'retry', delayMs: -1, text: 'boom' });
  assert.deepEqual({ ...Outcome.retryIn('5s', 'later') }, { kind: 'retry', delayMs: 5000, text: 'later' });
  assert.deepEqual({ ...Outcome.retryIn(-1) }, { kind: 'retry', delayMs: -1, text: '' });
  assert.deepEqual({ ...Outcome.bury('bad input') }, { kind: 'bury', delayMs: -1, text: 'bad input' });
  assert.throws(() => Outcome.retryIn('soon'), InvalidArgumentError);
});

test('bad input is refused before anything is sent, naming the field', async () => {
  // Nothing listens there: a request that went out would fail with UnavailableError.
  const client = new Client({ servers: `127.0.0.1:${await freePort()}` });
  const refused = async (call, re) => {
    await assert.rejects(call, e => {
      assert.ok(e instanceof InvalidArgumentError, `${e.constructor.name}: ${e.message}`);
      assert.equal(e.code, 'invalid_argument');
      assert.ok(e instanceof DelayqError);
      assert.match(e.message, re);
      return true;
    });
  };
  await refused(() => client.add('', 'x'), /^topic: required, 1-200 bytes of \[A-Za-z0-9._:-\]/);
  await refused(() => client.add(undefined, 'x'), /^topic: required/);
  await refused(() => client.add('orders close', 'x'), /^topic: only \[A-Za-z0-9._:-\] allowed, found byte 0x20$/);
  await refused(() => client.add('t'.repeat(201), 'x'), /^topic: 201 bytes, at most 200 allowed/);
  await refused(() => client.add('t', 'x', { delay: -1 }), /^delay: must be >= 0, got -1$/);
  await refused(() => client.add('t', 'x', { delay: '5 min' }), /^delay: unknown unit/);
  await refused(() => client.add('t', 'x', { delay: 1000, runAt: new Date() }), /^delay and runAt: give one, not both/);
  await refused(() => client.add('t', 'x', { runAt: 1795659700 }), /^runAt: 1795659700 is before 2001-09-09 — it looks like seconds; give milliseconds \(1795659700000\)/);
  await refused(() => client.add('t', 'x', { runAt: new Date(NaN) }), /^runAt: an invalid Date/);
  await refused(() => client.add('t', 'x', { ttr: 0 }), /^ttr: must be >= 1, got 0/);
  await refused(() => client.add('t', 'x', { ttr: '0' }), /^ttr: at least 1ms/);
  await refused(() => client.add('t', 'x', { priority: -1 }), /^priority: must be >= 0, got -1/);
  await refused(() => client.add('t', 'x', { priority: 2 ** 32 }), /^priority: must be <= 4294967295, got 4294967296/);
  await refused(() => client.add('t', 'x', { priority: 1.5 }), /^priority: expected an integer 0..4294967295/);
  await refused(() => client.add('t', 'x', { maxAttempts: -2 }), /^maxAttempts: must be >= 0/);
  await refused(() => client.add('t', 'x', { id: '' }), /^id: must not be empty/);
  await refused(() => client.add('t', 'x', { id: 'a\nb' }), /^id: control characters are not allowed/);
  await refused(() => client.add('t', 'x', { id: '*' }), /^id: '\*' asks the server for a generated id/);
  await refused(() => client.add('t', 'x', { idempotencyKey: 'no spaces' }), /^idempotencyKey: only \[A-Za-z0-9_-\] allowed/);
  await refused(() => client.add('t', 'x', { replace: 'yes' }), /^replace: expected true or false/);
  await refused(() => client.reserve([]), /^topics: give at least one topic/);
  await refused(() => client.reserve('t', { count: 0 }), /^count: must be >= 1, got 0/);
  await refused(() => client.reserve('t', { count: 1001 }), /^count: must be <= 1000, got 1001/);
  await refused(() => client.reserve('t', { wait: '2d' }), /^wait: at most 1d/);
  await refused(() => client.reserve('t', { wait: -5 }), /^wait: must be >= 0, got -5/);
  await refused(() => client.reserve(['ok', 'not ok']), /^topic: only .* found byte 0x20/);
  await refused(() => client.finish('job-1', '0123'), /^receipt: expected the 24 hex digits a reserve hands out, got 4 characters$/);
  await refused(() => client.finish('job-1', 'z'.repeat(24)), /got 24 characters, not all hex digits/);
  await refused(() => client.finish('job-1'), /^receipt: required/);
  await refused(() => client.release({ id: 'job-1', receipt: 'x' }), /^receipt: expected the 24 hex digits/);
  await refused(() => client.release('job-1', '0123456789abcdef01234567', { delay: '1 hour' }), /^delay: unknown unit ' hour' in '1 hour': write 1h/);
  await refused(() => client.unreserve('job-1', FORCE), /^receipt: unreserve needs the delivery's receipt, not FORCE/);
  await refused(() => client.kickTopic('t', -1), /^n: must be >= 0/);
  await refused(() => client.pause('t', -1), /^duration: must be >= 0/);
  await refused(() => client.peek('t', 'reserved'), /^state: peek shows 'ready', 'delayed' or 'buried' jobs/);
  await refused(() => client.delete(''), /^id: must not be empty/);
  // ...while a good request does go out, and finds no server.
  await assert.rejects(client.add('t', 'x'), e => e instanceof UnavailableError && /^no delayq server answered: 127\.0\.0\.1:\d+ \(/.test(e.message));
  await client.close();
});

test('options are checked when the client and the worker are made', async () => {
  assert.throws(() => new Client({ servers: 'a:1,,b:2' }), /^InvalidArgumentError: servers: empty address/);
  assert.throws(() => new Client({ servers: 'host:99999' }), /servers: bad address 'host:99999'/);
  assert.throws(() => new Client({ authToken: '' }), /authToken: expected a non-empty string/);
  assert.throws(() => new Client({ requestTimeoutMs: 0 }), /requestTimeoutMs: must be >= 1/);
  const client = new Client('127.0.0.1:1,127.0.0.1');
  assert.deepEqual(client.serverNames, ['127.0.0.1:1', '127.0.0.1:7701']);
  assert.throws(() => new Worker(client, { concurrency: 0 }), /concurrency: must be >= 1/);
  assert.throws(() => new Worker(client, { reserveWait: '2d' }), /reserveWait: at most 1d/);
  const w = new Worker(client);
  assert.throws(() => w.handle('bad topic', () => {}), /topic: only/);
  assert.throws(() => w.handle('t', 'not a function'), /handler of topic 't': expected a function/);
  assert.throws(() => w.handle('t', () => {}, { backoff: { factor: 0.5 } }), /backoff.factor: must be a finite number >= 1/);
  assert.throws(() => w.handle('t', () => {}, { backoff: { baseMs: 10, capMs: 5 } }), /backoff.capMs: must be >= backoff.baseMs/);
  w.handle('t', () => {});
  assert.throws(() => w.handle('t', () => {}), /topic 't' already has a handler/);
  await assert.rejects(new Worker(client).start(), /no handlers: call handle\(\) before start\(\)/);
  await w.stop();  // never started: nothing to do
  await client.close();
});

test('DELAYQ_SERVER and DELAYQ_AUTH_TOKEN are the defaults', () => {
  const saved = { s: process.env.DELAYQ_SERVER, t: process.env.DELAYQ_AUTH_TOKEN };
  try {
    process.env.DELAYQ_SERVER = '10.0.0.5:7701,10.0.0.6';
    delete process.env.DELAYQ_AUTH_TOKEN;
    assert.deepEqual(new Client().serverNames, ['10.0.0.5:7701', '10.0.0.6:7701']);
    delete process.env.DELAYQ_SERVER;
    assert.deepEqual(new Client().serverNames, ['127.0.0.1:7701']);
    assert.deepEqual(new Client(['a:1', 'b:2']).serverNames, ['a:1', 'b:2']);
  } finally {
    if (saved.s === undefined) delete process.env.DELAYQ_SERVER; else process.env.DELAYQ_SERVER = saved.s;
    if (saved.t !== undefined) process.env.DELAYQ_AUTH_TOKEN = saved.t;
  }
  assert.ok(new NotFoundError('x') instanceof DelayqError);
});
