-- The fence inside MariaDB: the functions of libfencing_mariadb.so and the
-- `fencing` schema. Run it once per server as an administrator, with the
-- library in the server's plugin directory (scripts/mariadb-plugin install
-- does both):
--
--   mariadb < host/engines/mariadb/sql/install.sql
--
-- Running it again keeps every fence, setting, protected table and reset
-- record, and replaces the procedures. docs/mariadb.md is the guide.

CREATE FUNCTION IF NOT EXISTS fencing_admit RETURNS STRING SONAME 'libfencing_mariadb.so';
CREATE FUNCTION IF NOT EXISTS fencing_admit_signed RETURNS STRING SONAME 'libfencing_mariadb.so';
CREATE FUNCTION IF NOT EXISTS fencing_check RETURNS INTEGER SONAME 'libfencing_mariadb.so';
CREATE FUNCTION IF NOT EXISTS fencing_refusal RETURNS STRING SONAME 'libfencing_mariadb.so';
CREATE FUNCTION IF NOT EXISTS fencing_keys_check RETURNS STRING SONAME 'libfencing_mariadb.so';
CREATE FUNCTION IF NOT EXISTS fencing_guard_info RETURNS STRING SONAME 'libfencing_mariadb.so';
CREATE FUNCTION IF NOT EXISTS fencing_trigger_sql RETURNS STRING SONAME 'libfencing_mariadb.so';

CREATE DATABASE IF NOT EXISTS fencing CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
USE fencing;

-- Every resource's fence: the lock it is bound to, the highest admitted
-- token, the last sequence under it. Resources are named within a schema
-- (the protected tables of one schema share them; another schema's
-- 'o-1' is another resource). Names are bytes, compared byte for byte. `carrier` names the table ('schema.table') whose row carries the
-- resource's mark (fence in row); the other columns then hold the mark as
-- it was when the row claimed the resource.
CREATE TABLE IF NOT EXISTS fences (
  schema_name VARCHAR(64) NOT NULL,
  resource VARBINARY(1024) NOT NULL,
  lock_name VARBINARY(1024) NOT NULL,
  high_water BIGINT NOT NULL,
  sequence BIGINT NULL,
  carrier VARCHAR(200) NULL,
  PRIMARY KEY (schema_name, resource)
) ENGINE = InnoDB;

-- What only an administrator sets: the lock service's verifier keys
-- (`<id> <algorithm> <hex>`, by line or comma; empty: tokens are not
-- verified) and the component that decides (empty: the embedded one).
CREATE TABLE IF NOT EXISTS settings (
  id TINYINT NOT NULL PRIMARY KEY CHECK (id = 1),
  verify_keys TEXT NULL,
  plugin VARCHAR(4096) NULL
) ENGINE = InnoDB;
INSERT IGNORE INTO settings (id) VALUES (1);

-- The protected tables and how.
CREATE TABLE IF NOT EXISTS protected (
  table_name VARCHAR(200) NOT NULL PRIMARY KEY,
  table_schema VARCHAR(64) NOT NULL,
  table_only VARCHAR(64) NOT NULL,
  resource_column VARCHAR(64) NOT NULL,
  token_column VARCHAR(64) NOT NULL,
  lock_column VARCHAR(64) NULL,
  sequence_column VARCHAR(64) NULL,
  policy VARCHAR(32) NOT NULL,
  fence_in_row BOOLEAN NOT NULL,
  protected_by VARCHAR(400) NOT NULL,
  protected_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
) ENGINE = InnoDB;

-- Every operator's reset: who, when, why, the fence before and after.
CREATE TABLE IF NOT EXISTS resets (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  by_user VARCHAR(400) NOT NULL,
  reason TEXT NOT NULL,
  schema_name VARCHAR(64) NOT NULL,
  resource VARBINARY(1024) NOT NULL,
  before_lock VARBINARY(1024) NULL,
  before_high_water BIGINT NULL,
  before_sequence BIGINT NULL,
  before_carrier VARCHAR(200) NULL,
  after_lock VARBINARY(1024) NULL,
  after_high_water BIGINT NULL
) ENGINE = InnoDB;

-- A reset's rewrite of a row that carries its mark, for the row's trigger
-- to let through: written and removed inside the reset's own transaction,
-- so no other transaction ever sees a row of it.
CREATE TABLE IF NOT EXISTS resetting (
  connection BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  schema_name VARCHAR(64) NOT NULL,
  resource VARBINARY(1024) NOT NULL,
  high_water BIGINT NOT NULL
) ENGINE = InnoDB;

