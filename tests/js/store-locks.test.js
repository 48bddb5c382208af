// Locks over a shared store from Node (Locks.open): the in-process Locks API, asynchronous, on
// real servers, every decision the engine's. Each test opens a namespace of its own.

import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { LockManager, Locks, LockError, StoreError } from '../../lock-wasm/js/src/node.js';
import { readFileSync } from 'node:fs';
import ts from 'typescript';
import { requirePeer } from '../../lock-wasm/js/src/stores/io.js';
import { MARIADB_URL, POSTGRES_URL, STORES, uniqueNamespace } from './lib/stores.js';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The member names index.d.ts declares for interface `name`. */
function declaredMembers(name) {
  const text = readFileSync(new URL('../../lock-wasm/js/index.d.ts', import.meta.url), 'utf8');
  const source = ts.createSourceFile('index.d.ts', text, ts.ScriptTarget.Latest, true);
  const node = source.statements.find((st) => ts.isInterfaceDeclaration(st) && st.name.text === name);
  return [...new Set(node.members.map((m) => (ts.isComputedPropertyName(m.name) ? m.name.expression.getText(source) : m.name.getText(source))))].sort();
}

/** The public members of `object` (its prototype's and its own; internal symbols left out). */
function runtimeMembers(object) {
  const names = new Set(Object.keys(object));
  const proto = Object.getPrototypeOf(object);
  for (const name of Object.getOwnPropertyNames(proto)) if (name !== 'constructor') names.add(name);
  if (Object.getOwnPropertySymbols(proto).includes(Symbol.asyncDispose)) names.add('Symbol.asyncDispose');
  return [...names].sort();
}

it('refuses a bad namespace, a bad URL and an unreachable store with typed errors', async () => {
  await assert.rejects(Locks.open('redis://127.0.0.1:6379', 'Bad-Name'), (e) => e instanceof StoreError && e.code === 'namespace');
  await assert.rejects(Locks.open('ftp://127.0.0.1/x', 'jobs'), (e) => e instanceof StoreError && e.code === 'url');
  await assert.rejects(Locks.open('redis://127.0.0.1:1', 'jobs', { bound: 500 }), (e) => e instanceof StoreError && e.code === 'connect');
  await assert.rejects(Locks.open('redis://127.0.0.1:6379', 'jobs', { bond: 5 }), TypeError);
  // TLS parameters, read as the Rust clients read them: a mistake is a `url` error, before any connection.
  const badUrl = (words) => (e) => e instanceof StoreError && e.code === 'url' && e.message.includes(words);
  await assert.rejects(Locks.open('redis://127.0.0.1:6379?cacert=/ca.pem', 'jobs'), badUrl('are for rediss://'));
  await assert.rejects(Locks.open('rediss://127.0.0.1:6379?cacert=/no/such/ca.pem', 'jobs'), badUrl('cacert: cannot read /no/such/ca.pem'));
  await assert.rejects(Locks.open('rediss://127.0.0.1:6379?cert=/c.pem', 'jobs'), badUrl('cert and key go together'));
  await assert.rejects(Locks.open('postgres://u:secret@127.0.0.1/test?sslmode=sometimes', 'jobs'), (e) => badUrl('sslmode=sometimes: use disable, require, verify-ca or verify-full')(e) && !e.message.includes('secret'));
  await assert.rejects(Locks.open('postgres://127.0.0.1/test?sslmode=require&sslcert=/c.pem', 'jobs'), badUrl('sslcert and sslkey go together'));
  await assert.rejects(Locks.open('postgres://127.0.0.1,127.0.0.2/test?target_session_attrs=primary', 'jobs'), badUrl('target_session_attrs=primary: use any or read-write'));
  await assert.rejects(Locks.open('mysql://root@127.0.0.1/test?ssl-mode=SOMETIMES', 'jobs'), badUrl('ssl-mode=SOMETIMES'));
  await assert.rejects(Locks.open('mysql://root@127.0.0.1/test?ssl-mode=REQUIRED&ssl-ca=/no/such/ca.pem', 'jobs'), badUrl('ssl-ca: cannot read'));
  // TLS asked of a server that does not speak it: a connect error, typed and bounded.
  await assert.rejects(Locks.open('rediss://127.0.0.1:6379', 'jobs', { bound: 2000 }), (e) => e instanceof StoreError && e.code === 'connect');
});

