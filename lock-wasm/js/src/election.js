// Leader election (docs/election.md): `Election` drives the core's campaign recipe (RawCampaign,
// lock_core::election) with a `Locks` (in-process) or a `StoreLocks` (replicas). Nothing is
// decided here: when to extend, when the stop signal fires, when to campaign again and which
// refusal ends the campaign are the core's; what a term is (a lease, its fence) is the lock's.

import { RawCampaign } from '../engine/lock_wasm.js';
import { CLOSED, LockError, StoreError, describe, ms, text } from './errors.js';
import { LOCAL_END, TIMERS } from './internal.js';

const NOTHING = 0;
const CAMPAIGN = 1;
const START = 2;
const EXTEND = 3;
const STOP = 4;
const ABANDON = 5;
const RELEASE = 6;
const DONE = 7;

/** A campaign waits in line this long at a time, then asks again (as the Rust face). */
const WAIT_CHUNK = 5_000;

const ELECTION_OPTIONS = new Set(['candidate', 'ttl', 'margin', 'grace', 'retry', 'once', 'metadata', 'signal']);

/**
 * An ask's error in the lock's names (lock_core::election::Refusal), written once: a lock error
 * is its code (`wait-timed-out`, `already-waiting` and the core's codes are refusal names); a
 * store that failed is `unreachable`; a wait the shut-down cut short is a wait that ended. Any
 * other error is no refusal the core knows: the run ends with it.
 * @param {unknown} error
 * @returns {string}
 */
function refusal(error) {
  if (error instanceof LockError) return error.code;
  if (error instanceof StoreError) return 'unreachable';
  if (error instanceof TermStopped) return 'wait-timed-out';
  return '';
}

/** Why a term stopped, as the stop signal's `reason.code` says it. */
export class TermStopped extends Error {
  /** @param {string} code @param {number} fence */
  constructor(code, fence) {
    super(`the term with fence ${fence} stopped: ${code}`);
    this.name = 'TermStopped';
    /** `returned`, `lost`, `unrenewed`, `resigned` or `shut-down`. */
    this.code = code;
    this.fence = fence;
  }
}

/**
 * One candidate of an election (see docs/election.md): `await election.run(async (term) => ...)`
 * campaigns until shut down (or for one term with `once`), running the body for each term with
 * `term.fence` and `term.signal`, an AbortSignal that aborts before the lease can have ended on
 * this process's clock, when the lease is lost, or when the candidate resigns or shuts down.
 */
export class Election {
  #locks;
  #name;
  #candidate;
  #metadata;
  #ttl;
  #raw;
  #resign = false;
  #shutDown = new AbortController();
  #wake = () => {};
  #running = false;

  /**
   * @param {any} locks a `Locks` or a `StoreLocks`
   * @param {string} name the election (its key)
   * @param {{candidate?: string, ttl: number, margin?: number, grace?: number, retry?: number, once?: boolean, metadata?: string, signal?: AbortSignal}} options
   */
  constructor(locks, name, options) {
    text('name', name);
    if (options === null || typeof options !== 'object') throw new TypeError(`election options must be an object, got ${describe(options)}`);
    for (const key of Object.keys(options)) {
      if (!ELECTION_OPTIONS.has(key)) throw new TypeError(`unknown election option ${JSON.stringify(key)}; known: ${[...ELECTION_OPTIONS].join(', ')}`);
    }
    this.#locks = locks;
    this.#name = name;
    this.#ttl = ms('ttl', options.ttl);
    this.#candidate = options.candidate;
    if (this.#candidate !== undefined) text('candidate', this.#candidate);
    this.#metadata = options.metadata ?? '';
    const opt = (key) => (options[key] === undefined ? -1 : ms(key, options[key]));
    try {
      this.#raw = new RawCampaign(this.#ttl, opt('margin'), opt('grace'), opt('retry'), options.once === true);
    } catch (error) {
      throw new RangeError(/** @type {Error} */ (error).message, { cause: error });
    }
    const { signal } = options;
    if (signal !== undefined) {
      if (!(signal instanceof AbortSignal)) throw new TypeError('signal must be an AbortSignal');
      if (signal.aborted) this.shutDown();
      else signal.addEventListener('abort', () => this.shutDown(), { once: true });
    }
  }

  /** Ends the current term (its signal aborts; once the body settles the next in line leads). */
  resign() {
    this.#resign = true;
    this.#wake();
  }

  /** Leaves the election: the current term ends as by `resign`, then `run` resolves. */
  shutDown() {
    this.#shutDown.abort(new TermStopped('shut-down', 0));
    this.#wake();
  }

  #now() {
    const locks = this.#locks;
    return Math.floor(typeof locks.now === 'function' ? locks.now() : performance.now());
  }

