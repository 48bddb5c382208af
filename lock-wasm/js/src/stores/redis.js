// The Redis store's IO for StoreClient, over ioredis: the same keys, the same compare-and-set
// script (lock-store/steps/redis-cas.lua, shipped in the package's steps/ and sent byte for
// byte) and the same replies as the Rust clients (lock-store/src/redis/space.rs), so that Rust
// and Node replicas share one namespace. Nothing is decided here.

import { readFileSync } from 'node:fs';
import { StoreError } from '../errors.js';
import { bounded, corruptError, endWithin, requirePeer, storeError, withoutPassword } from './io.js';
import { explain, takeParams, tlsOptions } from './tls.js';

/** The format this build writes, kept at `{el:<ns>}:format` (as FORMAT in space.rs). */
const FORMAT = '1';
/** A record of at most this many bytes is a tombstone (TOMBSTONE in store.rs). */
const TOMBSTONE_BYTES = 8;

/** The compare-and-set script, as the Rust clients send it. */
export const REDIS_CAS = readFileSync(new URL('../../steps/redis-cas.lua', import.meta.url), 'utf8');

/** `s` with Redis glob characters escaped. */
function globEscape(s) {
  return s.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}

/** Tokens from the script's text reply ("" none, "41", "41,42"). */
function tokens(text) {
  if (text === '') return [];
  return text.split(',').map((t) => {
    const n = Number(t);
    if (!Number.isSafeInteger(n) || n <= 0) throw new StoreError('server', `unexpected fencing token ${JSON.stringify(t)}`);
    return n;
  });
}

/** QUIT on `redis` (at most a second), then no reconnection: nothing of it stays alive. */
async function quitThenStop(redis) {
  await endWithin(redis.quit(), () => redis.disconnect());
}

/** A namespace on a Redis server. @internal */
/**
 * `redis+sentinel://[user:password@]HOST:PORT[,HOST:PORT...]/PRIMARY-NAME[/DB]` as ioredis'
 * Sentinel options, read as the Rust clients read it (lock-store/src/redis/target.rs): ioredis
 * asks the Sentinels for the primary at each connect, and follows a failover.
 */
export function sentinelOptions(url, bad) {
  const rest = url.slice('redis+sentinel://'.length);
  const slash = rest.indexOf('/');
  if (slash < 0) throw bad('name the primary: redis+sentinel://HOST:PORT[,HOST:PORT...]/PRIMARY-NAME[/DB]');
  const [authority, path] = [rest.slice(0, slash), rest.slice(slash + 1)];
  if (path.includes('?')) throw bad('redis+sentinel:// takes no parameters');
  const at = authority.lastIndexOf('@');
  const credentials = at < 0 ? null : authority.slice(0, at);
  const sentinels = authority.slice(at + 1).split(',').map((address) => {
    const m = /^(?:\[([^\]]+)\]|([^:[\]]+)):(\d+)$/.exec(address);
    if (m === null) throw bad(address === '' ? 'an empty Sentinel address' : `the Sentinel address ${JSON.stringify(address)} is not HOST:PORT`);
    return { host: m[1] ?? m[2], port: Number(m[3]) };
  });
  const [name, db, extra] = path.split('/');
  if (!name) throw bad('name the primary after the Sentinels\' addresses');
  if (extra !== undefined || (db !== undefined && !/^\d+$/.test(db))) throw bad(`the database ${JSON.stringify(path.slice(name.length + 1))} is not a number`);
  const [username, password] = credentials === null ? [undefined, undefined] : credentials.split(':').map(decodeURIComponent);
  return { sentinels, name, db: db === undefined ? 0 : Number(db), ...(username ? { username } : {}), ...(password === undefined ? {} : { password }) };
}

/** The timeout when the URL gives none: a second, or half the calls' bound if that is shorter. */
const DEFAULT_WAIT_TIMEOUT_MS = 1000;

/**
 * The opt-in `WAIT` after each write (`wait_replicas=N[&wait_timeout_ms=T]`), read as the Rust
 * clients read it (lock-store/src/redis/replicas.rs): `url` without these parameters, and
 * `{ count, timeoutMs }` or null.
 */
