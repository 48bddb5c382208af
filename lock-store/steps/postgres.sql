-- The PostgreSQL store's steps: everything its clients send. Format: steps/README.md.
-- Placeholders: {ns} the namespace's schema (a checked identifier), {format} the schema format
-- the client installs, {channel} the hand-off channel ("<ns>_handoff").

-- step: schema
-- The schema, in one batch (simple query). No index but the key's: every write changes
-- forget_at, and an index on it would make every write a non-HOT update (new entries in every
-- index). Collection walks the keys instead (step collect). Earlier builds of this format made
-- an index on forget_at and functions collect and now_ms: installing again drops them.
--
-- take_over(from_time): the first write that takes tokens on a server that is not the
-- namespace's last authority (meta 'authority': the server's start instant; a promoted standby,
-- a restart, a restore from an older copy all change it) moves the sequence up to the server's
-- time in microseconds (unless from_time is false: tests that expect tokens 1, 2, 3...), once,
-- before its tokens: tokens that a lost tail of writes had issued are not issued again (the time
-- passed since they were issued is more than their count, at fewer than a million grants a
-- second). Where an authority was recorded before on another timeline (meta 'timeline': a
-- promoted standby and a point-in-time restore start a new one; a restart of a durable server
-- keeps it and loses nothing), it also starts the recovery: no tokens until now + meta
-- 'longest' (the longest a written lease held its place: one the last authority granted may
-- have been lost with its record and still be held), in meta 'recovering_until', which it
-- answers (0: no recovery). A writer whose statement began before another's take-over
-- committed calls it too, finds the take-over done and answers 'recovering_until' as it is
-- now (its statement's snapshot predates it): the gate refuses it as well. SECURITY DEFINER: a role that may
-- only use the namespace calls it (EXECUTE is PUBLIC's by default); under an advisory lock, so
-- that one writer moves it.
--
-- hold_for(ms): raises meta 'longest' to ms (a write's lease holds its place that long); the
-- writes call it when their connection has not sent as long before. SECURITY DEFINER as well.
CREATE SCHEMA IF NOT EXISTS {ns};
CREATE TABLE IF NOT EXISTS {ns}.meta (name text PRIMARY KEY, value text NOT NULL);
INSERT INTO {ns}.meta VALUES ('format', '{format}') ON CONFLICT (name) DO NOTHING;
INSERT INTO {ns}.meta VALUES ('longest', '0') ON CONFLICT (name) DO NOTHING;
CREATE TABLE IF NOT EXISTS {ns}.records (
    key text PRIMARY KEY,
    version bigint NOT NULL,
    record bytea NOT NULL,
    fences bigint[] NOT NULL,
    forget_at bigint
) WITH (fillfactor = 90);
DROP INDEX IF EXISTS {ns}.records_forget_at;
CREATE SEQUENCE IF NOT EXISTS {ns}.fences MINVALUE 1 MAXVALUE 9007199254740991 NO CYCLE;
DROP FUNCTION IF EXISTS {ns}.take_over();
CREATE OR REPLACE FUNCTION {ns}.take_over(from_time boolean) RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $take_over$
DECLARE
    here text := extract(epoch FROM pg_postmaster_start_time())::text;
    line text := substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8);
    floor_us bigint := floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint;
    was text;
    last bigint;
    until bigint := 0;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('expiring-locks take-over {ns}'));
    SELECT value INTO was FROM {ns}.meta WHERE name = 'authority';
    IF was IS NOT DISTINCT FROM here THEN
        -- Another writer took over since this statement's snapshot (it waited for the lock
        -- above): answer the recovery it started, read now, which the statement's own
        -- snapshot cannot see.
        RETURN COALESCE((SELECT value::bigint FROM {ns}.meta WHERE name = 'recovering_until'), 0);
    END IF;
    IF from_time THEN
        SELECT CASE WHEN is_called THEN last_value ELSE 0 END INTO last FROM {ns}.fences;
        IF floor_us > last THEN
            PERFORM setval('{ns}.fences', LEAST(floor_us, 9007199254740991));
        END IF;
    END IF;
    IF was IS NOT NULL AND (SELECT value FROM {ns}.meta WHERE name = 'timeline') IS DISTINCT FROM line THEN
        until := floor_us / 1000 + COALESCE((SELECT value::bigint FROM {ns}.meta WHERE name = 'longest'), 0);
        INSERT INTO {ns}.meta VALUES ('recovering_until', until::text) ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value;
    END IF;
    INSERT INTO {ns}.meta VALUES ('authority', here) ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value;
    INSERT INTO {ns}.meta VALUES ('timeline', line) ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value;
    RETURN until;
