//! What a protected table's statements reach, and how its columns may
//! change (issue 53 items 5 and 6): inheritance children and partitions are
//! protected with their parent (a stale write through the parent is refused,
//! TRUNCATE of a partition too, a row moving between partitions is one
//! write); ATTACH and INHERIT of rows never decided are refused, DETACH of
//! a fence-in-row partition gives its marks back; a fenced column cannot be
//! retyped, renamed or dropped, the fence's triggers cannot be disabled, a
//! fence-in-row table keeps its unique key and stays logged, and a column
//! changed behind the event triggers' back refuses every write; a generated
//! resource column is refused; `PREPARE TRANSACTION` is denied by default
//! and, allowed, holds its resource's fence until it is resolved.

use fencing_postgres_tests::{connect, fails, with_extension};
use fencing_testkit::postgres::Postgres;
use tokio_postgres::Client;

async fn high_water(c: &Client, resource: &str) -> Option<i64> {
    c.query_opt("SELECT high_water FROM fencing.fence($1)", &[&resource]).await.unwrap().map(|r| r.get(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inheritance_children_are_protected_with_their_parent() {
    let pg = with_extension().await;
    let c = connect(&pg.url).await;
    c.batch_execute(
        "CREATE TABLE public.doc (id text PRIMARY KEY, token bigint, body text);
         CREATE TABLE public.doc_archive () INHERITS (public.doc);
         INSERT INTO public.doc_archive VALUES ('x', 50, 'archived');
         SELECT fencing.protect('public.doc', 'id', 'token');
         UPDATE public.doc SET token = 51, body = 'written through the parent' WHERE id = 'x';",
    )
    .await
    .unwrap();
    // A statement on the parent reaches the child's rows: each is decided.
    assert_eq!(fails(&c, "UPDATE public.doc SET token = 3, body = 'stale' WHERE id = 'x'").await.0, "FN001");
    assert_eq!(fails(&c, "BEGIN; SET LOCAL fencing.token = 3; DELETE FROM public.doc").await.0, "FN001");
    c.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(fails(&c, "TRUNCATE public.doc_archive").await.0, "0A000");
    // A child created later is protected alike; one with rows that were never decided cannot join.
    c.batch_execute(
        "CREATE TABLE public.doc_new () INHERITS (public.doc);
         INSERT INTO public.doc_new VALUES ('y', 50, 'new');",
    )
    .await
    .unwrap();
    assert_eq!(fails(&c, "UPDATE public.doc SET token = 3 WHERE id = 'y'").await.0, "FN001");
    c.batch_execute("CREATE TABLE public.stray (id text NOT NULL, token bigint, body text); INSERT INTO public.stray VALUES ('z', 1, 'never decided')")
        .await
        .unwrap();
    assert_eq!(fails(&c, "ALTER TABLE public.stray INHERIT public.doc").await.0, "55000");
    c.batch_execute("DELETE FROM public.stray; ALTER TABLE public.stray INHERIT public.doc").await.unwrap();
    assert_eq!(fails(&c, "TRUNCATE public.stray").await.0, "0A000");
    // A child is protected through its parent; unprotecting the parent takes both out.
    assert_eq!(fails(&c, "SELECT fencing.unprotect('public.doc_archive')").await.0, "55000");
    c.batch_execute("SELECT fencing.unprotect('public.doc'); UPDATE public.doc SET token = 1").await.unwrap();
    // fence_in_row cannot cover inheritance children (their rows are not unique with the parent's).
    let (code, _) = fails(&c, "SELECT fencing.protect('public.doc', 'id', 'token', fence_in_row => true)").await;
    assert_eq!(code, "0A000");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_truncate_detach_attach_and_rows_that_move() {
    let pg = with_extension().await;
    let c = connect(&pg.url).await;
    c.batch_execute(
        "CREATE TABLE public.acct (id text PRIMARY KEY, token bigint, body text) PARTITION BY LIST (id);
         CREATE TABLE public.acct_a PARTITION OF public.acct FOR VALUES IN ('a', 'a2');
         CREATE TABLE public.acct_b PARTITION OF public.acct FOR VALUES IN ('b', 'b2');
         INSERT INTO public.acct VALUES ('a', 40, 'a'), ('b', 40, 'b');
         SELECT fencing.protect('public.acct', 'id', 'token', fence_in_row => true);
         UPDATE public.acct SET token = 50, body = 'holder' WHERE id = 'a';",
    )
    .await
    .unwrap();
    assert_eq!(fails(&c, "UPDATE public.acct SET token = 3 WHERE id = 'a'").await.0, "FN001");
    // TRUNCATE of a partition would remove rows, and their marks, without a decision.
    assert_eq!(fails(&c, "TRUNCATE public.acct_a").await.0, "0A000");
    assert_eq!(fails(&c, "TRUNCATE public.acct").await.0, "0A000");
    // A partition created later is protected alike.
    c.batch_execute("CREATE TABLE public.acct_c PARTITION OF public.acct FOR VALUES IN ('c'); INSERT INTO public.acct VALUES ('c', 10, 'c')")
        .await
        .unwrap();
    assert_eq!(fails(&c, "TRUNCATE public.acct_c").await.0, "0A000");
    assert_eq!(fails(&c, "UPDATE public.acct SET token = 9 WHERE id = 'c'").await.0, "FN001");
    assert_eq!(high_water(&c, "c").await, Some(10));

    // A row that moves to another partition is one write: decided once, its
    // old resource keeping the mark, its new one carried by the new partition.
    c.batch_execute("UPDATE public.acct SET id = 'b2', token = 51 WHERE id = 'a'").await.unwrap();
    assert_eq!(high_water(&c, "a").await, Some(51));
    assert_eq!(high_water(&c, "b2").await, Some(51));
    assert_eq!(fails(&c, "UPDATE public.acct SET token = 50 WHERE id = 'b2'").await.0, "FN001");
    assert_eq!(fails(&c, "INSERT INTO public.acct VALUES ('a', 50, 'stale')").await.0, "FN001");
    c.batch_execute("UPDATE public.acct SET id = 'a2', token = 52 WHERE id = 'b2'").await.unwrap();
    assert_eq!(high_water(&c, "a2").await, Some(52));
    let carrier: String =
        c.query_one("SELECT carrier::text FROM fencing.fences WHERE resource = 'a2'", &[]).await.unwrap().get(0);
    assert_eq!(carrier, "acct");

    // DETACH gives the partition's marks back; written while detached, its
    // rows cannot come back without a decision.
    c.batch_execute(
        "ALTER TABLE public.acct DETACH PARTITION public.acct_b;
         UPDATE public.acct_b SET token = 3, body = 'written while detached' WHERE id = 'b';",
    )
    .await
    .unwrap();
    assert_eq!(high_water(&c, "b").await, Some(40));
    let attach = "ALTER TABLE public.acct ATTACH PARTITION public.acct_b FOR VALUES IN ('b', 'b2')";
    assert_eq!(fails(&c, attach).await.0, "55000");
    c.batch_execute(&format!("DELETE FROM public.acct_b; {attach}")).await.unwrap();
    assert_eq!(fails(&c, "INSERT INTO public.acct VALUES ('b', 3, 'stale')").await.0, "FN001");
    assert_eq!(fails(&c, "TRUNCATE public.acct_b").await.0, "0A000");
    c.batch_execute("INSERT INTO public.acct VALUES ('b', 41, 'back')").await.unwrap();
    assert_eq!(fails(&c, "UPDATE public.acct SET token = 40 WHERE id = 'b'").await.0, "FN001");
    // A partition is protected through its table.
    assert_eq!(fails(&c, "SELECT fencing.unprotect('public.acct_a')").await.0, "55000");
    assert_eq!(fails(&c, "SELECT fencing.protect('public.acct_a', 'id', 'token')").await.0, "55000");
    c.batch_execute("SELECT fencing.unprotect('public.acct')").await.unwrap();
    assert_eq!(high_water(&c, "a2").await, Some(52));
    let carried: i64 =
        c.query_one("SELECT count(*) FROM fencing.fences WHERE carrier IS NOT NULL", &[]).await.unwrap().get(0);
    assert_eq!(carried, 0);
    c.batch_execute("TRUNCATE public.acct_c").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_columns_and_the_fences_triggers_do_not_change_under_a_protected_table() {
    let pg = with_extension().await;
    let c = connect(&pg.url).await;
    c.batch_execute(
        "CREATE TABLE public.t (id text PRIMARY KEY, token bigint, lock text, seq bigint, body text);
         SELECT fencing.protect('public.t', 'id', 'token', 'lock', 'seq', fence_in_row => true);
         INSERT INTO public.t VALUES ('r', 50, 'L', 1, 'holder');",
    )
    .await
    .unwrap();
    for ddl in [
        "ALTER TABLE public.t ALTER COLUMN token TYPE numeric",
        "ALTER TABLE public.t ALTER COLUMN token TYPE text",
        "ALTER TABLE public.t ALTER COLUMN id TYPE varchar(10)",
        "ALTER TABLE public.t ALTER COLUMN seq TYPE int",
        "ALTER TABLE public.t DROP COLUMN lock",
        "ALTER TABLE public.t RENAME COLUMN token TO t2",
        "ALTER TABLE public.t DISABLE TRIGGER fencing_guard_a",
        "ALTER TABLE public.t DISABLE TRIGGER fencing_guard_truncate",
        "ALTER TABLE public.t DISABLE TRIGGER ALL",
        "ALTER TABLE public.t DISABLE TRIGGER USER",
        "ALTER TABLE public.t ENABLE REPLICA TRIGGER fencing_guard_a",
        "ALTER TRIGGER fencing_guard_a ON public.t RENAME TO other",
        "ALTER TABLE public.t DROP CONSTRAINT t_pkey",
        "ALTER TABLE public.t SET UNLOGGED",
        "DROP TRIGGER fencing_guard_a ON public.t",
        "DROP TRIGGER fencing_guard_truncate ON public.t",
    ] {
        assert_eq!(fails(&c, ddl).await.0, "55000", "{ddl}");
    }
    // What does not touch the fence goes through.
    c.batch_execute(
        "ALTER TABLE public.t ALTER COLUMN body TYPE varchar(100); ALTER TABLE public.t ADD COLUMN note text;
         ALTER TABLE public.t RENAME COLUMN note TO remark; CREATE INDEX ON public.t (body);
         UPDATE public.t SET token = 51, seq = 1 WHERE id = 'r';",
    )
    .await
    .unwrap();
    // A column changed behind the event triggers' back (a superuser with
    // them off) is checked at the next decision: the token column is never
    // read as an integer when it is not one.
    c.batch_execute(
        "SET session_replication_role = replica; ALTER TABLE public.t ALTER COLUMN token TYPE numeric;
         SET session_replication_role = origin;",
    )
    .await
    .unwrap();
    let (code, _) = fails(&c, "UPDATE public.t SET token = 52 WHERE id = 'r'").await;
    assert_eq!(code, "42804");
    let e = c.batch_execute("UPDATE public.t SET body = 'x', token = 3 WHERE id = 'r'").await.unwrap_err();
    let message = e.as_db_error().unwrap().message().to_owned();
    assert!(message.contains("token_column token must be bigint, integer or smallint, not numeric"), "{message}");
    let token: String = c.query_one("SELECT token::text FROM public.t", &[]).await.unwrap().get(0);
    assert_eq!(token, "51");

    // A generated resource column is computed after BEFORE triggers: refused.
    c.batch_execute(
        "CREATE TABLE public.g (a text, id text GENERATED ALWAYS AS (a || '-x') STORED PRIMARY KEY, token bigint)",
    )
    .await
    .unwrap();
    assert_eq!(fails(&c, "SELECT fencing.protect('public.g', 'id', 'token')").await.0, "0A000");
    // Unlogged and temporary tables lose their rows: no fence in them.
    c.batch_execute("CREATE UNLOGGED TABLE public.u (id text PRIMARY KEY, token bigint)").await.unwrap();
    assert_eq!(fails(&c, "SELECT fencing.protect('public.u', 'id', 'token', fence_in_row => true)").await.0, "0A000");
    c.batch_execute("SELECT fencing.protect('public.u', 'id', 'token')").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_carried_fence_is_reset_through_its_row_once_and_a_hand_made_trigger_keeps_no_fence() {
    let pg = with_extension().await;
    let c = connect(&pg.url).await;
    c.batch_execute(
        "CREATE TABLE public.t (id text PRIMARY KEY, token bigint);
         CREATE FUNCTION public.meddle() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN IF current_setting('test.meddle', true) = 'on' THEN NEW.token := 1; END IF; RETURN NEW; END $$;
         CREATE TRIGGER zz_meddle BEFORE UPDATE ON public.t FOR EACH ROW EXECUTE FUNCTION public.meddle();
         CREATE FUNCTION public.fail() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN IF current_setting('test.fail', true) = 'on' THEN RAISE 'no'; END IF; RETURN NEW; END $$;
         CREATE TRIGGER a_fail BEFORE UPDATE ON public.t FOR EACH ROW EXECUTE FUNCTION public.fail();
         SELECT fencing.protect('public.t', 'id', 'token', fence_in_row => true);
         INSERT INTO public.t VALUES ('r', 50);",
    )
    .await
    .unwrap();
    // A trigger of the table changes the row the reset writes: the reset fails.
    c.batch_execute("SET test.meddle = 'on'").await.unwrap();
    assert_eq!(fails(&c, "SELECT fencing.reset_fence('r', 'test', 'r', 100)").await.0, "27000");
    c.batch_execute("SET test.meddle = 'off'").await.unwrap();
    assert_eq!(fails(&c, "UPDATE public.t SET token = 40 WHERE id = 'r'").await.0, "FN001");
    // A reset that fails before the row reaches the fence's trigger leaves no pass behind.
    c.batch_execute("SET test.fail = 'on'").await.unwrap();
    assert_eq!(fails(&c, "SELECT fencing.reset_fence('r', 'test', 'r', 100)").await.0, "P0001");
    c.batch_execute("SET test.fail = 'off'").await.unwrap();
    assert_eq!(fails(&c, "UPDATE public.t SET token = 40 WHERE id = 'r'").await.0, "FN001");
    c.batch_execute("SELECT fencing.reset_fence('r', 'test', 'r', 100)").await.unwrap();
    assert_eq!(fails(&c, "UPDATE public.t SET token = 99 WHERE id = 'r'").await.0, "FN001");
    assert_eq!(high_water(&c, "r").await, Some(100));

    // A fence-in-row trigger made by hand (no claims, no key checked) decides nothing.
    c.batch_execute(
        "CREATE TABLE public.h (id text, token bigint);
         CREATE TRIGGER fencing_guard_a BEFORE INSERT OR UPDATE OR DELETE ON public.h FOR EACH ROW
             EXECUTE FUNCTION fencing._guard_row('id', 'token', '', '', 'non-decreasing', 'row');",
    )
    .await
    .unwrap();
    assert_eq!(fails(&c, "INSERT INTO public.h VALUES ('r', 1)").await.0, "55000");
    assert_eq!(fails(&c, "SELECT fencing._carry_claim('public.h'::regclass)").await.0, "55000");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_that_write_move_or_rewrite_rows_in_bulk() {
    let pg = with_extension().await;
    let c = connect(&pg.url).await;
    c.batch_execute(
        "CREATE TABLE public.orders (id text PRIMARY KEY, token bigint, body text);
         SELECT fencing.protect('public.orders', 'id', 'token');
         CREATE TABLE public.lines (id text PRIMARY KEY, token bigint, n int, order_id text);
         SELECT fencing.protect('public.lines', 'id', 'token', fence_in_row => true);
         INSERT INTO public.orders VALUES ('o', 50, 'holder');
         INSERT INTO public.lines VALUES ('l', 50, 1, 'o');",
    )
    .await
    .unwrap();
    // MERGE, COPY and writable CTEs fire the row triggers: each row is decided.
    for sql in [
        "MERGE INTO public.orders t USING (VALUES ('o', 3::bigint)) s(id, token) ON t.id = s.id
         WHEN MATCHED THEN UPDATE SET token = s.token, body = 'merged'",
        "MERGE INTO public.lines t USING (VALUES ('l')) s(id) ON t.id = s.id WHEN MATCHED THEN DELETE",
        "WITH moved AS (UPDATE public.lines SET token = 3 RETURNING id) SELECT count(*) FROM moved",
        "WITH gone AS (DELETE FROM public.orders RETURNING id) INSERT INTO public.orders SELECT id, 3, 'again' FROM gone",
    ] {
        assert!(fails(&c, sql).await.0.starts_with("FN00"), "{sql}");
    }
    let copy = c.copy_in("COPY public.orders (id, token, body) FROM STDIN").await.unwrap();
    futures::pin_mut!(copy);
    use futures::SinkExt;
    copy.send(bytes::Bytes::from_static(b"o2\t60\tnew\no\t3\tstale\n")).await.unwrap();
    let e = copy.finish().await.unwrap_err();
    assert_eq!(e.as_db_error().unwrap().code().code(), "FN001");
    // A foreign key's cascade deletes the protected rows it reaches only with a token.
    c.batch_execute(
        "CREATE TABLE public.parents (id text PRIMARY KEY);
         INSERT INTO public.parents VALUES ('o');
         ALTER TABLE public.lines ADD FOREIGN KEY (order_id) REFERENCES public.parents (id) ON DELETE CASCADE;",
    )
    .await
    .unwrap();
    assert_eq!(fails(&c, "DELETE FROM public.parents").await.0, "FN004");
    assert_eq!(fails(&c, "BEGIN; SET LOCAL fencing.token = 3; DELETE FROM public.parents").await.0, "FN001");
    c.batch_execute("ROLLBACK").await.unwrap();
    // Rewrites keep every value: the fences hold after them.
    for sql in [
        "VACUUM FULL public.orders",
        "VACUUM FULL public.lines",
        "CLUSTER public.lines USING lines_pkey",
        "REINDEX TABLE public.lines",
        "ALTER TABLE public.lines RENAME TO lines2",
        "CREATE SCHEMA shop",
        "ALTER TABLE public.lines2 SET SCHEMA shop",
    ] {
        c.batch_execute(sql).await.unwrap();
    }
    assert_eq!(fails(&c, "UPDATE public.orders SET token = 3").await.0, "FN001");
    assert_eq!(fails(&c, "UPDATE shop.lines2 SET token = 3").await.0, "FN001");
    assert_eq!(high_water(&c, "l").await, Some(50));
    let body: String = c.query_one("SELECT body FROM public.orders WHERE id = 'o'", &[]).await.unwrap().get(0);
    assert_eq!(body, "holder");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_transactions_are_denied_by_default_and_hold_their_fence_when_allowed() {
    // PostgreSQL's default (max_prepared_transactions = 0) denies them.
    let pg = with_extension().await;
    let c = connect(&pg.url).await;
    c.batch_execute(
        "CREATE TABLE public.t (id text PRIMARY KEY, token bigint); SELECT fencing.protect('public.t', 'id', 'token');",
    )
    .await
    .unwrap();
    let (code, _) = fails(&c, "BEGIN; INSERT INTO public.t VALUES ('r', 50); PREPARE TRANSACTION 'w'").await;
    assert_eq!(code, "55000");
    drop(c);
    drop(pg);

    let pg = Postgres::start_with(&["max_prepared_transactions=2"]).await;
    let c = connect(&pg.url).await;
    c.batch_execute(
        "CREATE EXTENSION fencing;
         CREATE TABLE public.t (id text PRIMARY KEY, token bigint); SELECT fencing.protect('public.t', 'id', 'token');
         INSERT INTO public.t VALUES ('r', 40);",
    )
    .await
    .unwrap();
    c.batch_execute("BEGIN; UPDATE public.t SET token = 50 WHERE id = 'r'; PREPARE TRANSACTION 'w50';").await.unwrap();
    drop(c);
    // The client is gone; its prepared write still holds the resource's fence row.
    let other = connect(&pg.url).await;
    other.batch_execute("SET lock_timeout = '300ms'").await.unwrap();
    assert_eq!(fails(&other, "UPDATE public.t SET token = 45 WHERE id = 'r'").await.0, "55P03");
    let held: i64 = other.query_one("SELECT count(*) FROM pg_prepared_xacts", &[]).await.unwrap().get(0);
    assert_eq!(held, 1);
    // Resolved by the operator: committed, the fence it raised holds.
    other.batch_execute("COMMIT PREPARED 'w50'").await.unwrap();
    assert_eq!(fails(&other, "UPDATE public.t SET token = 45 WHERE id = 'r'").await.0, "FN001");
    other
        .batch_execute("BEGIN; UPDATE public.t SET token = 60 WHERE id = 'r'; PREPARE TRANSACTION 'w60'")
        .await
        .unwrap();
    other.batch_execute("ROLLBACK PREPARED 'w60'").await.unwrap();
    other.batch_execute("UPDATE public.t SET token = 55 WHERE id = 'r'").await.unwrap();
}
