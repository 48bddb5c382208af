// What every store driver shares: the optional peer packages it needs, and the bound on each
// call (a call with no answer in time drops its connection, as the Rust clients do: it may be
// out of step, or the path silent).

import { StoreError } from '../errors.js';

/** The package each URL scheme needs (an optional peer dependency of this package). */
export const PEERS = {
  redis: 'ioredis',
  rediss: 'ioredis',
  postgres: 'pg',
  postgresql: 'pg',
};

/** Imports the optional peer `name`, or a StoreError naming the package to install. */
export async function requirePeer(name, url) {
  try {
    return await import(name);
  } catch (error) {
    const e = /** @type {{code?: string}} */ (error);
    if (e?.code === 'ERR_MODULE_NOT_FOUND' || e?.code === 'MODULE_NOT_FOUND') {
      const scheme = String(url).split(':')[0];
      throw new StoreError('not-compiled', `the ${scheme}:// store needs the package ${name}: npm install ${name}`, { cause: e });
    }
    throw e;
  }
}

/**
 * `call()` within `bound` ms; past it a StoreError `lost` (no answer), after dropping the
 * driver's connection.
 */
export function bounded(driver, bound, call) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => {
      driver.drop?.();
      reject(new StoreError('lost', `lost the connection to ${driver.describe}: no answer within ${Math.round(bound)} ms`));
    }, Math.max(0, bound));
  });
  return Promise.race([call(), timeout]).finally(() => clearTimeout(timer));
}
