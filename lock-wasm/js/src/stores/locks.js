// StoreLocks and StoreLease: the Locks/Lease API over a shared store, so that replicas (Node and
// Rust alike) share one lock. Every decision is the store client protocol's (lock-protocol) and
// the core's, in the engine (StoreClient); this file keeps the leases: when each must be believed lost (on this
// process's clock, before any other client can be handed the key), keep-alive, and the signals.

import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import { RawDepartures, isLeaseLoss, keepAliveEvery, keepAliveRetry, namespaceError } from '../../engine/lock_wasm.js';
import { CLOSED, LockError, StoreError, ms, text } from '../errors.js';
import { Election, leaderOf } from '../election.js';
import { LOCAL_END, RELEASE_OR_REFUSAL, STOP } from '../internal.js';
import { Loss, lostError } from '../loss.js';
import { StoreClient } from './client.js';
import { Notices } from './notices.js';
import { openDriver } from './open.js';

/** The longest delay `setTimeout` honours (ms). */
const MAX_TIMER_DELAY = 2 ** 31 - 1;
const FOREVER = Number.MAX_SAFE_INTEGER;

/** The lock kinds' options, passed to the core as they are (see `RequestOptions`). */
const REQUEST_OPTIONS = ['mode', 'permits', 'minHold', 'lockDelay', 'metadata'];
const LEASE_OPTIONS = new Set(['ttl', 'owner', 'keepAlive', 'onLost', ...REQUEST_OPTIONS]);
const QUERY_OPTIONS = new Set(['prefix', 'after', 'limit']);
const ACQUIRE_OPTIONS = new Set([...LEASE_OPTIONS, 'timeout', 'signal']);
const WITH_LOCK_OPTIONS = new Set([...ACQUIRE_OPTIONS, 'ifAvailable']);
const OPEN_OPTIONS = new Set(['bound', 'limits', 'poll']);

function known(call, options, names) {
  if (options === null || typeof options !== 'object') {
    throw new TypeError(`${call}: options must be an object${names.has('ttl') ? ' with at least { ttl }' : ''}`);
  }
  const unknown = Object.keys(options).filter((name) => !names.has(name));
  if (unknown.length > 0) {
    throw new TypeError(`unknown option${unknown.length > 1 ? 's' : ''} ${unknown.map((n) => JSON.stringify(n)).join(', ')} for ${call}; known: ${[...names].join(', ')}`);
  }
}

function leaseOptions(call, options, names) {
  known(call, options, names);
  const { ttl, owner, keepAlive = false, onLost } = options;
  ms('ttl', ttl);
  if (owner !== undefined) text('owner', owner);
  if (onLost !== undefined && typeof onLost !== 'function') throw new TypeError('onLost must be a function');
  let request;
  for (const name of REQUEST_OPTIONS) {
    if (options[name] !== undefined) {
      request ??= {};
      request[name] = options[name];
    }
  }
  return { ttl, owner, keepAlive: Boolean(keepAlive), onLost, request };
}

let instances = 0;

/**
 * A promise and the function that resolves it (Node 20 has no Promise.withResolvers).
 * @returns {{promise: Promise<void>, resolve: () => void}}
 */
function wakeUp() {
  /** @type {() => void} */
  let resolve = () => {};
  const promise = new Promise((r) => {
    resolve = () => r(undefined);
  });
  return { promise, resolve };
}

/**
 * Locks shared through a store (`redis://`, `rediss://`, `postgres://`): the same API as the
 * in-process `Locks`,
 * asynchronous because every call is a round trip. Open with `await Locks.open(url, namespace)`.
 */
export class StoreLocks {
  #client;
  #driver;
  #notices;
  #poll;
  #ownerPrefix;
  #ownerSeq = 0;
  #closed = false;
  #leases = new Set();
  /** The acquires under way and those giving up (lock-protocol's Departures, in the engine). */
  #departures = new RawDepartures();
  /** Settles when an attempt that an acquire may be waiting for finishes (#afterDepartures). */
  #departed = wakeUp();

  /** @internal use `Locks.open(url, namespace)` */
  constructor(driver, client, options) {
    this.#driver = driver;
    this.#client = client;
    this.#poll = options.poll ?? 50;
    this.#notices = typeof driver.listen === 'function' ? new Notices((onNotice, onFailure) => driver.listen(onNotice, onFailure)) : undefined;
    instances += 1;
    this.#ownerPrefix = `${hostname()}:${process.pid}:${instances}`;
  }

