// The Node store client under faults, on every store (real servers, real time, short TTLs):
// a Node holder killed with SIGKILL while it keeps its lease alive, a Node waiter killed in the
// queue, and, on the server stores, every connection reset in the middle of a wait, a release and
// an extension whose connection is killed between the write and its answer, and a path that goes
// silent under a holder; a throwaway Redis killed and restarted empty, and one that
// lost its scripts. Each time: no duplicate grant (fences increase, the next
// holder begins at or after the last deadline the store kept), a typed error or a correct answer,
// and the clients carry on.

import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { Locks, StoreError } from '../../lock-wasm/js/src/node.js';
import { Proxy } from './lib/proxy.js';
import { STORES, damage, uniqueNamespace } from './lib/stores.js';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const WORKER = fileURLToPath(new URL('./lib/wait-worker.mjs', import.meta.url));

/** A Node process that waits for `key`, holds it with keep-alive for `hold` ms; its lines. */
function worker(url, ns, key, owner, { ttl = 600, wait = 30_000, hold = 60_000 } = {}) {
  const child = spawn(process.execPath, [WORKER, url, ns, key, owner, String(ttl), String(wait), String(hold)], { stdio: ['ignore', 'pipe', 'pipe'] });
  const lines = [];
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d) => lines.push(...d.split('\n').filter(Boolean)));
  child.stderr.setEncoding('utf8').on('data', (d) => (stderr += d));
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  return { child, lines, exited, stderr: () => stderr };
}

