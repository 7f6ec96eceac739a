//! Logical replication between a real publisher and subscriber on loopback
//! (issue 53 item 6): a publication of a protected table without
//! `fencing.fences` is refused, because its subscriber would hold the rows
//! without their fences and admit a stale write; published with it (and the
//! subscriber's tables protected as the publisher's are), the subscriber
//! refuses the stale token in both protect modes, as a client would meet it
//! after moving its writes there.

use fencing_postgres_tests::{connect, fails, with_extension};
use fencing_testkit::postgres::Postgres;
use std::time::{Duration, Instant};
use tokio_postgres::Client;

const TABLES: &str = "CREATE EXTENSION IF NOT EXISTS fencing;
    CREATE TABLE public.orders (id text PRIMARY KEY, token bigint, body text);
    SELECT fencing.protect('public.orders', 'id', 'token');
    CREATE TABLE public.accounts (id text PRIMARY KEY, token bigint, body text);
    SELECT fencing.protect('public.accounts', 'id', 'token', fence_in_row => true);";

/// Waits until `sql` (one row, one bigint) reads `want` on `c`.
async fn until(c: &Client, sql: &str, want: i64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let got: Option<i64> = c.query_opt(sql, &[]).await.unwrap().and_then(|r| r.get(0));
        if got == Some(want) {
            return;
        }
        assert!(Instant::now() < deadline, "{sql}: {got:?}, waited for {want}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_holds_the_fences_of_the_rows_it_holds() {
    let publisher = Postgres::start_with(&["wal_level=logical"]).await;
    let subscriber = with_extension().await;
    let (p, s) = (connect(&publisher.url).await, connect(&subscriber.url).await);
    p.batch_execute(TABLES).await.unwrap();
    s.batch_execute(TABLES).await.unwrap();

    // Without the fence table, the publication is refused; so is dropping it from one later.
    for sql in [
        "CREATE PUBLICATION shop FOR TABLE public.orders",
        "CREATE PUBLICATION shop FOR TABLE public.accounts, fencing.carriers",
        "CREATE PUBLICATION shop FOR TABLES IN SCHEMA public",
    ] {
        assert_eq!(fails(&p, sql).await.0, "55000", "{sql}");
    }
    p.batch_execute("CREATE PUBLICATION shop FOR TABLE public.orders, public.accounts, fencing.fences").await.unwrap();
    assert_eq!(fails(&p, "ALTER PUBLICATION shop DROP TABLE fencing.fences").await.0, "55000");
    // A table protected after a publication names it is checked too.
    p.batch_execute("CREATE TABLE public.later (id text PRIMARY KEY, token bigint); CREATE PUBLICATION other FOR TABLE public.later")
        .await
        .unwrap();
    assert_eq!(fails(&p, "SELECT fencing.protect('public.later', 'id', 'token')").await.0, "55000");

    let conninfo = publisher.url.clone();
    s.batch_execute(&format!("CREATE SUBSCRIPTION shop CONNECTION '{conninfo}' PUBLICATION shop")).await.unwrap();
    p.batch_execute(
        "INSERT INTO public.orders VALUES ('o-1', 33, 'A'), ('o-2', 5, 'x');
         UPDATE public.orders SET token = 50, body = 'new holder' WHERE id = 'o-1';
         INSERT INTO public.accounts VALUES ('a-1', 33, 'A');
         UPDATE public.accounts SET token = 50, body = 'new holder' WHERE id = 'a-1';",
    )
    .await
    .unwrap();
    until(&s, "SELECT high_water FROM fencing.fences WHERE resource = 'o-1'", 50).await;
    until(&s, "SELECT token FROM public.orders WHERE id = 'o-1'", 50).await;
    until(&s, "SELECT token FROM public.accounts WHERE id = 'a-1'", 50).await;

    // The paused holder writes to the subscriber: refused there too.
    assert_eq!(fails(&s, "UPDATE public.orders SET token = 33, body = 'stale' WHERE id = 'o-1'").await.0, "FN001");
    assert_eq!(fails(&s, "UPDATE public.accounts SET token = 33, body = 'stale' WHERE id = 'a-1'").await.0, "FN001");
    assert_eq!(fails(&s, "BEGIN; SET LOCAL fencing.token = 33; DELETE FROM public.accounts").await.0, "FN001");
    s.batch_execute("ROLLBACK").await.unwrap();
    let fence: i64 = s.query_one("SELECT high_water FROM fencing.fence('a-1')", &[]).await.unwrap().get(0);
    assert_eq!(fence, 50);
    s.batch_execute("DROP SUBSCRIPTION shop").await.unwrap();
}