-- The protected tables, with whether their triggers are all in place.
CREATE OR REPLACE SQL SECURITY DEFINER VIEW protection AS
  SELECT p.table_name, p.resource_column, p.token_column, p.lock_column, p.sequence_column, p.policy,
         p.fence_in_row, p.protected_by, p.protected_at,
         (SELECT COUNT(*) FROM information_schema.TRIGGERS t
           WHERE t.EVENT_OBJECT_SCHEMA = p.table_schema AND t.EVENT_OBJECT_TABLE = p.table_only
             AND t.TRIGGER_NAME LIKE 'fencing\_%') AS fence_triggers,
         IF(p.fence_in_row, 4, 3) AS fence_triggers_expected
    FROM protected p;

-- The fences as text (names are stored as bytes).
CREATE OR REPLACE SQL SECURITY DEFINER VIEW marks AS
  SELECT schema_name, CONVERT(resource USING utf8mb4) AS resource, CONVERT(lock_name USING utf8mb4) AS lock_name,
         high_water, sequence, carrier
    FROM fences;

DELIMITER //

-- Raises a refusal with its code's SQLSTATE (docs/mariadb.md "Refusals").
CREATE OR REPLACE PROCEDURE refuse(IN code INT, IN message VARCHAR(512))
  SQL SECURITY DEFINER
BEGIN
  CASE code
    WHEN 1 THEN SIGNAL SQLSTATE 'FN001' SET MESSAGE_TEXT = message;
    WHEN 2 THEN SIGNAL SQLSTATE 'FN002' SET MESSAGE_TEXT = message;
    WHEN 3 THEN SIGNAL SQLSTATE 'FN003' SET MESSAGE_TEXT = message;
    WHEN 4 THEN SIGNAL SQLSTATE 'FN004' SET MESSAGE_TEXT = message;
    WHEN 5 THEN SIGNAL SQLSTATE 'FN005' SET MESSAGE_TEXT = message;
    WHEN 6 THEN SIGNAL SQLSTATE 'FN006' SET MESSAGE_TEXT = message;
    WHEN 7 THEN SIGNAL SQLSTATE 'FN007' SET MESSAGE_TEXT = message;
    WHEN 8 THEN SIGNAL SQLSTATE 'FN008' SET MESSAGE_TEXT = message;
    WHEN 9 THEN SIGNAL SQLSTATE 'FN009' SET MESSAGE_TEXT = message;
    WHEN 11 THEN SIGNAL SQLSTATE 'FN011' SET MESSAGE_TEXT = message;
    WHEN 20 THEN SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = message;
    WHEN 21 THEN SIGNAL SQLSTATE '22003' SET MESSAGE_TEXT = message;
    WHEN 23 THEN SIGNAL SQLSTATE '40001' SET MESSAGE_TEXT = message;
    ELSE SIGNAL SQLSTATE 'FN010' SET MESSAGE_TEXT = message;
  END CASE;
END//

-- Finds 'schema.table' in the catalog; its parts, or an error naming it.
CREATE OR REPLACE PROCEDURE find_table(IN tbl VARCHAR(200), OUT sch VARCHAR(64), OUT tab VARCHAR(64), OUT eng VARCHAR(64))
  SQL SECURITY DEFINER
BEGIN
  DECLARE n INT;
  DECLARE m VARCHAR(512);
  SELECT COUNT(*), MAX(TABLE_SCHEMA), MAX(TABLE_NAME), MAX(ENGINE) INTO n, sch, tab, eng
    FROM information_schema.TABLES
   WHERE CONCAT(TABLE_SCHEMA, '.', TABLE_NAME) = tbl AND TABLE_TYPE = 'BASE TABLE';
  IF n <> 1 THEN
    SET m = CONCAT('fencing: protect: no table ', QUOTE(tbl), ' (name it as schema.table)');
    SIGNAL SQLSTATE '42S02' SET MESSAGE_TEXT = m;
  END IF;
END//

-- A column's kind for the fence: 'text' (a string whose bytes are UTF-8, or
-- bytes), 'named' (named by its text: integers, decimals, dates, enums),
-- 'token' (an integer SQL carries as signed 64-bit), or why not.
CREATE OR REPLACE FUNCTION column_kind(sch VARCHAR(64), tab VARCHAR(64), col VARCHAR(64)) RETURNS VARCHAR(200)
  SQL SECURITY DEFINER READS SQL DATA
