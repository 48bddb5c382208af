// Every script and statement the Node store clients send is a step of lock-store/steps/, the
// files the Rust and the Node clients share (as lock-store/tests/steps.rs checks the Rust
// clients). PostgreSQL, MariaDB and SQLite: each client library's query methods are watched
// while a Node client makes every call. Redis is
// watched with MONITOR while a Node client makes every call (a read of a namespace not installed
// yet, the install, grants, a wait and its hand-off, extensions, releases, inspection, listing),
// and every EVAL/EVALSHA/SCRIPT/FUNCTION naming the namespace must be the shared script, by text
// or by its SHA-1 (the repository's file, so the package's copy cannot drift either). (A server
// that lacks the script is sent its text, the same file; the test does not flush the server's
// script cache to see it: other runs share that server.)

import { it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import pg from 'pg';
import mysql from 'mysql2';
import Database from 'better-sqlite3';
import { Locks, StoreError } from '../../lock-wasm/js/src/node.js';
import { RedisDriver } from '../../lock-wasm/js/src/stores/redis.js';
import { allSteps } from '../../lock-wasm/js/src/stores/steps.js';
import { MysqlDriver } from '../../lock-wasm/js/src/stores/mysql.js';
import { SqliteDriver } from '../../lock-wasm/js/src/stores/sqlite.js';
import { MARIADB_URL, POSTGRES_URL, REDIS_URL, SQLITE_URL, uniqueNamespace } from './lib/stores.js';

/** What a client sends that is not a step: transaction control (lock-store's steps.rs FRAMING). */
const FRAMING = ['BEGIN', 'BEGIN IMMEDIATE', 'COMMIT', 'ROLLBACK'];

/** Every call of the Locks API on `url`, in namespace `ns`, with a wait and its hand-off. */
async function everyCall(url, ns) {
  const a = await Locks.open(url, ns);
  const b = await Locks.open(url, ns);
  try {
    // A namespace that does not exist yet: reading it creates nothing.
    await assert.rejects(a.inspect('job'), (e) => e instanceof StoreError && e.code === 'no-namespace');
    assert.deepEqual(await a.keys(), []);
    await assert.rejects(a.inspect('job'), (e) => e instanceof StoreError && e.code === 'no-namespace');
    const lease = await a.tryAcquire('job', { ttl: 5000, owner: 'a' });
    await lease.extend(5000);
    const waiting = b.acquire('job', { ttl: 5000, owner: 'b', timeout: 10_000 });
    while ((await a.inspect('job')).waiters.length === 0) await new Promise((r) => setTimeout(r, 10));
    await lease.release();
    await (await waiting).release();
    // Enough writes for the collection walk to take steps.
    for (let i = 0; i < 70; i += 1) await (await a.tryAcquire(`k${i}`, { ttl: 1, owner: 'a' }))?.release();
    await a.keys();
  } finally {
    await a.close();
    await b.close();
  }
}

const SCRIPT = readFileSync(new URL('../../lock-store/steps/redis-cas.lua', import.meta.url), 'utf8');
const SHA = createHash('sha1').update(SCRIPT).digest('hex');

/** An argument as MONITOR shows it (escaped as Redis' sdscatrepr escapes) back to its text. */
function unrepr(text) {
  const named = { n: '\n', r: '\r', t: '\t', a: '\x07', b: '\b', '"': '"', '\\': '\\' };
  return text.replace(/\\(x[0-9a-f]{2}|.)/g, (_, c) => (c.length === 3 ? String.fromCharCode(parseInt(c.slice(1), 16)) : (named[c] ?? c)));
}

it('every script the Node client sends to Redis is the shared step', async () => {
  const ns = uniqueNamespace('jssteps');
  const watcher = new Redis(REDIS_URL);
  const monitor = await watcher.monitor();
  const seen = [];
  monitor.on('monitor', (_, args) => seen.push(args.map((arg) => unrepr(String(arg)))));
  try {
    await everyCall(REDIS_URL, ns);
  } finally {
    const driver = await RedisDriver.open(REDIS_URL, ns);
    await driver.uninstall();
    await driver.close();
    await new Promise((r) => setTimeout(r, 100));
    monitor.disconnect();
    watcher.disconnect();
  }
  const ours = seen.filter((args) => args.some((arg) => arg.includes(`{el:${ns}}`)));
  const scripts = ours
    .filter(([name]) => /^(EVAL|EVAL_RO|EVALSHA|EVALSHA_RO|SCRIPT|FCALL|FUNCTION)$/i.test(name))
    .map(([name, first, second]) => (/^EVALSHA/i.test(name) ? `sha:${first}` : /^SCRIPT$/i.test(name) ? second : /^EVAL/i.test(name) ? first : `${name} ${first}`));
  assert.ok(scripts.some((s) => s === `sha:${SHA}`), `no EVALSHA of the shared script among ${scripts.length} scripts`);
  const strangers = scripts.filter((s) => s !== SCRIPT && s !== `sha:${SHA}`);
  assert.deepEqual(strangers, [], 'scripts that are not steps of lock-store/steps/');
});

/** Whether `text` is a step of `file` (placeholders filled by `fill`: a text, or the texts a step may be sent as), or framing. */
function stepOf(file, fill) {
  const steps = allSteps(readFileSync(new URL(`../../lock-store/steps/${file}`, import.meta.url), 'utf8')).flatMap(([, text]) => [fill(text)].flat());
  const norm = (t) => t.trim().replace(/;$/, '').trim();
  return (text) => FRAMING.includes(norm(text)) || steps.some((st) => norm(st) === norm(text) || st.split(';').some((part) => norm(part) !== '' && norm(part) === norm(text)));
}

/** Replaces `object[name]` (a method) by one that also hands its first argument to `seen`; answers the undo. */
function spy(object, names, seen) {
  const originals = names.map((name) => object[name]);
  names.forEach((name, i) => {
    object[name] = function (first, ...rest) {
      seen(first);
      return originals[i].call(this, first, ...rest);
    };
  });
  return () => names.forEach((name, i) => (object[name] = originals[i]));
}

/** Asserts that every statement in `sent` is a step of `file`, and that the calls' statements are there. */
function expectSteps(sent, file, fill, needles) {
  const isStep = stepOf(file, fill);
  assert.ok(sent.length >= 10, `only ${sent.length} statements seen`);
  assert.deepEqual(sent.filter((t) => !isStep(t)), [], `statements that are not steps of lock-store/steps/${file}`);
  for (const needle of needles) assert.ok(sent.some((t) => t.includes(needle)), `no statement with ${needle}`);
}

it('every statement the Node client sends to PostgreSQL is a step of the shared file', async () => {
  const ns = uniqueNamespace('jssteps');
  // What the driver hands pg, as pg sends it (a statement's text, prepared or simple).
  const sent = [];
  const undo = spy(pg.Client.prototype, ['query'], (config) => sent.push(typeof config === 'string' ? config : config.text));
  try {
    await everyCall(POSTGRES_URL, ns);
  } finally {
    undo();
    const client = new pg.Client({ connectionString: POSTGRES_URL });
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS ${ns} CASCADE`);
    await client.end();
  }
  const filled = (text) => text.replaceAll('{ns}', ns).replaceAll('{format}', '1').replaceAll('{channel}', `${ns}_handoff`);
  // The writes call take_over() and hold_for(), or num_nulls() in a namespace without them.
  const fill = (text) =>
    [[`${ns}.take_over`, `${ns}.hold_for`], ['pg_catalog.num_nulls', 'pg_catalog.num_nulls']].map(([take, hold]) =>
      filled(text).replaceAll('{take_over}', take).replaceAll('{hold_for}', hold),
    );
  expectSteps(sent, 'postgres.sql', fill, ['UPDATE', 'INSERT', 'LISTEN', 'pg_notify', 'clock_timestamp', 'max(key)']);
});

it('every statement the Node client sends to MariaDB is a step of the shared file', async () => {
  const ns = uniqueNamespace('jssteps');
  // What the driver hands mysql2's connection (prepared or plain), as mysql2 sends it.
  const sent = [];
  const undo = spy(mysql.Connection.prototype, ['query', 'execute'], (q) => sent.push(typeof q === 'string' ? q : q.sql));
  try {
    await everyCall(MARIADB_URL, ns);
  } finally {
    undo();
    const driver = await MysqlDriver.open(MARIADB_URL, ns);
    await driver.uninstall();
    await driver.close();
  }
  const fill = (text) => text.replaceAll('{ns}', ns).replaceAll('{format}', '1');
  expectSteps(sent, 'mysql.sql', fill, ['CALL', 'LAST_INSERT_ID(NEXTVAL', 'GET_LOCK', 'CREATE OR REPLACE PROCEDURE', 'ORDER BY k LIMIT', 'READ COMMITTED']);
});

it('every statement the Node client sends to SQLite is a step of the shared file', async () => {
  const ns = uniqueNamespace('jssteps');
  const sent = [];
  const undo = spy(Database.prototype, ['prepare', 'exec'], (text) => sent.push(text));
  try {
    await everyCall(SQLITE_URL, ns);
  } finally {
    undo();
    const driver = await SqliteDriver.open(SQLITE_URL, ns);
    await driver.uninstall();
    await driver.close();
  }
  expectSteps(sent, 'sqlite.sql', (text) => text, ['BEGIN IMMEDIATE', 'RETURNING last_fence', 'INSERT OR REPLACE', 'journal_mode', 'forget_at <=']);
});
