// The SQLite store's IO for StoreClient, over better-sqlite3: the same file, tables and
// transactions as the Rust clients (lock-store/src/sqlite.rs), every statement a step of
// lock-store/steps/sqlite.sql, so that Rust and Node processes on one machine share one
// namespace of one file. Nothing is decided here. better-sqlite3 is synchronous: a call holds the
// event loop for as long as SQLite takes (microseconds, or up to the busy timeout while another
// process writes to the file); the time is this machine's clock, which every client shares.

import { existsSync } from 'node:fs';
import { StoreError } from '../errors.js';
import { MAX_FENCE, corruptError, fencesFromText, requirePeer, storeError } from './io.js';
import { allSteps, stepsFile } from './steps.js';

/** The format of the tables this build writes (FORMAT in sqlite.rs). */
const FORMAT = 1;
const META_COLUMNS = ['namespace', 'format', 'last_fence'];
const RECORD_COLUMNS = ['namespace', 'key', 'version', 'record', 'fences', 'forget_at'];
/** How long a call waits for another process that holds the file (BUSY_PATIENCE), at most. */
const BUSY_PATIENCE = 10_000;

/** @type {Map<string, string> | null} */
let STEPS = null;
/** Step `name` of steps/sqlite.sql (no placeholders). */
function sql(name) {
  STEPS ??= new Map(allSteps(stepsFile('sqlite.sql')));
  const text = STEPS.get(name);
  if (text === undefined) throw new Error(`expiring-lock: no step ${JSON.stringify(name)} in steps/sqlite.sql`);
  return text;
}

/** Values for `?1`, `?2`, ... (better-sqlite3 binds numbered parameters by name). */
const numbered = (...values) => Object.fromEntries(values.map((v, i) => [i + 1, v]));

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const isBusy = (e) => /^SQLITE_(BUSY|LOCKED)/.test(/** @type {{code?: string}} */ (e)?.code ?? '');

/** A namespace in a SQLite file. @internal */
export class SqliteDriver {
  #Database;
  #path;
  #ns;
  #patience;
  /** @type {any} the file, once it exists (reads never create it) */
  #db = null;
  #installed = false;
  /** @type {Map<string, any>} */
  #statements = new Map();

  constructor(Database, path, namespace, patience) {
    this.#Database = Database;
    this.#path = path;
    this.#ns = namespace;
    this.#patience = patience;
    this.describe = `sqlite://${path} namespace "${namespace}"`;
    this.namespace = namespace;
  }

  /**
   * Opens `sqlite://PATH` (`sqlite:///absolute/path` or `sqlite://relative/path`) for
   * `namespace`; creates nothing (the first write creates the file and the namespace).
   */
  static async open(url, namespace, options = {}) {
    const path = url.slice('sqlite://'.length);
    if (path === '') throw new StoreError('url', `bad store URL ${JSON.stringify(url)}: no file: use sqlite://PATH (sqlite:///absolute/path or sqlite://relative)`);
    const { default: Database } = await requirePeer('better-sqlite3', url);
    const driver = new SqliteDriver(Database, path, namespace, Math.min(BUSY_PATIENCE, options.bound ?? 5000));
    try {
      driver.#present();
    } catch (e) {
      if (!(e instanceof StoreError && e.code === 'no-namespace')) throw e;
    }
    return driver;
  }

