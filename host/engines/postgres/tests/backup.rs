//! Backups carry every fence: `pg_dump` in the custom format restored with
//! `pg_restore`, and in the plain format replayed with `psql`, each into a
//! fresh database, and a `pg_basebackup` started as a server of its own. Both protected tables (a fence row, and the fence in the
//! row) stay protected, a token below the mark before the dump is refused
//! after the restore and a newer one admitted, and the reset records are kept
//! with their numbering.

use fencing_postgres_tests::{connect, fails, with_extension};
use fencing_testkit::postgres::{Postgres, bin};
use std::process::Command;
use tokio_postgres::Client;

/// Runs a PostgreSQL client program against `pg`'s database `db`.
fn run(pg: &Postgres, program: &str, db: &str, args: &[&str]) {
    let port = pg.port().to_string();
    let out = Command::new(bin(program))
        .args(["-h", "127.0.0.1", "-p", &port, "-U", "fencing", "-d", db])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {program}: {e}"));
    assert!(out.status.success(), "{program} {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
}

/// Two protected tables, a fence at 34 for each, and one recorded reset.
async fn fenced_database(c: &Client) {
    c.batch_execute(
        "CREATE TABLE public.orders (id text PRIMARY KEY, body text, token bigint);
         SELECT fencing.protect('public.orders', 'id', 'token');
         INSERT INTO public.orders VALUES ('o-1', 'B', 34);
         CREATE TABLE public.carts (id text PRIMARY KEY, body text, token bigint);
         SELECT fencing.protect('public.carts', 'id', 'token', fence_in_row => true);
         INSERT INTO public.carts VALUES ('c-1', 'B', 34);
         SELECT fencing.check('r-1', 'r-1', 90);
         SELECT fencing.reset_fence('r-1', 'a client pushed it too far', 'r-1', 40);",
    )
    .await
    .unwrap();
}

/// What a restored database must show: the same protection, the same marks, the reset kept.
async fn still_fenced(c: &Client, how: &str) {
    for table in ["orders", "carts"] {
        let late = format!("UPDATE public.{table} SET body = 'late', token = 33");
        let (code, detail) = fails(c, &late).await;
        assert_eq!(code, "FN001", "{how}: {table}: {detail}");
        assert_eq!(detail["high_water"].as_i64(), Some(34), "{how}: {table}");
        c.batch_execute(&format!("UPDATE public.{table} SET body = 'C', token = 35")).await.unwrap();
    }
    let protected: i64 = c.query_one("SELECT count(*) FROM fencing.protected", &[]).await.unwrap().get(0);
    assert_eq!(protected, 2, "{how}");
    let mark: i64 = c.query_one("SELECT high_water FROM fencing.fence('r-1')", &[]).await.unwrap().get(0);
    assert_eq!(mark, 40, "{how}");
    let reasons: Vec<String> =
        c.query("SELECT reason FROM fencing.resets ORDER BY id", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(reasons, ["a client pushed it too far"], "{how}");
    // The next reset is numbered after the restored one.
    c.batch_execute("SELECT fencing.reset_fence('r-1', 'after the restore')").await.unwrap();
    let id: i64 = c.query_one("SELECT max(id) FROM fencing.resets", &[]).await.unwrap().get(0);
    assert_eq!(id, 2, "{how}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pg_dump_and_restore_carry_every_fence_in_both_formats() {
    let pg = with_extension().await;
    let c = connect(&pg.url).await;
    fenced_database(&c).await;
    let dir = tempfile::tempdir().unwrap();
    let custom = dir.path().join("fenced.dump");
    let plain = dir.path().join("fenced.sql");
    run(&pg, "pg_dump", "postgres", &["-Fc", "-f", custom.to_str().unwrap()]);
    run(&pg, "pg_dump", "postgres", &["-Fp", "-f", plain.to_str().unwrap()]);
    for db in ["from_custom", "from_plain"] {
        c.batch_execute(&format!("CREATE DATABASE {db}")).await.unwrap();
    }
    run(&pg, "pg_restore", "from_custom", &["--exit-on-error", custom.to_str().unwrap()]);
    run(&pg, "psql", "from_plain", &["-q", "-v", "ON_ERROR_STOP=1", "-f", plain.to_str().unwrap()]);
    for (db, how) in [("from_custom", "pg_dump -Fc | pg_restore"), ("from_plain", "pg_dump -Fp | psql")] {
        let restored = connect(&pg.url.replace("dbname=postgres", &format!("dbname={db}"))).await;
        still_fenced(&restored, how).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_base_backup_carries_every_fence() {
    let pg = with_extension().await;
    fenced_database(&connect(&pg.url).await).await;
    let copy = pg.from_base_backup().await;
    still_fenced(&connect(&copy.url).await, "pg_basebackup").await;
}
