// The JS runner of the shared conformance vectors (tests/vectors/*.json; format in their README).
// A driver adapts one runtime (the npm package, the jco-transpiled component...) to three calls:
// start(limits), run(step) -> answer in vector terms, drainEvents() -> events in vector terms.
// Numbers are read as BigInt so u64 values survive exactly; answers are compared as BigInt too.

import { readFileSync, readdirSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import { join } from 'node:path';

export const VECTOR_DIR = new URL('../../vectors/', import.meta.url);
/** The playground's guided scenarios: vector files too, run by every runner. */
export const GUIDE_DIR = new URL('../../../web-demo/guides/', import.meta.url);

/** JSON.parse, with every integer literal as a BigInt (JSON numbers would round past 2^53). */
export function parseExact(text) {
  let out = '';
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === '"') {
      // copy a whole string literal, escapes included
      let j = i + 1;
      while (text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      out += text.slice(i, j + 1);
      i = j + 1;
    } else if (c === '-' || (c >= '0' && c <= '9')) {
      let j = i + 1;
      while (j < text.length && /[0-9.eE+-]/.test(text[j])) j += 1;
      const literal = text.slice(i, j);
      if (!/^-?\d+$/.test(literal)) throw new Error(`vector files hold integers only, found ${literal}`);
      out += `{"$int":"${literal}"}`;
      i = j;
    } else {
      out += c;
      i += 1;
    }
  }
  return JSON.parse(out, (_, value) =>
    value !== null && typeof value === 'object' && typeof value.$int === 'string' ? BigInt(value.$int) : value,
  );
}

/** The vector files, sorted, as `{name, file}`. */
export function loadVectorFiles(dir = VECTOR_DIR) {
  return readdirSync(dir)
    .filter((name) => name.endsWith('.json'))
    .sort()
    .map((name) => ({ name, file: parseExact(readFileSync(join(dir.pathname ?? dir, name), 'utf8')) }));
}

/** The shared vectors and the guided scenarios, as `{name, file}`. */
export function loadAllVectorFiles() {
  return [...loadVectorFiles(VECTOR_DIR), ...loadVectorFiles(GUIDE_DIR).map(({ name, file }) => ({ name: `guides/${name}`, file }))];
}

/** The lock kinds' vectors (tests/vectors/kinds/), as `{name, file}`. */
export function loadKindsVectorFiles() {
  return loadVectorFiles(new URL('kinds/', VECTOR_DIR)).map(({ name, file }) => ({ name: `kinds/${name}`, file }));
}

/** The request options of a step (each absent field is the default), as the vectors name them. */
export function stepOptions(step) {
  return {
    mode: step.mode ?? 'exclusive',
    permits: step.permits ?? 0n,
    min_hold: step.min_hold ?? 0n,
    lock_delay: step.lock_delay ?? 0n,
    metadata: step.metadata ?? '',
    wait_alive: step.wait_alive ?? 0n,
  };
}

/** Whether a step asks for anything but a plain exclusive lease (then it is `acquire-with`). */
export function hasOptions(step) {
  return ['mode', 'permits', 'min_hold', 'lock_delay', 'metadata', 'wait_alive'].some((field) => step[field] !== undefined);
}

/**
 * A key view in one canonical form, every field present: `{holders, waiters, permits}` (the short
 * form `{owner, fence, deadline, waiters}` becomes one plain holder). Expectations and answers
 * are both put in this form before they are compared, so a runtime may answer either form. A
 * holder's `granted_at` is kept only where the holder at its place in `expected` names one:
 * vectors check grant instants only where they name them.
 */
export function canonicalKey(view, expected = view) {
  if (view === null || view === undefined) return view;
  const holders = view.holders ?? [{ owner: view.owner, fence: view.fence, deadline: view.deadline }];
  const named = expected?.holders ?? [];
  return {
    holders: holders.map((h, i) => ({
      owner: h.owner,
      fence: exact(h.fence),
      deadline: exact(h.deadline),
      mode: h.mode ?? 'exclusive',
      metadata: h.metadata ?? '',
      min_until: h.min_until === undefined ? null : exact(h.min_until),
      ended: h.ended ?? null,
      granted_at: named[i]?.granted_at === undefined ? null : exact(h.granted_at ?? null),
    })),
    waiters: (view.waiters ?? []).map((w) => ({
      owner: w.owner,
      ttl: exact(w.ttl),
      wait_deadline: exact(w.wait_deadline),
      wait_end: exact(w.wait_end ?? w.wait_deadline),
      mode: w.mode ?? 'exclusive',
      metadata: w.metadata ?? '',
    })),
    permits: exact(view.permits ?? 0n),
  };
}

/** A query page in canonical form (see `canonicalKey`). */
function canonicalPage(page, expected = page) {
  return {
    keys: page.keys.map(({ key, ...view }, i) => ({ key, ...canonicalKey(view, expected.keys?.[i]) })),
    next: page.next ?? null,
  };
}

/** An event in canonical form: mode and metadata always present where the event has them. */
export function canonicalEvent(event) {
  const [[name, fields]] = Object.entries(event);
  const out = { ...fields };
  if (name === 'granted') out.mode = fields.mode ?? 'exclusive';
  if (name !== 'wait-timed-out') out.metadata = fields.metadata ?? '';
  return { [name]: exact(out) };
}