  /** The file, opened (and created if `create`) if it is not yet; `null` if it does not exist. */
  #connect(create) {
    if (this.#db === null && (create || existsSync(this.#path))) {
      try {
        this.#db = new this.#Database(this.#path, { fileMustExist: !create, timeout: this.#patience });
      } catch (e) {
        throw storeError('connect', this.describe, /** @type {Error} */ (e).message, e);
      }
      this.#statements.clear();
    }
    return this.#db;
  }

  /** Step `name`, prepared once per connection. */
  #step(name) {
    let statement = this.#statements.get(name);
    if (statement === undefined) {
      statement = this.#db.prepare(sql(name));
      this.#statements.set(name, statement);
    }
    return statement;
  }

  #missing() {
    this.#installed = false;
    return storeError('no-namespace', this.describe);
  }

  /** Whether the namespace is in the file (looked up until it was seen once). */
  #present() {
    if (this.#installed) return;
    if (this.#connect(false) === null) throw this.#missing();
    let row;
    try {
      row = this.#step('format').get(numbered(this.#ns));
    } catch (e) {
      if (/no such table/.test(/** @type {Error} */ (e)?.message ?? '')) throw this.#missing();
      throw this.#failure(e);
    }
    if (row === undefined) throw this.#missing();
    if (row.format !== FORMAT) throw storeError('schema', this.describe, `namespace has format ${row.format}; this build reads ${FORMAT}`);
    this.#installed = true;
  }

  #failure(e) {
    if (e instanceof StoreError) return e;
    return storeError('server', this.describe, `${/** @type {Error} */ (e)?.message ?? e}`, e);
  }

  /** The row of `key`: `[version (bigint), bytes, fences text]` or undefined. */
  #select(key) {
    return this.#step('select').raw(true).safeIntegers(true).get(numbered(this.#ns, key));
  }

  /** A record from its row (none: null). */
  #stored(key, row) {
    if (row === undefined) return null;
    const [version, bytes, text] = row;
    const fences = fencesFromText(text);
    if (fences === null || !(bytes instanceof Uint8Array)) throw corruptError(key, `fences ${JSON.stringify(text)}`);
    return { version: BigInt.asUintN(64, BigInt(version)).toString(), bytes: new Uint8Array(bytes), fences };
  }

  async read(key) {
    try {
      this.#present();
      const row = this.#select(key);
      if (row === undefined) {
        // No record: is the namespace itself still there (another process may have uninstalled
        // it)? Only a miss pays this lookup.
        this.#installed = false;
        this.#present();
      }
      return { record: this.#stored(key, row), now: Date.now() };
    } catch (e) {
      throw this.#failure(e);
    }
  }

  async write(key, w) {
    try {
      this.#present();
      const db = this.#db;
      db.prepare('BEGIN IMMEDIATE').run();
      let committed = false;
      try {
        const now = Date.now();
        const row = this.#select(key);
        const replaced = row === undefined ? w.expected === '0' : BigInt.asUintN(64, BigInt(row[0])).toString() === w.expected && Buffer.from(row[1]).equals(Buffer.from(w.replaces));
        if (!replaced || (w.notBefore >= 0 && now < w.notBefore)) return { conflict: { record: this.#stored(key, row), now } };
        const n = w.freshFences;
        const last = Number(this.#step('take-fences').pluck().safeIntegers(true).get(numbered(this.#ns, n)));
        const fences = Array.from({ length: n }, (_, i) => last - n + 1 + i);
        if (w.bytes === null) {
          this.#step('delete').run(numbered(this.#ns, key));
        } else {
          const version = BigInt.asIntN(64, BigInt(w.version));
          this.#step('upsert').run(numbered(this.#ns, key, version, Buffer.from(w.bytes), fences.join(','), w.forgetAt < 0 ? null : w.forgetAt));
        }
        // Collect a few records that are free and forgotten.
        this.#step('collect').run(numbered(this.#ns, now));
        if (!Number.isSafeInteger(last) || last > MAX_FENCE) throw storeError('fences-exhausted', this.describe);
        db.prepare('COMMIT').run();
        committed = true;
        return { fences };
      } finally {
        if (!committed && db.inTransaction) db.prepare('ROLLBACK').run();
      }
    } catch (e) {
      throw this.#failure(e);
    }
  }

  /**
   * Creates the file and the namespace, or checks that what is there is ours (idempotent);
   * retries while another process holds the file (replicas started together on a new file all
   * convert it at once, and SQLite answers "busy" to some of them without waiting).
   */
  async install() {
    const db = this.#connect(true);
    const started = Date.now();
    let pause = 2;
    for (;;) {
      try {
        this.#installOnce(db);
        this.#installed = true;
        return;
      } catch (e) {
        if (isBusy(e) && Date.now() - started < BUSY_PATIENCE) {
          await sleep(pause);
          pause = Math.min(pause * 2, 50);
          continue;
        }
        throw e instanceof StoreError ? e : storeError('schema', this.describe, `${/** @type {Error} */ (e)?.message ?? e}`, e);
      }
    }
  }

  #installOnce(db) {
    // WAL: readers never wait for the writer. The mode is the file's, set once.
    this.#step('wal').get();
    db.exec(sql('schema'));
    /** @type {[string, string, string[]][]} */
    const tables = [
      ['expiring_lock_meta', 'meta-columns', META_COLUMNS],
      ['expiring_lock_records', 'records-columns', RECORD_COLUMNS],
    ];
    for (const [table, name, columns] of tables) {
      const found = db.prepare(sql(name)).all().map((c) => c.name);
      if (found.join() !== columns.join()) {
        throw storeError('schema', this.describe, `table ${table} is not ours: columns ${found.join(', ')}, expected ${columns.join(', ')}`);
      }
    }
    this.#step('insert-namespace').run(numbered(this.#ns, FORMAT));
    const format = this.#step('format').get(numbered(this.#ns))?.format;
    if (format !== FORMAT) throw storeError('schema', this.describe, `namespace has format ${format}; this build reads ${FORMAT}`);
  }

  /** SQLite sends no notices: a waiter looks by itself. */
  async announce() {}

  async keys() {
    try {
      this.#present();
      return this.#step('keys').pluck().all(numbered(this.#ns));
    } catch (e) {
      if (e instanceof StoreError && e.code === 'no-namespace') return [];
      throw this.#failure(e);
    }
  }

  async lastFence() {
    try {
      this.#present();
      return Math.max(0, Number(this.#step('last-fence').pluck().get(numbered(this.#ns)) ?? 0));
    } catch (e) {
      throw this.#failure(e);
    }
  }

  /** Removes the namespace from the file (tests, and operators retiring it). */
  async uninstall() {
    try {
      this.#present();
    } catch (e) {
      if (e instanceof StoreError && e.code === 'no-namespace') return;
      throw e;
    }
    const db = this.#db;
    try {
      db.prepare('BEGIN IMMEDIATE').run();
      this.#step('clear-records').run(numbered(this.#ns));
      this.#step('clear-fences').run(numbered(this.#ns));
      this.#step('uninstall').run(numbered(this.#ns));
      db.prepare('COMMIT').run();
    } catch (e) {
      if (db.inTransaction) db.prepare('ROLLBACK').run();
      throw this.#failure(e);
    } finally {
      this.#installed = false;
    }
  }

  async close() {
    const db = this.#db;
    this.#db = null;
    this.#statements.clear();
    db?.close();
  }
}