END
$take_over$;
CREATE OR REPLACE FUNCTION {ns}.hold_for(ms bigint) RETURNS bigint LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $hold_for$
    UPDATE {ns}.meta SET value = ms::text WHERE ms > 0 AND name = 'longest' AND value::bigint < ms RETURNING 0
$hold_for$;
DROP FUNCTION IF EXISTS {ns}.collect(int);
DROP FUNCTION IF EXISTS {ns}.collect(text, int);
DROP FUNCTION IF EXISTS {ns}.now_ms();

-- step: install-lock
-- $1 the schema's name. Installers of one namespace take turns (in the install transaction).
SELECT pg_advisory_xact_lock(hashtext('expiring-locks install ' || $1))

-- step: columns
-- $1 the schema's name: the columns of its records table, to tell ours from another's.
SELECT column_name::text FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'records' ORDER BY column_name

-- step: meta-exists
-- $1 "<schema>.meta": whether the namespace is installed (reads only).
SELECT to_regclass($1)::text

-- step: format
SELECT value FROM {ns}.meta WHERE name = 'format'

-- step: outdated
-- $1 "<schema>.records_forget_at", $2 the schema's name: whether objects of an earlier build
-- are there, or hold_for(bigint) is missing (installing again removes them, creates it and
-- take_over(boolean)).
SELECT to_regclass($1) IS NOT NULL OR EXISTS (SELECT 1 FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace WHERE n.nspname = $2 AND p.proname IN ('collect', 'now_ms')) OR to_regprocedure('{ns}.hold_for(bigint)') IS NULL

-- step: read-only
-- Whether this session may not write (a standby, or a server set read-only): a Node client that
-- must find the host accepting writes (target_session_attrs=read-write) asks each host it
-- reaches. The Rust clients' driver sends the same question.
SHOW transaction_read_only

-- step: plan-cache
-- Once per connection: generic plans from the first execution (the custom plans PostgreSQL
-- tries first re-plan the compare-and-set at every call; measured with pgbench -M prepared).
SET plan_cache_mode = force_generic_plan

-- step: read
-- $1 key. The server's time in milliseconds, and the row (none: NULLs).
SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint, r.version, r.record, r.fences FROM (SELECT 1) AS one LEFT JOIN {ns}.records AS r ON r.key = $1

