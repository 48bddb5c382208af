// The public API of the package: LockError, LockTable (the core, every call takes `now`),
// Locks / Lease (the same table on the real clock, with waiting, keep-alive and lost-lock
// notification). Every outcome and error is decided by lock-core inside the engine; this file
// checks JS types at the boundary, translates values, and runs the one timer of a Locks.

import { RawTable, defaultLimitsJson, errorCodesJson, outcomeNamesJson } from '../engine/lock_wasm.js';
import { memory } from './engine.js';

/** The code of the error that rejects `Locks.acquire` when its wait timed out (the core's event name). */
export const WAIT_TIMED_OUT = 'wait-timed-out';

/** A lock error: `code` is the WIT contract's kebab-case name (`held`, `not-owner`, ...). */
export class LockError extends Error {
  constructor(code, message, details = {}) {
    super(message);
    this.name = 'LockError';
    this.code = code;
    this.details = details;
  }
}

// ----- boundary checks ----------------------------------------------------------------------

function describe(value) {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'bigint') return `${value}n (a BigInt; pass a number)`;
  return String(value);
}

/** A non-negative safe integer number of milliseconds (or a count), or a RangeError/TypeError. */
function ms(name, value) {
  if (typeof value !== 'number') {
    throw new TypeError(`${name} must be a number of milliseconds, got ${typeof value} ${describe(value)}`);
  }
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new RangeError(`${name} must be a non-negative integer no larger than Number.MAX_SAFE_INTEGER, got ${describe(value)}`);
  }
  return value;
}

/** A string that converts to UTF-8 without loss (the core checks emptiness, length, characters). */
function text(name, value) {
  if (typeof value !== 'string') {
    throw new TypeError(`${name} must be a string, got ${typeof value} ${describe(value)}`);
  }
  if (!value.isWellFormed()) {
    throw new TypeError(`${name} contains a lone surrogate and cannot be encoded as UTF-8`);
  }
  return value;
}

// ----- names and limits, from the engine ------------------------------------------------------

let outcomeNames = null;
let codes = null;
/** Byte lengths of the key and owner just written (avoids an array per call). */
const KEY_OWNER = new Uint32Array(2);

function errorCodes() {
  if (codes === null) codes = JSON.parse(errorCodesJson());
  return codes;
}
let defaults = null;

function names() {
  if (outcomeNames === null) outcomeNames = JSON.parse(outcomeNamesJson());
  return outcomeNames;
}

function defaultLimits() {
  if (defaults === null) defaults = Object.freeze(JSON.parse(defaultLimitsJson()));
  return defaults;
}

function limitValues(limits) {
  if (limits === null || typeof limits !== 'object') {
    throw new TypeError(`limits must be an object, got ${describe(limits)}`);
  }
  const d = defaultLimits();
  for (const name of Object.keys(limits)) {
    if (!Object.hasOwn(d, name)) {
      throw new TypeError(`unknown limit ${JSON.stringify(name)}; known: ${Object.keys(d).join(', ')}`);
    }
  }
  return Float64Array.from(Object.keys(d), (name) => (limits[name] === undefined ? d[name] : ms(`limits.${name}`, limits[name])));
}

// ----- LockTable ---------------------------------------------------------------------------------

const FAILED = 0;
const FIRST_OUTCOME = 2;

// Views of the engine's memory. Growing a WebAssembly memory detaches its old buffer (the views
// then have length 0), which is cheaper to test on every call than comparing buffers.
let view = new Float64Array(0);
let bytes = new Uint8Array(0);

/** The engine memory as f64. */
function f64() {
  if (view.length === 0) view = new Float64Array(memory().buffer);
  return view;
}

/** The engine memory as bytes. */
function u8() {
  if (bytes.length === 0) bytes = new Uint8Array(memory().buffer);
  return bytes;
}

const encoder = new TextEncoder();