/** Waits until `check()` is truthy (every 10 ms, at most `ms`), answering it. */
async function until(what, check, ms = 15_000) {
  const end = performance.now() + ms;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

for (const store of STORES) {
  describe(`faults over ${store.name}`, () => {
    const namespaces = [];
    const open = async (url = store.url, ns = namespaces[0], options) => {
      if (namespaces.length === 0) namespaces.push(ns ?? uniqueNamespace('jsfault'));
      return Locks.open(url, ns ?? namespaces[0], options);
    };
    after(async () => {
      if (namespaces.length === 0) return;
      const driver = await store.open(namespaces[0]);
      await driver.uninstall();
      await driver.close();
    });

    it('a Node holder killed while it keeps its lease alive: the next holder is granted at its deadline, with a higher fence', async () => {
      const locks = await open();
      const ns = namespaces[0];
      const holder = worker(store.url, ns, 'killed-holder', 'victim', { ttl: 600 });
      try {
        const granted = await until('the worker to hold the key', () => holder.lines.find((l) => l.startsWith('granted ')));
        const fence = Number(granted.split(' ')[1]);
        await sleep(700); // past one TTL: its keep-alive extended it
        holder.child.kill('SIGKILL');
        await holder.exited;
        // The last deadline the store kept for it (no one extends it any more).
        const info = await locks.inspect('killed-holder');
        assert.equal(info.owner, 'victim');
        const next = await locks.acquire('killed-holder', { ttl: 5000, owner: 'next', timeout: 10_000 });
        assert.ok(next.fence > fence, `fence ${next.fence} after ${fence}`);
        assert.ok(next.deadline - 5000 >= info.deadline, `granted at ${next.deadline - 5000}, before the killed holder's deadline ${info.deadline}`);
        await next.release();
      } finally {
        holder.child.kill('SIGKILL');
        await locks.close();
      }
    });

    it('a Node waiter killed in the queue does not keep the key from the waiters behind it', async () => {
      const locks = await open();
      const ns = namespaces[0];
      const lease = await locks.tryAcquire('killed-waiter', { ttl: 10_000, owner: 'holder' });
      const waiter = worker(store.url, ns, 'killed-waiter', 'victim', { ttl: 500 });
      try {
        await until('the worker in the queue', async () => (await locks.inspect('killed-waiter')).waiters.some((w) => w.owner === 'victim'));
        const behind = locks.acquire('killed-waiter', { ttl: 5000, owner: 'behind', timeout: 15_000 });
        await until('the second waiter in the queue', async () => (await locks.inspect('killed-waiter')).waiters.length === 2);
        waiter.child.kill('SIGKILL');
        await waiter.exited;
        assert.deepEqual(waiter.lines, [], 'the killed waiter was never granted');
        await lease.release();
        const next = await behind;
        assert.equal(next.owner, 'behind');
        assert.ok(next.fence > lease.fence);
        await next.release();
      } finally {
        waiter.child.kill('SIGKILL');
        await locks.close();
      }
    });

    it('a corrupt record (its bytes, or its fences as stored): every call that reads it is StoreError corrupt, the holder\'s extension too, and nothing overwrites it', async () => {
      const locks = await open();
      const other = await open();
      try {
        for (const [field, value] of [
          ['record', Buffer.from('not a record at all')],
          ['fences', store.name === 'postgres' ? '{0}' : 'x,y'],
        ]) {
          const key = `corrupt-${field}`;
          const lease = await locks.tryAcquire(key, { ttl: 60_000, owner: 'holder' });
          await damage(store, namespaces[0], key, field, value);
          const corrupt = (e) => e instanceof StoreError && e.code === 'corrupt' && e.message.includes(key);
          // The holder remembers the record as it was, and would write over it if the store
          // compared versions only (its compare-and-set compares the bytes too; the fences it
          // does not write, and only a read finds them damaged).
          if (field === 'record') await assert.rejects(lease.extend(60_000), corrupt, 'extend');
          await assert.rejects(other.tryAcquire(key, { ttl: 1000, owner: 'other' }), corrupt, `${field}: tryAcquire`);
          await assert.rejects(other.inspect(key), corrupt, `${field}: inspect`);
          await assert.rejects(other.acquire(key, { ttl: 1000, owner: 'waiter', timeout: 2000 }), corrupt, `${field}: acquire`);
          // Still the damaged value: a second look says the same.
          await assert.rejects(other.inspect(key), corrupt, `${field}: left as it was`);
        }
      } finally {
        await other.close();
        await locks.close();
      }
    });

    if (store.name === 'sqlite') return;
    const { hostname, port } = new URL(store.url.replace(/^[a-z]+:/, 'http:'));
    /** Runs `body(proxy, locks, through)`: `locks` direct, `through` over a proxy of its own (opened with `options`); closes them after. */
    const throughProxy = async (options, body) => {
      if (body === undefined) [options, body] = [undefined, options];
      const proxy = await Proxy.start(hostname, Number(port));
      const locks = await open();
      const through = await open(proxy.url(store.url), namespaces[0], options);
      try {
        await body(proxy, locks, through);
      } finally {
        await through.close().catch(() => {});
        await locks.close();
        await proxy.close();
      }
    };

    it('every connection reset in the middle of a wait: the waiter carries on and is served', () =>
      throughProxy({ poll: 50 }, async (proxy, locks, through) => {
        const lease = await locks.tryAcquire('reset-wait', { ttl: 10_000, owner: 'holder' });
        const waiting = through.acquire('reset-wait', { ttl: 5000, owner: 'waiter', timeout: 20_000 });
        await until('the waiter in the queue', async () => (await locks.inspect('reset-wait')).waiters.length === 1);
        for (let i = 0; i < 3; i += 1) {
          proxy.reset();
          await sleep(150);
        }
        await lease.release();
        const next = await waiting;
        assert.ok(next.fence > lease.fence);
        assert.equal((await locks.inspect('reset-wait')).owner, 'waiter');
        await next.release();
      }));

    it('a release killed between its write and its answer: the client reads that it was done and answers true', () =>
      throughProxy(async (proxy, locks, through) => {
        // Once before, so that the release's statement is prepared (MariaDB's client prepares it
        // at its first use: with the answers held back, that would stall before the write).
        await (await through.tryAcquire('killed-release', { ttl: 60_000, owner: 'a' })).release();
        let lostRan = false;
        const lease = await through.tryAcquire('killed-release', { ttl: 60_000, owner: 'a', onLost: () => (lostRan = true) });
        proxy.stallReplies(true);
        const releasing = lease.release();
        // The release reached the store: another client is granted the key.
        const next = await until('the key free for another client', () => locks.tryAcquire('killed-release', { ttl: 60_000, owner: 'c' }));
        proxy.reset();
        proxy.stallReplies(false);
        assert.equal(await releasing, true, 'the release is known done');
        assert.equal(lostRan, false, 'onLost ran for a released lease');
        assert.ok(next.fence > lease.fence);
        assert.equal((await through.inspect('killed-release')).owner, 'c');
        await next.release();
      }));

    it('an extension killed between its write and its answer: the client reads the deadline it wrote', () =>
      throughProxy(async (proxy, locks, through) => {
        const lease = await through.tryAcquire('killed-extend', { ttl: 10_000, owner: 'a' });
        await lease.extend(10_000); // prepares the statement (as above)
        const before = lease.deadline;
        proxy.stallReplies(true);
        const extending = lease.extend(60_000);
        const stored = await until('the extension in the store', async () => {
          const info = await locks.inspect('killed-extend');
          return info.deadline > before + 30_000 ? info : null;
        });
        proxy.reset();
        proxy.stallReplies(false);
        assert.equal(await extending, stored.deadline, 'the deadline the store holds');
        assert.equal(lease.deadline, stored.deadline);
        assert.equal(stored.fence, lease.fence);
        assert.equal(await lease.release(), true);
      }));

    it('a path that goes silent under a holder: it loses the lease before anyone else is granted it, with a typed error, and recovers', () =>
      throughProxy({ bound: 500 }, async (proxy, locks, through) => {
        const lease = await through.tryAcquire('silent', { ttl: 1000, owner: 'cut-off', keepAlive: true });
        proxy.silent(true);
        const alive = setInterval(() => {}, 1000);
        const lost = await lease.lost.finally(() => clearInterval(alive));
        assert.equal(lease.held, false);
        // Another client, on a healthy path, is granted the key only after the holder gave up.
        const next = await locks.acquire('silent', { ttl: 5000, owner: 'next', timeout: 10_000 });
        assert.ok(next.fence > lease.fence);
        assert.ok(next.deadline - 5000 >= lost.at, `granted at ${next.deadline - 5000}, before the lost lease's deadline ${lost.at}`);
        // A call on the silent path ends within its bound with a typed error.
        const started = performance.now();
        await assert.rejects(through.tryAcquire('other', { ttl: 1000, owner: 'cut-off' }), (e) => e instanceof StoreError && ['lost', 'connect'].includes(e.code));
        assert.ok(performance.now() - started < 5000, 'the call was bounded');
        // The path heals: the same Locks works again.
        proxy.silent(false);
        proxy.reset();
        await next.release();
        const again = await until('a call through the healed path', () => through.tryAcquire('silent', { ttl: 1000, owner: 'cut-off' }).catch(() => null));
        assert.ok(again.fence > next.fence);
        await again.release();
      }));
  });
}

/** A throwaway redis-server of this test's own, without persistence, on a port of its own. */
class ThrowawayRedis {
  constructor(port) {
    this.port = port;
    this.url = `redis://127.0.0.1:${port}`;
  }

  async start() {
    const child = spawn('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', tmpdir()], { stdio: 'ignore' });
    this.exited = new Promise((resolve) => child.on('exit', resolve));
    this.child = child;
    await until('the throwaway redis-server', async () => {
      const probe = new Redis(this.url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
      probe.on('error', () => {});
      try {
        await probe.connect();
        return (await probe.ping()) === 'PONG';
      } catch {
        return false;
      } finally {
        probe.disconnect();
      }
    });
  }

  /** Kills it with SIGKILL: no shutdown, nothing saved. */
  async kill() {
    this.child.kill('SIGKILL');
    await this.exited;
  }
}

describe('faults over a throwaway Redis', () => {
  const port = 17390 + (process.pid % 50) * 2;

  it('a Redis killed and restarted empty under a Node client: calls fail typed and bounded while it is down, then every fence after exceeds every fence before', async () => {
    const server = new ThrowawayRedis(port);
    await server.start();
    const locks = await Locks.open(server.url, 'restart', { bound: 1000 });
    try {
      const before = [];
      for (let i = 0; i < 5; i += 1) before.push((await locks.tryAcquire(`k${i}`, { ttl: 60_000, owner: 'a' })).fence);
      const waiting = locks.acquire('k0', { ttl: 5000, owner: 'b', timeout: 30_000 });
      await until('the waiter in the queue', async () => (await locks.inspect('k0')).waiters.length === 1);
      await server.kill();
      const started = performance.now();
      await assert.rejects(
        locks.tryAcquire('other', { ttl: 1000, owner: 'a' }),
        // Typed, and the message names the store once.
        (e) => e instanceof StoreError && ['lost', 'connect'].includes(e.code) && e.message.split(locks.store).length === 2,
      );
      assert.ok(performance.now() - started < 5000, 'the call was bounded');
      await server.start();
      // The lease on k0 was lost with the server's memory: the waiter, still waiting, is granted
      // it with a fence above every fence issued before the restart.
      const next = await waiting;
      assert.ok(before.every((f) => next.fence > f), `${before} then ${next.fence}`);
      const other = await until('a call after the restart', () => locks.tryAcquire('k1', { ttl: 1000, owner: 'c' }).catch(() => null));
      assert.ok(before.every((f) => other.fence > f));
    } finally {
      await locks.close();
      await server.kill();
    }
  });

  it('a Redis that lost its scripts (SCRIPT FLUSH) under a connected Node client: the next write loads the script again and succeeds once', async () => {
    const server = new ThrowawayRedis(port + 1);
    await server.start();
    const locks = await Locks.open(server.url, 'noscript');
    const admin = new Redis(server.url);
    try {
      const first = await locks.tryAcquire('k', { ttl: 60_000, owner: 'a' });
      // The counter well ahead of the server's time in µs, so that the next token is the
      // counter's next (not the time floor's) and a token burnt by the refused call would show.
      const ahead = first.fence + 1e12;
      assert.equal(await admin.set('{el:noscript}:fence', String(ahead)), 'OK');
      assert.equal(await admin.script('FLUSH'), 'OK');
      assert.equal(await first.release(), true);
      const second = await locks.tryAcquire('k', { ttl: 60_000, owner: 'b' });
      assert.equal(second.fence, ahead + 1, 'one write, one token');
    } finally {
      admin.disconnect();
      await locks.close();
      await server.kill();
    }
  });
});
