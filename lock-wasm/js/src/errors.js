// Errors and the checks at the JS boundary: what a caller passes is checked here, with a
// TypeError/RangeError, before anything reaches the engine. Refusals of the core are LockErrors.

/** The code of the error that rejects `Locks.acquire` when its wait timed out (the core's event name). */
export const WAIT_TIMED_OUT = 'wait-timed-out';

/**
 * The code of the error that `Locks.tryAcquire` throws when this owner is already waiting for the
 * key in a pending `acquire` (the core's outcome name; the Rust host's `Error::AlreadyWaiting`).
 */
export const ALREADY_WAITING = 'already-waiting';

/** The code of the error of a call on a closed `Locks`, and of the acquires pending when it closed. */
export const CLOSED = 'closed';

/** A lock error: `code` is the WIT contract's kebab-case name (`held`, `not-owner`, ...). */
export class LockError extends Error {
  /** @type {'LockError'} */
  name = 'LockError';

  /**
   * @param {import('../index.d.ts').LockError['code']} code
   * @param {string} message
   * @param {Record<string, number | string>} [details]
   * @param {{cause?: unknown, result?: unknown}} [extra] the error that caused it (`cause`), or
   *   the value a callback returned before the lease turned out lost (`result`)
   */
  constructor(code, message, details = {}, extra = {}) {
    super(message, 'cause' in extra ? { cause: extra.cause } : undefined);
    this.code = code;
    this.details = details;
    if ('result' in extra) this.result = extra.result;
  }
}

/**
 * A store error: the store could not answer (`code` as the Rust `StoreError::code`: `connect`,
 * `lost`, `schema`, `no-namespace`, `contention`, `not-compiled`, ...). Lock refusals are never
 * StoreErrors: they are LockErrors.
 */
export class StoreError extends Error {
  /** @type {'StoreError'} */
  name = 'StoreError';

  /**
   * @param {import('../index.d.ts').StoreErrorCode} code
   * @param {string} message
   * @param {{cause?: unknown, until?: number}} [extra] `until`: for `recovering`, the store's
   *   time (ms) from which it grants again
   */
  constructor(code, message, extra = {}) {
    super(message, 'cause' in extra ? { cause: extra.cause } : undefined);
    this.code = code;
    if ('until' in extra) this.until = extra.until;
  }
}

// ----- boundary checks ----------------------------------------------------------------------

export function describe(value) {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'bigint') return `${value}n (a BigInt; pass a number)`;
  return String(value);
}

/** A non-negative safe integer number of milliseconds (or a count), or a RangeError/TypeError. */
export function ms(name, value) {
  if (typeof value !== 'number') {
    throw new TypeError(`${name} must be a number of milliseconds, got ${typeof value} ${describe(value)}`);
  }
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new RangeError(`${name} must be a non-negative integer no larger than Number.MAX_SAFE_INTEGER, got ${describe(value)}`);
  }
  return value;
}

/**
 * Checks that `now + ttl`, the deadline a grant or an extension gets, is a safe integer: a later
 * one could not be reported exactly. A RangeError otherwise (nothing changes).
 */
export function deadlineOf(now, ttl) {
  if (now + ttl > Number.MAX_SAFE_INTEGER) {
    throw new RangeError(`now + ttl (${now} + ${ttl}) is past Number.MAX_SAFE_INTEGER: the deadline could not be a JS number`);
  }
}

/** A string that converts to UTF-8 without loss (the core checks emptiness, length, characters). */
export function text(name, value) {
  if (typeof value !== 'string') {
    throw new TypeError(`${name} must be a string, got ${typeof value} ${describe(value)}`);
  }
  if (!value.isWellFormed()) {
    throw new TypeError(`${name} contains a lone surrogate and cannot be encoded as UTF-8`);
  }
  return value;
}
