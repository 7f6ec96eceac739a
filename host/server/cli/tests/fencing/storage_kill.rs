//! Durability under kill -9: a writing `fencing serve` is SIGKILLed at random
//! points many times; after each restart every acknowledged write must be
//! present and no resource's high-water may have gone backwards.
//!
//! Writer `w` owns resource `kill-w` and presents strictly increasing tokens
//! (continuing across restarts past every token it ever sent). Odd tokens
//! APPEND themselves to `/log`; every tenth token also PUTs `/obj/<token>`.

use fencing_api::client::storage::{StorageClient, Write};
use fencing_server::storage::Mutation;
use fencing_testkit::server::ServeProcess;
use rand::Rng;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WRITERS: usize = 8;

#[derive(Default, Clone)]
struct WriterState {
    next_token: u64,
    acked_log: BTreeSet<u64>,
    acked_objects: BTreeSet<u64>,
    max_acked: u64,
    last_seen_high_water: u64,
}

async fn verify(client: &StorageClient, w: usize, st: &mut WriterState) {
    let r = format!("kill-{w}");
    let fence = client.fence(&r).await.unwrap();
    let hw = fence.high_water().unwrap();
    assert!(hw >= st.max_acked, "{r}: high-water {hw} below acknowledged token {}", st.max_acked);
    assert!(hw >= st.last_seen_high_water, "{r}: high-water went backwards {} -> {hw}", st.last_seen_high_water);
    st.last_seen_high_water = hw;
    if !st.acked_log.is_empty() {
        let log = client.read(&r, "/log").await.unwrap().bytes().expect("log exists once a write was acknowledged");
        let tokens: Vec<u64> = log.chunks_exact(8).map(|c| u64::from_be_bytes(c.try_into().unwrap())).collect();
        assert!(tokens.windows(2).all(|p| p[0] < p[1]), "{r}: log not increasing");
        let present: BTreeSet<u64> = tokens.into_iter().collect();
        let lost: Vec<_> = st.acked_log.difference(&present).collect();
        assert!(lost.is_empty(), "{r}: acknowledged appends lost after kill -9: {lost:?}");
    }
    for t in &st.acked_objects {
        let a = client.read(&r, &format!("/obj/{t}")).await.unwrap();
        assert_eq!(a.status, 200, "{r}: acknowledged PUT /obj/{t} lost after kill -9");
        assert_eq!(a.bytes().unwrap(), t.to_be_bytes());
    }
}

async fn write_until_error(client: StorageClient, w: usize, state: Arc<Mutex<WriterState>>) {
    let r = format!("kill-{w}");
    loop {
        let token = {
            let mut st = state.lock().unwrap();
            st.next_token += 1;
            st.next_token
        };
        let (path, mutation) = if token % 2 == 1 {
            ("/log".to_owned(), Mutation::Append)
        } else if token % 10 == 0 {
            (format!("/obj/{token}"), Mutation::Put)
        } else {
            ("/scratch".to_owned(), Mutation::Put)
        };
        let bytes = token.to_be_bytes();
        let write = Write {
            resource_id: &r,
            token,
            file_path: &path,
            mutation,
            bytes: &bytes,
            lock_id: None,
            sequence: None,
            proof: None,
        };
        match client.write(&write).await {
            Ok(a) => {
                assert_eq!(a.status, 200, "{r}: increasing token {token} refused: {:?}", a.body);
                let mut st = state.lock().unwrap();
                st.max_acked = st.max_acked.max(token);
                if mutation == Mutation::Append {
                    st.acked_log.insert(token);
                } else if path.starts_with("/obj/") {
                    st.acked_objects.insert(token);
                }
            }
            Err(_) => return, // the server died under us; unacknowledged writes may or may not have landed
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_writes_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let states: Vec<Arc<Mutex<WriterState>>> = (0..WRITERS).map(|_| Arc::default()).collect();
    let started = Instant::now();
    let mut rng = rand::rng();
    let mut kills = 0;
    // Bounded by count and wall time so the whole test stays well under a minute.
    while kills < 25 && started.elapsed() < Duration::from_secs(40) {
        let mut server = ServeProcess::start(dir.path(), &[]);
        server.ready().await;
        let client = StorageClient::new(&server.base);
        for (w, st) in states.iter().enumerate() {
            let mut copy = st.lock().unwrap().clone();
            verify(&client, w, &mut copy).await;
            st.lock().unwrap().last_seen_high_water = copy.last_seen_high_water;
        }
        let writers: Vec<_> = states
            .iter()
            .enumerate()
            .map(|(w, st)| tokio::spawn(write_until_error(client.clone(), w, st.clone())))
            .collect();
        tokio::time::sleep(Duration::from_millis(rng.random_range(50..600))).await;
        server.kill9();
        kills += 1;
        for h in writers {
            h.await.unwrap();
        }
    }
    // Final restart and check.
    let mut server = ServeProcess::start(dir.path(), &[]);
    server.ready().await;
    let client = StorageClient::new(&server.base);
    let mut acked = 0;
    for (w, st) in states.iter().enumerate() {
        let mut st = st.lock().unwrap().clone();
        verify(&client, w, &mut st).await;
        acked += st.acked_log.len() + st.acked_objects.len();
    }
    assert!(kills >= 5, "only {kills} kill cycles ran");
    assert!(acked > 100, "too few acknowledged writes ({acked}) to mean anything");
    eprintln!("{kills} SIGKILLs, {acked} tracked acknowledged writes verified after each restart");
}