BEGIN
  DECLARE n INT;
  DECLARE dt VARCHAR(64);
  DECLARE ct TEXT;
  DECLARE cs VARCHAR(64);
  DECLARE ex VARCHAR(200);
  SELECT COUNT(*), MAX(DATA_TYPE), MAX(COLUMN_TYPE), MAX(CHARACTER_SET_NAME), MAX(EXTRA) INTO n, dt, ct, cs, ex
    FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = sch AND TABLE_NAME = tab AND COLUMN_NAME = col;
  IF n = 0 THEN RETURN 'missing'; END IF;
  IF ex LIKE '%GENERATED%' OR ex LIKE '%VIRTUAL%' OR ex LIKE '%PERSISTENT%' OR ex LIKE '%STORED%' THEN RETURN 'generated'; END IF;
  IF dt IN ('tinyint', 'smallint', 'mediumint', 'int') OR (dt = 'bigint' AND ct NOT LIKE '%unsigned%') THEN RETURN 'token'; END IF;
  IF dt IN ('char', 'varchar', 'tinytext', 'text', 'mediumtext') THEN
    IF cs IN ('utf8mb4', 'utf8mb3', 'utf8', 'ascii') THEN RETURN 'text'; END IF;
    RETURN CONCAT('a string in ', cs, ' (use utf8mb4)');
  END IF;
  IF dt IN ('binary', 'varbinary') THEN RETURN 'text'; END IF;
  IF dt IN ('bigint', 'decimal', 'date', 'datetime', 'time', 'year', 'enum') THEN RETURN 'named'; END IF;
  RETURN CONCAT('of type ', ct);
END//

-- Whether the triggers may take `col` as the resource, token, lock or sequence column.
CREATE OR REPLACE PROCEDURE check_column(IN sch VARCHAR(64), IN tab VARCHAR(64), IN col VARCHAR(64), IN role VARCHAR(20))
  SQL SECURITY DEFINER
BEGIN
  DECLARE kind VARCHAR(200) DEFAULT column_kind(sch, tab, col);
  DECLARE m VARCHAR(512);
  DECLARE ok BOOLEAN DEFAULT CASE role
    WHEN 'resource' THEN kind IN ('text', 'token', 'named')
    WHEN 'lock' THEN kind = 'text'
    ELSE kind = 'token' END;
  IF NOT ok THEN
    SET m = CONCAT('fencing: protect: the ', role, ' column ', QUOTE(col), ' of ', sch, '.', tab, ' ',
      CASE WHEN kind = 'missing' THEN 'does not exist'
           WHEN kind = 'generated' THEN 'is generated: the triggers write it'
           WHEN role IN ('token', 'sequence') THEN
             CONCAT('must be an integer column SQL carries as signed 64-bit (BIGINT, INT, ...), not ', kind)
           WHEN role = 'lock' THEN 'must be a utf8mb4 string or binary column'
           ELSE CONCAT('is ', kind, ': its text would depend on session settings or lose bytes') END);
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = m;
  END IF;
END//

-- Refuses what would let rows change without the triggers, or a table the
-- fence cannot hold.
CREATE OR REPLACE PROCEDURE check_table(IN sch VARCHAR(64), IN tab VARCHAR(64), IN eng VARCHAR(64), IN res VARCHAR(64), IN in_row BOOLEAN)
  SQL SECURITY DEFINER
