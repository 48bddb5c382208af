// A Node client of the shared stores, driven line by line by a Rust test
// (lock-store/tests/common/node.rs), so that the Rust suites' throwaway servers (TLS, restarts)
// test the npm package's store client too. One request per line, words separated by tabs; one
// answer per line: `ok<TAB>VALUE` or `error<TAB>CODE<TAB>MESSAGE`.
//
//   lock-once URL NS        opens, takes and releases key "job", closes: `ok<TAB>FENCE`
//   open URL NS             opens (closing the Locks opened before)
//   acquire KEY OWNER TTL   tryAcquire: `ok<TAB>FENCE`, or `error<TAB>held`
//   inspect KEY             `ok<TAB>OWNER FENCE`, or `ok<TAB>free`
//   release KEY             releases the lease this client took on KEY
//   close                   closes the Locks

import { createInterface } from 'node:readline';
import { Locks } from '../../../lock-wasm/js/src/node.js';

/** @type {any} */
let locks = null;
/** @type {Map<string, any>} */
const leases = new Map();

async function close() {
  const open = locks;
  locks = null;
  leases.clear();
  if (open !== null) await open.close();
}

const commands = {
  async 'lock-once'(url, ns) {
    const once = await Locks.open(url, ns);
    try {
      const lease = await once.tryAcquire('job', { owner: 'node', ttl: 5000 });
      if (lease === null) throw Object.assign(new Error('held by another owner'), { code: 'held' });
      await lease.release();
      return lease.fence;
    } finally {
      await once.close();
    }
  },
  async open(url, ns) {
    await close();
    locks = await Locks.open(url, ns);
    return '';
  },
  async acquire(key, owner, ttl) {
    const lease = await locks.tryAcquire(key, { owner, ttl: Number(ttl) });
    if (lease === null) throw Object.assign(new Error(`${key} is held`), { code: 'held' });
    leases.set(key, lease);
    return lease.fence;
  },
  async inspect(key) {
    const info = await locks.inspect(key);
    return info === null ? 'free' : `${info.owner} ${info.fence}`;
  },
  async release(key) {
    const lease = leases.get(key);
    if (lease === undefined) throw Object.assign(new Error(`no lease on ${key}`), { code: 'usage' });
    await lease.release();
    leases.delete(key);
    return '';
  },
  close,
};

const oneLine = (s) => String(s).replaceAll('\n', ' ').replaceAll('\t', ' ');

for await (const line of createInterface({ input: process.stdin })) {
  const [name, ...args] = line.split('\t');
  let answer;
  try {
    if (!Object.hasOwn(commands, name)) throw Object.assign(new Error(`unknown request ${name}`), { code: 'usage' });
    answer = `ok\t${oneLine((await commands[name](...args)) ?? '')}`;
  } catch (error) {
    const e = /** @type {{ code?: unknown, message?: unknown }} */ (error);
    answer = `error\t${oneLine(e?.code ?? 'thrown')}\t${oneLine(e?.message ?? error)}`;
  }
  process.stdout.write(`${answer}\n`);
}
await close();
