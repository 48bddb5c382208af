// The MariaDB store's IO for StoreClient, over mysql2: the same objects, statements and replies
// as the Rust clients (lock-store/src/mysql.rs), every text a step of lock-store/steps/mysql.sql,
// so that Rust and Node replicas share one namespace. Nothing is decided here. MariaDB sends no
// notices: waiters look at the key's next deadline by themselves.

import { StoreError } from '../errors.js';
import { MAX_FENCE, bounded, corruptError, endWithin, fencesFromText, reasonOf, requirePeer, storeError, withoutPassword } from './io.js';
import { explain, tlsOptions } from './tls.js';
import { step, stepsFile } from './steps.js';

/** The format this build installs and reads (FORMAT in mysql.rs). */
const FORMAT = '1';
const COLUMNS = ['fences', 'forget_at', 'k', 'record', 'version'];
/** The install's and the uninstall's steps, in order (INSTALL, UNINSTALL in mysql.rs). */
const INSTALL = ['create-meta', 'insert-format', 'insert-longest', 'create-records', 'create-fences', 'create-cas', 'mark-take-over', 'forget-authority'];
const UNINSTALL = ['drop-cas', 'drop-fences', 'drop-records', 'drop-meta'];
/** The collection walk: one step every this many writes (CollectWalk::EVERY). */
const COLLECT_EVERY = 64;
const TLS_PARAMS = ['ssl-mode', 'ssl-ca', 'ssl-cert', 'ssl-key'];

/** Server errors (errno) and what they mean, as `failed` in mysql.rs. */
const LOST = [1053, 1927, 2006, 2013, 1317];
const DENIED = [1044, 1045, 1142, 1143, 1227, 1370];
const EXHAUSTED = [4084, 4135];
const MISSING = [1146, 1305];
/** A deadlock or a lock wait past its bound: rolled back, nothing happened (a conflict). */
const ROLLED_BACK = [1213, 1205];

/** @type {string | null} */
let FILE = null;
const file = () => (FILE ??= stepsFile('mysql.sql'));

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * mysql2's connection options from a `mysql://` or `mariadb://` URL (user, password, host, port,
 * /DATABASE) and its TLS parameters, named as the `mysql` client and the Rust clients name them
 * (`ssl-mode` DISABLED, REQUIRED, VERIFY_CA or VERIFY_IDENTITY; `ssl-ca`, `ssl-cert`, `ssl-key`
 * files; `_` for `-` too). REQUIRED checks the certificate as VERIFY_IDENTITY does (a check that
 * stops no one in the middle is not TLS); VERIFY_CA checks its chain, not its host name.
 */
