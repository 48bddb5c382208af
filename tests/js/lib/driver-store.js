// Vector driver for the npm package's store clients: a store's namespace seen as one lock table
// with the caller's clock, as lock-store's StoreTable (lock-store/src/table.rs) is for the Rust
// clients. A store has no table-wide timer: before each call this harness sweeps the namespace's
// due keys, one wake-up at a time in the table's order (instant, then the lease's fence), each a
// `handle-timeout` of that key at its own instant through the store; statistics are gauges from a
// scan and counters of this table's calls. Every decision is the engine's (StoreClient); this file
// only plays the timer and keeps the counts.

import { KeyRecord, LockError, LockTable } from '../../../lock-wasm/js/src/node.js';
import { StoreClient } from '../../../lock-wasm/js/src/stores/client.js';
import { camel, hasOptions, snake, stepOptions } from './vectors.js';
import { keyTerm } from './driver-npm.js';

const num = (v) => (typeof v === 'bigint' ? Number(v) : v);

const ZERO_COUNTERS = {
  acquired: 0, handedOff: 0, released: 0, extended: 0, expired: 0, queued: 0,
  waitTimedOut: 0, cancelled: 0, rejected: 0, eventsDropped: 0, stolen: 0,
};

/** A step's lock-kind options as the package takes them. */
function requestOptions(step) {
  const o = stepOptions(step);
  return { mode: o.mode, permits: num(o.permits), minHold: num(o.min_hold), lockDelay: num(o.lock_delay), metadata: o.metadata, waitAlive: num(o.wait_alive) };
}

function term(type, fields) {
  return { [type]: fields };
}

function errorTerm(error) {
  return Object.keys(error.details).length === 0 ? error.code : { [error.code]: snake(error.details) };
}

export class StoreTableDriver {
  /**
   * @param {() => Promise<object>} open opens the store's driver (once; a namespace of its own)
   * @param {{stale?: boolean}} options `stale`: every call starts from an outdated record
   */
  constructor(open, { stale = false } = {}) {
    this.open = open;
    this.stale = stale;
    this.store = null;
    this.client = null;
  }

  async start(limits) {
    this.store ??= await this.open();
    await this.store.uninstall();
    await this.store.install(5000);
    this.client?.free();
    this.limits = camel(Object.fromEntries(Object.entries(limits).map(([k, v]) => [k, num(v)])));
    this.client = new StoreClient(this.store, { limits: this.limits, callerTime: true });
    this.client.setStale(this.stale);
    this.clock = 0;
    this.events = [];
    this.counters = { ...ZERO_COUNTERS };
  }

  async close() {
    this.client?.free();
    if (this.store !== null) {
      await this.store.uninstall();
      await this.store.close();
    }
  }

