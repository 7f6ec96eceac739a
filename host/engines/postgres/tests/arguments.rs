//! The shared argument vectors (`tests/vectors/arguments/`, format in
//! `tests/vectors/README.md`) through the extension's own SQL entry points,
//! as the decision vectors go through `fencing.admit` in `sql.rs`.
//!
//! Kinds this host takes: `name` (resources and locks: `fencing.try_write`'s
//! two, `fencing.admit`'s lock, a protected table's resource column,
//! `fencing.lock`, `fencing.reset_fence`'s new lock), `policy`
//! (`fencing.admit`, `fencing.try_write`, `fencing.protect`), `number` (the
//! `fencing.token` and `fencing.sequence` settings), `from_signed` (a
//! `bigint` token through `fencing.try_write` and a token column),
//! `to_signed` (a token handed back as `bigint`: a `fencing.token` setting
//! above 2^63-1 cannot be one) and `proof` (`fencing.proof`). `bytes_hex`
//! cases are skipped: SQL text is UTF-8. A refusal has the SQLSTATE the
//! extension documents for its code, and names the code; PostgreSQL's text
//! cannot hold NUL, so a name with one is refused before the extension sees
//! it, with the same SQLSTATE (22021). An empty setting is an unset one
//! (`number-empty` presents no token: FN004), as `RESET` would.

use fencing_postgres_tests::{connect, with_extension};
use serde_json::Value;
use std::path::Path;
use tokio_postgres::Client;

fn cases() -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../../tests/vectors/arguments/arguments.json");
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("read the argument vectors")).unwrap();
    file["cases"].as_array().expect("cases").clone()
}

/// A case's text (`text` repeated `repeat` times); `None` for a `bytes_hex` case.
fn text(case: &Value) -> Option<String> {
    let text = case["text"].as_str()?;
    Some(text.repeat(case["repeat"].as_u64().unwrap_or(1) as usize))
}

/// The SQLSTATE the extension raises for a refusal code (docs/postgres.md).
fn sqlstate(code: &str) -> &'static str {
    match code {
        "name_too_long" | "proof_too_long" => "22001",
        "name_control" | "name_not_utf8" => "22021",
        "number_not_decimal" | "number_leading_zero" | "proof_not_hex" => "22P02",
        "number_too_large" | "number_negative" | "number_above_signed" => "22003",
        _ => "22023",
    }
}

/// Checks one entry point's answer to a case: accepted (`Ok`, or a rule's
/// own refusal `FN0xx` where `rule` allows it), or refused by the argument
/// rule with its SQLSTATE and code.
fn check(name: &str, via: &str, expect: &str, text: &str, answer: Result<(), tokio_postgres::Error>, rule: &[&str]) {
    match (expect, answer) {
        ("ok", Ok(())) => {}
        ("ok", Err(e)) => {
            let db = e.as_db_error().unwrap_or_else(|| panic!("{name} via {via}: {e}"));
            assert!(
                rule.contains(&db.code().code()),
                "{name} via {via}: refused {}: {}",
                db.code().code(),
                db.message()
            );
        }
        (code, Ok(())) => panic!("{name} via {via}: accepted, expected {code}"),
        (code, Err(e)) => {
            let db = e.as_db_error().unwrap_or_else(|| panic!("{name} via {via}: {e}"));
            assert_eq!(db.code().code(), sqlstate(code), "{name} via {via}: {}", db.message());
            if !text.contains('\0') {
                assert!(
                    db.message().contains(code),
                    "{name} via {via}: the message does not name {code}: {}",
                    db.message()
                );
            }
        }
    }
}

/// Runs `sql` with `text` as `$1` in a transaction that is rolled back.
async fn try_sql(c: &Client, setup: &str, sql: &str, text: &str) -> Result<(), tokio_postgres::Error> {
    c.batch_execute(&format!("BEGIN; {setup}")).await.unwrap();
    let answer = c.execute(sql, &[&text]).await.map(|_| ());
    c.batch_execute("ROLLBACK").await.unwrap();
    answer
}

