-- The SQL surface of the fencing extension (schema `fencing`).
--
-- Invariants:
-- * A fence row exists only once a write to its resource was admitted; its
--   high-water mark only rises (except through fencing.reset_fence, which
--   leaves a row in fencing.resets).
-- * A write is decided with its resource's fence row locked (the fence
--   UPDATE's WHERE asks the component, src/write.rs), and the fence is raised
--   in the writing transaction: the write and its fence commit or roll back
--   together. Writers of one resource serialize on that row; writers of
--   different resources never wait for each other.
-- * One write is one transaction's writes to one resource under one lock,
--   token and sequence: once admitted, the same transaction presenting the
--   same values again (a second row, or the INSERT and UPDATE halves of an
--   upsert) is the same write and is not decided again.
-- * Refusals raise these SQLSTATEs, with a JSON DETAIL carrying the evidence:
--   FN001 stale_token, FN002 token_reused, FN003 wrong_lock,
--   FN004 invalid_token (token 0, or no token presented),
--   FN005 sequence_regressed; with fencing.verify_keys set, FN006
--   proof_missing, FN007 proof_malformed, FN008 proof_unknown_key, FN009
--   proof_bad; FN010 guard failure (the component trapped, timed out, ran out
--   of memory or could not be loaded, or the verifier keys cannot be read).
--   Arguments are taken by the rules every host shares (src/args.rs): a
--   refusal names the rule's code (name_control, number_leading_zero, ...).
-- * Rights (src/owner.rs): what writes fences is not PUBLIC's. A protected
--   table's trigger writes them for whoever may write the table;
--   fencing.try_write and fencing.check for members of fencing_writer;
--   fencing.reset_fence for members of fencing_admin. A table decides
--   writes only while its owner is a member of fencing_writer (its writes
--   raise fences). Every function pins
--   its search_path (pg_catalog, then pg_temp); the statements the extension
--   runs as the fence tables' owner name every object with its schema and
--   evaluate nothing of a protected table's but its columns; a protected
--   table is written by the extension only as its own owner.
-- * DDL that would leave a protected table's writes undecided or its fences
--   wrong is refused by the event triggers at the end of this file
--   (src/ddl.rs, fencing._ddl_end, fencing._ddl_drop).

-- A schema someone else created before the extension would let its owner
-- drop or replace the fence tables.
DO $schema$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_namespace n JOIN pg_catalog.pg_roles r ON r.oid = n.nspowner
               WHERE n.nspname = 'fencing' AND NOT r.rolsuper) THEN
        RAISE EXCEPTION USING ERRCODE = '42501',
            MESSAGE = 'fencing: the schema fencing exists and belongs to a role that is not a superuser',
            HINT = 'drop the schema, or ALTER SCHEMA fencing OWNER TO a superuser, then create the extension';
    END IF;
END
$schema$;

-- Every role that writes a protected table runs its trigger, which calls into this schema.
GRANT USAGE ON SCHEMA fencing TO PUBLIC;

-- No CHECK constraints: every write path validates names (1 to 1024 bytes)
-- and numbers (non-negative, high_water >= 1) before it gets here, and a
-- CHECK would be re-read from the catalog by every fence update.
CREATE TABLE fencing.fences (
    resource   text PRIMARY KEY,
    lock       text NOT NULL,
    high_water bigint NOT NULL,
    sequence   bigint,
    updated_at timestamptz NOT NULL DEFAULT now(),
    carrier    regclass
);
COMMENT ON TABLE fencing.fences IS
    'One row per resource with an admitted write: the lock it is bound to, the highest admitted token and the last sequence under it. Written only by the fencing functions.';
COMMENT ON COLUMN fencing.fences.carrier IS
    'A fence-in-row table whose row for this resource carries the fence (its token, lock and sequence columns); the other columns then hold the fence as it was when the table claimed the resource, a floor. NULL: this row is the fence.';
GRANT SELECT ON fencing.fences TO PUBLIC;