BEGIN
  DECLARE n INT;
  DECLARE m VARCHAR(512);
  IF sch IN ('fencing', 'mysql', 'information_schema', 'performance_schema', 'sys') THEN
    SET m = CONCAT('fencing: protect: the tables of ', sch, ' cannot be protected');
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = m;
  END IF;
  IF eng <> 'InnoDB' THEN
    SET m = CONCAT('fencing: protect: ', sch, '.', tab, ' is ', eng, ': a fence and its write commit together only in a transactional engine (ALTER TABLE .. ENGINE = InnoDB)');
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = m;
  END IF;
  SELECT COUNT(*) INTO n FROM information_schema.REFERENTIAL_CONSTRAINTS
   WHERE CONSTRAINT_SCHEMA = sch AND TABLE_NAME = tab
     AND (DELETE_RULE IN ('CASCADE', 'SET NULL', 'SET DEFAULT') OR UPDATE_RULE IN ('CASCADE', 'SET NULL', 'SET DEFAULT'));
  IF n > 0 THEN
    SET m = CONCAT('fencing: protect: ', sch, '.', tab, ' has a foreign key with ON DELETE/UPDATE CASCADE or SET NULL: InnoDB changes those rows without triggers');
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = m;
  END IF;
  IF LENGTH(CONCAT('fencing_', tab, '_bi')) > 64 THEN
    SET m = CONCAT('fencing: protect: the name of ', sch, '.', tab, ' is too long for its triggers'' names (at most 53 characters)');
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = m;
  END IF;
  IF in_row THEN
    -- One row per resource, named byte for byte: the resource column alone is a unique key of a binary comparison.
    SELECT COUNT(*) INTO n FROM information_schema.STATISTICS s
     WHERE s.TABLE_SCHEMA = sch AND s.TABLE_NAME = tab AND s.NON_UNIQUE = 0 AND s.COLUMN_NAME = res
       AND (SELECT COUNT(*) FROM information_schema.STATISTICS s2
             WHERE s2.TABLE_SCHEMA = sch AND s2.TABLE_NAME = tab AND s2.INDEX_NAME = s.INDEX_NAME) = 1;
    IF n = 0 THEN
      SET m = CONCAT('fencing: protect: a fence in the row needs ', QUOTE(res), ' to be a unique key of ', sch, '.', tab, ' on its own (one row per resource)');
      SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = m;
    END IF;
    SELECT COUNT(*) INTO n FROM information_schema.COLUMNS
     WHERE TABLE_SCHEMA = sch AND TABLE_NAME = tab AND COLUMN_NAME = res
       AND COLLATION_NAME IS NOT NULL AND COLLATION_NAME NOT LIKE '%\_bin';
    IF n > 0 THEN
      SET m = CONCAT('fencing: protect: a fence in the row needs a binary collation for ', QUOTE(res), ' (utf8mb4_bin): under another, two resources share a row');
      SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = m;
    END IF;
  END IF;
END//

-- Protects `tbl` ('schema.table'): every INSERT, UPDATE and DELETE is
-- decided by the component. Columns: the resource's name, the token, and
-- optionally the lock and the sequence (NULL: none); policy
-- 'non-decreasing' or 'strictly-increasing'; fence_in_row: the rows carry
-- their marks (one row per resource). Protecting again with the same mode
-- replaces the triggers and settings.
CREATE OR REPLACE PROCEDURE protect_with(IN tbl VARCHAR(200), IN resource_column VARCHAR(64), IN token_column VARCHAR(64),
    IN lock_column VARCHAR(64), IN sequence_column VARCHAR(64), IN policy VARCHAR(32), IN fence_in_row BOOLEAN)
  SQL SECURITY DEFINER
BEGIN
  DECLARE sch, tab, eng VARCHAR(64);
  DECLARE was BOOLEAN DEFAULT NULL;
  DECLARE ev VARCHAR(2);
  DECLARE i INT DEFAULT 0;
  DECLARE s MEDIUMTEXT;
  DECLARE m VARCHAR(512);
  DECLARE bad VARBINARY(1024);
  DECLARE in_row BOOLEAN DEFAULT COALESCE(fence_in_row, FALSE);
  CALL find_table(tbl, sch, tab, eng);
  CALL check_table(sch, tab, eng, resource_column, in_row);
  CALL check_column(sch, tab, resource_column, 'resource');
  CALL check_column(sch, tab, token_column, 'token');
  IF lock_column IS NOT NULL THEN CALL check_column(sch, tab, lock_column, 'lock'); END IF;
  IF sequence_column IS NOT NULL THEN CALL check_column(sch, tab, sequence_column, 'sequence'); END IF;
  IF COALESCE(policy, '') NOT IN ('non-decreasing', 'strictly-increasing') THEN
    SET m = CONCAT('fencing: protect: policy ', QUOTE(COALESCE(policy, 'NULL')), ' must be non-decreasing or strictly-increasing (policy_unknown)');
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = m;
  END IF;
  SELECT MAX(p.fence_in_row) INTO was FROM protected p WHERE p.table_name = CONCAT(sch, '.', tab);
  IF was IS NOT NULL AND was <> in_row THEN
    SET m = CONCAT('fencing: protect: ', sch, '.', tab, ' is protected with its fences ', IF(was, 'in its rows', 'in fencing.fences'), ': CALL fencing.unprotect(..) first');
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = m;
  END IF;
  WHILE i < 4 DO
    SET i = i + 1;
    SET ev = ELT(i, 'bi', 'bu', 'bd', 'ai');
    SET s = fencing_trigger_sql(ev, sch, tab, resource_column, column_kind(sch, tab, resource_column) = 'text',
                                token_column, lock_column, sequence_column, policy, in_row);
    IF s IS NOT NULL THEN
      SET s = CONCAT('CREATE OR REPLACE', SUBSTRING(s, LENGTH('CREATE') + 1));
      EXECUTE IMMEDIATE s;
    END IF;
  END WHILE;
  IF in_row THEN
    CALL claim_rows(sch, tab, resource_column, token_column, lock_column, sequence_column);
  END IF;
  REPLACE INTO protected (table_name, table_schema, table_only, resource_column, token_column, lock_column, sequence_column, policy, fence_in_row, protected_by)
    VALUES (CONCAT(sch, '.', tab), sch, tab, resource_column, token_column, lock_column, sequence_column, policy, in_row, USER());
