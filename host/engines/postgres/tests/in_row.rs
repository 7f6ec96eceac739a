//! Tables protected with `fence_in_row` against a real PostgreSQL 15 on
//! 127.0.0.1: each row carries its resource's fence. The GC-pause story;
//! INSERT claiming a resource (against a fence an earlier write left), DELETE
//! giving the mark back, a row moving between resources; writes from outside
//! the table refused; protect refusing rows behind their fence; unprotect
//! writing the marks back; a dropped table's claims released by the
//! operator; lock and sequence columns, the same write twice, the strict
//! policy, tokens from settings, and the operator's reset.

use fencing_postgres_tests::{connect, fails, with_extension};
use tokio_postgres::Client;

/// `(high_water, carrier)` of a resource's row in `fencing.fences`, if any.
async fn fence_row(c: &Client, resource: &str) -> Option<(i64, Option<String>)> {
    c.query_opt("SELECT high_water, carrier::text FROM fencing.fences WHERE resource = $1", &[&resource])
        .await
        .unwrap()
        .map(|r| (r.get(0), r.get(1)))
}

/// `fencing.fence(resource)`'s high-water mark.
async fn mark(c: &Client, resource: &str) -> Option<i64> {
    c.query_opt("SELECT high_water FROM fencing.fence($1)", &[&resource]).await.unwrap().map(|r| r.get(0))
}

