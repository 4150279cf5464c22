// Checks made before anything is sent, with the server's wording where it
// has one and always naming the field the caller gave ("topic: required",
// "delay: must be >= 0, got -1"). Each throws InvalidArgumentError.
import { InvalidArgumentError } from './errors.js';

export const MAX_DELAY_MS = 100 * 365 * 24 * 3600 * 1000;  // 100 years, as the server
export const MIN_RUN_AT_MS = 1_000_000_000_000;            // 2001-09-09: below is seconds
export const MAX_RUN_AT_MS = 253_402_300_799_999;          // 9999-12-31
export const MAX_U32 = 4_294_967_295;
export const MAX_WAIT_MS = 86_400_000;                     // RESERVE TIMEOUT: at most 1d
export const MAX_RESERVE_COUNT = 1000;
export const MAX_RESERVE_TOPICS = 100;

const bad = message => new InvalidArgumentError(message);

// [A-Za-z0-9._:-], by byte.
const NAME_CHAR = new Uint8Array(256);
for (const c of 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-') {
  NAME_CHAR[c.charCodeAt(0)] = 1;
}
const checkedTopics = new Set();  // names already found valid: the worker's, a producer's

/** @param {unknown} topic @param {string} [field] */
export function checkTopic(topic, field = 'topic') {
  if (checkedTopics.has(topic)) return;
  if (typeof topic !== 'string' || topic.length === 0) {
    if (topic === undefined || topic === null || topic === '') {
      throw bad(`${field}: required, 1-200 bytes of [A-Za-z0-9._:-]`);
    }
    throw bad(`${field}: expected a string, got ${describe(topic)}`);
  }
  const bytes = Buffer.from(topic, 'utf8');
  if (bytes.length > 200) throw bad(`${field}: ${bytes.length} bytes, at most 200 allowed`);
  for (const b of bytes) {
    if (!NAME_CHAR[b]) {
      throw bad(`${field}: only [A-Za-z0-9._:-] allowed, found byte 0x${b.toString(16).padStart(2, '0')}`);
    }
  }
  if (checkedTopics.size < 10_000) checkedTopics.add(topic);
}

/** A job id given by the caller: 1-256 bytes, no control characters. */
export function checkId(id, field = 'id') {
  if (typeof id !== 'string') throw bad(`${field}: expected a string, got ${describe(id)}`);
  if (id.length === 0) throw bad(`${field}: must not be empty`);
  const n = Buffer.byteLength(id, 'utf8');
  if (n > 256) throw bad(`${field}: ${n} bytes, at most 256 allowed`);
  for (let i = 0; i < id.length; i++) {
    const c = id.charCodeAt(i);
    if (c < 0x20 || c === 0x7f) throw bad(`${field}: control characters are not allowed`);
  }
}

const HEX24 = /^[0-9a-fA-F]{24}$/;
/** A delivery's receipt: the 24 hex digits a reserve hands out. */
export function checkReceipt(receipt) {
  if (receipt === undefined || receipt === null || receipt === '') {
    throw bad('receipt: required — the receipt from the reserve that handed the job out ' +
      '(FORCE in its place acts by id alone)');
  }
  if (typeof receipt !== 'string') throw bad(`receipt: expected a string, got ${describe(receipt)}`);
  if (HEX24.test(receipt)) return;
  const got = receipt.length === 24 ? '24 characters, not all hex digits' : `${receipt.length} characters`;
  throw bad(`receipt: expected the 24 hex digits a reserve hands out, got ${got}`);
}

/** An idempotency key: 1-64 bytes of [A-Za-z0-9_-]. */
export function checkIdempotencyKey(key, field = 'idempotencyKey') {
  if (typeof key !== 'string') throw bad(`${field}: expected a string, got ${describe(key)}`);
  if (key.length === 0 || key.length > 64) throw bad(`${field}: 1-64 bytes, got ${key.length}`);
  if (!/^[A-Za-z0-9_-]+$/.test(key)) throw bad(`${field}: only [A-Za-z0-9_-] allowed`);
}

/** A whole number in [min, max], or the error naming `field`. */
export function checkInt(value, field, min, max) {
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    throw bad(`${field}: expected an integer ${min}..${max}, got ${describe(value)}`);
  }
  if (value < min) throw bad(`${field}: must be >= ${min}, got ${value}`);
  if (value > max) throw bad(`${field}: must be <= ${max}, got ${value}`);
  return value;
}

