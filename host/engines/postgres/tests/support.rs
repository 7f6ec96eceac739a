//! What the PostgreSQL extension's tests share: a PostgreSQL 15 with the
//! `fencing` extension created, and helpers for its errors.
//!
//! The extension must be installed into that PostgreSQL first
//! (`scripts/pg-extension install`; `scripts/test` does it). The tests are
//! `main.rs` and its modules: `sql.rs` (the SQL functions and the shared
//! vectors), `in_row.rs` (tables that carry their fence in the row), `ops.rs`
//! (reset, plugins, the compiled cache, and the reference server deciding
//! through the extension).

use fencing_testkit::postgres::Postgres;
use tokio_postgres::{Client, NoTls};

/// A client connected to `url`, its connection driven in the background.
pub async fn connect(url: &str) -> Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await.expect("connect to the test PostgreSQL");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// A fresh PostgreSQL with `CREATE EXTENSION fencing` done.
pub async fn with_extension() -> Postgres {
    let pg = Postgres::start().await;
    let c = connect(&pg.url).await;
    if let Err(e) = c.batch_execute("CREATE EXTENSION fencing").await {
        panic!(
            "CREATE EXTENSION fencing failed: {}; install it first with `scripts/pg-extension install`",
            e.as_db_error().map(|d| d.message().to_owned()).unwrap_or_else(|| e.to_string())
        );
    }
    pg
}

/// The SQLSTATE and the DETAIL (parsed as JSON when it is) of a database error.
pub fn sqlstate(e: &tokio_postgres::Error) -> (String, serde_json::Value) {
    let db = e.as_db_error().unwrap_or_else(|| panic!("not a database error: {e}"));
    let detail = db.detail().map(|d| serde_json::from_str(d).unwrap_or(serde_json::Value::String(d.into())));
    (db.code().code().to_owned(), detail.unwrap_or(serde_json::Value::Null))
}

/// Runs `sql` and returns the SQLSTATE it fails with (panics if it succeeds).
pub async fn fails(c: &Client, sql: &str) -> (String, serde_json::Value) {
    match c.batch_execute(sql).await {
        Ok(()) => panic!("expected an error from: {sql}"),
        Err(e) => sqlstate(&e),
    }
}

/// `fencing.guard_info()` of the backend behind `c`.
pub async fn guard_info(c: &Client) -> serde_json::Value {
    let text: String = c.query_one("SELECT fencing.guard_info()::text", &[]).await.unwrap().get(0);
    serde_json::from_str(&text).unwrap()
}