  /** The key's record as stored now, decoded by the engine (a tombstone or none: free). */
  async #peek(key) {
    const { record } = await this.store.read(key, 5000);
    return new KeyRecord(record === null || record.bytes.length <= 8 ? null : record.bytes, record?.fences ?? [], this.limits);
  }

  /** The namespace's wake-ups `[instant, lease fence, key]`. */
  async #wakeups() {
    const due = [];
    for (const key of await this.store.keys()) {
      const record = await this.#peek(key);
      const state = record.state(0);
      record.free();
      if (state.nextDeadline !== null) due.push([state.nextDeadline, state.lease?.fence ?? -1, key]);
    }
    return due;
  }

  async #sweep(now) {
    for (;;) {
      const due = (await this.#wakeups()).filter((w) => w[0] <= now);
      if (due.length === 0) return;
      due.sort((a, b) => a[0] - b[0] || a[1] - b[1] || (a[2] < b[2] ? -1 : 1));
      const [at, , key] = due[0];
      this.#absorb(await this.client.run('handle-timeout', key, { at }));
    }
  }

  async #advance(now) {
    this.clock = Math.max(this.clock, now);
    await this.#sweep(this.clock);
    return this.clock;
  }

  #absorb(answer) {
    for (const event of answer.events) {
      const c = this.counters;
      if (event.type === 'expired') c.expired += 1;
      else if (event.type === 'granted') c.handedOff += 1;
      else if (event.type === 'stolen') c.stolen += 1;
      else c.waitTimedOut += 1;
      if (this.events.length >= { ...LockTable.defaultLimits(), ...this.limits }.maxPendingEvents) {
        this.events.shift();
        c.eventsDropped += 1;
      }
      this.events.push(event);
    }
    return answer.reply;
  }

  async run(step) {
    const args = {
      owner: step.owner,
      ttl: num(step.ttl),
      fence: num(step.fence),
      waitDeadline: num(step.wait_deadline),
      at: num(step.now),
    };
    const c = this.counters;
    // An acquire with options is `acquire-with` (a try: its wait ends now); a steal takes them too.
    let op = step.op;
    if ((op === 'try-acquire' || op === 'acquire') && hasOptions(step)) {
      if (op === 'try-acquire') args.waitDeadline = args.at;
      op = 'acquire-with';
    }
    if (op === 'acquire-with' || op === 'steal') args.options = requestOptions(step);
    switch (step.op) {
      case 'try-acquire':
      case 'acquire':
      case 'steal':
      case 'renew-wait':
      case 'release':
      case 'extend':
      case 'cancel-wait': {
        const valid = this.client.valid(op, step.key, args);
        if (valid) await this.#advance(args.at);
        // Releasing again a lease that keeps its place (a minimum hold) ends nothing: not counted.
        const repeat = valid && step.op === 'release' && (await this.#keptAfterRelease(step.key, step.owner, args.fence));
        if (op === 'acquire-with' && step.op === 'try-acquire') args.waitDeadline = this.clock;
        const reply = this.#absorb(await this.client.run(op, step.key, { ...args, at: this.clock }));
        if (reply.error !== undefined) {
          if (!(reply.error instanceof LockError)) throw reply.error;
          c.rejected += 1;
          return { err: errorTerm(reply.error) };
        }
        if (step.op === 'release') {
          if (!repeat) c.released += 1;
          return { ok: reply.type === 'held-until' ? { 'held-until': { until: reply.until } } : 'released' };
        }
        if (step.op === 'cancel-wait') {
          c.cancelled += 1;
          return { ok: 'cancelled' };
        }
        if (step.op === 'extend') {
          c.extended += 1;
          return { ok: { extended: reply } };
        }
        const { type, ...fields } = reply;
        if (type === 'acquired') c.acquired += 1;
        if (type === 'queued') c.queued += 1;
        return { ok: term(type, fields) };
      }
      case 'handle-timeout':
        await this.#advance(args.at);
        return {};
      case 'inspect': {
        if (this.client.valid('inspect', step.key, args)) await this.#advance(args.at);
        else c.rejected += 1;
        const reply = this.#absorb(await this.client.run('inspect', step.key, { at: this.clock }));
        if (reply.error !== undefined) return { err: errorTerm(reply.error) };
        const info = reply.info;
        return { ok: info === null ? null : keyTerm(info) };
      }
      case 'query': {
        const [prefix, after, limit] = [step.prefix ?? '', step.after ?? '', num(step.limit)];
        try {
          this.client.checkQuery(prefix, after, limit);
        } catch (error) {
          if (!(error instanceof LockError)) throw error;
          c.rejected += 1;
          return { err: errorTerm(error) };
        }
        await this.#advance(args.at);
        const { page, events } = await this.client.query(prefix, after, limit, this.clock);
        this.#absorb({ events });
        return { ok: { keys: page.keys.map(({ key, info }) => ({ key, ...keyTerm(info) })), next: page.next } };
      }
      case 'handle-timeout-bounded':
      case 'raise-fence-floor':
      case 'cancel-all-waits':
        throw new Error(`a shared store has no table-wide ${step.op}`);
      case 'next-wakeup': {
        const due = await this.#wakeups();
        return { ok: due.length === 0 ? null : Math.min(...due.map((w) => w[0])) };
      }
      case 'stats':
        return { stats: snake(await this.#stats(args.at)) };
      case 'snapshot':
      case 'restore':
        throw new Error(`a shared store has no table-wide ${step.op}`);
      default:
        throw new Error(`unknown op ${step.op}`);
    }
  }

  /** Whether `owner`'s lease `fence` on `key` was released early and keeps its place now. */
  async #keptAfterRelease(key, owner, fence) {
    const record = await this.#peek(key);
    try {
      record.inspect(key, this.clock);
      const info = record.answer();
      return info !== null && info.holders.some((h) => h.owner === owner && h.fence === fence && h.ended === 'released');
    } finally {
      record.free();
    }
  }

  async #stats(now) {
    const at = await this.#advance(now);
    const stats = {
      liveLeases: 0, waiters: 0, expiredRecords: 0, pendingEvents: this.events.length,
      clock: at, lastFence: await this.store.lastFence(), ...this.counters,
    };
    for (const key of await this.store.keys()) {
      const record = await this.#peek(key);
      const state = record.state(at);
      record.free();
      stats.liveLeases += state.lease === null ? 0 : 1;
      stats.waiters += state.waiters;
      stats.expiredRecords += state.expiredRecords;
    }
    return stats;
  }

  drainEvents() {
    return this.events.splice(0).map(({ type, ...fields }) => term(type, fields));
  }
}
