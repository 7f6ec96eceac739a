//! Rights: no role gains one through the extension. A database holding a
//! hijacking operator, cast, domain, trigger and policy (schema `evil`, owned
//! by the ordinary role `mallory`, first on every hostile session's
//! `search_path`) is tried through every entry point: writes to protected
//! tables in both modes, `fencing.try_write`/`check`/`admit`/`fence`/
//! `resource_name`, protect and unprotect of mallory's own tables (whose
//! resource columns have her types), the operator's reset of a fence her
//! table carries, DDL on her tables, and the internal functions called
//! directly. Every hijacking object logs who it ran as: none ran as a
//! superuser, mallory is not one afterwards, and the fences still refuse a
//! stale token. Then: what writes fences is not PUBLIC's (issue 53 item 2),
//! and who may reset a fence (`fencing_admin`), with its record.

use fencing_postgres_tests::{connect, fails, with_extension};
use tokio_postgres::Client;

/// The hostile schema: an `=` for text, bigint and oid, a cast to and from
/// text for an enum, a domain whose check logs, a trigger fired ALWAYS and a
/// row policy, each calling `evil.hijack`, which logs its role and tries to
/// make mallory a superuser and to delete every fence.
const EVIL: &str = r#"
CREATE SCHEMA evil;
CREATE TABLE evil.log (cur text, ses text, what text);
GRANT USAGE ON SCHEMA evil TO PUBLIC;
GRANT INSERT, SELECT ON evil.log TO PUBLIC;
CREATE FUNCTION evil.hijack(what text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO evil.log VALUES (current_user, session_user, what);
    BEGIN EXECUTE 'ALTER ROLE mallory SUPERUSER'; EXCEPTION WHEN OTHERS THEN NULL; END;
    BEGIN EXECUTE 'DELETE FROM fencing.fences'; EXCEPTION WHEN OTHERS THEN NULL; END;
    BEGIN EXECUTE 'GRANT fencing_admin TO mallory'; EXCEPTION WHEN OTHERS THEN NULL; END;
    RETURN true;
END $$;
CREATE FUNCTION evil.text_eq(a text, b text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM evil.hijack('text ='); RETURN a OPERATOR(pg_catalog.=) b; END $$;
CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.text_eq);
CREATE FUNCTION evil.text_ne(a text, b text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM evil.hijack('text <>'); RETURN a OPERATOR(pg_catalog.<>) b; END $$;
CREATE OPERATOR evil.<> (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.text_ne);
CREATE FUNCTION evil.int8_eq(a bigint, b bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM evil.hijack('bigint ='); RETURN a OPERATOR(pg_catalog.=) b; END $$;
CREATE OPERATOR evil.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = evil.int8_eq);
CREATE FUNCTION evil.int8_le(a bigint, b bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM evil.hijack('bigint <='); RETURN a OPERATOR(pg_catalog.<=) b; END $$;
CREATE OPERATOR evil.<= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = evil.int8_le);
CREATE FUNCTION evil.int8_lt(a bigint, b bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM evil.hijack('bigint <'); RETURN a OPERATOR(pg_catalog.<) b; END $$;
CREATE OPERATOR evil.< (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = evil.int8_lt);
CREATE FUNCTION evil.int8_gt(a bigint, b bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM evil.hijack('bigint >'); RETURN a OPERATOR(pg_catalog.>) b; END $$;
CREATE OPERATOR evil.> (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = evil.int8_gt);
CREATE FUNCTION evil.oid_eq(a oid, b oid) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM evil.hijack('oid ='); RETURN a OPERATOR(pg_catalog.=) b; END $$;
CREATE OPERATOR evil.= (LEFTARG = oid, RIGHTARG = oid, FUNCTION = evil.oid_eq);
CREATE FUNCTION evil.now() RETURNS timestamptz LANGUAGE plpgsql AS $$
BEGIN PERFORM evil.hijack('now()'); RETURN pg_catalog.now(); END $$;
CREATE FUNCTION evil.length(t text) RETURNS integer LANGUAGE plpgsql AS $$
BEGIN PERFORM evil.hijack('length()'); RETURN pg_catalog.length(t); END $$;
CREATE TYPE evil.color AS ENUM ('red', 'green', 'blue');
CREATE FUNCTION evil.color_text(c evil.color) RETURNS text LANGUAGE plpgsql AS $$
BEGIN PERFORM evil.hijack('cast color to text'); RETURN pg_catalog.format('%s', c); END $$;
CREATE CAST (evil.color AS text) WITH FUNCTION evil.color_text(evil.color);
CREATE FUNCTION evil.text_color(t text) RETURNS evil.color LANGUAGE plpgsql AS $$
BEGIN PERFORM evil.hijack('cast text to color'); RETURN pg_catalog.enum_in(pg_catalog.textout(t), 'evil.color'::pg_catalog.regtype); END $$;
CREATE CAST (text AS evil.color) WITH FUNCTION evil.text_color(text);
CREATE FUNCTION evil.checked(t text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM evil.hijack('domain check'); RETURN true; END $$;
CREATE DOMAIN evil.name AS text CHECK (evil.checked(VALUE));
CREATE FUNCTION evil.fired() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM evil.hijack('trigger ' || TG_OP); RETURN NEW; END $$;
-- Mallory's own protected tables: a fence in each row (an enum resource),
-- and a fence row per resource (a domain resource).
CREATE TABLE evil.victim (id evil.color PRIMARY KEY, token bigint, lock text);
INSERT INTO evil.victim VALUES ('red', 5, 'evil-lock');
CREATE TRIGGER a_fired BEFORE UPDATE ON evil.victim FOR EACH ROW EXECUTE FUNCTION evil.fired();
ALTER TABLE evil.victim ENABLE ALWAYS TRIGGER a_fired;
ALTER TABLE evil.victim ENABLE ROW LEVEL SECURITY;
CREATE POLICY spy ON evil.victim USING (evil.hijack('policy'));
CREATE TABLE evil.plain (id evil.name PRIMARY KEY, token bigint);
"#;

/// Roles connect by name on the test server.
async fn as_role(url: &str, role: &str) -> Client {
    let c = connect(&url.replace("user=fencing", &format!("user={role}"))).await;
    c.batch_execute("SET search_path = evil, pg_catalog, public").await.unwrap();
    c
}

/// Whether a role is a superuser.
async fn is_superuser(c: &Client, role: &str) -> bool {
    c.query_one("SELECT rolsuper FROM pg_roles WHERE rolname = $1", &[&role]).await.unwrap().get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_caller_supplied_object_runs_with_the_owners_rights() {
    let pg = with_extension().await;
    let admin = connect(&pg.url).await;
    admin
        .batch_execute(
            "CREATE ROLE mallory LOGIN; CREATE ROLE ops LOGIN IN ROLE fencing_admin;
             GRANT CREATE ON DATABASE postgres TO mallory;
             CREATE TABLE public.orders (id text PRIMARY KEY, token bigint, body text);
             SELECT fencing.protect('public.orders', 'id', 'token');
             CREATE TABLE public.accounts (id text PRIMARY KEY, token bigint, balance int);
             SELECT fencing.protect('public.accounts', 'id', 'token', fence_in_row => true);
             GRANT ALL ON public.orders, public.accounts TO mallory;",
        )
        .await
        .unwrap();
    let mallory = as_role(&pg.url, "mallory").await;
    mallory.batch_execute(EVIL).await.unwrap();
    // The hijacking operator is first on her path: her own comparison runs it.
    mallory.batch_execute("SELECT 'a'::text = 'b'::text").await.unwrap();

    // Writes to protected tables, in both modes, through every statement.
    mallory
        .batch_execute(
            "INSERT INTO public.orders VALUES ('o-1', 50, 'first');
             UPDATE public.orders SET token = 51, body = 'second' WHERE id = 'o-1';
             INSERT INTO public.orders VALUES ('o-2', 7, 'x') ON CONFLICT (id) DO UPDATE SET token = EXCLUDED.token;
             BEGIN; SET LOCAL fencing.token = 8; DELETE FROM public.orders WHERE id = 'o-2'; COMMIT;
             INSERT INTO public.accounts VALUES ('a-1', 50, 1);
             UPDATE public.accounts SET token = 51, balance = 2 WHERE id = 'a-1';
             BEGIN; SET LOCAL fencing.token = 52; DELETE FROM public.accounts WHERE id = 'a-1'; COMMIT;
             INSERT INTO public.accounts VALUES ('a-1', 53, 3);",
        )
        .await
        .unwrap();
    assert_eq!(fails(&mallory, "UPDATE public.orders SET token = 3 WHERE id = 'o-1'").await.0, "FN001");
    assert!(!is_superuser(&admin, "mallory").await, "a write to a protected table made mallory a superuser");
    // The SQL functions (the ones that write fences are granted to her for this).
    admin.batch_execute("GRANT fencing_writer TO mallory").await.unwrap();
    mallory
        .batch_execute(
            "SELECT fencing.check('f-1', 'lock-1', 5);
             SELECT * FROM fencing.try_write('f-1', 'lock-1', 6);
             SELECT * FROM fencing.admit('lock-1', 5, NULL, 'lock-1', 6);
             SELECT * FROM fencing.fence('o-1'); SELECT * FROM fencing.fence('a-1');
             SELECT fencing.resource_name('red'::evil.color);
             SELECT fencing.guard_info(); SELECT * FROM fencing.guard_stats();",
        )
        .await
        .unwrap();
    // Her own tables, protected by her: rows claimed, written, released, reclaimed.
    mallory
        .batch_execute(
            "SELECT fencing.protect('evil.victim', 'id', 'token', 'lock', fence_in_row => true);
             UPDATE evil.victim SET token = 6 WHERE id = 'red';
             INSERT INTO evil.victim VALUES ('green', 1, 'evil-lock');
             SELECT * FROM fencing.fence('red');
             SELECT fencing.unprotect('evil.victim');
             SELECT fencing.protect('evil.victim', 'id', 'token', 'lock', fence_in_row => true);
             SELECT fencing.protect('evil.plain', 'id', 'token');
             INSERT INTO evil.plain VALUES ('p-1', 4);
             UPDATE evil.plain SET token = 5 WHERE id = 'p-1';",
        )
        .await
        .unwrap();
    // DDL on her protected table: the event triggers run, and refuse.
    assert_eq!(fails(&mallory, "ALTER TABLE evil.victim DISABLE TRIGGER fencing_guard_a").await.0, "55000");
    mallory.batch_execute("ALTER TABLE evil.plain ADD COLUMN note text").await.unwrap();
    // The internal functions, called directly.
    for (sql, code) in [
        (
            "SELECT fencing._admits('o-1', 'o-1', 51, NULL, 1, NULL, 'o-1', 'o-1', 99, NULL, 'non-decreasing', NULL)",
            "42501",
        ),
        ("SELECT * FROM fencing._carried('public.accounts'::regclass, 'a-1')", "42501"),
        ("SELECT fencing._reset_carried('public.accounts'::regclass, 'a-1', NULL, NULL)", "42501"),
        ("SELECT fencing._carry_claim('public.accounts'::regclass)", "42501"),
        ("SELECT fencing._carry_release('public.accounts'::regclass)", "42501"),
        ("SELECT fencing.reset_fence('o-1', 'mine now')", "42501"),
        ("DELETE FROM fencing.fences", "42501"),
        ("UPDATE fencing.carriers SET token_column = 'id'", "42501"),
    ] {
        assert_eq!(fails(&mallory, sql).await.0, code, "{sql}");
    }
    // The operator resets a fence her table carries, with her path: her
    // trigger runs as her (the table's owner), never as the extension's owner.
    let ops = as_role(&pg.url, "ops").await;
    ops.batch_execute(
        "SELECT fencing.reset_fence('red', 'moved to a new lock', 'new-lock', 100);
         SELECT fencing.reset_fence('o-1', 'test reset', 'o-1', 60);
         SELECT fencing.reset_fence('p-1', 'test reset');",
    )
    .await
    .unwrap();
    let row = admin.query_one("SELECT token, lock FROM evil.victim WHERE id = 'red'", &[]).await.unwrap();
    assert_eq!((row.get::<_, i64>(0), row.get::<_, String>(1)), (100, "new-lock".to_owned()));

    // Who every hijacking object ran as.
    let log = admin.query("SELECT cur, ses, what FROM evil.log ORDER BY what", &[]).await.unwrap();
    let ran: Vec<(String, String, String)> = log.iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect();
    assert!(
        ran.iter().any(|(cur, _, what)| cur == "mallory" && what == "text ="),
        "the hijack was never reached: {ran:?}"
    );
    assert!(ran.iter().any(|(cur, ses, what)| cur == "mallory" && ses == "ops" && what == "trigger UPDATE"), "{ran:?}");
    for (cur, ses, what) in &ran {
        assert!(cur == "mallory" || cur == ses, "{what} ran as {cur} in {ses}'s session");
        assert!(!is_superuser(&admin, cur).await, "{what} ran as the superuser {cur}");
    }
    assert!(!is_superuser(&admin, "mallory").await, "mallory became a superuser");
    let admin_member: bool =
        admin.query_one("SELECT pg_has_role('mallory', 'fencing_admin', 'MEMBER')", &[]).await.unwrap().get(0);
    assert!(!admin_member, "mallory became an operator");
    // The fences are where the writes and the resets left them.
    let hw: i64 = admin.query_one("SELECT high_water FROM fencing.fence('o-1')", &[]).await.unwrap().get(0);
    assert_eq!(hw, 60);
    assert_eq!(fails(&mallory, "UPDATE public.orders SET token = 59 WHERE id = 'o-1'").await.0, "FN001");
    assert_eq!(fails(&mallory, "UPDATE public.accounts SET token = 52 WHERE id = 'a-1'").await.0, "FN001");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_owner_gains_no_right_through_its_own_types() {
    // Casts are found whatever the search_path: the owner's cast of her enum
    // to text, and her domain's check, on her own fence-in-row table.
    let pg = with_extension().await;
    let admin = connect(&pg.url).await;
    admin
        .batch_execute("CREATE ROLE mallory LOGIN IN ROLE fencing_writer; GRANT CREATE ON DATABASE postgres TO mallory; CREATE ROLE ops LOGIN IN ROLE fencing_admin")
        .await
        .unwrap();
    let mallory = connect(&pg.url.replace("user=fencing", "user=mallory")).await;
    mallory.batch_execute(EVIL).await.unwrap();
    mallory
        .batch_execute(
            "SELECT fencing.protect('evil.victim', 'id', 'token', 'lock', fence_in_row => true);
             SELECT * FROM fencing.fence('red');
             SELECT fencing.unprotect('evil.victim');
             SELECT fencing.protect('evil.victim', 'id', 'token', 'lock', fence_in_row => true);
             INSERT INTO evil.plain VALUES ('p-1', 4);
             SELECT fencing.protect('evil.plain', 'id', 'token');
             UPDATE evil.plain SET token = 5;",
        )
        .await
        .unwrap();
    let ops = connect(&pg.url.replace("user=fencing", "user=ops")).await;
    ops.batch_execute("SELECT fencing.reset_fence('red', 'moved', 'new-lock', 100)").await.unwrap();
    admin.batch_execute("SELECT * FROM fencing.fence('red'); SELECT fencing.unprotect('evil.victim')").await.unwrap();
    let log = admin.query("SELECT cur, what FROM evil.log", &[]).await.unwrap();
    for row in &log {
        let (cur, what): (String, String) = (row.get(0), row.get(1));
        assert!(!is_superuser(&admin, &cur).await, "{what} ran as the superuser {cur}");
    }
    assert!(!is_superuser(&admin, "mallory").await, "mallory became a superuser");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_writes_fences_is_granted_not_public() {
    let pg = with_extension().await;
    let admin = connect(&pg.url).await;
    admin
        .batch_execute(
            "CREATE ROLE nobody LOGIN;
             CREATE TABLE public.orders (id text PRIMARY KEY, token bigint);
             SELECT fencing.protect('public.orders', 'id', 'token');
             INSERT INTO public.orders VALUES ('o-1', 5);",
        )
        .await
        .unwrap();
    // A role with CONNECT only can neither raise a fence nor bind a resource to its lock.
    let nobody = connect(&pg.url.replace("user=fencing", "user=nobody")).await;
    for sql in [
        "SELECT fencing.check('o-1', 'o-1', 9223372036854775807)",
        "SELECT * FROM fencing.try_write('never-written', 'my-lock', 1)",
        "SELECT * FROM fencing._try_write('never-written', 'my-lock', 1, NULL, 'non-decreasing')",
        "UPDATE public.orders SET token = 9223372036854775807",
    ] {
        assert_eq!(fails(&nobody, sql).await.0, "42501", "{sql}");
    }
    // Nor through a table of its own (TEMP is PUBLIC's): protecting it, or
    // a fence trigger made by hand on it, raises no fence.
    nobody
        .batch_execute(
            "CREATE TEMP TABLE mine (id text PRIMARY KEY, token bigint);
             CREATE TRIGGER fencing_guard_a BEFORE INSERT OR UPDATE OR DELETE ON mine FOR EACH ROW
                 EXECUTE FUNCTION fencing._guard_row('id', 'token', '', '', 'non-decreasing', 'table');",
        )
        .await
        .unwrap();
    for sql in [
        "INSERT INTO mine VALUES ('o-1', 9223372036854775807)",
        "INSERT INTO mine VALUES ('never-written', 1)",
        "SELECT fencing.protect('mine', 'id', 'token')",
    ] {
        assert_eq!(fails(&nobody, sql).await.0, "42501", "{sql}");
    }
    let fences: i64 = admin.query_one("SELECT count(*) FROM fencing.fences", &[]).await.unwrap().get(0);
    assert_eq!(fences, 1);
    let mark: i64 = admin.query_one("SELECT high_water FROM fencing.fence('o-1')", &[]).await.unwrap().get(0);
    assert_eq!(mark, 5);
    // What it may still do: read fences, and ask for a decision on plain values.
    nobody
        .batch_execute("SELECT * FROM fencing.fence('o-1'); SELECT * FROM fencing.admit(NULL, NULL, NULL, 'l', 1)")
        .await
        .unwrap();
    // A member of fencing_writer writes through the functions, as the docs say.
    admin.batch_execute("CREATE ROLE service LOGIN IN ROLE fencing_writer").await.unwrap();
    let service = connect(&pg.url.replace("user=fencing", "user=service")).await;
    service.batch_execute("SELECT fencing.check('job-1', 'jobs', 3)").await.unwrap();
    assert_eq!(fails(&service, "SELECT fencing.check('job-1', 'jobs', 2)").await.0, "FN001");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_an_operator_resets_lowers_or_rebinds_a_fence_and_each_reset_is_recorded() {
    let pg = with_extension().await;
    let admin = connect(&pg.url).await;
    admin
        .batch_execute(
            "CREATE ROLE writer LOGIN; CREATE ROLE owner LOGIN IN ROLE fencing_writer; CREATE ROLE ops LOGIN IN ROLE fencing_admin;
             GRANT CREATE ON SCHEMA public TO owner;
             SET ROLE owner;
             CREATE TABLE public.rows (id text PRIMARY KEY, token bigint);
             SELECT fencing.protect('public.rows', 'id', 'token', fence_in_row => true);
             GRANT SELECT, INSERT, UPDATE, DELETE ON public.rows TO writer;
             RESET ROLE;",
        )
        .await
        .unwrap();
    let writer = connect(&pg.url.replace("user=fencing", "user=writer")).await;
    writer.batch_execute("INSERT INTO public.rows VALUES ('r-1', 40)").await.unwrap();
    admin.batch_execute("SELECT fencing.check('f-1', 'f', 40)").await.unwrap();
    // A writer's role: no reset, no re-binding, no lowering by any path
    // (disabling the trigger is refused before PostgreSQL asks whose table it is).
    for (sql, code) in [
        ("SELECT fencing.reset_fence('f-1', 'mine')", "42501"),
        ("SELECT fencing.reset_fence('r-1', 'mine', 'r-1', 1)", "42501"),
        ("UPDATE fencing.fences SET high_water = 1", "42501"),
        ("DELETE FROM fencing.fences", "42501"),
        ("SELECT fencing.unprotect('public.rows')", "42501"),
        ("SELECT fencing._carry_release('public.rows'::regclass)", "42501"),
        ("ALTER TABLE public.rows DISABLE TRIGGER fencing_guard_a", "55000"),
        ("ALTER TABLE public.rows ALTER COLUMN token TYPE int", "55000"),
        ("SET session_replication_role = replica", "42501"),
        ("DROP EXTENSION fencing CASCADE", "42501"),
        ("CREATE RULE skip AS ON UPDATE TO public.rows DO INSTEAD NOTHING", "42501"),
        (
            "CREATE TRIGGER late BEFORE UPDATE ON public.rows FOR EACH ROW EXECUTE FUNCTION fencing._refuse_truncate()",
            "42501",
        ),
        ("GRANT fencing_admin TO writer", "42501"),
        ("TRUNCATE public.rows", "42501"),
    ] {
        assert_eq!(fails(&writer, sql).await.0, code, "{sql}");
    }
    // The table's owner may unprotect (never lowering a mark), not reset.
    let owner = connect(&pg.url.replace("user=fencing", "user=owner")).await;
    assert_eq!(fails(&owner, "SELECT fencing.reset_fence('r-1', 'mine')").await.0, "42501");
    assert_eq!(fails(&owner, "DROP EXTENSION fencing CASCADE").await.0, "42501");
    // The operator's role resets, re-binds and deletes, each recorded with who did it.
    let ops = connect(&pg.url.replace("user=fencing", "user=ops")).await;
    ops.batch_execute(
        "SELECT fencing.reset_fence('f-1', 'lowered for a test', 'f', 10);
         SELECT fencing.reset_fence('r-1', 'rebound for a test', 'r-1', 20);
         SELECT fencing.reset_fence('f-1', 'deleted for a test');",
    )
    .await
    .unwrap();
    let records = admin
        .query(
            "SELECT by_role::text, resource, old_high_water, new_high_water, reason, client_addr::text
             FROM fencing.resets ORDER BY id",
            &[],
        )
        .await
        .unwrap();
    let records: Vec<(String, String, Option<i64>, Option<i64>)> =
        records.iter().map(|r| (r.get(0), r.get(1), r.get(2), r.get(3))).collect();
    assert_eq!(
        records,
        vec![
            ("ops".into(), "f-1".into(), Some(40), Some(10)),
            ("ops".into(), "r-1".into(), Some(40), Some(20)),
            ("ops".into(), "f-1".into(), Some(10), None),
        ]
    );
    let addr: Option<String> =
        admin.query_one("SELECT client_addr::text FROM fencing.resets LIMIT 1", &[]).await.unwrap().get(0);
    assert_eq!(addr.as_deref(), Some("127.0.0.1/32"));
    assert_eq!(fails(&writer, "UPDATE public.rows SET token = 19").await.0, "FN001");
}
