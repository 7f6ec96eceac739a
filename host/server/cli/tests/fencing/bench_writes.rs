//! The write load generator (`fencing bench writes`) on the embedded store:
//! every counted write was admitted, readers beside the writers are counted
//! in a table of their own, a run without readers has none, and signed
//! writes (every one a new token's proof, verified) are all admitted.

use fencing_cli::bench::writes::{self, WritesConfig};
use fencing_runtime::GuardKind;
use std::time::Duration;

fn config(readers: usize) -> WritesConfig {
    WritesConfig {
        writers: vec![2],
        duration: Duration::from_millis(300),
        payload: 64,
        guard: GuardKind::Native,
        data_dir: None,
        inflight: 1,
        sqlite: false,
        readers,
        signed: None,
    }
}

#[test]
fn readers_beside_the_writers_are_counted_apart() {
    let results = writes::run(&config(3)).unwrap();
    assert_eq!(results.len(), 1);
    let r = &results[0];
    assert!(!r.hist.is_empty(), "no write counted");
    let (readers, reads) = r.reads.as_ref().expect("a run with readers reports their reads");
    assert_eq!(*readers, 3);
    assert!(!reads.is_empty(), "no read counted");
    assert!(r.reads_per_second().unwrap() > 0.0);
    let table = writes::table(&results);
    assert!(table.contains("| readers | reads/s |"), "{table}");
    assert!(table.lines().any(|l| l.starts_with("| fencing redb (native guard) | 2 | 3 |")), "{table}");
}

#[test]
fn a_run_without_readers_reports_no_reads() {
    let results = writes::run(&config(0)).unwrap();
    assert!(results[0].reads.is_none());
    assert!(!results[0].hist.is_empty());
    assert!(!writes::table(&results).contains("reads/s"));
}

#[test]
fn signed_writes_carry_proofs_the_store_admits() {
    let cfg = WritesConfig { signed: Some(fencing_runtime::proof::Algorithm::Ed25519), ..config(0) };
    let results = writes::run(&cfg).unwrap();
    assert!(!results[0].hist.is_empty(), "no write counted: each counted write was admitted");
    assert_eq!(results[0].store, "fencing redb (native guard, signed ed25519)");
}
