// LockManager: the Web Locks API's shape (`navigator.locks`) over a `Locks` (one process) or a
// `StoreLocks` (replicas sharing a store), so Node code can use the browser's idiom: `request(name, [options,] callback)` holds the lock while the callback's
// promise is pending; `mode`, `ifAvailable`, `steal`, `signal`; `query()`. Our additions: a TTL
// (kept alive while the callback runs, so a stalled process loses the lock instead of holding it
// for ever), the lock's fencing token, a `signal` that aborts if the lock is lost, and the lock
// kinds' options. Every decision is the core's.

import { LockError } from './errors.js';
import { Locks } from './locks.js';

/** The options `request` knows: the Web Locks ones, then ours. */
const REQUEST_OPTIONS = new Set(['mode', 'ifAvailable', 'steal', 'signal', 'ttl', 'owner', 'onLost', 'permits', 'minHold', 'lockDelay', 'metadata']);
const MANAGER_OPTIONS = new Set(['locks', 'ttl']);
/** The default lease of a request (renewed while its callback runs). */
const DEFAULT_TTL = 30_000;

/** A `DOMException` named `name` where the platform has one (Node >= 17, browsers), else an Error. */
function domError(name, message) {
  if (typeof DOMException === 'function') return new DOMException(message, name);
  const error = new Error(message);
  error.name = name;
  return error;
}

/**
 * The lock a `request` callback is given: Web Locks' `name` and `mode`, plus the lease's fencing
 * token, deadline and a `signal` that aborts if the lock is lost (stolen, or its TTL ran out while
 * the process stalled).
 */
class HeldLock {
  #lease;

  /** @param {import('./locks.js').Lease | import('./stores/locks.js').StoreLease} lease @param {'exclusive' | 'shared'} mode */
  constructor(lease, mode) {
    this.name = lease.key;
    this.mode = mode;
    this.fence = lease.fence;
    this.owner = lease.owner;
    this.#lease = lease;
  }

  /** The lease's deadline now (it moves while the callback runs). */
  get deadline() {
    return this.#lease.deadline;
  }

  /** Aborts (reason: a LockError `stolen` or `expired`) if the lock is lost. */
  get signal() {
    return this.#lease.signal;
  }
}

/** The calls a LockManager makes of its locks: those of `Locks` and of `StoreLocks`. */
const LOCKS_CALLS = ['tryAcquire', 'acquire', 'steal', 'query'];

/**
 * Whether `locks` is a store's (`Locks.open` in Node): it has every call of a `Locks`, answered
 * asynchronously. Recognised by shape, so the browser entry never loads the store clients.
 */
function isStoreLocks(locks) {
  return locks !== null && typeof locks === 'object' && !(locks instanceof Locks) && LOCKS_CALLS.every((call) => typeof locks[call] === 'function') && typeof locks.store === 'string';
}

/**
 * The Web Locks API over a `Locks` (one in-process table by default) or over a store's
 * `StoreLocks` (`await Locks.open(url, namespace)` in Node), whose locks every replica shares.
 *
 * @example
 * const locks = new LockManager();
 * await locks.request('cache', async (lock) => { await refresh(lock.fence); });
 * await locks.request('cache', { mode: 'shared' }, async () => read());
 * // Across replicas: the same calls over a shared store.
 * const shared = new LockManager({ locks: await Locks.open('redis://127.0.0.1:6379', 'jobs') });
 */
export class LockManager {
  #locks;
  #ttl;

  /**
   * @param {{locks?: Locks | import('./stores/locks.js').StoreLocks, ttl?: number}} [options] the
   *   locks (default: a new in-process `Locks`; or a store's `StoreLocks`) and the default TTL of
   *   a request's lease (30 s, kept alive while its callback runs)
   */
  constructor(options = {}) {
    if (options === null || typeof options !== 'object') throw new TypeError('new LockManager(options): options must be an object');
    const unknown = Object.keys(options).filter((name) => !MANAGER_OPTIONS.has(name));
    if (unknown.length > 0) throw new TypeError(`unknown option ${JSON.stringify(unknown[0])} for new LockManager(); known: ${[...MANAGER_OPTIONS].join(', ')}`);
    if (options.locks !== undefined && !(options.locks instanceof Locks) && !isStoreLocks(options.locks)) throw new TypeError('locks must be a Locks or a StoreLocks (Locks.open)');
    this.#locks = options.locks ?? new Locks();
    this.#ttl = options.ttl ?? DEFAULT_TTL;
  }

  /** The `Locks` or `StoreLocks` this manager requests from. */
  get locks() {
    return this.#locks;
  }

