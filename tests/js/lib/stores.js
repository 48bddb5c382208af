// The stores the Node store tests run against (the local services, or LOCK_STORE_*_URL), each
// opened in a namespace of the test's own.

import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MysqlDriver } from '../../../lock-wasm/js/src/stores/mysql.js';
import { PostgresDriver } from '../../../lock-wasm/js/src/stores/postgres.js';
import { RedisDriver } from '../../../lock-wasm/js/src/stores/redis.js';
import { SqliteDriver } from '../../../lock-wasm/js/src/stores/sqlite.js';

/** A namespace no other test run uses: the prefix, the process id and a random part. */
export function uniqueNamespace(prefix) {
  return `${prefix}_${process.pid}_${Math.floor(Math.random() * 0xffffff).toString(16)}`;
}

export const REDIS_URL = process.env.LOCK_STORE_REDIS_URL ?? 'redis://127.0.0.1:6379';
export const POSTGRES_URL = process.env.LOCK_STORE_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const MARIADB_URL = process.env.LOCK_STORE_MYSQL_URL ?? 'mariadb://root@127.0.0.1:3306/test';
/** A file of this test process, removed when it exits. */
const SQLITE_FILE = join(tmpdir(), `expiring-lock-js-${process.pid}.db`);
export const SQLITE_URL = `sqlite://${SQLITE_FILE}`;
process.on('exit', () => {
  for (const end of ['', '-wal', '-shm']) rmSync(`${SQLITE_FILE}${end}`, { force: true });
});

/** Each store: its name, its URL, and how to open its driver for a namespace. */
export const STORES = [
  { name: 'redis', url: REDIS_URL, open: (ns) => RedisDriver.open(REDIS_URL, ns) },
  { name: 'postgres', url: POSTGRES_URL, open: (ns) => PostgresDriver.open(POSTGRES_URL, ns) },
  { name: 'mariadb', url: MARIADB_URL, open: (ns) => MysqlDriver.open(MARIADB_URL, ns) },
  { name: 'sqlite', url: SQLITE_URL, open: (ns) => SqliteDriver.open(SQLITE_URL, ns) },
];

/**
 * Overwrites a stored field of `key`'s record in namespace `ns` of `store` behind every client's
 * back (its version left as it was): `field` 'record' (its bytes) or 'fences' (their text; a
 * Redis field, a PostgreSQL array), to `value`. For the tests of corrupt records.
 */
export async function damage(store, ns, key, field, value) {
  if (store.name === 'redis') {
    const { Redis } = await import('ioredis');
    const redis = new Redis(REDIS_URL);
    try {
      await redis.hset(`{el:${ns}}:k:${key}`, field === 'record' ? 'r' : 'f', value);
    } finally {
      redis.disconnect();
    }
  } else if (store.name === 'postgres') {
    const { default: pg } = await import('pg');
    const client = new pg.Client({ connectionString: POSTGRES_URL });
    await client.connect();
    try {
      await client.query(`UPDATE ${ns}.records SET ${field} = $1 WHERE key = $2`, [value, key]);
    } finally {
      await client.end();
    }
  } else if (store.name === 'mariadb') {
    const mysql = await import('mysql2/promise');
    const url = new URL(MARIADB_URL);
    const conn = await mysql.createConnection({ host: url.hostname, port: Number(url.port || 3306), user: decodeURIComponent(url.username), database: url.pathname.slice(1) });
    try {
      await conn.query(`UPDATE \`${ns}_records\` SET ${field} = ? WHERE k = ?`, [value, Buffer.from(key)]);
    } finally {
      await conn.end();
    }
  } else {
    const { default: Database } = await import('better-sqlite3');
    const db = new Database(SQLITE_FILE);
    try {
      db.prepare(`UPDATE expiring_lock_records SET ${field} = ? WHERE namespace = ? AND key = ?`).run(value, ns, key);
    } finally {
      db.close();
    }
  }
}