it("says which TLS check failed, in the Rust clients' words", async () => {
  const { explain, takeParams } = await import('../../lock-wasm/js/src/stores/tls.js');
  const tlsError = (code, message) => Object.assign(new Error(message), { code });
  assert.match(explain(tlsError('SELF_SIGNED_CERT_IN_CHAIN', 'self-signed certificate in certificate chain')), /^TLS: the server's certificate is not signed by a CA this client trusts .*: self-signed/);
  assert.match(explain(tlsError('CERT_HAS_EXPIRED', 'certificate has expired')), /^TLS: the server's certificate has expired/);
  assert.match(explain(tlsError('ERR_TLS_CERT_ALTNAME_INVALID', "Hostname/IP does not match certificate's altnames")), /^TLS: the server's certificate is for another host name/);
  assert.match(explain(tlsError('ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED', 'alert certificate required')), /^TLS: the server asks for a client certificate/);
  assert.equal(explain(tlsError('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:6380')), 'connect ECONNREFUSED 127.0.0.1:6380');
  const { rest, params } = takeParams('postgres://u@h/db?sslmode=require&application_name=x&sslrootcert=%2Fca.pem#f', ['sslmode', 'sslrootcert']);
  assert.equal(rest, 'postgres://u@h/db?application_name=x#f');
  assert.deepEqual([...params], [['sslmode', 'require'], ['sslrootcert', '/ca.pem']]);
});

/** A grant and its release through `url` (the store's namespace removed afterwards). */
async function grantThrough(url, storeName) {
  const ns = uniqueNamespace('jsmulti');
  const locks = await Locks.open(url, ns);
  try {
    const lease = await locks.tryAcquire('job', { ttl: 10_000, owner: 'a' });
    assert.ok(lease.fence > 0);
    await lease.release();
  } finally {
    await locks.close();
    const driver = await STORES.find((store) => store.name === storeName).open(ns);
    await driver.uninstall();
    await driver.close();
  }
}

/** `storeUrl` with a host that refuses connections (port 1) before its own, writes asked for. */
function withDeadHostFirst(storeUrl) {
  const real = new URL(storeUrl);
  return storeUrl.replace(`@${real.host}`, `@127.0.0.1:1,${real.host}`) + (real.search ? '&' : '?') + 'target_session_attrs=read-write';
}

it('a multi-host PostgreSQL URL: the first host that answers and accepts writes (the hosts before it refuse connections)', async () => {
  const { postgresHosts } = await import('../../lock-wasm/js/src/stores/postgres.js');
  assert.deepEqual(postgresHosts('postgres://u:p@h1:5432,[::1]:5433/db?application_name=x&target_session_attrs=read-write', ''), {
    urls: ['postgres://u:p@h1:5432/db?application_name=x', 'postgres://u:p@[::1]:5433/db?application_name=x'],
    readWrite: true,
  });
  await grantThrough(withDeadHostFirst(POSTGRES_URL), 'postgres');
});

it('a multi-host MariaDB URL: the first host that answers and accepts writes (the hosts before it refuse connections)', async () => {
  const { mysqlOptions } = await import('../../lock-wasm/js/src/stores/mysql.js');
  const options = mysqlOptions('mysql://u:p@h1:3307,[::1]/db?target_session_attrs=read-write', '');
  assert.deepEqual([options.hosts, options.readWrite, options.user, options.database], [[{ host: 'h1', port: 3307 }, { host: '::1', port: 3306 }], true, 'u', 'db']);
  assert.throws(() => mysqlOptions('mysql://h1,h2/db?target_session_attrs=primary', ''), (e) => e instanceof StoreError && e.code === 'url' && e.message.includes('use any or read-write'));
  await grantThrough(withDeadHostFirst(MARIADB_URL), 'mariadb');
});

it('reads a redis+sentinel:// URL as the Rust clients do', async () => {
  const { sentinelOptions } = await import('../../lock-wasm/js/src/stores/redis.js');
  const bad = (reason) => new StoreError('url', reason);
  assert.deepEqual(sentinelOptions('redis+sentinel://u:p%40ss@h1:26379,[::1]:26380/jobs/2', bad), {
    sentinels: [{ host: 'h1', port: 26379 }, { host: '::1', port: 26380 }],
    name: 'jobs',
    db: 2,
    username: 'u',
    password: 'p@ss',
  });
  assert.deepEqual(sentinelOptions('redis+sentinel://h:1/p', bad), { sentinels: [{ host: 'h', port: 1 }], name: 'p', db: 0 });
  for (const url of ['h:1', 'h:1/', 'h:1,/p', 'h:1/p/x', 'h:1/p?x=1', 'h/p', 'h:x/p', ':1/p']) {
    assert.throws(() => sentinelOptions(`redis+sentinel://${url}`, bad), (e) => e instanceof StoreError && e.code === 'url', url);
  }
});

it('reads wait_replicas and wait_timeout_ms as the Rust clients do', async () => {
  const { replicasOf } = await import('../../lock-wasm/js/src/stores/redis.js');
  const bad = (reason) => new StoreError('url', reason);
  assert.deepEqual(replicasOf('redis://h:1/0', 5000, bad), { rest: 'redis://h:1/0', replicas: null });
  assert.deepEqual(replicasOf('redis://h:1/0?wait_replicas=2&protocol=resp2', 5000, bad), {
    rest: 'redis://h:1/0?protocol=resp2',
    replicas: { count: 2, timeoutMs: 1000 },
  });
  assert.deepEqual(replicasOf('redis+sentinel://a:1,b:2/locks?wait_timeout_ms=250&wait_replicas=1', 5000, bad), {
    rest: 'redis+sentinel://a:1,b:2/locks',
    replicas: { count: 1, timeoutMs: 250 },
  });
  assert.equal(replicasOf('redis://h?wait_replicas=1', 600, bad).replicas?.timeoutMs, 300);
  const refused = [
    'wait_replicas=0',
    'wait_replicas=-1',
    'wait_replicas=one',
    'wait_replicas=',
    'wait_replicas=1&wait_replicas=2',
    'wait_timeout_ms=100',
    'wait_replicas=1&wait_timeout_ms=0',
    'wait_replicas=1&wait_timeout_ms=5000',
    'wait_replicas=1&wait_timeout_ms=1.5',
  ];
  for (const params of refused) {
    assert.throws(() => replicasOf(`redis://h?${params}`, 5000, bad), (e) => e instanceof StoreError && e.code === 'url', params);
  }
});

it('names the package to install when a store client is missing', async () => {
  await assert.rejects(
    requirePeer('expiring-lock-no-such-client', 'redis://h'),
    (e) => e instanceof StoreError && e.code === 'not-compiled' && e.message.includes('npm install expiring-lock-no-such-client'),
  );
});

for (const store of STORES) {
  describe(`Locks.open over ${store.name}`, () => {
    const opened = [];
    const open = async (options) => {
      const ns = opened.length === 0 ? uniqueNamespace('jslocks') : opened[0].ns;
      const locks = await Locks.open(store.url, ns, options);
      opened.push({ ns, locks });
      return locks;
    };
    after(async () => {
      for (const { locks } of opened) await locks.close();
      if (opened.length > 0) {
        const driver = await store.open(opened[0].ns);
        await driver.uninstall();
        await driver.close();
      }
    });

    it('an acquire aborted after the key was handed to it, before it looked, leaves nothing behind (the handed lease is released)', async () => {
      const a = await open();
      // The waiter looks by itself only every 10 s: on a store without notices (SQLite) the abort
      // always comes between the hand-off and its look.
      const b = await open({ poll: 10_000 });
      const holder = await a.tryAcquire('handed', { ttl: 30_000, owner: 'holder' });
      const controller = new AbortController();
      const gone = new Error('the caller is gone');
      const settled = b.acquire('handed', { ttl: 30_000, owner: 'waiter', timeout: 1_500, signal: controller.signal }).then(
        (lease) => ({ lease }),
        (error) => ({ error }),
      );
      while ((await a.inspect('handed')).waiters.length !== 1) await sleep(10);
      await holder.release(); // the store hands the key to 'waiter'
      controller.abort(gone);
      const { lease, error } = await settled;
      if (lease !== undefined) await lease.release(); // it looked first (a notice): also nothing left
      else assert.equal(error, gone);
      if (store.name === 'sqlite') assert.equal(error, gone, 'no notice: the abort came before its look');
      const info = await a.inspect('handed');
      assert.deepEqual(
        (info?.holders ?? []).filter((h) => h.ended === null).map((h) => h.owner),
        [],
        'the handed lease is left to its TTL',
      );
      assert.deepEqual(info?.waiters ?? [], []);
    });

    it('aborts raced against the release leave nothing behind, and the same owner asks again at once (never already-waiting, never a lease the store does not hold)', async () => {
      const a = await open();
      const b = await open();
      const gone = new Error('the caller is gone');
      let handed = 0;
      for (let round = 0; round < 24; round += 1) {
        const key = `race${round}`;
        const holder = await a.tryAcquire(key, { ttl: 30_000, owner: 'h' });
        const controller = new AbortController();
        const settled = b.acquire(key, { ttl: 30_000, owner: 'w', signal: controller.signal }).then(
          (lease) => ({ lease }),
          (error) => ({ error }),
        );
        while ((await a.inspect(key))?.waiters.length !== 1) await sleep(2);
        // The release and the abort land in either order, or together.
        const releasing = holder.release();
        if (round % 3 === 1) await releasing;
        if (round % 3 === 2) await sleep(1);
        controller.abort(gone);
        await releasing;
        // The same owner asks again without waiting for the abort to settle.
        const again = b.tryAcquire(key, { ttl: 30_000, owner: 'w' });
        const { lease, error } = await settled;
        if (lease === undefined) assert.equal(error, gone);
        else handed += 1; // handed the key before the abort
        const retry = await again;
        assert.notEqual(retry, null, `round ${round}: the retry found the key held: ${JSON.stringify(await a.inspect(key))}`);
        const held = (await a.inspect(key)).holders.filter((h) => h.ended === null);
        assert.deepEqual(
          held.map((h) => [h.owner, h.fence]),
          [['w', retry.fence]],
          `round ${round}: the retry's lease is the one the store holds`,
        );
        await retry.release();
        if (lease !== undefined) await lease.release();
        // Nothing of the waiter that left stays: another owner takes the key now.
        const x = await a.tryAcquire(key, { ttl: 30_000, owner: 'x' });
        assert.notEqual(x, null, `round ${round}: stranded: ${JSON.stringify(await a.inspect(key))}`);
        await x.release();
      }
      assert.ok(handed < 24, 'every round was handed the key before its abort');
    });

    it("a process's concurrent calls on one key take turns: 64 waiters queue at once, none lost to contention, served in queue order", async () => {
      const a = await open();
      const holder = await a.tryAcquire('turns', { ttl: 30_000, owner: 'holder' });
      const served = [];
      const waiters = Array.from({ length: 64 }, async (_, i) => {
        const lease = await a.acquire('turns', { ttl: 30_000, owner: `c${i}`, timeout: 30_000 });
        served.push(lease.owner);
        await lease.release();
      });
      let queue;
      for (;;) {
        const info = await a.inspect('turns');
        if (info.waiters.length === 64) {
          queue = info.waiters.map((w) => w.owner);
          break;
        }
        await sleep(20);
      }
      await holder.release();
      await Promise.all(waiters);
      assert.deepEqual(served, queue);
    });

    it('concurrent calls on many keys each get their own answer (read from the engine in the tick its call finished)', async () => {
      const a = await open();
      const b = await open();
      // The namespace first (on PostgreSQL the install renews the connection: docs/stores.md, "Not yet").
      await (await a.tryAcquire('installs', { ttl: 5000 })).release();
      const keys = Array.from({ length: 30 }, (_, i) => `own${i}`);
      // Distinct TTLs: an answer that belonged to another call shows in its deadline.
      const leases = await Promise.all(keys.map((key, i) => a.tryAcquire(key, { ttl: 60_000 + i * 1000, owner: `o${i}` })));
      const infos = await Promise.all(keys.map((key) => b.inspect(key)));
      leases.forEach((lease, i) => {
        assert.equal(lease.key, keys[i]);
        assert.deepEqual([infos[i].owner, infos[i].fence, infos[i].deadline], [`o${i}`, lease.fence, lease.deadline], keys[i]);
      });
      assert.equal(new Set(leases.map((l) => l.fence)).size, keys.length, 'a fence twice');
      await Promise.all(leases.map((l) => l.release()));
    });

    it('grants, refuses a held key, releases once, and fences increase', async () => {
      const a = await open();
      const b = await open();
      const first = await a.tryAcquire('job', { ttl: 5000, owner: 'a' });
      // index.d.ts declares exactly what a StoreLocks and a StoreLease have.
      assert.deepEqual(runtimeMembers(a), declaredMembers('StoreLocks'));
      assert.deepEqual(runtimeMembers(first), declaredMembers('StoreLease'));
      assert.ok(first.held && first.fence > 0);
      assert.equal(await b.tryAcquire('job', { ttl: 5000, owner: 'b' }), null);
      assert.deepEqual((await b.inspect('job')).owner, 'a');
      assert.equal(await first.release(), true);
      assert.equal(await first.release(), false);
      assert.ok(first.releasedAt > 0);
      const second = await b.tryAcquire('job', { ttl: 5000, owner: 'b' });
      assert.ok(second.fence > first.fence);
      assert.deepEqual(await a.keys(), ['job']);
      await second.release();
      assert.equal(await a.inspect('job'), null);
    });

    it('the lock kinds across processes: shared holders side by side, a query, a steal each holder learns, a minimum hold', async () => {
      const a = await open();
      const b = await open();
      const reader = { ttl: 30_000, mode: 'shared', metadata: 'report reader' };
      const ra = await a.tryAcquire('doc', { ...reader, owner: 'ra', keepAlive: true });
      const rb = await b.tryAcquire('doc', { ...reader, owner: 'rb' });
      assert.ok(ra !== null && rb !== null, 'both shared holders granted');
      assert.equal(await b.tryAcquire('doc', { ttl: 5000, owner: 'writer' }), null, 'an exclusive request waits for both');
      const page = await b.query({ prefix: 'do' });
      assert.equal(page.next, null);
      assert.deepEqual(
        page.keys[0].info.holders.map((h) => [h.owner, h.mode, h.metadata]),
        [['ra', 'shared', 'report reader'], ['rb', 'shared', 'report reader']],
      );
      await assert.rejects(a.query({ limit: 0 }), (e) => e instanceof LockError && e.code === 'query-limit');
      const thief = await b.steal('doc', { ttl: 5000, owner: 'operator' });
      assert.ok(thief.fence > rb.fence);
      // Each holder hears it at its next call (the kept-alive one at its next renewal too).
      await assert.rejects(rb.extend(), (e) => e instanceof LockError && e.code === 'stolen');
      assert.equal(rb.isLost, true);
      assert.equal((await rb.lost).reason, 'stolen');
      await assert.rejects(ra.extend(), (e) => e.code === 'stolen');
      assert.equal((await ra.lost).reason, 'stolen');
      await thief.release();
      const job = await a.tryAcquire('nightly', { ttl: 30_000, minHold: 20_000, owner: 'a' });
      const granted = (await a.inspect('nightly')).holders[0].grantedAt;
      assert.equal(await job.release(), true);
      // As in Rust: the released lease ends at its minimum hold's end, not at the release.
      assert.equal(job.releasedAt, granted + 20_000);
      assert.equal(await b.tryAcquire('nightly', { ttl: 5000, owner: 'b' }), null, 'kept until its minimum hold');
      assert.equal((await b.inspect('nightly')).holders[0].ended, 'released');
    });

    it('LockManager over the store: two replicas\' managers share one lock, in the Web Locks shape', async () => {
      // (A store's waits and leases never hold the process: this test does, while it runs.)
      const alive = setInterval(() => {}, 1000);
      try {
        await managerOverStore();
      } finally {
        clearInterval(alive);
      }
    });

    const managerOverStore = async () => {
      const a = new LockManager({ locks: await open(), ttl: 5000 });
      const b = new LockManager({ locks: await open(), ttl: 5000 });
      // Exclusive across the two: b's request waits for a's callback, then runs with a higher fence.
      const order = [];
      let releaseA;
      const held = new Promise((resolve) => {
        releaseA = resolve;
      });
      let fenceA = 0;
      const first = a.request('mgr', { owner: 'a', metadata: 'replica a' }, async (lock) => {
        fenceA = lock.fence;
        order.push('a');
        await held;
        order.push('a done');
      });
      for (let i = 0; i < 200 && fenceA === 0; i += 1) await sleep(10);
      assert.equal(await b.request('mgr', { ifAvailable: true, owner: 'b' }, (lock) => lock), null, 'ifAvailable: not granted, null');
      const second = b.request('mgr', { owner: 'b' }, async (lock) => {
        order.push('b');
        assert.ok(lock.fence > fenceA, 'a higher fence');
        assert.equal(lock.mode, 'exclusive');
      });
      for (let i = 0; i < 200 && (await b.query()).pending.length === 0; i += 1) await sleep(10);
      const seen = await b.query();
      assert.deepEqual(seen.held.map((l) => [l.name, l.mode, l.clientId, l.metadata]), [['mgr', 'exclusive', 'a', 'replica a']]);
      assert.deepEqual(seen.pending.map((l) => [l.name, l.clientId]), [['mgr', 'b']]);
      releaseA();
      await Promise.all([first, second]);
      assert.deepEqual(order, ['a', 'a done', 'b']);
      // Shared requests of both replicas hold the lock together.
      let together = 0;
      let most = 0;
      const reader = (m, owner) =>
        m.request('doc', { mode: 'shared', owner }, async () => {
          together += 1;
          most = Math.max(most, together);
          for (let i = 0; i < 200 && most < 2; i += 1) await sleep(10);
          together -= 1;
        });
      await Promise.all([reader(a, 'ra'), reader(b, 'rb')]);
      assert.equal(most, 2, 'both readers at once');
      // A steal from the other replica: the victim's request rejects with stolen, its signal aborts.
      let signal;
      const victim = a.request('job', { owner: 'victim' }, async (lock) => {
        signal = lock.signal;
        await new Promise((resolve) => signal.addEventListener('abort', resolve));
        return 'finished';
      });
      for (let i = 0; i < 200 && signal === undefined; i += 1) await sleep(10);
      assert.equal(await b.request('job', { steal: true, owner: 'thief' }, (lock) => lock.fence > 0), true);
      await assert.rejects(victim, (e) => e instanceof LockError && e.code === 'stolen' && e.result === 'finished');
      assert.equal(signal.aborted, true);
      assert.deepEqual((await a.query()).held, [], 'nothing left held');
    };

    it('serves waiters of several Locks in FIFO order, handed over at each release', async () => {
      const holder = await open();
      const lease = await holder.tryAcquire('fifo', { ttl: 10_000, owner: 'h' });
      const order = [];
      const waiters = [];
      for (const owner of ['w1', 'w2', 'w3']) {
        const locks = await open();
        waiters.push(
          locks.acquire('fifo', { ttl: 10_000, owner, timeout: 20_000 }).then(async (l) => {
            order.push(owner);
            await sleep(20);
            await l.release();
          }),
        );
        // Queued in this order: each is in line before the next asks.
        for (let i = 0; i < 100 && (await holder.inspect('fifo')).waiters.length < waiters.length; i += 1) await sleep(10);
      }
      assert.deepEqual((await holder.inspect('fifo')).waiters.map((w) => w.owner), ['w1', 'w2', 'w3']);
      await lease.release();
      await Promise.all(waiters);
      assert.deepEqual(order, ['w1', 'w2', 'w3']);
    });

    it('times a wait out with wait-timed-out and leaves no place in the queue', async () => {
      const a = await open();
      const lease = await a.tryAcquire('busy', { ttl: 10_000, owner: 'a' });
      await assert.rejects(a.acquire('busy', { ttl: 1000, owner: 'b', timeout: 300 }), (e) => e instanceof LockError && e.code === 'wait-timed-out');
      assert.deepEqual((await a.inspect('busy')).waiters, []);
      await lease.release();
    });

    it('an aborted wait rejects with the reason and cancels its place', async () => {
      const a = await open();
      const lease = await a.tryAcquire('abort', { ttl: 10_000, owner: 'a' });
      const controller = new AbortController();
      const waiting = a.acquire('abort', { ttl: 1000, owner: 'b', signal: controller.signal });
      for (let i = 0; i < 100 && (await a.inspect('abort')).waiters.length === 0; i += 1) await sleep(10);
      controller.abort(new Error('no longer needed'));
      await assert.rejects(waiting, /no longer needed/);
      assert.deepEqual((await a.inspect('abort')).waiters, []);
      await lease.release();
    });

    it('a lease not kept alive is lost by its holder first, with every signal once', async () => {
      const a = await open();
      const b = await open();
      let calls = 0;
      const lease = await a.tryAcquire('short', { ttl: 200, owner: 'a', onLost: () => (calls += 1) });
      const signal = lease.signal;
      // (A lease's timers never hold the process: over a file store, no socket does either.)
      const alive = setInterval(() => {}, 1000);
      const lost = await lease.lost.finally(() => clearInterval(alive));
      // The holder stopped believing before any other client could be handed the key.
      const next = await b.tryAcquire('short', { ttl: 1000, owner: 'b' });
      if (next !== null) assert.ok(next.deadline - 1000 >= lost.at, 'the next holder began after the lost deadline');
      assert.deepEqual(lost, { key: 'short', owner: 'a', fence: lease.fence, at: lease.deadline, reason: 'expired' });
      assert.equal(lease.held, false);
      assert.equal(lease.isLost, true);
      assert.ok(signal.aborted && signal.reason.code === 'expired');
      assert.equal(calls, 1);
      assert.equal(await lease.release(), false);
      assert.equal(await lease.release(), false);
      await next?.release();
    });

    it('keep-alive extends a lease past its TTL until it is released', async () => {
      const a = await open();
      const lease = await a.tryAcquire('kept', { ttl: 150, owner: 'a', keepAlive: true });
      const first = lease.deadline;
      await sleep(500);
      assert.equal(lease.held, true);
      assert.ok(lease.deadline > first);
      assert.equal((await a.inspect('kept')).fence, lease.fence);
      assert.equal(await lease.release(), true);
    });

    it('withLock answers the callback and releases; a loss during it rejects with expired', async () => {
      const a = await open();
      assert.equal(await a.withLock('with', { ttl: 5000 }, async (lease) => lease.fence > 0), true);
      assert.equal(await a.inspect('with'), null);
      await assert.rejects(
        a.withLock('with', { ttl: 100 }, async () => {
          await sleep(300);
          return 'late';
        }),
        (e) => e instanceof LockError && e.code === 'expired' && e.result === 'late',
      );
      const held = await a.tryAcquire('with', { ttl: 5000, owner: 'x' });
      assert.equal(await a.withLock('with', { ttl: 100, ifAvailable: true }, async (lease) => lease), null);
      await held.release();
    });

    it('refuses bad input with typed errors before the store', async () => {
      const a = await open();
      await assert.rejects(a.tryAcquire('', { ttl: 100 }), (e) => e instanceof LockError && e.code === 'key-empty');
      await assert.rejects(a.tryAcquire('k', { ttl: 0 }), (e) => e instanceof LockError);
      await assert.rejects(a.tryAcquire('k', { ttl: -1 }), RangeError);
      await assert.rejects(a.tryAcquire('k', { ttl: 100, keepalive: true }), TypeError);
      assert.deepEqual(await a.keys(), (await a.keys()).filter((k) => k !== 'k'));
    });
  });
}

it('PostgreSQL: calls that find the connection dropped share one new connection', async () => {
  const { PostgresDriver } = await import('../../lock-wasm/js/src/stores/postgres.js');
  const ns = uniqueNamespace('jsconn');
  const driver = await PostgresDriver.open(POSTGRES_URL, ns);
  try {
    await driver.install(5000);
    driver.drop();
    await Promise.all(Array.from({ length: 10 }, (_, i) => driver.read(`k${i}`, 5000)));
    const pg = (await import('pg')).default;
    const client = new pg.Client({ connectionString: POSTGRES_URL });
    await client.connect();
    const { rows } = await client.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1', [`lock-store:${ns}`]);
    await client.end();
    assert.equal(rows[0].n, 1, 'one connection for the namespace, not one per waiting call');
  } finally {
    await driver.uninstall();
    await driver.close();
  }
});

/**
 * How many calls wait in the test below (`LOCK_STORE_JS_WAITERS`, default 1 000). Each waiter
 * renews its place about every 0.67 s, and each renewal rewrites the record that holds every
 * waiter: the renewals due at once are decided together, one compare-and-set for all (sent one
 * by one, a thousand fell behind, places lapsed and waiters queued again at the back).
 */
const WAITERS = Number(process.env.LOCK_STORE_JS_WAITERS ?? 1000);

it(`${WAITERS} acquires waiting for one key in one process are served in queue order, over one listening connection (Redis)`, async () => {
  const { REDIS_URL } = await import('./lib/stores.js');
  const { Redis } = await import('ioredis');
  const ns = uniqueNamespace('jsmany');
  const locks = await Locks.open(REDIS_URL, ns, { limits: { maxWaitersPerKey: WAITERS } });
  const admin = new Redis(REDIS_URL);
  try {
    const holder = await locks.tryAcquire('job', { ttl: 60_000, owner: 'holder', keepAlive: true });
    const served = [];
    const started = performance.now();
    const waiters = Array.from({ length: WAITERS }, async (_, i) => {
      const owner = `w${String(i).padStart(4, '0')}`;
      const lease = await locks.acquire('job', { ttl: 60_000, owner, timeout: 600_000 });
      served.push(owner);
      await lease.release();
    });
    // Every call queued (in whatever order they reached the store): that order is the queue's.
    let queue;
    for (;;) {
      const info = await locks.inspect('job');
      if (info.waiters.length === WAITERS) {
        queue = info.waiters.map((w) => w.owner);
        break;
      }
      assert.ok(performance.now() - started < 120_000, `${info.waiters.length} of ${WAITERS} queued`);
      await sleep(50);
    }
    const queued = performance.now() - started;
    const [, listeners] = await admin.pubsub('NUMSUB', `{el:${ns}}:handoff`);
    assert.equal(listeners, 1, 'listening connections');
    const released = performance.now();
    await holder.release();
    await Promise.all(waiters);
    console.log(`${WAITERS} waiting calls in one Node process: queued in ${Math.round(queued)} ms, served in ${Math.round(performance.now() - released)} ms`);
    assert.deepEqual(served, queue, `served in queue order: served ${served.slice(0, 5)}..., queued ${queue.slice(0, 5)}...`);
  } finally {
    admin.disconnect();
    await locks.close();
    const { RedisDriver } = await import('../../lock-wasm/js/src/stores/redis.js');
    const driver = await RedisDriver.open(REDIS_URL, ns);
    await driver.uninstall();
    await driver.close();
  }
});