-- Tables protected with fence_in_row, and the columns that carry their fences.
CREATE TABLE fencing.carriers (
    tbl             regclass PRIMARY KEY,
    resource_column name NOT NULL,
    token_column    name NOT NULL,
    lock_column     name,
    sequence_column name
);
COMMENT ON TABLE fencing.carriers IS
    'Tables protected with fence_in_row: each row carries its resource''s fence, and fencing.fences holds a claim (carrier) for each of their resources.';
GRANT SELECT ON fencing.carriers TO PUBLIC;

CREATE TABLE fencing.resets (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at             timestamptz NOT NULL DEFAULT clock_timestamp(),
    by_role        name NOT NULL DEFAULT session_user,
    resource       text NOT NULL,
    old_lock       text,
    old_high_water bigint,
    old_sequence   bigint,
    new_lock       text,
    new_high_water bigint,
    reason         text NOT NULL CHECK (length(reason) BETWEEN 1 AND 1000),
    client_addr    inet DEFAULT inet_client_addr()
);
COMMENT ON TABLE fencing.resets IS 'Every operator reset or re-bind of a fence: who, when, why, and the fence before and after.';
GRANT SELECT ON fencing.resets TO PUBLIC;

-- pg_dump leaves out the rows of an extension's tables unless the extension
-- marks them: without these a dump and restore would forget every fence.
SELECT pg_catalog.pg_extension_config_dump('fencing.fences', '');
SELECT pg_catalog.pg_extension_config_dump('fencing.carriers', '');
SELECT pg_catalog.pg_extension_config_dump('fencing.resets', '');
SELECT pg_catalog.pg_extension_config_dump('fencing.resets_id_seq', '');

-- fencing_admin: the operator's role (fencing.reset_fence); fencing_writer:
-- fencing.try_write and fencing.check. Roles belong to the cluster, so a
-- second database finds them made.
DO $roles$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'fencing_admin') THEN
        CREATE ROLE fencing_admin NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'fencing_writer') THEN
        CREATE ROLE fencing_writer NOLOGIN;
    END IF;
END
$roles$;

-- The component's decision on plain values. `current_lock` NULL: the
-- resource has no fence yet. On admission high_water/last_sequence are the
-- new fence; on refusal, the fence the write was compared with.
CREATE FUNCTION fencing.admit(
    current_lock text, current_high_water bigint, current_sequence bigint,
    lock text, token bigint, sequence bigint DEFAULT NULL, policy text DEFAULT 'non-decreasing',
    OUT admitted boolean, OUT reason text, OUT high_water bigint, OUT last_sequence bigint, OUT new_term boolean)
LANGUAGE plpgsql PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    d record;
BEGIN
    SELECT * INTO d FROM fencing._decide(current_lock, current_high_water, current_sequence, lock, token, sequence, policy);
    IF d.failure IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'FN010',
            MESSAGE = format('fencing: the guard could not decide (%s)', d.failure),
            DETAIL = json_build_object('reason', 'guard_failure', 'failure', d.failure, 'presented', token)::text;
    END IF;
    admitted := d.admitted;
    reason := d.reason;
    high_water := d.high_water;
    last_sequence := d.last_sequence;
    new_term := d.new_term;
END
$$;

-- Raises a refusal with its SQLSTATE, a message naming the reason, and the
-- evidence as JSON in DETAIL: the texts the row trigger raises (src/raise.rs).
CREATE FUNCTION fencing._refuse(
    reason text, resource text, lock text, token bigint, sequence bigint,
    fence_lock text, high_water bigint, last_sequence bigint, failure text DEFAULT NULL) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r record;
BEGIN
    SELECT * INTO r FROM fencing._refusal(reason, resource, lock, token, sequence, fence_lock, high_water,
                                           last_sequence, failure);
    RAISE EXCEPTION USING ERRCODE = r.sqlstate, MESSAGE = r.message, DETAIL = r.detail;
END
$$;

-- Decides a write against its resource's fence in the calling transaction
-- and raises the fence on admission; returns a refusal (high_water and
-- last_sequence: the fence it was compared with) instead of raising it. A
-- guard failure raises FN010.
CREATE FUNCTION fencing.try_write(
    resource text, lock text, token bigint, sequence bigint DEFAULT NULL, policy text DEFAULT 'non-decreasing',
    OUT admitted boolean, OUT reason text, OUT high_water bigint, OUT last_sequence bigint, OUT new_term boolean)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    w record;
