-- The MariaDB / MySQL store's steps: everything its clients send. Format: steps/README.md.
-- Placeholders: {ns} the namespace (a checked identifier; its tables are `{ns}_meta`,
-- `{ns}_records`, its sequence `{ns}_fences`, its procedure `{ns}_cas`), {format} the format
-- the client installs. Each step is one statement.

-- step: read-only
-- Whether this server refuses writes (a replica set read-only): a client that must find the
-- host accepting writes (target_session_attrs=read-write) asks each host it reaches.
SELECT @@read_only

-- step: isolation
-- Once per connection. Row locks only: no gap locks between writers of different keys.
SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED

-- step: install-lock
-- ? "expiring-locks install <ns>". Installers of one namespace take turns (10 s at most).
SELECT GET_LOCK(?, 10)

-- step: install-unlock
SELECT RELEASE_LOCK(?)

-- step: columns
-- ? "<ns>_records": the columns of the records table, to tell ours from another's.
SELECT column_name FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = ? ORDER BY column_name

-- step: create-meta
-- The install: create-meta, insert-format, insert-longest, create-records, create-fences,
-- create-cas, mark-take-over, forget-authority, in this order (MariaDB's DDL is not
-- transactional: each is idempotent).
CREATE TABLE IF NOT EXISTS `{ns}_meta` (name VARCHAR(64) PRIMARY KEY, value VARCHAR(64) NOT NULL) ENGINE=InnoDB

-- step: insert-format
INSERT IGNORE INTO `{ns}_meta` VALUES ('format', '{format}')

-- step: insert-longest
-- The longest a written lease held its place (ms): the recovery delay (see create-cas).
INSERT IGNORE INTO `{ns}_meta` VALUES ('longest', '0')

-- step: create-records
CREATE TABLE IF NOT EXISTS `{ns}_records` (
    k VARBINARY(3072) NOT NULL PRIMARY KEY,
    version BIGINT UNSIGNED NOT NULL,
    record LONGBLOB NOT NULL,
    fences TEXT NOT NULL,
    forget_at BIGINT NULL
) ENGINE=InnoDB

-- step: create-fences
CREATE SEQUENCE IF NOT EXISTS `{ns}_fences` START WITH 1 MINVALUE 1 MAXVALUE 9007199254740991 INCREMENT BY 1 NOCACHE NOCYCLE

