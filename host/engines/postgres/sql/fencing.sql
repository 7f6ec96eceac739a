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
--
-- The PL/pgSQL functions a write may call (fencing.check, try_write) name
-- every object with its schema and use only pg_catalog operators (searched
-- first when search_path does not list it), so they need no SET search_path
-- clause, which would cost each call a GUC save.

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
    reason         text NOT NULL CHECK (length(reason) BETWEEN 1 AND 1000)
);
COMMENT ON TABLE fencing.resets IS 'Every operator reset or re-bind of a fence: who, when, why, and the fence before and after.';
GRANT SELECT ON fencing.resets TO PUBLIC;

-- pg_dump leaves out the rows of an extension's tables unless the extension
-- marks them: without these a dump and restore would forget every fence.
SELECT pg_catalog.pg_extension_config_dump('fencing.fences', '');
SELECT pg_catalog.pg_extension_config_dump('fencing.carriers', '');
SELECT pg_catalog.pg_extension_config_dump('fencing.resets', '');
SELECT pg_catalog.pg_extension_config_dump('fencing.resets_id_seq', '');

DO $roles$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'fencing_admin') THEN
        CREATE ROLE fencing_admin NOLOGIN;
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
LANGUAGE plpgsql PARALLEL SAFE AS $$
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
LANGUAGE plpgsql AS $$
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
LANGUAGE plpgsql AS $$
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

-- As fencing.try_write, raising a refusal with its SQLSTATE.
CREATE FUNCTION fencing.check(
    resource text, lock text, token bigint, sequence bigint DEFAULT NULL, policy text DEFAULT 'non-decreasing')
RETURNS void LANGUAGE plpgsql AS $$
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
    RETURN QUERY EXECUTE fencing._carried_query(f.carrier, 'SELECT {lock}, {token}, {sequence}, NULL::timestamptz FROM {tbl} t WHERE {resource} = $1 AND {token} IS NOT NULL')
        USING fence.resource;
END
$$;

-- `template` with {tbl}, {resource}, {token}, {lock} and {sequence} replaced
-- by a fence-in-row table and its columns (as text and bigint, row alias t).
CREATE FUNCTION fencing._carried_query(tbl regclass, template text) RETURNS text
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c record;
BEGIN
    SELECT * INTO STRICT c FROM fencing.carriers x WHERE x.tbl = _carried_query.tbl;
    RETURN replace(replace(replace(replace(replace(template,
        '{tbl}', tbl::text),
        '{resource}', format('t.%I::text', c.resource_column)),
        '{token}', format('t.%I::bigint', c.token_column)),
        '{lock}', CASE WHEN c.lock_column IS NULL THEN format('t.%I::text', c.resource_column)
                       ELSE format('t.%I::text', c.lock_column) END),
        '{sequence}', CASE WHEN c.sequence_column IS NULL THEN 'NULL::bigint'
                           ELSE format('t.%I::bigint', c.sequence_column) END);
END
$$;

-- Makes `tbl` carry its fences in its rows: every row claims its resource
-- in fencing.fences. Refused if a resource already has a fence that the
-- row does not carry (a higher mark, another lock, a later sequence, or a
-- claim by another table). Only the table's owner may call it.
CREATE FUNCTION fencing._carry_claim(tbl regclass, resource_column name, token_column name, lock_column name,
                                     sequence_column name) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    bad record;
