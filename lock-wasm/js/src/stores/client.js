// StoreClient: one namespace of a shared store, decided by the store client protocol
// (lock-protocol) inside the engine (RawClient). The driver (redis.js, ...) only sends what the loop asks for, a read of a
// key's record with the store's time or a compare-and-set, and hands back the answers with the
// local instants each request left and was answered; every decision, re-read and pause is the
// Rust clients' own. Calls are bounded as the Rust engine bounds them: a whole call (its reads,
// writes and the re-read of an ambiguous write) within the store's bound.

import { performance } from 'node:perf_hooks';
import { RawClient, RawWaiting } from '../../engine/lock_wasm.js';
import { FAILED, FIRST_OUTCOME, f64, limitValues, names, optionValues, toError } from '../table.js';
import { ALREADY_WAITING, CLOSED, LockError, StoreError, WAIT_TIMED_OUT } from '../errors.js';
import { reasonOf } from './io.js';

const READ = 1;
const WRITE = 2;
const PAUSE = 3;
const STORE_FAILED = 100;

// RawWaiting.want and RawClient.finish_waiting (lock-wasm/src/js/client.rs).
const WANT_RENEW = 2;
const WANT_LOOK = 3;
const WANT_NAP = 4;
const WANT_PAUSE = 5;
const GO_ON = 0;
const WON = 1;
const WAIT_LOCK_ERROR = 2;
const WAIT_INSTALL = 3;
const WAIT_STORE_ERROR = 4;
const WAIT_TIMEOUT = 5;

/** The shape of each operation's answer: 'acquire' | 'done' | 'extend' | 'inspect'. */
const SHAPES = {
  'try-acquire': 'acquire',
  acquire: 'acquire',
  'acquire-with': 'acquire',
  steal: 'acquire',
  'renew-wait': 'acquire',
  release: 'release',
  'cancel-wait': 'done',
  'handle-timeout': 'done',
  extend: 'extend',
  inspect: 'inspect',
};

/**
 * The engine of a freed client: every call answers LockError `closed`. It stands in for a
 * RawClient (every member is a function that throws), hence the cast.
 */
