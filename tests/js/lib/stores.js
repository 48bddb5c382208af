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
