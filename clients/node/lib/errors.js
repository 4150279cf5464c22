// Errors: one base class, DelayqError, with the server's error code
// (docs/api.md §6) in `code`, and one subclass per code, so callers test
// `err instanceof StaleReceiptError` (or `err.code === 'stale_receipt'`)
// instead of parsing messages. The message is the server's text, without
// its RESP prefix ("-NOTFOUND job 'x' does not exist" becomes a
// NotFoundError whose message is "job 'x' does not exist").

export class DelayqError extends Error {
  /** @param {string} message @param {string} [code] */
  constructor(message, code = 'internal') {
    super(message);
    this.name = new.target.name;
    this.code = new.target.code ?? code;  // a subclass's code, whatever the second argument says
  }
}

// One class per code: the class's static `code` is its errors' `code`.
export class InvalidArgumentError extends DelayqError { static code = 'invalid_argument'; }
export class NotFoundError extends DelayqError { static code = 'not_found'; }
export class ExistsError extends DelayqError { static code = 'exists'; }
export class StaleReceiptError extends DelayqError { static code = 'stale_receipt'; }
export class NotReservedError extends DelayqError { static code = 'not_reserved'; }
export class TooLargeError extends DelayqError { static code = 'too_large'; }
export class UnauthorizedError extends DelayqError { static code = 'unauthorized'; }
// The server cannot serve now (its store is unreachable, it is shutting
// down), no server answered, or a reply was lost in a way that makes the
// request unsafe to repeat ("... the request was sent and may have run").
export class UnavailableError extends DelayqError {
  static code = 'unavailable';
  /** True when a server ended a waiting reserve because it is stopping. */
  get shuttingDown() { return this.message.startsWith(SHUTTING_DOWN); }
}
export class InternalError extends DelayqError { static code = 'internal'; }

// How a server's "going away" answer to a waiting reserve begins.
export const SHUTTING_DOWN = 'shutting down';

// RESP error prefix -> error class. -ERR, and any prefix not here, is internal.
const BY_PREFIX = {
  INVALID: InvalidArgumentError,
  NOTFOUND: NotFoundError,
  EXISTS: ExistsError,
  STALE: StaleReceiptError,
  NOTRESERVED: NotReservedError,
  TOOLARGE: TooLargeError,
  NOAUTH: UnauthorizedError,
  UNAVAILABLE: UnavailableError,
};

/**
 * The typed error of a RESP error reply's text ("NOTFOUND job 'x' does not
 * exist", as ioredis's ReplyError carries it).
 * @param {string} text
 */
export function errorFromReply(text) {
  const space = text.indexOf(' ');
  const prefix = space < 0 ? text : text.slice(0, space);
  const Type = BY_PREFIX[prefix];
  if (Type === undefined) return new InternalError(text);  // "ERR unknown command ..." kept whole
  return new Type(space < 0 ? '' : text.slice(space + 1));
}

/** @param {unknown} err */
export function isUnavailable(err) {
  return err instanceof UnavailableError;
}