export function replicasOf(url, bound, bad) {
  const query = url.split('#')[0].split('?')[1] ?? '';
  const given = query.split('&').map((pair) => pair.split('=')[0]);
  for (const name of ['wait_replicas', 'wait_timeout_ms']) {
    if (given.filter((n) => n === name).length > 1) throw bad(`${name} is given twice`);
  }
  const { rest, params } = takeParams(url, ['wait_replicas', 'wait_timeout_ms']);
  const count = params.get('wait_replicas');
  const timeout = params.get('wait_timeout_ms');
  if (count === undefined) {
    if (timeout !== undefined) throw bad('wait_timeout_ms needs wait_replicas=N');
    return { rest, replicas: null };
  }
  if (!/^\d+$/.test(count) || Number(count) < 1 || Number(count) > 0xffffffff) {
    throw bad(`wait_replicas=${count}: give how many replicas must acknowledge each write (1 or more)`);
  }
  let timeoutMs = Math.max(1, Math.min(DEFAULT_WAIT_TIMEOUT_MS, Math.floor(bound / 2)));
  if (timeout !== undefined) {
    if (!/^\d+$/.test(timeout) || Number(timeout) < 1 || Number(timeout) >= bound) {
      throw bad(`wait_timeout_ms=${timeout}: give milliseconds, at least 1 and less than the calls' bound (${bound} ms)`);
    }
    timeoutMs = Number(timeout);
  }
  return { rest, replicas: { count: Number(count), timeoutMs } };
}

export class RedisDriver {
  #redis;
  #prefix;
  #recordPrefix;
  #counter;
  #formatKey;
  #authority;
  #seedFromTime = true;
  /** The run_id of the server the connection reached ('' until known: the script looks). */
  #serverId = '';
  /** Connections closed so far: an INFO answered after another close says nothing. */
  #closes = 0;
  /**
   * The replicas that must acknowledge each write (`wait_replicas`), or null.
   * @type {{count: number, timeoutMs: number} | null}
   */
  #replicas = null;

  /**
   * @param {import('ioredis').Redis} redis a connection (its own: this driver may drop it)
   * @param {string} shown the URL without its password
   * @param {string} namespace a checked namespace
   */
  constructor(redis, shown, namespace) {
    this.#redis = redis;
    this.#prefix = `{el:${namespace}}`;
    this.#recordPrefix = `${this.#prefix}:k:`;
    this.#counter = `${this.#prefix}:fence`;
    this.#formatKey = `${this.#prefix}:format`;
    this.#authority = `${this.#prefix}:authority`;
    this.describe = `${shown} namespace "${namespace}"`;
    this.namespace = namespace;
    redis.defineCommand('expiringLockCas', { numberOfKeys: 3, lua: REDIS_CAS });
    // Which server each connection reached (as the Rust clients' greeting): ioredis reconnects
    // by itself, to another server after a failover; until the new one is known, writes pass
    // '' and the script looks itself.
    redis.on('close', () => {
      this.#serverId = '';
      this.#closes += 1;
    });
    redis.on('ready', () => {
      const closes = this.#closes;
      redis.info('server').then((info) => {
        if (closes === this.#closes) this.#serverId = /^run_id:(\w+)/m.exec(info)?.[1] ?? '';
      }, () => {});
    });
  }

  /**
   * Opens `url` (redis://, rediss:// or redis+sentinel://) for `namespace`. A `rediss://` URL may name the CA's file
   * (`cacert=PATH`; Node's built-in roots without it) and a client certificate
   * (`cert=PATH&key=PATH`), as `redis-cli` and the Rust clients name them.
   */
  static async open(url, namespace, options = {}) {
    const { Redis } = await requirePeer('ioredis', url);
    const shown = withoutPassword(url);
    const bad = (reason) => new StoreError('url', `bad store URL ${JSON.stringify(shown)}: ${reason}`);
    const waited = replicasOf(url, options.bound ?? 5000, bad);
    url = waited.rest;
    const { rest, params } = takeParams(url, ['cacert', 'cert', 'key']);
    const secure = url.startsWith('rediss://');
    if (!secure && params.size > 0) throw bad('cacert, cert and key are for rediss:// (TLS)');
    const tls = secure ? tlsOptions({ ca: params.get('cacert'), cert: params.get('cert'), key: params.get('key') }, bad, { ca: 'cacert', cert: 'cert', key: 'key' }) : undefined;
    const sentinel = url.startsWith('redis+sentinel://') ? sentinelOptions(url, bad) : null;
    const connection = {
      ...(tls === undefined ? {} : { tls }),
      lazyConnect: true,
      connectionName: `lock-store:${namespace}`,
      // A command in flight when its connection fails is not sent again: a compare-and-set whose
      // answer was lost is resolved by reading, as the decision loop does.
      maxRetriesPerRequest: 0,
      connectTimeout: options.bound ?? 5000,
      enableAutoPipelining: false,
    };
    const redis = sentinel === null ? new Redis(rest, connection) : new Redis({ ...sentinel, ...connection });
    // Reported to each call instead; those of the connect say why it failed (ioredis' connect()
    // then only says "Connection is closed"): a failed TLS check if one is among them, else the
    // first.
    redis.on('error', () => {});
    const seen = [];
    const recordWhy = (e) => seen.push(e);
    redis.on('error', recordWhy);
    const driver = new RedisDriver(redis, withoutPassword(url), namespace);
    driver.#replicas = waited.replicas;
    await bounded(driver, options.bound ?? 5000, () => redis.connect()).catch((e) => {
      redis.disconnect();
      const cause = seen.find((x) => explain(x).startsWith('TLS: ')) ?? seen[0] ?? e;
      // A server that wants a client certificate resets the connection after the handshake;
      // Node reports the reset, not the server's alert before it: say what it may mean.
      const reset = /** @type {{code?: string}} */ (cause).code === 'ECONNRESET';
      const hint = secure && reset && tls?.cert === undefined ? ' (if the server asks for a client certificate, name it and its key in the URL: cert=PATH&key=PATH)' : '';
      throw storeError('connect', driver.describe, `${explain(cause)}${hint}`, cause);
    }).finally(() => redis.off('error', recordWhy));
    return driver;
  }

  /** The connection (tests). */
  get redis() {
    return this.#redis;
  }

  /** Test mode (`false`): tokens count from 1 instead of being at least the server's time in µs. */
  setSeedFromTime(seed) {
    this.#seedFromTime = seed;
  }

  /** Drops the connection (after a call found no answer: it may be out of step) and reconnects. */
  drop() {
    this.#redis.disconnect(true);
  }

  #recordKey(key) {
    return `${this.#recordPrefix}${key}`;
  }

