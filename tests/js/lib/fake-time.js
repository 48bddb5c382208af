// A virtual clock with its own timers, for deterministic tests of Locks: time moves only when a
// test calls advance(), and due timers run in deadline order (ties in creation order).

export class FakeTime {
  now = 0;
  #timers = new Map();
  #seq = 0;

  /** Options for `new Locks(...)` wired to this clock. */
  get options() {
    return {
      now: () => this.now,
      setTimeout: (fn, delay) => {
        this.#seq += 1;
        this.#timers.set(this.#seq, { at: this.now + Math.max(0, delay), fn, seq: this.#seq });
        return this.#seq;
      },
      clearTimeout: (id) => {
        this.#timers.delete(id);
      },
    };
  }

  /** Number of armed timers. */
  get pending() {
    return this.#timers.size;
  }

  /** The instant of the earliest armed timer, or null. */
  get nextAt() {
    let next = null;
    for (const t of this.#timers.values()) if (next === null || t.at < next) next = t.at;
    return next;
  }

  /** Moves the clock to now + ms, running every timer that falls due, at its own instant. */
  async advance(ms) {
    const end = this.now + ms;
    await settle();
    for (;;) {
      let due = null;
      for (const t of this.#timers.values()) {
        if (t.at <= end && (due === null || t.at < due.at || (t.at === due.at && t.seq < due.seq))) due = t;
      }
      if (due === null) break;
      this.#timers.delete(due.seq);
      this.now = Math.max(this.now, due.at);
      due.fn();
      await settle();
    }
    this.now = end;
    await settle();
  }
}

/** Lets queued microtasks and promise callbacks run. */
export async function settle() {
  for (let i = 0; i < 5; i += 1) await new Promise((resolve) => setImmediate(resolve));
}
