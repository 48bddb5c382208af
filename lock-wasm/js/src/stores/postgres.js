// The PostgreSQL store's IO for StoreClient, over pg: the same schema, statements and replies
// as the Rust clients (lock-store/src/postgres/mod.rs), every text a step of
// lock-store/steps/postgres.sql, so that Rust and Node replicas share one namespace. Nothing is
// decided here.

import { StoreError } from '../errors.js';
import { bounded, corruptError, endWithin, reasonOf, requirePeer, storeError, withoutPassword } from './io.js';
import { explain, takeParams, tlsOptions } from './tls.js';
import { step, stepsFile } from './steps.js';

/** The schema format this build installs and reads (FORMAT in postgres/mod.rs). */
const FORMAT = '1';
const COLUMNS = ['fences', 'forget_at', 'key', 'record', 'version'];
/** The collection walk: one step every this many writes (CollectWalk::EVERY). */
const COLLECT_EVERY = 64;
/** The latest instant a timestamptz holds here (postgres/mod.rs instant_to_timestamp). */
const LAST_INSTANT = 253_402_300_799_999;
const MAX_FENCE = 2 ** 53 - 1;

/** The connections whose namespace has take_over() (looked up at each connect). */
const TAKES_OVER = new WeakMap();
/**
 * The longest `holdsFor` each connection had a write made with (hold_for() raised the
 * namespace's 'longest' to it): shorter ones are sent as 0.
 */
const LONGEST = new WeakMap();

/** The errors that mean a write met a conflict (as `is_conflict` in postgres/mod.rs). */
const CONFLICTS = new WeakSet();

/** @type {string | null} */
let FILE = null;
const file = () => (FILE ??= stepsFile('postgres.sql'));

/** A record version (u64, decimal) as the signed bigint PostgreSQL keeps, and back. */
const versionToSql = (v) => BigInt.asIntN(64, BigInt(v)).toString();
const versionFromSql = (v) => BigInt.asUintN(64, BigInt(v)).toString();

/** Ends `client` (a second at most for the server's goodbye; then its socket is destroyed). */
function end(client) {
  return endWithin(client.end(), () => client.connection?.stream?.destroy());
}

/**
 * The URL without its TLS parameters, and pg's `ssl` option from them, as the Rust clients read
 * them (`tls_of` in postgres/mod.rs): `sslmode=require`, `prefer`, `allow` and `verify-full`
 * check the server's certificate (its chain up to `sslrootcert` or Node's roots, and the host
 * name); `verify-ca` its chain only; `disable`, or no mode and no files, is plain TCP. Stricter
 * than libpq's `require`, which checks nothing without a root file. `sslcert` and `sslkey` are
 * the client's certificate and key, for servers that ask.
 */
export function postgresTls(url, shown) {
  const { rest, params } = takeParams(url, ['sslmode', 'sslrootcert', 'sslcert', 'sslkey']);
  const bad = (reason) => new StoreError('url', `bad store URL ${JSON.stringify(shown)}: ${reason}`);
  const mode = params.get('sslmode');
  const files = params.has('sslrootcert') || params.has('sslcert');
  if (mode === 'disable' || (mode === undefined && !files)) return { url: rest, ssl: undefined };
  if (mode !== undefined && !['require', 'verify-full', 'prefer', 'allow', 'verify-ca'].includes(mode)) {
    throw bad(`sslmode=${mode}: use disable, require, verify-ca or verify-full`);
  }
  const tls = { ca: params.get('sslrootcert'), cert: params.get('sslcert'), key: params.get('sslkey'), chainOnly: mode === 'verify-ca' };
  return { url: rest, ssl: tlsOptions(tls, bad, { ca: 'sslrootcert', cert: 'sslcert', key: 'sslkey' }) };
}

/**
 * The hosts of a libpq-style URL (`postgres://user@h1:5432,h2:5432/db`), one URL each, and
 * whether the client must find one that accepts writes (`target_session_attrs=read-write`; `any`,
 * the default, takes the first that answers): pg connects to one host, so the driver tries them
 * in order, as libpq and the Rust clients (tokio-postgres) do.
 */
