// Node entry point: loads the engine synchronously from the package's own files.
import { readFileSync } from 'node:fs';
import { initSync } from '../engine/lock_wasm.js';
import { setEngine } from './engine.js';

setEngine(initSync({ module: readFileSync(new URL('../engine/lock_wasm_bg.wasm', import.meta.url)) }));

export * from './api.js';
