//! Resource names that no session setting changes (issue 53 item 3): a
//! `date`, `timestamptz`, `numeric`, enum and `char(n)` resource column is
//! named alike under any `DateStyle` and `TimeZone`, values the table holds
//! as one key get one name, and columns with no such name are refused by
//! `fencing.protect` and by every decision.

use fencing_postgres_tests::{connect, fails, with_extension};
use tokio_postgres::Client;

async fn name_of(c: &Client, value: &str) -> String {
    c.query_one(&format!("SELECT fencing.resource_name({value})"), &[]).await.unwrap().get(0)
}

/// One paused holder's story for a resource column of type `ty` and a key
/// written as `key` in two sessions with different settings, with the fence
/// in a fence row and in the row: the stale token is refused, and a
/// tokenless (stale) DELETE too.
async fn story(c: &Client, other: &Client, ty: &str, key: &str, fence_in_row: bool) {
    let plain: String = ty.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    let table = format!("public.k_{plain}_{fence_in_row}");
    c.batch_execute(&format!(
        "CREATE TABLE {table} (id {ty} PRIMARY KEY, token bigint, body text);
         SELECT fencing.protect('{table}', 'id', 'token', fence_in_row => {fence_in_row});
         INSERT INTO {table} VALUES ({key}, 50, 'new holder');"
    ))
    .await
    .unwrap();
    let stale = format!("UPDATE {table} SET token = 3, body = 'stale' WHERE id = {key}");
    assert_eq!(fails(other, &stale).await.0, "FN001", "{ty}, fence_in_row {fence_in_row}");
    let delete = format!("BEGIN; SET LOCAL fencing.token = 3; DELETE FROM {table} WHERE id = {key}");
    assert_eq!(fails(other, &delete).await.0, "FN001", "{ty}");
    other.batch_execute("ROLLBACK").await.unwrap();
    // The mark given back by a DELETE under one setting meets an INSERT under another.
    other
        .batch_execute(&format!("BEGIN; SET LOCAL fencing.token = 51; DELETE FROM {table} WHERE id = {key}; COMMIT"))
        .await
        .unwrap();
    let insert = format!("INSERT INTO {table} VALUES ({key}, 4, 'stale again')");
    assert_eq!(fails(c, &insert).await.0, "FN001", "{ty}, fence_in_row {fence_in_row}");
    let body: Option<String> = c.query_opt(&format!("SELECT body FROM {table}"), &[]).await.unwrap().map(|r| r.get(0));
    assert_eq!(body, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_do_not_follow_datestyle_timezone_or_a_values_spelling() {
    let pg = with_extension().await;
    let (a, b) = (connect(&pg.url).await, connect(&pg.url).await);
    a.batch_execute("SET DateStyle = 'ISO, MDY'; SET TimeZone = 'UTC'").await.unwrap();
    b.batch_execute("SET DateStyle = 'German'; SET TimeZone = 'America/New_York'; SET extra_float_digits = 0")
        .await
        .unwrap();
    a.batch_execute("CREATE TYPE public.tier AS ENUM ('bronze', 'gold')").await.unwrap();
    a.batch_execute("CREATE TYPE public.tier2 AS ENUM ('bronze', 'silver')").await.unwrap();
    // Resource names are one namespace: each table has keys of its own.
    for (fence_in_row, day) in [(false, "01"), (true, "02")] {
        story(&a, &b, "date", &format!("'2026-05-{day}'"), fence_in_row).await;
        story(&a, &b, "timestamptz", &format!("'2026-05-{day} 12:00:00+00'"), fence_in_row).await;
        story(&a, &b, "timestamp", &format!("'2026-05-{day} 12:00:00.5'"), fence_in_row).await;
        let (tier, label) = if fence_in_row { ("public.tier2", "silver") } else { ("public.tier", "gold") };
        story(&a, &b, tier, &format!("'{label}'"), fence_in_row).await;
        story(&a, &b, "uuid", &format!("'8d9e1f55-9a6b-4c8e-b2a4-0c7a1e9d3f{day}'"), fence_in_row).await;
    }
    // One key, two spellings: the same name.
    for (fence_in_row, n) in [(false, 1), (true, 2)] {
        let table = format!("public.n_{fence_in_row}");
        a.batch_execute(&format!(
            "CREATE TABLE {table} (id numeric PRIMARY KEY, token bigint);
             SELECT fencing.protect('{table}', 'id', 'token', fence_in_row => {fence_in_row});
             INSERT INTO {table} VALUES ({n}.50, 50);
             BEGIN; SET LOCAL fencing.token = 51; DELETE FROM {table}; COMMIT;"
        ))
        .await
        .unwrap();
        assert_eq!(fails(&b, &format!("INSERT INTO {table} VALUES ({n}.5, 3)")).await.0, "FN001");
        assert_eq!(fails(&b, &format!("INSERT INTO {table} VALUES ({n}.500, 3)")).await.0, "FN001");
    }
    a.batch_execute(
        "CREATE TABLE public.codes (id char(8) PRIMARY KEY, token bigint);
         SELECT fencing.protect('public.codes', 'id', 'token');
         INSERT INTO public.codes VALUES ('ab', 50);",
    )
    .await
    .unwrap();
    assert_eq!(fails(&b, "UPDATE public.codes SET token = 3 WHERE id = 'ab   '").await.0, "FN001");

    // The names themselves, from either session.
    for c in [&a, &b] {
        assert_eq!(name_of(c, "'2026-05-01'::date").await, "2026-05-01");
        assert_eq!(name_of(c, "'0044-03-15 BC'::date").await, "0044-03-15 BC");
        assert_eq!(name_of(c, "'infinity'::date").await, "infinity");
        assert_eq!(name_of(c, "'2026-05-01 14:00:00+02'::timestamptz").await, "2026-05-01 12:00:00+00");
        assert_eq!(name_of(c, "'2026-05-01 12:00:00.25'::timestamp").await, "2026-05-01 12:00:00.25");
        assert_eq!(name_of(c, "1.50::numeric").await, "1.5");
        assert_eq!(name_of(c, "100::numeric").await, "100");
        assert_eq!(name_of(c, "'gold'::public.tier").await, "gold");
        assert_eq!(name_of(c, "'ab'::char(8)").await, "ab");
        assert_eq!(name_of(c, "(-7)::int2").await, "-7");
    }
    let fence: i64 = a.query_one("SELECT high_water FROM fencing.fence('2026-05-01')", &[]).await.unwrap().get(0);
    assert_eq!(fence, 51);
    // Renaming an enum's value would rename every resource of that label.
    assert_eq!(fails(&a, "ALTER TYPE public.tier RENAME VALUE 'gold' TO 'platinum'").await.0, "55000");
    a.batch_execute("ALTER TYPE public.tier ADD VALUE 'platinum'").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn columns_without_a_stable_name_are_refused() {
    let pg = with_extension().await;
    let c = connect(&pg.url).await;
    for ty in ["double precision", "real", "bytea", "money", "interval", "jsonb", "time"] {
        c.batch_execute(&format!("CREATE TABLE public.t (id {ty} PRIMARY KEY, token bigint)")).await.unwrap();
        let (code, _) = fails(&c, "SELECT fencing.protect('public.t', 'id', 'token')").await;
        assert_eq!(code, "42804", "{ty}");
        c.batch_execute("DROP TABLE public.t").await.unwrap();
    }
    // Two texts that a nondeterministic collation holds as one key.
    let icu = c
        .batch_execute("CREATE COLLATION public.ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false)")
        .await;
    if icu.is_ok() {
        c.batch_execute("CREATE TABLE public.ci_t (id text COLLATE public.ci PRIMARY KEY, token bigint)")
            .await
            .unwrap();
        assert_eq!(fails(&c, "SELECT fencing.protect('public.ci_t', 'id', 'token')").await.0, "42804");
    }
    // A name that breaks the shared rule is refused with its code.
    c.batch_execute(
        "CREATE TABLE public.named (id text PRIMARY KEY, token bigint);
         SELECT fencing.protect('public.named', 'id', 'token');",
    )
    .await
    .unwrap();
    let e = c.batch_execute("INSERT INTO public.named VALUES (' padded', 1)").await.unwrap_err();
    let db = e.as_db_error().unwrap();
    assert_eq!(db.code().code(), "22023");
    assert!(db.message().contains("name_whitespace"), "{}", db.message());
}
