// Leader election from JS (docs/election.md): `locks.election(name, options).run(body)` drives
// the core's recipe (RawCampaign) in process on a virtual clock, and over every store with real
// replicas' clients, one of them behind a proxy whose path goes silent (a gray failure).

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Election, Locks, StoreError, TermStopped } from '../../lock-wasm/js/src/node.js';
import { FakeTime, settle } from './lib/fake-time.js';
import { Proxy } from './lib/proxy.js';
import { STORES, uniqueNamespace } from './lib/stores.js';

/** A body that records its term and waits for its stop signal. */
function recorder(log) {
  return async (term) => {
    const entry = { candidate: term.candidate, fence: term.fence, stop: null };
    log.push(entry);
    await new Promise((resolve) => term.signal.addEventListener('abort', resolve, { once: true }));
    entry.stop = term.signal.reason;
  };
}

describe('election in process, on a virtual clock', () => {
  it('a leader leads and extends; it resigns and the next in line leads at once; it campaigns again', async () => {
    const time = new FakeTime();
    const locks = new Locks(time.options);
    const log = [];
    const a = locks.election('scheduler', { candidate: 'a', ttl: 300, metadata: 'a.internal:8080' });
    const b = locks.election('scheduler', { candidate: 'b', ttl: 300 });
    const runA = a.run(recorder(log));
    await settle();
    const runB = b.run(recorder(log));
    await settle();
    assert.deepEqual(locks.leader('scheduler'), { candidate: 'a', fence: 1, since: 0, deadline: 300, metadata: 'a.internal:8080' });
    // Extended every third of its TTL: still leading after three TTLs, since the same instant.
    await time.advance(900);
    assert.equal(locks.leader('scheduler').fence, 1);
    assert.equal(locks.leader('scheduler').since, 0);
    assert.equal(log.length, 1);
    a.resign();
    await settle();
    await time.advance(0);
    assert.equal(log[0].stop instanceof TermStopped, true);
    assert.equal(log[0].stop.code, 'resigned');
    assert.equal(locks.leader('scheduler').candidate, 'b', 'handed over at once, no TTL waited out');
    assert.equal(locks.leader('scheduler').fence, 2);
    assert.equal(locks.leader('scheduler').since, locks.now(), 'b leads since the hand-off, not since it asked');
    assert.deepEqual(locks.inspect('scheduler').waiters.map((w) => w.owner), ['a'], 'a campaigns again');
    b.shutDown();
    await time.advance(0);
    await settle();
    assert.equal(log[1].stop.code, 'shut-down');
    assert.equal(locks.leader('scheduler').candidate, 'a');
    a.shutDown();
    await time.advance(0);
    assert.equal(await runA, 2);
    assert.equal(await runB, 1);
    assert.equal(locks.leader('scheduler'), null);
    locks.close();
  });

  it('a stolen lease stops the term with lost; once; a signal shuts the campaign down; bad options are refused', async () => {
    const time = new FakeTime();
    const locks = new Locks(time.options);
    const log = [];
    const once = locks.election('job', { candidate: 'a', ttl: 300, once: true });
    const run = once.run(recorder(log));
    await settle();
    locks.steal('job', { owner: 'operator', ttl: 50 });
    await time.advance(100); // the next extension is refused
    assert.equal(log[0].stop.code, 'lost');
    assert.equal(await run, 1, 'once: one term, then it resolves');

    const controller = new AbortController();
    const waiting = locks.election('job2', { candidate: 'x', ttl: 300, signal: controller.signal });
    locks.tryAcquire('job2', { owner: 'holder', ttl: 10_000 });
    const pending = waiting.run(recorder(log));
    await settle();
    controller.abort();
    await time.advance(0);
    assert.equal(await pending, 0, 'shut down while campaigning: no term');

    assert.throws(() => locks.election('job', { ttl: 300, margin: 200 }), (e) => e instanceof RangeError && /more than half the ttl/.test(e.message));
    assert.throws(() => locks.election('job', { ttl: 300, colour: 'red' }), TypeError);
    await assert.rejects(locks.election('', { ttl: 300 }).run(() => {}), (e) => e.code === 'key-empty');
    const thrower = locks.election('job3', { candidate: 't', ttl: 300 });
    await assert.rejects(
      thrower.run(() => {
        throw new Error('boom');
      }),
      /boom/,
    );
    assert.equal(locks.leader('job3'), null, 'a body that throws: its lease is released');
    assert.equal(typeof Election, 'function');
    locks.close();
  });
});

