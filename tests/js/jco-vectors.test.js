// The shared conformance vectors against the WIT component (the same .wasm wasmtime runs),
// transpiled by jco and run in Node. Every scenario runs, the lock kinds' and u64 values
// included (BigInt).
import { before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { loadAllVectorFiles, loadKindsVectorFiles, runScenario } from './lib/vectors.js';
import { JcoDriver, loadComponent } from './lib/driver-jco.js';

let module;
before(async () => {
  module = await loadComponent();
});

for (const { name, file } of [...loadAllVectorFiles(), ...loadKindsVectorFiles()]) {
  describe(`component via jco: ${name}`, () => {
    for (const scenario of file.scenarios) {
      it(scenario.name, () => {
        const failure = runScenario(new JcoDriver(module), scenario);
        assert.equal(failure, null, `${name} / ${scenario.name} / ${failure}`);
      });
    }
  });
}
