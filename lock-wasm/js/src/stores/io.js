// What every store driver shares: the optional peer packages it needs, and the bound on each
// call (a call with no answer in time drops its connection, as the Rust clients do: it may be
// out of step, or the path silent).

import { StoreError } from '../errors.js';

/**
 * Imports `specifier` (a package of an optional peer, or a module of one: `mysql2/promise`), or
 * a StoreError naming the package to install.
 */
export async function requirePeer(specifier, url) {
  const name = specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : specifier.split('/')[0];
  try {
    return await import(specifier);
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

/** The words of a store error, as lock-protocol's `StoreError` says them (its `Display`). */
const WORDS = {
  connect: (store, reason) => `cannot connect to ${store}: ${reason}`,
  lost: (store, reason) => `lost the connection to ${store}: ${reason}`,
  unreplicated: (store, reason) => `${store}: the write was made on the primary but may not survive a failover: ${reason}`,
  'no-namespace': (store) => `${store} does not exist (nothing was ever locked in it; the first lock creates it)`,
  'fences-exhausted': (store) => `${store}: the fencing-token counter reached 2^53`,
};

/** The reason of each StoreError a driver made: what the engine is handed (it names the store). */
const REASONS = new WeakMap();

/**
 * A StoreError `code` of the store `store` (its description), for `reason`, worded as the Rust
 * `StoreError` is; `cause` the client library's error.
 * @param {import('../../index.d.ts').StoreErrorCode} code
 * @param {string} store
 * @param {string} [reason]
 * @param {unknown} [cause]
 */
export function storeError(code, store, reason = '', cause = undefined) {
  const words = Object.hasOwn(WORDS, code) ? WORDS[code] : (s, r) => `${s}: ${r}`;
  const error = new StoreError(code, words(store, reason), cause === undefined ? {} : { cause });
  REASONS.set(error, reason);
  return error;
}

/** A StoreError `corrupt` for the record of `key` (as `StoreError::Corrupt`'s words). */
export function corruptError(key, reason) {
  const error = new StoreError('corrupt', `the record of key ${JSON.stringify(key)} is corrupt: ${reason}`);
  REASONS.set(error, reason);
  return error;
}

/** What `error` (a StoreError) says without the store's name: the reason a driver gave it. */
export function reasonOf(error) {
  return REASONS.get(error) ?? error.message;
}

/** `url` without its password, for messages. */
export function withoutPassword(url) {
  return String(url).replace(/\/\/([^:@/]*):[^@/]*@/, '//$1:***@');
}

/** The largest fencing token (2^53 - 1: exact in a JavaScript number, as in the Rust clients). */
export const MAX_FENCE = 2 ** 53 - 1;

/**
 * Fencing tokens from their text in the SQL stores (`1,2,3`; empty: none), or `null` if it is
 * not that (as `fences_from_text` in lock-store's store.rs).
 */
export function fencesFromText(text) {
  if (typeof text !== 'string') return null;
  if (text === '') return [];
  const fences = text.split(',').map((part) => (/^[0-9]+$/.test(part) ? Number(part) : NaN));
  return fences.every((f) => Number.isSafeInteger(f) && f > 0 && f <= MAX_FENCE) ? fences : null;
}

/** Awaits `ending` (a connection's graceful close) for at most a second, then `stop()`s it. */
export async function endWithin(ending, stop) {
  let timer;
  const late = new Promise((resolve) => (timer = setTimeout(resolve, 1000)));
  await Promise.race([Promise.resolve(ending).catch(() => {}), late]).finally(() => clearTimeout(timer));
  stop();
}
