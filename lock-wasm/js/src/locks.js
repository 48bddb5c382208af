// Locks and Lease: the table on a real (or injected) clock, with waiting on Promises, keep-alive,
// lost-lock notification and one timer for the whole table. Bookkeeping only: every decision is
// the core's, reported through its outcomes and events.

import { ALREADY_WAITING, CLOSED, LockError, WAIT_TIMED_OUT, ms, text } from './errors.js';
import { Election, leaderOf } from './election.js';
import { ENDED, EXTEND, LOSE, RELEASE, RENEW_AT, TIMERS, TRY_ACQUIRE_OR_NULL } from './internal.js';
import { isLeaseLoss } from '../engine/lock_wasm.js';
import { LockTable } from './table.js';
import { Loss } from './loss.js';

const KEEP_ALIVE_FRACTION = 3; // renew when a third of the TTL is left
const FOREVER = Number.MAX_SAFE_INTEGER;
/** The longest delay `setTimeout` honours (ms). */
const MAX_TIMER_DELAY = 2 ** 31 - 1;

/** The options each call knows; any other name is a TypeError (a typo must not be ignored). */
/** The lock kinds' options, passed to the core as they are (see `RequestOptions`). */
const REQUEST_OPTIONS = ['mode', 'permits', 'minHold', 'lockDelay', 'metadata'];
const LEASE_OPTIONS = new Set(['ttl', 'owner', 'keepAlive', 'onLost', ...REQUEST_OPTIONS]);
const TRY_OPTIONS = new Set([...LEASE_OPTIONS, 'retryAt']);
const ACQUIRE_OPTIONS = new Set([...LEASE_OPTIONS, 'timeout', 'signal']);
const WITH_LOCK_OPTIONS = new Set([...ACQUIRE_OPTIONS, 'ifAvailable']);
const LOCKS_OPTIONS = new Set(['limits', 'seed', 'now', 'setTimeout', 'clearTimeout']);
const QUERY_OPTIONS = new Set(['prefix', 'after', 'limit']);

/** The error of a call on (or pending across) a closed Locks. */
function closedError() {
  return new LockError(CLOSED, 'this Locks was closed');
}

