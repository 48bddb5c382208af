// The campaign vectors (tests/vectors/election/*.json; format in tests/vectors/README.md)
// against the npm package's engine: the RawCampaign that `Election` drives, so that the recipe
// JS runs is the one the native core runs (lock-conformance/tests/campaign.rs), translated only.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import '../../lock-wasm/js/src/node.js'; // loads the engine
import { RawCampaign } from '../../lock-wasm/js/engine/lock_wasm.js';

const DIR = new URL('../vectors/election/', import.meta.url);
const NAMES = ['nothing', 'campaign', 'start', 'extend', 'stop', 'abandon', 'release', 'done'];
const OPS = {
  'granted': new Set(['now', 'fence', 'local_end']),
  'refused': new Set(['now', 'refusal', 'ends']),
  'extended': new Set(['now', 'local_end']),
  'extend-failed': new Set(['now']),
  'lost': new Set(['now']),
  'body-returned': new Set(['now']),
  'released': new Set(['now']),
  'resign': new Set(['now']),
  'shut-down': new Set(['now']),
  'poll': new Set(['now', 'actions', 'timeout', 'terms']),
};

/** An action's name in the vectors (`start 3`, `stop 3 unrenewed`, `done`...). */
function actionName(raw, code) {
  const name = NAMES[code];
  if (name === 'campaign' || name === 'done') return name;
  if (name === 'stop') return `stop ${raw.fence()} ${raw.reason()}`;
  return `${name} ${raw.fence()}`;
}

function campaignOf(options) {
  const given = (v) => (v === undefined ? -1 : v);
  return new RawCampaign(options.ttl, given(options.margin), given(options.grace), given(options.retry), options.once === true);
}

/** Runs one step; a failure's text, or null. */
function runStep(raw, step) {
  const { op, now, ...rest } = step;
  const fields = OPS[op];
  assert.ok(fields, `unknown op ${op}`);
  for (const field of Object.keys(step)) assert.ok(field === 'op' || fields.has(field), `${op}: unknown field ${field}`);
  switch (op) {
    case 'poll': {
      assert.ok('timeout' in step, 'poll: timeout is required');
      const got = [];
      for (let code = raw.poll(now); code !== 0; code = raw.poll(now)) got.push(actionName(raw, code));
      const timeout = raw.timeout() < 0 ? null : raw.timeout();
      if (JSON.stringify(got) !== JSON.stringify(rest.actions)) return `expected actions ${JSON.stringify(rest.actions)}, got ${JSON.stringify(got)}`;
      if (timeout !== rest.timeout) return `expected timeout ${rest.timeout}, got ${timeout}`;
      if (rest.terms !== undefined && raw.terms() !== rest.terms) return `expected ${rest.terms} terms, got ${raw.terms()}`;
      return null;
    }
    case 'granted': raw.granted(rest.fence, rest.local_end, now); return null;
    case 'refused': {
      const ended = !raw.refused(rest.refusal, now);
      return ended === rest.ends ? null : `expected ends ${rest.ends}, got ${ended}`;
    }
    case 'extended': raw.extended(rest.local_end, now); return null;
    case 'extend-failed': raw.extend_failed(now); return null;
    case 'lost': raw.lost(now); return null;
    case 'body-returned': raw.body_returned(now); return null;
    case 'released': raw.released(now); return null;
    case 'resign': raw.resign(now); return null;
    case 'shut-down': raw.shut_down(now); return null;
    default: return `unknown op ${op}`;
  }
}

const files = readdirSync(DIR).filter((n) => n.endsWith('.json')).sort();

describe('campaign vectors on the npm engine', () => {
  it('finds the files', () => assert.ok(files.length > 0));
  for (const name of files) {
    const file = JSON.parse(readFileSync(new URL(name, DIR), 'utf8'));
    for (const scenario of file.scenarios) {
      it(`${name} / ${scenario.name}`, () => {
        const raw = campaignOf(scenario.options);
        try {
          scenario.steps.forEach((step, i) => {
            const failure = runStep(raw, step);
            assert.equal(failure, null, `${name} / ${scenario.name} / step ${i + 1}: ${failure}`);
          });
        } finally {
          raw.free();
        }
      });
    }
  }
  it('an unknown refusal name ends nothing in the core: the face ends its run with its error', () => {
    const raw = campaignOf({ ttl: 1000 });
    try {
      assert.equal(raw.poll(0), NAMES.indexOf('campaign'));
      assert.equal(raw.refused('closed', 1), false);
      assert.equal(raw.poll(1), 0);
      assert.equal(raw.refused('unreachable', 1), true);
      assert.equal(raw.timeout(), 101);
    } finally {
      raw.free();
    }
  });
});