/** Every value of a JSON-ish tree with numbers as BigInt (so 5 and 5n compare equal). */
export function exact(value) {
  if (typeof value === 'number') return BigInt(value);
  if (Array.isArray(value)) return value.map(exact);
  if (value instanceof Uint8Array) return value;
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, exact(v)]));
  }
  return value;
}

const show = (v) => JSON.stringify(v, (_, x) => (typeof x === 'bigint' ? Number(x) <= Number.MAX_SAFE_INTEGER ? Number(x) : `${x}` : x));

function hex(bytes) {
  return Buffer.from(bytes).toString('hex');
}

/** What a step expects, in the shape the drivers answer. */
function expectedAnswer(step) {
  if ('ok' in step) return { ok: step.ok };
  if ('err' in step) return { err: step.err };
  return undefined;
}

/**
 * Runs one scenario against `driver`. Returns `null` when it passed, or a failure message naming the
 * step. A driver may throw `Unrepresentable` from `run` for a step its runtime cannot express (then
 * `onUnrepresentable(step, error)` decides; the scenario stops there).
 */
export function runScenario(driver, scenario, { onUnrepresentable } = {}) {
  driver.start(scenario.limits ?? {});
  const check = checker(onUnrepresentable);
  for (const [index, step] of scenario.steps.entries()) {
    let answer;
    try {
      answer = driver.run(check.input(step));
    } catch (error) {
      return check.threw(index, step, error);
    }
    const failure = check.answered(index, step, answer, driver.drainEvents());
    if (failure !== undefined) return failure;
  }
  return null;
}

/** `runScenario` for a driver whose `start`, `run` and `drainEvents` answer promises (a store's). */
export async function runScenarioAsync(driver, scenario, { onUnrepresentable } = {}) {
  await driver.start(scenario.limits ?? {});
  const check = checker(onUnrepresentable);
  for (const [index, step] of scenario.steps.entries()) {
    let answer;
    try {
      answer = await driver.run(check.input(step));
    } catch (error) {
      return check.threw(index, step, error);
    }
    const failure = check.answered(index, step, answer, await driver.drainEvents());
    if (failure !== undefined) return failure;
  }
  return null;
}

/** The step-by-step checks of one scenario, for both runners. */
function checker(onUnrepresentable) {
  let lastSnapshot = null;
  const where = (index, step) => `step ${index + 1} (${step.op})`;
  return {
    input: (step) => (step.op === 'restore' && step.hex === undefined ? { ...step, bytes: lastSnapshot } : step),
    threw(index, step, error) {
      if (error instanceof Unrepresentable && onUnrepresentable) {
        return onUnrepresentable(step, error) ? null : `${where(index, step)}: ${error.message}`;
      }
      return `${where(index, step)}: the runtime threw ${error?.stack ?? error}`;
    },
    /** `undefined` if the step passed, else the failure. */
    answered(index, step, answer, drained) {
      const problem = compare(step, answer);
      if (problem) return `${where(index, step)}: ${problem}`;
      if (step.op === 'snapshot') lastSnapshot = answer.bytes;
      const events = exact(drained).map(canonicalEvent);
      const expected = (step.events ?? []).map(canonicalEvent);
      if (!isDeepStrictEqual(events, expected)) {
        return `${where(index, step)}: expected events ${show(expected)}, got ${show(events)}`;
      }
      return undefined;
    },
  };
}

function compare(step, answer) {
  switch (step.op) {
    case 'handle-timeout':
      return null;
    case 'stats': {
      const actual = exact(answer.stats);
      for (const [field, value] of Object.entries(step.expect)) {
        if (actual[field] !== value) return `expected stats.${field} = ${show(value)}, got ${show(actual[field])}`;
      }
      return null;
    }
    case 'next-wakeup':
    case 'handle-timeout-bounded':
    case 'cancel-all-waits':
      return same({ ok: step.expect }, exact(answer));
    case 'raise-fence-floor':
      return null;
    case 'inspect':
      if ('err' in step) return same({ err: step.err }, exact(answer));
      return same({ ok: canonicalKey(step.expect) }, 'ok' in answer ? { ok: canonicalKey(exact(answer.ok), step.expect) } : exact(answer));
    case 'query':
      if ('err' in step) return same({ err: step.err }, exact(answer));
      return same({ ok: canonicalPage(step.expect) }, 'ok' in answer ? { ok: canonicalPage(exact(answer.ok), step.expect) } : exact(answer));
    case 'snapshot':
      if (step.expect !== undefined && hex(answer.bytes) !== step.expect) {
        return `expected snapshot ${step.expect}, got ${hex(answer.bytes)}`;
      }
      return null;
    default:
      return same(expectedAnswer(step), exact(answer));
  }
}

function same(expected, actual) {
  return isDeepStrictEqual(actual, expected) ? null : `expected ${show(expected)}, got ${show(actual)}`;
}

/** Thrown by a driver for a step whose values its runtime cannot carry (e.g. u64 past 2^53 as a JS number). */
export class Unrepresentable extends Error {}

/** `camelCase` field names to the vectors' `snake_case`. */
export function snake(object) {
  return Object.fromEntries(Object.entries(object).map(([k, v]) => [k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`), v]));
}

/** `snake_case` field names to `camelCase`. */
export function camel(object) {
  return Object.fromEntries(Object.entries(object).map(([k, v]) => [k.replace(/_([a-z])/g, (_, c) => c.toUpperCase()), v]));
}

/** Hex text to bytes. */
export function unhex(text) {
  return Uint8Array.from(Buffer.from(text, 'hex'));
}