  /**
   * Opens namespace `namespace` of the store at `url`. Options: `bound` (ms one call may take,
   * default 5 000), `limits` (as `LockTable`'s), `poll` (ms between a waiter's own looks when the
   * store sends no notices, default 50).
   * @returns {Promise<StoreLocks>}
   */
  static async open(url, namespace, options = {}) {
    if (typeof url !== 'string') throw new TypeError(`url must be a string, got ${typeof url}`);
    text('namespace', namespace);
    known('Locks.open', options, OPEN_OPTIONS);
    if (options.bound !== undefined) ms('bound', options.bound);
    if (options.poll !== undefined) ms('poll', options.poll);
    const invalid = namespaceError(namespace);
    if (invalid !== '') throw new StoreError('namespace', invalid);
    const driver = await openDriver(url, namespace, options);
    let client;
    try {
      client = new StoreClient(driver, { limits: options.limits ?? {}, bound: options.bound });
    } catch (error) {
      await driver.close();
      throw error;
    }
    return new StoreLocks(driver, client, options);
  }

  /** What the store is: its URL without password, and the namespace. */
  get store() {
    return this.#driver.describe;
  }

  #open() {
    if (this.#closed) throw new LockError(CLOSED, 'this Locks was closed');
  }

  #owner(owner) {
    if (owner !== undefined) return owner;
    this.#ownerSeq += 1;
    return `${this.#ownerPrefix}#${this.#ownerSeq}`;
  }

  /**
   * Takes `key` now if it is free: a StoreLease, or `null` when another owner holds it.
   * @returns {Promise<StoreLease | null>}
   */
  async tryAcquire(key, options) {
    this.#open();
    const { ttl, owner, keepAlive, onLost, request } = leaseOptions('tryAcquire', options, LEASE_OPTIONS);
    text('key', key);
    const who = this.#owner(owner);
    await this.#afterDepartures(key, who);
    // An acquire that does not wait, by the same rules as one that does (lock-protocol's
    // queue.rs, in the engine, as the Rust clients' try_acquire): an ask whose write may have
    // landed without an answer that says so (a lost answer, or one the replicas did not
    // acknowledge) leaves the key before it fails, releasing a grant found there.
    let won;
    try {
      won = await this.#client.wait(key, who, ttl, 0, { poll: this.#poll, request });
    } catch (e) {
      if (e instanceof LockError && e.code === 'held') return null;
      throw e;
    }
    return this.#lease(key, who, ttl, won.fence, won.deadline, won.localEnd, keepAlive, onLost);
  }

  /**
   * Takes `key`, waiting in its FIFO queue (shared by every replica) until it is handed over.
   * Rejects with LockError `wait-timed-out` after `timeout` ms, with `signal.reason` when `signal`
   * aborts, or with the core's error or a StoreError. An abort gives up before the promise
   * rejects: the place in the queue is cancelled, and a lease the key was handed before the
   * cancel landed (or after the abort) is released, so that the next waiter is handed the key at
   * once; a new `acquire` or `tryAcquire` by the same owner on the same key waits for that.
   * @returns {Promise<StoreLease>}
   */
  async acquire(key, options) {
    this.#open();
    const { ttl, owner, keepAlive, onLost, request } = leaseOptions('acquire', options, ACQUIRE_OPTIONS);
    text('key', key);
    const { timeout, signal } = options;
    if (signal !== undefined && !(signal instanceof AbortSignal)) throw new TypeError('signal must be an AbortSignal');
    if (signal?.aborted) throw signal.reason;
    const wait = timeout === undefined ? FOREVER : ms('timeout', timeout);
    const who = this.#owner(owner);
    await this.#afterDepartures(key, who);
    this.#open(); // closed while it waited
    const attempt = this.#departures.begin(key, who);
    const waiting = this.#client.wait(key, who, ttl, wait, { poll: this.#poll, signal, notices: this.#notices, request });
    // Once its signal aborts, this attempt is giving up until `waiting` settles: a new acquire
    // by the same owner on the same key waits for that (see #afterDepartures).
    const departs = () => this.#departures.leave(key, attempt);
    signal?.addEventListener('abort', departs, { once: true });
    let won;
    try {
      won = await waiting;
    } finally {
      signal?.removeEventListener('abort', departs);
      this.#finished(key, attempt);
    }
    return this.#lease(key, who, ttl, won.fence, won.deadline, won.localEnd, keepAlive, onLost);
  }

  /**
   * Attempt `attempt` on `key` is over; wakes the acquires that may wait for it. The
   * store tells attempts apart by their owner only, so a new acquire of the same owner asking
   * while one gives up would be answered `already-waiting` for the wait being cancelled, or
   * handed, as already held, the lease the give-up is about to release: the engine's
   * Departures (lock-protocol, as the Rust async client) says when a new one must wait.
   */
  #finished(key, attempt) {
    if (this.#closed || !this.#departures.finish(key, attempt)) return;
    const departed = this.#departed;
    this.#departed = wakeUp();
    departed.resolve();
  }

  /** Resolves once no acquire of `key` by `owner` that gave up is still leaving the key. */
  async #afterDepartures(key, owner) {
    while (!this.#closed && this.#departures.must_wait(key, owner)) await this.#departed.promise;
  }

  /**
   * Runs `callback(lease)` while holding `key` and releases it when the callback settles.
   * `lease.signal` aborts when the lease is lost. With `ifAvailable: true` it does not wait: the
   * callback gets `null` when the key is held. If the lease was lost before the callback settled,
   * rejects with LockError `expired` (the callback's value as `result`, its error as `cause`).
   */
  async withLock(key, options, callback) {
    if (typeof callback !== 'function') throw new TypeError(`withLock needs a callback as its third argument, got ${typeof callback}`);
    known('withLock', options, WITH_LOCK_OPTIONS);
    const { ifAvailable, ...rest } = options;
    if (ifAvailable && (rest.timeout !== undefined || rest.signal !== undefined)) {
      throw new TypeError('withLock with ifAvailable does not wait: timeout and signal do not apply');
    }
    const lease = ifAvailable ? await this.tryAcquire(key, rest) : await this.acquire(key, rest);
    if (lease === null) return callback(null);
    let settled;
    try {
      settled = { result: await callback(lease) };
    } catch (error) {
      settled = { cause: error };
    }
    const refusal = await lease[RELEASE_OR_REFUSAL]();
    if (lease.isLost) {
      const base = refusal ?? new LockError('expired', `the lease on ${JSON.stringify(key)} (fence ${lease.fence}) was lost`, { deadline: lease.deadline });
      throw new LockError(base.code, `${base.message} (the withLock callback settled after the loss; its work may have overlapped the next holder's)`, base.details, settled);
    }
    if ('cause' in settled) throw settled.cause;
    return settled.result;
  }

  /**
   * The holder and waiters of `key` now (`null` if free). Creates nothing: a StoreError
   * `no-namespace` if the namespace was never written.
   */
  async inspect(key) {
    this.#open();
    text('key', key);
    const { reply } = await this.#client.run('inspect', key);
    if (reply.error !== undefined) throw reply.error;
    return reply.info;
  }

  /**
   * A candidate of the election `name` among every replica (docs/election.md): `await
   * election.run(async (term) => ...)` leads while it is granted the key, with `term.fence` and
   * `term.signal`.
   * @param {string} name
   * @param {import('../../index.d.ts').ElectionOptions} options
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
  async leader(name) {
    return leaderOf(await this.inspect(name));
  }

  /**
   * Takes `key` now whatever its holders (in every process): each holder's next call answers
   * `stolen` and its lease is lost with `reason: 'stolen'`; the queue is kept. Exclusive only.
   * @returns {Promise<StoreLease>}
   */
  async steal(key, options) {
    this.#open();
    const { ttl, owner, keepAlive, onLost, request } = leaseOptions('steal', options, LEASE_OPTIONS);
    text('key', key);
    const who = this.#owner(owner);
    await this.#afterDepartures(key, who);
    const answer = await this.#client.run('steal', key, { owner: who, ttl, options: request });
    const { reply } = answer;
    if (reply.error !== undefined) throw reply.error;
    return this.#lease(key, who, ttl, reply.fence, reply.deadline, answer.localEnd, keepAlive, onLost);
  }

  /**
   * The keys in use that start with `prefix` and come after `after` (byte order), with every
   * lease and waiter: at most `limit` (1 to 1000, default 100), and `next`, the cursor of the next
   * page (`null` when none). Reads the key list, then each candidate key in order until one more
   * than a page is in use.
   * @returns {Promise<{keys: Array<{key: string, info: object}>, next: string | null}>}
   */
  async query(options = {}) {
    this.#open();
    known('query', options, QUERY_OPTIONS);
    const { prefix = '', after = '', limit = 100 } = options;
    text('prefix', prefix);
    text('after', after);
    ms('limit', limit);
    const { page } = await this.#client.query(prefix, after, limit);
    return page;
  }

  /** Every key of the namespace with a record, in byte order. */
  async keys() {
    this.#open();
    return this.#driver.keys();
  }

  /** Stops every lease's timers (leases become inert) and closes the connections. */
  async close() {
    if (this.#closed) return;
    this.#closed = true;
    for (const lease of this.#leases) lease[STOP]();
    this.#leases.clear();
    await this.#notices?.close().catch(() => {});
    await this.#driver.close();
    this.#client.free();
    this.#departures.free();
    this.#departed.resolve();
  }

  /** `await using locks = await Locks.open(...)`: closed when the scope ends. */
  async [Symbol.asyncDispose]() {
    await this.close();
  }

  #lease(key, owner, ttl, fence, deadline, localEnd, keepAlive, onLost) {
    const lease = new StoreLease(
      {
        extend: (l, t) => this.#extend(l, t),
        release: (l, unsure) => this.#release(l, unsure),
        ended: (l) => this.#leases.delete(l),
      },
      { key, owner, ttl, fence, deadline, localEnd, keepAlive, onLost },
    );
    this.#leases.add(lease);
    return lease;
  }

  async #extend(lease, ttl) {
    this.#open();
    const answer = await this.#client.run('extend', lease.key, { owner: lease.owner, fence: lease.fence, ttl });
    return answer;
  }

  async #release(lease, unsure) {
    if (this.#closed) return { reply: {}, releasedAt: null };
    return this.#client.run('release', lease.key, { owner: lease.owner, fence: lease.fence, lease: { deadline: lease.deadline, unsure } });
  }
}

