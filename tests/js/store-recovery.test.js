// Recovery after a change of authority, from Node, on the tests' servers: a namespace whose last
// authority is another server (what a promoted replica's or a restored copy looks like), with
// one holder whose record survived and one whose record was lost. The same rules as the Rust
// clients' (lock-store/tests/recovery.rs; lock-store/tests/fence_failover.rs runs the real
// failovers): the new authority grants nothing for the longest a written lease held its place
// (a StoreError `recovering` with its end), the surviving holder extends and releases, the
// other learns its loss, and an acquire that may wait is granted when the recovery ends.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Locks, StoreError } from '../../lock-wasm/js/src/node.js';
import { MARIADB_URL, POSTGRES_URL, REDIS_URL, uniqueNamespace } from './lib/stores.js';

const TTL = 2_500;

/** What a failover (or an administrator) does behind the clients' backs, per store. */
const ADMIN = {
  async redis(ns, what) {
    const { Redis } = await import('ioredis');
    const redis = new Redis(REDIS_URL);
    try {
      if (what === 'take over') await redis.hset(`{el:${ns}}:authority`, 'id', 'another server');
      else if (what === 'drop') await redis.del(...(await redis.keys(`{el:${ns}}:*`)));
      else await redis.del(`{el:${ns}}:k:${what}`);
    } finally {
      redis.disconnect();
    }
  },
  async postgres(ns, what) {
    const { default: pg } = await import('pg');
    const client = new pg.Client({ connectionString: POSTGRES_URL });
    await client.connect();
    try {
      // Another server on another timeline (a promoted standby's, a restored copy's).
      if (what === 'take over') await client.query(`UPDATE ${ns}.meta SET value = 'another server' WHERE name IN ('authority', 'timeline')`);
      else if (what === 'drop') await client.query(`DROP SCHEMA IF EXISTS ${ns} CASCADE`);
      else await client.query(`DELETE FROM ${ns}.records WHERE key = $1`, [what]);
    } finally {
      await client.end();
    }
  },
  async mariadb(ns, what) {
    const mysql = await import('mysql2/promise');
    const url = new URL(MARIADB_URL);
    const conn = await mysql.createConnection({ host: url.hostname, port: Number(url.port || 3306), user: decodeURIComponent(url.username), database: url.pathname.slice(1) });
    try {
      if (what === 'take over') await conn.query(`UPDATE \`${ns}_meta\` SET value = '99' WHERE name = 'authority'`);
      else if (what === 'drop') {
        for (const drop of [`PROCEDURE IF EXISTS \`${ns}_cas\``, `SEQUENCE IF EXISTS \`${ns}_fences\``, `TABLE IF EXISTS \`${ns}_records\``, `TABLE IF EXISTS \`${ns}_meta\``]) await conn.query(`DROP ${drop}`);
      } else await conn.query(`DELETE FROM \`${ns}_records\` WHERE k = ?`, [what]);
    } finally {
      await conn.end();
    }
  },
};

const URLS = { redis: REDIS_URL, postgres: POSTGRES_URL, mariadb: MARIADB_URL };

/** The `recovering` StoreError `promise` rejects with: its span (ms) and end. */
async function recovering(promise, name) {
  const error = await promise.then(
    (lease) => assert.fail(`${name}: granted ${lease?.fence} while recovering`),
    (e) => e,
  );
  assert.ok(error instanceof StoreError, `${name}: ${error}`);
  assert.equal(error.code, 'recovering', `${name}: ${error.message}`);
  assert.equal(typeof error.until, 'number', name);
  return error.until;
}

describe('a new authority grants nothing for the longest lease, and holders learn what was lost', () => {
  for (const name of Object.keys(URLS)) {
    it(name, async () => {
      const ns = uniqueNamespace('jsrecovery');
      const url = URLS[name];
      const before = await Locks.open(url, ns);
      try {
        const kept = await before.tryAcquire('kept', { ttl: TTL, owner: 'a', keepAlive: false });
        const gone = await before.tryAcquire('gone', { ttl: TTL, owner: 'b', keepAlive: false });
        await ADMIN[name](ns, 'gone');
        await ADMIN[name](ns, 'take over');
        // A client of the new authority (its first connection opens now, as after a failover).
        const fresh = await Locks.open(url, ns);
        try {
          const until = await recovering(fresh.tryAcquire('free', { ttl: TTL, owner: 'c' }), name);
          assert.equal(await recovering(fresh.steal('kept', { ttl: TTL, owner: 'c' }), name), until, name);
          // The holder whose record survived extends and releases; the other learns its loss.
          await kept.extend(TTL);
          assert.equal(await kept.release(), true, name);
          await assert.rejects(gone.extend(TTL), name);
          assert.equal(gone.isLost, true, name);
          // An acquire that may wait is granted when the recovery ends, not before.
          const waited = await fresh.acquire('free', { ttl: TTL, owner: 'c', timeout: 10_000 });
          const info = await fresh.inspect('free');
          // grantedAt is the client's decision instant: a lower bound of the store's clock when
          // the store checked the recovery, behind it by up to the round trip of the read it
          // rests on (one CI run saw 1 ms); a grant before the end would be a whole TTL early.
          const slack = 50;
          assert.ok(info.holders[0].grantedAt >= until - slack, `${name}: granted at ${info.holders[0].grantedAt}, recovering until ${until}`);
          await waited.release();
        } finally {
          await fresh.close();
        }
      } finally {
        await before.close();
        await ADMIN[name](ns, 'drop');
      }
    });
  }
});