-- step: create-cas
-- The compare-and-set: compares the version, the record replaced and the server's clock,
-- writes, allocates the tokens, in one transaction; answers (1, time, version, NULL, fences)
-- if it wrote, (0, time, and the row as it is now) if not, or (2, time, until, NULL, NULL)
-- while the server recovers (nothing written). A write made with p_holds > 0 raises meta
-- 'longest' to it (the longest a written lease held its place; the client sends it when it is
-- longer than any its connection sent), after the recovery it may start (which covers the
-- leases granted before).
-- Before the first tokens a session takes, it reads the namespace's last authority (meta
-- 'authority': a server_id; a promoted replica has another): on another server, it moves the
-- sequence up to the server's time in microseconds (SETVAL never moves it down; it takes a
-- literal only, hence EXECUTE IMMEDIATE; not when the session's @el_fences_from_time is 0:
-- tests that expect tokens 1, 2, 3...), records the new authority and, where another server
-- was recorded before (an install marks this one's with '+': tokens move, nothing recovers),
-- starts the recovery: no tokens until now + 'longest' (meta 'recovering_until'),
-- since a lease the last authority granted may have been lost with its record and still be
-- held. The session remembers that this server is the authority and recovers no more
-- (@el_authority_seen: the namespace, server_id and gtid_slave_pos) and reads it again when
-- that changes (the server applied another primary's writes) or after an error: a read of
-- meta in the procedure costs ~40 us of the server's time per call (MariaDB optimizes a
-- procedure's statements at each call), a session variable nothing measurable.
CREATE OR REPLACE PROCEDURE `{ns}_cas`(
    IN p_key VARBINARY(3072), IN p_expected BIGINT UNSIGNED, IN p_version BIGINT UNSIGNED,
    IN p_record LONGBLOB, IN p_n INT, IN p_not_before BIGINT, IN p_forget_at BIGINT,
    IN p_replaces LONGBLOB, IN p_holds BIGINT)
MODIFIES SQL DATA
BEGIN
    DECLARE t BIGINT DEFAULT FLOOR(UNIX_TIMESTAMP(SYSDATE(6)) * 1000);
    DECLARE f TEXT DEFAULT '';
    DECLARE n_rows INT DEFAULT 0;
    DECLARE i INT DEFAULT 0;
    DECLARE until BIGINT DEFAULT 0;
    DECLARE was VARBINARY(64);
    DECLARE here VARBINARY(64) DEFAULT CAST(@@server_id AS BINARY);
    DECLARE seen VARBINARY(1024) DEFAULT CAST(CONCAT('{ns}:', @@server_id, ':', @@gtid_slave_pos) AS BINARY);
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; SET @el_authority_seen = NULL; RESIGNAL; END;
    START TRANSACTION;
    IF p_not_before IS NULL OR t >= p_not_before THEN
        IF p_expected = 0 THEN
            INSERT IGNORE INTO `{ns}_records` (k, version, record, fences, forget_at)
            VALUES (p_key, p_version, p_record, '', p_forget_at);
        ELSEIF p_record IS NULL THEN
            DELETE FROM `{ns}_records`
            WHERE k = p_key AND version = p_expected AND record = p_replaces;
        ELSE
            UPDATE `{ns}_records`
            SET version = p_version, record = p_record, fences = '', forget_at = p_forget_at
            WHERE k = p_key AND version = p_expected AND record = p_replaces;
        END IF;
        SET n_rows = ROW_COUNT();
        IF n_rows = 1 AND p_n > 0 AND NOT @el_authority_seen <=> seen THEN
            SET was = (SELECT CAST(value AS BINARY) FROM `{ns}_meta` WHERE name = 'authority');
            IF NOT was <=> here THEN
                IF COALESCE(@el_fences_from_time, 1) <> 0 THEN
                    EXECUTE IMMEDIATE CONCAT('DO SETVAL(`{ns}_fences`, ', LEAST(FLOOR(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000), 9007199254740991), ')');
                END IF;
                IF was IS NOT NULL AND TRIM(TRAILING '+' FROM was) <> here THEN
                    SET until = t + COALESCE((SELECT CAST(value AS UNSIGNED) FROM `{ns}_meta` WHERE name = 'longest'), 0);
                    INSERT INTO `{ns}_meta` VALUES ('recovering_until', until) ON DUPLICATE KEY UPDATE value = until;
                END IF;
                INSERT INTO `{ns}_meta` VALUES ('authority', here) ON DUPLICATE KEY UPDATE value = here;
            ELSE
                SET until = COALESCE((SELECT CAST(value AS SIGNED) FROM `{ns}_meta` WHERE name = 'recovering_until'), 0);
            END IF;
            IF t >= until THEN
                SET @el_authority_seen = seen;
            END IF;
        END IF;
        IF t < until THEN
            -- Recovering: the record's write is undone; what this call learnt is kept.
            ROLLBACK;
            START TRANSACTION;
            INSERT INTO `{ns}_meta` VALUES ('recovering_until', until) ON DUPLICATE KEY UPDATE value = until;
            INSERT INTO `{ns}_meta` VALUES ('authority', here) ON DUPLICATE KEY UPDATE value = here;
        ELSEIF n_rows = 1 THEN
            IF p_n > 0 THEN
                WHILE i < p_n DO
                    SET f = CONCAT(f, IF(i = 0, '', ','), NEXTVAL(`{ns}_fences`));
                    SET i = i + 1;
                END WHILE;
                UPDATE `{ns}_records` SET fences = f WHERE k = p_key;
            END IF;
            IF p_holds > 0 THEN
                UPDATE `{ns}_meta` SET value = p_holds WHERE name = 'longest' AND CAST(value AS UNSIGNED) < p_holds;
            END IF;
        END IF;
    END IF;
    COMMIT;
    IF t < until THEN
        SELECT 2, t, until, NULL, NULL;
    ELSEIF n_rows = 1 THEN
        SELECT 1, t, p_version, NULL, f;
    ELSE
        SELECT 0, t, r.version, r.record, r.fences
        FROM (SELECT 1) AS one LEFT JOIN `{ns}_records` AS r ON r.k = p_key;
    END IF;
END

-- step: mark-take-over
-- The procedure moves tokens and recovers on a new authority (the writes without it check the
-- authority where this row is '2'; an earlier build's namespace lacks it, or has '1' and a
-- procedure without p_holds, and the next install brings it up to date).
-- An install marks the authority ('+' after its server id): the next write that takes tokens
-- moves them (a gap, never a repeat), so installing again after restoring an older backup onto
-- the same server issues no token twice; it recovers only if the id is another server's.
INSERT INTO `{ns}_meta` VALUES ('take-over', '2') ON DUPLICATE KEY UPDATE value = '2'

-- step: forget-authority
UPDATE `{ns}_meta` SET value = CONCAT(value, '+') WHERE name = 'authority' AND value NOT LIKE '%+'

-- step: take-over-exists
SELECT COUNT(*) FROM `{ns}_meta` WHERE name = 'take-over' AND value = '2'

-- step: from-time
-- ? 0: this session's tokens count from 1 (tests); the procedure reads it.
SET @el_fences_from_time = ?

-- step: old-index
-- ? "<ns>_records": an index on forget_at, which earlier builds made and every write had to
-- update (collection walks the primary key instead); the next install drops it.
SELECT index_name FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = ? AND index_name = 'forget_at' LIMIT 1

-- step: drop-old-index
ALTER TABLE `{ns}_records` DROP INDEX forget_at

-- step: format
SELECT value FROM `{ns}_meta` WHERE name = 'format'

-- step: read
-- ? key. The server's time in milliseconds, and the row (none: NULLs).
SELECT FLOOR(UNIX_TIMESTAMP(SYSDATE(6)) * 1000), r.version, r.record, r.fences FROM (SELECT 1) AS one LEFT JOIN `{ns}_records` AS r ON r.k = ?

-- step: cas
-- key, expected, version, record (NULL: delete), tokens, not_before, forget_at, the record
-- replaced, how long a lease of the new record holds its place (0: no longer than this
-- connection sent before).
CALL `{ns}_cas`(?, ?, ?, ?, ?, ?, ?, ?, ?)

-- step: cas-before-take-over
-- The same in a namespace of an earlier build (a procedure without p_holds), until an install
-- brings it up to date.
CALL `{ns}_cas`(?, ?, ?, ?, ?, ?, ?, ?)

-- step: replace
-- The common write in one statement, without a procedure call: replaces an existing row that
-- takes no token. version, record, forget_at, key, expected, the record replaced, not_before
-- twice.
UPDATE `{ns}_records` SET version = ?, record = ?, fences = '', forget_at = ? WHERE k = ? AND version = ? AND record = ? AND (? IS NULL OR FLOOR(UNIX_TIMESTAMP(SYSDATE(6)) * 1000) >= ?)

-- step: replace-with-token
-- As replace, for a write that takes one token (read back with LAST_INSERT_ID()): in a
-- namespace without take-over.
UPDATE `{ns}_records` SET version = ?, record = ?, fences = LAST_INSERT_ID(NEXTVAL(`{ns}_fences`)), forget_at = ? WHERE k = ? AND version = ? AND record = ? AND (? IS NULL OR FLOOR(UNIX_TIMESTAMP(SYSDATE(6)) * 1000) >= ?)

-- step: replace-with-token-here
-- As replace-with-token, only once this session saw that this server is the namespace's
-- authority (the procedure's @el_authority_seen, as it still holds): else no row changes, and
-- the client sends the write through the procedure (which checks, moves the tokens first if it
-- must, or answers the row as it is). Compared as bytes: the connection's collation may not be
-- the procedure's.
UPDATE `{ns}_records` SET version = ?, record = ?, fences = LAST_INSERT_ID(NEXTVAL(`{ns}_fences`)), forget_at = ? WHERE k = ? AND version = ? AND record = ? AND (? IS NULL OR FLOOR(UNIX_TIMESTAMP(SYSDATE(6)) * 1000) >= ?) AND @el_authority_seen <=> CAST(CONCAT('{ns}:', @@server_id, ':', @@gtid_slave_pos) AS BINARY)

-- step: collect-next
-- after, limit: the next keys of the collection walk.
SELECT k FROM `{ns}_records` WHERE k > ? ORDER BY k LIMIT ?

-- step: collect-delete
-- after, the last key seen: deletes the free and forgotten records among them.
DELETE FROM `{ns}_records` WHERE k > ? AND k <= ? AND forget_at <= FLOOR(UNIX_TIMESTAMP(SYSDATE(6)) * 1000)

-- step: keys
-- The keys that hold something (a tombstone is 8 bytes).
SELECT k FROM `{ns}_records` WHERE LENGTH(record) > 8 ORDER BY k

-- step: last-fence
SELECT next_not_cached_value - 1 FROM `{ns}_fences`

-- step: clear-records
DELETE FROM `{ns}_records`

-- step: clear-fences
ALTER SEQUENCE `{ns}_fences` RESTART WITH 1

-- step: clear-authority
-- Tests: the authority and the recovery go too (clear-longest after it).
DELETE FROM `{ns}_meta` WHERE name IN ('authority', 'recovering_until')

-- step: clear-longest
UPDATE `{ns}_meta` SET value = '0' WHERE name = 'longest'

-- step: drop-cas
-- The uninstall: drop-cas, drop-fences, drop-records, drop-meta, in this order.
DROP PROCEDURE IF EXISTS `{ns}_cas`

-- step: drop-fences
DROP SEQUENCE IF EXISTS `{ns}_fences`

-- step: drop-records
DROP TABLE IF EXISTS `{ns}_records`

-- step: drop-meta
DROP TABLE IF EXISTS `{ns}_meta`
