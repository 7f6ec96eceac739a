//! The `fencing` PostgreSQL extension's SQL surface against a real
//! PostgreSQL 15 on 127.0.0.1: `fencing.admit` agrees with the native rules
//! on every shared vector and on random cases; the GC-pause story through two
//! sessions and through psql; sequences, upserts, the strict policy and the
//! token sources of UPDATE and DELETE; protect/unprotect errors; the
//! operator's reset.

use fencing_cli::vectors::{Case, load_dir};
use fencing_postgres_tests::{connect, fails, sqlstate, with_extension};
use fencing_runtime::{Admission, Decision, Fence, Guard, NativeGuard, Policy, Rejection, Sequencer, accept};
use rand::{Rng, SeedableRng};
use std::path::Path;
use tokio_postgres::Client;

/// Asks `fencing.admit` and rebuilds the rule type from its row.
async fn admit_sql(
    c: &Client,
    fence: Option<&Fence>,
    s: &Sequencer,
    policy: Policy,
) -> Result<Decision, tokio_postgres::Error> {
    let i = |v: u64| v as i64;
    let row = c
        .query_one(
            "SELECT admitted, reason, high_water, last_sequence, new_term FROM fencing.admit($1, $2, $3, $4, $5, $6, $7)",
            &[
                &fence.map(|f| f.lock.as_str()),
                &fence.map(|f| i(f.high_water)),
                &fence.and_then(|f| f.sequence).map(i),
                &s.lock.as_str(),
                &i(s.token),
                &s.sequence.map(i),
                &policy.name(),
            ],
        )
        .await?;
    let high_water = row.get::<_, Option<i64>>(2).map(|v| v as u64);
    let last = row.get::<_, Option<i64>>(3).map(|v| v as u64);
    if row.get::<_, bool>(0) {
        return Ok(Ok(Admission { high_water: high_water.unwrap(), sequence: last, new_term: row.get(4) }));
    }
    let reason: String = row.get(1);
    Ok(Err(match reason.as_str() {
        "invalid_token" => Rejection::InvalidToken,
        "wrong_lock" => Rejection::WrongLock,
        "stale_token" => Rejection::StaleToken { presented: s.token, high_water: high_water.unwrap() },
        "token_reused" => Rejection::TokenReused { presented: s.token, high_water: high_water.unwrap() },
        "sequence_regressed" => {
            Rejection::SequenceRegressed { token: s.token, presented: s.sequence, last: last.unwrap() }
        }
        other => panic!("unknown reason {other}"),
    }))
}

/// The refusal code of the first lock that is not a name by the shared rule, if any.
fn bad_lock(fence: Option<&Fence>, s: &Sequencer) -> Option<&'static str> {
    let locks = [Some(s.lock.as_str()), fence.map(|f| f.lock.as_str())];
    locks.into_iter().flatten().find_map(|l| accept::name(l).err().map(|e| e.code()))
}