/** Refuses option names `call` does not know, naming them and the known ones. */
function knownOptions(call, options, known) {
  // Allocation-free when every name is known: this runs on every tryAcquire.
  let allKnown = true;
  for (const name in options) {
    if (Object.hasOwn(options, name) && !known.has(name)) allKnown = false;
  }
  if (allKnown) return;
  const unknown = Object.keys(options).filter((name) => !known.has(name));
  const list = unknown.map((name) => JSON.stringify(name)).join(', ');
  throw new TypeError(`unknown option${unknown.length > 1 ? 's' : ''} ${list} for ${call}; known: ${[...known].join(', ')}`);
}

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
  /** @type {(callback: () => void, delay: number) => unknown} */
  #setTimeout;
  /** @type {(handle: any) => void} */
  #clearTimeout;
  /** @type {unknown} */
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
   * @param {import('../index.d.ts').LocksOptions} [options] limits and seed of the table; the clock (integer ms,
   *   monotonic; default `performance.now()`); timer functions (tests inject fakes)
   */
  constructor(options = {}) {
    if (options === null || typeof options !== 'object') throw new TypeError('new Locks(options): options must be an object');
    knownOptions('new Locks()', options, LOCKS_OPTIONS);
    this.#table = new LockTable(options.limits ?? {}, { seed: options.seed ?? 0 });
    this.#clock = options.now ?? realNow;
    this.#setTimeout = options.setTimeout ?? globalThis.setTimeout.bind(globalThis);
    this.#clearTimeout = options.clearTimeout ?? globalThis.clearTimeout.bind(globalThis);
    instances += 1;
    this.#ownerPrefix = `locks-${instances}`;
  }

  /**
   * Opens namespace `namespace` of a shared store (`redis://`, `rediss://`, `postgres://`,
   * `postgresql://`; Node only): locks
   * shared by every process and machine that opens it, Node and Rust replicas alike, with the
   * same API as this class, asynchronous (every call is a round trip). The store's client is an
   * optional peer dependency (`ioredis`, `pg`); a missing one is a StoreError naming it.
   * @param {string} url
   * @param {string} namespace
   * @param {{bound?: number, limits?: object, poll?: number}} [options]
   */
  static async open(url, namespace, options = {}) {
    const { StoreLocks } = await import('./stores/locks.js');
    return StoreLocks.open(url, namespace, options);
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
    if (this.#closed) throw closedError();
  }

  /**
   * Takes `key` now if it is free: a Lease, or `null` when another owner holds it. With
   * `retryAt: true` a held key answers `{ retryAt }` instead: the holder's deadline, the earliest
   * instant a retry can succeed (the core computed it; `null` skips reading it).
   * @overload
   * @param {string} key
   * @param {import('../index.d.ts').LeaseOptions & import('../index.d.ts').RequestOptions & {retryAt: true}} options
   * @returns {Lease | {retryAt: number}}
   */
  /**
   * @overload
   * @param {string} key
   * @param {import('../index.d.ts').LeaseOptions & import('../index.d.ts').RequestOptions & {retryAt?: false}} options
   * @returns {Lease | null}
   */
  /**
   * @param {string} key
   * @param {import('../index.d.ts').LeaseOptions & import('../index.d.ts').RequestOptions & {retryAt?: boolean}} options
   * @returns {Lease | {retryAt: number} | null}
   */
  tryAcquire(key, options) {
    this.#open();
    const { ttl, owner, keepAlive, onLost, request } = leaseOptions('tryAcquire', options, TRY_OPTIONS);
    const retryAt = options.retryAt === true;
    const who = this.#owner(owner);
    let outcome;
    try {
      outcome =
        request === undefined
          ? this.#table[TRY_ACQUIRE_OR_NULL](key, who, ttl, this.now(), retryAt)
          : this.#tryWith(key, who, ttl, request, retryAt);
    } finally {
      this.#afterCall();
    }
    if (outcome === null) return null;
    if (typeof outcome === 'number') return { retryAt: outcome };
    const answered = /** @type {import('../index.d.ts').AcquireOutcome} */ (outcome);
    if (this.#granted(answered)) return this.#lease(key, who, ttl, answered, keepAlive, onLost);
    // Only `already-waiting`: try_acquire never queues, but this owner has an acquire pending.
    throw new LockError(ALREADY_WAITING, `owner ${JSON.stringify(who)} is already waiting for ${JSON.stringify(key)} in a pending acquire`, {
      position: answered.position,
    });
  }

  /** `tryAcquire` with request options: `null` (or the holder's deadline) when held. */
  #tryWith(key, who, ttl, request, retryAt) {
    try {
      return this.#table.tryAcquire(key, who, ttl, this.now(), request);
    } catch (error) {
      if (!(error instanceof LockError) || error.code !== 'held') throw error;
      return retryAt ? error.details.deadline : null;
    }
  }

  /**
   * Takes `key` now whatever its holders (Web Locks' `steal`): each holder's lease is lost (its
   * `onLost`, `lost` and `signal` say `stolen`), the queue is kept, and this caller gets a fresh
   * fence. Exclusive only (a shared steal throws `mode-mismatch`).
   * @param {string} key
   * @param {import('../index.d.ts').LeaseOptions & import('../index.d.ts').RequestOptions} options
   * @returns {Lease}
   */
  steal(key, options) {
    this.#open();
    const { ttl, owner, keepAlive, onLost, request } = leaseOptions('steal', options, LEASE_OPTIONS);
    const who = this.#owner(owner);
    let outcome;
    try {
      outcome = this.#table.steal(key, who, ttl, this.now(), request);
    } finally {
      this.#afterCall();
    }
    return this.#lease(key, who, ttl, outcome, keepAlive, onLost);
  }

  /**
   * The keys in use that start with `prefix` and come after `after`, with every lease and
   * waiter: at most `limit` (1 to 1000, default 100), and `next`, the cursor of the next page.
   * @param {{prefix?: string, after?: string, limit?: number}} [options]
   */
  query(options = {}) {
    this.#open();
    if (options === null || typeof options !== 'object') throw new TypeError('query(options): options must be an object');
    knownOptions('query', options, QUERY_OPTIONS);
    try {
      return this.#table.query(this.now(), options);
    } finally {
      this.#afterCall();
    }
  }

  /**
   * Whether an acquire outcome is a lease (`acquired`, `already-held`) rather than a place in the
   * queue (`queued`, `already-waiting`). Every outcome of the core is named here, so a new one is
   * an error, not a Lease with an undefined fence.
   * @param {import('../index.d.ts').AcquireOutcome} outcome
   * @returns {outcome is import('../index.d.ts').Granted}
   */
  #granted(outcome) {
    switch (outcome.type) {
      case 'acquired':
      case 'already-held':
        return true;
      case 'queued':
      case 'already-waiting':
        return false;
      default:
        throw new Error(`unknown acquire outcome ${JSON.stringify(/** @type {{type: string}} */ (outcome).type)} from the engine`);
    }
  }

  /**
   * Takes `key`, waiting in the key's FIFO queue until it is handed over. Rejects with a LockError
   * `wait-timed-out` after `timeout` ms, with `signal.reason` when `signal` aborts, or with the
   * core's error.
   * @param {string} key
   * @param {import('../index.d.ts').AcquireOptions & import('../index.d.ts').RequestOptions} options
   * @returns {Promise<Lease>}
   */
  acquire(key, options) {
    try {
      this.#open();
      const { ttl, owner, keepAlive, onLost, request } = leaseOptions('acquire', options, ACQUIRE_OPTIONS);
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
        outcome = this.#table.acquire(key, who, ttl, waitDeadline, now, request);
      } finally {
        this.#afterCall();
      }
      if (this.#granted(outcome)) {
        return Promise.resolve(this.#lease(key, who, ttl, outcome, keepAlive, onLost));
      }
      const id = `${key}\u0000${who}`;
      const existing = this.#waiters.get(id);
      if (existing !== undefined) return existing.promise;
      /** @type {{resolve: (lease: Lease) => void, reject: (error: unknown) => void}} */
      const settle = { resolve: () => {}, reject: () => {} };
      const promise = new Promise((resolve, reject) => {
        settle.resolve = resolve;
        settle.reject = reject;
      });
      const waiter = { promise, ttl, keepAlive, onLost, signal, onAbort: /** @type {(() => void) | null} */ (null), ...settle };
      if (signal !== undefined) {
        waiter.onAbort = () => this.#abortWait(key, who, id, signal.reason);
        signal.addEventListener('abort', waiter.onAbort, { once: true });
      }
      this.#waiters.set(id, waiter);
      this.#refTimer();
      return promise;
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * Runs `callback(lease)` while holding `key` and releases it when the callback settles (the Web
   * Locks idiom). `lease.signal` aborts if the lease is lost. With `ifAvailable: true` it does not
   * wait: the callback gets `null` when the key is held.
   *
   * If the lease was lost before the callback settled (it outlived its TTL), the call rejects
   * with the core's answer to the late release, a LockError `expired` (as Rust's `with_lock`
   * does): the work may have overlapped the next holder's. The callback's value is on the error
   * as `result`, its error as `cause`.
   * @param {string} key
   * @param {import('../index.d.ts').WithLockOptions} options
   * @param {(lease: any) => unknown} callback
   */
  async withLock(key, options, callback) {
    if (typeof callback !== 'function') {
      throw new TypeError(
        typeof options === 'function'
          ? 'withLock(key, options, callback): the options (at least { ttl }) come before the callback'
          : `withLock needs a callback as its third argument, got ${typeof callback}`,
      );
    }
    if (options === null || typeof options !== 'object') {
      throw new TypeError('withLock(key, options, callback): options must be an object with at least { ttl }');
    }
    knownOptions('withLock', options, WITH_LOCK_OPTIONS);
    const { ifAvailable, ...rest } = options;
    if (ifAvailable && (rest.timeout !== undefined || rest.signal !== undefined)) {
      throw new TypeError('withLock with ifAvailable does not wait: timeout and signal do not apply');
    }
    const lease = ifAvailable ? this.tryAcquire(key, { ...rest, retryAt: false }) : await this.acquire(key, rest);
    if (lease === null) return callback(null);
    /** @type {{cause?: unknown, result?: unknown}} */
    let settled;
    try {
      settled = { result: await callback(lease) };
    } catch (error) {
      settled = { cause: error };
    }
    if (!lease.isLost) lease.release();
    if (lease.isLost) {
      // The core's own answer to the late release (`expired`, or `not-held` once the expiry is
      // forgotten), as Rust's with_lock returns it; the callback's outcome rides on it.
      let refusal = null;
      try {
        this.#table.release(lease.key, lease.owner, lease.fence, this.now());
      } catch (error) {
        if (!(error instanceof LockError)) throw error;
        refusal = error;
      } finally {
        this.#afterCall();
      }
      if (refusal !== null) {
        throw new LockError(
          refusal.code,
          `${refusal.message} (the withLock callback settled after the loss; its work may have overlapped the next holder's)`,
          refusal.details,
          settled,
        );
      }
    }
    if ('cause' in settled) throw settled.cause;
    return settled.result;
  }

  /** The holder and waiters of `key` now (`null` if free). */
  inspect(key) {
    const info = this.#table.inspect(key, this.now());
    this.#afterCall();
    return info;
  }

  /**
   * A candidate of the election `name` (docs/election.md): `await election.run(async (term) =>
   * ...)` leads while it is granted the key, with `term.fence` and `term.signal`.
   * @param {string} name
   * @param {import('../index.d.ts').ElectionOptions} options
   * @returns {Election}
   */
  election(name, options) {
    this.#open();
    return new Election(this, name, options);
  }

  /**
   * The leader of the election `name`: `{candidate, fence, since, deadline, metadata}`, or `null`.
   * @param {string} name
   */
  leader(name) {
    return leaderOf(this.inspect(name));
  }

  /** @internal the timer functions this instance runs on */
  get [TIMERS]() {
    return { setTimeout: this.#setTimeout, clearTimeout: this.#clearTimeout };
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
  /** `using locks = new Locks()`: closed when the scope ends. */
  [Symbol.dispose]() {
    this.close();
  }

  /** `await using locks = new Locks()`: closed when the scope ends. */
  async [Symbol.asyncDispose]() {
    this.close();
  }

  close() {
    if (this.#closed) return;
    this.#closed = true;
    this.#arm(null);
    const error = closedError();
    for (const waiter of this.#waiters.values()) this.#dropWaiter(waiter).reject(error);
    this.#waiters.clear();
    this.#keepAlive.clear();
    this.#leases.clear();
    this.#table.free();
  }

  // ----- lease bookkeeping (called by Lease) -----

  [RELEASE](lease) {
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

  [EXTEND](lease, ttl) {
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
    if (!lease.held || !isLeaseLoss(error.code)) return;
    this.#forget(lease);
    // When: the instant of the steal, the deadline the refusal names, or the known deadline.
    const { at, deadline } = error.details;
    const reason = error.code === 'stolen' ? 'stolen' : 'expired';
    lease[LOSE]({ key: lease.key, owner: lease.owner, fence: lease.fence, at: at ?? deadline ?? lease.deadline, reason });
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
    lease[ENDED]();
  }

  #dropWaiter(waiter) {
    if (waiter.onAbort !== null) waiter.signal.removeEventListener('abort', waiter.onAbort);
    this.#refTimer();
    return waiter;
  }

  /**
   * In Node, the one timer keeps the process alive only while an acquire is pending (its
   * hand-off depends on the timer); leases alone never do, so a forgotten lease cannot hold a
   * process for its whole TTL. (Browsers have no such notion; their timers are plain numbers.)
   */
  #refTimer() {
    const timer = /** @type {{ref?: () => void, unref?: () => void} | null} */ (this.#timer);
    if (timer === null || typeof timer !== 'object' || typeof timer.unref !== 'function') return;
    if (this.#waiters.size > 0) timer.ref?.();
    else timer.unref();
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
    if (event.type === 'expired' || event.type === 'stolen') {
      const lease = this.#leases.get(event.fence);
      if (lease !== undefined) {
        this.#forget(lease);
        lease[LOSE]({ ...event, reason: event.type });
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
      if (lease[RENEW_AT] <= now) {
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
      if (next === null || lease[RENEW_AT] < next) next = lease[RENEW_AT];
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
    // Timers take at most 2^31 - 1 ms (a longer delay fires at once, again and again): a far
    // wake-up is reached in capped steps, each re-arming when it fires early.
    const delay = Math.min(MAX_TIMER_DELAY, Math.max(0, at - this.now()));
    this.#timerAt = this.now() + delay;
    this.#timer = this.#setTimeout(() => this.#tick(), delay);
    this.#refTimer();
  }
}

function leaseOptions(call, options, known) {
  if (options === null || typeof options !== 'object') {
    throw new TypeError(`${call}(key, options): options must be an object with at least { ttl }`);
  }
  knownOptions(call, options, known);
  const { ttl, owner, keepAlive = false, onLost } = options;
  ms('ttl', ttl);
  if (onLost !== undefined && typeof onLost !== 'function') throw new TypeError('onLost must be a function');
  return { ttl, owner, keepAlive: Boolean(keepAlive), onLost, request: requestOptions(options) };
}

/** The lock kinds' options among `options`, or `undefined` when it has none (a plain lease). */
function requestOptions(options) {
  let request;
  for (const name of REQUEST_OPTIONS) {
    if (options[name] !== undefined) {
      request ??= {};
      request[name] = options[name];
    }
  }
  return request;
}

/**
 * A lease held through a Locks: its fencing token, its deadline, and the notifications of its loss.
 */
export class Lease {
  #locks;
  #ttl;
  #state = 'held'; // held | released | lost
  #loss;

  /** Leases are made by `Locks`, not by users (the declarations have no public constructor). */
  constructor(locks, key, owner, fence, deadline, ttl, onLost) {
    this.#locks = locks;
    this.key = key;
    this.owner = owner;
    this.fence = fence;
    this.deadline = deadline;
    this.#ttl = ttl;
    this.#loss = new Loss(onLost);
  }

  /** Whether the lease is still held (not released, not lost). */
  get held() {
    return this.#state === 'held';
  }

  /** Whether the lease ran out before it was released. */
  get isLost() {
    return this.#state === 'lost';
  }

  /**
   * Resolves with `{key, owner, fence, at, reason}` when the lease is lost (`reason`: `expired`
   * or `stolen`); never if it is released.
   */
  get lost() {
    return this.#loss.promise;
  }

  /** An AbortSignal that aborts when the lease is lost. */
  get signal() {
    return this.#loss.signal;
  }

  /** When keep-alive renews this lease. */
  get [RENEW_AT]() {
    return this.deadline - Math.ceil(this.#ttl / KEEP_ALIVE_FRACTION);
  }

  /**
   * Pushes the deadline to now + `ttl` (default: the TTL it was acquired with); returns the new
   * deadline. A lease that already ran out throws LockError `expired`.
   */
  extend(ttl = this.#ttl) {
    const grant = this.#locks[EXTEND](this, ms('ttl', ttl));
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
    return this.#locks[RELEASE](this);
  }

  /** `using lease = locks.tryAcquire(...)`: released when the scope ends (idempotent). */
  [Symbol.dispose]() {
    this.release();
  }

  /** `await using lease = await locks.acquire(...)`: released when the scope ends. */
  async [Symbol.asyncDispose]() {
    this.release();
  }

  [ENDED]() {
    if (this.#state === 'held') this.#state = 'released';
  }

  [LOSE](event) {
    this.#state = 'lost';
    this.#loss.fire(event);
  }
}
