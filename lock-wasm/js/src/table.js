// LockTable: the core through the wasm-bindgen engine. Every call takes `now`; every outcome
// and error is the core's. The hot calls return a status number and leave their numeric results
// in a Float64Array view of the engine's memory; key and owner are written as UTF-8 straight
// into the engine's input buffer.

import { RawTable, defaultLimitsJson, errorCodesJson, outcomeNamesJson } from '../engine/lock_wasm.js';
import { memory } from './engine.js';
import { TRY_ACQUIRE_OR_NULL } from './internal.js';
import { LockError, deadlineOf, describe, ms, text } from './errors.js';

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

/** The acquire outcome names, in the engine's order. @internal */
export function names() {
  if (outcomeNames === null) outcomeNames = JSON.parse(outcomeNamesJson());
  return outcomeNames;
}

function defaultLimits() {
  if (defaults === null) defaults = Object.freeze(JSON.parse(defaultLimitsJson()));
  return defaults;
}

/** `limits` (overrides of the defaults) as the engine takes them. @internal */
export function limitValues(limits) {
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

/** The modes a request may ask for. */
const MODES = ['exclusive', 'shared'];
const OPTION_NAMES = ['mode', 'permits', 'minHold', 'lockDelay', 'metadata', 'waitAlive'];

/**
 * Checked acquire options as the engine takes them: `[shared, permits, minHold, lockDelay,
 * metadata, waitAlive]`. `undefined` is the defaults (a plain exclusive lease). @internal
 */
export function optionValues(options) {
  if (options === undefined) return [false, 0, 0, 0, '', 0];
  if (options === null || typeof options !== 'object') {
    throw new TypeError(`options must be an object, got ${describe(options)}`);
  }
  for (const name of Object.keys(options)) {
    if (!OPTION_NAMES.includes(name)) {
      throw new TypeError(`unknown option ${JSON.stringify(name)}; known: ${OPTION_NAMES.join(', ')}`);
    }
  }
  const mode = options.mode ?? 'exclusive';
  if (!MODES.includes(mode)) throw new TypeError(`mode must be 'exclusive' or 'shared', got ${describe(mode)}`);
  const permits = options.permits ?? 0;
  if (!Number.isInteger(permits) || permits < 0 || permits > 0xffffffff) {
    throw new TypeError(`permits must be an integer from 0 to 4294967295, got ${describe(permits)}`);
  }
  const metadata = options.metadata ?? '';
  text('metadata', metadata);
  return [mode === 'shared', permits, ms('minHold', options.minHold ?? 0), ms('lockDelay', options.lockDelay ?? 0), metadata, ms('waitAlive', options.waitAlive ?? 0)];
}

/** Whether checked option values are the defaults (a plain exclusive lease). */
function plain(values) {
  return !values[0] && values[1] === 0 && values[2] === 0 && values[3] === 0 && values[4] === '' && values[5] === 0;
}

// ----- LockTable ---------------------------------------------------------------------------------

export const FAILED = 0;
export const FIRST_OUTCOME = 2;
const UNREPRESENTABLE = 100;

// Views of the engine's memory. Growing a WebAssembly memory detaches its old buffer (the views
// then have length 0), which is cheaper to test on every call than comparing buffers.
let view = new Float64Array(0);
let byteView = new Uint8Array(0);

/** The engine memory as f64. @internal */
export function f64() {
  if (view.length === 0) view = new Float64Array(memory().buffer);
  return view;
}

/** The engine memory as bytes. */
function u8() {
  if (byteView.length === 0) byteView = new Uint8Array(memory().buffer);
  return byteView;
}

const encoder = new TextEncoder();

/**
 * Writes the string `value` as UTF-8 at `at` in `mem` (room for 3 bytes per UTF-16 unit is reserved);
 * returns the number of bytes. ASCII, the common case, is copied by hand: cheaper than a call
 * into TextEncoder for short keys.
 */
function encode(name, value, mem, at) {
  const n = value.length; // a string: #names checked the types

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
  /** @type {RawTable | undefined} */
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

  /** Every acquire outcome `type`, in the core's order (`acquired`, `already-held`, ...). */
  static outcomeTypes() {
    return [...names()];
  }

  /** Every LockError `code` the core can answer, in the core's order. */
  static errorCodes() {
    return [...errorCodes()];
  }

  /** This table's limits. */
  get limits() {
    return JSON.parse(this.#live().limits_json());
  }

  #live() {
    if (this.#raw === undefined) throw new Error('this LockTable was freed');
    return this.#raw;
  }

  /**
   * The outcome the engine left in the output buffer for `status`.
   * @returns {import('../index.d.ts').AcquireOutcome}
   */
  #acquireOutcome(status) {
    if (status === FAILED) throw toError(this.#raw);
    const out = f64();
    const type = names()[status - FIRST_OUTCOME];
    const first = out[this.#out];
    return status < FIRST_OUTCOME + 2
      ? /** @type {import('../index.d.ts').Granted} */ ({ type, fence: first, deadline: out[this.#out + 1] })
      : /** @type {import('../index.d.ts').Queued} */ ({ type, position: first });
  }

  /**
   * Takes `key` for `owner` for `ttl` ms if it is free. Returns `{type: 'acquired' | 'already-held',
   * fence, deadline}`, or `{type: 'already-waiting', position}` if `owner` already waits for it;
   * throws a LockError (`held` with `details.deadline`, or a validation error).
   * @returns {import('../index.d.ts').AcquireOutcome}
   */
  tryAcquire(key, owner, ttl, now, options) {
    ms('ttl', ttl);
    ms('now', now);
    deadlineOf(now, ttl);
    if (options !== undefined) return this.#acquireWith(key, owner, ttl, now, now, options);
    const raw = this.#names(key, owner);
    return this.#acquireOutcome(raw.try_acquire(KEY_OWNER[0], KEY_OWNER[1], ttl, now));
  }

  /** An acquire with options (a try when `waitDeadline` is not after `now`). */
  #acquireWith(key, owner, ttl, waitDeadline, now, options) {
    const o = optionValues(options);
    const raw = this.#names(key, owner);
    if (plain(o)) {
      return this.#acquireOutcome(
        waitDeadline <= now ? raw.try_acquire(KEY_OWNER[0], KEY_OWNER[1], ttl, now) : raw.acquire(KEY_OWNER[0], KEY_OWNER[1], ttl, waitDeadline, now),
      );
    }
    return this.#acquireOutcome(raw.acquire_with(KEY_OWNER[0], KEY_OWNER[1], ttl, waitDeadline, o[0], o[1], o[2], o[3], o[4], o[5], now));
  }

  /**
   * Takes `key` now whatever its holders (Web Locks' `steal`): every live lease ends with a
   * `stolen` event, and its holder's next call answers `stolen`; the stealer gets a fresh fence;
   * the queue is kept. Exclusive only (a shared steal throws `mode-mismatch`). Returns
   * `{type: 'acquired', fence, deadline}`.
   * @returns {import('../index.d.ts').Granted}
   */
  steal(key, owner, ttl, now, options) {
    ms('ttl', ttl);
    ms('now', now);
    deadlineOf(now, ttl);
    const o = optionValues(options);
    const raw = this.#names(key, owner);
    const status = raw.steal(KEY_OWNER[0], KEY_OWNER[1], ttl, o[0], o[1], o[2], o[3], o[4], now);
    // A steal always grants (the core never queues it).
    return /** @type {import('../index.d.ts').Granted} */ (this.#acquireOutcome(status));
  }

  /** tryAcquire that answers `null` instead of throwing `held` (no Error to build). */
  /**
   * @param {string} key
   * @param {string} owner
   * @param {number} ttl
   * @param {number} now
   * @param {boolean} [deadline] answer the holder's deadline (a number) instead of `null`
   * @returns {import('../index.d.ts').AcquireOutcome | number | null}
   */
  [TRY_ACQUIRE_OR_NULL](key, owner, ttl, now, deadline = false) {
    ms('ttl', ttl);
    ms('now', now);
    deadlineOf(now, ttl);
    const raw = this.#names(key, owner);
    const status = raw.try_acquire(KEY_OWNER[0], KEY_OWNER[1], ttl, now);
    if (status === FAILED && errorCodes()[f64()[this.#out + 2]] === 'held') {
      return deadline ? JSON.parse(raw.error_details()).deadline : null;
    }
    return this.#acquireOutcome(status);
  }

  /**
   * Takes `key`, or queues `owner` (FIFO) until the absolute instant `waitDeadline`. Returns
   * `{type: 'acquired' | 'already-held', fence, deadline}` or `{type: 'queued' | 'already-waiting', position}`.
   */
  acquire(key, owner, ttl, waitDeadline, now, options) {
    ms('ttl', ttl);
    ms('waitDeadline', waitDeadline);
    ms('now', now);
    deadlineOf(now, ttl);
    if (options !== undefined) return this.#acquireWith(key, owner, ttl, waitDeadline, now, options);
    const raw = this.#names(key, owner);
    return this.#acquireOutcome(raw.acquire(KEY_OWNER[0], KEY_OWNER[1], ttl, waitDeadline, now));
  }

  /**
   * Ends `owner`'s lease `fence` on `key`; the first waiter, if any, is handed the lock. Returns
   * `{type: 'released'}`, or `{type: 'held-until', until}` for a lease with a minimum hold not
   * yet passed: it keeps its place until `until`, when waiters are handed the key.
   * @returns {import('../index.d.ts').ReleaseOutcome}
   */
  release(key, owner, fence, now) {
    ms('fence', fence);
    ms('now', now);
    const raw = this.#names(key, owner);
    if (raw.release(KEY_OWNER[0], KEY_OWNER[1], fence, now) === FAILED) throw toError(raw);
    const until = f64()[this.#out];
    return until === 0 ? { type: /** @type {const} */ ('released') } : { type: /** @type {const} */ ('held-until'), until };
  }

  /** Pushes the lease's deadline to `now + ttl`; returns `{fence, deadline}`. */
  extend(key, owner, fence, ttl, now) {
    ms('fence', fence);
    ms('ttl', ttl);
    ms('now', now);
    deadlineOf(now, ttl);
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

  /**
   * Keeps `owner`'s place in `key`'s queue alive: moves its wait deadline to `waitDeadline` if
   * later (never earlier). Answers `already-waiting` with its place, or `already-held` if the key
   * was handed to `owner` meanwhile; throws `not-waiting` otherwise.
   */
  renewWait(key, owner, waitDeadline, now) {
    ms('waitDeadline', waitDeadline);
    ms('now', now);
    const raw = this.#names(key, owner);
    return this.#acquireOutcome(raw.renew_wait(KEY_OWNER[0], KEY_OWNER[1], waitDeadline, now));
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

  /**
   * The keys in use that start with `prefix` and come after `after` (byte order), with every
   * lease and waiter: at most `limit` (1 to 1000), and `next`, the cursor of the next page
   * (`null` when none). Returns `{keys: [{key, info}], next}`.
   */
  query(now, { prefix = '', after = '', limit = 100 } = {}) {
    ms('now', now);
    text('prefix', prefix);
    text('after', after);
    const raw = this.#live();
    const json = raw.query_json(prefix, after, ms('limit', limit), now);
    if (json === undefined) throw toError(raw);
    return JSON.parse(json);
  }

  /** Applies at most `maxChanges` due changes (a host's recovery); `true` if more are due. */
  handleTimeoutBounded(now, maxChanges) {
    ms('now', now);
    if (!Number.isInteger(maxChanges) || maxChanges < 0 || maxChanges > 0xffffffff) {
      throw new TypeError(`maxChanges must be an integer from 0 to 4294967295, got ${describe(maxChanges)}`);
    }
    return this.#live().handle_timeout_bounded(now, maxChanges);
  }

  /** Every later fence is above `floor` (a host restoring an older snapshot). */
  raiseFenceFloor(floor) {
    this.#live().raise_fence_floor(ms('floor', floor));
  }

  /** Takes every waiter out of every queue at `now` (no events); returns how many. */
  cancelAllWaits(now) {
    return this.#live().cancel_all_waits(ms('now', now));
  }

  /** Counters and gauges of the table at `now`. */
  stats(now) {
    return JSON.parse(this.#live().stats_json(ms('now', now)));
  }

  /** The table's state as bytes (`restore` takes them back). */
  snapshot(now) {
    return this.#live().snapshot(ms('now', now));
  }

  /**
   * Loads a snapshot; a corrupt one is a LockError (`snapshot-*`), one holding a fence or an
   * instant past Number.MAX_SAFE_INTEGER a RangeError; either changes nothing.
   */
  restore(bytes) {
    if (!(bytes instanceof Uint8Array)) throw new TypeError(`snapshot bytes must be a Uint8Array, got ${describe(bytes)}`);
    const raw = this.#live();
    const status = raw.restore(bytes);
    if (status === UNREPRESENTABLE) {
      throw new RangeError('the snapshot holds a fence or an instant past Number.MAX_SAFE_INTEGER, which JS numbers cannot represent exactly; the table is unchanged');
    }
    if (status === FAILED) throw toError(raw);
  }

  /** Frees the engine's memory for this table; later calls throw. Idempotent. */
  free() {
    if (this.#raw !== undefined) {
      this.#raw.free();
      this.#raw = undefined;
    }
  }
}

/** The LockError a raw engine object left. @internal */
export function toError(raw) {
  return new LockError(raw.error_code(), raw.error_message(), JSON.parse(raw.error_details()));
}
