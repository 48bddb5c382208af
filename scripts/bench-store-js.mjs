#!/usr/bin/env node
// The Node store benchmark: a lock pair (take a free key, release it) over Redis on one
// connection each, three ways interleaved turn by turn in one run against the same server:
// the npm package's `Locks.open` (the engine's decision loop, the shared compare-and-set
// script), node-redlock (4.x, one Redis node), and the hand-written pair a Node service would
// otherwise write (SET key token NX PX ttl, then a scripted compare-and-delete). Prints
// throughput, p50 and p99 latency, the process's memory, each pair's ratio to the hand-written
// one, and the server's own cost per call (INFO commandstats), which this noisy 2-core VM does
// not blur.
// Then the same over PostgreSQL: `Locks.open` against the advisory-lock pair a Node service
// would write with pg (pg_try_advisory_lock, pg_advisory_unlock on one session), interleaved
// the same way.
// Usage: node scripts/bench-store-js.mjs [SECONDS_PER_TURN] [turns=N]  (after scripts/build-npm.sh)

import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import pg from 'pg';
import Redlock from 'redlock';
import { Locks } from '../lock-wasm/js/src/node.js';
import { REDIS_CAS } from '../lock-wasm/js/src/stores/redis.js';
import { step, stepsFile } from '../lock-wasm/js/src/stores/steps.js';

const args = process.argv.slice(2);
const seconds = Number(args.find((a) => !a.includes('=')) ?? 1);
const turns = Number(args.find((a) => a.startsWith('turns='))?.slice(6) ?? 4);
if (!(seconds > 0) || !Number.isSafeInteger(turns) || turns <= 0 || args.some((a) => a.includes('=') && !a.startsWith('turns='))) {
  console.error('usage: node scripts/bench-store-js.mjs [SECONDS_PER_TURN] [turns=N]');
  process.exit(2);
}
const url = process.env.LOCK_STORE_REDIS_URL ?? 'redis://127.0.0.1:6379';
const pgUrl = process.env.LOCK_STORE_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const ns = `benchjs_${process.pid}`;
const TTL = 30_000;
const RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end";

const locks = await Locks.open(url, ns);
const plain = new Redis(url);
plain.defineCommand('benchRelease', { numberOfKeys: 1, lua: RELEASE });
const redlockClient = new Redis(url);
const redlock = new Redlock([redlockClient], { retryCount: 0 });
const admin = new Redis(url);
const bare = new Redis(url);
bare.defineCommand('benchCas', { numberOfKeys: 3, lua: REDIS_CAS });
/** The server's run_id, as a client's greeting learns it (the script then looks itself only every 100 ms). */
const serverId = /^run_id:(\w+)/m.exec(await bare.info('server'))?.[1] ?? '';
/** A record of a held key's size, and the tombstone a release leaves (the engine's shapes). */
const HELD = Buffer.alloc(64, 7);
const TOMB = Buffer.from('LOCKTOMB');
const versions = new Map();

/** The three pairs; each takes a key of its own prefix (never held by the others). */
const PAIRS = {
  'expiring-lock Locks.open': async (key) => {
    const lease = await locks.tryAcquire(`ours:${key}`, { ttl: TTL, owner: 'bench' });
    await lease.release();
  },
  'node-redlock 4': async (key) => {
    const lock = await redlock.lock(`${ns}:redlock:${key}`, TTL);
    await lock.unlock();
  },
  // The design's floor: the same two compare-and-sets of the shared script, sent bare (the
  // arguments made by hand, no engine, no decision): what the engine and the driver add is
  // the difference to the first row.
  'the shared script, bare (the floor)': async (key) => {
    const rec = `${ns}:bare:${key}`;
    const counter = `${ns}:bare:fence`;
    const authority = `${ns}:bare:authority`;
    const v = versions.get(key) ?? 0;
    const replaces = v === 0 ? Buffer.alloc(0) : TOMB;
    // As the client sends them: the lease's span the first time only (then 0, as for a release).
    await bare.benchCas(rec, counter, authority, String(v), String(v + 1), '0', HELD, '1', '-1', '-1', '0', replaces, v === 0 ? String(TTL) : '0', serverId);
    await bare.benchCas(rec, counter, authority, String(v + 1), String(v + 2), '0', TOMB, '0', '-1', String(Date.now() + 60_000), '0', HELD, '0', serverId);
    versions.set(key, v + 2);
  },
  'hand-written SET NX PX + scripted release': async (key) => {
    const token = randomUUID();
    if ((await plain.set(`${ns}:plain:${key}`, token, 'PX', TTL, 'NX')) !== 'OK') throw new Error('held');
    await plain.benchRelease(`${ns}:plain:${key}`, token);
  },
};

