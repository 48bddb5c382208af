// A store's driver by URL scheme. Each store's client is an optional peer dependency, imported
// only when its scheme is opened.

import { StoreError } from '../errors.js';

/** Opens the driver of `url` for `namespace`. */
export async function openDriver(url, namespace, options = {}) {
  const scheme = url.split(':')[0];
  switch (scheme) {
    case 'redis':
    case 'rediss': {
      const { RedisDriver } = await import('./redis.js');
      return RedisDriver.open(url, namespace, options);
    }
    case 'postgres':
    case 'postgresql': {
      const { PostgresDriver } = await import('./postgres.js');
      return PostgresDriver.open(url, namespace, options);
    }
    case 'mysql':
    case 'mariadb': {
      const { MysqlDriver } = await import('./mysql.js');
      return MysqlDriver.open(url, namespace, options);
    }
    case 'sqlite': {
      const { SqliteDriver } = await import('./sqlite.js');
      return SqliteDriver.open(url, namespace, options);
    }
    default:
      throw new StoreError('url', `bad store URL ${JSON.stringify(url.replace(/\/\/([^:@/]*):[^@/]*@/, '//$1:***@'))}: the npm package's stores are redis://, rediss://, postgres://, postgresql://, mysql://, mariadb:// and sqlite://`);
  }
}
