//! The campaign's client, proxy, read-back and checker, end to end over HTTP,
//! against small in-test servers that speak the storage and lock APIs: with a
//! fence the history checks clean; with the fence removed (any token accepted),
//! the checker finds the stale writes that slow clients make after their lease
//! ran out. The real servers are exercised by `fencing chaos` itself.

use fencing_chaos::campaign::read_all;
use fencing_chaos::check::{Report, check};
use fencing_chaos::client::{self, ClientConfig};
use fencing_chaos::history::{Header, HistoryWriter, Phase, Record, now_us, read_history};
use fencing_chaos::proxy::{Fault, Proxy};
use std::time::Duration;

async fn campaign(fencing: bool) -> Report {
    let dir = tempfile::tempdir().unwrap();
    let server = fencing_testkit::fake::serve(fencing).await;
    let proxy = Proxy::start(server, 1).await.unwrap();
    let url = format!("http://{}", proxy.addr);
    let resources = vec!["storage:pipeline".to_string()];
    let until_us = now_us() + 4_000_000;
    let mut tasks = vec![];
    for i in 0..4 {
        let cfg = ClientConfig {
            id: format!("c{i}"),
            locks_url: url.clone(),
            storage_url: url.clone(),
            resources: resources.clone(),
            seed: 100 + i,
            lease_ms: (30, 120),
            until_us,
            history: dir.path().join(format!("c{i}.jsonl")),
            auth_token_file: None,
        };
        tasks.push(tokio::spawn(client::run(cfg)));
    }
    let own = HistoryWriter::create(&dir.path().join("campaign.jsonl")).unwrap();
    own.write(&Record::Header(Header {
        seed: 1,
        fencing,
        policy: "non_decreasing".into(),
        started_us: now_us(),
        replication: None,
    }))
    .unwrap();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    proxy.set(Fault::Delay(150));
    tokio::time::sleep(Duration::from_millis(800)).await;
    proxy.set(Fault::Drop(0.3));
    tokio::time::sleep(Duration::from_millis(800)).await;
    proxy.set(Fault::None);
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    read_all(&format!("http://{server}"), &resources, Phase::Final, &own).await.unwrap();
    let mut records = read_history(&dir.path().join("campaign.jsonl")).unwrap();
    for i in 0..4 {
        records.extend(read_history(&dir.path().join(format!("c{i}.jsonl"))).unwrap());
    }
    check(&records)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_run_checks_clean_and_an_unfenced_one_shows_violations() {
    let fenced = campaign(true).await;
    assert!(fenced.is_valid(), "{:?}", fenced.violations);
    assert!(fenced.summary.admitted > 20, "{:?}", fenced.summary);
    assert!(fenced.summary.rejected.values().sum::<u64>() > 0, "slow holders were fenced off: {:?}", fenced.summary);
    assert!(fenced.summary.reads_checked >= 2);

    eprintln!("fenced: {}", serde_json::to_string(&fenced.summary).unwrap());
    let unfenced = campaign(false).await;
    eprintln!("unfenced: {}", serde_json::to_string(&unfenced.summary).unwrap());
    assert!(!unfenced.is_valid(), "stale writes went unnoticed: {:?}", unfenced.summary);
    assert!(unfenced.summary.violation_kinds.contains_key("stale_admitted"), "{:?}", unfenced.summary);
}