// --- durations ---------------------------------------------------------------------
// As the server reads them (docs/api.md, "Durations"): one or more groups
// of a whole number and a unit (ms, s, m, h, d), "0" alone without one.
const UNITS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const ALIASES = {
  msec: 'ms', msecs: 'ms', millis: 'ms', millisecond: 'ms', milliseconds: 'ms', sec: 's',
  secs: 's', second: 's', seconds: 's', min: 'm', mins: 'm', minute: 'm', minutes: 'm',
  hr: 'h', hrs: 'h', hour: 'h', hours: 'h', day: 'd', days: 'd',
};
const EXAMPLES = '1500ms, 5s, 30m, 2h, 1d, or 1h30m';
const durationCache = new Map();  // text -> ms, for the few strings a program repeats

/**
 * Milliseconds from a duration string ("30m", "1h30m", "1500ms").
 * @param {string} text @param {string} field
 */
export function parseDuration(text, field) {
  const cached = durationCache.get(text);
  if (cached !== undefined) return cached;
  const whyBad = why => bad(`${field}: ${why} in '${text}' (a duration is a whole number and a unit: ${EXAMPLES})`);
  if (text === '') throw whyBad('nothing');
  let total = 0;
  if (text !== '0') {
    const group = /(\d*)(\D*)/y;
    let at = 0;
    while (at < text.length) {
      group.lastIndex = at;
      const [all, digits, word] = group.exec(text);
      if (digits === '') {
        if (text[at] === '-') throw whyBad('a negative duration');
        throw whyBad(`a number expected at '${text.slice(at)}'`);
      }
      if (word === '') throw whyBad(`no unit after ${digits}`);
      if (word[0] === '.') throw whyBad('a fraction (use a smaller unit: 1500ms, 90s)');
      const unit = UNITS[word];
      if (unit === undefined) {
        const right = respelled(text);
        throw bad(`${field}: unknown unit '${word}' in '${text}'` +
          (right && right !== text ? `: write ${right}` : '') +
          ` (the units are ms, s, m, h and d: ${EXAMPLES})`);
      }
      total += Number(digits) * unit;
      if (total > MAX_DELAY_MS) throw whyBad('more than 100 years');
      at += all.length;
    }
  }
  if (durationCache.size < 1000) durationCache.set(text, total);
  return total;
}

// "1hour30mins" -> "1h30m"; '' when some group is not a number and a unit.
function respelled(text) {
  let out = '';
  for (const [, digits, word] of text.matchAll(/(\d*)(\D*)/g)) {
    if (digits === '' && word === '') continue;
    if (digits === '') return '';
    const name = word.trim().toLowerCase();
    const unit = UNITS[name] !== undefined ? name : ALIASES[name];
    if (unit === undefined) return '';
    out += digits + unit;
  }
  return out;
}

/**
 * A time span given as milliseconds (a number) or a duration string, as
 * whole milliseconds within [min, max].
 */
export function toMs(value, field, min = 0, max = MAX_DELAY_MS) {
  let ms;
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw bad(`${field}: expected milliseconds or a duration such as "5s", got ${value}`);
    if (value < min) throw bad(`${field}: must be >= ${min}, got ${value}`);
    ms = Math.round(value);
  } else if (typeof value === 'string') {
    ms = parseDuration(value, field);
    if (ms < min) throw bad(`${field}: at least ${min}ms`);
  } else {
    throw bad(`${field}: expected milliseconds (a number) or a duration such as "5s" or "30m", got ${describe(value)}`);
  }
  if (ms > max) throw bad(`${field}: at most ${max === MAX_DELAY_MS ? '100 years' : max === MAX_WAIT_MS ? '1d' : `${max} ms`}, got ${value}`);
  return ms;
}

/** A point in time (a Date, or Unix milliseconds) as Unix ms, for ADD's AT. */
export function toUnixMs(value, field) {
  let ms;
  if (value instanceof Date) {
    ms = value.getTime();
    if (Number.isNaN(ms)) throw bad(`${field}: an invalid Date`);
  } else if (typeof value === 'number' && Number.isInteger(value)) {
    ms = value;
  } else {
    throw bad(`${field}: expected a Date or Unix milliseconds, got ${describe(value)}`);
  }
  if (ms >= 0 && ms < MIN_RUN_AT_MS) {
    throw bad(`${field}: ${ms} is before 2001-09-09 — it looks like seconds; give milliseconds (${ms}000)`);
  }
  if (ms < MIN_RUN_AT_MS || ms > MAX_RUN_AT_MS) {
    throw bad(`${field}: must be between ${MIN_RUN_AT_MS} (2001-09-09) and ${MAX_RUN_AT_MS} (9999-12-31) in Unix ms, got ${ms}`);
  }
  return ms;
}

/** @param {unknown} v */
export function describe(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'string') return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v);
  if (typeof v === 'object') return `an ${v.constructor?.name ?? 'object'}`;
  return `${typeof v} ${String(v)}`;
}