/** A lease held through a store: its fencing token, its deadline, and the signals of its loss. */
export class StoreLease {
  #locks;
  #ttl;
  #state = 'held'; // held | released | lost
  /** An attempt to release failed with a store error (it may have taken effect). */
  #releaseUnsure = false;
  /** A release was answered (a lost lease stays 'lost', but is not released again). */
  #releaseSent = false;
  #loss;
  /** @type {number} */
  #localEnd = 0;
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  #endTimer = undefined;
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  #renewTimer = undefined;

  /** @internal made by StoreLocks */
  constructor(locks, { key, owner, ttl, fence, deadline, localEnd, keepAlive, onLost }) {
    this.#locks = locks;
    this.key = key;
    this.owner = owner;
    this.fence = fence;
    this.deadline = deadline;
    /** When the release took effect, in the store's time (`null` until then; for audit logs). @type {number | null} */
    this.releasedAt = null;
    this.#ttl = ttl;
    this.#loss = new Loss(onLost);
    this.#believeUntil(localEnd);
    // The keep-alive schedule is the engine's (lock-protocol's keep_alive.rs), as in Rust.
    if (keepAlive) this.#scheduleRenewal(keepAliveEvery(ttl));
  }

  /**
   * Whether the lease is still held (not released, not lost). Read from this process's clock at
   * each call, not only from the timer: a busy event loop can run the timer late, never this.
   */
  get held() {
    this.#check();
    return this.#state === 'held';
  }