END//

-- protect_with(tbl, resource_column, token_column, NULL, NULL, 'non-decreasing', FALSE).
CREATE OR REPLACE PROCEDURE protect(IN tbl VARCHAR(200), IN resource_column VARCHAR(64), IN token_column VARCHAR(64))
  SQL SECURITY DEFINER
BEGIN
  CALL protect_with(tbl, resource_column, token_column, NULL, NULL, 'non-decreasing', FALSE);
END//

-- `name` as an identifier.
CREATE OR REPLACE FUNCTION ident(name VARCHAR(64)) RETURNS VARCHAR(200) DETERMINISTIC NO SQL
  RETURN CONCAT('`', REPLACE(name, '`', '``'), '`')//

-- The SQL that names a row's resource, lock, token and sequence columns.
CREATE OR REPLACE FUNCTION row_sql(sch VARCHAR(64), tab VARCHAR(64), res VARCHAR(64), lk VARCHAR(64), what VARCHAR(10)) RETURNS TEXT
  SQL SECURITY DEFINER READS SQL DATA
BEGIN
  DECLARE r TEXT DEFAULT IF(column_kind(sch, tab, res) = 'text', CONCAT('t.', ident(res)), CONCAT('CAST(t.', ident(res), ' AS CHAR)'));
  RETURN CASE what
    WHEN 'resource' THEN r
    ELSE IF(lk IS NULL, r, CONCAT('COALESCE(t.', ident(lk), ', ', r, ')')) END;
END//

-- Fence in row: every row's resource is claimed by the table, unless a row
-- is behind its resource's fence (refused, naming it).
CREATE OR REPLACE PROCEDURE claim_rows(IN sch VARCHAR(64), IN tab VARCHAR(64), IN res VARCHAR(64), IN tok VARCHAR(64), IN lk VARCHAR(64), IN sq VARCHAR(64))
  SQL SECURITY DEFINER
BEGIN
  DECLARE sql_text TEXT;
  DECLARE r TEXT DEFAULT row_sql(sch, tab, res, lk, 'resource');
  DECLARE l TEXT DEFAULT row_sql(sch, tab, res, lk, 'lock');
  DECLARE q TEXT DEFAULT IF(sq IS NULL, 'NULL', CONCAT('t.', ident(sq)));
  DECLARE tk TEXT DEFAULT CONCAT('t.', ident(tok));
  DECLARE src TEXT DEFAULT CONCAT(ident(sch), '.', ident(tab));
  DECLARE me TEXT DEFAULT QUOTE(CONCAT(sch, '.', tab));
  DECLARE m VARCHAR(512);
  SET @fencing_behind = NULL;
  SET sql_text = CONCAT(
    'SELECT MIN(CONVERT(', r, ' USING utf8mb4)) INTO @fencing_behind FROM ', src, ' t JOIN fencing.fences f ON f.schema_name = ', QUOTE(sch), ' AND f.resource = ', r,
    ' WHERE (f.carrier IS NOT NULL AND f.carrier <> ', me, ') OR ', tk, ' IS NULL OR fencing_check(', r,
    ', f.lock_name, f.high_water, f.sequence, ', l, ', ', tk, ', ', q, ', NULL, NULL, NULL, NULL) <> 0');
  EXECUTE IMMEDIATE sql_text;
  IF @fencing_behind IS NOT NULL THEN
    SET m = CONCAT('fencing: protect: the row of ', LEFT(QUOTE(@fencing_behind), 100), ' in ', sch, '.', tab,
      ' is behind its resource''s fence (a lower token, another lock, an earlier sequence, or another table''s claim)');
    SIGNAL SQLSTATE '55000' SET MESSAGE_TEXT = m;
  END IF;
  SET sql_text = CONCAT(
    'INSERT INTO fencing.fences (schema_name, resource, lock_name, high_water, sequence, carrier) SELECT ', QUOTE(sch), ', ', r, ', ', l, ', COALESCE(', tk, ', 0), ', q, ', ', me,
    ' FROM ', src, ' t ON DUPLICATE KEY UPDATE lock_name = VALUES(lock_name), high_water = VALUES(high_water), sequence = VALUES(sequence), carrier = VALUES(carrier)');
  EXECUTE IMMEDIATE sql_text;
