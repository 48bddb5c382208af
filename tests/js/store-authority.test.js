// Fences across a change of the store's authority, from Node: a namespace whose records came
// from another server (a promoted PostgreSQL standby's or MariaDB replica's copy, a restore), its
// token counter behind the tokens that server issued. The first Node grant on the new server moves the tokens up to its
// time in microseconds, above every token issued before; one write moves them once (the next
// grants count on from there), and a namespace of an earlier build (without take_over()) still
// works, counting on. The same rules as the Rust clients' (lock-store/tests/fence_failover.rs
// runs the real failover on throwaway clusters).

import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { Locks } from '../../lock-wasm/js/src/node.js';
import { MARIADB_URL, POSTGRES_URL, uniqueNamespace } from './lib/stores.js';

/** One statement as the PostgreSQL superuser of the tests. */
async function admin(sql) {
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: POSTGRES_URL });
  await client.connect();
  try {
    return (await client.query({ text: sql, rowMode: 'array' })).rows;
  } finally {
    await client.end();
  }
}

/** `n` grants of `key`, each released: their fences. */
async function grants(locks, key, n) {
  const fences = [];
  for (let i = 0; i < n; i += 1) {
    const lease = await locks.tryAcquire(key, { ttl: 60_000, owner: 'a' });
    fences.push(lease.fence);
    await lease.release();
  }
  return fences;
}

describe('PostgreSQL: a namespace whose last authority was another server', () => {
  const namespaces = [];
  after(async () => {
    for (const ns of namespaces) await admin(`DROP SCHEMA IF EXISTS ${ns} CASCADE`);
  });

  it('the first grant moves the tokens above every token the other server issued, once', async () => {
    const ns = uniqueNamespace('jsauth');
    namespaces.push(ns);
    const locks = await Locks.open(POSTGRES_URL, ns);
    try {
      const before = await grants(locks, 'job', 3);
      const [[serverUs]] = await admin(`SELECT floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint`);
      assert.ok(before[0] <= Number(serverUs), `${before[0]} at most the server's time ${serverUs}`);
      assert.ok(before[0] > Number(serverUs) - 600e6, `${before[0]}: the server's time in µs when it took over`);
      // The other server's copy: its authority, and a sequence that missed the last grants.
      // No lease held its place there (store-recovery.test.js has the recovery that follows).
      await admin(`UPDATE ${ns}.meta SET value = 'another server' WHERE name = 'authority'`);
      await admin(`UPDATE ${ns}.meta SET value = '0' WHERE name = 'longest'`);
      await admin(`SELECT setval('${ns}.fences', 2)`);
      const after_ = await grants(locks, 'job', 2);
      assert.ok(after_.every((f) => f > before[2]), `${before} then ${after_}`);
      assert.equal(after_[1], after_[0] + 1, 'moved once: the next grant counts on');
      const [[authority]] = await admin(`SELECT value FROM ${ns}.meta WHERE name = 'authority'`);
      assert.notEqual(authority, 'another server');
    } finally {
      await locks.close();
    }
  });

  it('a namespace without take_over() (an earlier build) still grants, counting on', async () => {
    const ns = uniqueNamespace('jsauth_old');
    namespaces.push(ns);
    const locks = await Locks.open(POSTGRES_URL, ns);
    try {
      await grants(locks, 'job', 1);
      await admin(`DROP FUNCTION ${ns}.take_over(boolean)`);
      await admin(`DROP FUNCTION ${ns}.hold_for(bigint)`);
      await admin(`SELECT setval('${ns}.fences', 7)`);
      await admin(`UPDATE ${ns}.meta SET value = 'another server' WHERE name = 'authority'`);
      const fresh = await Locks.open(POSTGRES_URL, ns);
      try {
        assert.deepEqual(await grants(fresh, 'job', 2), [8, 9]);
      } finally {
        await fresh.close();
      }
    } finally {
      await locks.close();
    }
  });
});

/** One statement as the MariaDB root user of the tests. */
async function mariadb(sql) {
  const mysql = await import('mysql2/promise');
  const url = new URL(MARIADB_URL);
  const conn = await mysql.createConnection({ host: url.hostname, port: Number(url.port || 3306), user: decodeURIComponent(url.username), database: url.pathname.slice(1) });
  try {
    await conn.query(sql);
  } finally {
    await conn.end();
  }
}

describe('MariaDB: a namespace whose last authority was another server', () => {
  const namespaces = [];
  after(async () => {
    for (const ns of namespaces) {
      for (const drop of [`PROCEDURE IF EXISTS \`${ns}_cas\``, `SEQUENCE IF EXISTS \`${ns}_fences\``, `TABLE IF EXISTS \`${ns}_records\``, `TABLE IF EXISTS \`${ns}_meta\``]) {
        await mariadb(`DROP ${drop}`);
      }
    }
  });

  it('a new client\'s next grant (through the single UPDATE, handed to the procedure) moves the tokens above every token the other server issued, once', async () => {
    const ns = uniqueNamespace('jsauth');
    namespaces.push(ns);
    const locks = await Locks.open(MARIADB_URL, ns);
    try {
      const before = await grants(locks, 'job', 3);
      assert.ok(before[0] > Date.now() * 1000 - 600e6, `${before[0]}: the server's time in µs when it took over`);
      assert.deepEqual(before, [before[0], before[0] + 1, before[0] + 2], 'moved once');
      // The other server's copy: its server id as the authority, a sequence behind.
      await mariadb(`INSERT INTO \`${ns}_meta\` VALUES ('authority', '99') ON DUPLICATE KEY UPDATE value = '99'`);
      await mariadb(`UPDATE \`${ns}_meta\` SET value = '0' WHERE name = 'longest'`);
      await mariadb(`ALTER SEQUENCE \`${ns}_fences\` RESTART WITH 3`);
      // A client of the new server (a session remembers the authority it saw while its server
      // and what that server applied stay the same).
      const fresh = await Locks.open(MARIADB_URL, ns);
      try {
        const after_ = await grants(fresh, 'job', 2);
        assert.ok(after_.every((f) => f > before[2]), `${before} then ${after_}`);
        assert.equal(after_[1], after_[0] + 1, 'moved once: the next grant counts on');
      } finally {
        await fresh.close();
      }
    } finally {
      await locks.close();
    }
  });
});