BEGIN
    SELECT * INTO w FROM fencing._try_write(resource, lock, token, sequence, policy);
    IF w.failure IS NOT NULL THEN
        PERFORM fencing._refuse('guard_failure', resource, lock, token, sequence, w.fence_lock, w.high_water,
                                w.last_sequence, w.failure);
    END IF;
    admitted := w.admitted; reason := w.reason; high_water := w.high_water; last_sequence := w.last_sequence;
    new_term := w.new_term;
END
$$;
REVOKE ALL ON FUNCTION fencing.try_write(text, text, bigint, bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fencing.try_write(text, text, bigint, bigint, text) TO fencing_writer;

-- As fencing.try_write, raising a refusal with its SQLSTATE.
CREATE FUNCTION fencing.check(
    resource text, lock text, token bigint, sequence bigint DEFAULT NULL, policy text DEFAULT 'non-decreasing')
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    w record;
BEGIN
    SELECT * INTO w FROM fencing._try_write(resource, lock, token, sequence, policy);
    IF NOT w.admitted THEN
        PERFORM fencing._refuse(w.reason, resource, lock, token, sequence, w.fence_lock, w.high_water,
                                w.last_sequence, w.failure);
    END IF;
END
$$;
REVOKE ALL ON FUNCTION fencing.check(text, text, bigint, bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fencing.check(text, text, bigint, bigint, text) TO fencing_writer;
-- What the two run: not PUBLIC's either.
REVOKE ALL ON FUNCTION fencing._try_write(text, text, bigint, bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fencing._try_write(text, text, bigint, bigint, text) TO fencing_writer;
-- Called only inside the fence statements, as the fence tables' owner.
REVOKE ALL ON FUNCTION fencing._admits(text, text, bigint, bigint, bigint, bigint, text, text, bigint, bigint, text,
                                       bigint) FROM PUBLIC;

-- The row trigger of a protected table (src/trigger.rs).
CREATE FUNCTION fencing._guard_row() RETURNS trigger LANGUAGE c AS 'MODULE_PATHNAME', 'fencing_guard_row';

-- Whether `tbl` (a fence row's carrier) is a fence-in-row table that still
-- exists; false for NULL and for a table dropped while protected.
CREATE FUNCTION fencing._carries(tbl regclass) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT EXISTS (SELECT 1 FROM fencing.carriers c JOIN pg_class r ON r.oid = c.tbl WHERE c.tbl = _carries.tbl)
$$;

-- The fence of one resource (no row when none was written yet). For a
-- resource carried by a fence-in-row table, the fence its row carries.
CREATE FUNCTION fencing.fence(resource text)
RETURNS TABLE (lock text, high_water bigint, last_sequence bigint, updated_at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    f record;
BEGIN
    SELECT x.lock, x.high_water, x.sequence, x.updated_at, x.carrier INTO f
    FROM fencing.fences x WHERE x.resource = fence.resource;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF NOT fencing._carries(f.carrier) THEN
        RETURN QUERY SELECT f.lock, f.high_water, f.sequence, f.updated_at;
        RETURN;
    END IF;
    RETURN QUERY SELECT c.lock, c.high_water, c.last_sequence, NULL::timestamptz
        FROM fencing._carried(f.carrier, fence.resource) c;
END
$$;
-- Read as the fence tables' owner: only fencing.fence and fencing.reset_fence call them.
REVOKE ALL ON FUNCTION fencing._carried(oid, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION fencing._reset_carried(oid, text, text, bigint) FROM PUBLIC;

-- An operator's reset of one resource's fence, recorded in fencing.resets.
-- Without new_lock it deletes the fence (the next write binds the resource
-- afresh, and any token is admitted once); with new_lock and new_high_water
-- it re-binds the resource to that lock at that mark.
CREATE FUNCTION fencing.reset_fence(resource text, reason text, new_lock text DEFAULT NULL, new_high_water bigint DEFAULT NULL)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    fe record;
    carrier regclass;
BEGIN
    IF reason IS NULL OR length(trim(reason)) = 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'fencing: a reset needs a reason';
    END IF;
    IF (new_lock IS NULL) <> (new_high_water IS NULL) THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'fencing: give both new_lock and new_high_water, or neither';
    END IF;
    IF new_high_water IS NOT NULL AND new_high_water < 1 THEN
        RAISE EXCEPTION USING ERRCODE = '22003', MESSAGE = 'fencing: new_high_water must be at least 1';
    END IF;
    IF new_lock IS NOT NULL THEN
        PERFORM fencing._check_name('new_lock', new_lock);
    END IF;
    SELECT f.lock, f.high_water, f.sequence, f.carrier INTO fe
    FROM fencing.fences f WHERE f.resource = reset_fence.resource FOR UPDATE;
    carrier := fe.carrier;
    -- A claim by a table that was dropped is released like any fence.
    IF fencing._carries(carrier) THEN
        -- The row carries the fence: its owner's rewrite, past its own trigger once.
        SELECT x.lock, x.high_water, x.last_sequence AS sequence INTO fe FROM fencing.fence(reset_fence.resource) x;
        PERFORM fencing._reset_carried(carrier, reset_fence.resource, new_lock, new_high_water);
        -- The claim's floor follows, so unprotect never writes back the old mark.
        UPDATE fencing.fences f SET lock = coalesce(new_lock, f.lock), high_water = coalesce(new_high_water, 0),
            sequence = NULL, updated_at = now()
        WHERE f.resource = reset_fence.resource;
    ELSIF new_lock IS NULL THEN
        DELETE FROM fencing.fences f WHERE f.resource = reset_fence.resource;
    ELSE
        INSERT INTO fencing.fences AS f (resource, lock, high_water, sequence)
        VALUES (reset_fence.resource, new_lock, new_high_water, NULL)
        ON CONFLICT ON CONSTRAINT fences_pkey DO UPDATE
            SET lock = EXCLUDED.lock, high_water = EXCLUDED.high_water, sequence = NULL, carrier = NULL, updated_at = now();
    END IF;
    INSERT INTO fencing.resets (resource, old_lock, old_high_water, old_sequence, new_lock, new_high_water, reason)
    VALUES (reset_fence.resource, fe.lock, fe.high_water, fe.sequence, new_lock, new_high_water, reason);
    RAISE LOG 'fencing: % reset the fence of % (was lock %, high-water %; now lock %, high-water %): %',
        session_user, resource, fe.lock, fe.high_water, new_lock, new_high_water, reason;
END
$$;
REVOKE ALL ON FUNCTION fencing.reset_fence(text, text, text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fencing.reset_fence(text, text, text, bigint) TO fencing_admin;

-- Refuses TRUNCATE of a protected table (and of each of its partitions and
-- children): it removes rows without row triggers.
CREATE FUNCTION fencing._refuse_truncate() RETURNS trigger LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = '0A000',
        MESSAGE = format('fencing: TRUNCATE of %I.%I would bypass the fence', TG_TABLE_SCHEMA, TG_TABLE_NAME),
        HINT = 'DELETE with SET LOCAL fencing.token, or fencing.unprotect the table first';
END
$$;

-- Tables under the fence, with their columns and policy (a partition's
-- trigger is its parent's clone, with the parent's settings).
CREATE VIEW fencing.protected AS
    SELECT t.tgrelid::regclass AS tbl, c.description AS settings
    FROM pg_catalog.pg_trigger t
    LEFT JOIN pg_catalog.pg_description c ON c.objoid = t.oid AND c.classoid = 'pg_catalog.pg_trigger'::regclass
    WHERE t.tgname = 'fencing_guard_a';
GRANT SELECT ON fencing.protected TO PUBLIC;

-- `tbl` and every table a statement on it reaches (partitions and
-- inheritance children, parents first).
CREATE FUNCTION fencing._tree(tbl regclass) RETURNS TABLE (member regclass, partition boolean, kind "char", depth int)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    WITH RECURSIVE t(relid, depth) AS (
        SELECT tbl::oid, 0
        UNION ALL
        SELECT i.inhrelid, t.depth + 1 FROM pg_inherits i JOIN t ON i.inhparent = t.relid)
    SELECT c.oid::regclass, c.relispartition, c.relkind, t.depth FROM t JOIN pg_class c ON c.oid = t.relid
    ORDER BY t.depth
$$;

-- The protected parent `tbl` is part of, if any.
CREATE FUNCTION fencing._protected_parent(tbl regclass) RETURNS regclass
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT i.inhparent::regclass FROM pg_inherits i
    WHERE i.inhrelid = tbl AND fencing._protection(i.inhparent) IS NOT NULL LIMIT 1
$$;

-- Whether `col` of `tbl` is unique on its own (a fence-in-row table's resource column).
CREATE FUNCTION fencing._unique_alone(tbl regclass, col name) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT EXISTS (
        SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
        WHERE i.indrelid = tbl AND i.indisunique AND i.indimmediate AND i.indnkeyatts = 1
          AND i.indpred IS NULL AND i.indexprs IS NULL AND a.attname = col)
$$;

-- The triggers of one table of a protected tree.
CREATE FUNCTION fencing._protect_one(tbl regclass, resource_column name, token_column name, lock_column name,
                                     sequence_column name, policy text, fence_in_row boolean) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    EXECUTE format('CREATE TRIGGER fencing_guard_a BEFORE INSERT OR UPDATE OR DELETE ON %s FOR EACH ROW '
                   'EXECUTE FUNCTION fencing._guard_row(%L, %L, %L, %L, %L, %L)', tbl, resource_column, token_column,
                   coalesce(lock_column, ''), coalesce(sequence_column, ''), policy,
                   CASE WHEN fence_in_row THEN 'row' ELSE 'table' END);
    EXECUTE format('COMMENT ON TRIGGER fencing_guard_a ON %s IS %L', tbl, json_build_object(
        'resource_column', resource_column, 'token_column', token_column, 'lock_column', lock_column,
        'sequence_column', sequence_column, 'policy', policy, 'fence_in_row', fence_in_row)::text);
END
$$;

-- Puts a table under the fence: every INSERT, UPDATE and DELETE is decided
-- in the writing transaction (see the extension's guide for where each
-- statement's token, lock and sequence come from). Protecting a table again
-- replaces its settings. What a statement on the table reaches is protected
-- with it: a partitioned table's partitions (PostgreSQL clones the row
-- trigger to each) and inheritance children (each gets the trigger), and
-- each refuses TRUNCATE.
CREATE FUNCTION fencing.protect(
    tbl regclass, resource_column name, token_column name, lock_column name DEFAULT NULL,
    sequence_column name DEFAULT NULL, policy text DEFAULT 'non-decreasing', fence_in_row boolean DEFAULT false)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $protect$
DECLARE
    rel record;
    m record;
    parent regclass;
BEGIN
    SELECT c.relkind, c.relpersistence INTO rel FROM pg_class c WHERE c.oid = tbl;
    IF rel.relkind NOT IN ('r', 'p') THEN
        RAISE EXCEPTION USING ERRCODE = '42809', MESSAGE = format('fencing: %s is not a table', tbl);
    END IF;
    PERFORM fencing._check_policy(policy);
    -- A protected table's writes raise fences (src/owner.rs, may_write_fences).
    IF NOT pg_has_role((SELECT c.relowner FROM pg_class c WHERE c.oid = tbl), 'fencing_writer', 'USAGE') THEN
        RAISE EXCEPTION USING ERRCODE = '42501',
            MESSAGE = format('fencing: the owner of %s is not a member of fencing_writer: a protected table''s writes raise fences', tbl),
            HINT = 'GRANT fencing_writer TO the table''s owner (an operator''s decision)';
    END IF;
    IF resource_column IS NULL OR token_column IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'fencing: resource_column and token_column are required';
    END IF;
    IF fence_in_row IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'fencing: fence_in_row is NULL';
    END IF;
    parent := fencing._protected_parent(tbl);
    IF parent IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '55000',
            MESSAGE = format('fencing: %s is part of protected table %s, which protects it with its own settings', tbl, parent),
            HINT = format('protect or unprotect %s', parent);
    END IF;
    FOR m IN SELECT * FROM fencing._tree(tbl) LOOP
        -- What every decision checks (src/setup.rs), for every table the statements reach.
        PERFORM fencing._check_columns(m.member, resource_column, token_column, lock_column, sequence_column);
        IF fence_in_row AND m.depth > 0 AND NOT m.partition THEN
            RAISE EXCEPTION USING ERRCODE = '0A000',
                MESSAGE = format('fencing: fence_in_row cannot cover %s, an inheritance child of %s: its rows are not unique with the parent''s', m.member, tbl),
                HINT = 'use a partitioned table, or protect without fence_in_row';
        END IF;
    END LOOP;
    IF fence_in_row AND rel.relpersistence <> 'p' THEN
        RAISE EXCEPTION USING ERRCODE = '0A000',
            MESSAGE = format('fencing: fence_in_row needs a permanent table: %s loses its rows on a crash or at the session''s end, and its marks with them', tbl);
    END IF;
    -- A row carries its resource's fence only if no other row can have that resource.
    IF fence_in_row AND NOT fencing._unique_alone(tbl, resource_column) THEN
        RAISE EXCEPTION USING ERRCODE = '42P10',
            MESSAGE = format('fencing: fence_in_row needs %I to be unique in %s on its own', resource_column, tbl),
            HINT = 'make it the primary key, or add a UNIQUE constraint on that column alone';
    END IF;
    PERFORM fencing.unprotect(tbl, true);
    FOR m IN SELECT * FROM fencing._tree(tbl) WHERE depth > 0 LOOP
        PERFORM fencing.unprotect(m.member, true);
    END LOOP;
    -- The trigger takes its lock on the table first, so no row changes while the rows claim their resources.
    PERFORM fencing._protect_one(tbl, resource_column, token_column, lock_column, sequence_column, policy, fence_in_row);
    -- A statement on a parent reaches its inheritance children's rows; partitions get PostgreSQL's clone.
    FOR m IN SELECT * FROM fencing._tree(tbl) WHERE depth > 0 AND NOT partition LOOP
        PERFORM fencing._protect_one(m.member, resource_column, token_column, lock_column, sequence_column, policy, false);
    END LOOP;
    FOR m IN SELECT * FROM fencing._tree(tbl) LOOP
        EXECUTE format('CREATE TRIGGER fencing_guard_truncate BEFORE TRUNCATE ON %s FOR EACH STATEMENT '
                       'EXECUTE FUNCTION fencing._refuse_truncate()', m.member);
    END LOOP;
    -- The rows claim their resources: the table (with its partitions) carries them.
    IF fence_in_row THEN
        PERFORM fencing._carry_claim(tbl);
    END IF;
    PERFORM fencing._check_publications();
END
$protect$;

-- Takes a table out from under the fence, with what it reaches (its fences
-- stay in fencing.fences; a fence-in-row table's fences are written there
-- from its rows).
CREATE FUNCTION fencing.unprotect(tbl regclass, if_protected boolean DEFAULT false)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    m record;
    parent regclass;
BEGIN
    IF fencing._protection(tbl) IS NULL THEN
        IF if_protected THEN RETURN; END IF;
        RAISE EXCEPTION USING ERRCODE = '42704', MESSAGE = format('fencing: %s is not protected', tbl);
    END IF;
    parent := fencing._protected_parent(tbl);
    IF parent IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '55000',
            MESSAGE = format('fencing: %s is protected as part of %s', tbl, parent),
            HINT = format('unprotect %s', parent);
    END IF;
    -- A fence-in-row table gives its fences back before its trigger stops keeping them.
    EXECUTE format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', tbl);
    PERFORM fencing._carry_release(tbl);
    FOR m IN SELECT * FROM fencing._tree(tbl) t
             WHERE EXISTS (SELECT 1 FROM pg_trigger g WHERE g.tgrelid = t.member AND g.tgname = 'fencing_guard_a'
                           AND g.tgparentid = 0) LOOP
        EXECUTE format('DROP TRIGGER IF EXISTS fencing_guard_a ON %s', m.member);
    END LOOP;
    FOR m IN SELECT * FROM fencing._tree(tbl) LOOP
        EXECUTE format('DROP TRIGGER IF EXISTS fencing_guard_truncate ON %s', m.member);
    END LOOP;
END
$$;

-- A table that joined a protected tree gets what the tree has: a partition
-- the TRUNCATE trigger (PostgreSQL clones the row trigger; a fence-in-row
-- table carries its partitions' fences itself), an inheritance child the
-- trigger itself. (ATTACH and INHERIT of a table with rows are refused
-- first, src/ddl.rs.)
CREATE FUNCTION fencing._adopt(tbl regclass) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    m record;
    args text[];
BEGIN
    FOR m IN SELECT * FROM fencing._tree(tbl) LOOP
        args := fencing._protection(fencing._protected_parent(m.member));
        CONTINUE WHEN args IS NULL;
        IF m.partition THEN
            IF NOT EXISTS (SELECT 1 FROM pg_trigger g WHERE g.tgrelid = m.member AND g.tgname = 'fencing_guard_truncate') THEN
                EXECUTE format('CREATE TRIGGER fencing_guard_truncate BEFORE TRUNCATE ON %s FOR EACH STATEMENT '
                               'EXECUTE FUNCTION fencing._refuse_truncate()', m.member);
            END IF;
        ELSIF fencing._protection(m.member) IS DISTINCT FROM args THEN
            PERFORM fencing._check_columns(m.member, args[1], args[2], nullif(args[3], ''), nullif(args[4], ''));
            EXECUTE format('DROP TRIGGER IF EXISTS fencing_guard_a ON %s', m.member);
            PERFORM fencing._protect_one(m.member, args[1], args[2], nullif(args[3], ''), nullif(args[4], ''), args[5], false);
            EXECUTE format('DROP TRIGGER IF EXISTS fencing_guard_truncate ON %s', m.member);
            EXECUTE format('CREATE TRIGGER fencing_guard_truncate BEFORE TRUNCATE ON %s FOR EACH STATEMENT '
                           'EXECUTE FUNCTION fencing._refuse_truncate()', m.member);
        END IF;
    END LOOP;
END
$$;

-- Every fence-in-row table still keeps one row per resource, durably.
CREATE FUNCTION fencing._check_carriers() RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c record;
BEGIN
    FOR c IN SELECT t.tgrelid::regclass AS tbl, fencing._protection(t.tgrelid) AS args, r.relpersistence
             FROM pg_trigger t JOIN pg_class r ON r.oid = t.tgrelid WHERE t.tgname = 'fencing_guard_a' LOOP
        CONTINUE WHEN c.args[6] IS DISTINCT FROM 'row';
        IF NOT fencing._unique_alone(c.tbl, c.args[1]) THEN
            RAISE EXCEPTION USING ERRCODE = '55000',
                MESSAGE = format('fencing: %s carries its fences in its rows, so %I must stay unique on its own', c.tbl, c.args[1]),
                HINT = 'fencing.unprotect the table first';
        END IF;
        IF c.relpersistence <> 'p' THEN
            RAISE EXCEPTION USING ERRCODE = '55000',
                MESSAGE = format('fencing: %s carries its fences in its rows and must stay a permanent table', c.tbl),
                HINT = 'fencing.unprotect the table first';
        END IF;
    END LOOP;
END
$$;

-- A publication that carries a protected table's rows carries their fences
-- (fencing.fences): a subscriber holding the rows without them would admit
-- a stale write, and would have lost every mark when clients move their
-- writes to it. (The subscriber protects its tables as the publisher does;
-- fencing.carriers and fencing.resets stay each database's own.)
CREATE FUNCTION fencing._check_publications() RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    p record;
BEGIN
    SELECT pt.pubname, format('%I.%I', pt.schemaname, pt.tablename) AS tbl INTO p
    FROM pg_publication_tables pt
    JOIN pg_namespace n ON n.nspname = pt.schemaname
    JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = pt.tablename
    WHERE fencing._protection(c.oid) IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM pg_publication_tables f
                      WHERE f.pubname = pt.pubname AND f.schemaname = 'fencing' AND f.tablename = 'fences')
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '55000',
            MESSAGE = format('fencing: publication %I publishes protected table %s without fencing.fences: a '
                             'subscriber would hold its rows without their fences', p.pubname, p.tbl),
            HINT = format('ALTER PUBLICATION %I ADD TABLE fencing.fences', p.pubname);
    END IF;
END
$$;

-- ddl_command_end: tables that joined a protected tree, fence-in-row tables
-- that must stay unique and permanent, publications, and the TRUNCATE
-- trigger a detached partition no longer needs.
CREATE FUNCTION fencing._ddl_end() RETURNS event_trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t regclass;
BEGIN
    IF TG_TAG IN ('CREATE TABLE', 'ALTER TABLE') THEN
        FOR t IN SELECT DISTINCT c.objid::regclass FROM pg_event_trigger_ddl_commands() c
                 WHERE c.classid = 'pg_class'::regclass AND c.object_type = 'table' LOOP
            PERFORM fencing._adopt(t);
        END LOOP;
        PERFORM fencing._check_carriers();
        FOR t IN SELECT g.tgrelid::regclass FROM pg_trigger g JOIN pg_class r ON r.oid = g.tgrelid
                 WHERE g.tgname = 'fencing_guard_truncate' AND pg_has_role(r.relowner, 'MEMBER')
                   AND NOT EXISTS (SELECT 1 FROM pg_trigger a WHERE a.tgrelid = g.tgrelid AND a.tgname = 'fencing_guard_a') LOOP
            EXECUTE format('DROP TRIGGER fencing_guard_truncate ON %s', t);
        END LOOP;
    END IF;
    IF TG_TAG IN ('CREATE TABLE', 'ALTER TABLE', 'CREATE PUBLICATION', 'ALTER PUBLICATION') THEN
        PERFORM fencing._check_publications();
    END IF;
END
$$;

-- sql_drop: a fence's trigger dropped from a table that still exists. A
-- fence-in-row table would lose its marks (fencing.unprotect gives them back
-- first); otherwise the drop takes the table out from under the fence, as
-- fencing.unprotect does, and its TRUNCATE trigger goes too.
CREATE FUNCTION fencing._ddl_drop() RETURNS event_trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    o record;
    t regclass;
BEGIN
    FOR o IN SELECT * FROM pg_event_trigger_dropped_objects() d
             WHERE d.object_type = 'trigger' AND d.address_names[3] IN ('fencing_guard_a', 'fencing_guard_truncate') LOOP
        t := to_regclass(format('%I.%I', o.address_names[1], o.address_names[2]));
        CONTINUE WHEN t IS NULL;
        IF EXISTS (SELECT 1 FROM fencing.carriers c WHERE c.tbl = t) THEN
            RAISE EXCEPTION USING ERRCODE = '55000',
                MESSAGE = format('fencing: %s carries its fences in its rows; dropping %s would lose its marks', t, o.address_names[3]),
                HINT = 'fencing.unprotect the table, which gives its marks back to fencing.fences';
        END IF;
        IF o.address_names[3] = 'fencing_guard_a' THEN
            EXECUTE format('DROP TRIGGER IF EXISTS fencing_guard_truncate ON %s', t);
        END IF;
    END LOOP;
    PERFORM fencing._check_carriers();
END
$$;

-- The event triggers (src/ddl.rs for ddl_command_start). Created last: the
-- script's own statements above run before them.
CREATE FUNCTION fencing._ddl_start() RETURNS event_trigger LANGUAGE c AS 'MODULE_PATHNAME', 'fencing_ddl_start';
CREATE EVENT TRIGGER fencing_ddl_start ON ddl_command_start EXECUTE FUNCTION fencing._ddl_start();
CREATE EVENT TRIGGER fencing_ddl_end ON ddl_command_end EXECUTE FUNCTION fencing._ddl_end();
CREATE EVENT TRIGGER fencing_ddl_drop ON sql_drop EXECUTE FUNCTION fencing._ddl_drop();
