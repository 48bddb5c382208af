// The JS vector runner itself: it must notice a wrong answer, a wrong event and a stats mismatch
// (a runner that cannot fail proves nothing).
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { parseExact, runScenario } from './lib/vectors.js';
import { NpmDriver } from './lib/driver-npm.js';

const scenario = (steps) => parseExact(JSON.stringify({ name: 't', steps }));
const acquire = { op: 'try-acquire', now: 0, key: 'k', owner: 'a', ttl: 100 };

it('passes a right scenario', () => {
  const s = scenario([{ ...acquire, ok: { acquired: { fence: 1, deadline: 100 } } }]);
  assert.equal(runScenario(new NpmDriver(), s), null);
});

it('reports a wrong answer with its step', () => {
  const s = scenario([{ ...acquire, ok: { acquired: { fence: 1, deadline: 101 } } }]);
  assert.match(runScenario(new NpmDriver(), s), /^step 1 \(try-acquire\): expected .*101.*got .*100/);
});

it('reports a missing event', () => {
  const s = scenario([
    { ...acquire, ok: { acquired: { fence: 1, deadline: 100 } } },
    { op: 'handle-timeout', now: 100 },
  ]);
  assert.match(runScenario(new NpmDriver(), s), /^step 2 \(handle-timeout\): expected events \[\], got .*expired/);
});

it('reports a stats mismatch', () => {
  const s = scenario([{ ...acquire, ok: { acquired: { fence: 1, deadline: 100 } } }, { op: 'stats', now: 0, expect: { acquired: 2 } }]);
  assert.match(runScenario(new NpmDriver(), s), /stats\.acquired = 2, got 1/);
});

it('reads integers past 2^53 exactly', () => {
  assert.equal(parseExact('{"a": [18446744073709551615, "x: 1, y"]}').a[0], 18446744073709551615n);
  assert.equal(parseExact('{"a": [18446744073709551615, "x: 1, y"]}').a[1], 'x: 1, y');
});
