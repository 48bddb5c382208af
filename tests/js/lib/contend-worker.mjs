// A Node worker of lock-store's contention test (lockstore/tests/processes.rs): three owners of
// one process contend through the npm package's store client on the same namespace and keys as
// the Rust workers, write to the same fenced resource, and log each grant in the Rust workers'
// format, so that the Rust checker judges one history of Rust and Node replicas.
// Usage: node contend-worker.mjs 'url|ns|log|resource|id|gray|node' (the Rust worker's spec).

import { closeSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Locks, StoreError } from '../../../lock-wasm/js/src/node.js';

const THREADS = 3;
const KEYS = 4;
const TTL_MS = 120;
const runMs = Number(process.env.LOCK_CONTENTION_MS ?? 2500);

const [url, ns, log, resource, id] = process.argv[2].split('|');
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
/** This machine's monotonic clock in ns, the Rust workers' (CLOCK_MONOTONIC). */
const monotonic = () => process.hrtime.bigint();

/** The fenced resource (as the Rust workers'): a file per key with the highest fence accepted. */
function fencedWrite(key, fence) {
  const guard = join(resource, `${key}.lock`);
  for (;;) {
    try {
      closeSync(openSync(guard, 'wx'));
      break;
    } catch (e) {
      if (e.code !== 'EEXIST') throw e;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1);
    }
  }
  try {
    let seen = 0;
    try {
      seen = Number(readFileSync(join(resource, key), 'utf8').trim() || 0);
    } catch {
      // no write yet
    }
    const accepted = fence > seen;
    if (accepted) writeFileSync(join(resource, key), String(fence));
    return accepted;
  } finally {
    rmSync(guard);
  }
}

async function contend(locks, owner, until) {
  const grants = [];
  let n = 0;
  while (performance.now() < until) {
    n += 1;
    const r = Math.floor(Math.random() * 2 ** 32);
    const key = r % 2 === 0 ? 'hot' : `k${(r >>> 8) % KEYS}`;
    const lease = await locks.acquire(key, { owner, ttl: TTL_MS, timeout: 8000 });
    const gotAt = monotonic();
    const start = lease.deadline - TTL_MS;
    const work = n % 6 === 0 ? TTL_MS + 40 : r % Math.floor(TTL_MS / 3);
    await sleep(work);
    const liveAtWrite = lease.held;
    const wroteAt = monotonic();
    const accepted = fencedWrite(key, lease.fence);
    const releaseSentAt = monotonic();
    let released;
    try {
      released = await lease.release();
    } catch (e) {
      if (!(e instanceof StoreError)) throw e;
      released = false;
    }
    const end = lease.releasedAt ?? lease.deadline;
    grants.push([key, owner, lease.fence, start, end, accepted, liveAtWrite, released, true, gotAt, wroteAt, releaseSentAt].join(' '));
  }
  return grants;
}

const locks = await Locks.open(url, ns);
const until = performance.now() + runMs;
const all = await Promise.all(Array.from({ length: THREADS }, (_, t) => contend(locks, `p${id}t${t}`, until)));
await locks.close();
writeFileSync(log, all.flat().map((line) => `${line}\n`).join(''));
