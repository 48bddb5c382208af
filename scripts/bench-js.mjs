#!/usr/bin/env node
// The JS benchmark: the npm package in Node (low-level LockTable pair, contended tryAcquire,
// high-level Locks pair), the WIT component through jco, and native lock-core, in one run, with
// ratios to native; plus the engine's size and its memory per live lock.
// Usage: node scripts/bench-js.mjs [PAIRS]   (after scripts/build-npm.sh and a host build)

import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { fileURLToPath } from 'node:url';
import { LockTable, Locks } from '../lock-wasm/js/src/node.js';
import { memory } from '../lock-wasm/js/src/engine.js';
import { loadComponent } from '../tests/js/lib/driver-jco.js';

const pairs = Number(process.argv[2] ?? 1_000_000);
if (!Number.isSafeInteger(pairs) || pairs <= 0) {
  console.error('usage: node scripts/bench-js.mjs [PAIRS]');
  process.exit(2);
}
const root = fileURLToPath(new URL('../', import.meta.url));
const keys = Array.from({ length: 1024 }, (_, i) => `fresh-${String(i).padStart(6, '0')}`);
const owner = 'worker-1';
const ttl = 60_000;

function time(name, ops, body) {
  body(Math.min(ops, 20_000)); // warm up the JIT
  const start = process.hrtime.bigint();
  body(ops);
  const ns = Number(process.hrtime.bigint() - start) / ops;
  return { name, ns };
}

const results = [];

const native = JSON.parse(
  execFileSync('cargo', ['run', '--release', '-q', '-p', 'lock-core', '--example', 'pairs', '--', String(pairs)], { cwd: root, encoding: 'utf8' }),
);
results.push({ name: 'native lock-core: try-acquire + release pair', ns: native.pair_ns, native: native.pair_ns });
results.push({ name: 'native lock-core: contended try-acquire', ns: native.contended_ns, native: native.contended_ns });

const table = new LockTable();
table.tryAcquire('held', 'someone', ttl, 0);
results.push({
  ...time('npm LockTable: tryAcquire + release pair', pairs, (n) => {
    for (let i = 0; i < n; i += 1) {
      const k = keys[i & 1023];
      const g = table.tryAcquire(k, owner, ttl, 1);
      table.release(k, owner, g.fence, 1);
    }
  }),
  native: native.pair_ns,
});
results.push({
  ...time('npm LockTable: contended tryAcquire (throws held)', Math.ceil(pairs / 10), (n) => {
    for (let i = 0; i < n; i += 1) {
      try {
        table.tryAcquire('held', owner, ttl, 1);
      } catch {
        // held
      }
    }
  }),
  native: native.contended_ns,
});

const locks = new Locks();
results.push({
  ...time('npm Locks: tryAcquire + release (Lease objects)', pairs, (n) => {
    for (let i = 0; i < n; i += 1) {
      const lease = locks.tryAcquire(keys[i & 1023], { owner, ttl });
      lease.release();
    }
  }),
  native: native.pair_ns,
});
locks.tryAcquire('held', { owner: 'someone', ttl });
results.push({
  ...time('npm Locks: contended tryAcquire (answers null)', pairs, (n) => {
    for (let i = 0; i < n; i += 1) locks.tryAcquire('held', { owner, ttl });
  }),
  native: native.contended_ns,
});
locks.close();

const component = await loadComponent();
const jco = component.table.LockTable.create(component.table.defaultLimits(), 0n);
const jcoPairs = Math.ceil(pairs / 20);
results.push({
  ...time('component via jco: try-acquire + release pair', jcoPairs, (n) => {
    for (let i = 0; i < n; i += 1) {
      const k = keys[i & 1023];
      const g = jco.tryAcquire(k, owner, 60_000n, 1n);
      jco.release(k, owner, g.val.fence, 1n);
    }
  }),
  native: native.pair_ns,
});

// Memory per live lock: the engine's linear memory growth for N live leases (it never shrinks,
// so a fresh table in a fresh region is measured after the work above).
const live = 100_000;
const before = memory().buffer.byteLength;
const big = new LockTable();
for (let i = 0; i < live; i += 1) big.tryAcquire(`lock-${i}`, `owner-${i % 64}`, ttl, 0);
const perLock = (memory().buffer.byteLength - before) / live;

const wasm = readFileSync(new URL('../lock-wasm/js/engine/lock_wasm_bg.wasm', import.meta.url));
console.log(`${'workload'.padEnd(52)} ${'ns/op'.padStart(9)} ${'ops/s'.padStart(12)} ${'vs native'.padStart(10)}`);
for (const r of results) {
  const perSecond = 1e9 / r.ns;
  console.log(`${r.name.padEnd(52)} ${r.ns.toFixed(1).padStart(9)} ${Math.round(perSecond).toLocaleString('en').padStart(12)} ${`${(r.ns / r.native).toFixed(1)}x`.padStart(10)}`);
}
console.log();
console.log(`engine (lock_wasm_bg.wasm): ${wasm.length} bytes, ${gzipSync(wasm, { level: 9 }).length} gzipped`);
console.log(`memory per live lock in the engine: ${perLock.toFixed(1)} bytes (${live} live leases; wasm memory grows in 64 KiB pages)`);
const low = results.find((r) => r.name.startsWith('npm LockTable: tryAcquire'));
console.log(`low-level pairs per second in Node: ${Math.round(1e9 / low.ns).toLocaleString('en')} (aim: at least 2,000,000)`);
