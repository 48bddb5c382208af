// The high-level API (Locks, Lease, withLock) on a virtual clock: every instant is exact.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ALREADY_WAITING, CLOSED, Lease, Locks, LockError, LockTable, WAIT_TIMED_OUT } from '../../lock-wasm/js/src/node.js';
import { FakeTime, settle } from './lib/fake-time.js';

function setup(limits) {
  const time = new FakeTime();
  const locks = new Locks({ ...time.options, limits });
  return { time, locks };
}

/** Promise state without waiting for it. */
async function state(promise) {
  const marker = Symbol('pending');
  const result = await Promise.race([promise.then((v) => ({ v }), (e) => ({ e })), settle().then(() => marker)]);
  return result === marker ? 'pending' : result;
}

describe('acquire and hand-off', () => {
  it('a waiter is handed the lock when the holder releases', async () => {
    const { time, locks } = setup();
    const a = locks.tryAcquire('job', { owner: 'a', ttl: 100 });
    assert.deepEqual([a.fence, a.deadline, a.held], [1, 100, true]);
    const waiting = locks.acquire('job', { owner: 'b', ttl: 50, timeout: 1000 });
    assert.equal(await state(waiting), 'pending');
    assert.deepEqual(locks.inspect('job').waiters, [{ owner: 'b', ttl: 50, waitDeadline: 1000, waitEnd: 1000, mode: 'exclusive', metadata: '' }]);
    await time.advance(30);
    assert.equal(a.release(), true);
    const b = await waiting;
    assert.deepEqual([b.owner, b.fence, b.deadline], ['b', 2, 80]);
    assert.equal(locks.inspect('job').owner, 'b');
  });

  it('a waiter is handed the lock exactly at the holder deadline, and the holder is told once', async () => {
    const { time, locks } = setup();
    const lost = [];
    const a = locks.tryAcquire('job', { owner: 'a', ttl: 100, onLost: (info) => lost.push(info) });
    const waiting = locks.acquire('job', { owner: 'b', ttl: 50 });
    await time.advance(99);
    assert.equal(await state(waiting), 'pending');
    assert.equal(a.held, true);
    await time.advance(1);
    const b = await waiting;
    assert.deepEqual([b.fence, b.deadline], [2, 150]);
    assert.deepEqual(lost, [{ key: 'job', owner: 'a', fence: 1, at: 100, reason: 'expired' }]);
    assert.equal(a.isLost, true);
    assert.deepEqual(await a.lost, { key: 'job', owner: 'a', fence: 1, at: 100, reason: 'expired' });
    assert.equal(a.signal.aborted, true);
    assert.equal(a.signal.reason.code, 'expired');
    await time.advance(1000);
    assert.equal(lost.length, 1, 'onLost fires once');
    assert.equal(a.release(), false, 'a lost lease cannot be released');
  });

  it('waiters are served first come, first served', async () => {
    const { locks } = setup();
    const a = locks.tryAcquire('k', { owner: 'a', ttl: 100 });
    const order = [];
    const waits = ['b', 'c', 'd'].map((owner) => locks.acquire('k', { owner, ttl: 10 }).then((l) => (order.push(owner), l)));
    a.release();
    (await waits[0]).release();
    (await waits[1]).release();
    await waits[2];
    assert.deepEqual(order, ['b', 'c', 'd']);
  });

  it('tryAcquire answers null while another owner holds the key', () => {
    const { locks } = setup();
    locks.tryAcquire('k', { ttl: 100 });
    assert.equal(locks.tryAcquire('k', { ttl: 100 }), null);
  });

  it('the same owner asking again gets the same lease', () => {
    const { locks } = setup();
    const first = locks.tryAcquire('k', { owner: 'a', ttl: 100 });
    assert.equal(locks.tryAcquire('k', { owner: 'a', ttl: 100 }), first);
  });
});