END//

-- Removes `tbl`'s triggers; the fences stay. Marks the rows carried go back
-- to fencing.fences (never below what the fence row holds).
CREATE OR REPLACE PROCEDURE unprotect(IN tbl VARCHAR(200))
  SQL SECURITY DEFINER
BEGIN
  DECLARE sql_text TEXT;
  DECLARE sch, tab, res, tok, lk, sq VARCHAR(64);
  DECLARE in_row BOOLEAN;
  DECLARE n INT;
  DECLARE m VARCHAR(512);
  DECLARE i INT DEFAULT 0;
  SELECT COUNT(*), MAX(table_schema), MAX(table_only), MAX(resource_column), MAX(token_column), MAX(lock_column), MAX(sequence_column), MAX(fence_in_row)
    INTO n, sch, tab, res, tok, lk, sq, in_row FROM protected WHERE table_name = tbl;
  IF n = 0 THEN
    SET m = CONCAT('fencing: unprotect: ', QUOTE(tbl), ' is not protected (SELECT * FROM fencing.protection)');
    SIGNAL SQLSTATE '42S02' SET MESSAGE_TEXT = m;
  END IF;
  WHILE i < 4 DO
    SET i = i + 1;
    SET sql_text = CONCAT('DROP TRIGGER IF EXISTS ', ident(sch), '.', ident(CONCAT('fencing_', tab, '_', ELT(i, 'bi', 'bu', 'bd', 'ai'))));
    EXECUTE IMMEDIATE sql_text;
  END WHILE;
  SELECT COUNT(*) INTO n FROM information_schema.TABLES WHERE TABLE_SCHEMA = sch AND TABLE_NAME = tab;
  IF in_row AND n = 1 THEN
    SET sql_text = CONCAT(
      'UPDATE fencing.fences f JOIN ', ident(sch), '.', ident(tab), ' t ON f.schema_name = ', QUOTE(sch), ' AND f.resource = ', row_sql(sch, tab, res, lk, 'resource'),
      ' SET f.lock_name = IF(t.', ident(tok), ' >= f.high_water, ', row_sql(sch, tab, res, lk, 'lock'), ', f.lock_name),',
      ' f.sequence = IF(t.', ident(tok), ' >= f.high_water, ', IF(sq IS NULL, 'NULL', CONCAT('t.', ident(sq))), ', f.sequence),',
      ' f.high_water = GREATEST(f.high_water, COALESCE(t.', ident(tok), ', 0))',
      ' WHERE f.carrier = ', QUOTE(tbl));
    EXECUTE IMMEDIATE sql_text;
  END IF;
  UPDATE fences SET carrier = NULL WHERE carrier = tbl;
  DELETE FROM protected WHERE table_name = tbl;
END//

-- The operator's reset: deletes the fence of a resource of the schema
-- `schema_name` (new_lock and new_high_water NULL), or re-binds it to
-- new_lock at new_high_water. A
-- mark a row carries is rewritten in that row. Recorded in fencing.resets
-- with who, when and why. Runs in a transaction of its own.
CREATE OR REPLACE PROCEDURE reset_fence(IN schema_name VARCHAR(64), IN resource VARBINARY(1024), IN reason TEXT, IN new_lock VARBINARY(1024), IN new_high_water BIGINT)
  SQL SECURITY DEFINER
