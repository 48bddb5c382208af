-- The SQLite store's steps: everything its clients send. Format: steps/README.md.
-- Every namespace of a file shares its two tables; ?1 is always the namespace. No
-- placeholders. The compare-and-set is a BEGIN IMMEDIATE transaction (writers take turns on
-- the file) in which the client reads the row (select), compares the version and the record
-- replaced, and if they match takes its tokens (take-fences), writes (upsert or delete) and
-- collects a few forgotten records (collect); the clock is the machine's, which every client
-- of the file shares.

-- step: wal
-- Once, at the install: readers never wait for the writer (the mode is the file's).
PRAGMA journal_mode = WAL

-- step: schema
CREATE TABLE IF NOT EXISTS expiring_lock_meta (
    namespace TEXT PRIMARY KEY,
    format INTEGER NOT NULL,
    last_fence INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS expiring_lock_records (
    namespace TEXT NOT NULL,
    key TEXT NOT NULL,
    version INTEGER NOT NULL,
    record BLOB NOT NULL,
    fences TEXT NOT NULL,
    forget_at INTEGER,
    PRIMARY KEY (namespace, key)
) WITHOUT ROWID;

-- step: meta-columns
-- The columns of each table, to tell ours from another's.
PRAGMA table_info(expiring_lock_meta)

-- step: records-columns
PRAGMA table_info(expiring_lock_records)

-- step: insert-namespace
-- ?2 the format the client installs.
INSERT OR IGNORE INTO expiring_lock_meta (namespace, format, last_fence) VALUES (?1, ?2, 0)

-- step: format
SELECT format FROM expiring_lock_meta WHERE namespace = ?1

-- step: select
-- ?2 key.
SELECT version, record, fences FROM expiring_lock_records WHERE namespace = ?1 AND key = ?2

-- step: take-fences
-- ?2 how many tokens: answers the last one taken.
UPDATE expiring_lock_meta SET last_fence = last_fence + ?2 WHERE namespace = ?1 RETURNING last_fence

-- step: delete
-- ?2 key.
DELETE FROM expiring_lock_records WHERE namespace = ?1 AND key = ?2

-- step: upsert
-- ?2 key, ?3 version, ?4 record, ?5 fences (text, comma-separated), ?6 forget_at.
INSERT OR REPLACE INTO expiring_lock_records (namespace, key, version, record, fences, forget_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)

-- step: collect
-- ?2 now: deletes up to 8 records that are free and forgotten.
DELETE FROM expiring_lock_records WHERE namespace = ?1 AND key IN (SELECT key FROM expiring_lock_records WHERE namespace = ?1 AND forget_at <= ?2 LIMIT 8)

-- step: keys
-- The keys that hold something (a tombstone is 8 bytes), in byte order.
SELECT key FROM expiring_lock_records WHERE namespace = ?1 AND length(record) > 8 ORDER BY CAST(key AS BLOB)

-- step: last-fence
SELECT last_fence FROM expiring_lock_meta WHERE namespace = ?1

-- step: clear-records
DELETE FROM expiring_lock_records WHERE namespace = ?1

-- step: clear-fences
UPDATE expiring_lock_meta SET last_fence = 0 WHERE namespace = ?1

-- step: uninstall
DELETE FROM expiring_lock_meta WHERE namespace = ?1
