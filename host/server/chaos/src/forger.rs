//! The forger: a client that never asks the lock service for a lease. It
//! reads a resource's fence from the storage and writes with a token just
//! above its high-water mark, made up, with no proof: what any client
//! allowed to write can do. With signed tokens the storage refuses every such
//! write (`proof_missing`); without them they are admitted and shut the real
//! holders out, which the checker reports as `forged_token_admitted`
//! (`check/grants.rs`).
//!
//! It runs inside the campaign process, recorded like a client (its own
//! history file, client name [`FORGER`]), appending unique lines
//! (`forger/TOKEN/N`) to the log file, so the data checks trace them too.

use super::client::{self, LOG_FILE, new_op, send, settle};
use super::history::{HistoryWriter, OpKind, Record, now_us};
use base64::Engine;
use fencing_api::wire::storage::{Mutation, WriteBody, WritePayload};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::{Duration, Instant};

/// The forger's client name in the history.
pub const FORGER: &str = "forger";

/// What the forger needs: where the storage is, what to forge on, until when.
pub struct ForgerConfig {
    pub storage_url: String,
    pub resources: Vec<String>,
    pub seed: u64,
    pub until: Instant,
    /// The servers' bearer token (`fencing chaos --auth`): the forger is a
    /// client allowed to write, not an outsider.
    pub bearer: Option<String>,
}

/// Forges writes until `cfg.until`, every 100-300 ms, recording each in `history`.
pub async fn run(cfg: ForgerConfig, history: HistoryWriter) -> anyhow::Result<()> {
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(token) = &cfg.bearer {
        headers.insert(reqwest::header::AUTHORIZATION, format!("Bearer {token}").parse()?);
    }
    let http = reqwest::Client::builder().timeout(Duration::from_secs(3)).default_headers(headers).build()?;
    let mut rng = StdRng::seed_from_u64(cfg.seed);
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut n = 0u64;
    while Instant::now() < cfg.until {
        tokio::time::sleep(Duration::from_millis(rng.random_range(100..300))).await;
        let resource = cfg.resources[rng.random_range(0..cfg.resources.len())].clone();
        let Some(high_water) = high_water(&http, &cfg.storage_url, &resource).await else { continue };
        let token = high_water + 1 + rng.random_range(0..3);
        n += 1;
        let value = format!("{FORGER}/{token}/{n}\n");
        let mut op = new_op(FORGER, OpKind::Write, &resource);
        op.token = Some(token);
        op.file_path = Some(LOG_FILE.to_string());
        op.mutation = Some(Mutation::Append);
        op.value = Some(value.clone());
        let body = WriteBody {
            resource_id: resource.clone(),
            fencing_token: token,
            write_payload: WritePayload {
                file_path: LOG_FILE.to_string(),
                mutation_type: Mutation::Append,
                bytes: Some(b64.encode(&value)),
            },
            lock_id: Some(resource.clone()),
            sequence: None,
            fencing_proof: None,
        };
        op.start_us = now_us();
        let answer = send(http.post(format!("{}/v1/storage/write", cfg.storage_url)).json(&body)).await;
        settle(&mut op, answer);
        history.write(&Record::Op(op))?;
    }
    Ok(())
}

/// The resource's high-water mark as the storage shows it (0: no fence), or
/// `None` when the storage does not answer (it may be down: the nemesis).
async fn high_water(http: &reqwest::Client, storage: &str, resource: &str) -> Option<u64> {
    let url = format!("{storage}/v1/storage/fence");
    match client::send(http.get(url).query(&[("resource_id", resource)])).await {
        client::Answer::Status(200, body) => body.get("high_water").and_then(|h| h.as_u64()),
        _ => None,
    }
}
