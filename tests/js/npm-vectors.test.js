// The shared conformance vectors against the npm package (the same files as native and wasmtime).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { loadAllVectorFiles, loadKindsVectorFiles, runScenario } from './lib/vectors.js';
import { NpmDriver } from './lib/driver-npm.js';

// Scenarios that need instants or TTLs past 2^53 - 1 ms: a JS number cannot carry them, so the
// package refuses them with a RangeError at its boundary (checked by the driver) and the rest of
// the scenario cannot be expressed in JS. Deliberate; listed here so nothing else can be skipped.
const BEYOND_JS_NUMBERS = new Set([
  'clock.json / a deadline past the end of the clock is refused; a hand-off near it saturates',
  'limits.json / a ttl of u64::MAX is refused, not wrapped',
  'kinds/steal.json / a steal whose deadline does not fit is refused after time has done its part',
]);

for (const { name, file } of [...loadAllVectorFiles(), ...loadKindsVectorFiles()]) {
  describe(`npm package: ${name}`, () => {
    for (const scenario of file.scenarios) {
      const label = `${name} / ${scenario.name}`;
      it(scenario.name, () => {
        let refused = null;
        const failure = runScenario(new NpmDriver(), scenario, {
          onUnrepresentable: (_, error) => {
            refused = error.message;
            return BEYOND_JS_NUMBERS.has(label);
          },
        });
        assert.equal(failure, null, `${label} / ${failure}`);
        assert.equal(refused !== null, BEYOND_JS_NUMBERS.has(label), `${label}: listed as beyond JS numbers: ${BEYOND_JS_NUMBERS.has(label)}, refused: ${refused}`);
      });
    }
  });
}
