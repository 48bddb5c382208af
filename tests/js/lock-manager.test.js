// LockManager: the Web Locks API's shape. The behaviours of the web-platform-tests' `web-locks`
// directory that apply to one table (request order and modes, ifAvailable, steal, signal,
// query, the callback's lifetime, the argument checks), written again as our own tests on a
// virtual clock; then what we add (a TTL kept alive, fences, the lock kinds).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { LockError, LockManager, Locks } from '../../lock-wasm/js/src/node.js';
import { FakeTime, settle } from './lib/fake-time.js';

function setup(ttl) {
  const time = new FakeTime();
  const manager = new LockManager({ locks: new Locks(time.options), ...(ttl === undefined ? {} : { ttl }) });
  return { time, manager };
}

/** A callback that holds its lock until `release()` is called; `granted` says when it ran. */
function holder(log, label) {
  let release = () => {};
  const done = new Promise((resolve) => {
    release = resolve;
  });
  const h = {
    granted: false,
    lock: null,
    release: () => release(),
    callback: async (lock) => {
      h.granted = true;
      h.lock = lock;
      log.push(label);
      await done;
      return label;
    },
  };
  return h;
}

describe('LockManager: request order and modes (web-locks mode-*)', () => {
  it('exclusive requests are granted one at a time, in request order', async () => {
    const { manager } = setup();
    const log = [];
    const [a, b, c] = ['a', 'b', 'c'].map((l) => holder(log, l));
    const requests = [a, b, c].map((h) => manager.request('res', h.callback));
    await settle();
    assert.deepEqual(log, ['a']);
    a.release();
    await settle();
    assert.deepEqual(log, ['a', 'b']);
    b.release();
    c.release();
    assert.deepEqual(await Promise.all(requests), ['a', 'b', 'c']);
    assert.ok(a.lock.fence < b.lock.fence && b.lock.fence < c.lock.fence, 'fences grow');
  });

  it('shared requests are granted together', async () => {
    const { manager } = setup();
    const log = [];
    const hs = ['a', 'b', 'c'].map((l) => holder(log, l));
    const requests = hs.map((h) => manager.request('res', { mode: 'shared' }, h.callback));
    await settle();
    assert.deepEqual(log, ['a', 'b', 'c']);
    assert.deepEqual(hs.map((h) => h.lock.mode), ['shared', 'shared', 'shared']);
    for (const h of hs) h.release();
    await Promise.all(requests);
  });

  it('an exclusive request waits for every shared lock, and a later shared one waits behind it', async () => {
    const { manager } = setup();
    const log = [];
    const [s1, x, s2] = [holder(log, 's1'), holder(log, 'x'), holder(log, 's2')];
    const requests = [
      manager.request('res', { mode: 'shared' }, s1.callback),
      manager.request('res', x.callback),
      manager.request('res', { mode: 'shared' }, s2.callback),
    ];
    await settle();
    assert.deepEqual(log, ['s1'], 'the shared request behind a waiting exclusive one does not overtake it');
    s1.release();
    await settle();
    assert.deepEqual(log, ['s1', 'x']);
    x.release();
    await settle();
    assert.deepEqual(log, ['s1', 'x', 's2']);
    s2.release();
    await Promise.all(requests);
  });

  it('locks of different names do not interact', async () => {
    const { manager } = setup();
    const log = [];
    const [a, b] = [holder(log, 'a'), holder(log, 'b')];
    const requests = [manager.request('one', a.callback), manager.request('two', b.callback)];
    await settle();
    assert.deepEqual(log, ['a', 'b']);
    a.release();
    b.release();
    await Promise.all(requests);
  });
});

