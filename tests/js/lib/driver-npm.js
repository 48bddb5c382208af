// Vector driver for the npm package's low-level LockTable (plain JS numbers for milliseconds).
// Inputs past Number.MAX_SAFE_INTEGER cannot be JS numbers: the driver passes them anyway (as the
// nearest number) and reports Unrepresentable after checking the package refused them with a
// RangeError at its boundary, so the vector runner can account for those steps.

import { LockError, LockTable } from '../../../lock-wasm/js/src/node.js';
import { Unrepresentable, camel, hasOptions, snake, stepOptions, unhex } from './vectors.js';

const NUMERIC_INPUTS = ['now', 'ttl', 'wait_deadline', 'fence', 'floor'];

function num(value) {
  return typeof value === 'bigint' ? Number(value) : value;
}

function errorTerm(error) {
  if (!(error instanceof LockError)) throw error;
  return Object.keys(error.details).length === 0 ? error.code : { [error.code]: snake(error.details) };
}

function outcomeTerm(outcome) {
  const { type, ...fields } = outcome;
  return { [type]: fields };
}

function eventTerm(event) {
  const { type, ...fields } = event;
  return { [type]: fields };
}

/** The package's key object in the vectors' terms (unset `minUntil`, `ended` and `grantedAt` left out). */
export function keyTerm(info) {
  const holders = info.holders.map(({ minUntil, ended, grantedAt, ...h }) => ({
    ...h,
    ...(minUntil === null ? {} : { min_until: minUntil }),
    ...(ended === null ? {} : { ended }),
    ...(grantedAt === null ? {} : { granted_at: grantedAt }),
  }));
  return { holders, waiters: info.waiters.map(snake), permits: info.permits };
}

/** A step's options as the package takes them (`undefined` when the step has none). */
function npmOptions(step) {
  if (!hasOptions(step)) return undefined;
  const o = stepOptions(step);
  return { mode: o.mode, permits: num(o.permits), minHold: num(o.min_hold), lockDelay: num(o.lock_delay), metadata: o.metadata, waitAlive: num(o.wait_alive) };
}

function releaseTerm(outcome) {
  return outcome.type === 'held-until' ? { 'held-until': { until: outcome.until } } : 'released';
}

export class NpmDriver {
  table = null;

  start(limits) {
    this.table?.free();
    const overrides = camel(Object.fromEntries(Object.entries(limits).map(([k, v]) => [k, num(v)])));
    this.table = new LockTable(overrides);
  }

  run(step) {
    const unsafe = NUMERIC_INPUTS.find((f) => typeof step[f] === 'bigint' && step[f] > BigInt(Number.MAX_SAFE_INTEGER));
    const t = this.table;
    const [key, owner] = [step.key, step.owner];
    const v = (f) => num(step[f]);
    const call = () => {
      switch (step.op) {
        case 'try-acquire':
          return { ok: outcomeTerm(t.tryAcquire(key, owner, v('ttl'), v('now'), npmOptions(step))) };
        case 'acquire':
          return { ok: outcomeTerm(t.acquire(key, owner, v('ttl'), v('wait_deadline'), v('now'), npmOptions(step))) };
        case 'steal':
          return { ok: outcomeTerm(t.steal(key, owner, v('ttl'), v('now'), npmOptions(step))) };
        case 'release':
          return { ok: releaseTerm(t.release(key, owner, v('fence'), v('now'))) };
        case 'extend':
          return { ok: { extended: t.extend(key, owner, v('fence'), v('ttl'), v('now')) } };
        case 'cancel-wait':
          t.cancelWait(key, owner, v('now'));
          return { ok: 'cancelled' };
        case 'renew-wait':
          return { ok: outcomeTerm(t.renewWait(key, owner, v('wait_deadline'), v('now'))) };
        case 'handle-timeout':
          t.handleTimeout(v('now'));
          return {};
        case 'inspect': {
          const info = t.inspect(key, v('now'));
          return { ok: info === null ? null : keyTerm(info) };
        }
        case 'query': {
          const page = t.query(v('now'), { prefix: step.prefix ?? '', after: step.after ?? '', limit: v('limit') });
          return { ok: { keys: page.keys.map(({ key: k, info }) => ({ key: k, ...keyTerm(info) })), next: page.next } };
        }
        case 'handle-timeout-bounded':
          return { ok: t.handleTimeoutBounded(v('now'), v('max_changes')) };
        case 'raise-fence-floor':
          t.raiseFenceFloor(v('floor'));
          return {};
        case 'cancel-all-waits':
          return { ok: t.cancelAllWaits(v('now')) };
        case 'stats':
          return { stats: snake(t.stats(v('now'))) };
        case 'next-wakeup':
          return { ok: t.nextWakeup() };
        case 'snapshot':
          return { bytes: t.snapshot(v('now')) };
        case 'restore':
          t.restore(step.hex === undefined ? step.bytes : unhex(step.hex));
          return { ok: 'restored' };
        default:
          throw new Error(`unknown op ${step.op}`);
      }
    };
    if (unsafe !== undefined) {
      const before = t.stats(0);
      try {
        call();
      } catch (error) {
        if (error instanceof RangeError && t.stats(0).rejected === before.rejected) {
          throw new Unrepresentable(`${unsafe} = ${step[unsafe]} is past Number.MAX_SAFE_INTEGER; the package refused it with RangeError: ${error.message}`);
        }
        throw error;
      }
      throw new Error(`${unsafe} = ${step[unsafe]} is past Number.MAX_SAFE_INTEGER but the package accepted it`);
    }
    try {
      return call();
    } catch (error) {
      return { err: errorTerm(error) };
    }
  }

  drainEvents() {
    return this.table.drainEvents().map(eventTerm);
  }
}