/** Runs `pair` for `seconds`; answers each pair's latency in µs. */
async function turn(pair) {
  const latencies = [];
  const end = performance.now() + seconds * 1000;
  let i = 0;
  while (performance.now() < end) {
    const start = performance.now();
    await pair(`k${i % 64}`);
    latencies.push((performance.now() - start) * 1000);
    i += 1;
  }
  return latencies;
}

/** The server's µs per call and calls, by command, from INFO commandstats. */
async function commandstats() {
  const text = await admin.info('commandstats');
  const stats = {};
  for (const m of text.matchAll(/^cmdstat_(\w+):calls=(\d+),usec=(\d+)/gm)) stats[m[1]] = { calls: Number(m[2]), usec: Number(m[3]) };
  return stats;
}

/** Server µs per pair: the commands' time between two snapshots, over `pairs`. */
function serverCost(before, after, pairs) {
  let usec = 0;
  for (const [name, s] of Object.entries(after)) usec += s.usec - (before[name]?.usec ?? 0);
  return usec / pairs;
}

const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))];

/**
 * Runs `pairs` interleaved for `turns` turns (the order rotating each turn: a slow phase of the
 * VM hits every row alike); `cost(run)` answers the server's µs per pair of a turn, if known.
 */
async function measure(pairs, cost) {
  const all = Object.fromEntries(Object.keys(pairs).map((name) => [name, { latencies: [], seconds: 0, server: [] }]));
  // Warm up every path (JIT, script caches, prepared statements, connections).
  for (const pair of Object.values(pairs)) for (let i = 0; i < 200; i += 1) await pair(`warm${i % 8}`);
  for (let t = 0; t < turns; t += 1) {
    const names = Object.keys(pairs);
    const order = names.slice(t % names.length).concat(names.slice(0, t % names.length));
    for (const name of order) {
      let latencies = [];
      const server = await cost(async () => {
        latencies = await turn(pairs[name]);
        return latencies.length;
      });
      all[name].latencies.push(...latencies);
      all[name].seconds += seconds;
      if (server !== null) all[name].server.push(server);
    }
  }
  return Object.entries(all).map(([name, r]) => {
    const sorted = [...r.latencies].sort((a, b) => a - b);
    const server = r.server.length === 0 ? null : r.server.reduce((a, b) => a + b, 0) / r.server.length;
    return { name, rate: r.latencies.length / r.seconds, p50: pct(sorted, 50), p99: pct(sorted, 99), server };
  });
}

/** Prints `rows` with each p50's ratio to the rows named `against`. */
function table(rows, against) {
  const bases = against.map((prefix) => rows.find((r) => r.name.startsWith(prefix)));
  console.log(`| pair | pairs/s | p50 µs | p99 µs | ${bases.map((b) => `p50 vs ${b.name}`).join(' | ')} | server µs per pair |`);
  console.log(`| --- | --- | --- | --- | ${bases.map(() => '---').join(' | ')} | --- |`);
  for (const r of rows) {
    const cells = [Math.round(r.rate), r.p50.toFixed(0), r.p99.toFixed(0), ...bases.map((b) => `${(r.p50 / b.p50).toFixed(2)}x`), r.server === null ? 'n/a' : r.server.toFixed(1)];
    console.log(`| ${r.name} | ${cells.join(' | ')} |`);
  }
}

