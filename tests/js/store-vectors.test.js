// Every vector scenario through every store from Node (the npm package's store clients), fresh
// and from outdated records, as lock-store's Rust tests run them (tests/vectors_*.rs): the same
// files, the same table view, and the same list of table-wide scenarios a store cannot have,
// read from the Rust harness so that the two lists cannot drift.

import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { loadAllVectorFiles, loadKindsVectorFiles, runScenarioAsync } from './lib/vectors.js';
import { StoreTableDriver } from './lib/driver-store.js';
import { STORES, uniqueNamespace } from './lib/stores.js';

/** `file / scenario` of lock-store's TABLE_ONLY list (lock-store/tests/common/mod.rs). */
const TABLE_ONLY = new Set(
  [...readFileSync(new URL('../../lock-store/tests/common/mod.rs', import.meta.url), 'utf8')
    .matchAll(/\(\s*"([a-z_-]+\.json)",\s*"([^"]+)",/g)].map(([, file, scenario]) => `${file} / ${scenario}`),
);

// Scenarios that need values past 2^53 - 1: a JS number cannot carry them (npm-vectors.test.js).
const BEYOND_JS_NUMBERS = new Set([
  'clock.json / a deadline past the end of the clock is refused; a hand-off near it saturates',
  'limits.json / a ttl of u64::MAX is refused, not wrapped',
  'kinds/steal.json / a steal whose deadline does not fit is refused after time has done its part',
]);

const files = [...loadAllVectorFiles(), ...loadKindsVectorFiles()];

it('reads the table-only list of the Rust harness', () => {
  assert.ok(TABLE_ONLY.size >= 10, `only ${TABLE_ONLY.size} table-only scenarios found`);
});

for (const store of STORES) {
  for (const stale of [false, true]) {
    describe(`${store.name}${stale ? ', from outdated records' : ''}`, () => {
      const driver = new StoreTableDriver(async () => {
        const opened = await store.open(uniqueNamespace(stale ? 'jsvec_stale' : 'jsvec'));
        opened.setSeedFromTime?.(false); // tokens 1, 2, 3... as the vectors expect
        return opened;
      }, { stale });
      after(() => driver.close());
      for (const { name, file } of files) {
        it(name, async () => {
          const failures = [];
          for (const scenario of file.scenarios) {
            const label = `${name} / ${scenario.name}`;
            if (BEYOND_JS_NUMBERS.has(label)) continue;
            const failure = await runScenarioAsync(driver, scenario);
            // The Rust list names a kinds file without its directory.
            if ((failure !== null) !== TABLE_ONLY.has(label.replace(/^kinds\//, ''))) {
              failures.push(failure === null ? `${label}: listed as table-only but passed` : `${label}: ${failure}`);
            }
          }
          assert.deepEqual(failures, []);
        });
      }
    });
  }
}