describe('waiting ends', () => {
  it('with a wait-timed-out LockError at the timeout', async () => {
    const { time, locks } = setup();
    locks.tryAcquire('k', { owner: 'a', ttl: 1000 });
    const waiting = locks.acquire('k', { owner: 'b', ttl: 10, timeout: 50 });
    await time.advance(49);
    assert.equal(await state(waiting), 'pending');
    await time.advance(1);
    await assert.rejects(waiting, (e) => e instanceof LockError && e.code === WAIT_TIMED_OUT && e.details.at === 50);
    assert.deepEqual(locks.inspect('k').waiters, []);
  });

  it('with the signal reason when aborted, leaving the queue', async () => {
    const { time, locks } = setup();
    locks.tryAcquire('k', { owner: 'a', ttl: 1000 });
    const controller = new AbortController();
    const waiting = locks.acquire('k', { owner: 'b', ttl: 10, signal: controller.signal });
    await time.advance(10);
    controller.abort(new Error('user gave up'));
    await assert.rejects(waiting, /user gave up/);
    assert.deepEqual(locks.inspect('k').waiters, []);
    assert.equal(locks.stats().cancelled, 1);
  });

  it('at once for an already-aborted signal', async () => {
    const { locks } = setup();
    await assert.rejects(locks.acquire('k', { ttl: 10, signal: AbortSignal.abort(new Error('no')) }), /no/);
    assert.equal(locks.stats().queued, 0);
  });

  it('with the core error for bad input, changing nothing', async () => {
    const { locks } = setup();
    await assert.rejects(locks.acquire('', { ttl: 10 }), (e) => e instanceof LockError && e.code === 'key-empty');
    await assert.rejects(locks.acquire('k', { ttl: 0 }), (e) => e.code === 'ttl-zero');
    assert.equal(locks.stats().liveLeases, 0);
  });
});

describe('leases', () => {
  it('release is idempotent and never touches the next holder', () => {
    const { locks } = setup();
    const a = locks.tryAcquire('k', { owner: 'a', ttl: 100 });
    assert.equal(a.release(), true);
    const b = locks.tryAcquire('k', { owner: 'b', ttl: 100 });
    assert.equal(a.release(), false);
    assert.equal(b.held, true);
    assert.equal(locks.inspect('k').owner, 'b');
  });

  it('extend pushes the deadline; extending a lost lease throws expired', async () => {
    const { time, locks } = setup();
    const a = locks.tryAcquire('k', { ttl: 100 });
    await time.advance(60);
    assert.equal(a.extend(), 160);
    assert.equal(a.extend(200), 260);
    await time.advance(200);
    assert.equal(a.isLost, true);
    assert.throws(() => a.extend(), (e) => e.code === 'expired');
  });

  it('keep-alive renews the lease past its first deadline until released', async () => {
    const { time, locks } = setup();
    const lost = [];
    const a = locks.tryAcquire('k', { ttl: 90, keepAlive: true, onLost: (i) => lost.push(i) });
    await time.advance(1000);
    assert.equal(a.held, true);
    assert.ok(a.deadline > 1000 && a.deadline <= 1090, `deadline ${a.deadline}`);
    assert.equal(locks.inspect('k').fence, 1);
    assert.ok(locks.stats().extended >= 15);
    a.release();
    await settle();
    assert.equal(time.pending, 0, 'no timer is left once nothing is pending');
    await time.advance(1000);
    assert.deepEqual(lost, []);
  });

  it('a throwing onLost callback does not break the table', async () => {
    const { time, locks } = setup();
    const errors = [];
    const original = console.error;
    console.error = (...args) => errors.push(args);
    try {
      locks.tryAcquire('k', { ttl: 10, onLost: () => { throw new Error('boom'); } });
      await time.advance(10);
    } finally {
      console.error = original;
    }
    assert.equal(errors.length, 1);
    assert.ok(locks.tryAcquire('k', { ttl: 10 }));
  });

  it('a loss whose expiry event was dropped is reported by the refusal of the release, whichever refusal (lock-core lease_loss)', async () => {
    // One pending event at most and no memory of expired leases: of three leases expiring at
    // once, two hear no event, and their release is refused `not-held`, which ends a lease.
    const { time, locks } = setup({ maxPendingEvents: 1, maxExpiredRecords: 0 });
    const lost = [];
    const leases = ['k1', 'k2', 'k3'].map((key) => locks.tryAcquire(key, { owner: 'a', ttl: 100, onLost: (info) => lost.push(info) }));
    await time.advance(100);
    assert.equal(lost.length, 1, 'one expiry event kept');
    assert.deepEqual(leases.map((l) => l.release()), [false, false, false]);
    assert.deepEqual(leases.map((l) => l.isLost), [true, true, true]);
    const told = lost.map(({ key, at, reason }) => [key, at, reason]).sort();
    assert.deepEqual(told, [['k1', 100, 'expired'], ['k2', 100, 'expired'], ['k3', 100, 'expired']]);
  });
});

