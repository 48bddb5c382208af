// KeyRecord: one key's record of a shared store (Redis, PostgreSQL, MariaDB, SQLite), decided by
// lock-core inside the engine: what the Rust store clients decide with, on the same bytes. A
// store client reads the record's bytes and the tokens the store allocated for them, runs one
// operation, writes the new bytes back with compare-and-set (allocating the fresh tokens the
// step asks for) if the step changed the record, and only then asks for the answer.

import { RawRecord } from '../engine/lock_wasm.js';
import { FAILED, FIRST_OUTCOME, f64, limitValues, names, toError } from './table.js';
import { describe, ms, text } from './errors.js';

/**
 * One key's record, decided by lock-core: the per-key transition of a lock table, for clients
 * that keep records in a shared store (the component's `records` interface, in JS).
 */
export class KeyRecord {
  /** @type {RawRecord | undefined} */
  #raw;
  #out;
  /** The last operation, to shape its answer: 'acquire' | 'done' | 'release' | 'extend' | 'inspect'. */
  #shape = null;

  /**
   * @param {Uint8Array | null} [stored] the stored bytes (null: a key nobody used)
   * @param {number[]} [fences] the tokens the store allocated at the write of `stored`
   * @param {object} [limits] overrides of `LockTable.defaultLimits()`
   */
  constructor(stored = null, fences = [], limits = {}) {
    if (stored !== null && !(stored instanceof Uint8Array)) {
      throw new TypeError(`stored must be a Uint8Array or null, got ${describe(stored)}`);
    }
    const tokens = tokensOf('fences', fences);
    const raw = new RawRecord(limitValues(limits));
    if (raw.failed() || raw.load(stored, tokens) === FAILED) {
      const error = toError(raw);
      raw.free();
      throw error;
    }
    this.#raw = raw;
    this.#out = raw.out_ptr() >>> 3;
  }

  #live() {
    if (this.#raw === undefined) throw new Error('this KeyRecord was freed');
    return this.#raw;
  }

  /** Runs one operation; `shape` says how `answer` reads its reply. */
  #run(shape, key, owner, call) {
    text('key', key);
    if (owner !== null) text('owner', owner);
    const raw = this.#live();
    call(raw);
    this.#shape = shape;
    const nextDeadline = raw.next_deadline();
    const forgetAt = raw.forget_at();
    const changed = raw.changed();
    return {
      changed,
      freshFences: raw.fresh_fences(),
      bytes: changed ? (raw.bytes() ?? null) : null,
      clock: raw.clock(),
      nextDeadline: nextDeadline < 0 ? null : nextDeadline,
      forgetAt: forgetAt < 0 ? null : forgetAt,
    };
  }

  /** `tryAcquire` on this key's record (see `LockTable.tryAcquire`); then `answer`. */
  tryAcquire(key, owner, ttl, now) {
    ms('ttl', ttl);
    ms('now', now);
    return this.#run('acquire', key, owner, (raw) => raw.try_acquire(key, owner, ttl, now));
  }

  /** `acquire` with an absolute wait deadline; then `answer`. */
  acquire(key, owner, ttl, waitDeadline, now) {
    ms('ttl', ttl);
    ms('waitDeadline', waitDeadline);
    ms('now', now);
    return this.#run('acquire', key, owner, (raw) => raw.acquire(key, owner, ttl, waitDeadline, now));
  }

  /** `release`; then `answer`. */
  release(key, owner, fence, now) {
    ms('fence', fence);
    ms('now', now);
    return this.#run('release', key, owner, (raw) => raw.release(key, owner, fence, now));
  }

  /** `extend`; then `answer`. */
  extend(key, owner, fence, ttl, now) {
    ms('fence', fence);
    ms('ttl', ttl);
    ms('now', now);
    return this.#run('extend', key, owner, (raw) => raw.extend(key, owner, fence, ttl, now));
  }

  /** `cancelWait`; then `answer`. */
  cancelWait(key, owner, now) {
    ms('now', now);
    return this.#run('done', key, owner, (raw) => raw.cancel_wait(key, owner, now));
  }

  /** `renewWait`; then `answer`. */
  renewWait(key, owner, waitDeadline, now) {
    ms('waitDeadline', waitDeadline);
    ms('now', now);
    return this.#run('acquire', key, owner, (raw) => raw.renew_wait(key, owner, waitDeadline, now));
  }

  /** Applies time alone up to `now` (the key's timer: its events name `key`); then `answer`. */
  handleTimeout(key, now) {
    ms('now', now);
    return this.#run('done', key, null, (raw) => raw.handle_timeout(key, now));
  }

  /** `inspect` (time applied first, which may change the record); then `answer`. */
  inspect(key, now) {
    ms('now', now);
    return this.#run('inspect', key, null, (raw) => raw.inspect(key, now));
  }

  /**
   * The answer of the last operation, once its new record was written (`fresh`: the tokens the
   * store allocated at that write, in order; none if it asked for none). Shaped as LockTable's
   * answer to the same call: an acquire outcome, `{type: 'released'}` or `{type: 'held-until',
   * until}` for `release`, `{fence, deadline}` for `extend`, the key's leases and waiters (or
   * `null`) for `inspect`, `undefined` otherwise; or throws its LockError. The
   * key's events are in `events` either way.
   */
  answer(fresh = []) {
    const raw = this.#live();
    if (this.#shape === null) throw new Error('answer() follows an operation');
    const shape = this.#shape;
    this.#shape = null;
    const status = raw.answer(tokensOf('fresh', fresh));
    this.events = JSON.parse(raw.events_json());
    if (status === FAILED) throw toError(raw);
    const out = f64();
    if (shape === 'inspect') return JSON.parse(raw.info_json());
    if (shape === 'extend') return { fence: out[this.#out], deadline: out[this.#out + 1] };
    if (shape === 'done') return undefined;
    if (shape === 'release') {
      const until = out[this.#out];
      return until === 0 ? { type: /** @type {const} */ ('released') } : { type: /** @type {const} */ ('held-until'), until };
    }
    const type = names()[status - FIRST_OUTCOME];
    return status < FIRST_OUTCOME + 2
      ? { type, fence: out[this.#out], deadline: out[this.#out + 1] }
      : { type, position: out[this.#out] };
  }

  /**
   * What the record holds at `now`, without changing it: the lease (or null), the number of
   * waiters, the key's next change by time alone (or null), and the expired leases it still
   * remembers at `now` (what a store's dashboard or a table view counts).
   */
  state(now) {
    ms('now', now);
    return JSON.parse(this.#live().state_json(now));
  }

  /** The key's events of the last answer, oldest first (as `LockTable.drainEvents()`'s). */
  events = [];

  /** Frees the engine's memory for this record (it cannot be used afterwards). */
  free() {
    this.#raw?.free();
    this.#raw = undefined;
  }

  [Symbol.dispose]() {
    this.free();
  }
}

/** `values` checked as safe non-negative integers (tokens), as the engine takes them. */
function tokensOf(name, values) {
  if (!Array.isArray(values)) throw new TypeError(`${name} must be an array of tokens, got ${describe(values)}`);
  return Float64Array.from(values, (v, i) => ms(`${name}[${i}]`, v));
}