/** Redis: the server's µs per pair from INFO commandstats around the turn. */
const redisCost = async (run) => {
  const before = await commandstats();
  const pairs = await run();
  return serverCost(before, await commandstats(), pairs);
};

console.log(`Node ${process.version}, one connection each, ${turns} interleaved turns of ${seconds} s, TTL ${TTL} ms, ${url}`);
table(await measure(PAIRS, redisCost), ['hand-written', 'the shared script']);

// PostgreSQL: Locks.open against the advisory-lock pair on one session.
const pgNs = `benchjs_${process.pid}`;
const pgLocks = await Locks.open(pgUrl, pgNs);
const advisory = new pg.Client({ connectionString: pgUrl });
await advisory.connect();
const pgBare = new pg.Client({ connectionString: pgUrl });
await pgBare.connect();
const pgSteps = stepsFile('postgres.sql');
const pgStep = (name) => step(pgSteps, name, { ns: pgNs, format: '1', channel: `${pgNs}_handoff`, take_over: `${pgNs}.take_over`, hold_for: `${pgNs}.hold_for` });
const [INSERT, UPDATE] = [pgStep('insert'), pgStep('update')];
const pgVersions = new Map();
const PG_PAIRS = {
  'expiring-lock Locks.open (PostgreSQL)': async (key) => {
    const lease = await pgLocks.tryAcquire(key, { ttl: TTL, owner: 'bench' });
    await lease.release();
  },
  // The design's floor: the two compare-and-sets (statements of the shared steps file) sent
  // bare, their arguments made by hand: a grant taking one token, a release leaving a tombstone.
  'the shared statements, bare (the floor)': async (key) => {
    const k = `bare:${key}`;
    const v = pgVersions.get(k) ?? 0;
    const forget = String(Date.now() + 60_000);
    // The last argument: tokens move up to the server's time on a new authority, as the client sends it.
    if (v === 0) await pgBare.query({ name: 'bare-insert', text: INSERT, values: [k, '1', HELD, 1, null, null, true, '0'], rowMode: 'array' });
    else await pgBare.query({ name: 'bare-update', text: UPDATE, values: [k, String(v), String(v + 1), HELD, 1, null, null, TOMB, true, '0'], rowMode: 'array' });
    const held = v === 0 ? 1 : v + 1;
    await pgBare.query({ name: 'bare-update', text: UPDATE, values: [k, String(held), String(held + 1), TOMB, 0, forget, null, HELD, true, '0'], rowMode: 'array' });
    pgVersions.set(k, held + 1);
  },
  'pg_try_advisory_lock + pg_advisory_unlock': async (key) => {
    const id = Number(key.replace(/\D/g, '') || 0) + 0x5eed0000;
    const { rows } = await advisory.query({ name: 'bench-take', text: 'SELECT pg_try_advisory_lock($1)', values: [id], rowMode: 'array' });
    if (rows[0][0] !== true) throw new Error('held');
    await advisory.query({ name: 'bench-give', text: 'SELECT pg_advisory_unlock($1)', values: [id], rowMode: 'array' });
  },
};
console.log(`\nthe same over PostgreSQL, ${pgUrl}`);
table(await measure(PG_PAIRS, async (run) => (await run(), null)), ['pg_try_advisory_lock', 'the shared statements']);
const mem = process.memoryUsage();
console.log(`process memory: rss ${(mem.rss / 2 ** 20).toFixed(1)} MiB, heap used ${(mem.heapUsed / 2 ** 20).toFixed(1)} MiB`);

// Clean up what this run made.
const made = await admin.keys(`{el:${ns}}*`);
const others = await admin.keys(`${ns}:*`);
if (made.length + others.length > 0) await admin.del(...made, ...others);
await locks.close();
for (const c of [plain, redlockClient, admin, bare]) c.disconnect();
await pgLocks.close();
await advisory.query(`DROP SCHEMA IF EXISTS ${pgNs} CASCADE`);
await advisory.end();
await pgBare.end();
