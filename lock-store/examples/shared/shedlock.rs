//! ShedLock's PostgreSQL provider, as the store benchmarks measure it (`bench`,
//! `bench_replicated`): a row per lock, inserted once, then taken with an update that only
//! succeeds when the last holder's `lock_until` has passed; released by moving `lock_until` to
//! now.

/// The table, named `table`.
pub fn create_table(table: &str) -> String {
    format!(
        "CREATE TABLE {table} (name text PRIMARY KEY, lock_until timestamptz NOT NULL, \
         locked_at timestamptz NOT NULL, locked_by text NOT NULL)"
    )
}

/// One connection taking and releasing rows of `table` as `owner` (30 s locks).
pub struct PgShedLock {
    client: postgres::Client,
    owner: String,
    take: postgres::Statement,
    give: postgres::Statement,
}

impl PgShedLock {
    pub fn connect(url: &str, table: &str, owner: String) -> Self {
        let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
        let take = client
            .prepare(&format!(
                "INSERT INTO {table} AS s (name, lock_until, locked_at, locked_by) \
                 VALUES ($1, now() + interval '30 seconds', now(), $2) \
                 ON CONFLICT (name) DO UPDATE SET lock_until = EXCLUDED.lock_until, \
                 locked_at = EXCLUDED.locked_at, locked_by = EXCLUDED.locked_by \
                 WHERE s.lock_until <= now()"
            ))
            .unwrap();
        let give = client
            .prepare(&format!(
                "UPDATE {table} SET lock_until = now() WHERE name = $1 AND locked_by = $2"
            ))
            .unwrap();
        PgShedLock {
            client,
            owner,
            take,
            give,
        }
    }

    /// Tries to take `key`; whether it was taken.
    pub fn take(&mut self, key: &str) -> bool {
        self.client
            .execute(&self.take, &[&key, &self.owner])
            .unwrap()
            == 1
    }

    /// Releases `key` (taken by this connection).
    pub fn give(&mut self, key: &str) {
        self.client
            .execute(&self.give, &[&key, &self.owner])
            .unwrap();
    }
}
