// A store's driver by URL scheme. Each store's client is an optional peer dependency, imported
// only when its scheme is opened.

import { StoreError } from '../errors.js';
import { withoutPassword } from './io.js';

/** Each URL scheme: the optional peer package its driver needs, and the driver. */
export const SCHEMES = {
  redis: { peer: 'ioredis', driver: async () => (await import('./redis.js')).RedisDriver },
  rediss: { peer: 'ioredis', driver: async () => (await import('./redis.js')).RedisDriver },
  'redis+sentinel': { peer: 'ioredis', driver: async () => (await import('./redis.js')).RedisDriver },
  postgres: { peer: 'pg', driver: async () => (await import('./postgres.js')).PostgresDriver },
  postgresql: { peer: 'pg', driver: async () => (await import('./postgres.js')).PostgresDriver },
  mysql: { peer: 'mysql2', driver: async () => (await import('./mysql.js')).MysqlDriver },
  mariadb: { peer: 'mysql2', driver: async () => (await import('./mysql.js')).MysqlDriver },
  sqlite: { peer: 'better-sqlite3', driver: async () => (await import('./sqlite.js')).SqliteDriver },
};

/** Opens the driver of `url` for `namespace`. */
export async function openDriver(url, namespace, options = {}) {
  const scheme = url.split(':')[0];
  if (!Object.hasOwn(SCHEMES, scheme)) {
    const known = Object.keys(SCHEMES).map((s) => `${s}://`);
    throw new StoreError('url', `bad store URL ${JSON.stringify(withoutPassword(url))}: the npm package's stores are ${known.slice(0, -1).join(', ')} and ${known.at(-1)}`);
  }
  const driver = await SCHEMES[scheme].driver();
  return driver.open(url, namespace, options);
}