BEGIN
  DECLARE sql_text TEXT;
  DECLARE n INT;
  DECLARE b_lock VARBINARY(1024);
  DECLARE b_hw, b_seq BIGINT;
  DECLARE b_car VARCHAR(200);
  DECLARE sch, tab, res, tok, lk VARCHAR(64);
  DECLARE rows_there INT DEFAULT 0;
  DECLARE m VARCHAR(512);
  DECLARE checked TEXT;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; SET @fencing_token = NULL, @fencing_lock = NULL; RESIGNAL; END;
  IF schema_name IS NULL THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'fencing: reset_fence: schema_name is NULL (the database of the protected tables)';
  END IF;
  IF reason IS NULL OR TRIM(reason) = '' THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'fencing: reset_fence: a reason is required (it is recorded in fencing.resets)';
  END IF;
  IF (new_lock IS NULL) <> (new_high_water IS NULL) THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'fencing: reset_fence: give both new_lock and new_high_water (re-bind), or neither (delete the fence)';
  END IF;
  SET checked = fencing_admit(NULL, NULL, NULL, COALESCE(new_lock, 'x'), COALESCE(new_high_water, 0));
  IF JSON_VALUE(checked, '$.error') IS NOT NULL OR fencing_admit(NULL, NULL, NULL, resource, 1) LIKE '{"error"%' THEN
    SET m = LEFT(CONCAT('fencing: reset_fence: ', COALESCE(JSON_VALUE(checked, '$.message'), JSON_VALUE(fencing_admit(NULL, NULL, NULL, resource, 1), '$.message'))), 500);
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = m;
  END IF;
  START TRANSACTION;
  SELECT COUNT(*), MAX(lock_name), MAX(high_water), MAX(sequence), MAX(carrier) INTO n, b_lock, b_hw, b_seq, b_car
    FROM fences WHERE fences.schema_name = schema_name AND fences.resource = resource FOR UPDATE;
  IF b_car IS NOT NULL THEN
    SELECT COUNT(*), MAX(table_schema), MAX(table_only), MAX(resource_column), MAX(token_column), MAX(lock_column)
      INTO n, sch, tab, res, tok, lk FROM protected WHERE table_name = b_car;
    IF n = 1 THEN
      SET @fencing_reset_rows = 0;
      SET sql_text = CONCAT('SELECT COUNT(*) INTO @fencing_reset_rows FROM ', ident(sch), '.', ident(tab), ' t WHERE ',
                               row_sql(sch, tab, res, lk, 'resource'), ' = ?');
      EXECUTE IMMEDIATE sql_text USING resource;
      SET rows_there = @fencing_reset_rows;
    END IF;
    IF rows_there > 0 THEN
      IF new_high_water IS NULL THEN
        SET m = CONCAT('fencing: reset_fence: the mark is carried by a row of ', b_car, ': re-bind it (new_lock, new_high_water), or delete the row');
        SIGNAL SQLSTATE '55000' SET MESSAGE_TEXT = m;
      END IF;
      INSERT INTO resetting (connection, schema_name, resource, high_water) VALUES (CONNECTION_ID(), schema_name, resource, new_high_water);
      SET @fencing_token = new_high_water, @fencing_lock = new_lock, @fencing_sequence = NULL;
      SET sql_text = CONCAT('UPDATE ', ident(sch), '.', ident(tab), ' t SET t.', ident(tok), ' = ? WHERE ',
                               row_sql(sch, tab, res, lk, 'resource'), ' = ?');
      EXECUTE IMMEDIATE sql_text USING new_high_water, resource;
      SET @fencing_token = NULL, @fencing_lock = NULL;
      DELETE FROM resetting WHERE connection = CONNECTION_ID();
      UPDATE fences SET lock_name = new_lock, high_water = new_high_water, sequence = NULL WHERE fences.schema_name = schema_name AND fences.resource = resource;
    END IF;
  END IF;
  IF rows_there = 0 THEN
    IF new_high_water IS NULL THEN
      DELETE FROM fences WHERE fences.schema_name = schema_name AND fences.resource = resource;
    ELSE
      INSERT INTO fences (schema_name, resource, lock_name, high_water, sequence, carrier) VALUES (schema_name, resource, new_lock, new_high_water, NULL, NULL)
        ON DUPLICATE KEY UPDATE lock_name = VALUES(lock_name), high_water = VALUES(high_water), sequence = NULL, carrier = NULL;
    END IF;
  END IF;
  INSERT INTO resets (by_user, reason, schema_name, resource, before_lock, before_high_water, before_sequence, before_carrier, after_lock, after_high_water)
    VALUES (USER(), reason, schema_name, resource, b_lock, b_hw, b_seq, b_car, new_lock, new_high_water);
  COMMIT;