const CLOSED_RAW = /** @type {RawClient} */ (
  /** @type {unknown} */ (
    new Proxy(
      {},
      {
        get() {
          return () => {
            throw new LockError(CLOSED, 'this Locks was closed');
          };
        },
      },
    )
  )
);

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Sleeps `ms`, or less if `signal` aborts. */
function sleepUnless(ms, signal) {
  if (signal === undefined) return sleep(ms);
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve(undefined);
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

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
  /** @type {Map<string, Promise<void>>} the last call in line on each key with calls in flight */
  #turns = new Map();
  /** @type {Map<string, {entries: Array<{waiting: any, owner: string, resolve: (ended: {status: number, error: Error | null}) => void, reject: (e: unknown) => void}>}>} renewals and looks gathered for each key's next turn */
  #batches = new Map();

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
    this.#options(op, args);
    return this.#raw.valid(op, key, args.owner ?? '', args.fence ?? 0, args.ttl ?? 0, args.waitDeadline ?? 0, args.at ?? 0);
  }

  /**
   * Runs `op` on `key`: `{owner, fence, ttl, waitDeadline, at, options}` as the operation takes
   * them (`options`: the lock kinds' `RequestOptions`, for `acquire-with` and `steal`);
   * `lease: {deadline, unsure}` for the release of a lease (see RawCall.of_lease).
   * Answers `{reply, events, now, nextDeadline, ambiguous, localEnd}` where `reply` is shaped as
   * `KeyRecord.answer`'s (or `error`: the LockError of a refusal). Throws a StoreError.
   */
  async run(op, key, args = {}) {
    const first = await this.#attempt(op, key, args);
    if (first.answer !== undefined) return first.answer;
    // A namespace that does not exist is created by the first write, and only then: an
    // inspection of it says that it does not exist (as the Rust clients' does).
    if (op === 'inspect') throw first.noNamespace;
    await this.#driver.install(this.#bound);
    const again = await this.#attempt(op, key, args);
    if (again.answer === undefined) throw again.noNamespace;
    return again.answer;
  }

  /**
   * Runs `task()` once the calls on `key` that asked before it are over. A process's calls on one
   * key take turns, first come first served, as the async Rust engine's do: at once they would
   * only meet each other's compare-and-sets (a thousand waiters queuing at once would mostly
   * retry), and in turn each starts from the record the one before it wrote, one round trip.
   */
  async #inTurn(key, task) {
    const before = this.#turns.get(key);
    /** @type {(value?: void) => void} */
    let done = () => {};
    /** @type {Promise<void>} */
    const mine = new Promise((resolve) => (done = resolve));
    this.#turns.set(key, mine);
    try {
      if (before !== undefined) await before;
      return await task();
    } finally {
      done();
      if (this.#turns.get(key) === mine) this.#turns.delete(key);
    }
  }

  /** One run, in its turn on the key: `{answer}`, or `{noNamespace}` (its StoreError). */
  #attempt(op, key, args) {
    return this.#inTurn(key, () => this.#attemptNow(op, key, args));
  }

  async #attemptNow(op, key, args) {
    this.#options(op, args);
    const call = this.#raw.call(op, key, args.owner ?? '', args.fence ?? 0, args.ttl ?? 0, args.waitDeadline ?? 0, args.at ?? 0, performance.now());
    if (call === undefined) throw new TypeError(`unknown operation ${op}`);
    // A lease's release: a refusal that means it took effect is answered as done (the engine's rule).
    if (args.lease !== undefined) call.of_lease(args.lease.deadline, args.lease.unsure);
    // The answer is read from the engine at once, in the tick the call finished: another call's
    // finish would overwrite it.
    const ended = await this.#drive(call, key, () => {
      const status = this.#raw.finish(call, performance.now());
      if (status !== STORE_FAILED) return { answer: this.#answer(op, key, status) };
      const error = this.#storeError();
      return error.code === 'no-namespace' ? { noNamespace: error } : { failed: error };
    });
    if (ended.failed !== undefined) throw ended.failed;
    return ended;
  }

  /**
   * Does the IO `call` asks for until it is over, then `finish()`es it (which takes the call);
   * frees the call if anything throws first.
   */
  async #drive(call, key, finish) {
    const start = performance.now();
    let finished = false;
    try {
      let calls = 0;
      for (;;) {
        const next = this.#raw.poll(call, performance.now());
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
      return finish();
    } finally {
      if (!finished) call.free();
    }
  }

  /**
   * An acquire of `key` for `owner` waiting up to `wait` ms, by the Rust clients' waiting rules
   * (lock-protocol's queue.rs, in the engine): queued with a short wait deadline renewed while this
   * process lives, looking at the key's next deadline or at a hand-off notice (`notices`, if the
   * store sends them), riding out a store that fails while time remains. Answers
   * `{fence, deadline, localEnd}`; throws a LockError (`wait-timed-out`, `already-waiting`, the
   * core's) or a StoreError, or `signal.reason` when it aborts: it gives up first (its place in
   * the queue cancelled; a lease it was handed before the cancel landed, or won after the abort,
   * released), so that nothing of it is left when the promise rejects (if the store answers
   * within `WAIT_ALIVE`; else its place lapses by itself).
   * @param {{poll?: number, signal?: AbortSignal, notices?: {subscribe: Function}, request?: import('../../index.d.ts').RequestOptions}} [options]
   */
  async wait(key, owner, ttl, wait, options = {}) {
    const o = optionValues(options.request);
    const waiting = new RawWaiting(key, owner, ttl, wait, options.poll ?? 50, o[0], o[1], o[2], o[3], o[4]);
    const { signal, notices } = options;
    let heard = null;
    // Giving up is the engine's (lock-protocol's queue.rs): the loop only runs the calls it asks.
    let leaving = false;
    const giveUp = () => {
      leaving = true;
      if (!waiting.give_up(performance.now())) throw signal?.reason;
    };
    try {
      for (;;) {
        if (!leaving && signal?.aborted) giveUp();
        const want = waiting.want();
        if (want === WANT_NAP || want === WANT_PAUSE) {
          const nap = waiting.nap_ms();
          if (leaving) {
            await sleep(nap);
          } else if (want === WANT_NAP && heard !== null) {
            if ((await heard.wait(nap, signal)) === 'failed') {
              // The notice connection failed: look by ourselves from now on.
              heard.close();
              heard = null;
              waiting.watching(false);
            }
          } else {
            await sleepUnless(nap, signal);
          }
          continue;
        }
        let ended;
        do {
          const ask = () => {
            const call = this.#raw.call_waiting(waiting, key, performance.now());
            if (call === undefined) throw new Error('expiring-lock: this client is unusable');
            return this.#drive(call, key, () => this.#waited(this.#raw.finish_waiting(waiting, call, performance.now()), key, owner));
          };
          ended = want === WANT_RENEW || want === WANT_LOOK ? await this.#together(want, key, waiting, owner) : await this.#inTurn(key, ask);
          // A namespace that does not exist is created by the first write, and only then.
          if (ended.status === WAIT_INSTALL) await this.#driver.install(this.#bound);
        } while (ended.status === WAIT_INSTALL);
        if (ended.status === WON) {
          // Won after the signal aborted: the give-up releases it (the caller never takes it).
          if (signal?.aborted) {
            giveUp();
            continue;
          }
          return { fence: waiting.fence(), deadline: waiting.deadline(), localEnd: waiting.local_end() };
        }
        // Over: the give-up is done, or an error ended the wait (the engine left the key first).
        if (ended.status !== GO_ON) throw leaving ? signal?.reason : ended.error;
        if (waiting.in_line() && heard === null && notices !== undefined) {
          heard = notices.subscribe(key, owner);
          waiting.watching(true);
        }
      }
    } finally {
      heard?.close();
      waiting.free();
    }
  }

  /**
   * What `waiting` wants (`want`: a renewal of its place or a look), asked together with every
   * other waiter of this process on `key` that wants the same before the key's turn comes, as
   * the async Rust engine does: renewals are decided in one call, one compare-and-set for all
   * (lock-protocol's `Client::call_together`; each renewal rewrites the record that holds every
   * waiter, and a thousand waiters renewing one by one would need 1 500 writes a second), and
   * looks are answered by one read sent after each was asked. Answers its own end, as `#waited`
   * reads it.
   * @returns {Promise<{status: number, error: Error | null}>}
   */
  #together(want, key, waiting, owner) {
    const id = `${want}\n${key}`;
    return new Promise((resolve, reject) => {
      const batch = this.#batches.get(id) ?? { entries: [] };
      // In the batch before its turn can start (a key with nothing in flight starts it at once).
      batch.entries.push({ waiting, owner, resolve, reject });
      if (batch.entries.length > 1) return;
      this.#batches.set(id, batch);
      void this.#inTurn(key, () => {
        // Asked from now on: the next turn.
        if (this.#batches.get(id) === batch) this.#batches.delete(id);
        return this.#decideTogether(want, key, batch.entries);
      });
    });
  }

  /** Runs the renewals (or the look) of `entries` in one call, and answers each. */
  async #decideTogether(want, key, entries) {
    try {
      let call;
      if (want === WANT_RENEW) {
        for (const { waiting } of entries) this.#raw.batch_add(waiting);
        call = this.#raw.call_batch(key, performance.now());
      } else {
        call = this.#raw.call_waiting(entries[0].waiting, key, performance.now());
      }
      if (call === undefined) throw new Error('expiring-lock: this client is unusable');
      // Each waiter's end is read from the engine in the tick the batch finished (another call's
      // finish would overwrite the batch's answers). Renewals the batch left undecided answer
      // "go on" and ask again; every look is answered by the one read.
      const ended = await this.#drive(call, key, () => {
        this.#raw.finish_batch(call);
        const t = performance.now();
        return entries.map(({ waiting, owner }, i) => this.#waited(this.#raw.answer_batch(waiting, want === WANT_RENEW ? i : 0, t), key, owner));
      });
      entries.forEach(({ resolve }, i) => resolve(ended[i]));
    } catch (e) {
      for (const { reject } of entries) reject(e);
    }
  }

  /** A waiting call's status, with its error (read from the engine now) if it ends the wait. */
  #waited(status, key, owner) {
    return { status, error: status === GO_ON || status === WON || status === WAIT_INSTALL ? null : this.#waitError(status, key, owner) };
  }

  #waitError(status, key, owner) {
    if (status === WAIT_LOCK_ERROR) return toError(this.#raw);
    if (status === WAIT_STORE_ERROR) return this.#storeError();
    if (status === WAIT_TIMEOUT) return new LockError(WAIT_TIMED_OUT, `the wait for ${JSON.stringify(key)} timed out`);
    return new LockError(ALREADY_WAITING, `owner ${JSON.stringify(owner)} is already waiting for ${JSON.stringify(key)}`);
  }

  async #read(call, key, left) {
    const sent = performance.now();
    if (left <= 0) return this.#raw.read_failed(call, 'lost', `no answer within ${this.#bound} ms`, sent, sent);
    let read;
    try {
      read = await this.#driver.read(key, left);
    } catch (e) {
      const [code, reason] = failure(e);
      return this.#raw.read_failed(call, code, reason, sent, performance.now());
    }
    const arrived = performance.now();
    const r = read.record;
    return this.#raw.read(call, r !== null, r?.version ?? '0', r?.bytes ?? new Uint8Array(0), r?.fences ?? [], read.now, sent, arrived);
  }

  async #write(call, key, left) {
    const write = {
      expected: call.write_expected(),
      replaces: call.write_replaces(),
      version: call.write_version(),
      bytes: call.write_bytes() ?? null,
      freshFences: call.write_fresh_fences(),
      notBefore: call.write_not_before(),
      forgetAt: call.write_forget_at(),
      holdsFor: call.write_holds_for(),
    };
    if (left <= 0) return this.#raw.write_failed(call, 'lost', `no answer within ${this.#bound} ms`, performance.now());
    let written;
    try {
      written = await this.#driver.write(key, write, left);
    } catch (e) {
      const [code, reason] = failure(e);
      return this.#raw.write_failed(call, code, reason, performance.now());
    }
    const arrived = performance.now();
    if (written.conflict === undefined) return this.#raw.written(call, written.fences, arrived);
    const { record: r, now } = written.conflict;
    return this.#raw.conflict(call, r !== null, r?.version ?? '0', r?.bytes ?? new Uint8Array(0), r?.fences ?? [], now, arrived);
  }

  #storeError() {
    const code = /** @type {import('../../index.d.ts').StoreErrorCode} */ (this.#raw.store_error_code());
    const until = this.#raw.store_error_until();
    return new StoreError(code, this.#raw.store_error_message(), until >= 0 ? { until } : {});
  }

  /** The finished call's answer. */
  #answer(op, key, status) {
    const outcome = JSON.parse(this.#raw.outcome_json());
    const events = JSON.parse(this.#raw.events_json());
    for (const owner of outcome.handedTo) {
      // Best effort: a waiter also looks by itself.
      this.#driver.announce(key, owner).catch(() => {});
    }
    const shape = SHAPES[op];
    let reply;
    if (status === FAILED) reply = { error: toError(this.#raw) };
    else if (shape === 'inspect') reply = { info: JSON.parse(this.#raw.info_json()) };
    else if (shape === 'extend') reply = { fence: f64()[this.#out], deadline: f64()[this.#out + 1] };
    else if (shape === 'done') reply = {};
    else if (shape === 'release') {
      const until = f64()[this.#out];
      reply = until === 0 ? { type: 'released' } : { type: 'held-until', until };
    }
    else {
      const type = names()[status - FIRST_OUTCOME];
      const out = f64();
      reply = status < FIRST_OUTCOME + 2 ? { type, fence: out[this.#out], deadline: out[this.#out + 1] } : { type, position: out[this.#out] };
    }
    return { reply, events, ...outcome };
  }

  /**
   * A query over the namespace (see `LockTable.query`): the key list, then each candidate key
   * inspected in byte order (applying time first, `at` with the caller's time) until one more
   * than a page is in use. Answers `{page, events}` (the inspections' events) or throws; a bad
   * limit, prefix or cursor is the core's LockError, checked before anything is read.
   */
  async query(prefix, after, limit, at = 0) {
    this.checkQuery(prefix, after, limit);
    const encoder = new TextEncoder();
    // `lock_protocol::driver::query_order`: the names `QueryPage::matches` takes (the prefix, then
    // after the cursor), in byte order. (Written here rather than called in the engine, whose
    // build would grow a string sort.)
    const bytes = (name) => encoder.encode(name);
    const order = (a, b) => Buffer.compare(bytes(a), bytes(b));
    const candidates = (await this.#driver.keys()).filter((name) => name.startsWith(prefix) && order(name, after) > 0).sort(order);
    const keys = [];
    const events = [];
    for (const key of candidates) {
      if (keys.length > limit) break;
      const { reply, events: more } = await this.run('inspect', key, { at });
      events.push(...more);
      if (reply.error !== undefined) throw reply.error;
      if (reply.info !== null) keys.push({ key, info: reply.info });
    }
    // The page rule of `QueryPage::from_ordered`: the first `limit` keys in use, and the last of
    // them as the cursor when one more is.
    const next = keys.length > limit ? keys[limit - 1].key : null;
    keys.length = Math.min(keys.length, limit);
    return { page: { keys, next }, events };
  }

  /**
   * Throws the LockError (`query-limit`, or a prefix or cursor refused as a key would be) if the
   * client's limits refuse a query's arguments; the store is not read.
   */
  checkQuery(prefix, after, limit) {
    if (this.#raw.check_query(prefix, after, limit) === FAILED) throw toError(this.#raw);
  }

  /** Hands `args.options` (the lock kinds') to the engine for `acquire-with` and `steal`. */
  #options(op, args) {
    if (op !== 'acquire-with' && op !== 'steal') return;
    const o = optionValues(args.options);
    this.#raw.set_options(o[0], o[1], o[2], o[3], o[4], o[5]);
  }

  #freed = false;

  /**
   * Frees the engine's memory for this client (once). A call still in flight (a wait, say)
   * answers LockError `closed` at its next step instead of touching freed memory.
   */
  free() {
    if (this.#freed) return;
    this.#freed = true;
    const raw = this.#raw;
    this.#raw = CLOSED_RAW;
    raw.free();
  }
}

/**
 * A driver's failure as a store error code and a reason: the reason it gave, without the store's
 * name (the engine's StoreError names it, as the Rust one's Display does).
 */
function failure(e) {
  if (e instanceof StoreError) return [e.code, reasonOf(e)];
  // Anything else a driver threw is the server's answer to the call.
  return ['server', e instanceof Error ? e.message : String(e)];
}