-- step: update
-- $1 key, $2 expected, $3 version, $4 record, $5 tokens, $6 forget_at, $7 not_before, $8 the
-- record replaced, $9 whether tokens start at the server's time on a new authority (false:
-- they count from 1, for tests), $10 how long a lease of the new record holds its place (ms;
-- 0 when this connection already wrote as long: hold_for() keeps the longest in meta). Answers one
-- row: the tokens if it wrote, or (NULL, until, the server's time) while the server recovers
-- (nothing written); no row on a conflict. The row is locked first (locked) and the tokens
-- taken in the UPDATE that joins it: a writer that loses the race waits for the lock, finds
-- the version changed and takes none. (Without it, two UPDATEs of one row both computed their
-- new row, nextval included, before the loser found the version changed: every lost race
-- burnt tokens.) not_before is a timestamptz compared with clock_timestamp() as it is.
-- took_over runs take_over() first when the write would be made (locked) and the server is not
-- the namespace's last authority (see schema); gate holds the end of a recovery under way;
-- {take_over} and {hold_for} are the functions, or pg_catalog.num_nulls (which answers 0 and
-- does nothing) in a namespace installed before they existed.
WITH locked AS MATERIALIZED (SELECT key FROM {ns}.records WHERE key = $1 AND version = $2 AND record = $8 AND ($7::timestamptz IS NULL OR clock_timestamp() >= $7::timestamptz) FOR NO KEY UPDATE), took_over AS (SELECT {take_over}($9::boolean) AS until WHERE $5::int > 0 AND EXISTS (SELECT 1 FROM locked) AND (SELECT value FROM {ns}.meta WHERE name = 'authority') IS DISTINCT FROM extract(epoch FROM pg_postmaster_start_time())::text), clock AS (SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS t), gate AS MATERIALIZED (SELECT until FROM took_over WHERE until > (SELECT t FROM clock) UNION ALL SELECT m.value::bigint FROM {ns}.meta AS m WHERE $5::int > 0 AND EXISTS (SELECT 1 FROM locked) AND m.name = 'recovering_until' AND m.value::bigint > (SELECT t FROM clock)), written AS (UPDATE {ns}.records AS r SET version = $3, record = $4, forget_at = $6, fences = CASE WHEN $5::int = 0 THEN '{}'::bigint[] ELSE ARRAY(SELECT nextval('{ns}.fences') FROM (SELECT count(*) FROM took_over) AS t, generate_series(1, $5::int)) END FROM locked WHERE r.key = locked.key AND NOT EXISTS (SELECT 1 FROM gate) RETURNING r.fences, CASE WHEN $10::bigint > 0 THEN {hold_for}($10::bigint) END) SELECT fences, NULL::bigint, NULL::bigint FROM written UNION ALL SELECT NULL, max(until), (SELECT t FROM clock) FROM gate HAVING count(*) > 0

-- step: insert
-- $1 key, $2 version, $3 record, $4 tokens, $5 forget_at, $6 not_before, $7 and $8 as update's
-- $9 and $10; answers as update. fresh: the write would be made; its NOT EXISTS spares a token
-- when the row is already there (ON CONFLICT alone would take it first).
WITH fresh AS MATERIALIZED (SELECT 1 WHERE ($6::timestamptz IS NULL OR clock_timestamp() >= $6::timestamptz) AND NOT EXISTS (SELECT 1 FROM {ns}.records AS e WHERE e.key = $1)), took_over AS (SELECT {take_over}($7::boolean) AS until WHERE $4::int > 0 AND EXISTS (SELECT 1 FROM fresh) AND (SELECT value FROM {ns}.meta WHERE name = 'authority') IS DISTINCT FROM extract(epoch FROM pg_postmaster_start_time())::text), clock AS (SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS t), gate AS MATERIALIZED (SELECT until FROM took_over WHERE until > (SELECT t FROM clock) UNION ALL SELECT m.value::bigint FROM {ns}.meta AS m WHERE $4::int > 0 AND EXISTS (SELECT 1 FROM fresh) AND m.name = 'recovering_until' AND m.value::bigint > (SELECT t FROM clock)), written AS (INSERT INTO {ns}.records AS r (key, version, record, fences, forget_at) SELECT $1, $2, $3, CASE WHEN $4::int = 0 THEN '{}'::bigint[] ELSE ARRAY(SELECT nextval('{ns}.fences') FROM (SELECT count(*) FROM took_over) AS t, generate_series(1, $4::int)) END, $5 FROM fresh WHERE NOT EXISTS (SELECT 1 FROM gate) ON CONFLICT (key) DO NOTHING RETURNING r.fences, CASE WHEN $8::bigint > 0 THEN {hold_for}($8::bigint) END) SELECT fences, NULL::bigint, NULL::bigint FROM written UNION ALL SELECT NULL, max(until), (SELECT t FROM clock) FROM gate HAVING count(*) > 0

-- step: take-over-exists
-- Whether the namespace has take_over(boolean) and hold_for(bigint) (installed by this build or
-- a later one, after take_over(boolean)): the update and insert call them ({take_over},
-- {hold_for}); without them they call num_nulls until `install` runs again.
SELECT to_regprocedure('{ns}.hold_for(bigint)') IS NOT NULL

-- step: delete
-- $1 key, $2 expected, $3 not_before, $4 the record replaced.
DELETE FROM {ns}.records WHERE key = $1 AND version = $2 AND record = $4 AND ($3::timestamptz IS NULL OR clock_timestamp() >= $3::timestamptz) RETURNING '{}'::bigint[]

-- step: collect
-- $1 after, $2 limit: deletes the records that are free and forgotten among the $2 keys after
-- $1 (a cursor each writer walks through the key space); answers the last key looked at, NULL
-- at the end (the walk starts again). A statement planned once rather than a SQL function
-- planned at each call (measured with pgbench: ~0.24 ms against ~0.45 ms per step).
WITH seen AS (SELECT key FROM {ns}.records WHERE key > $1 ORDER BY key LIMIT $2), gone AS (DELETE FROM {ns}.records WHERE key IN (SELECT key FROM {ns}.records WHERE key IN (SELECT key FROM seen) AND forget_at <= floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint FOR UPDATE SKIP LOCKED) RETURNING 1) SELECT max(key) FROM seen

-- step: keys
-- The keys that hold something (a tombstone is 8 bytes), in byte order.
SELECT key FROM {ns}.records WHERE length(record) > 8 ORDER BY convert_to(key, 'UTF8')

-- step: last-fence
SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {ns}.fences

-- step: clear
-- Tests: every record, the tokens, the authority and the recovery go.
DELETE FROM {ns}.records; ALTER SEQUENCE {ns}.fences RESTART WITH 1; DELETE FROM {ns}.meta WHERE name IN ('authority', 'timeline', 'recovering_until'); UPDATE {ns}.meta SET value = '0' WHERE name = 'longest';

-- step: uninstall
DROP SCHEMA IF EXISTS {ns} CASCADE

-- step: announce
-- $1 the channel, $2 the notice ("key\nowner").
SELECT pg_notify($1, $2)

-- step: listen
LISTEN "{channel}"