describe('LockManager: the callback (web-locks held, resource-names, lock-attributes)', () => {
  it('resolves with the callback value and releases once its promise settles', async () => {
    const { manager } = setup();
    const value = await manager.request('res', async (lock) => {
      assert.equal(lock.name, 'res');
      assert.equal(lock.mode, 'exclusive');
      return 42;
    });
    assert.equal(value, 42);
    assert.equal(manager.locks.inspect('res'), null, 'released');
  });

  it('rejects with the callback error and still releases', async () => {
    const { manager } = setup();
    const boom = new Error('boom');
    await assert.rejects(manager.request('res', () => Promise.reject(boom)), (e) => e === boom);
    assert.equal(manager.locks.inspect('res'), null);
    await assert.rejects(
      manager.request('res', () => {
        throw boom;
      }),
      (e) => e === boom,
    );
    assert.equal(manager.locks.inspect('res'), null);
  });

  it('checks its arguments as browsers do', async () => {
    const { manager } = setup();
    await assert.rejects(manager.request('res'), TypeError);
    await assert.rejects(manager.request('res', { mode: 'shared' }), TypeError);
    await assert.rejects(manager.request('res', { mode: 'read' }, () => 1), TypeError);
    await assert.rejects(manager.request('-reserved', () => 1), (e) => e.name === 'NotSupportedError');
    await assert.rejects(manager.request('res', { mood: 'shared' }, () => 1), /unknown option "mood"/);
    // Any other name is fine, the empty one excepted: a key is never empty (a LockError).
    assert.equal(await manager.request('\u{1F512} ünïcode', () => 'ok'), 'ok');
    await assert.rejects(manager.request('', () => 1), (e) => e instanceof LockError && e.code === 'key-empty');
    // Its locks are a Locks or a store's StoreLocks (tested over every store in store-locks.test.js).
    for (const locks of [{}, { tryAcquire() {}, acquire() {}, steal() {}, query() {} }, null]) {
      assert.throws(() => new LockManager({ locks }), /locks must be a Locks or a StoreLocks/);
    }
  });
});

describe('LockManager: ifAvailable (web-locks ifAvailable)', () => {
  it('gets the lock when it is free, null when it is held, and never waits', async () => {
    const { manager } = setup();
    assert.equal(await manager.request('res', { ifAvailable: true }, (lock) => lock?.name), 'res');
    const log = [];
    const h = holder(log, 'h');
    const holding = manager.request('res', h.callback);
    await settle();
    assert.equal(await manager.request('res', { ifAvailable: true }, (lock) => lock), null);
    h.release();
    await holding;
  });

  it('a shared ifAvailable request beside shared holders is granted, but not past a waiting exclusive one', async () => {
    const { manager } = setup();
    const log = [];
    const s = holder(log, 's');
    const sharing = manager.request('res', { mode: 'shared' }, s.callback);
    await settle();
    assert.equal(await manager.request('res', { mode: 'shared', ifAvailable: true }, (lock) => lock?.mode), 'shared');
    const x = holder(log, 'x');
    const waiting = manager.request('res', x.callback);
    await settle();
    assert.equal(await manager.request('res', { mode: 'shared', ifAvailable: true }, (lock) => lock), null);
    s.release();
    await settle();
    x.release();
    await Promise.all([sharing, waiting]);
  });
});

describe('LockManager: steal (web-locks steal)', () => {
  it('takes a held lock at once; the holder learns it was stolen', async () => {
    const { manager } = setup();
    const log = [];
    const h = holder(log, 'h');
    const holding = manager.request('res', h.callback);
    await settle();
    const signal = h.lock.signal;
    const stolen = await manager.request('res', { steal: true }, (lock) => lock.fence);
    assert.ok(stolen > h.lock.fence);
    assert.equal(signal.aborted, true);
    assert.equal(signal.reason.code, 'stolen');
    h.release();
    await assert.rejects(holding, (e) => e instanceof LockError && e.code === 'stolen' && e.result === 'h');
  });

  it('keeps the queue: a waiter is served after the thief', async () => {
    const { manager } = setup();
    const log = [];
    const [h, w] = [holder(log, 'h'), holder(log, 'w')];
    const holding = manager.request('res', h.callback);
    const waiting = manager.request('res', w.callback);
    await settle();
    const t = holder(log, 't');
    const thief = manager.request('res', { steal: true }, t.callback);
    await settle();
    assert.deepEqual(log, ['h', 't']);
    t.release();
    await settle();
    assert.deepEqual(log, ['h', 't', 'w']);
    w.release();
    h.release();
    await thief;
    await waiting;
    await assert.rejects(holding, (e) => e.code === 'stolen');
  });

  it('refuses steal with ifAvailable, with a shared mode, and with a signal', async () => {
    const { manager } = setup();
    const notSupported = (e) => e.name === 'NotSupportedError';
    await assert.rejects(manager.request('res', { steal: true, ifAvailable: true }, () => 1), notSupported);
    await assert.rejects(manager.request('res', { steal: true, mode: 'shared' }, () => 1), notSupported);
    await assert.rejects(manager.request('res', { steal: true, signal: new AbortController().signal }, () => 1), notSupported);
    await assert.rejects(manager.request('res', { ifAvailable: true, signal: new AbortController().signal }, () => 1), notSupported);
    assert.equal(manager.locks.inspect('res'), null, 'nothing was taken');
  });
});