  /** Whether the lease was lost before it was released (see `held`). */
  get isLost() {
    this.#check();
    return this.#state === 'lost';
  }

  /** Resolves with `{key, owner, fence, at}` when the lease is lost; never if it is released. */
  get lost() {
    return this.#loss.promise;
  }

  /** An AbortSignal that aborts when the lease is lost. */
  get signal() {
    return this.#loss.signal;
  }

  /** @internal the lease's end on this process's clock (performance.now() ms) */
  get [LOCAL_END]() {
    return this.#localEnd;
  }

  /** The lease ends, on this process's clock, at local instant `localEnd` (performance.now() ms). */
  #believeUntil(localEnd) {
    this.#localEnd = localEnd;
    clearTimeout(this.#endTimer);
    const delay = Math.min(MAX_TIMER_DELAY, Math.max(0, localEnd - performance.now()));
    this.#endTimer = setTimeout(() => this.#timerFired(), delay);
    this.#endTimer.unref?.();
  }

  /** Loses the lease if this process's clock reached its end. */
  #check() {
    if (this.#state === 'held' && performance.now() >= this.#localEnd) this.#lose(this.deadline);
  }

  #timerFired() {
    this.#check();
    if (this.#state === 'held') this.#believeUntil(this.#localEnd);
  }

