//! Signed tokens in PostgreSQL: with `fencing.verify_keys` set, every
//! fenced write presents its grant's proof in `fencing.proof`. The shared
//! proof vectors through `fencing.admit`; the GC-pause story with a forger
//! in a protected table (each forgery refused with its own SQLSTATE, the
//! stored row and fence untouched); who may set and see the keys; keys that
//! cannot be read fail closed.

use fencing_postgres_tests::{connect, fails, with_extension};
use fencing_runtime::key_text::{hex, unhex};
use fencing_runtime::proof::{Algorithm, Signer};
use serde_json::Value;
use std::path::Path;
use tokio_postgres::Client;

fn vectors() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../../tests/vectors/proofs/signed.json");
    serde_json::from_str(&std::fs::read_to_string(&path).expect("read the proof vectors")).expect("JSON")
}

/// A `fencing.verify_keys` value: the named keys of the vectors, comma-separated.
fn key_list(keys: &Value, names: &Value) -> String {
    let names = names.as_array().expect("verifier");
    let line = |n: &Value| {
        let k = &keys[n.as_str().unwrap()];
        format!("{} {} {}", k["id"], k["algorithm"].as_str().unwrap(), k["material"].as_str().unwrap())
    };
    names.iter().map(line).collect::<Vec<_>>().join(", ")
}

