//! The `fencing` PostgreSQL extension under load and faults, against a real
//! PostgreSQL 15 on 127.0.0.1: racing sessions on one resource, sessions on
//! different resources, the misbehaving plugin through `fencing.plugin_path`,
//! a backend killed mid-transaction, the compiled-plugin cache, and
//! `fencing serve --pg-guard extension` sharing its fence with SQL clients.

#[path = "../../../../tests/plugins/misbehaving/for_tests.rs"]
mod misbehaving_plugin;

use fencing_api::client::storage::{StorageClient, Write};
use fencing_postgres_tests::{connect, fails, guard_info, sqlstate, with_extension};
use fencing_runtime::Policy;
use fencing_server::storage::{Engine, Mutation, PgGuard, PostgresEngine, StorageError, WriteOutcome};
use fencing_testkit::server::ServeProcess;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_sessions_never_admit_below_an_admitted_token() {
    race(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_sessions_never_admit_below_an_admitted_token_with_the_fence_in_the_row() {
    race(true).await;
}

/// Two sessions racing on one resource of a table protected with `fence_in_row`
/// or without, then sessions on two resources.
async fn race(fence_in_row: bool) {
    let pg = with_extension().await;
    let setup = connect(&pg.url).await;
    // An AFTER trigger runs while the write still holds its fence (the fence
    // row, or the row itself), so `ord` numbers the admitted writes in the
    // order they held the fence.
    setup
        .batch_execute(&format!(
            "CREATE TABLE public.race (id text PRIMARY KEY, token bigint, payload text);
             CREATE TABLE public.race_log (ord bigserial PRIMARY KEY, token bigint, payload text);
             CREATE FUNCTION public.log_race() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN INSERT INTO public.race_log (token, payload) VALUES (NEW.token, NEW.payload); RETURN NEW; END $$;
             INSERT INTO public.race VALUES ('r', 1, 'init');
             SELECT fencing.protect('public.race', 'id', 'token', fence_in_row => {fence_in_row});
             CREATE TRIGGER log AFTER UPDATE ON public.race FOR EACH ROW EXECUTE FUNCTION public.log_race();"
        ))
        .await
        .unwrap();
    let sessions: Vec<_> = (0..2u64)
        .map(|s| {
            let url = pg.url.clone();
            tokio::spawn(async move {
                let c = connect(&url).await;
                let mut rng = rand::rngs::StdRng::seed_from_u64(s);
                let (mut admitted, mut refused) = (0u64, 0u64);
                // Tokens drift upwards with jitter, so both sessions see admissions and refusals.
                for i in 0..300 {
                    let token = i + rng.random_range(1..40i64);
                    let payload = format!("s{s}-{i}-{token}");
                    let r = c
                        .execute("UPDATE public.race SET token = $1, payload = $2 WHERE id = 'r'", &[&token, &payload])
                        .await;
                    match r {
                        Ok(1) => admitted += 1,
                        Ok(n) => panic!("updated {n} rows"),
                        Err(e) => {
                            assert_eq!(sqlstate(&e).0, "FN001", "{e}");
                            refused += 1;
                        }
                    }
                }
                (admitted, refused)
            })
        })
        .collect();
    let (mut admitted, mut refused) = (0, 0);
    for s in sessions {
        let (a, r) = s.await.unwrap();
        admitted += a;
        refused += r;
    }
    assert!(admitted > 10 && refused > 10, "admitted {admitted}, refused {refused}");
    let log = setup.query("SELECT token, payload FROM public.race_log ORDER BY ord", &[]).await.unwrap();
    assert_eq!(log.len() as u64, admitted, "every admitted write, and nothing refused, was applied");
    let tokens: Vec<i64> = log.iter().map(|r| r.get(0)).collect();
    assert!(tokens.windows(2).all(|w| w[0] <= w[1]), "an admitted token went below an earlier one: {tokens:?}");
    let last = log.last().unwrap();
    let row = setup.query_one("SELECT token, payload FROM public.race", &[]).await.unwrap();
    assert_eq!((row.get::<_, i64>(0), row.get::<_, String>(1)), (last.get(0), last.get(1)));
    let fence = setup.query_one("SELECT high_water FROM fencing.fence('r')", &[]).await.unwrap();
    assert_eq!(fence.get::<_, i64>(0), *tokens.iter().max().unwrap());

    // Writers of different resources do not wait for each other; writers of one resource do.
    setup.batch_execute("INSERT INTO public.race VALUES ('x', 1, 'x'), ('y', 1, 'y')").await.unwrap();
    let holder = connect(&pg.url).await;
    holder.batch_execute("BEGIN; UPDATE public.race SET token = 2 WHERE id = 'x'").await.unwrap();
    let other = connect(&pg.url).await;
    other.batch_execute("SET lock_timeout = '5s'; UPDATE public.race SET token = 2 WHERE id = 'y'").await.unwrap();
    other.batch_execute("SET lock_timeout = '200ms'").await.unwrap();
    assert_eq!(fails(&other, "UPDATE public.race SET token = 3 WHERE id = 'x'").await.0, "55P03");
    holder.batch_execute("COMMIT").await.unwrap();
    other.batch_execute("UPDATE public.race SET token = 3 WHERE id = 'x'").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misbehaving_plugin_fails_each_statement_and_the_backend_lives_on() {
    let pg = with_extension().await;
    // The server runs as another user: give it a copy it can read.
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("misbehaving.wasm");
    std::fs::copy(misbehaving_plugin::misbehaving(), &plugin).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o644)).unwrap();

    let c = connect(&pg.url).await;
    c.batch_execute(
        "CREATE TABLE public.t (id text PRIMARY KEY, lock text, token bigint);
         SELECT fencing.protect('public.t', 'id', 'token', 'lock');",
    )
    .await
    .unwrap();
    let pid: i32 = c.query_one("SELECT pg_backend_pid()", &[]).await.unwrap().get(0);
    c.batch_execute(&format!("SET fencing.plugin_path = '{}'", plugin.display())).await.unwrap();
    let info = guard_info(&c).await;
    assert_eq!(info["source"].as_str(), Some(plugin.to_str().unwrap()), "{info}");
    for (lock, reason) in [("loop", "guard_timeout"), ("trap", "guard_trap"), ("hog", "guard_out_of_memory")] {
        let started = Instant::now();
        let (code, detail) = fails(&c, &format!("INSERT INTO public.t VALUES ('{lock}-row', '{lock}', 1)")).await;
        assert_eq!(code, "FN010", "{lock}");
        assert!(detail["failure"].as_str().unwrap().starts_with(reason), "{lock}: {detail}");
        assert!(started.elapsed() < Duration::from_secs(10), "{lock} took {:?}", started.elapsed());
        let (code, _) = fails(&c, &format!("SELECT * FROM fencing.admit(NULL, NULL, NULL, '{lock}', 1)")).await;
        assert_eq!(code, "FN010");
        // Same backend, next statement: the plugin's ordinary answer.
        c.batch_execute(&format!("INSERT INTO public.t VALUES ('after-{lock}', 'orders', 1)")).await.unwrap();
    }
    let rows: i64 = c.query_one("SELECT count(*) FROM public.t", &[]).await.unwrap().get(0);
    assert_eq!(rows, 3, "no failed statement left a row");
    // Back to the embedded component, still in the same backend.
    c.batch_execute("RESET fencing.plugin_path; INSERT INTO public.t VALUES ('embedded', 'orders', 1)").await.unwrap();
    let again: i32 = c.query_one("SELECT pg_backend_pid()", &[]).await.unwrap().get(0);
    assert_eq!(pid, again, "the backend was replaced");
    // A missing plugin fails closed; only a superuser may choose the plugin.
    c.batch_execute("SET fencing.plugin_path = '/nonexistent/guard.wasm'").await.unwrap();
    let (code, detail) = fails(&c, "INSERT INTO public.t VALUES ('missing', 'orders', 2)").await;
    assert_eq!(code, "FN010");
    assert!(detail["failure"].as_str().unwrap().contains("cannot read plugin"), "{detail}");
    c.batch_execute("RESET fencing.plugin_path; CREATE ROLE app LOGIN; GRANT ALL ON public.t TO app").await.unwrap();
    let app = connect(&pg.url.replace("user=fencing", "user=app")).await;
    // Before the library is loaded the name is only a placeholder; loading it
    // discards an ordinary role's value, so the embedded component decides.
    app.batch_execute("SET fencing.plugin_path = '/nonexistent/permissive.wasm'").await.unwrap();
    app.batch_execute("INSERT INTO public.t VALUES ('app', 'orders', 3)").await.unwrap();
    let info = guard_info(&app).await;
    assert_eq!(info["source"].as_str(), Some("<embedded>"), "{info}");
    assert_eq!(fails(&app, "SET fencing.plugin_path = '/nonexistent/permissive.wasm'").await.0, "42501");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_killed_mid_transaction_loses_nothing_committed() {
    let pg = with_extension().await;
    let c = connect(&pg.url).await;
    c.batch_execute(
        "CREATE TABLE public.acct (id text PRIMARY KEY, balance int, token bigint);
         SELECT fencing.protect('public.acct', 'id', 'token');
         INSERT INTO public.acct VALUES ('a', 100, 40);",
    )
    .await
    .unwrap();
    let victim = connect(&pg.url).await;
    victim.batch_execute("BEGIN; UPDATE public.acct SET balance = 0, token = 50 WHERE id = 'a'").await.unwrap();
    let pid: i32 = victim.query_one("SELECT pg_backend_pid()", &[]).await.unwrap().get(0);
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL).unwrap();
    // The postmaster resets every backend and recovers. A connection opened
    // before it notices the crash is itself reset, so wait until the
    // bystander's session has been ended, then reconnect when it is back.
    let deadline = Instant::now() + Duration::from_secs(60);
    while c.batch_execute("SELECT 1").await.is_ok() {
        assert!(Instant::now() < deadline, "the postmaster did not reset its backends");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let c = loop {
        if let Ok((client, conn)) = tokio_postgres::connect(&pg.url, tokio_postgres::NoTls).await {
            tokio::spawn(conn);
            if client.batch_execute("SELECT 1").await.is_ok() {
                break client;
            }
        }
        assert!(Instant::now() < deadline, "PostgreSQL did not come back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let row = c.query_one("SELECT balance, token FROM public.acct", &[]).await.unwrap();
    assert_eq!((row.get::<_, i32>(0), row.get::<_, i64>(1)), (100, 40));
    let fence = c.query_one("SELECT high_water FROM fencing.fence('a')", &[]).await.unwrap();
    assert_eq!(fence.get::<_, i64>(0), 40, "the uncommitted fence survived");
    // 50 never committed, so 45 is not stale.
    c.batch_execute("UPDATE public.acct SET balance = 45, token = 45").await.unwrap();
    assert_eq!(fails(&c, "UPDATE public.acct SET balance = 44, token = 44").await.0, "FN001");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compiled_plugins_are_cached_for_later_backends() {
    let pg = with_extension().await;
    let dir = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("chmod").arg("777").arg(dir.path()).status().unwrap();
    assert!(status.success());
    let set = format!("SET fencing.cache_dir = '{}'", dir.path().display());
    let first = connect(&pg.url).await;
    first.batch_execute(&set).await.unwrap();
    let info = guard_info(&first).await;
    assert_eq!(info["from_cache"], false, "{info}");
    let artifacts = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "cwasm"));
    assert_eq!(artifacts.count(), 1);
    let second = connect(&pg.url).await;
    second.batch_execute(&set).await.unwrap();
    let info = guard_info(&second).await;
    assert_eq!((info["from_cache"].as_bool(), info["call_path"].as_str()), (Some(true), Some("direct")), "{info}");
    let decided = second.query_one("SELECT admitted FROM fencing.admit('l', 34, NULL, 'l', 33)", &[]).await.unwrap();
    assert!(!decided.get::<_, bool>(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn serve_with_the_extension_deciding_shares_one_fence_with_sql_clients() {
    let pg = with_extension().await;
    // Fences the server kept while deciding itself carry over to the extension, and back.
    let host_guard = || PgGuard::Host(Arc::new(fencing_runtime::NativeGuard));
    let host = PostgresEngine::connect(&pg.url, host_guard(), Policy::NonDecreasing).await.unwrap();
    let put = |t| fencing_testkit::storage::req("switch", t, "/f", Mutation::Put, b"x");
    assert!(matches!(host.write(put(50)).await.unwrap(), WriteOutcome::Admitted { .. }));
    let engine: Arc<dyn Engine> =
        Arc::new(PostgresEngine::connect(&pg.url, PgGuard::Extension, Policy::NonDecreasing).await.unwrap());
    assert!(matches!(engine.write(put(40)).await.unwrap(), WriteOutcome::Rejected { .. }), "host fence lost");
    assert!(matches!(engine.write(put(60)).await.unwrap(), WriteOutcome::Admitted { .. }));
    let host = PostgresEngine::connect(&pg.url, host_guard(), Policy::NonDecreasing).await.unwrap();
    assert!(matches!(host.write(put(55)).await.unwrap(), WriteOutcome::Rejected { .. }), "extension fence lost");
    fencing_testkit::storage::run_all(engine.clone(), "ext-").await;
    // Tokens the database cannot hold are refused by name, not wrapped.
    let big = fencing_testkit::storage::req("ext-big", u64::MAX, "/f", Mutation::Put, b"x");
    match engine.write(big).await {
        Err(StorageError::InvalidField { field: "fencing_token", .. }) => {}
        other => panic!("expected an invalid fencing_token, got {other:?}"),
    }

    let dir = tempfile::tempdir().unwrap();
    let args = ["--store", "postgres", "--postgres-url", &pg.url, "--pg-guard", "extension"];
    let mut server = ServeProcess::start(dir.path(), &args);
    server.ready().await;
    let http = StorageClient::new(&server.base);
    let w = |token, bytes| Write {
        resource_id: "shared",
        token,
        file_path: "/report.csv",
        mutation: Mutation::Put,
        bytes,
        lock_id: None,
        sequence: None,
        proof: None,
    };
    assert_eq!(http.write(&w(34, b"http-34")).await.unwrap().status, 200);
    // A program writing the server's table directly meets the same fence.
    let sql = connect(&pg.url).await;
    let (code, detail) =
        fails(&sql, "UPDATE fencing_objects SET data = 'sql-33', fencing_token = 33 WHERE resource_id = 'shared'")
            .await;
    assert_eq!((code.as_str(), detail["high_water"].as_i64()), ("FN001", Some(34)));
    sql.batch_execute("UPDATE fencing_objects SET data = 'sql-35', fencing_token = 35 WHERE resource_id = 'shared'")
        .await
        .unwrap();
    // ... and the HTTP API sees the fence the SQL client raised.
    let late = http.write(&w(34, b"http-late")).await.unwrap();
    assert_eq!((late.status, late.body["reason"].as_str()), (409, Some("stale_token")));
    assert_eq!(http.fence("shared").await.unwrap().high_water(), Some(35));
    assert_eq!(http.read("shared", "/report.csv").await.unwrap().bytes().as_deref(), Some(&b"sql-35"[..]));
    // The flags say what does not combine.
    let out = std::process::Command::new(fencing_testkit::fencing_bin())
        .args(["serve", "--store", "postgres", "--postgres-url", &pg.url, "--pg-guard", "extension", "--no-fencing"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
}