  /**
   * Requests the lock `name` and runs `callback(lock)` while holding it; the lock is released when
   * the promise the callback returns settles, and `request` settles with it. With `ifAvailable`,
   * the callback gets `null` when the lock cannot be granted at once. With `steal`, every holder
   * loses it now. `signal` aborts the wait. If the lock was lost before the callback settled, the
   * request rejects with a LockError `stolen` or `expired` (where Web Locks rejects a stolen
   * holder's request with an `AbortError`).
   * @template T
   * @param {string} name
   * @param {object | ((lock: HeldLock | null) => T | Promise<T>)} optionsOrCallback
   * @param {(lock: HeldLock | null) => T | Promise<T>} [maybeCallback]
   * @returns {Promise<T>}
   */
  async request(name, optionsOrCallback, maybeCallback) {
    const [options, callback] = typeof optionsOrCallback === 'function' ? [{}, optionsOrCallback] : [optionsOrCallback ?? {}, maybeCallback];
    if (typeof callback !== 'function') throw new TypeError('request(name, [options,] callback): the callback must be a function');
    if (typeof name !== 'string') throw new TypeError(`the lock name must be a string, got ${typeof name}`);
    if (options === null || typeof options !== 'object') throw new TypeError('request options must be an object');
    const unknown = Object.keys(options).filter((n) => !REQUEST_OPTIONS.has(n));
    if (unknown.length > 0) throw new TypeError(`unknown option ${JSON.stringify(unknown[0])} for request; known: ${[...REQUEST_OPTIONS].join(', ')}`);
    const { mode = 'exclusive', ifAvailable = false, steal = false, signal, ttl = this.#ttl, owner, onLost, ...kinds } = options;
    if (mode !== 'exclusive' && mode !== 'shared') throw new TypeError(`mode must be 'exclusive' or 'shared', got ${JSON.stringify(mode)}`);
    // The Web Locks specification's checks, in its order.
    if (name.startsWith('-')) throw domError('NotSupportedError', `lock names starting with "-" are reserved: ${JSON.stringify(name)}`);
    if (steal && ifAvailable) throw domError('NotSupportedError', 'steal and ifAvailable cannot be used together');
    if (steal && mode !== 'exclusive') throw domError('NotSupportedError', 'steal needs mode "exclusive"');
    if (signal !== undefined && (steal || ifAvailable)) throw domError('NotSupportedError', 'signal cannot be used with steal or ifAvailable');
    if (signal !== undefined && !(signal instanceof AbortSignal)) throw new TypeError('signal must be an AbortSignal');
    if (signal?.aborted) throw signal.reason;
    const lease = { ttl, owner, onLost, keepAlive: true, mode, ...kinds };
    /** @type {import('./locks.js').Lease | import('./stores/locks.js').StoreLease | null} */
    let held;
    // A store's calls answer promises; `await` takes the in-process answers as they are.
    const inProcess = this.#locks instanceof Locks;
    if (steal) held = await this.#locks.steal(name, lease);
    else if (ifAvailable) held = /** @type {import('./locks.js').Lease | import('./stores/locks.js').StoreLease | null} */ (await this.#locks.tryAcquire(name, inProcess ? { ...lease, retryAt: false } : lease));
    else held = await this.#locks.acquire(name, { ...lease, signal });
    if (held === null) return callback(null);
    /** @type {{cause?: unknown, result?: T}} */
    let settled;
    try {
      settled = { result: await callback(new HeldLock(held, mode)) };
    } catch (error) {
      settled = { cause: error };
    }
    // Over a store, an unreachable store rejects here (the lease then ends at its TTL), as
    // withLock does: the callback's outcome is not reported as a clean release.
    await held.release();
    if (held.isLost) {
      const info = await held.lost;
      const code = info.reason === 'stolen' ? 'stolen' : 'expired';
      /** @type {Record<string, number>} */
      const details = code === 'stolen' ? { at: info.at } : { deadline: info.at };
      throw new LockError(code, `the lock ${JSON.stringify(name)} was ${code === 'stolen' ? 'stolen' : 'lost (its TTL ran out)'} at ${info.at} ms, before the callback settled`, details, settled);
    }
    if ('cause' in settled) throw settled.cause;
    return /** @type {T} */ (settled.result);
  }

  /**
   * What is held and what waits, as Web Locks' `query()`: `{held, pending}`, each a list of
   * `{name, mode, clientId}` (`clientId`: the owner), plus the lease's `fence` and `metadata`
   * (held) or the request's `metadata` (pending). A place kept after its lease ended (a minimum
   * hold, a lock-delay) is not held by anyone and is not listed.
   */
  async query() {
    const held = [];
    const pending = [];
    let after = '';
    for (;;) {
      const page = await this.#locks.query({ after, limit: 1000 });
      for (const { key, info } of page.keys) {
        for (const h of info.holders) {
          if (h.ended === null) held.push({ name: key, mode: h.mode, clientId: h.owner, fence: h.fence, metadata: h.metadata });
        }
        for (const w of info.waiters) pending.push({ name: key, mode: w.mode, clientId: w.owner, metadata: w.metadata });
      }
      if (page.next === null) return { held, pending };
      after = page.next;
    }
  }
}