describe('LockManager: signal (web-locks signal)', () => {
  it('an aborted signal rejects at once with its reason', async () => {
    const { manager } = setup();
    const controller = new AbortController();
    controller.abort(new Error('gone'));
    await assert.rejects(manager.request('res', { signal: controller.signal }, () => 1), /gone/);
  });

  it('aborting a waiting request rejects it, leaves the queue, and the next request is served', async () => {
    const { manager } = setup();
    const log = [];
    const h = holder(log, 'h');
    const holding = manager.request('res', h.callback);
    const controller = new AbortController();
    const aborted = manager.request('res', { signal: controller.signal }, () => log.push('never'));
    const next = holder(log, 'next');
    const after = manager.request('res', next.callback);
    await settle();
    controller.abort();
    await assert.rejects(aborted, (e) => e.name === 'AbortError');
    h.release();
    await settle();
    assert.deepEqual(log, ['h', 'next']);
    next.release();
    await Promise.all([holding, after]);
  });

  it('aborting after the grant does nothing', async () => {
    const { manager } = setup();
    const controller = new AbortController();
    const value = await manager.request('res', { signal: controller.signal }, () => {
      controller.abort();
      return 'kept';
    });
    assert.equal(value, 'kept');
  });
});

describe('LockManager: query (web-locks query)', () => {
  it('lists held and pending requests in order, with modes and client ids', async () => {
    const { manager } = setup();
    const log = [];
    const [a, b, x] = [holder(log, 'a'), holder(log, 'b'), holder(log, 'x')];
    const requests = [
      manager.request('res', { mode: 'shared', owner: 'client-a', metadata: 'reader' }, a.callback),
      manager.request('res', { mode: 'shared', owner: 'client-b' }, b.callback),
      manager.request('res', { owner: 'client-x' }, x.callback),
    ];
    await settle();
    const { held, pending } = await manager.query();
    assert.deepEqual(
      held.map(({ name, mode, clientId, metadata }) => ({ name, mode, clientId, metadata })),
      [
        { name: 'res', mode: 'shared', clientId: 'client-a', metadata: 'reader' },
        { name: 'res', mode: 'shared', clientId: 'client-b', metadata: '' },
      ],
    );
    assert.deepEqual(pending, [{ name: 'res', mode: 'exclusive', clientId: 'client-x', metadata: '' }]);
    a.release();
    b.release();
    await settle();
    x.release();
    await Promise.all(requests);
    assert.deepEqual(await manager.query(), { held: [], pending: [] });
  });
});

describe('LockManager: what we add', () => {
  it('keeps the lock alive while the callback runs, past its TTL', async () => {
    const { time, manager } = setup(300);
    const log = [];
    const h = holder(log, 'h');
    const holding = manager.request('res', h.callback);
    await settle();
    await time.advance(1000);
    assert.equal(h.lock.signal.aborted, false);
    assert.ok(h.lock.deadline > 1000);
    h.release();
    assert.equal(await holding, 'h');
  });

  it('permits: at most N shared holders, each with its own fence', async () => {
    const { manager } = setup();
    const log = [];
    const hs = ['a', 'b', 'c'].map((l) => holder(log, l));
    const requests = hs.map((h) => manager.request('pool', { mode: 'shared', permits: 2 }, h.callback));
    await settle();
    assert.deepEqual(log, ['a', 'b']);
    hs[1].release();
    await settle();
    assert.deepEqual(log, ['a', 'b', 'c']);
    hs[0].release();
    hs[2].release();
    await Promise.all(requests);
    assert.equal(new Set(hs.map((h) => h.lock.fence)).size, 3);
  });

  it('a minimum hold keeps the lock after the callback, until it passes', async () => {
    const { time, manager } = setup();
    await manager.request('job', { minHold: 500 }, () => 'ran');
    assert.equal(await manager.request('job', { ifAvailable: true }, (lock) => lock), null);
    await time.advance(500);
    assert.equal(await manager.request('job', { ifAvailable: true }, (lock) => lock?.name), 'job');
  });
});