/// Runs `sql` with `fencing.<setting>` set to `text` for the transaction (rolled back).
async fn with_setting(c: &Client, settings: &[(&str, &str)], sql: &str) -> Result<(), tokio_postgres::Error> {
    c.batch_execute("BEGIN").await.unwrap();
    for (name, value) in settings {
        c.execute("SELECT pg_catalog.set_config($1, $2, true)", &[name, value]).await.unwrap();
    }
    let answer = c.batch_execute(sql).await;
    c.batch_execute("ROLLBACK").await.unwrap();
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_argument_vector_through_the_extensions_entry_points() {
    let pg = with_extension().await;
    let c = connect(&pg.url).await;
    c.batch_execute(
        "CREATE TABLE public.names (id text PRIMARY KEY, token bigint);
         SELECT fencing.protect('public.names', 'id', 'token');
         CREATE TABLE public.locked (id text PRIMARY KEY, token bigint);
         SELECT fencing.protect('public.locked', 'id', 'token');
         CREATE TABLE public.nums (id text PRIMARY KEY, token bigint);
         SELECT fencing.protect('public.nums', 'id', 'token');
         CREATE TABLE public.pol (id text PRIMARY KEY, token bigint);",
    )
    .await
    .unwrap();
    let cases = cases();
    let mut ran = std::collections::BTreeMap::<&str, usize>::new();
    for (i, case) in cases.iter().enumerate() {
        let (name, kind, expect) =
            (case["name"].as_str().unwrap(), case["kind"].as_str().unwrap(), case["expect"].as_str().unwrap());
        let Some(text) = (match kind {
            "from_signed" | "to_signed" => Some(case["value"].to_string()),
            _ => text(case),
        }) else {
            continue;
        };
        let t = text.as_str();
        match kind {
            "name" => {
                let resource = format!("arg-{i}");
                let answers = [
                    ("try_write resource", try_sql(&c, "", "SELECT * FROM fencing.try_write($1, 'lock', 1)", t).await),
                    (
                        "try_write lock",
                        try_sql(&c, "", &format!("SELECT * FROM fencing.try_write('{resource}', $1, 1)"), t).await,
                    ),
                    ("admit lock", try_sql(&c, "", "SELECT * FROM fencing.admit(NULL, NULL, NULL, $1, 1)", t).await),
                    ("resource column", try_sql(&c, "", "INSERT INTO public.names VALUES ($1, 1)", t).await),
                    (
                        "reset_fence new_lock",
                        try_sql(&c, "", &format!("SELECT fencing.reset_fence('{resource}', 'vectors', $1, 5)"), t)
                            .await,
                    ),
                ];
                for (via, answer) in answers {
                    check(name, via, expect, t, answer, &[]);
                }
                // A setting cannot hold NUL either (the protocol refuses it, as above).
                if !t.contains('\0') {
                    let insert = format!("INSERT INTO public.locked VALUES ('{resource}', 1)");
                    let answer = with_setting(&c, &[("fencing.lock", t)], &insert).await;
                    // An empty setting is no setting: the lock is then the resource's name.
                    let expect = if t.is_empty() { "ok" } else { expect };
                    check(name, "fencing.lock", expect, t, answer, &[]);
                }
                if expect == "ok" {
                    c.execute("INSERT INTO public.names VALUES ($1, 1)", &[&t]).await.unwrap();
                    let stored: i64 =
                        c.query_one("SELECT high_water FROM fencing.fence($1)", &[&t]).await.unwrap().get(0);
                    assert_eq!(stored, 1, "{name}: the fence is found by the same name");
                }
            }
            "policy" => {
                let answers = [
                    (
                        "admit",
                        try_sql(&c, "", "SELECT * FROM fencing.admit(NULL, NULL, NULL, 'l', 1, NULL, $1)", t).await,
                    ),
                    ("try_write", try_sql(&c, "", "SELECT * FROM fencing.try_write('p', 'l', 1, NULL, $1)", t).await),
                    (
                        "protect",
                        try_sql(&c, "", "SELECT fencing.protect('public.pol', 'id', 'token', policy => $1)", t).await,
                    ),
                ];
                for (via, answer) in answers {
                    check(name, via, expect, t, answer, &[]);
                }
            }
            "number" | "to_signed" => {
                // A setting's number must also fit bigint: above 2^63-1 it cannot be presented.
                let expect = match (expect, case["value"].as_u64()) {
                    ("ok", Some(v)) if v > i64::MAX as u64 => "number_above_signed",
                    _ => expect,
                };
                // An empty setting is an unset one: no token (FN004), no sequence.
                let expect = if t.is_empty() { "ok" } else { expect };
                let insert = format!("INSERT INTO public.nums VALUES ('n-{i}', NULL)");
                let token = with_setting(&c, &[("fencing.token", t)], &insert).await;
                // Token 0 and no token at all are the rules' refusal (FN004), not the text's.
                check(name, "fencing.token", expect, t, token, &["FN004"]);
                let sequence = with_setting(&c, &[("fencing.token", "1"), ("fencing.sequence", t)], &insert).await;
                check(name, "fencing.sequence", expect, t, sequence, &[]);
                if expect == "ok" && !t.is_empty() && t != "0" {
                    c.batch_execute("BEGIN").await.unwrap();
                    c.execute("SELECT pg_catalog.set_config('fencing.token', $1, true)", &[&t]).await.unwrap();
                    c.batch_execute(&format!("{insert}; COMMIT")).await.unwrap();
                    let stored: String = c
                        .query_one(&format!("SELECT token::text FROM public.nums WHERE id = 'n-{i}'"), &[])
                        .await
                        .unwrap()
                        .get(0);
                    assert_eq!(stored, t, "{name}");
                }
            }
            "from_signed" => {
                let v: i64 = case["value"].as_i64().unwrap();
                let answers = [
                    (
                        "try_write token",
                        c.query_one("SELECT admitted FROM fencing.try_write($1, $1, $2)", &[&format!("fs-{i}"), &v])
                            .await
                            .map(|_| ()),
                    ),
                    (
                        "token column",
                        c.execute("INSERT INTO public.names VALUES ($1, $2)", &[&format!("fs-{i}"), &v])
                            .await
                            .map(|_| ()),
                    ),
                ];
                for (via, answer) in answers {
                    check(name, via, expect, t, answer, &["FN004"]);
                }
            }
            "proof" => {
                let keys = "10 ed25519 43a72e714401762df66b68c26dfbdf2682aaec9f2474eca4613e424a0fbafd3c";
                let insert = format!("INSERT INTO public.names VALUES ('pf-{i}', 1)");
                let answer = with_setting(&c, &[("fencing.verify_keys", keys), ("fencing.proof", t)], &insert).await;
                // Text taken as a proof then meets the proof rules (missing, malformed, ...).
                check(name, "fencing.proof", expect, t, answer, &["FN006", "FN007", "FN008", "FN009"]);
            }
            other => panic!("{name}: unknown kind {other}"),
        }
        *ran.entry(kind).or_default() += 1;
    }
    for kind in ["name", "policy", "number", "from_signed", "to_signed", "proof"] {
        assert!(ran.get(kind).copied().unwrap_or(0) >= 3, "kind {kind} ran {ran:?}");
    }
}