export function mysqlOptions(url, shown) {
  const bad = (reason) => new StoreError('url', `bad store URL ${JSON.stringify(shown)}: ${reason}`);
  // Several hosts (`mysql://user@h1:3306,h2:3306/db`, tried in order, as the Rust client does):
  // the URL is read with the first; each host is read on its own.
  const split = /^(mysql:\/\/)([^@/?#]*@)?([^/?#]*)(.*)$/s.exec(url);
  const hostList = split === null ? [''] : split[3].split(',');
  const readHost = (text) => {
    try {
      return new URL(text);
    } catch {
      throw bad('not a URL');
    }
  };
  const parsed = readHost(split === null ? url : `${split[1]}${split[2] ?? ''}${hostList[0]}${split[4]}`);
  const hosts = hostList.map((h) => {
    const one = split === null ? parsed : readHost(`mysql://${h}`);
    return { host: one.hostname.replace(/^\[(.*)\]$/, '$1') || 'localhost', port: one.port === '' ? 3306 : Number(one.port) };
  });
  const database = decodeURIComponent(parsed.pathname.replace(/^\//, ''));
  if (database === '') throw bad('no database: add /DATABASE to the URL');
  const params = new Map([...parsed.searchParams].map(([name, value]) => [name.replaceAll('_', '-'), value]));
  const target = params.get('target-session-attrs') ?? 'any';
  params.delete('target-session-attrs');
  if (target !== 'any' && target !== 'read-write') throw bad(`target_session_attrs=${target}: use any or read-write`);
  const unknown = [...params.keys()].filter((name) => !TLS_PARAMS.includes(name));
  if (unknown.length > 0) throw bad(`unknown parameter ${unknown[0]} (this client takes ${TLS_PARAMS.join(', ')}, target_session_attrs)`);
  const options = {
    hosts,
    readWrite: target === 'read-write',
    user: decodeURIComponent(parsed.username),
    password: decodeURIComponent(parsed.password),
    database,
  };
  const mode = params.get('ssl-mode')?.toUpperCase();
  const files = params.has('ssl-ca') || params.has('ssl-cert');
  if (mode === 'DISABLED' || (mode === undefined && !files)) return options;
  if (mode !== undefined && !['REQUIRED', 'PREFERRED', 'VERIFY_CA', 'VERIFY_IDENTITY'].includes(mode)) {
    throw bad(`ssl-mode=${mode}: use DISABLED, REQUIRED, VERIFY_CA or VERIFY_IDENTITY`);
  }
  const ssl = tlsOptions({ ca: params.get('ssl-ca'), cert: params.get('ssl-cert'), key: params.get('ssl-key'), chainOnly: mode === 'VERIFY_CA' }, bad, { ca: 'ssl-ca', cert: 'ssl-cert', key: 'ssl-key' });
  // mysql2 checks the host name only when asked (its own option; it ignores checkServerIdentity).
  return { ...options, ssl: { ...ssl, verifyIdentity: mode !== 'VERIFY_CA' } };
}

/** A namespace (tables, a sequence and a procedure named `<ns>_...`) in a MariaDB database. @internal */
export class MysqlDriver {
  #mysql;
  #options;
  #ns;
  #texts;
  /** @type {any} */
  #conn = null;
  /** @type {Promise<any> | null} */
  #connecting = null;
  /** Closed: no call connects again, and a connect that was under way is ended. */
  #closed = false;
  #bound = 5000;
  #installed = false;
  /** The namespace's procedure moves tokens on a new authority (`takes_over` in mysql.rs). */
  #takesOver = false;
  /**
   * The longest `holdsFor` the connection had a write made with through the procedure (which
   * raised the namespace's 'longest' to it): a write that holds longer goes through it.
   */
  #longest = 0;
  #seedFromTime = true;
  #writes = 0;
  #after = Buffer.alloc(0);

  constructor(mysql, options, namespace, shown) {
    this.#mysql = mysql;
    this.#options = options;
    this.#ns = namespace;
    this.describe = `${shown} namespace "${namespace}"`;
    this.namespace = namespace;
    this.#texts = Object.fromEntries(
      [
        'isolation',
        'read-only',
        'install-lock',
        'install-unlock',
        'columns',
        ...INSTALL,
        'old-index',
        'drop-old-index',
        'format',
        'read',
        'cas',
        'cas-before-take-over',
        'replace',
        'replace-with-token',
        'replace-with-token-here',
        'take-over-exists',
        'from-time',
        'collect-next',
        'collect-delete',
        'keys',
        'last-fence',
        ...UNINSTALL,
      ].map((name) => [name, step(file(), name, { ns: namespace, format: FORMAT })]),
    );
  }

  /** Opens `url` (mysql:// or mariadb://, with a /DATABASE) for `namespace`. */
  static async open(url, namespace, options = {}) {
    const shown = withoutPassword(url);
    const connection = mysqlOptions(url.replace(/^mariadb:/, 'mysql:'), shown);
    const { default: mysql } = await requirePeer('mysql2/promise', url);
    if (mysql.TypedParameter?.BIGINT?.unsigned === undefined) {
      throw new StoreError('not-compiled', 'the mysql:// store needs mysql2 3.24.5 or later (typed BIGINT UNSIGNED parameters): npm install mysql2@^3.24.5');
    }
    const driver = new MysqlDriver(mysql, connection, namespace, shown);
    driver.#bound = options.bound ?? 5000;
    await driver.#connection();
    // The namespace's format, if it is installed (an install of another build is an error now).
    await driver.#present(driver.#bound).catch((e) => {
      if (!(e instanceof StoreError && e.code === 'no-namespace')) throw e;
    });
    return driver;
  }

  /**
   * A new connection, in the session mode the steps expect: to the first of the URL's hosts that
   * answers (and is not read-only, with `target_session_attrs=read-write`), as the Rust client.
   */
  async #newConnection() {
    const { hosts, readWrite } = this.#options;
    let failure = null;
    for (const { host, port } of hosts) {
      let conn;
      try {
        conn = await this.#newConnectionTo(host, port);
      } catch (e) {
        failure = e;
        continue;
      }
      if (!readWrite) return conn;
      try {
        const [rows] = await bounded(this, this.#bound, () => conn.query(this.#texts['read-only']));
        if (Number(rows[0]?.[0]) === 0) return conn;
        failure = storeError('connect', this.describe, `${host}:${port} does not accept writes (target_session_attrs=read-write)`);
      } catch (e) {
        failure = e instanceof StoreError ? e : storeError('connect', this.describe, `${/** @type {Error} */ (e).message}`, e);
      }
      conn.destroy();
    }
    throw failure;
  }

  /** A new connection to one host. */
  async #newConnectionTo(host, port) {
    const ms = Math.round(this.#bound);
    const options = { ...this.#options };
    delete options.hosts;
    delete options.readWrite;
    let conn;
    try {
      conn = await bounded(this, ms, () =>
        this.#mysql.createConnection({
          ...options,
          host,
          port,
          connectTimeout: ms,
          supportBigNumbers: true,
          bigNumberStrings: true,
          rowsAsArray: true,
          enableKeepAlive: true,
          connectAttributes: { program_name: `lock-store:${this.#ns}` },
        }),
      );
    } catch (error) {
      const e = /** @type {{errno?: number, message: string}} */ (error);
      const ssl = /** @type {{cert?: unknown} | undefined} */ (this.#options.ssl);
      // Over TLS without a client certificate, a user that must present one (REQUIRE X509) is
      // refused like a wrong password: say so.
      const hint = e.errno === 1045 && ssl !== undefined && ssl.cert === undefined ? ' (if this user must present a client certificate, name it and its key in the URL: ssl-cert=PATH&ssl-key=PATH)' : '';
      throw storeError('connect', this.describe, `${explain(e).replace(/^lost the connection to .*?: /, '')}${hint}`, e);
    }
    conn.connection.on('error', () => {}); // reported to each call instead
    try {
      await bounded(this, ms, () => conn.query(this.#texts.isolation));
      // The tests' tokens from 1, if asked (the procedure reads the session's variable).
      if (!this.#seedFromTime) await bounded(this, ms, () => conn.execute(this.#texts['from-time'], [0]));
    } catch (error) {
      conn.destroy();
      throw storeError('connect', this.describe, `${/** @type {Error} */ (error).message}`, error);
    }
    return conn;
  }

  /** Connects; the calls that find no connection meanwhile share this one. */
  #connection() {
    if (this.#closed) return Promise.reject(storeError('lost', this.describe, 'this store client was closed'));
    if (this.#conn !== null) return Promise.resolve(this.#conn);
    this.#connecting ??= (async () => {
      try {
        const conn = await this.#newConnection();
        if (this.#closed) {
          conn.destroy();
          throw storeError('lost', this.describe, 'this store client was closed');
        }
        this.#conn = conn;
        this.#longest = 0;
        return conn;
      } finally {
        this.#connecting = null;
      }
    })();
    return this.#connecting;
  }

  /** Drops the connection (a call found no answer in time: it may be out of step). */
  drop() {
    const conn = this.#conn;
    this.#conn = null;
    conn?.destroy();
  }

  /** Step `name` as a prepared statement (mysql2 prepares each text once per connection). */
  async #execute(name, values, bound) {
    const conn = await this.#connection();
    try {
      const [rows] = await bounded(this, bound, () => conn.execute(this.#texts[name], values));
      return rows;
    } catch (e) {
      throw this.#failure(e, conn);
    }
  }

  /** Step `name` as a plain statement (DDL, and what takes no parameters). */
  async #query(name, bound) {
    const conn = await this.#connection();
    try {
      const [rows] = await bounded(this, bound, () => conn.query(this.#texts[name]));
      return rows;
    } catch (e) {
      throw this.#failure(e, conn);
    }
  }

  /** Whether the namespace is installed (looked up until it was seen once). */
  async #present(bound) {
    if (this.#installed) return;
    const rows = await this.#query('format', bound);
    const format = rows[0]?.[0];
    // The table without its row: another replica is installing it right now.
    if (format === undefined) throw this.#missing();
    if (String(format) !== FORMAT) throw storeError('schema', this.describe, `namespace has format ${format}; this build reads ${FORMAT}`);
    const [[marks]] = await this.#query('take-over-exists', bound);
    this.#takesOver = Number(marks) > 0;
    this.#installed = true;
  }

  /**
   * Test mode (`false`): tokens count from 1 instead of moving up to the server's time in µs at
   * the first write on a new authority (a promoted replica). Drops the connection: the next one
   * tells the server.
   */
  setSeedFromTime(seed) {
    this.#seedFromTime = seed;
    this.drop();
  }

  #missing() {
    this.#installed = false;
    return storeError('no-namespace', this.describe);
  }

  #unsigned(v) {
    return this.#mysql.TypedParameter.BIGINT.unsigned(BigInt(v));
  }

  #signed(v) {
    return v < 0 ? null : this.#mysql.TypedParameter.BIGINT(BigInt(v));
  }

  async read(key, bound) {
    const start = performance.now();
    await this.#present(bound);
    const rows = await this.#execute('read', [Buffer.from(key)], Math.max(1, bound - (performance.now() - start)));
    return this.#readRow(key, rows[0] ?? []);
  }

  #readRow(key, [now, version, record, fences]) {
    const at = Math.max(0, Number(now));
    if (!Number.isSafeInteger(at)) throw storeError('server', this.describe, `unexpected server time ${now}`);
    if (version === null || version === undefined) return { record: null, now: at };
    const tokens = fencesFromText(Buffer.isBuffer(fences) ? fences.toString() : fences);
    if (!Buffer.isBuffer(record) || tokens === null) {
      throw corruptError(key, `fences ${JSON.stringify(fences)}`);
    }
    return { record: { version: BigInt(version).toString(), bytes: new Uint8Array(record), fences: tokens }, now: at };
  }

  async write(key, w, bound) {
    const start = performance.now();
    const left = () => Math.max(1, bound - (performance.now() - start));
    await this.#present(bound);
    const k = Buffer.from(key);
    const bytes = w.bytes === null ? null : Buffer.from(w.bytes);
    const replaces = Buffer.from(w.replaces);
    const notBefore = this.#signed(w.notBefore);
    const forgetAt = this.#signed(w.forgetAt);
    /** @type {{fences: number[]} | null} */
    let done = null;
    /** @type {[any, any, any, any] | null} the record the procedure found instead of the expected one */
    let found = null;
    try {
      // A write that holds a lease's place longer than this connection told the namespace
      // goes through the procedure, which raises the namespace's 'longest'.
      const told = w.holdsFor <= this.#longest || !this.#takesOver;
      if (bytes !== null && w.expected !== '0' && w.freshFences <= 1 && told) {
        // The common write: one UPDATE, its token (if any) in the OK packet; with a token, only
        // while this server is the namespace's authority and does not recover, if the procedure
        // moves tokens (else through it: it moves them first, or answers the row as it is).
        const here = w.freshFences === 1 && this.#takesOver;
        const name = here ? 'replace-with-token-here' : w.freshFences === 1 ? 'replace-with-token' : 'replace';
        const ok = await this.#execute(name, [this.#unsigned(w.version), bytes, forgetAt, k, this.#unsigned(w.expected), replaces, notBefore, notBefore], left());
        if (ok.affectedRows === 1) done = { fences: w.freshFences === 1 ? [this.#token(ok.insertId)] : [] };
        else if (here) ({ done, found } = await this.#callCas(k, w, bytes, notBefore, forgetAt, replaces, left()));
      } else {
        ({ done, found } = await this.#callCas(k, w, bytes, notBefore, forgetAt, replaces, left()));
      }
    } catch (e) {
      if (!(e instanceof StoreError && ROLLED_BACK.includes(/** @type {any} */ (e.cause)?.errno))) throw e;
    }
    this.#count(bound);
    if (done !== null) return done;
    if (found !== null) return { conflict: this.#readRow(key, found) };
    // A conflict: the record now, read at once.
    return { conflict: await this.read(key, left()) };
  }

  /**
   * Any write through the `_cas` procedure (one transaction, one round trip): `done` if it
   * wrote, else `found`, the record as it is.
   * @returns {Promise<{done: {fences: number[]} | null, found: [any, any, any, any] | null}>}
   */
  async #callCas(k, w, bytes, notBefore, forgetAt, replaces, bound) {
    const params = [k, this.#unsigned(w.expected), this.#unsigned(w.version), bytes, this.#mysql.TypedParameter.INT(w.freshFences), notBefore, forgetAt, replaces];
    const raise = w.holdsFor > this.#longest ? w.holdsFor : 0;
    const results = this.#takesOver
      ? await this.#execute('cas', [...params, this.#signed(raise)], bound)
      : await this.#execute('cas-before-take-over', params, bound);
    const row = (Array.isArray(results[0]) ? results[0] : results)[0];
    if (!Array.isArray(row)) throw storeError('server', this.describe, 'the compare-and-set returned no row');
    // (2, time, until): the server recovers after a change of authority; nothing was written.
    if (Number(row[0]) === 2) throw storeError('recovering', this.describe, `${row[2]} ${row[1]}`);
    if (Number(row[0]) !== 1) return { done: null, found: [row[1], row[2], row[3], row[4]] };
    if (raise > this.#longest) this.#longest = raise;
    const fences = fencesFromText(String(row[4] ?? ''));
    if (fences === null) throw storeError('server', this.describe, `unexpected fences ${row[4]}`);
    return { done: { fences }, found: null };
  }

  #token(value) {
    const fence = Number(value);
    if (!Number.isSafeInteger(fence) || fence <= 0 || fence > MAX_FENCE) throw storeError('server', this.describe, `unexpected fencing token ${value}`);
    return fence;
  }

  /** Counts a write; every COLLECT_EVERY writes, one step of the collection walk (best effort). */
  #count(bound) {
    this.#writes += 1;
    if (this.#writes % COLLECT_EVERY === 0) this.#collect(bound).catch(() => {});
  }

  /** One step of the collection walk (forgotten free records among the next keys). */
  async #collect(bound) {
    const seen = await this.#execute('collect-next', [this.#after, this.#mysql.TypedParameter.INT(COLLECT_EVERY)], bound);
    const last = seen.at(-1)?.[0];
    if (last === undefined) {
      this.#after = Buffer.alloc(0);
      return;
    }
    await this.#execute('collect-delete', [this.#after, last], bound);
    this.#after = last;
  }

  /** Creates the namespace, or checks that what is there is ours (idempotent). */
  async install(bound) {
    const lock = `expiring-locks install ${this.#ns}`;
    const table = `${this.#ns}_records`;
    try {
      await bounded(this, bound, async () => {
        const [[got]] = await this.#execute('install-lock', [lock], bound);
        if (Number(got) !== 1) throw storeError('schema', this.describe, 'timed out waiting for another installer');
        try {
          const columns = (await this.#execute('columns', [table], bound)).map((r) => String(r[0]));
          if (columns.length > 0 && columns.join() !== COLUMNS.join()) {
            throw storeError('schema', this.describe, `table ${table} is not ours: columns ${columns.join(', ')}`);
          }
          for (const name of INSTALL) await this.#query(name, bound);
          if ((await this.#execute('old-index', [table], bound)).length > 0) await this.#query('drop-old-index', bound);
          this.#installed = false;
          await this.#present(bound);
        } finally {
          await this.#execute('install-unlock', [lock], bound).catch(() => {});
        }
      });
    } catch (e) {
      const failure = e instanceof StoreError ? e : this.#failure(e, null);
      throw failure.code === 'server' || failure.code === 'no-namespace' ? storeError('schema', this.describe, reasonOf(failure), e) : failure;
    }
  }

  /** MariaDB sends no notices: a waiter looks by itself. */
  async announce() {}

  async keys(bound = this.#bound) {
    try {
      await this.#present(bound);
      const rows = await this.#query('keys', bound);
      return rows.flatMap(([k]) => {
        try {
          return [utf8.decode(k)];
        } catch {
          return [];
        }
      });
    } catch (e) {
      if (e instanceof StoreError && e.code === 'no-namespace') return [];
      throw e;
    }
  }

  async lastFence(bound = this.#bound) {
    await this.#present(bound);
    const rows = await this.#query('last-fence', bound);
    return Math.max(0, Number(rows[0]?.[0] ?? 0));
  }

  /** Drops the namespace's objects (tests, and operators retiring it). */
  async uninstall(bound = this.#bound) {
    this.#installed = false;
    for (const name of UNINSTALL) await this.#query(name, bound);
  }

  async close() {
    this.#closed = true;
    const conn = this.#conn;
    this.#conn = null;
    // A silent path never answers the goodbye: at most a second, then the socket goes.
    if (conn !== null) await endWithin(conn.end(), () => conn.destroy());
    // A connect under way when it closed ends its connection itself (see #connection).
    await this.#connecting?.catch(() => {});
  }

  /** What a failed statement means (as `failed` in mysql.rs). */
  #failure(e, conn) {
    if (e instanceof StoreError) return e;
    const errno = e?.errno;
    const message = e?.sqlMessage ?? e?.message ?? String(e);
    const server = typeof errno === 'number' && errno >= 1000 && !e?.fatal;
    if (!server || LOST.includes(errno)) {
      if (conn === null || this.#conn === conn) this.drop();
      return storeError('lost', this.describe, `${e?.code ? `${e.code}: ` : ''}${message}`, e);
    }
    if (MISSING.includes(errno)) return this.#missing();
    if (DENIED.includes(errno)) return storeError('schema', this.describe, message, e);
    if (EXHAUSTED.includes(errno)) return storeError('fences-exhausted', this.describe);
    return storeError('server', this.describe, `${errno}: ${message}`, e);
  }
}
