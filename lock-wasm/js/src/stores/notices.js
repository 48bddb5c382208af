// Hand-off notices: one listening connection per StoreLocks, shared by all its waiters (as the
// Rust clients' hub). A notice is `key\nowner`; a waiter that is told it was handed the key looks
// at once instead of napping to its next poll. Notices are best effort: waiters look by
// themselves anyway, so a lost notice only delays one.

/** A subscription's answer to `wait`: told of its hand-off, nothing in time, or the connection failed. */
export const HEARD = 'heard';
export const QUIET = 'quiet';
export const FAILED = 'failed';

export class Notices {
  #listen;
  /** @type {Promise<{close: () => Promise<void> | void} | null> | null} */
  #connection = null;
  #failed = false;
  /** `key\nowner` -> the subscriptions waiting for it. */
  #subscribers = new Map();

  /**
   * @param {(onNotice: (text: string) => void, onFailure: () => void) => Promise<{close: () => Promise<void> | void}>} listen
   *   connects a listening connection (the store's)
   */
  constructor(listen) {
    this.#listen = listen;
  }

  /** Subscribes to the notice of `key` handed to `owner`. */
  subscribe(key, owner) {
    const id = `${key}\n${owner}`;
    const sub = new Subscription(() => {
      const set = this.#subscribers.get(id);
      set?.delete(sub);
      if (set?.size === 0) this.#subscribers.delete(id);
    });
    if (this.#failed) {
      sub.fail();
      return sub;
    }
    if (!this.#subscribers.has(id)) this.#subscribers.set(id, new Set());
    this.#subscribers.get(id).add(sub);
    this.#connection ??= this.#listen(
      (text) => {
        for (const s of this.#subscribers.get(text) ?? []) s.tell();
      },
      () => this.#fail(),
    ).catch(() => {
      this.#fail();
      return null;
    });
    return sub;
  }

  #fail() {
    this.#failed = true;
    for (const set of this.#subscribers.values()) for (const s of set) s.fail();
    this.#subscribers.clear();
    const connection = this.#connection;
    this.#connection = null;
    connection?.then((c) => c?.close()).catch(() => {});
    // The next subscriber connects again.
    this.#failed = false;
  }

  /** Closes the listening connection. */
  async close() {
    const connection = this.#connection;
    this.#connection = null;
    this.#subscribers.clear();
    await (await connection)?.close();
  }
}

class Subscription {
  #told = false;
  #failed = false;
  /** @type {(() => void) | null} */
  #wake = null;
  #unsubscribe;

  constructor(unsubscribe) {
    this.#unsubscribe = unsubscribe;
  }

  tell() {
    this.#told = true;
    this.#wake?.();
  }

  fail() {
    this.#failed = true;
    this.#wake?.();
  }

  /**
   * Waits up to `ms` for the notice (or until `signal` aborts).
   * @param {number} ms
   * @param {AbortSignal} [signal]
   * @returns {Promise<string>}
   */
  wait(ms, signal) {
    if (this.#failed) return Promise.resolve(FAILED);
    if (this.#told) {
      this.#told = false;
      return Promise.resolve(HEARD);
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        this.#wake = null;
        if (this.#failed) resolve(FAILED);
        else if (this.#told) {
          this.#told = false;
          resolve(HEARD);
        } else resolve(QUIET);
      };
      const timer = setTimeout(done, ms);
      this.#wake = done;
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  close() {
    this.#unsubscribe();
  }
}
