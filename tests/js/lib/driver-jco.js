// Vector driver for the WIT component itself (target/lock.component.wasm, the artifact wasmtime
// runs), transpiled to JS by jco: one component, every runtime. u64 values are BigInt here, so
// every vector runs, including those past 2^53.

import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync, existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { camel, hasOptions, snake, stepOptions, unhex } from './vectors.js';

const root = new URL('../../../', import.meta.url);
const component = fileURLToPath(new URL('target/lock.component.wasm', root));
const outDir = fileURLToPath(new URL('target/jco-lock/', root));

/** Transpiles the component (fresh, every run) and imports it. */
export async function loadComponent() {
  if (!existsSync(component)) {
    throw new Error(`${component} is missing: build the host first (cargo build -p host-wasmtime builds the component)`);
  }
  mkdirSync(outDir, { recursive: true });
  execFileSync(fileURLToPath(new URL('node_modules/.bin/jco', root)), ['transpile', component, '-o', outDir, '--name', 'lock', '--quiet'], {
    stdio: 'inherit',
  });
  writeFileSync(`${outDir}/package.json`, '{"type":"module"}\n');
  return import(`${outDir}/lock.js?${Date.now()}`);
}

// The field name of each single-value error payload in the vectors (the WIT carries a bare value).
const PAYLOAD_FIELD = {
  'table-full': 'max_keys',
  'queue-full': 'max_waiters_per_key',
  'too-many-waiters': 'max_waiters',
  held: 'deadline',
  expired: 'deadline',
  'invalid-limits': 'limit',
  'snapshot-corrupt': 'reason',
  'snapshot-exceeds-limits': 'limit',
  'permits-mismatch': 'permits',
  stolen: 'at',
  'query-limit': 'max',
};

function errorTerm(error) {
  const payload = error?.payload;
  if (payload === undefined || typeof payload.tag !== 'string') throw error;
  if (payload.val === undefined) return payload.tag;
  const field = PAYLOAD_FIELD[payload.tag];
  return { [payload.tag]: field ? { [field]: payload.val } : snake(payload.val) };
}

function outcomeTerm(outcome) {
  return { [outcome.tag]: typeof outcome.val === 'object' ? outcome.val : { position: outcome.val } };
}

function eventTerm(event) {
  const { tag, val } = event.kind;
  const fields = tag === 'wait-timed-out' ? { owner: val } : val;
  return { [tag]: { key: event.key, ...fields, at: event.at } };
}

/** A WIT key-info in the vectors' terms (`minUntil`, `ended` and `grantedAt` absent when unset). */
function keyTerm(info) {
  const holders = info.holders.map(({ minUntil, ended, grantedAt, ...h }) => ({
    ...h,
    ...(minUntil === undefined ? {} : { min_until: minUntil }),
    ...(ended === undefined ? {} : { ended }),
    ...(grantedAt === undefined ? {} : { granted_at: grantedAt }),
  }));
  return { holders, waiters: info.waiters.map(snake), permits: info.permits };
}

/** A step's options as the WIT's acquire-options record. */
function witOptions(step) {
  const o = stepOptions(step);
  return { mode: o.mode, permits: Number(o.permits), minHold: o.min_hold, lockDelay: o.lock_delay, metadata: o.metadata, waitAlive: o.wait_alive };
}

export class JcoDriver {
  constructor(module) {
    this.table = null;
    this.api = module.table;
  }

  start(limits) {
    const defaults = this.api.defaultLimits();
    const overrides = camel(limits);
    const merged = Object.fromEntries(
      Object.entries(defaults).map(([k, v]) => [k, overrides[k] === undefined ? v : typeof v === 'bigint' ? BigInt(overrides[k]) : Number(overrides[k])]),
    );
    this.table?.[Symbol.dispose]();
    this.table = this.api.LockTable.create(merged, 0n);
  }

  run(step) {
    const t = this.table;
    const { key, owner } = step;
    try {
      switch (step.op) {
        case 'try-acquire':
          if (hasOptions(step)) return { ok: outcomeTerm(t.acquireWith(key, owner, step.ttl, step.now, witOptions(step), step.now)) };
          return { ok: outcomeTerm(t.tryAcquire(key, owner, step.ttl, step.now)) };
        case 'acquire':
          if (hasOptions(step)) return { ok: outcomeTerm(t.acquireWith(key, owner, step.ttl, step.wait_deadline, witOptions(step), step.now)) };
          return { ok: outcomeTerm(t.acquire(key, owner, step.ttl, step.wait_deadline, step.now)) };
        case 'steal':
          return { ok: outcomeTerm(t.steal(key, owner, step.ttl, witOptions(step), step.now)) };
        case 'release': {
          const outcome = t.release(key, owner, step.fence, step.now);
          return { ok: outcome.tag === 'held-until' ? { 'held-until': { until: outcome.val } } : 'released' };
        }
        case 'extend':
          return { ok: { extended: t.extend(key, owner, step.fence, step.ttl, step.now) } };
        case 'cancel-wait':
          t.cancelWait(key, owner, step.now);
          return { ok: 'cancelled' };
        case 'renew-wait':
          return { ok: outcomeTerm(t.renewWait(key, owner, step.wait_deadline, step.now)) };
        case 'handle-timeout':
          t.handleTimeout(step.now);
          return {};
        case 'inspect': {
          const info = t.inspect(key, step.now);
          return { ok: info === undefined ? null : keyTerm(info) };
        }
        case 'query': {
          const page = t.query(step.prefix ?? '', step.after ?? '', Number(step.limit), step.now);
          return { ok: { keys: page.keys.map(({ key: k, info }) => ({ key: k, ...keyTerm(info) })), next: page.next ?? null } };
        }
        case 'handle-timeout-bounded':
          return { ok: t.handleTimeoutBounded(step.now, Number(step.max_changes)) };
        case 'raise-fence-floor':
          t.raiseFenceFloor(step.floor);
          return {};
        case 'cancel-all-waits':
          return { ok: t.cancelAllWaits(step.now) };
        case 'stats':
          return { stats: snake(t.stats(step.now)) };
        case 'next-wakeup':
          return { ok: t.nextWakeup() ?? null };
        case 'snapshot':
          return { bytes: t.snapshot(step.now) };
        case 'restore':
          t.restore(step.hex === undefined ? step.bytes : unhex(step.hex));
          return { ok: 'restored' };
        default:
          throw new Error(`unknown op ${step.op}`);
      }
    } catch (error) {
      return { err: errorTerm(error) };
    }
  }

  drainEvents() {
    return this.table.pollEvents().map(eventTerm);
  }
}
