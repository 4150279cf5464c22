// delayq for Node: a client of `delayq serve` over RESP (ioredis) and a
// worker that runs handlers over it. See README.md.
export { Client, FORCE, Delivery, Job } from './lib/client.js';
export { Worker, Outcome, backoffDelayMs, STOPPED_ERROR } from './lib/worker.js';
export {
  DelayqError, InvalidArgumentError, NotFoundError, ExistsError, StaleReceiptError,
  NotReservedError, TooLargeError, UnauthorizedError, UnavailableError, InternalError,
} from './lib/errors.js';
export { parseDuration } from './lib/validate.js';
