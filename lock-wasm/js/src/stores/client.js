// StoreClient: one namespace of a shared store, decided by lock-store's decision loop inside the
// engine (RawClient). The driver (redis.js, ...) only sends what the loop asks for, a read of a
// key's record with the store's time or a compare-and-set, and hands back the answers with the
// local instants each request left and was answered; every decision, re-read and pause is the
// Rust clients' own. Calls are bounded as the Rust engine bounds them: a whole call (its reads,
// writes and the re-read of an ambiguous write) within the store's bound.

import { performance } from 'node:perf_hooks';
import { RawClient } from '../../engine/lock_wasm.js';
import { FAILED, FIRST_OUTCOME, f64, limitValues, names, toError } from '../table.js';
import { StoreError } from '../errors.js';

const READ = 1;
const WRITE = 2;
const PAUSE = 3;
const STORE_FAILED = 100;

/** The shape of each operation's answer: 'acquire' | 'done' | 'extend' | 'inspect'. */
const SHAPES = {
  'try-acquire': 'acquire',
  acquire: 'acquire',
  'renew-wait': 'acquire',
  release: 'done',
  'cancel-wait': 'done',
  'handle-timeout': 'done',
  extend: 'extend',
  inspect: 'inspect',
};

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A store's namespace with the engine's decision loop. `driver` does the IO: `describe`,
 * `read(key, bound)`, `write(key, write, bound)`, `install(bound)`, `announce(key, owner)`.
 * @internal
 */
export class StoreClient {
  #raw;
  #out;
  #driver;
  #bound;

  /**
   * @param {object} driver the store's IO
   * @param {{limits?: object, callerTime?: boolean, bound?: number}} options `bound`: ms a whole
   *   call may take (default 5 000, as the Rust clients'); `callerTime`: every call passes `at`
   *   as its now (tests and the conformance vectors)
   */
  constructor(driver, options = {}) {
    const seed = Math.random() * 2 ** 52;
    const raw = new RawClient(driver.describe, limitValues(options.limits ?? {}), options.callerTime === true, seed);
    if (raw.failed()) {
      const error = toError(raw);
      raw.free();
      throw error;
    }
    this.#raw = raw;
    this.#out = raw.out_ptr() >>> 3;
    this.#driver = driver;
    this.#bound = options.bound ?? 5000;
  }

  /** The driver (its `describe`, its connection). */
  get driver() {
    return this.#driver;
  }

  /** Test mode: every call starts from an outdated record (the conflict path runs every rule). */
  setStale(stale) {
    this.#raw.set_stale(stale);
  }

  /** Forgets every record seen (the next call on each key reads it). */
  forgetSeen() {
    this.#raw.forget_seen();
  }

  /** Whether `op` on `key` with `args` is valid input (an invalid one changes nothing). */
  valid(op, key, args = {}) {
    return this.#raw.valid(op, key, args.owner ?? '', args.fence ?? 0, args.ttl ?? 0, args.waitDeadline ?? 0, args.at ?? 0);
  }

  /**
   * Runs `op` on `key`: `{owner, fence, ttl, waitDeadline, at}` as the operation takes them.
   * Answers `{reply, events, now, nextDeadline, ambiguous, localEnd}` where `reply` is shaped as
   * `KeyRecord.answer`'s (or `error`: the LockError of a refusal). Throws a StoreError.
   */
  async run(op, key, args = {}) {
    const answered = await this.#attempt(op, key, args);
    if (answered !== null) return answered;
    // A namespace that does not exist is created by the first write, and only then.
    await this.#driver.install(this.#bound);
    const again = await this.#attempt(op, key, args);
    if (again === null) throw this.#storeError();
    return again;
  }