describe('withLock', () => {
  it('releases when the callback settles, also when it throws', async () => {
    const { locks } = setup();
    const result = await locks.withLock('k', { ttl: 100 }, async (lease) => {
      assert.equal(locks.inspect('k').fence, lease.fence);
      return 42;
    });
    assert.equal(result, 42);
    assert.equal(locks.inspect('k'), null);
    await assert.rejects(locks.withLock('k', { ttl: 100 }, async () => { throw new Error('fail'); }), /fail/);
    assert.equal(locks.inspect('k'), null);
  });

  it('aborts the callback signal when the lease is lost', async () => {
    const { time, locks } = setup();
    let signal;
    const run = locks.withLock('k', { ttl: 50 }, (lease) => {
      signal = lease.signal;
      return new Promise((resolve) => signal.addEventListener('abort', () => resolve(signal.reason.code)));
    });
    const outcome = run.then(() => null, (e) => e);
    await time.advance(50);
    // The callback settled after the loss: withLock says so (issue 11), carrying its value.
    const e = await outcome;
    assert.ok(e instanceof LockError && e.code === 'expired' && e.result === 'expired', String(e));
  });

  it('rejects with expired when the lease was lost before the callback settled (issue 11)', async () => {
    const { time, locks } = setup();
    let finish;
    const slow = locks.withLock('k', { ttl: 100 }, () => new Promise((resolve) => (finish = resolve)));
    await settle();
    await time.advance(150); // the callback outlives its TTL
    finish('written');
    const error = await slow.then(() => assert.fail('resolved'), (e) => e);
    assert.ok(error instanceof LockError, String(error));
    assert.equal(error.code, 'expired');
    assert.deepEqual(error.details, { deadline: 100 });
    assert.equal(error.result, 'written');
    assert.match(error.message, /^lease expired at 100 ms; the lock was lost before this call \(the withLock callback settled after the loss/);
    // A callback that fails after the loss: its error is the cause.
    let fail;
    const failing = locks.withLock('j', { ttl: 10 }, () => new Promise((_, reject) => (fail = reject)));
    await settle();
    await time.advance(20);
    const boom = new Error('boom');
    fail(boom);
    const lost = await failing.then(() => assert.fail('resolved'), (e) => e);
    assert.equal(lost.code, 'expired');
    assert.equal(lost.cause, boom);
    // In time, nothing changes: the value, or the callback's own error.
    assert.equal(await locks.withLock('k', { ttl: 100 }, () => 7), 7);
  });

  it('says the options come first when called as withLock(key, callback) (issue 11)', async () => {
    const { locks } = setup();
    await assert.rejects(locks.withLock('k', () => 1), /options \(at least \{ ttl \}\) come before the callback/);
    await assert.rejects(locks.withLock('k', { ttl: 1 }), /needs a callback as its third argument, got undefined/);
  });

  it('with ifAvailable gives null instead of waiting', async () => {
    const { locks } = setup();
    locks.tryAcquire('k', { ttl: 100 });
    assert.equal(await locks.withLock('k', { ttl: 10, ifAvailable: true }, (lease) => lease), null);
  });
});

describe('the timer', () => {
  it('is one timer, following the core next wake-up, and is cleared when nothing is pending', async () => {
    const { time, locks } = setup();
    const a = locks.tryAcquire('a', { ttl: 100 });
    locks.tryAcquire('b', { ttl: 50 });
    await settle();
    assert.equal(time.pending, 1);
    assert.equal(time.nextAt, 50);
    await time.advance(50);
    assert.equal(time.nextAt, 100);
    a.release();
    await settle();
    assert.equal(time.pending, 0);
  });
});

describe('the boundary', () => {
  it('refuses non-integer, negative, unsafe and BigInt milliseconds with RangeError/TypeError', () => {
    const { locks } = setup();
    for (const ttl of [1.5, -1, 2 ** 53, NaN, Infinity]) assert.throws(() => locks.tryAcquire('k', { ttl }), RangeError);
    assert.throws(() => locks.tryAcquire('k', { ttl: 10n }), TypeError);
    assert.throws(() => locks.tryAcquire('k', { ttl: '10' }), TypeError);
    assert.throws(() => locks.tryAcquire(42, { ttl: 10 }), TypeError);
    assert.throws(() => locks.tryAcquire('\ud800', { ttl: 10 }), TypeError);
    assert.equal(locks.stats().rejected, 0, 'refused before the core');
  });

  it('reports core errors as LockError with the WIT code and the core message', () => {
    const { locks } = setup({ maxKeyBytes: 4 });
    assert.throws(
      () => locks.tryAcquire('too-long', { ttl: 10 }),
      (e) => e instanceof LockError && e.code === 'key-too-long' && e.details.len === 8 && e.details.max === 4 && /max_key_bytes/.test(e.message),
    );
    assert.throws(() => new Locks({ limits: { maxKeys: 0 } }), (e) => e.code === 'invalid-limits' && e.details.limit === 'max_keys');
    // a huge key is the core's key-too-long (with its real UTF-8 length), not a trap
    assert.throws(() => locks.tryAcquire('é'.repeat(1_000_000), { ttl: 10 }), (e) => e.code === 'key-too-long' && e.details.len === 2_000_000);
    assert.ok(locks.tryAcquire('ok', { ttl: 10 }), 'the table still works');
    assert.throws(() => new Locks({ limits: { maxKey: 1 } }), /unknown limit "maxKey"/);
  });
});

describe('on the real clock', () => {
  it('lets Node exit once nothing is pending (the one timer is cleared)', async () => {
    const { execFile } = await import('node:child_process');
    const entry = new URL('../../lock-wasm/js/src/node.js', import.meta.url).href;
    // A lease of one hour and a waiter: if the timer outlived them, this process would not exit
    // and the 20 s kill below would fail the test.
    const script = `
      import { Locks } from '${entry}';
      const locks = new Locks();
      const a = locks.tryAcquire('k', { ttl: 3_600_000, keepAlive: true });
      const waiting = locks.acquire('k', { ttl: 3_600_000, timeout: 3_600_000 });
      a.release();
      (await waiting).release();
      console.log('done');
    `;
    const { code, stdout } = await new Promise((resolve) => {
      const child = execFile(process.execPath, ['--input-type=module', '-e', script], { timeout: 20_000 }, (error, out) =>
        resolve({ code: error ? (error.killed ? 'killed' : error.code) : 0, stdout: out }),
      );
      child.stdin?.end();
    });
    assert.equal(stdout.trim(), 'done');
    assert.equal(code, 0);
  });

  it('a forgotten lease does not hold the process, a pending acquire does (issue 11)', async () => {
    const { execFile } = await import('node:child_process');
    const entry = new URL('../../lock-wasm/js/src/node.js', import.meta.url).href;
    const run = (script) =>
      new Promise((resolve) => {
        const started = Date.now();
        execFile(process.execPath, ['--input-type=module', '-e', script], { timeout: 20_000 }, (error, out) =>
          resolve({ code: error ? (error.killed ? 'killed' : error.code) : 0, stdout: out.trim(), ms: Date.now() - started }),
        );
      });
    // A one-hour lease, never released, with keep-alive: the process still ends at once.
    const forgotten = await run(`
      import { Locks } from '${entry}';
      const locks = new Locks();
      locks.tryAcquire('k', { ttl: 3_600_000, keepAlive: true });
      console.log('left');
    `);
    assert.deepEqual([forgotten.code, forgotten.stdout], [0, 'left']);
    assert.ok(forgotten.ms < 10_000, `took ${forgotten.ms} ms`);
    // A waiter whose hand-off comes from the timer (the holder's 300 ms deadline) is served:
    // the timer held the process while the acquire was pending.
    const waiting = await run(`
      import { Locks } from '${entry}';
      const locks = new Locks();
      locks.tryAcquire('k', { ttl: 300 });
      const lease = await locks.acquire('k', { ttl: 10 });
      console.log('handed fence', lease.fence);
    `);
    assert.deepEqual([waiting.code, waiting.stdout], [0, 'handed fence 2']);
  });
});

describe('issue 11: options and messages', () => {
  it('tryAcquire with retryAt answers the holder deadline instead of null', async () => {
    const { time, locks } = setup();
    const a = locks.tryAcquire('k', { owner: 'a', ttl: 100 });
    await time.advance(30);
    assert.equal(locks.tryAcquire('k', { owner: 'b', ttl: 10 }), null, 'the fast path is unchanged');
    assert.deepEqual(locks.tryAcquire('k', { owner: 'b', ttl: 10, retryAt: true }), { retryAt: 100 });
    a.extend(200);
    assert.deepEqual(locks.tryAcquire('k', { owner: 'b', ttl: 10, retryAt: true }), { retryAt: 230 });
    await time.advance(200);
    const b = locks.tryAcquire('k', { owner: 'b', ttl: 10, retryAt: true });
    assert.ok(b instanceof Lease, 'at the deadline a retry succeeds');
  });

  it('refuses unknown option names, naming them and the known ones', async () => {
    const { locks } = setup();
    assert.throws(() => locks.tryAcquire('k', { ttl: 10, steal: true }), (e) => e instanceof TypeError && /unknown option "steal" for tryAcquire; known: ttl, owner, keepAlive, onLost/.test(e.message));
    await assert.rejects(locks.acquire('k', { ttl: 10, timout: 10 }), (e) => e instanceof TypeError && /unknown option "timout" for acquire; known: .*timeout, signal/.test(e.message));
    await assert.rejects(locks.withLock('k', { ttl: 10, mood: 'shared' }, () => 1), /unknown option "mood" for withLock/);
    await assert.rejects(locks.withLock('k', { ttl: 10, ifAvailable: true, timeout: 5 }, () => 1), /ifAvailable does not wait/);
    assert.throws(() => new Locks({ limit: {} }), /unknown option "limit" for new Locks\(\); known: limits, seed/);
    assert.equal(locks.inspect('k'), null, 'nothing was taken');
  });

  it('close rejects pending acquires with a LockError closed', async () => {
    const { locks } = setup();
    locks.tryAcquire('k', { owner: 'a', ttl: 100 });
    const pending = locks.acquire('k', { owner: 'b', ttl: 10 });
    locks.close();
    await assert.rejects(pending, (e) => e instanceof LockError && e.code === CLOSED);
    assert.throws(() => locks.tryAcquire('k', { ttl: 10 }), (e) => e instanceof LockError && e.code === CLOSED);
  });
});

describe('lifecycle', () => {
  it('close rejects pending acquires, stops the timer and makes leases inert', async () => {
    const { time, locks } = setup();
    const a = locks.tryAcquire('k', { ttl: 1000 });
    const waiting = locks.acquire('k', { ttl: 10 });
    await settle();
    assert.equal(time.pending, 1);
    locks.close();
    await assert.rejects(waiting, /this Locks was closed/);
    assert.equal(time.pending, 0);
    assert.equal(a.release(), false);
    assert.throws(() => locks.tryAcquire('k', { ttl: 10 }), /this Locks was closed/);
    await assert.rejects(locks.acquire('k', { ttl: 10 }), /this Locks was closed/);
    locks.close(); // idempotent
  });

  it('a LockTable reports its limits and refuses calls once freed', () => {
    const defaults = LockTable.defaultLimits();
    assert.equal(defaults.maxKeys, 1_000_000);
    assert.equal(defaults.maxTtl, 86_400_000);
    const table = new LockTable({ maxKeys: 3 });
    assert.deepEqual(table.limits, { ...defaults, maxKeys: 3 });
    table.free();
    table.free(); // idempotent
    assert.throws(() => table.tryAcquire('k', 'a', 10, 0), /this LockTable was freed/);
    assert.throws(() => table.stats(0), /this LockTable was freed/);
  });
});

describe('issue 9: timers and zero waits', () => {
  it('a wake-up beyond 2^31-1 ms is reached in capped timers, never a timer that fires at once', async () => {
    const time = new FakeTime();
    const delays = [];
    const options = time.options;
    const setTimeout = (fn, delay) => {
      delays.push(delay);
      return options.setTimeout(fn, delay);
    };
    const locks = new Locks({ ...options, setTimeout, limits: { maxTtl: 2 ** 40 } });
    const lost = [];
    locks.tryAcquire('long', { owner: 'a', ttl: 2 ** 32, onLost: (info) => lost.push(info) });
    await settle(); // the timer is armed in a microtask after the call
    assert.ok(delays.length >= 1 && delays.every((d) => d >= 1 && d <= 2 ** 31 - 1), `${delays}`);
    await time.advance(2 ** 31);
    assert.equal(lost.length, 0);
    assert.ok(delays.length <= 3, `re-armed ${delays.length} times: ${delays.join(" ")}`);
    await time.advance(2 ** 32);
    assert.deepEqual(lost.map((l) => l.at), [2 ** 32]);
  });

  it('restore refuses a fence or an instant JS cannot represent, and changes nothing', () => {
    const crc32 = (bytes) => {
      let crc = ~0;
      for (const b of bytes) {
        crc ^= b;
        for (let k = 0; k < 8; k += 1) crc = crc & 1 ? (crc >>> 1) ^ 0xedb88320 : crc >>> 1;
      }
      return ~crc >>> 0;
    };
    // Header: magic (8), version (2), body length (4); the body opens with clock and last fence.
    const patched = (field, value) => {
      const bytes = new LockTable({}).snapshot(0);
      const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      view.setBigUint64(field === 'clock' ? 14 : 22, value, true);
      view.setUint32(bytes.length - 4, crc32(bytes.subarray(0, bytes.length - 4)), true);
      return bytes;
    };
    const table = new LockTable({});
    table.tryAcquire('k', 'a', 100, 0);
    const before = table.snapshot(0);
    for (const [field, value] of [['fence', 2n ** 60n], ['fence', 2n ** 53n - 1n], ['clock', 2n ** 53n]]) {
      assert.throws(() => table.restore(patched(field, value)), RangeError, `${field} ${value}`);
      assert.deepEqual(table.snapshot(0), before, 'the table is unchanged');
    }
    // The largest representable values load, and the next fence is still exact.
    table.restore(patched('fence', 2n ** 53n - 2n));
    assert.equal(table.tryAcquire('j', 'b', 10, 0).fence, Number.MAX_SAFE_INTEGER);
  });

  it('a deadline past Number.MAX_SAFE_INTEGER is refused before the call, and changes nothing', () => {
    const table = new LockTable({});
    const now = Number.MAX_SAFE_INTEGER - 5;
    assert.throws(() => table.tryAcquire('k', 'a', 10, now), RangeError);
    assert.throws(() => table.acquire('k', 'a', 10, now + 1, now), RangeError);
    assert.equal(table.inspect('k', now), null);
    assert.equal(table.stats(now).rejected, 0, 'the core was never asked');
    const lease = table.tryAcquire('k', 'a', 5, now);
    assert.equal(lease.deadline, Number.MAX_SAFE_INTEGER);
    assert.throws(() => table.extend('k', 'a', lease.fence, 6, now), RangeError);
    assert.equal(table.inspect('k', now).deadline, Number.MAX_SAFE_INTEGER);
  });

  it('a zero timeout is a try-acquire: a held key is refused with held, not wait-timed-out', async () => {
    const { locks } = setup();
    locks.tryAcquire('k', { owner: 'a', ttl: 100 });
    await assert.rejects(locks.acquire('k', { owner: 'b', ttl: 10, timeout: 0 }), (e) => {
      assert.ok(e instanceof LockError);
      assert.equal(e.code, 'held');
      return true;
    });
  });
});


describe('issue 10: every acquire outcome has an answer on every Locks call', () => {
  // Builds each core outcome for `owner` 'b' on key 'k', then asks both Locks calls.
  const situations = {
    acquired: () => ({}),
    'already-held': ({ locks }) => ({ held: locks.tryAcquire('k', { owner: 'b', ttl: 100 }) }),
    queued: ({ locks }) => ({ holder: locks.tryAcquire('k', { owner: 'a', ttl: 100 }) }),
    'already-waiting': ({ locks }) => {
      const holder = locks.tryAcquire('k', { owner: 'a', ttl: 100 });
      return { holder, pending: locks.acquire('k', { owner: 'b', ttl: 10 }) };
    },
  };

  it('covers exactly the core outcomes', () => {
    assert.deepEqual(Object.keys(situations).sort(), LockTable.outcomeTypes().sort());
  });

  for (const type of Object.keys(situations)) {
    it(`tryAcquire and acquire answer ${type} with a Lease, null, a pending Promise or a LockError`, async () => {
      const env = setup();
      const made = situations[type](env);
      const { locks } = env;
      const inspected = locks.inspect('k');
      let tried;
      try {
        tried = locks.tryAcquire('k', { owner: 'b', ttl: 100 });
      } catch (error) {
        tried = error;
      }
      switch (type) {
        case 'acquired':
          assert.deepEqual([tried.owner, tried.fence, tried.held], ['b', 1, true]);
          break;
        case 'already-held':
          assert.equal(tried, made.held, 'the same Lease object');
          break;
        case 'queued':
          assert.equal(tried, null, 'held by another owner: null');
          break;
        case 'already-waiting':
          assert.ok(tried instanceof LockError, `a LockError, not ${tried}`);
          assert.equal(tried.code, ALREADY_WAITING);
          assert.deepEqual(tried.details, { position: 1 });
          assert.deepEqual(locks.inspect('k'), inspected, 'nothing changed');
          break;
        default:
          assert.fail(type);
      }
      if (type === 'acquired') tried.release();
      const waited = locks.acquire('k', { owner: 'b', ttl: 100, timeout: 1000 });
      if (type === 'acquired' || type === 'already-held') {
        const lease = await waited;
        assert.equal(lease.fence, type === 'acquired' ? 2 : made.held.fence);
      } else {
        assert.equal(await state(waited), 'pending');
        made.holder.release();
        const lease = await waited;
        assert.equal(typeof lease.fence, 'number');
        if (made.pending) assert.equal(await made.pending, lease, 'both calls get the one lease');
      }
    });
  }
});

describe('issue 10: explicit resource management', () => {
  it('disposing a lease releases it (once), and disposing Locks closes it', async () => {
    const { time, locks } = setup();
    const a = locks.tryAcquire('k', { owner: 'a', ttl: 100 });
    const waiting = locks.acquire('k', { owner: 'b', ttl: 10 });
    a[Symbol.dispose]();
    assert.equal(a.held, false);
    const b = await waiting;
    assert.equal(b.owner, 'b');
    a[Symbol.dispose](); // idempotent: never touches the next holder
    assert.equal(locks.inspect('k').owner, 'b');
    await b[Symbol.asyncDispose]();
    assert.equal(locks.inspect('k'), null);
    locks.tryAcquire('k', { owner: 'd', ttl: 10 });
    const pending = locks.acquire('k', { owner: 'c', ttl: 10 });
    locks[Symbol.dispose]();
    await assert.rejects(pending, /closed/);
    assert.throws(() => locks.tryAcquire('k', { ttl: 10 }), /closed/);
    await locks[Symbol.asyncDispose](); // closing twice is harmless
    void time;
  });
});
