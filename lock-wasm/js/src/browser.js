// Browser (and bundler) entry point: fetches the engine next to this module once, with
// top-level await, so every export is usable as soon as the import resolves.
import init from '../engine/lock_wasm.js';
import { setEngine } from './engine.js';

setEngine(await init({ module_or_path: new URL('../engine/lock_wasm_bg.wasm', import.meta.url) }));

export * from './api.js';
