// A Node waiter for lock-store's mixed-queue test (lockstore/tests/processes.rs): waits for a
// key through the npm package's store client, holds it, releases it, and says so on stdout.
// Usage: node wait-worker.mjs URL NAMESPACE KEY OWNER TTL_MS WAIT_MS HOLD_MS

import { Locks } from '../../../lock-wasm/js/src/node.js';

const [url, ns, key, owner, ttl, wait, hold] = process.argv.slice(2);
const locks = await Locks.open(url, ns);
const lease = await locks.acquire(key, { owner, ttl: Number(ttl), timeout: Number(wait), keepAlive: true });
console.log(`granted ${lease.fence}`);
await new Promise((resolve) => setTimeout(resolve, Number(hold)));
console.log(`released ${await lease.release()}`);
await locks.close();