fn fits_bigint(fence: Option<&Fence>, s: &Sequencer) -> bool {
    let values = [Some(s.token), s.sequence, fence.map(|f| f.high_water), fence.and_then(|f| f.sequence)];
    values.into_iter().flatten().all(|v| v <= i64::MAX as u64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admit_agrees_with_the_native_rules_on_every_vector_and_random_cases() {
    let pg = with_extension().await;
    let c = connect(&pg.url).await;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../../tests/vectors");
    let (mut compared, mut out_of_range, mut not_a_name) = (0, 0, 0);
    for file in load_dir(&dir).unwrap() {
        for case in &file.cases {
            let Case::Admit { name, policy, fence, sequencer, expect } = case else { continue };
            let native = NativeGuard.admit(fence.as_ref(), sequencer, *policy).unwrap();
            assert_eq!(native, expect.0, "{name}: the native rules disagree with the vector");
            match admit_sql(&c, fence.as_ref(), sequencer, *policy).await {
                Ok(sql) => {
                    assert!(fits_bigint(fence.as_ref(), sequencer), "{name}: a value above 2^63-1 was accepted");
                    assert_eq!(
                        bad_lock(fence.as_ref(), sequencer),
                        None,
                        "{name}: a lock that is not a name was accepted"
                    );
                    assert_eq!(sql, native, "{name}");
                    compared += 1;
                }
                Err(e) => {
                    let db = e.as_db_error().unwrap_or_else(|| panic!("{name}: {e}"));
                    if let Some(code) = bad_lock(fence.as_ref(), sequencer) {
                        // A lock that is not a name by the hosts' shared rule is refused by its code.
                        assert!(db.message().contains(code), "{name}: {}", db.message());
                        not_a_name += 1;
                    } else {
                        // Values above 2^63-1 arrive as negative bigints: refused, never wrapped.
                        assert!(!fits_bigint(fence.as_ref(), sequencer), "{name}: {e}");
                        assert_eq!(sqlstate(&e).0, "22003", "{name}");
                        out_of_range += 1;
                    }
                }
            }
        }
    }
    assert!(
        compared >= 40 && out_of_range >= 1 && not_a_name >= 1,
        "compared {compared}, out of range {out_of_range}, not a name {not_a_name}"
    );

    let mut rng = rand::rngs::StdRng::seed_from_u64(12);
    for i in 0..2000 {
        let lock = |rng: &mut rand::rngs::StdRng| ["a", "b"][rng.random_range(0..2)].to_owned();
        let small = |rng: &mut rand::rngs::StdRng| rng.random_range(0..6u64);
        let fence = rng.random_bool(0.8).then(|| Fence {
            lock: lock(&mut rng),
            high_water: 1 + small(&mut rng),
            sequence: rng.random_bool(0.5).then(|| small(&mut rng)),
        });
        let s = Sequencer {
            lock: lock(&mut rng),
            token: small(&mut rng) + small(&mut rng) / 2,
            sequence: rng.random_bool(0.5).then(|| small(&mut rng)),
        };
        let policy = Policy::ALL[rng.random_range(0..2)];
        let native = NativeGuard.admit(fence.as_ref(), &s, policy).unwrap();
        assert_eq!(admit_sql(&c, fence.as_ref(), &s, policy).await.unwrap(), native, "case {i}: {fence:?} {s:?}");
    }
}

/// Creates `public.orders` under the fence (no lock column: the lock is the resource's name).
async fn orders(c: &Client) {
    c.batch_execute(
        "CREATE TABLE public.orders (id text PRIMARY KEY, body text NOT NULL, token bigint);
         SELECT fencing.protect('public.orders', 'id', 'token');",
    )
    .await
    .unwrap();
}

async fn body(c: &Client) -> String {
    c.query_one("SELECT body FROM public.orders WHERE id = 'orders-2026-05'", &[]).await.unwrap().get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_pause_story_from_two_sessions_and_from_psql() {
    let pg = with_extension().await;
    let (a, b) = (connect(&pg.url).await, connect(&pg.url).await);
    orders(&a).await;
    // A holds token 33 and writes; it pauses, its lease expires, B gets 34 and writes.
    a.batch_execute("INSERT INTO public.orders VALUES ('orders-2026-05', 'A-early', 33)").await.unwrap();
    b.batch_execute("UPDATE public.orders SET body = 'B', token = 34 WHERE id = 'orders-2026-05'").await.unwrap();
    // A wakes up and writes with 33.
    let (code, detail) =
        fails(&a, "UPDATE public.orders SET body = 'A-late', token = 33 WHERE id = 'orders-2026-05'").await;
    assert_eq!(code, "FN001");
    assert_eq!(
        (detail["reason"].as_str(), detail["presented"].as_i64(), detail["high_water"].as_i64()),
        (Some("stale_token"), Some(33), Some(34))
    );
    assert_eq!(body(&b).await, "B");
    // A DELETE carries its token in a transaction-local setting.
    let (code, _) = fails(&a, "BEGIN; SET LOCAL fencing.token = 33; DELETE FROM public.orders; COMMIT").await;
    assert_eq!(code, "FN001");
    a.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(body(&b).await, "B");

    // Another client: psql, with nothing of ours in between.
    let psql = |sql: &str| {
        let out = std::process::Command::new("psql")
            .args([&pg.url, "-X", "-v", "ON_ERROR_STOP=1", "-c", "\\set VERBOSITY verbose", "-c", sql])
            .output()
            .expect("run psql");
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (status, stderr) = psql("UPDATE public.orders SET body = 'psql-late', token = 33 WHERE id = 'orders-2026-05'");
    assert_ne!(status, Some(0));
    assert!(stderr.contains("FN001") && stderr.contains("stale token 33"), "{stderr}");
    assert_eq!(body(&b).await, "B");
    let (status, stderr) = psql("UPDATE public.orders SET body = 'psql-34', token = 34 WHERE id = 'orders-2026-05'");
    assert_eq!(status, Some(0), "{stderr}");
    assert_eq!(body(&b).await, "psql-34");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_sources_sequences_upserts_and_the_strict_policy() {
    let pg = with_extension().await;
    let c = connect(&pg.url).await;
    orders(&c).await;
    c.batch_execute("INSERT INTO public.orders VALUES ('orders-2026-05', 'v1', 5)").await.unwrap();
    // An UPDATE that does not set the token column presents no token, never the row's old one.
    let (code, detail) = fails(&c, "UPDATE public.orders SET body = 'no-token'").await;
    assert_eq!((code.as_str(), detail["reason"].as_str()), ("FN004", Some("invalid_token")));
    // Setting the column to its current value is presenting that token.
    c.batch_execute("UPDATE public.orders SET body = 'same', token = 5").await.unwrap();
    // With SET LOCAL fencing.token the row records the presented token.
    c.batch_execute("BEGIN; SET LOCAL fencing.token = 6; UPDATE public.orders SET body = 'v6'; COMMIT").await.unwrap();
    let row = c.query_one("SELECT body, token FROM public.orders", &[]).await.unwrap();
    assert_eq!((row.get::<_, String>(0), row.get::<_, i64>(1)), ("v6".into(), 6));
    // Tokens outside 1..=2^63-1 are clear errors, never wrapped.
    assert_eq!(fails(&c, "UPDATE public.orders SET token = 0").await.0, "FN004");
    assert_eq!(fails(&c, "UPDATE public.orders SET token = -1").await.0, "22003");
    let (code, _) =
        fails(&c, "BEGIN; SET LOCAL fencing.token = '9223372036854775808'; DELETE FROM public.orders").await;
    c.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(code, "22003");
    let (code, _) = fails(&c, "BEGIN; SET LOCAL fencing.token = 'seven'; DELETE FROM public.orders").await;
    c.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(code, "22P02");
    assert_eq!(fails(&c, "TRUNCATE public.orders").await.0, "0A000");

    // Sequences within one token.
    c.batch_execute(
        "CREATE TABLE public.log (id text, n int, token bigint, seq bigint, owner text);
         SELECT fencing.protect('public.log', 'id', 'token', 'owner', 'seq');
         INSERT INTO public.log VALUES ('L', 1, 9, 1, 'writer'), ('L', 2, 9, 2, 'writer');",
    )
    .await
    .unwrap();
    let (code, detail) = fails(&c, "INSERT INTO public.log VALUES ('L', 3, 9, 2, 'writer')").await;
    assert_eq!((code.as_str(), detail["last_sequence"].as_i64()), ("FN005", Some(2)));
    assert_eq!(fails(&c, "INSERT INTO public.log VALUES ('L', 3, 10, 1, 'intruder')").await.0, "FN003");
    c.batch_execute("INSERT INTO public.log VALUES ('L', 3, 10, 1, 'writer')").await.unwrap();
    assert_eq!(c.query_one("SELECT count(*) FROM public.log", &[]).await.unwrap().get::<_, i64>(0), 3);

    // Strict policy: a token admits one write, and one write is one transaction's rows of one resource.
    c.batch_execute(
        "CREATE TABLE public.kv (resource text, k text, v text, token bigint, PRIMARY KEY (resource, k));
         SELECT fencing.protect('public.kv', 'resource', 'token', policy => 'strictly-increasing');
         INSERT INTO public.kv VALUES ('R', 'a', '1', 7), ('R', 'b', '1', 7);
         INSERT INTO public.kv VALUES ('R', 'a', '2', 8) ON CONFLICT (resource, k) DO UPDATE SET v = EXCLUDED.v, token = EXCLUDED.token;",
    )
    .await
    .unwrap();
    assert_eq!(fails(&c, "UPDATE public.kv SET v = '3', token = 8").await.0, "FN002");
    c.batch_execute("UPDATE public.kv SET v = '3', token = 9").await.unwrap();
    let fence = c.query_one("SELECT high_water FROM fencing.fence('R')", &[]).await.unwrap();
    assert_eq!(fence.get::<_, i64>(0), 9);

    // protect refuses what it cannot fence, by name.
    let (code, _) = fails(&c, "SELECT fencing.protect('public.kv', 'resource', 'nope')").await;
    assert_eq!(code, "42703");
    assert_eq!(fails(&c, "SELECT fencing.protect('public.kv', 'resource', 'v')").await.0, "42804");
    assert_eq!(
        fails(&c, "SELECT fencing.protect('public.kv', 'resource', 'token', policy => 'loose')").await.0,
        "22023"
    );
    // unprotect: writes are no longer decided; the fences stay.
    c.batch_execute("SELECT fencing.unprotect('public.kv'); UPDATE public.kv SET v = '4', token = 1").await.unwrap();
    assert_eq!(c.query_one("SELECT high_water FROM fencing.fence('R')", &[]).await.unwrap().get::<_, i64>(0), 9);
    assert_eq!(fails(&c, "SELECT fencing.unprotect('public.kv')").await.0, "42704");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_reset_needs_its_role_and_leaves_a_record() {
    let pg = with_extension().await;
    let admin = connect(&pg.url).await;
    orders(&admin).await;
    admin
        .batch_execute(
            "INSERT INTO public.orders VALUES ('orders-2026-05', 'v', 9223372036854775807);
             CREATE ROLE ops LOGIN; GRANT ALL ON public.orders TO ops;",
        )
        .await
        .unwrap();
    let ops = connect(&pg.url.replace("user=fencing", "user=ops")).await;
    // The resource is bricked at 2^63-1: no real token can write it.
    assert_eq!(fails(&ops, "UPDATE public.orders SET body = 'x', token = 100").await.0, "FN001");
    // Neither the reset nor the fence table is open to ordinary roles.
    assert_eq!(fails(&ops, "SELECT fencing.reset_fence('orders-2026-05', 'unbrick')").await.0, "42501");
    assert_eq!(fails(&ops, "DELETE FROM fencing.fences").await.0, "42501");
    admin.batch_execute("GRANT fencing_admin TO ops").await.unwrap();
    assert_eq!(fails(&ops, "SELECT fencing.reset_fence('orders-2026-05', '')").await.0, "22023");
    ops.batch_execute(
        "SELECT fencing.reset_fence('orders-2026-05', 'token 2^63-1 written by a test client', 'orders-2026-05', 100)",
    )
    .await
    .unwrap();
    assert_eq!(fails(&ops, "UPDATE public.orders SET body = 'x', token = 99").await.0, "FN001");
    ops.batch_execute("UPDATE public.orders SET body = 'x', token = 101").await.unwrap();
    let rec = admin
        .query_one("SELECT by_role::text, old_high_water, new_high_water, reason FROM fencing.resets", &[])
        .await
        .unwrap();
    assert_eq!(rec.get::<_, String>(0), "ops");
    assert_eq!((rec.get::<_, i64>(1), rec.get::<_, i64>(2)), (i64::MAX, 100));
    assert!(rec.get::<_, String>(3).contains("2^63-1"));
}