/**
 * Writes `value` as UTF-8 at `at` in `mem` (room for 3 bytes per UTF-16 unit is reserved);
 * returns the number of bytes. ASCII, the common case, is copied by hand: cheaper than a call
 * into TextEncoder for short keys.
 */
function encode(name, value, mem, at) {
  if (typeof value !== 'string') {
    throw new TypeError(`${name} must be a string, got ${typeof value} ${describe(value)}`);
  }
  const n = value.length;
  for (let i = 0; i < n; i += 1) {
    const c = value.charCodeAt(i);
    if (c >= 0x80) return encodeSlow(name, value, mem, at);
    mem[at + i] = c;
  }
  return n;
}

function encodeSlow(name, value, mem, at) {
  text(name, value);
  return encoder.encodeInto(value, mem.subarray(at, at + value.length * 3)).written;
}

/**
 * The lock table of lock-core: keyed leases with owners, deadlines and fencing tokens, FIFO
 * waiting, expiry events. Every call takes `now` (integer milliseconds on a monotonic clock the
 * caller owns), so the same calls give the same answers on every runtime.
 */
export class LockTable {
  #raw;
  #out;
  #in; // address of the engine's input buffer
  #inLen = 0;

  /**
   * @param {object} [limits] overrides of `LockTable.defaultLimits()` (camelCase names)
   * @param {{seed?: number}} [options] hash seed (any safe integer)
   */
  constructor(limits = {}, options = {}) {
    const values = limitValues(limits);
    const seed = ms('seed', options.seed ?? 0);
    const raw = new RawTable(values, seed);
    if (raw.failed()) {
      const error = toError(raw);
      raw.free();
      throw error;
    }
    this.#raw = raw;
    this.#out = raw.out_ptr() >>> 3;
    this.#in = raw.reserve_input(1024);
    this.#inLen = 1024;
  }