END//

-- The lock service's verifier keys (`<id> <algorithm> <hex>`, by line or
-- comma; NULL or empty: tokens are not verified). Checked before they are
-- kept: keys that do not parse are refused, never half applied.
CREATE OR REPLACE PROCEDURE set_verify_keys(IN verify_keys TEXT)
  SQL SECURITY DEFINER
BEGIN
  DECLARE problem VARCHAR(512) DEFAULT fencing_keys_check(verify_keys);
  DECLARE m VARCHAR(512);
  IF problem IS NOT NULL THEN
    SET m = LEFT(CONCAT('fencing: set_verify_keys: ', problem), 500);
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = m;
  END IF;
  UPDATE settings SET settings.verify_keys = NULLIF(TRIM(verify_keys), '') WHERE id = 1;
END//

-- The component that decides: a `.wasm` file mariadbd can read (NULL or
-- empty: the embedded one). Checked before it is kept.
CREATE OR REPLACE PROCEDURE set_plugin(IN path VARCHAR(4096))
  SQL SECURITY DEFINER
BEGIN
  DECLARE info TEXT DEFAULT fencing_guard_info(NULLIF(path, ''));
  DECLARE m VARCHAR(512);
  IF info LIKE 'unavailable:%' THEN
    SET m = LEFT(CONCAT('fencing: set_plugin: ', info), 500);
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = m;
  END IF;
  UPDATE settings SET plugin = NULLIF(path, '') WHERE id = 1;
END//

-- A resource's mark: where a row carries it, read from that row.
CREATE OR REPLACE PROCEDURE fence(IN schema_name VARCHAR(64), IN resource VARBINARY(1024))
  SQL SECURITY DEFINER
BEGIN
  DECLARE sql_text TEXT;
  DECLARE car VARCHAR(200);
  DECLARE sch, tab, res, tok, lk, sq VARCHAR(64);
  DECLARE n INT;
  SELECT MAX(carrier) INTO car FROM fences WHERE fences.schema_name = schema_name AND fences.resource = resource;
  SELECT COUNT(*), MAX(table_schema), MAX(table_only), MAX(resource_column), MAX(token_column), MAX(lock_column), MAX(sequence_column)
    INTO n, sch, tab, res, tok, lk, sq FROM protected WHERE table_name = car;
  IF car IS NULL OR n = 0 THEN
    SELECT f.schema_name, CONVERT(f.resource USING utf8mb4) AS resource, CONVERT(f.lock_name USING utf8mb4) AS lock_name, f.high_water, f.sequence, f.carrier
      FROM fences f WHERE f.schema_name = schema_name AND f.resource = resource;
  ELSE
    SET sql_text = CONCAT('SELECT ', QUOTE(sch), ' AS schema_name, CONVERT(', row_sql(sch, tab, res, lk, 'resource'), ' USING utf8mb4) AS resource, CONVERT(',
      row_sql(sch, tab, res, lk, 'lock'), ' USING utf8mb4) AS lock_name, t.', ident(tok), ' AS high_water, ',
      IF(sq IS NULL, 'NULL', CONCAT('t.', ident(sq))), ' AS sequence, ', QUOTE(car), ' AS carrier FROM ',
      ident(sch), '.', ident(tab), ' t WHERE ', row_sql(sch, tab, res, lk, 'resource'), ' = ?');
    EXECUTE IMMEDIATE sql_text USING resource;
  END IF;
END//

DELIMITER ;

-- Who may protect tables, set keys and the plugin, and reset fences: an
-- administrator, or an account granted this role. Writers need none of it.
CREATE ROLE IF NOT EXISTS fencing_admin;
GRANT SELECT ON fencing.* TO fencing_admin;
GRANT EXECUTE ON PROCEDURE fencing.protect TO fencing_admin;
GRANT EXECUTE ON PROCEDURE fencing.protect_with TO fencing_admin;
GRANT EXECUTE ON PROCEDURE fencing.unprotect TO fencing_admin;
GRANT EXECUTE ON PROCEDURE fencing.reset_fence TO fencing_admin;
GRANT EXECUTE ON PROCEDURE fencing.set_verify_keys TO fencing_admin;
GRANT EXECUTE ON PROCEDURE fencing.set_plugin TO fencing_admin;
GRANT EXECUTE ON PROCEDURE fencing.fence TO fencing_admin;