async fn body(c: &Client, id: &str) -> Option<String> {
    c.query_opt("SELECT body FROM public.orders WHERE id = $1", &[&id]).await.unwrap().map(|r| r.get(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_carry_their_fences_from_protect_to_unprotect() {
    let pg = with_extension().await;
    let (a, b) = (connect(&pg.url).await, connect(&pg.url).await);
    a.batch_execute(
        "CREATE TABLE public.orders (id text PRIMARY KEY, token bigint, body text);
         INSERT INTO public.orders VALUES ('o1', 5, 'init');
         SELECT fencing.check('o2', 'o2', 7);",
    )
    .await
    .unwrap();
    // Only a column unique on its own can carry fences.
    a.batch_execute("CREATE TABLE public.shared (id text, token bigint)").await.unwrap();
    let protect_shared = "SELECT fencing.protect('public.shared', 'id', 'token', fence_in_row => true)";
    assert_eq!(fails(&a, protect_shared).await.0, "42P10");
    a.batch_execute("SELECT fencing.protect('public.orders', 'id', 'token', fence_in_row => true)").await.unwrap();
    assert_eq!(fence_row(&a, "o1").await, Some((5, Some("orders".into()))));

    // The GC-pause story: B writes 34, A's late write with 33 is refused.
    b.batch_execute("UPDATE public.orders SET body = 'B', token = 34 WHERE id = 'o1'").await.unwrap();
    let (code, detail) = fails(&a, "UPDATE public.orders SET body = 'A-late', token = 33 WHERE id = 'o1'").await;
    assert_eq!(code, "FN001");
    assert_eq!((detail["presented"].as_i64(), detail["high_water"].as_i64()), (Some(33), Some(34)));
    assert_eq!(body(&b, "o1").await.as_deref(), Some("B"));
    assert_eq!(mark(&a, "o1").await, Some(34));
    assert_eq!(fails(&a, "UPDATE public.orders SET body = 'no token' WHERE id = 'o1'").await.0, "FN004");
    // Without a lock column the lock is the resource's name; another cannot be carried.
    let other_lock = "BEGIN; SET LOCAL fencing.lock = 'other'; UPDATE public.orders SET token = 40 WHERE id = 'o1'";
    assert_eq!(fails(&a, other_lock).await.0, "22023");
    a.batch_execute("ROLLBACK").await.unwrap();
    // The resource is the table's now: no other write path reaches it.
    assert_eq!(fails(&a, "SELECT fencing.check('o1', 'o1', 99)").await.0, "55000");
    assert_eq!(mark(&a, "o1").await, Some(34));

    // INSERT claims a resource, decided against the fence an earlier write left.
    assert_eq!(fails(&a, "INSERT INTO public.orders VALUES ('o2', 6, 'stale')").await.0, "FN001");
    a.batch_execute("INSERT INTO public.orders VALUES ('o2', 8, 'o2')").await.unwrap();
    assert_eq!(fence_row(&a, "o2").await, Some((8, Some("orders".into()))));
    assert_eq!(fails(&a, "INSERT INTO public.orders VALUES ('o2', 9, 'again')").await.0, "23505");
    // An upsert's UPDATE half is decided against the row.
    let upsert = "INSERT INTO public.orders VALUES ('o2', $1, 'upsert') \
                  ON CONFLICT (id) DO UPDATE SET token = EXCLUDED.token, body = EXCLUDED.body";
    let refused = a.execute(upsert, &[&7i64]).await.expect_err("a stale upsert");
    assert_eq!(fencing_postgres_tests::sqlstate(&refused).0, "FN001");
    a.execute(upsert, &[&9i64]).await.unwrap();
    assert_eq!(body(&a, "o2").await.as_deref(), Some("upsert"));

    // DELETE gives the mark back to fencing.fences; a later INSERT must pass it.
    let delete =
        |t: i64| format!("BEGIN; SET LOCAL fencing.token = {t}; DELETE FROM public.orders WHERE id = 'o1'; COMMIT");
    assert_eq!(fails(&a, &delete(33)).await.0, "FN001");
    a.batch_execute("ROLLBACK").await.unwrap();
    a.batch_execute(&delete(35)).await.unwrap();
    assert_eq!(fence_row(&a, "o1").await, Some((35, None)));
    assert_eq!(mark(&a, "o1").await, Some(35));
    assert_eq!(fails(&a, "INSERT INTO public.orders VALUES ('o1', 34, 'late')").await.0, "FN001");
    a.batch_execute("INSERT INTO public.orders VALUES ('o1', 36, 'back')").await.unwrap();

    // A row that moves writes both resources: the one it leaves keeps its mark.
    a.batch_execute("UPDATE public.orders SET id = 'o3', token = 10 WHERE id = 'o2'").await.unwrap();
    assert_eq!(fence_row(&a, "o2").await, Some((10, None)));
    assert_eq!(fence_row(&a, "o3").await, Some((10, Some("orders".into()))));

    // Unprotect writes every row's mark back; the fences go on as before.
    a.batch_execute("UPDATE public.orders SET token = 50 WHERE id = 'o1'").await.unwrap();
    a.batch_execute("SELECT fencing.unprotect('public.orders')").await.unwrap();
    assert_eq!(fence_row(&a, "o1").await, Some((50, None)));
    assert_eq!(fence_row(&a, "o3").await, Some((10, None)));
    assert_eq!(fails(&a, "SELECT fencing.check('o1', 'o1', 49)").await.0, "FN001");
    // A row behind its resource's fence cannot carry it.
    a.batch_execute("SELECT fencing.check('o1', 'o1', 60)").await.unwrap();
    let (code, _) = fails(&a, "SELECT fencing.protect('public.orders', 'id', 'token', fence_in_row => true)").await;
    assert_eq!(code, "55000");
    assert_eq!(fence_row(&a, "o1").await, Some((60, None)));
    a.batch_execute("SELECT fencing.protect('public.orders', 'id', 'token')").await.unwrap();
    assert_eq!(fails(&a, "UPDATE public.orders SET token = 59 WHERE id = 'o1'").await.0, "FN001");

    // A dropped table's claims stay until an operator releases them.
    a.batch_execute(
        "CREATE TABLE public.gone (id text PRIMARY KEY, token bigint);
         INSERT INTO public.gone VALUES ('g1', 3);
         SELECT fencing.protect('public.gone', 'id', 'token', fence_in_row => true);
         DROP TABLE public.gone;",
    )
    .await
    .unwrap();
    assert_eq!(fails(&a, "SELECT fencing.check('g1', 'g1', 4)").await.0, "55000");
    a.batch_execute("SELECT fencing.reset_fence('g1', 'its table was dropped', 'g1', 3)").await.unwrap();
    a.batch_execute("SELECT fencing.check('g1', 'g1', 4)").await.unwrap();
    assert_eq!(fence_row(&a, "g1").await, Some((4, None)));
    // Only a table whose trigger keeps its rows' fences can claim resources.
    a.batch_execute(
        "CREATE TABLE public.sneaky (id text PRIMARY KEY, token bigint); INSERT INTO public.sneaky VALUES ('s1', 1)",
    )
    .await
    .unwrap();
    let claim = "SELECT fencing._carry_claim('public.sneaky'::regclass)";
    assert_eq!(fails(&a, claim).await.0, "55000");
    assert_eq!(fence_row(&a, "s1").await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_and_sequence_columns_the_same_write_and_the_operator_reset() {
    let pg = with_extension().await;
    let c = connect(&pg.url).await;
    c.batch_execute(
        "CREATE TABLE public.jobs (id int PRIMARY KEY, token bigint, lock text, seq bigint, body text);
         SELECT fencing.protect('public.jobs', 'id', 'token', lock_column => 'lock', sequence_column => 'seq',
                                fence_in_row => true);
         INSERT INTO public.jobs VALUES (1, 5, 'L', 1, 'first');",
    )
    .await
    .unwrap();
    let set = |token: i64, lock: &str, seq: i64| {
        format!("UPDATE public.jobs SET token = {token}, lock = '{lock}', seq = {seq}, body = 'w' WHERE id = 1")
    };
    // An UPDATE that does not set the token column needs the setting.
    assert_eq!(fails(&c, "UPDATE public.jobs SET body = 'x' WHERE id = 1").await.0, "FN004");
    assert_eq!(fails(&c, &set(5, "L", 1)).await.0, "FN005");
    assert_eq!(fails(&c, &set(6, "M", 1)).await.0, "FN003");
    c.batch_execute(&set(5, "L", 3)).await.unwrap();
    c.batch_execute(&set(6, "L", 0)).await.unwrap();
    // A token from the setting is written into the row, which carries it on.
    c.batch_execute("BEGIN; SET LOCAL fencing.token = 7; UPDATE public.jobs SET body = 's' WHERE id = 1; COMMIT")
        .await
        .unwrap();
    let row = c.query_one("SELECT token, lock, seq FROM public.jobs WHERE id = 1", &[]).await.unwrap();
    assert_eq!((row.get::<_, i64>(0), row.get::<_, String>(1), row.get::<_, i64>(2)), (7, "L".into(), 0));
    assert_eq!(fails(&c, &set(6, "L", 9)).await.0, "FN001");

    // The strict policy: a token written once is refused again, except as the same write.
    c.batch_execute(
        "CREATE TABLE public.strict (id int PRIMARY KEY, token bigint, body text);
         SELECT fencing.protect('public.strict', 'id', 'token', policy => 'strictly-increasing', fence_in_row => true);
         INSERT INTO public.strict VALUES (100, 3, 'a');
         BEGIN; UPDATE public.strict SET token = 4, body = 'b' WHERE id = 100;
                UPDATE public.strict SET token = 4, body = 'c' WHERE id = 100; COMMIT;",
    )
    .await
    .unwrap();
    assert_eq!(fails(&c, "UPDATE public.strict SET token = 4, body = 'd' WHERE id = 100").await.0, "FN002");
    let body: String = c.query_one("SELECT body FROM public.strict", &[]).await.unwrap().get(0);
    assert_eq!(body, "c");

    // The operator's reset re-binds the row's fence and leaves a record.
    c.batch_execute("SELECT fencing.reset_fence('1', 'moved to lock N', 'N', 2)").await.unwrap();
    let row = c.query_one("SELECT token, lock, seq FROM public.jobs WHERE id = 1", &[]).await.unwrap();
    assert_eq!((row.get::<_, i64>(0), row.get::<_, String>(1), row.get::<_, Option<i64>>(2)), (2, "N".into(), None));
    let record = c.query_one("SELECT old_high_water, new_lock FROM fencing.resets", &[]).await.unwrap();
    assert_eq!((record.get::<_, i64>(0), record.get::<_, String>(1)), (7, "N".into()));
    assert_eq!(fails(&c, &set(3, "L", 0)).await.0, "FN003");
    c.batch_execute(&set(3, "N", 0)).await.unwrap();
}