  /** Writes key and owner into the engine's input buffer; returns [keyBytes, ownerBytes]. */
  #names(key, owner) {
    const raw = this.#live();
    if (typeof key !== 'string' || typeof owner !== 'string') {
      text('key', key);
      text('owner', owner);
    }
    const need = (key.length + owner.length) * 3;
    if (need > this.#inLen) {
      this.#in = raw.reserve_input(need);
      this.#inLen = need;
    }
    const mem = u8();
    const k = encode('key', key, mem, this.#in);
    const o = encode('owner', owner, mem, this.#in + k);
    KEY_OWNER[0] = k;
    KEY_OWNER[1] = o;
    return raw;
  }

  /** The core's default limits (camelCase field names). */
  static defaultLimits() {
    return { ...defaultLimits() };
  }

  /** This table's limits. */
  get limits() {
    return JSON.parse(this.#live().limits_json());
  }

  #live() {
    if (this.#raw === undefined) throw new Error('this LockTable was freed');
    return this.#raw;
  }

  #acquireOutcome(status) {
    if (status === FAILED) throw toError(this.#raw);
    const out = f64();
    const type = names()[status - FIRST_OUTCOME];
    const first = out[this.#out];
    return status < FIRST_OUTCOME + 2 ? { type, fence: first, deadline: out[this.#out + 1] } : { type, position: first };
  }

  /**
   * Takes `key` for `owner` for `ttl` ms if it is free. Returns `{type: 'acquired' | 'already-held',
   * fence, deadline}`; throws a LockError (`held` with `details.deadline`, or a validation error).
   */
  tryAcquire(key, owner, ttl, now) {
    ms('ttl', ttl);
    ms('now', now);
    const raw = this.#names(key, owner);
    return this.#acquireOutcome(raw.try_acquire(KEY_OWNER[0], KEY_OWNER[1], ttl, now));
  }

  /** tryAcquire that answers `null` instead of throwing `held` (no Error to build). @internal */
  _tryAcquireOrNull(key, owner, ttl, now) {
    ms('ttl', ttl);
    ms('now', now);
    const raw = this.#names(key, owner);
    const status = raw.try_acquire(KEY_OWNER[0], KEY_OWNER[1], ttl, now);
    if (status === FAILED && errorCodes()[f64()[this.#out + 2]] === 'held') return null;
    return this.#acquireOutcome(status);
  }

  /**
   * Takes `key`, or queues `owner` (FIFO) until the absolute instant `waitDeadline`. Returns
   * `{type: 'acquired' | 'already-held', fence, deadline}` or `{type: 'queued' | 'already-waiting', position}`.
   */
  acquire(key, owner, ttl, waitDeadline, now) {
    ms('ttl', ttl);
    ms('waitDeadline', waitDeadline);
    ms('now', now);
    const raw = this.#names(key, owner);
    return this.#acquireOutcome(raw.acquire(KEY_OWNER[0], KEY_OWNER[1], ttl, waitDeadline, now));
  }

  /** Ends `owner`'s lease `fence` on `key`; the first waiter, if any, is handed the lock. */
  release(key, owner, fence, now) {
    ms('fence', fence);
    ms('now', now);
    const raw = this.#names(key, owner);
    if (raw.release(KEY_OWNER[0], KEY_OWNER[1], fence, now) === FAILED) throw toError(raw);
  }

  /** Pushes the lease's deadline to `now + ttl`; returns `{fence, deadline}`. */
  extend(key, owner, fence, ttl, now) {
    ms('fence', fence);
    ms('ttl', ttl);
    ms('now', now);
    const raw = this.#names(key, owner);
    if (raw.extend(KEY_OWNER[0], KEY_OWNER[1], fence, ttl, now) === FAILED) throw toError(raw);
    const out = f64();
    return { fence: out[this.#out], deadline: out[this.#out + 1] };
  }

  /** Takes `owner` out of `key`'s wait queue. */
  cancelWait(key, owner, now) {
    ms('now', now);
    const raw = this.#names(key, owner);
    if (raw.cancel_wait(KEY_OWNER[0], KEY_OWNER[1], now) === FAILED) throw toError(raw);
  }

  /** Applies every expiry, hand-off and wait timeout due at or before `now`. */
  handleTimeout(now) {
    this.#live().handle_timeout(ms('now', now));
  }

  /** The next instant at which `handleTimeout` has work, or `null`. */
  nextWakeup() {
    const at = this.#live().next_wakeup();
    return at < 0 ? null : at;
  }

  /** Number of events waiting in `drainEvents()`. */
  get pendingEvents() {
    this.#live();
    return f64()[this.#out + 3];
  }

  /** Every undrained event, oldest first: `{type: 'expired' | 'granted' | 'wait-timed-out', key, owner, at, ...}`. */
  drainEvents() {
    const raw = this.#live();
    return f64()[this.#out + 3] === 0 ? [] : JSON.parse(raw.drain_events_json());
  }

  /** The holder and waiters of `key` (`null` if free). */
  inspect(key, now) {
    const raw = this.#live();
    const json = raw.inspect_json(text('key', key), ms('now', now));
    if (json === undefined) throw toError(raw);
    return JSON.parse(json);
  }

  /** Counters and gauges of the table at `now`. */
  stats(now) {
    return JSON.parse(this.#live().stats_json(ms('now', now)));
  }

  /** The table's state as bytes (`restore` takes them back). */
  snapshot(now) {
    return this.#live().snapshot(ms('now', now));
  }

  /** Loads a snapshot; a corrupt one is a LockError (`snapshot-*`) and changes nothing. */
  restore(bytes) {
    if (!(bytes instanceof Uint8Array)) throw new TypeError(`snapshot bytes must be a Uint8Array, got ${describe(bytes)}`);
    const raw = this.#live();
    if (raw.restore(bytes) === FAILED) throw toError(raw);
  }

  /** Frees the engine's memory for this table; later calls throw. Idempotent. */
  free() {
    if (this.#raw !== undefined) {
      this.#raw.free();
      this.#raw = undefined;
    }
  }
}

function toError(raw) {
  return new LockError(raw.error_code(), raw.error_message(), JSON.parse(raw.error_details()));
}

// ----- Locks, Lease --------------------------------------------------------------------------

const KEEP_ALIVE_FRACTION = 3; // renew when a third of the TTL is left
const FOREVER = Number.MAX_SAFE_INTEGER;

function realNow() {
  return Math.floor(performance.now());
}

let instances = 0;

/**
 * A lock table on a real clock (or an injected one): owners waiting on Promises, leases that
 * notify when they are lost, keep-alive, and one timer for the whole table.
 */
export class Locks {
  #table;
  #clock;
  #setTimeout;
  #clearTimeout;
  #timer = null;
  #timerAt = Infinity;
  #syncQueued = false;
  #leases = new Map(); // fence -> Lease (fences are unique in a table)
  #waiters = new Map(); // key \0 owner -> waiter
  #keepAlive = new Set();
  #ownerPrefix;
  #ownerSeq = 0;
  #closed = false;

  /**
   * @param {object} [options]
   * @param {object} [options.limits] limits of the table
   * @param {() => number} [options.now] the clock (integer ms, monotonic); default `performance.now()`
   * @param {Function} [options.setTimeout] timer functions (tests inject fakes)
   * @param {Function} [options.clearTimeout]
   */
  constructor(options = {}) {
    this.#table = new LockTable(options.limits ?? {}, { seed: options.seed ?? 0 });
    this.#clock = options.now ?? realNow;
    this.#setTimeout = options.setTimeout ?? globalThis.setTimeout.bind(globalThis);
    this.#clearTimeout = options.clearTimeout ?? globalThis.clearTimeout.bind(globalThis);
    instances += 1;
    this.#ownerPrefix = `locks-${instances}`;
  }

  /** The underlying table (for inspection; calls on it bypass waiter and lease bookkeeping). */
  get table() {
    return this.#table;
  }

  /** The clock reading this instance uses, in ms. */
  now() {
    return ms('now()', this.#clock());
  }

  #owner(owner) {
    if (owner === undefined) {
      this.#ownerSeq += 1;
      return `${this.#ownerPrefix}#${this.#ownerSeq}`;
    }
    return text('owner', owner);
  }

  #open() {
    if (this.#closed) throw new Error('this Locks was closed');
  }

  /**
   * Takes `key` now if it is free: a Lease, or `null` when another owner holds it.
   * @param {string} key
   * @param {{ttl: number, owner?: string, keepAlive?: boolean, onLost?: Function}} options
   */
  tryAcquire(key, options) {
    this.#open();
    const { ttl, owner, keepAlive, onLost } = leaseOptions(options);
    const who = this.#owner(owner);
    let outcome;
    try {
      outcome = this.#table._tryAcquireOrNull(key, who, ttl, this.now());
    } finally {
      this.#afterCall();
    }
    return outcome === null ? null : this.#lease(key, who, ttl, outcome, keepAlive, onLost);
  }

  /**
   * Takes `key`, waiting in the key's FIFO queue until it is handed over. Rejects with a LockError
   * `wait-timed-out` after `timeout` ms, with `signal.reason` when `signal` aborts, or with the
   * core's error.
   * @param {string} key
   * @param {{ttl: number, owner?: string, timeout?: number, signal?: AbortSignal, keepAlive?: boolean, onLost?: Function}} options
   * @returns {Promise<Lease>}
   */
  acquire(key, options) {
    try {
      this.#open();
      const { ttl, owner, keepAlive, onLost } = leaseOptions(options);
      const { timeout, signal } = options;
      if (signal !== undefined && !(signal instanceof AbortSignal)) {
        throw new TypeError('signal must be an AbortSignal');
      }
      if (signal?.aborted) return Promise.reject(signal.reason);
      const who = this.#owner(owner);
      const now = this.now();
      const waitDeadline = timeout === undefined ? FOREVER : Math.min(FOREVER, now + ms('timeout', timeout));
      let outcome;
      try {
        outcome = this.#table.acquire(key, who, ttl, waitDeadline, now);
      } finally {
        this.#afterCall();
      }
      if (outcome.type === 'acquired' || outcome.type === 'already-held') {
        return Promise.resolve(this.#lease(key, who, ttl, outcome, keepAlive, onLost));
      }
      const id = `${key}\u0000${who}`;
      const existing = this.#waiters.get(id);
      if (existing !== undefined) return existing.promise;
      let settle;
      const promise = new Promise((resolve, reject) => {
        settle = { resolve, reject };
      });
      const waiter = { promise, ttl, keepAlive, onLost, signal, onAbort: null, ...settle };
      if (signal !== undefined) {
        waiter.onAbort = () => this.#abortWait(key, who, id, signal.reason);
        signal.addEventListener('abort', waiter.onAbort, { once: true });
      }
      this.#waiters.set(id, waiter);
      return promise;
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * Runs `callback(lease)` while holding `key` and releases it when the callback settles (the Web
   * Locks idiom). `lease.signal` aborts if the lease is lost. With `ifAvailable: true` it does not
   * wait: the callback gets `null` when the key is held.
   */
  async withLock(key, options, callback) {
    if (typeof callback !== 'function') throw new TypeError('withLock needs a callback');
    const lease = options?.ifAvailable ? this.tryAcquire(key, options) : await this.acquire(key, options);
    if (lease === null) return callback(null);
    try {
      return await callback(lease);
    } finally {
      lease.release();
    }
  }

  /** The holder and waiters of `key` now (`null` if free). */
  inspect(key) {
    const info = this.#table.inspect(key, this.now());
    this.#afterCall();
    return info;
  }

  /** Counters and gauges of the table now. */
  stats() {
    const s = this.#table.stats(this.now());
    this.#afterCall();
    return s;
  }

  /**
   * Stops the timer, rejects every pending acquire and frees the table. Leases of this instance
   * become inert (their release does nothing).
   */
  close() {
    if (this.#closed) return;
    this.#closed = true;
    this.#arm(null);
    const error = new Error('this Locks was closed');
    for (const waiter of this.#waiters.values()) this.#dropWaiter(waiter).reject(error);
    this.#waiters.clear();
    this.#keepAlive.clear();
    this.#leases.clear();
    this.#table.free();
  }

  // ----- lease bookkeeping (called by Lease) -----

  /** @internal */
  _release(lease) {
    if (this.#closed) return false;
    let failure = null;
    try {
      this.#table.release(lease.key, lease.owner, lease.fence, this.now());
      this.#forget(lease);
    } catch (error) {
      if (!(error instanceof LockError)) throw error;
      failure = error;
    }
    this.#afterCall();
    if (failure === null) return true;
    this.#notHolder(lease, failure);
    return false;
  }

  /** @internal */
  _extend(lease, ttl) {
    this.#open();
    let grant;
    try {
      grant = this.#table.extend(lease.key, lease.owner, lease.fence, ttl, this.now());
    } catch (error) {
      this.#afterCall();
      if (error instanceof LockError) this.#notHolder(lease, error);
      throw error;
    }
    this.#afterCall();
    return grant;
  }

  /**
   * The core says `lease` is not held any more. Normally its expiry event (dispatched just before)
   * already reported the loss; if that event was never seen (dropped past max_pending_events),
   * report it from the error.
   */
  #notHolder(lease, error) {
    if (!lease.held || !['expired', 'not-held', 'not-owner'].includes(error.code)) return;
    this.#forget(lease);
    if (error.code === 'expired') {
      lease._lose({ key: lease.key, owner: lease.owner, fence: lease.fence, at: error.details.deadline });
    }
  }

  #lease(key, owner, ttl, outcome, keepAlive, onLost) {
    const known = this.#leases.get(outcome.fence);
    if (known !== undefined) return known;
    const lease = new Lease(this, key, owner, outcome.fence, outcome.deadline, ttl, onLost);
    this.#leases.set(outcome.fence, lease);
    if (keepAlive) this.#keepAlive.add(lease);
    return lease;
  }

  #forget(lease) {
    this.#leases.delete(lease.fence);
    this.#keepAlive.delete(lease);
    lease._ended();
  }

  #dropWaiter(waiter) {
    if (waiter.onAbort !== null) waiter.signal.removeEventListener('abort', waiter.onAbort);
    return waiter;
  }

  #abortWait(key, owner, id, reason) {
    const waiter = this.#waiters.get(id);
    if (waiter === undefined || this.#closed) return;
    try {
      this.#table.cancelWait(key, owner, this.now());
    } catch (error) {
      // not-waiting: the core granted or timed out the wait before the abort; the event (handled
      // below) settles the promise first.
      if (!(error instanceof LockError)) throw error;
    }
    this.#afterCall();
    if (this.#waiters.get(id) === waiter) {
      this.#waiters.delete(id);
      this.#dropWaiter(waiter).reject(reason);
    }
  }

  /** Dispatches the core's events, then asks for the timer to be brought up to date. */
  #afterCall() {
    if (this.#table.pendingEvents > 0) {
      for (const event of this.#table.drainEvents()) this.#dispatch(event);
    }
    if (!this.#syncQueued && !this.#closed) {
      this.#syncQueued = true;
      queueMicrotask(() => {
        this.#syncQueued = false;
        if (!this.#closed) this.#schedule();
      });
    }
  }

  #dispatch(event) {
    if (event.type === 'expired') {
      const lease = this.#leases.get(event.fence);
      if (lease !== undefined) {
        this.#forget(lease);
        lease._lose(event);
      }
      return;
    }
    const id = `${event.key}\u0000${event.owner}`;
    const waiter = this.#waiters.get(id);
    if (waiter === undefined) return;
    this.#waiters.delete(id);
    this.#dropWaiter(waiter);
    if (event.type === 'granted') {
      waiter.resolve(this.#lease(event.key, event.owner, waiter.ttl, event, waiter.keepAlive, waiter.onLost));
    } else {
      waiter.reject(
        new LockError(WAIT_TIMED_OUT, `waited for ${JSON.stringify(event.key)} until ${event.at} ms without being handed the lock`, {
          key: event.key,
          at: event.at,
        }),
      );
    }
  }

  /** The timer's job: renew keep-alive leases that are due, apply the core's due work, re-arm. */
  #tick() {
    this.#timer = null;
    this.#timerAt = Infinity;
    if (this.#closed) return;
    const now = this.now();
    for (const lease of [...this.#keepAlive]) {
      if (lease.renewAt <= now) {
        try {
          lease.extend();
        } catch (error) {
          if (!(error instanceof LockError)) throw error;
          this.#keepAlive.delete(lease);
        }
      }
    }
    this.#table.handleTimeout(now);
    this.#afterCall();
    this.#schedule();
  }

  #schedule() {
    let next = this.#table.nextWakeup();
    for (const lease of this.#keepAlive) {
      if (next === null || lease.renewAt < next) next = lease.renewAt;
    }
    this.#arm(next);
  }

  #arm(at) {
    if (at === null) {
      if (this.#timer !== null) this.#clearTimeout(this.#timer);
      this.#timer = null;
      this.#timerAt = Infinity;
      return;
    }
    // An armed timer that fires no later than needed is kept (it re-arms itself when it fires):
    // most calls move the next wake-up later, and this saves a clearTimeout/setTimeout pair.
    if (this.#timer !== null && this.#timerAt <= at) return;
    if (this.#timer !== null) this.#clearTimeout(this.#timer);
    this.#timerAt = at;
    this.#timer = this.#setTimeout(() => this.#tick(), Math.max(0, at - this.now()));
  }
}

function leaseOptions(options) {
  if (options === null || typeof options !== 'object') {
    throw new TypeError('options must be an object with at least { ttl }');
  }
  const { ttl, owner, keepAlive = false, onLost } = options;
  ms('ttl', ttl);
  if (onLost !== undefined && typeof onLost !== 'function') throw new TypeError('onLost must be a function');
  return { ttl, owner, keepAlive: Boolean(keepAlive), onLost };
}

/**
 * A lease held through a Locks: its fencing token, its deadline, and the notifications of its loss.
 */
export class Lease {
  #locks;
  #ttl;
  #state = 'held'; // held | released | lost
  #onLost;
  #lostInfo = null;
  #resolveLost = null;
  #lostPromise = null;
  #controller = null;

  /** @internal */
  constructor(locks, key, owner, fence, deadline, ttl, onLost) {
    this.#locks = locks;
    this.key = key;
    this.owner = owner;
    this.fence = fence;
    this.deadline = deadline;
    this.#ttl = ttl;
    this.#onLost = onLost;
  }

  /** Whether the lease is still held (not released, not lost). */
  get held() {
    return this.#state === 'held';
  }

  /** Whether the lease ran out before it was released. */
  get isLost() {
    return this.#state === 'lost';
  }

  /** Resolves with `{key, owner, fence, at}` when the lease expires; never if it is released. */
  get lost() {
    if (this.#lostPromise === null) {
      this.#lostPromise =
        this.#lostInfo !== null
          ? Promise.resolve(this.#lostInfo)
          : new Promise((resolve) => {
              this.#resolveLost = resolve;
            });
    }
    return this.#lostPromise;
  }

  /** An AbortSignal that aborts when the lease is lost. */
  get signal() {
    if (this.#controller === null) {
      this.#controller = new AbortController();
      if (this.#lostInfo !== null) this.#controller.abort(lostError(this.#lostInfo));
    }
    return this.#controller.signal;
  }

  /** When keep-alive renews this lease. @internal */
  get renewAt() {
    return this.deadline - Math.ceil(this.#ttl / KEEP_ALIVE_FRACTION);
  }

  /**
   * Pushes the deadline to now + `ttl` (default: the TTL it was acquired with); returns the new
   * deadline. A lease that already ran out throws LockError `expired`.
   */
  extend(ttl = this.#ttl) {
    const grant = this.#locks._extend(this, ms('ttl', ttl));
    this.#ttl = ttl;
    this.deadline = grant.deadline;
    return this.deadline;
  }

  /**
   * Releases the lease. Idempotent: `true` if this call released it, `false` if it was already
   * released or lost.
   */
  release() {
    if (this.#state !== 'held') return false;
    return this.#locks._release(this);
  }

  /** @internal */
  _ended() {
    if (this.#state === 'held') this.#state = 'released';
  }

  /** @internal */
  _lose(event) {
    this.#state = 'lost';
    this.#lostInfo = Object.freeze({ key: event.key, owner: event.owner, fence: event.fence, at: event.at });
    if (this.#resolveLost !== null) this.#resolveLost(this.#lostInfo);
    if (this.#controller !== null) this.#controller.abort(lostError(this.#lostInfo));
    if (this.#onLost !== undefined) {
      try {
        this.#onLost(this.#lostInfo);
      } catch (error) {
        console.error('expiring-lock: an onLost callback threw', error);
      }
    }
  }
}

function lostError(info) {
  return new LockError('expired', `the lease on ${JSON.stringify(info.key)} (fence ${info.fence}) expired at ${info.at} ms`, {
    deadline: info.at,
  });
}