export function postgresHosts(url, shown) {
  const { rest, params } = takeParams(url, ['target_session_attrs']);
  const attrs = params.get('target_session_attrs') ?? 'any';
  if (attrs !== 'any' && attrs !== 'read-write') {
    throw new StoreError('url', `bad store URL ${JSON.stringify(shown)}: target_session_attrs=${attrs}: use any or read-write`);
  }
  const m = /^(postgres(?:ql)?:\/\/)([^@/?#]*@)?([^/?#]*)(.*)$/s.exec(rest);
  const hosts = m === null ? [''] : m[3].split(',');
  const urls = m === null ? [rest] : hosts.map((host) => `${m[1]}${m[2] ?? ''}${host}${m[4]}`);
  return { urls, readWrite: attrs === 'read-write' };
}

/** A namespace (a schema) on a PostgreSQL server. @internal */
export class PostgresDriver {
  #pg;
  #url;
  #client;
  #ns;
  #texts;
  #writes = 0;
  #after = '';
  #dropped = false;
  #seedFromTime = true;

  constructor(pg, url, client, namespace, shown) {
    this.#pg = pg;
    this.#url = url;
    this.#client = client;
    this.#ns = namespace;
    this.describe = `${shown} namespace "${namespace}"`;
    this.namespace = namespace;
    this.#texts = Object.fromEntries(
      ['read', 'delete', 'collect', 'keys', 'last-fence', 'uninstall', 'announce', 'meta-exists', 'columns', 'format', 'install-lock', 'schema', 'listen', 'take-over-exists'].map((name) => [
        name,
        step(file(), name, { ns: namespace, format: FORMAT, channel: `${namespace}_handoff` }),
      ]),
    );
    // The writes, calling take_over() and hold_for(), or num_nulls() (which answers 0 and does
    // nothing) in a namespace installed before they existed.
    for (const name of ['update', 'insert']) {
      this.#texts[name] = step(file(), name, { ns: namespace, take_over: `${namespace}.take_over`, hold_for: `${namespace}.hold_for` });
      this.#texts[`${name}_0`] = step(file(), name, { ns: namespace, take_over: 'pg_catalog.num_nulls', hold_for: 'pg_catalog.num_nulls' });
    }
  }

  /** Opens `url` (postgres:// or postgresql://) for `namespace`. */
  static async open(url, namespace, options = {}) {
    const { default: pg } = await requirePeer('pg', url);
    const shown = withoutPassword(url);
    const { url: plain, ssl } = postgresTls(url, shown);
    const hosts = postgresHosts(plain, shown);
    const driver = new PostgresDriver(pg, plain, null, namespace, shown);
    driver.#hosts = hosts;
    driver.#ssl = ssl;
    driver.#bound = options.bound ?? 5000;
    await driver.#connect();
    return driver;
  }

  #bound = 5000;
  /** @type {{urls: string[], readWrite: boolean}} */
  #hosts = { urls: [], readWrite: false };
  /** @type {import('node:tls').ConnectionOptions | undefined} */
  #ssl = undefined;

  /**
   * A new connection, with the server-side bounds of the Rust clients: to the first of the URL's
   * hosts that answers (and accepts writes, with `target_session_attrs=read-write`).
   */
  async #newClient() {
    const urls = this.#hosts.urls.length > 0 ? this.#hosts.urls : [this.#url];
    let failure = null;
    for (const url of urls) {
      let client;
      try {
        client = await this.#newClientOf(url);
      } catch (e) {
        failure = e;
        continue;
      }
      if (!this.#hosts.readWrite) return client;
      try {
        const { rows } = await client.query({ text: step(file(), 'read-only', {}), rowMode: 'array' });
        if (rows[0]?.[0] === 'off') return client;
        failure = storeError('connect', this.describe, `${withoutPassword(url)} does not accept writes (target_session_attrs=read-write)`);
      } catch (e) {
        failure = storeError('connect', this.describe, explain(/** @type {Error} */ (e)), e);
      }
      await end(client);
    }
    throw failure;
  }

  /** A new connection to one host's URL. */
  async #newClientOf(connectionString) {
    const ms = Math.round(this.#bound);
    const client = new this.#pg.Client({
      connectionString,
      ssl: this.#ssl,
      application_name: `lock-store:${this.#ns}`,
      connectionTimeoutMillis: ms,
      statement_timeout: ms,
      lock_timeout: ms,
      idle_in_transaction_session_timeout: ms * 2,
      keepAlive: true,
    });
    client.on('error', () => {}); // reported to each call instead
    try {
      await client.connect();
    } catch (error) {
      const e = /** @type {Error} */ (error);
      await end(client);
      throw storeError('connect', this.describe, explain(e), e);
    }
    return client;
  }

  /** @type {Promise<any> | null} */
  #connecting = null;
  /** Closed: no call connects again, and a connect that was under way is ended. */
  #closed = false;

  /** Connects; the calls that find no connection meanwhile share this one (no second client). */
  #connect() {
    this.#connecting ??= (async () => {
      try {
        const client = await this.#newClient();
        if (this.#closed) {
          await end(client);
          throw storeError('lost', this.describe, 'this store client was closed');
        }
        // Generic plans from the first execution, as the Rust clients ask (step plan-cache).
        await client.query(step(file(), 'plan-cache', {})).catch(() => {});
        // The writes call take_over() where the namespace has it, else pass 0 (as `prepare` in
        // postgres/mod.rs); an install drops the connection, so the next one looks again.
        const { rows } = await client.query({ text: this.#texts['take-over-exists'], rowMode: 'array' });
        TAKES_OVER.set(client, rows[0]?.[0] === true);
        this.#client = client;
        this.#dropped = false;
        return client;
      } finally {
        this.#connecting = null;
      }
    })();
    return this.#connecting;
  }

  /** The connection, connected again if a call dropped it. */
  async #conn() {
    if (this.#closed) throw storeError('lost', this.describe, 'this store client was closed');
    if (this.#dropped || this.#client === null) return this.#connect();
    return this.#client;
  }

  /** Drops the connection (a call found no answer in time: it may be out of step). */
  drop() {
    this.#dropped = true;
    const client = this.#client;
    this.#client = null;
    if (client) void end(client);
  }

  /** One statement, prepared by name on the connection, rows as arrays. */
  async #query(stepName, values, bound) {
    const client = await this.#conn();
    const name = (stepName === 'update' || stepName === 'insert') && TAKES_OVER.get(client) !== true ? `${stepName}_0` : stepName;
    try {
      return await bounded(this, bound, () => client.query({ name: `el_${this.#ns}_${name}`, text: this.#texts[name], values, rowMode: 'array' }));
    } catch (e) {
      throw this.#failure(e);
    }
  }

  async read(key, bound) {
    const { rows } = await this.#query('read', [key], bound);
    return this.#readRow(key, rows[0]);
  }

  #readRow(key, [now, version, record, fences]) {
    const at = Math.max(0, Number(now));
    if (version === null || record === null || fences === null) return { record: null, now: at };
    const tokens = fences.map(Number);
    if (tokens.some((f) => !Number.isSafeInteger(f) || f <= 0 || f > MAX_FENCE)) {
      throw corruptError(key, `fences ${JSON.stringify(fences)}`);
    }
    return { record: { version: versionFromSql(version), bytes: new Uint8Array(record), fences: tokens }, now: at };
  }

  async write(key, w, bound) {
    const start = performance.now();
    const n = w.freshFences;
    const notBefore = w.notBefore < 0 ? null : new Date(Math.min(w.notBefore, LAST_INSTANT)).toISOString();
    const forgetAt = w.forgetAt < 0 ? null : String(w.forgetAt);
    const bytes = w.bytes === null ? null : Buffer.from(w.bytes);
    const replaces = Buffer.from(w.replaces);
    // How long the new record holds a lease's place, for the namespace's 'longest' (the
    // recovery delay); 0 when this connection already had a write made as long.
    const client = await this.#conn();
    const send = w.holdsFor > (LONGEST.get(client) ?? 0);
    const holds = send ? String(w.holdsFor) : '0';
    let rows;
    try {
      if (bytes !== null && w.expected === '0') {
        ({ rows } = await this.#query('insert', [key, versionToSql(w.version), bytes, n, forgetAt, notBefore, this.#seedFromTime, holds], bound));
      } else if (bytes !== null) {
        ({ rows } = await this.#query('update', [key, versionToSql(w.expected), versionToSql(w.version), bytes, n, forgetAt, notBefore, replaces, this.#seedFromTime, holds], bound));
      } else {
        ({ rows } = await this.#query('delete', [key, versionToSql(w.expected), notBefore, replaces], bound));
      }
    } catch (e) {
      if (!(e instanceof StoreError && CONFLICTS.has(e))) throw e;
      rows = [];
    }
    this.#writes += 1;
    if (this.#writes % COLLECT_EVERY === 0) await this.#collect(bound).catch(() => {});
    if (rows.length > 0 && rows[0][0] === null) {
      // (NULL, until, the server's time): the server recovers after a change of authority.
      throw storeError('recovering', this.describe, `${rows[0][1]} ${rows[0][2]}`);
    }
    if (rows.length > 0) {
      if (send) LONGEST.set(client, Math.max(LONGEST.get(client) ?? 0, w.holdsFor));
      return { fences: rows[0][0].map(Number) };
    }
    // A conflict: the record now, read at once.
    return { conflict: await this.read(key, Math.max(1, bound - (performance.now() - start))) };
  }

  /** One step of the collection walk (forgotten free records among the next keys). */
  async #collect(bound) {
    const { rows } = await this.#query('collect', [this.#after, COLLECT_EVERY], bound);
    this.#after = rows[0]?.[0] ?? '';
  }

  /** Creates the namespace, or checks that what is there is ours (idempotent). */
  async install(bound) {
    const client = await this.#newClient();
    try {
      await bounded(this, bound, async () => {
        await client.query('BEGIN');
        await client.query(this.#texts['install-lock'], [this.#ns]);
        const columns = (await client.query({ text: this.#texts.columns, values: [this.#ns], rowMode: 'array' })).rows.map((r) => r[0]);
        if (columns.length > 0 && columns.join() !== COLUMNS.join()) {
          throw storeError('schema', this.describe, `table ${this.#ns}.records is not ours: columns ${columns.join(', ')}`);
        }
        await client.query(this.#texts.schema);
        const format = (await client.query({ text: this.#texts.format, rowMode: 'array' })).rows[0]?.[0];
        if (format !== FORMAT) throw storeError('schema', this.describe, `schema ${this.#ns} has format ${format}; this build reads ${FORMAT}`);
        await client.query('COMMIT');
      });
    } catch (e) {
      await client.query('ROLLBACK').catch(() => {});
      const failure = this.#failure(e);
      throw failure.code === 'server' ? storeError('schema', this.describe, reasonOf(failure), e) : failure;
    } finally {
      await end(client);
    }
    // Statements prepared before the schema existed are planned again on a new connection.
    this.drop();
  }

  /**
   * Test mode (`false`): tokens count from 1 instead of moving up to the server's time in µs at
   * the first write on a new authority (a promoted standby, a restarted server).
   */
  setSeedFromTime(seed) {
    this.#seedFromTime = seed;
  }

  async announce(key, owner) {
    await this.#query('announce', [`${this.#ns}_handoff`, `${key}\n${owner}`], this.#bound);
  }

  /** A listening connection of its own for the namespace's hand-off notices. */
  async listen(onNotice, onFailure) {
    const client = await this.#newClient();
    let failed = false;
    const fail = () => {
      if (failed) return;
      failed = true;
      onFailure();
    };
    client.on('error', fail);
    client.on('end', fail);
    client.on('notification', (n) => onNotice(n.payload ?? ''));
    try {
      await client.query(this.#texts.listen);
    } catch (e) {
      failed = true;
      await end(client);
      throw e;
    }
    return {
      close: async () => {
        failed = true;
        await end(client);
      },
    };
  }

  async keys(bound = this.#bound) {
    try {
      return (await this.#query('keys', [], bound)).rows.map((r) => r[0]);
    } catch (e) {
      if (e instanceof StoreError && e.code === 'no-namespace') return [];
      throw e;
    }
  }

  async lastFence(bound = this.#bound) {
    return Number((await this.#query('last-fence', [], bound)).rows[0][0]);
  }

  /** Drops the namespace's schema (tests, and operators retiring it). */
  async uninstall(bound = this.#bound) {
    const client = await this.#conn();
    await bounded(this, bound, () => client.query(this.#texts.uninstall)).catch((e) => {
      throw this.#failure(e);
    });
    this.drop();
  }

  async close() {
    this.#closed = true;
    const client = this.#client;
    this.#client = null;
    if (client) await end(client);
    // A connect under way when it closed ends its connection itself (see #connect).
    await this.#connecting?.catch(() => {});
  }

  /** What a failed statement means (as `classify` in postgres/mod.rs). */
  #failure(e) {
    if (e instanceof StoreError) return e;
    const code = e?.code ?? '';
    const message = `${code ? `${code}: ` : ''}${e?.message ?? e}`;
    if (typeof code !== 'string' || code.length !== 5 || code.startsWith('08') || code.startsWith('57P')) {
      this.drop();
      return storeError('lost', this.describe, message, e);
    }
    if (code === '42P01' || code === '3F000' || code === '26000') {
      // No table or schema (or a statement prepared before it went): not installed.
      this.drop();
      return storeError('no-namespace', this.describe);
    }
    if (code === '42501') return storeError('schema', this.describe, message);
    if (code === '2200H') return storeError('fences-exhausted', this.describe);
    const error = storeError('server', this.describe, message, e);
    // A deadlock, a serialization failure or a lock not available: the write is a conflict.
    if (['40P01', '40001', '55P03'].includes(code)) CONFLICTS.add(error);
    return error;
  }
}