/// Sets a string setting for the session (`''` unsets the proof).
async fn set(c: &Client, name: &str, value: &str) {
    c.query("SELECT pg_catalog.set_config($1, $2, false)", &[&name, &value]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_admit_agrees_with_every_proof_vector() {
    let pg = with_extension().await;
    let c = connect(&pg.url).await;
    let v = vectors();
    let cases = v["cases"].as_array().unwrap();
    for case in cases {
        let name = case["name"].as_str().unwrap();
        set(&c, "fencing.verify_keys", &key_list(&v["keys"], &case["verifier"])).await;
        set(&c, "fencing.proof", case["proof"]["hex"].as_str().unwrap_or("")).await;
        let (fence, s) = (&case["fence"], &case["sequencer"]);
        let i = |v: &Value| v.as_u64().map(|n| i64::try_from(n).unwrap());
        let policy = case["policy"].as_str().unwrap().replace('_', "-");
        let row = c
            .query_one(
                "SELECT admitted, reason, high_water, new_term FROM fencing.admit($1, $2, $3, $4, $5, $6, $7)",
                &[
                    &fence["lock"].as_str(),
                    &i(&fence["high_water"]),
                    &i(&fence["sequence"]),
                    &s["lock"].as_str().unwrap(),
                    &i(&s["token"]).unwrap(),
                    &i(&s["sequence"]),
                    &policy,
                ],
            )
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let expect = &case["expect"];
        let verdict = row.get::<_, Option<String>>(1).unwrap_or_else(|| "admitted".into());
        assert_eq!(verdict, expect["verdict"].as_str().unwrap(), "{name}");
        assert_eq!(row.get::<_, bool>(0), verdict == "admitted", "{name}");
        if verdict == "admitted" {
            assert_eq!(row.get::<_, Option<i64>>(2), i(&expect["high_water"]), "{name}");
            assert_eq!(row.get::<_, bool>(3), expect["new_term"].as_bool().unwrap(), "{name}");
        }
    }
    assert_eq!(cases.len(), 21, "every vector ran");
}

async fn invoice(c: &Client) -> (String, i64) {
    let row = c.query_one("SELECT body, token FROM public.orders WHERE id = 'orders-2026-05'", &[]).await.unwrap();
    (row.get(0), row.get(1))
}

/// One write under `token` with `proof` set for its transaction; the error's SQLSTATE and DETAIL, or `None`.
async fn write(c: &Client, body: &str, token: i64, proof: &str) -> Option<(String, Value)> {
    let sql = format!(
        "BEGIN; SET LOCAL fencing.proof = '{proof}'; \
         INSERT INTO public.orders VALUES ('orders-2026-05', '{body}', {token}) \
         ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body, token = EXCLUDED.token; COMMIT"
    );
    let failed = match c.batch_execute(&sql).await {
        Ok(()) => None,
        Err(e) => Some(fencing_postgres_tests::sqlstate(&e)),
    };
    c.batch_execute("ROLLBACK").await.unwrap();
    failed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_tokens_are_refused_with_their_own_sqlstate_and_the_paused_holder_still_loses() {
    let pg = with_extension().await;
    let admin = connect(&pg.url).await;
    let signer = Signer::new(3, Algorithm::Ed25519, &[42; 32]).unwrap();
    let public = signer.verifier_key();
    let keys = format!("3 ed25519 {}", hex(&public.material));
    admin
        .batch_execute(&format!(
            "CREATE TABLE public.orders (id text PRIMARY KEY, body text NOT NULL, token bigint);
             SELECT fencing.protect('public.orders', 'id', 'token');
             CREATE ROLE app LOGIN IN ROLE fencing_writer; GRANT ALL ON public.orders TO app;
             ALTER ROLE app SET fencing.verify_keys = '{keys}';"
        ))
        .await
        .unwrap();
    let app = connect(&pg.url.replace("user=fencing", "user=app")).await;
    let proof = |token: u64| hex(&signer.prove("orders-2026-05", token));

    // A holds token 33 with its proof and writes.
    assert_eq!(write(&app, "A-early", 33, &proof(33)).await, None);
    // A forger presents 34: without a proof, with A's proof, with a cut one, with a proof for another lock.
    let forgeries = [
        ("", "FN006", "proof_missing"),
        (proof(33).as_str(), "FN009", "proof_bad"),
        (&proof(34)[..70], "FN007", "proof_malformed"),
        (&hex(&signer.prove("other", 34)), "FN009", "proof_bad"),
    ]
    .map(|(p, code, reason)| (p.to_owned(), code, reason));
    for (forged, code, reason) in &forgeries {
        let (state, detail) = write(&app, "forged", 34, forged).await.expect("the forgery is refused");
        assert_eq!((state.as_str(), detail["reason"].as_str()), (*code, Some(*reason)), "{forged:?}");
    }
    let mut unknown = unhex(proof(34)).unwrap();
    unknown[1..5].copy_from_slice(&9u32.to_be_bytes());
    let (state, _) = write(&app, "forged", 34, &hex(&unknown)).await.unwrap();
    assert_eq!(state, "FN008", "a key id the database does not hold");
    let (state, _) = write(&app, "forged", 34, "zz").await.unwrap();
    assert_eq!(state, "22P02", "a proof that is not hex is bad input");
    assert_eq!(invoice(&app).await, ("A-early".into(), 33), "no forgery reached the row");
    let mark: i64 = app.query_one("SELECT high_water FROM fencing.fences", &[]).await.unwrap().get(0);
    assert_eq!(mark, 33, "no forgery moved the fence");

    // A pauses; B is granted 34 and writes with its proof; A wakes with 33 and its valid proof.
    assert_eq!(write(&app, "B", 34, &proof(34)).await, None);
    let (state, detail) = write(&app, "A-late", 33, &proof(33)).await.unwrap();
    assert_eq!((state.as_str(), detail["high_water"].as_i64()), ("FN001", Some(34)));
    assert_eq!(invoice(&app).await, ("B".into(), 34));

    // fencing.try_write answers with the proof's reason instead of raising it.
    let reason: Option<String> = app
        .query_one("SELECT reason FROM fencing.try_write('orders-2026-05', 'orders-2026-05', 35)", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(reason.as_deref(), Some("proof_missing"));

    // Only a superuser sets the keys, and only a superuser sees them (HMAC keys are secrets).
    let (state, _) = fails(&app, "SET fencing.verify_keys = ''").await;
    assert_eq!(state, "42501");
    let (state, _) = fails(&app, "SHOW fencing.verify_keys").await;
    assert_eq!(state, "42501");

    // Keys that cannot be read refuse every write (fail closed), then a
    // rotation to a new key (the operator's ALTER SYSTEM and reload, or per
    // role as here: new sessions take it).
    admin.batch_execute("ALTER ROLE app SET fencing.verify_keys = '3 ed25519 00'").await.unwrap();
    let app = connect(&pg.url.replace("user=fencing", "user=app")).await;
    let (state, detail) = write(&app, "B-2", 34, &proof(34)).await.unwrap();
    assert_eq!(state, "FN010");
    assert!(detail["failure"].as_str().unwrap().starts_with("verify_keys:"), "{detail}");
    let next = Signer::new(4, Algorithm::HmacSha256, &[7; 32]).unwrap();
    admin
        .batch_execute(&format!(
            "ALTER ROLE app SET fencing.verify_keys = '{keys}, 4 hmac-sha256 {}'",
            hex(&next.verifier_key().material)
        ))
        .await
        .unwrap();
    let app = connect(&pg.url.replace("user=fencing", "user=app")).await;
    assert_eq!(write(&app, "B-old-key", 34, &proof(34)).await, None, "the old key during the rotation");
    assert_eq!(write(&app, "C-new-key", 35, &hex(&next.prove("orders-2026-05", 35))).await, None);
    assert_eq!(invoice(&app).await, ("C-new-key".into(), 35));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_server_hands_each_proof_to_the_extension() {
    use fencing_runtime::Policy;
    use fencing_runtime::proof::ProofRejection;
    use fencing_server::storage::{Engine, Mutation, PgGuard, PostgresEngine, WriteOutcome};
    let pg = with_extension().await;
    let signer = Signer::new(11, Algorithm::Ed25519, &[5; 32]).unwrap();
    let keys = format!("11 ed25519 {}", hex(&signer.verifier_key().material));
    // The server's role takes the keys (new sessions: the engine's pool).
    connect(&pg.url)
        .await
        .batch_execute(&format!("ALTER ROLE fencing SET fencing.verify_keys = '{keys}'"))
        .await
        .unwrap();
    let engine = PostgresEngine::connect(&pg.url, PgGuard::Extension, Policy::NonDecreasing).await.unwrap();
    let put = |token, proof: Option<Vec<u8>>| {
        let mut req = fencing_testkit::storage::raw("signed", token, "/f", Mutation::Put, b"x");
        req.proof = proof;
        req.validate().unwrap()
    };
    let refused = |outcome| match outcome {
        WriteOutcome::ProofRefused { rejection, .. } => rejection,
        other => panic!("expected a proof refusal, got {other:?}"),
    };
    assert_eq!(refused(engine.write(put(7, None)).await.unwrap()), ProofRejection::Missing);
    let mut other_key = signer.prove("signed", 7);
    other_key[1..5].copy_from_slice(&12u32.to_be_bytes());
    assert_eq!(
        refused(engine.write(put(7, Some(other_key))).await.unwrap()),
        ProofRejection::UnknownKey { key_id: 12 }
    );
    let forged = Some(signer.prove("signed", 6));
    assert_eq!(refused(engine.write(put(7, forged)).await.unwrap()), ProofRejection::BadProof);
    let granted = Some(signer.prove("signed", 7));
    assert!(matches!(engine.write(put(7, granted)).await.unwrap(), WriteOutcome::Admitted { .. }));
    // The server's own --verify-keys does not combine with the extension deciding: PostgreSQL holds the keys.
    let verifier = fencing_runtime::Verifier::new(vec![signer.verifier_key()]).unwrap();
    let err = engine.with_verifier(std::sync::Arc::new(verifier)).err().expect("refused");
    assert!(err.to_string().contains("fencing.verify_keys"), "{err}");
}