  /** One run; `null` if the namespace does not exist. */
  async #attempt(op, key, args) {
    const raw = this.#raw;
    const start = performance.now();
    const call = raw.call(op, key, args.owner ?? '', args.fence ?? 0, args.ttl ?? 0, args.waitDeadline ?? 0, args.at ?? 0, start);
    if (call === undefined) throw new TypeError(`unknown operation ${op}`);
    let finished = false;
    try {
      let calls = 0;
      for (;;) {
        const t = performance.now();
        const next = raw.poll(call, t);
        if (next === PAUSE) {
          await sleep(call.pause_ms());
          continue;
        }
        if (next !== READ && next !== WRITE) break;
        // Each store call gets what is left of the whole call's bound (the first the whole).
        const left = calls++ === 0 ? this.#bound : this.#bound - (performance.now() - start);
        if (next === READ) await this.#read(call, key, left);
        else await this.#write(call, key, left);
      }
      finished = true; // finish takes the call (and frees it)
      const status = raw.finish(call, performance.now());
      if (status === STORE_FAILED) {
        if (raw.store_error_code() === 'no-namespace') return null;
        throw this.#storeError();
      }
      return this.#answer(op, key, status);
    } finally {
      if (!finished) call.free();
    }
  }

  async #read(call, key, left) {
    const raw = this.#raw;
    const sent = performance.now();
    if (left <= 0) return raw.read_failed(call, 'lost', `no answer within ${this.#bound} ms`, sent, sent);
    let read;
    try {
      read = await this.#driver.read(key, left);
    } catch (e) {
      const [code, reason] = failure(e);
      return raw.read_failed(call, code, reason, sent, performance.now());
    }
    const arrived = performance.now();
    const r = read.record;
    return raw.read(call, r !== null, r?.version ?? '0', r?.bytes ?? new Uint8Array(0), r?.fences ?? [], read.now, sent, arrived);
  }

  async #write(call, key, left) {
    const raw = this.#raw;
    const write = {
      expected: call.write_expected(),
      replaces: call.write_replaces(),
      version: call.write_version(),
      bytes: call.write_bytes() ?? null,
      freshFences: call.write_fresh_fences(),
      notBefore: call.write_not_before(),
      forgetAt: call.write_forget_at(),
    };
    if (left <= 0) return raw.write_failed(call, 'lost', `no answer within ${this.#bound} ms`, performance.now());
    let written;
    try {
      written = await this.#driver.write(key, write, left);
    } catch (e) {
      const [code, reason] = failure(e);
      return raw.write_failed(call, code, reason, performance.now());
    }
    const arrived = performance.now();
    if (written.conflict === undefined) return raw.written(call, written.fences, arrived);
    const { record: r, now } = written.conflict;
    return raw.conflict(call, r !== null, r?.version ?? '0', r?.bytes ?? new Uint8Array(0), r?.fences ?? [], now, arrived);
  }

  #storeError() {
    return new StoreError(this.#raw.store_error_code(), this.#raw.store_error_message());
  }

  /** The finished call's answer. */
  #answer(op, key, status) {
    const raw = this.#raw;
    const outcome = JSON.parse(raw.outcome_json());
    const events = JSON.parse(raw.events_json());
    for (const owner of outcome.handedTo) {
      // Best effort: a waiter also looks by itself.
      this.#driver.announce(key, owner).catch(() => {});
    }
    const shape = SHAPES[op];
    let reply;
    if (status === FAILED) reply = { error: toError(raw) };
    else if (shape === 'inspect') reply = { info: JSON.parse(raw.info_json()) };
    else if (shape === 'extend') reply = { fence: f64()[this.#out], deadline: f64()[this.#out + 1] };
    else if (shape === 'done') reply = {};
    else {
      const type = names()[status - FIRST_OUTCOME];
      const out = f64();
      reply = status < FIRST_OUTCOME + 2 ? { type, fence: out[this.#out], deadline: out[this.#out + 1] } : { type, position: out[this.#out] };
    }
    return { reply, events, ...outcome };
  }

  /** Frees the engine's memory for this client. */
  free() {
    this.#raw?.free();
    this.#raw = undefined;
  }
}

/** A driver's failure as a store error code and a reason. */
function failure(e) {
  if (e instanceof StoreError) return [e.code, e.message];
  return ['server', e instanceof Error ? e.message : String(e)];
}