  /** The record of `key` and the server's time, with whether the namespace exists. */
  async read(key, bound) {
    const replies = await bounded(this, bound, () =>
      this.#redis.pipeline().time().hmgetBuffer(this.#recordKey(key), 'v', 'r', 'f').exists(this.#formatKey, this.#counter).exec(),
    );
    const [[e1, time], [e2, rec], [e3, present]] = replies;
    const failed = e1 ?? e2 ?? e3;
    if (failed) throw this.#failure(failed);
    if (rec[0] === null && present === 0) throw storeError('no-namespace', this.describe);
    return { record: this.#stored(key, rec[0], rec[1], rec[2]), now: this.#time(time[0], time[1]) };
  }

  /**
   * The compare-and-set (see steps/redis-cas.lua for its keys and arguments); with
   * `wait_replicas`, a `WAIT` in the same round trip, and a write made that fewer replicas
   * acknowledged is `unreplicated` (see replicasOf).
   */
  async write(key, w, bound) {
    const args = [
      this.#recordKey(key),
      this.#counter,
      this.#authority,
      w.expected,
      w.version,
      w.bytes === null ? '1' : '0',
      w.bytes === null ? Buffer.alloc(0) : Buffer.from(w.bytes),
      String(w.freshFences),
      String(w.notBefore),
      String(w.forgetAt),
      this.#seedFromTime ? '1' : '0',
      Buffer.from(w.replaces),
      String(w.holdsFor),
      this.#serverId,
    ];
    const replicas = this.#replicas;
    let reply;
    let acked = null;
    try {
      if (replicas === null) {
        reply = await bounded(this, bound, () => /** @type {any} */ (this.#redis).expiringLockCasBuffer(...args));
      } else {
        const replies = await bounded(this, bound, () =>
          /** @type {any} */ (this.#redis.pipeline()).expiringLockCasBuffer(...args).call('WAIT', replicas.count, replicas.timeoutMs).exec(),
        );
        const [[e1, cas], [e2, count]] = replies;
        if (e1) throw e1;
        reply = cas;
        acked = e2 ? e2 : count;
      }
    } catch (e) {
      throw this.#failure(e);
    }
    if (Buffer.isBuffer(reply)) {
      const fences = tokens(reply.toString('latin1'));
      if (replicas !== null && !(typeof acked === 'number' && acked >= replicas.count)) {
        const heard = typeof acked === 'number' ? `${acked} of the ${replicas.count} replicas it waits for acknowledged it within ${replicas.timeoutMs} ms (wait_replicas)` : `its WAIT failed (${explain(acked)})`;
        throw storeError('unreplicated', this.describe, heard);
      }
      return { fences };
    }
    if (Array.isArray(reply) && reply.length >= 2) {
      const [sec, usec, v = null, r = null, f = null] = reply;
      return { conflict: { record: this.#stored(key, v, r, f), now: this.#time(sec, usec) } };
    }
    throw storeError('server', this.describe, 'unexpected reply to a compare-and-set');
  }

  /** Installs the format marker unless one is there (idempotent). */
  async install(bound) {
    let found;
    try {
      found = await bounded(this, bound, () => this.#redis.set(this.#formatKey, FORMAT, 'NX', 'GET'));
    } catch (error) {
      const e = /** @type {Error} */ (error);
      if (String(e.message).includes('WRONGTYPE')) {
        throw storeError('schema', this.describe, `${this.#formatKey} is not ours (a value of another type)`);
      }
      throw this.#failure(e);
    }
    if (found !== null && found !== FORMAT) {
      throw storeError('schema', this.describe, `${this.#formatKey} holds "${found}", not this build's format ${FORMAT}`);
    }
  }

  /** Tells the namespace's waiters that `key` was handed to `owner` (best effort). */
  async announce(key, owner) {
    await this.#redis.publish(this.#channel(), `${key}\n${owner}`);
  }

  #channel() {
    return `${this.#prefix}:handoff`;
  }

  /**
   * A listening connection of its own for the namespace's hand-off notices (see Notices):
   * `onNotice(text)` for each, `onFailure()` once if it fails.
   */
  async listen(onNotice, onFailure) {
    const sub = this.#redis.duplicate({ lazyConnect: true, maxRetriesPerRequest: 0, autoResubscribe: false });
    let failed = false;
    const fail = () => {
      if (failed) return;
      failed = true;
      onFailure();
    };
    sub.on('error', fail);
    sub.on('end', fail);
    sub.on('message', (_, text) => onNotice(text));
    try {
      await sub.connect();
      await sub.subscribe(this.#channel());
    } catch (e) {
      // A connection that never listened reconnects by itself forever unless stopped.
      failed = true;
      sub.disconnect();
      throw e;
    }
    return {
      close: async () => {
        failed = true;
        await quitThenStop(sub);
      },
    };
  }

  /** Every key with a record (not tombstones), sorted. */
  async keys(bound = 5000) {
    const found = await this.#scan(`${globEscape(this.#recordPrefix)}*`, bound);
    const keys = [...new Set(found.map((k) => k.slice(this.#recordPrefix.length)))].sort(byBytes);
    if (keys.length === 0) return keys;
    const pipe = this.#redis.pipeline();
    for (const key of keys) pipe.hstrlen(this.#recordKey(key), 'r');
    const lengths = await bounded(this, bound, () => pipe.exec());
    return keys.filter((_, i) => lengths[i][1] > TOMBSTONE_BYTES);
  }

  /** The last token the namespace's counter issued (0 if none). */
  async lastFence(bound = 5000) {
    const v = await bounded(this, bound, () => this.#redis.get(this.#counter));
    return v === null ? 0 : Number(v);
  }

  /** Removes every key of the namespace (tests, and operators retiring it). */
  async uninstall(bound = 5000) {
    const all = await this.#scan(`${globEscape(this.#prefix)}:*`, bound);
    if (all.length > 0) await bounded(this, bound, () => this.#redis.del(...all));
  }

  /**
   * Closes the connection: QUIT, for at most a second (a server that does not answer, or one
   * being reconnected to, holds it no longer); then no reconnection, whatever QUIT did.
   */
  async close() {
    await quitThenStop(this.#redis);
  }

  async #scan(pattern, bound) {
    const found = [];
    let cursor = '0';
    do {
      const [next, keys] = await bounded(this, bound, () => this.#redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000));
      found.push(...keys);
      cursor = next;
    } while (cursor !== '0');
    return found;
  }

  #stored(key, v, r, f) {
    if (v === null) return null;
    const version = v.toString('latin1');
    if (!/^[0-9]+$/.test(version) || r === null) {
      throw corruptError(key, `version ${JSON.stringify(version)}`);
    }
    const text = f === null ? '' : f.toString('latin1');
    let fences;
    try {
      fences = tokens(text);
    } catch {
      throw corruptError(key, `fences ${JSON.stringify(text)}`);
    }
    return { version, bytes: new Uint8Array(r), fences };
  }

  #time(sec, usec) {
    const s = Number(sec);
    const us = Number(usec);
    if (!Number.isSafeInteger(s) || !Number.isSafeInteger(us) || s < 0 || us < 0) {
      throw storeError('server', this.describe, `unexpected TIME reply ${sec} ${usec}`);
    }
    return s * 1000 + Math.floor(us / 1000);
  }

  /** What a failed command means (as Space::failure). */
  #failure(e) {
    if (e instanceof StoreError) return e;
    const message = String(e?.message ?? e);
    if (message.includes('EXHAUSTED')) return storeError('fences-exhausted', this.describe);
    // The script's refusal of a grant while the server recovers: "RECOVERING <until> <at>".
    const recovering = /RECOVERING (\d+) (\d+)/.exec(message);
    if (recovering) return storeError('recovering', this.describe, `${recovering[1]} ${recovering[2]}`, e);
    if (/ERR|WRONGTYPE|NOSCRIPT|BUSY|READONLY|NOPERM|NOAUTH/.test(message) && !/Connection|ECONN|EPIPE|closed/.test(message)) {
      return storeError('server', this.describe, message, e);
    }
    return storeError('lost', this.describe, message, e);
  }
}

/** Keys in byte order (as the Rust stores sort them). */
function byBytes(a, b) {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return Buffer.compare(x, y);
}