BEGIN
    IF NOT pg_has_role(session_user, (SELECT relowner FROM pg_class WHERE oid = tbl), 'USAGE') THEN
        RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = format('fencing: only the owner of %s may protect it', tbl);
    END IF;
    -- Only a table whose trigger keeps its rows' fences may claim resources.
    IF NOT EXISTS (SELECT 1 FROM pg_trigger t
                   WHERE t.tgrelid = tbl AND t.tgname = 'fencing_guard_a' AND t.tgenabled <> 'D'
                     AND t.tgfoid = 'fencing._guard_row()'::regprocedure AND t.tgnargs = 6
                     AND position('\000row\000' IN encode(t.tgargs, 'escape')) > 0) THEN
        RAISE EXCEPTION USING ERRCODE = '55000', MESSAGE = format('fencing: %s is not protected with fence_in_row', tbl);
    END IF;
    DELETE FROM fencing.carriers c WHERE c.tbl = _carry_claim.tbl;
    INSERT INTO fencing.carriers VALUES (tbl, resource_column, token_column, lock_column, sequence_column);
    EXECUTE fencing._carried_query(tbl, 'SELECT {resource} AS resource FROM {tbl} t WHERE {token} < 0 LIMIT 1') INTO bad;
    IF bad.resource IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22003', MESSAGE = format('fencing: the row for %s has a negative token', bad.resource);
    END IF;
    -- The upsert locks each existing fence and takes it only if the row
    -- carries it at least as far; the check after it finds the rest.
    EXECUTE fencing._carried_query(tbl,
        'INSERT INTO fencing.fences AS f (resource, lock, high_water, sequence, carrier)
         SELECT {resource}, {lock}, coalesce({token}, 0), {sequence}, $1 FROM {tbl} t WHERE {resource} IS NOT NULL
         ON CONFLICT ON CONSTRAINT fences_pkey DO UPDATE SET lock = EXCLUDED.lock, high_water = EXCLUDED.high_water,
             sequence = EXCLUDED.sequence, carrier = EXCLUDED.carrier, updated_at = now()
         WHERE f.carrier IS NULL AND f.lock = EXCLUDED.lock AND f.high_water <= EXCLUDED.high_water
           AND NOT (f.high_water = EXCLUDED.high_water AND coalesce(f.sequence, -1) > coalesce(EXCLUDED.sequence, -1))')
        USING tbl;
    EXECUTE fencing._carried_query(tbl,
        'SELECT {resource} AS resource, {token} AS token, f.high_water, f.lock AS fence_lock, {lock} AS lock, f.carrier
         FROM {tbl} t JOIN fencing.fences f ON f.resource = {resource}
         WHERE f.carrier IS DISTINCT FROM $1 LIMIT 1') USING tbl INTO bad;
    IF bad.resource IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '55000',
            MESSAGE = format('fencing: the row for %s cannot carry its fence: %s', bad.resource,
                CASE WHEN bad.carrier IS NOT NULL THEN format('table %s carries it', bad.carrier)
                     WHEN bad.token IS NULL THEN format('the fence is at %s and the row has no token', bad.high_water)
                     WHEN bad.high_water > bad.token THEN format('the fence is at %s, above the row''s token %s', bad.high_water, bad.token)
                     WHEN bad.fence_lock <> bad.lock THEN format('the fence is bound to lock %s, the row to %s', bad.fence_lock, bad.lock)
                     ELSE 'the fence''s sequence is past the row''s' END),
            HINT = 'write the row with a token that the fence admits first, or reset the fence (fencing.reset_fence)';
    END IF;
END
$$;

-- Gives the fences `tbl` carries back to fencing.fences (never below the
-- mark the table claimed them at) and forgets the table as a carrier.
CREATE FUNCTION fencing._carry_release(tbl regclass) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM fencing.carriers c WHERE c.tbl = _carry_release.tbl) THEN
        RETURN;
    END IF;
    IF NOT pg_has_role(session_user, (SELECT relowner FROM pg_class WHERE oid = tbl), 'USAGE') THEN
        RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = format('fencing: only the owner of %s may unprotect it', tbl);
    END IF;
    EXECUTE fencing._carried_query(tbl,
        'UPDATE fencing.fences f SET lock = {lock}, high_water = greatest(f.high_water, {token}),
             sequence = CASE WHEN {token} >= f.high_water THEN {sequence} ELSE f.sequence END, carrier = NULL, updated_at = now()
         FROM {tbl} t WHERE f.carrier = $1 AND f.resource = {resource} AND {token} IS NOT NULL') USING tbl;
    -- Claims of rows that never had an admitted write: no fence.
    DELETE FROM fencing.fences f WHERE f.carrier = tbl AND f.high_water = 0;
    UPDATE fencing.fences f SET carrier = NULL WHERE f.carrier = tbl;
    DELETE FROM fencing.carriers c WHERE c.tbl = _carry_release.tbl;
END
$$;

-- An operator's reset of one resource's fence, recorded in fencing.resets.
-- Without new_lock it deletes the fence (the next write binds the resource
-- afresh, and any token is admitted once); with new_lock and new_high_water
-- it re-binds the resource to that lock at that mark.
CREATE FUNCTION fencing.reset_fence(resource text, reason text, new_lock text DEFAULT NULL, new_high_water bigint DEFAULT NULL)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    fe record;
    carrier record;
    replication_role text;
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
    SELECT f.lock, f.high_water, f.sequence, f.carrier INTO fe
    FROM fencing.fences f WHERE f.resource = reset_fence.resource FOR UPDATE;
    -- A claim by a table that was dropped is released like any fence.
    IF fencing._carries(fe.carrier) THEN
        -- The row carries the fence: reset its columns, past its own trigger.
        SELECT * INTO carrier FROM fencing.carriers c WHERE c.tbl = fe.carrier;
        SELECT x.lock, x.high_water, x.last_sequence AS sequence INTO fe FROM fencing.fence(reset_fence.resource) x;
        IF new_lock IS NOT NULL AND carrier.lock_column IS NULL AND new_lock <> resource THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = format('fencing: %s carries %s without a lock column, so its lock is %s', carrier.tbl, resource, resource);
        END IF;
        replication_role := current_setting('session_replication_role');
        PERFORM set_config('session_replication_role', 'replica', true);
        EXECUTE format('UPDATE %s t SET %I = $2%s%s WHERE t.%I::text = $1', carrier.tbl, carrier.token_column,
                       CASE WHEN carrier.lock_column IS NOT NULL AND new_lock IS NOT NULL
                            THEN format(', %I = $3', carrier.lock_column) ELSE '' END,
                       CASE WHEN carrier.sequence_column IS NOT NULL THEN format(', %I = NULL', carrier.sequence_column) ELSE '' END,
                       carrier.resource_column)
            USING resource, new_high_water, new_lock;
        PERFORM set_config('session_replication_role', replication_role, true);
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

-- Refuses TRUNCATE of a protected table: it removes rows without row triggers.
CREATE FUNCTION fencing._refuse_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = '0A000',
        MESSAGE = format('fencing: TRUNCATE of %I.%I would bypass the fence', TG_TABLE_SCHEMA, TG_TABLE_NAME),
        HINT = 'DELETE with SET LOCAL fencing.token, or fencing.unprotect the table first';
END
$$;

-- Tables under the fence, with their columns and policy.
CREATE VIEW fencing.protected AS
    SELECT t.tgrelid::regclass AS tbl, c.description AS settings
    FROM pg_catalog.pg_trigger t
    LEFT JOIN pg_catalog.pg_description c ON c.objoid = t.oid AND c.classoid = 'pg_catalog.pg_trigger'::regclass
    WHERE t.tgname = 'fencing_guard_a';
GRANT SELECT ON fencing.protected TO PUBLIC;

-- Puts a table under the fence: every INSERT, UPDATE and DELETE is decided
-- in the writing transaction (see the extension's guide for where each
-- statement's token, lock and sequence come from). Protecting a table again
-- replaces its settings.
CREATE FUNCTION fencing.protect(
    tbl regclass, resource_column name, token_column name, lock_column name DEFAULT NULL,
    sequence_column name DEFAULT NULL, policy text DEFAULT 'non-decreasing', fence_in_row boolean DEFAULT false)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $protect$
DECLARE
    rel record;
    col record;
BEGIN
    SELECT c.relname, n.nspname, c.relkind INTO rel
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = tbl;
    IF rel.relkind NOT IN ('r', 'p') THEN
        RAISE EXCEPTION USING ERRCODE = '42809', MESSAGE = format('fencing: %s is not a table', tbl);
    END IF;
    IF policy IS NULL OR policy NOT IN ('non-decreasing', 'strictly-increasing') THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('fencing: policy %L is not non-decreasing or strictly-increasing', policy);
    END IF;
    IF resource_column IS NULL OR token_column IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'fencing: resource_column and token_column are required';
    END IF;
    FOR col IN
        SELECT u.role, u.name, a.atttypid
        FROM (VALUES ('resource_column', resource_column), ('token_column', token_column),
                     ('lock_column', lock_column), ('sequence_column', sequence_column)) u(role, name)
        LEFT JOIN pg_attribute a ON a.attrelid = tbl AND a.attname = u.name AND a.attnum > 0 AND NOT a.attisdropped
        WHERE u.name IS NOT NULL
    LOOP
        IF col.atttypid IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = '42703', MESSAGE = format('fencing: %s: %s has no column %I', col.role, tbl, col.name);
        END IF;
        IF col.role IN ('token_column', 'sequence_column') AND col.atttypid NOT IN ('int8'::regtype, 'int4'::regtype, 'int2'::regtype) THEN
            RAISE EXCEPTION USING ERRCODE = '42804',
                MESSAGE = format('fencing: %s %I must be bigint, integer or smallint, not %s', col.role, col.name, col.atttypid::regtype);
        END IF;
        IF col.role = 'lock_column' AND col.atttypid NOT IN ('text'::regtype, 'varchar'::regtype) THEN
            RAISE EXCEPTION USING ERRCODE = '42804',
                MESSAGE = format('fencing: lock_column %I must be text or varchar, not %s', col.name, col.atttypid::regtype);
        END IF;
    END LOOP;
    IF fence_in_row IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'fencing: fence_in_row is NULL';
    END IF;
    -- A row carries its resource's fence only if no other row can have that resource.
    IF fence_in_row AND NOT EXISTS (
        SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
        WHERE i.indrelid = tbl AND i.indisunique AND i.indimmediate AND i.indnkeyatts = 1
          AND i.indpred IS NULL AND i.indexprs IS NULL AND a.attname = resource_column) THEN
        RAISE EXCEPTION USING ERRCODE = '42P10',
            MESSAGE = format('fencing: fence_in_row needs %I to be unique in %s on its own', resource_column, tbl),
            HINT = 'make it the primary key, or add a UNIQUE constraint on that column alone';
    END IF;
    PERFORM fencing.unprotect(tbl, true);
    -- The trigger takes its lock on the table first, so no row changes while the rows claim their resources.
    EXECUTE format('CREATE TRIGGER fencing_guard_a BEFORE INSERT OR UPDATE OR DELETE ON %s FOR EACH ROW '
                   'EXECUTE FUNCTION fencing._guard_row(%L, %L, %L, %L, %L, %L)', tbl, resource_column, token_column,
                   coalesce(lock_column, ''), coalesce(sequence_column, ''), policy,
                   CASE WHEN fence_in_row THEN 'row' ELSE 'table' END);
    EXECUTE format('COMMENT ON TRIGGER fencing_guard_a ON %s IS %L', tbl, json_build_object(
        'resource_column', resource_column, 'token_column', token_column, 'lock_column', lock_column,
        'sequence_column', sequence_column, 'policy', policy, 'fence_in_row', fence_in_row)::text);
    IF fence_in_row THEN
        PERFORM fencing._carry_claim(tbl, resource_column, token_column, lock_column, sequence_column);
    END IF;
    EXECUTE format('CREATE TRIGGER fencing_guard_truncate BEFORE TRUNCATE ON %s FOR EACH STATEMENT '
                   'EXECUTE FUNCTION fencing._refuse_truncate()', tbl);
END
$protect$;

-- Takes a table out from under the fence (its fences stay in fencing.fences;
-- a fence-in-row table's fences are written there from its rows).
CREATE FUNCTION fencing.unprotect(tbl regclass, if_protected boolean DEFAULT false)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgrelid = tbl AND t.tgname = 'fencing_guard_a') THEN
        IF if_protected THEN RETURN; END IF;
        RAISE EXCEPTION USING ERRCODE = '42704', MESSAGE = format('fencing: %s is not protected', tbl);
    END IF;
    -- A fence-in-row table gives its fences back before its trigger stops keeping them.
    EXECUTE format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', tbl);
    PERFORM fencing._carry_release(tbl);
    EXECUTE format('DROP TRIGGER IF EXISTS fencing_guard_a ON %s', tbl);
    EXECUTE format('DROP TRIGGER IF EXISTS fencing_guard_truncate ON %s', tbl);
END
$$;
