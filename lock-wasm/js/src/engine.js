// The instantiated wasm-bindgen module, set once by the entry point (node.js or browser.js)
// before any user code runs. Kept in its own module so api.js has no platform code.

let exports = null;

/** Records the wasm exports returned by wasm-bindgen's init. @internal */
export function setEngine(wasmExports) {
  exports = wasmExports;
}

/** The module's linear memory (its buffer changes when the memory grows). @internal */
export function memory() {
  if (exports === null) {
    throw new Error('expiring-lock: the WebAssembly engine is not initialised (import the package entry point, not src/api.js)');
  }
  return exports.memory;
}