  /** Sleeps until `at` (this clock) or until something wakes the loop. */
  #sleep(at) {
    const timers = this.#locks[TIMERS] ?? { setTimeout: globalThis.setTimeout, clearTimeout: globalThis.clearTimeout };
    return /** @type {Promise<void>} */ (
      new Promise((resolve) => {
        let handle = null;
        const done = () => {
          if (handle !== null) timers.clearTimeout(handle);
          this.#wake = () => {};
          resolve();
        };
        this.#wake = done;
        if (at >= 0) handle = timers.setTimeout(done, Math.max(0, at - this.#now()));
      })
    );
  }

  /**
   * Campaigns and leads (see the class). Resolves with how many terms it led.
   * @param {(term: {name: string, candidate: string, fence: number, signal: AbortSignal}) => unknown} body
   * @returns {Promise<number>}
   */
  async run(body) {
    if (typeof body !== 'function') throw new TypeError(`run needs a body function, got ${typeof body}`);
    if (this.#running) throw new TypeError('this election is already running');
    this.#running = true;
    const raw = this.#raw;
    let lease = null;
    /** @type {AbortController | null} */
    let stop = null;
    /** @type {Promise<unknown> | null} */
    let bodyPromise = null;
    let bodySettled = false;
    let bodyRunning = false;
    /** What the body threw, if it threw. @type {unknown[]} */
    const failures = [];
    /** The LockError `closed` its Locks answered, once closed under it. @type {LockError | null} */
    let closed = null;
    const localEnd = (l) => l[LOCAL_END] ?? l.deadline;
    try {
      for (;;) {
        const now = this.#now();
        if (this.#shutDown.signal.aborted) raw.shut_down(now);
        if (this.#resign) {
          this.#resign = false;
          raw.resign(now);
        }
        if (bodyRunning && bodySettled) {
          bodyRunning = false;
          raw.body_returned(now);
        }
        const action = raw.poll(now);
        if (action === NOTHING) {
          await this.#sleep(raw.timeout());
          continue;
        }
        if (action === CAMPAIGN) {
          if (bodyPromise !== null) await bodyPromise; // an abandoned body settles first
          try {
            const options = { ttl: this.#ttl, timeout: WAIT_CHUNK, metadata: this.#metadata, signal: this.#shutDown.signal };
            if (this.#candidate !== undefined) options.owner = this.#candidate;
            lease = await this.#locks.acquire(this.#name, options);
            raw.granted(lease.fence, Math.floor(localEnd(lease)), this.#now());
          } catch (error) {
            // The core decides what follows (at once, after the retry pause, or the end).
            if (!raw.refused(refusal(error), this.#now())) throw error;
          }
        } else if (action === START) {
          stop = new AbortController();
          const term = { name: this.#name, candidate: lease.owner, fence: raw.fence(), signal: stop.signal };
          bodySettled = false;
          bodyRunning = true;
          bodyPromise = Promise.resolve()
            .then(() => body(term))
            .catch((error) => {
              failures.push(error);
            })
            .finally(() => {
              bodySettled = true;
              bodyPromise = null;
              this.#wake();
            });
        } else if (action === EXTEND) {
          const held = lease;
          Promise.resolve()
            .then(() => held.extend(this.#ttl))
            .then(
              () => raw.extended(Math.floor(localEnd(held)), this.#now()),
              (error) => {
                if (error instanceof LockError && error.code === CLOSED) {
                  // Its Locks was closed under it: the term ends as by a shut-down, then the
                  // run rejects with the closed error.
                  closed ??= error;
                  raw.shut_down(this.#now());
                } else if (error instanceof LockError) raw.lost(this.#now());
                else raw.extend_failed(this.#now());
              },
            )
            .finally(() => this.#wake());
        } else if (action === STOP) {
          stop?.abort(new TermStopped(raw.reason(), raw.fence()));
        } else if (action === ABANDON) {
          bodyRunning = false; // it cannot be killed: the next campaign waits for it
        } else if (action === RELEASE) {
          const held = lease;
          lease = null;
          try {
            await held?.release();
          } catch {
            // A failed release leaves a lease that ends at its deadline.
          }
          raw.released(this.#now());
        } else if (action === DONE) {
          if (bodyPromise !== null) await bodyPromise;
          if (failures.length > 0) throw failures[0];
          if (closed !== null) throw closed;
          return raw.terms();
        }
        // A body that threw ends the campaign with its error (its lease released below).
        if (failures.length > 0 && !bodyRunning) throw failures[0];
      }
    } finally {
      this.#running = false;
      if (lease !== null) await Promise.resolve(lease.release()).catch(() => {});
    }
  }
}

/**
 * The leader of election `name` read from its key: `{candidate, fence, since, deadline, metadata}`,
 * or `null`.
 * @param {any} info the key's inspection (`null`: free)
 * @returns {{candidate: string, fence: number, since: number | null, deadline: number, metadata: string} | null}
 */
export function leaderOf(info) {
  const holder = info?.holders?.find((h) => h.ended === null || h.ended === undefined);
  if (holder === undefined) return null;
  return { candidate: holder.owner, fence: holder.fence, since: holder.grantedAt ?? null, deadline: holder.deadline, metadata: holder.metadata };
}