  #scheduleRenewal(delay) {
    clearTimeout(this.#renewTimer);
    this.#renewTimer = setTimeout(() => this.#renew(), Math.min(MAX_TIMER_DELAY, Math.max(1, delay)));
    this.#renewTimer.unref?.();
  }

  async #renew() {
    if (this.#state !== 'held') return;
    try {
      await this.extend();
      this.#scheduleRenewal(keepAliveEvery(this.#ttl));
    } catch (error) {
      if (this.#state !== 'held') return;
      // A store that failed: try again soon, while the lease may still be held.
      if (error instanceof StoreError) this.#scheduleRenewal(keepAliveRetry(this.#ttl));
    }
  }

  /**
   * Pushes the deadline to now + `ttl` (default: the TTL it was acquired with); resolves with the
   * new deadline. A lease that already ended rejects with LockError `expired` (or `not-held`).
   */
  async extend(ttl = this.#ttl) {
    ms('ttl', ttl);
    // A lease past its end on this process's clock is lost, even if its timer has not run yet.
    this.#check();
    if (this.#state === 'lost') throw lostError(this.#loss.info ?? this.#info(this.deadline));
    const answer = await this.#locks.extend(this, ttl);
    const { reply } = answer;
    if (reply.error !== undefined) {
      this.#notHolder(reply.error);
      throw reply.error;
    }
    if (this.#state !== 'held') throw lostError(this.#loss.info ?? this.#info(this.deadline));
    this.#ttl = ttl;
    this.deadline = reply.deadline;
    this.#believeUntil(answer.localEnd);
    return this.deadline;
  }

  /**
   * Releases the lease. `true` if this call released it, `false` if it was already released or
   * lost. A lease lost on this process's clock may still be held by the store (this process stops
   * believing early): the release is sent all the same, to hand the key on sooner, and answers
   * `false` (the loss) whatever the store says, as the Rust faces answer the loss (see "Answers
   * per face" in docs/lock-store.md).
   */
  async release() {
    if (this.#state === 'released' || this.#releaseSent) return false;
    const lost = !this.held;
    const refusal = await this[RELEASE_OR_REFUSAL]();
    this.#releaseSent = true;
    return !lost && refusal === null;
  }

  /**
   * Releases, even a lease believed lost (the store may still hold it: this process
   * stops believing early); the core's refusal (a LockError) if the store did not hold it.
   */
  async [RELEASE_OR_REFUSAL]() {
    if (this.#state === 'released') return null;
    let answer;
    try {
      answer = await this.#locks.release(this, this.#releaseUnsure);
    } catch (e) {
      // It may have taken effect: a later attempt that finds the key no longer ours knows it did.
      if (e instanceof StoreError) this.#releaseUnsure = true;
      throw e;
    }
    const { reply } = answer;
    if (reply.error !== undefined) {
      this.#notHolder(reply.error);
      return reply.error;
    }
    // The engine's (lock-protocol's holding): now, or the end of a minimum hold.
    this.releasedAt = answer.releasedAt ?? null;
    if (this.#state === 'held') {
      this.#state = 'released';
      this[STOP]();
    }
    return null;
  }

  /** `await using lease = await locks.acquire(...)`: released when the scope ends. */
  async [Symbol.asyncDispose]() {
    await this.release();
  }

  /** Stops the timers (released, lost, or its Locks closed). */
  [STOP]() {
    clearTimeout(this.#endTimer);
    clearTimeout(this.#renewTimer);
    this.#locks.ended(this);
  }

  /** If the store's refusal means this owner does not hold the lease any more, it is lost. */
  #notHolder(error) {
    if (this.#state !== 'held' || !isLeaseLoss(error.code)) return;
    // When: the instant of the steal, the deadline the refusal names, or the known deadline.
    const { at, deadline } = error.details;
    this.#lose(at ?? deadline ?? this.deadline, error.code === 'stolen' ? 'stolen' : 'expired');
  }

  #lose(at, reason = 'expired') {
    if (this.#state !== 'held') return;
    this.#state = 'lost';
    this[STOP]();
    this.#loss.fire(this.#info(at, reason));
  }

  #info(at, reason = 'expired') {
    return { key: this.key, owner: this.owner, fence: this.fence, at, reason };
  }
}
