// The signals of a lease's loss, written once for both leases (the in-process `Lease` and the
// store's `StoreLease`): the `lost` promise, the AbortSignal and the `onLost` callback, each
// given the same frozen `{key, owner, fence, at, reason}` once.

import { LockError } from './errors.js';

/** @typedef {import('../index.d.ts').LostInfo} LostInfo */

/** The error a lost lease's signal aborts with (and its late calls throw). */
export function lostError(info) {
  if (info.reason === 'stolen') {
    return new LockError('stolen', `the lease on ${JSON.stringify(info.key)} (fence ${info.fence}) was stolen at ${info.at} ms`, {
      at: info.at,
    });
  }
  return new LockError('expired', `the lease on ${JSON.stringify(info.key)} (fence ${info.fence}) expired at ${info.at} ms`, {
    deadline: info.at,
  });
}

export class Loss {
  /** @type {((info: LostInfo) => void) | undefined} */
  #onLost;
  /** @type {Readonly<LostInfo> | null} */
  #info = null;
  /** @type {((info: LostInfo) => void) | null} */
  #resolve = null;
  /** @type {Promise<LostInfo> | null} */
  #promise = null;
  /** @type {AbortController | null} */
  #controller = null;

  /** @param {((info: LostInfo) => void) | undefined} onLost */
  constructor(onLost) {
    this.#onLost = onLost;
  }

  /** What the loss reported (`null` before it). */
  get info() {
    return this.#info;
  }

  /** Resolves with the loss's info; never if there is none. */
  get promise() {
    this.#promise ??=
      this.#info !== null
        ? Promise.resolve(this.#info)
        : new Promise((resolve) => {
            this.#resolve = resolve;
          });
    return this.#promise;
  }

  /** Aborts (reason: `lostError`) at the loss. */
  get signal() {
    if (this.#controller === null) {
      this.#controller = new AbortController();
      if (this.#info !== null) this.#controller.abort(lostError(this.#info));
    }
    return this.#controller.signal;
  }

  /** The lease was lost: every signal, once (`reason`: `expired` unless said otherwise). */
  fire({ key, owner, fence, at, reason = 'expired' }) {
    if (this.#info !== null) return;
    const info = Object.freeze(/** @type {LostInfo} */ ({ key, owner, fence, at, reason }));
    this.#info = info;
    this.#resolve?.(info);
    this.#controller?.abort(lostError(info));
    if (this.#onLost !== undefined) {
      try {
        this.#onLost(info);
      } catch (error) {
        console.error('expiring-lock: an onLost callback threw', error);
      }
    }
  }
}