describe('election against a full line, on a virtual clock', () => {
  it('a campaign that finds the line full (queue-full) asks again after its retry pause, and leads once there is room', async () => {
    const time = new FakeTime();
    const locks = new Locks({ ...time.options, limits: { maxWaitersPerKey: 1 } });
    const x = locks.tryAcquire('scheduler', { owner: 'x', ttl: 10_000 });
    const y = locks.acquire('scheduler', { owner: 'y', ttl: 10_000, timeout: 60_000 });
    await settle();
    const log = [];
    let ended = null;
    const c = locks.election('scheduler', { candidate: 'c', ttl: 300 });
    const run = c.run(recorder(log)).then(
      (terms) => (ended = { terms }),
      (error) => (ended = { error }),
    );
    await settle();
    await time.advance(1_000); // several asks meet the full line
    assert.equal(ended, null, `the campaign ended: ${ended?.error?.code ?? ended?.terms}`);
    x.release();
    const held = await y;
    await time.advance(1_000); // c asks again and waits behind y
    assert.deepEqual(locks.inspect('scheduler').waiters.map((w) => w.owner), ['c']);
    held.release();
    await time.advance(0);
    await settle();
    assert.equal(log.length, 1);
    assert.ok(log[0].fence > held.fence, `${log[0].fence} after ${held.fence}`);
    c.shutDown();
    await time.advance(0);
    await run;
    assert.deepEqual(ended, { terms: 1 });
    locks.close();
  });
});

/**
 * Runs `test` with two replicas' clients on a fresh namespace of `store` and a candidate on each
 * (`a` on `one`, `b` on `two`, TTL 1 s; `metadata` for a); `one` through the proxy `through` if
 * given (its calls bounded at 500 ms). The test pushes its runs' promises to
 * `runs`. Whatever fails, the campaigns end before their clients close, and the namespace is
 * removed.
 */
async function withReplicas(store, prefix, metadata, test, { through } = {}) {
  const ns = uniqueNamespace(prefix);
  const one = through ? await Locks.open(through.url(store.url), ns, { bound: 500 }) : await Locks.open(store.url, ns);
  const two = await Locks.open(store.url, ns);
  const a = one.election('scheduler', { candidate: 'a', ttl: 1_000, metadata });
  const b = two.election('scheduler', { candidate: 'b', ttl: 1_000 });
  const runs = [];
  try {
    await test({ one, two, a, b, runs });
  } finally {
    a.shutDown();
    b.shutDown();
    await Promise.allSettled(runs);
    await one.close();
    await two.close();
    const driver = await store.open(ns);
    await driver.uninstall().catch(() => {});
    await driver.close();
  }
}

