// KeyRecord: one key's record of a shared store, decided by the engine's core. Checked against
// LockTable (the same core as a table) over a store of this test's own (bytes, the tokens of
// the last write, a namespace counter: only what a store keeps), and on bad input.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { KeyRecord, LockError, LockTable } from '../../lock-wasm/js/src/node.js';

/** A store of one key, as a shared store keeps it: no lock rules, only bytes and tokens. */
class MemoryStore {
  bytes = null;
  fences = [];
  counter = 0;

  /** Runs `op` on the key's record through KeyRecord: load, decide, write, answer. */
  run(op) {
    const record = new KeyRecord(this.bytes, this.fences);
    try {
      const step = op(record);
      let fresh = [];
      if (step.changed) {
        fresh = Array.from({ length: step.freshFences }, () => (this.counter += 1));
        this.bytes = step.bytes;
        this.fences = fresh;
      } else {
        assert.equal(step.freshFences, 0, 'an unchanged record asks for no tokens');
      }
      try {
        return { value: record.answer(fresh), events: record.events };
      } catch (error) {
        assert.ok(error instanceof LockError, String(error));
        return { error: error.code, events: record.events };
      }
    } finally {
      record.free();
    }
  }
}

/** The table's answer and events for the same call. */
function onTable(table, call) {
  let answer;
  try {
    answer = { value: call(table) };
  } catch (error) {
    assert.ok(error instanceof LockError, String(error));
    answer = { error: error.code };
  }
  return { ...answer, events: table.drainEvents() };
}

/** A small deterministic generator (mulberry32). */
function random(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('KeyRecord', () => {
  it('decides every call as LockTable does, over a store that keeps only bytes and tokens', () => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const next = random(seed);
      const pick = (list) => list[Math.floor(next() * list.length)];
      const table = new LockTable();
      const store = new MemoryStore();
      const owners = ['a', 'b', 'c', 'd'];
      let now = 0;
      let lastFence = 0;
      const kinds = new Set();
      for (let i = 0; i < 400; i += 1) {
        now += Math.floor(next() * 40);
        const owner = pick(owners);
        const ttl = 1 + Math.floor(next() * 120);
        // The fence of the current holder's lease, or a stale or unknown one.
        const fence = Math.max(pick([lastFence, lastFence - 1, 0, lastFence + 5]), 0);
        const waitDeadline = now + Math.floor(next() * 200);
        // Each call runs twice (table, record): its arguments are drawn once, above.
        const calls = [
          ['tryAcquire', (t) => t.tryAcquire('job', owner, ttl, now)],
          ['acquire', (t) => t.acquire('job', owner, ttl, waitDeadline, now)],
          ['release', (t) => t.release('job', owner, fence, now)],
          ['extend', (t) => t.extend('job', owner, fence, ttl, now)],
          ['cancelWait', (t) => t.cancelWait('job', owner, now)],
          ['renewWait', (t) => t.renewWait('job', owner, waitDeadline, now)],
          ['handleTimeout', (t) => (t instanceof LockTable ? t.handleTimeout(now) : t.handleTimeout('job', now))],
          ['inspect', (t) => t.inspect('job', now)],
        ];
        const [name, call] = pick(calls);
        const expected = onTable(table, call);
        const got = store.run(call);
        assert.deepEqual(got, expected, `seed ${seed}, call ${i}: ${name} at ${now}`);
        kinds.add(expected.error ?? expected.value?.type ?? name);
        const info = table.inspect('job', now);
        table.drainEvents();
        if (info !== null) lastFence = info.fence;
      }
      // The walk met grants, queues, hand-offs and refusals, not only one of them.
      for (const kind of ['acquired', 'queued', 'held', 'not-owner']) {
        assert.ok(kinds.has(kind), `seed ${seed} never met ${kind}: ${[...kinds]}`);
      }
      table.free();
    }
  });

  it('hands the key to the next waiter with the token the store allocated', () => {
    const store = new MemoryStore();
    store.counter = 41; // a namespace that issued tokens for other keys
    const a = store.run((r) => r.tryAcquire('job', 'a', 100, 0));
    assert.deepEqual(a.value, { type: 'acquired', fence: 42, deadline: 100 });
    const b = store.run((r) => r.acquire('job', 'b', 50, 1000, 10));
    assert.deepEqual(b.value, { type: 'queued', position: 1 });
    // The expiry hands the key over at 100, in the record, with a fresh token numbered by the
    // store at the write of the call that saw it.
    const seen = store.run((r) => r.inspect('job', 120));
    assert.equal(seen.value.owner, 'b');
    assert.equal(seen.value.fence, 43);
    assert.deepEqual(
      seen.events.map((e) => [e.type, e.owner, e.fence, e.at]),
      [
        ['expired', 'a', 42, 100],
        ['granted', 'b', 43, 100],
      ],
    );
    // The stored record holds real tokens from then on.
    assert.deepEqual(store.fences, [43]);
    const released = store.run((r) => r.release('job', 'b', 43, 130));
    assert.equal(released.error, undefined);
    assert.equal(store.run((r) => r.inspect('job', 130)).value, null);
  });

  it('refuses bad input with a typed error and changes nothing', () => {
    assert.throws(() => new KeyRecord(Uint8Array.of(1, 2, 3)), (e) => e instanceof LockError && e.code.startsWith('snapshot-'));
    assert.throws(() => new KeyRecord('bytes'), TypeError);
    assert.throws(() => new KeyRecord(null, [1.5]), RangeError);
    assert.throws(() => new KeyRecord(null, [], { maxTtl: 0 }), (e) => e instanceof LockError && e.code === 'invalid-limits');
    const record = new KeyRecord();
    assert.throws(() => record.answer(), /follows an operation/);
    const step = record.tryAcquire('', 'a', 10, 0);
    assert.deepEqual([step.changed, step.freshFences, step.bytes], [false, 0, null]);
    assert.throws(() => record.answer(), (e) => e instanceof LockError && e.code === 'key-empty');
    assert.throws(() => record.tryAcquire('job', 'a', -1, 0), RangeError);
    assert.throws(() => record.tryAcquire(7, 'a', 10, 0), TypeError);
    record.free();
    assert.throws(() => record.tryAcquire('job', 'a', 10, 0), /freed/);
  });
});