for (const store of STORES) {
  describe(`election over ${store.name}`, () => {
    it('two replicas: one leads, resigns, the other leads at once with a higher fence; both leave', async () => {
      await withReplicas(store, 'elect_js', 'a:1', async ({ one, two, a, b, runs }) => {
        const log = [];
        const runA = a.run(recorder(log));
        runs.push(runA);
        const waitFor = async (what, test) => {
          const start = performance.now();
          for (;;) {
            // Reading a namespace the first campaign is still installing is a StoreError
            // (no-namespace, or the install's race on PostgreSQL): not yet.
            const value = await test().catch((e) => {
              if (e instanceof StoreError) return null;
              throw e;
            });
            if (value) return value;
            assert.ok(performance.now() - start < 10_000, `waited for ${what}`);
            await new Promise((resolve) => setTimeout(resolve, 10));
          }
        };
        await waitFor('a leads', async () => (await one.leader('scheduler'))?.candidate === 'a' && log.length === 1);
        const runB = b.run(recorder(log));
        runs.push(runB);
        await new Promise((resolve) => setTimeout(resolve, 1_500)); // extended past its TTL
        // b waits in line before a resigns (a resignation nobody waits for hands a the key again).
        await waitFor('b in line', async () => (await one.inspect('scheduler'))?.waiters.some((w) => w.owner === 'b'));
        const first = await two.leader('scheduler');
        assert.deepEqual([first.candidate, first.metadata], ['a', 'a:1']);
        const resignedAt = performance.now();
        a.resign();
        // The key is b's (what every replica reads) and b's body runs (b heard its grant).
        const next = await waitFor('b leads', async () => {
          const l = await two.leader('scheduler');
          return l?.candidate === 'b' && log.length === 2 ? l : null;
        });
        assert.ok(next.fence > first.fence);
        // Since when each leads, in the store's time: a's term began before its 1.5 s of
        // extensions, b's at the hand-off after them.
        assert.equal(typeof first.since, 'number');
        assert.ok(next.since >= first.since + 1_500, `${first.since} then ${next.since}`);
        assert.ok(performance.now() - resignedAt < 3_000);
        assert.equal(log[0].stop.code, 'resigned');
        // a waits in line again: it leaves first, so that b's release hands the key to nobody
        // (an abort that races a hand-off is the store client's case, not this test's).
        a.shutDown();
        assert.equal(await runA, 1);
        b.shutDown();
        assert.equal(await runB, 1);
        assert.equal(log[1].stop.code, 'shut-down');
        assert.equal(await one.leader('scheduler'), null);
      });
    });

    it('a candidate whose id already waits in line (a replica restarted under it) campaigns on and leads when the key comes to that id', async () => {
      await withReplicas(store, 'elect_waits', undefined, async ({ one, b, runs }) => {
        const held = await one.acquire('scheduler', { owner: 'x', ttl: 30_000, timeout: 0 });
        // Another client waits as b (the place a killed replica left, until it lapses).
        const waiting = one.acquire('scheduler', { owner: 'b', ttl: 30_000, timeout: 60_000 }).catch((e) => e);
        const start = performance.now();
        while (!((await one.inspect('scheduler'))?.waiters ?? []).some((w) => w.owner === 'b')) {
          assert.ok(performance.now() - start < 10_000, 'b in line');
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
        const log = [];
        let ended = null;
        const runB = b.run(recorder(log)).then(
          (terms) => (ended = { terms }),
          (error) => (ended = { error }),
        );
        runs.push(runB);
        await new Promise((resolve) => setTimeout(resolve, 300)); // its first ask meets that place
        assert.equal(ended, null, `the campaign ended: ${ended?.error ?? ended?.terms}`);
        await held.release();
        while (log.length === 0) {
          assert.ok(performance.now() - start < 20_000, `b leads: ${ended?.error ?? ''}`);
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
        assert.deepEqual([(await one.leader('scheduler')).candidate, log[0].candidate], ['b', 'b']);
        b.shutDown();
        await runB;
        assert.deepEqual(ended, { terms: 1 });
        await waiting;
      });
    });

    if (store.name !== 'sqlite') {
      it("a leader whose path to the store goes silent is told 'unrenewed' before the next leader's body begins, and campaigns on once it heals", async () => {
        const { hostname, port } = new URL(store.url.replace(/^[a-z]+:/, 'http:'));
        const proxy = await Proxy.start(hostname, Number(port));
        try {
          await withReplicas(store, 'elect_silent', undefined, async ({ one, two, a, b, runs }) => {
            const log = [];
            const timed = async (term) => {
              const e = { candidate: term.candidate, fence: term.fence, startedAt: performance.now(), stop: null, stoppedAt: null };
              log.push(e);
              await new Promise((resolve) => term.signal.addEventListener('abort', resolve, { once: true }));
              [e.stop, e.stoppedAt] = [term.signal.reason, performance.now()];
            };
            let ended = null;
            const runA = a.run(timed).then(
              (terms) => (ended = { terms }),
              (error) => (ended = { error }),
            );
            runs.push(runA);
            const start = performance.now();
            const waitFor = async (what, test, ms = 10_000) => {
              while (!(await test().catch(() => false))) {
                assert.ok(performance.now() - start < ms, `waited for ${what}: ${ended?.error ?? ''}`);
                await new Promise((resolve) => setTimeout(resolve, 10));
              }
            };
            await waitFor('a leads', async () => log.length === 1);
            const runB = b.run(timed);
            runs.push(runB);
            await waitFor('b in line', async () => ((await two.inspect('scheduler'))?.waiters ?? []).length === 1);
            proxy.silent(true); // a's extensions go nowhere, and nothing closes
            try {
              await waitFor('b leads', async () => log.length === 2, 20_000);
              const [cut, next] = log;
              assert.deepEqual([cut.candidate, next.candidate], ['a', 'b']);
              assert.equal(cut.stop?.code, 'unrenewed', `a's stop: ${cut.stop?.code}`);
              assert.ok(cut.stoppedAt !== null && cut.stoppedAt <= next.startedAt, `a stopped at ${cut.stoppedAt}, b began at ${next.startedAt}`);
              assert.ok(next.fence > cut.fence);
              // Cut off, a's campaign goes on (its asks fail: the store is unreachable).
              assert.equal(ended, null, `a's run ended: ${ended?.error ?? ended?.terms}`);
            } finally {
              // Healed before anything is closed (a failure must not leave a client to close
              // over a silent path).
              proxy.silent(false);
              proxy.reset();
            }
            // Healed: a waits in line again, behind b.
            await waitFor('a in line again', async () => ((await two.inspect('scheduler'))?.waiters ?? []).some((w) => w.owner === 'a'), 20_000);
            // a leaves first, so that b's release hands the key to nobody (as above).
            a.shutDown();
            assert.equal(await runA, ended);
            assert.deepEqual(ended, { terms: 1 });
            b.shutDown();
            assert.equal(await runB, 1);
            assert.equal(await one.leader('scheduler'), null);
          }, { through: proxy });
        } finally {
          await proxy.close();
        }
      });
    }

    it("closing a replica's Locks under its running election ends the run with 'closed': the leader's body is stopped first, a waiter's run too", async () => {
      await withReplicas(store, 'elect_close', undefined, async ({ one, two, a, b, runs }) => {
        const log = [];
        const outcome = (p) => p.then((terms) => ({ terms }), (error) => ({ error }));
        const runA = outcome(a.run(recorder(log)));
        runs.push(runA);
        const start = performance.now();
        while (log.length === 0) {
          assert.ok(performance.now() - start < 10_000, 'a leads');
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
        const runB = outcome(b.run(recorder(log)));
        runs.push(runB);
        while (((await one.inspect('scheduler'))?.waiters ?? []).length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
        await two.close(); // b waits in line
        const endB = await runB;
        assert.equal(endB.error?.code, 'closed', String(endB.error ?? endB.terms));
        await one.close(); // a leads
        const endA = await runA;
        assert.equal(endA.error?.code, 'closed', String(endA.error ?? endA.terms));
        assert.equal(log.length, 1);
        assert.equal(log[0].stop.code, 'shut-down');
      });
    });
  });
}
