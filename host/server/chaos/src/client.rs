//! One campaign client, run as its own process (`fencing chaos client`, hidden)
//! so the nemesis can pause it with SIGSTOP like a garbage-collection pause.
//!
//! Loop until the deadline: acquire a lock with a short lease, make 1-4 writes
//! with sequences 1, 2, ... under the token, sometimes stalling past the lease
//! (so leases expire early and the holder goes stale), then release. Each
//! request is recorded in the client's own history file before the next one.
//!
//! Every written value is unique (`client/token/sequence`), which lets the
//! checker trace stored data back to the write that produced it. A write
//! rejected by the fence ends the holder's turn: it knows it lost the lock.
//! A grant's proof (servers that sign grants) goes with each of its writes.

use super::history::{HistoryWriter, Op, OpKind, Outcome, Record, now_us};
use super::wire::{AcquireResponse, WriteResponse};
use base64::Engine;
use fencing_api::wire::locks::{AcquireRequest, LeaseRef};
use fencing_api::wire::storage::Mutation;
use fencing_api::wire::storage::{WriteBody, WritePayload};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::PathBuf;
use std::time::Duration;

/// What one client process does.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    pub id: String,
    pub locks_url: String,
    pub storage_url: String,
    pub resources: Vec<String>,
    pub seed: u64,
    /// Lease durations are drawn from this range (ms).
    pub lease_ms: (u64, u64),
    /// Stop starting new cycles at this wall-clock time (µs since the epoch).
    pub until_us: u64,
    pub history: PathBuf,
    /// Bearer token file of servers started with `--auth-token-file`; sent on every request.
    pub auth_token_file: Option<PathBuf>,
}

/// The file every client appends to (one line per write).
pub const LOG_FILE: &str = "log";
/// The file every client replaces or deletes.
pub const VALUE_FILE: &str = "value";

/// An HTTP answer reduced to what the history needs.
pub(crate) enum Answer {
    Status(u16, serde_json::Value),
    /// The request surely never reached the server (connection refused).
    NotSent(String),
    /// Unknown whether it took effect (timeout, dropped connection).
    Unknown(String),
}

pub(crate) async fn send(req: reqwest::RequestBuilder) -> Answer {
    match req.send().await {
        Ok(resp) => {
            let status = resp.status().as_u16();
            let body = resp.json::<serde_json::Value>().await.unwrap_or(serde_json::Value::Null);
            Answer::Status(status, body)
        }
        Err(e) if e.is_connect() => Answer::NotSent("not_sent".into()),
        Err(e) => Answer::Unknown(if e.is_timeout() { "timeout" } else { "connection_lost" }.into()),
    }
}

/// Sets outcome, reason and (for 200) nothing else from an answer; returns the body of a 200.
pub(crate) fn settle(op: &mut Op, answer: Answer) -> Option<serde_json::Value> {
    op.end_us = now_us();
    match answer {
        Answer::Status(200, body) => {
            op.outcome = Outcome::Ok;
            Some(body)
        }
        Answer::Status(status, body) if (400..500).contains(&status) => {
            op.outcome = Outcome::Fail;
            let reason = body.get("reason").and_then(|r| r.as_str()).map(str::to_string);
            let code = body.pointer("/error/code").and_then(|r| r.as_str()).map(str::to_string);
            op.reason = Some(reason.or(code).unwrap_or_else(|| format!("http_{status}")));
            op.high_water = body.get("high_water").and_then(|h| h.as_u64());
            if status == 409 && op.op == OpKind::Acquire {
                op.reason = Some("held".into());
            }
            None
        }
        Answer::Status(status, _) => {
            op.outcome = Outcome::Info;
            op.reason = Some(format!("http_{status}"));
            None
        }
        Answer::NotSent(e) => {
            op.outcome = Outcome::Fail;
            op.reason = Some(e);
            None
        }
        Answer::Unknown(e) => {
            op.outcome = Outcome::Info;
            op.reason = Some(e);
            None
        }
    }
}

pub fn new_op(client: &str, kind: OpKind, resource: &str) -> Op {
    Op {
        client: client.to_string(),
        op: kind,
        resource: resource.to_string(),
        lock: Some(resource.to_string()),
        token: None,
        sequence: None,
        lock_token: None,
        file_path: None,
        mutation: None,
        value: None,
        phase: None,
        start_us: now_us(),
        end_us: 0,
        outcome: Outcome::Info,
        reason: None,
        high_water: None,
    }
}

/// Runs the client loop until `until_us`.
pub async fn run(cfg: ClientConfig) -> anyhow::Result<()> {
    use anyhow::Context;
    let history = HistoryWriter::create(&cfg.history).context("create client history")?;
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(path) = &cfg.auth_token_file {
        let token = fencing_api::auth::read_token_file(path)?;
        let mut value = reqwest::header::HeaderValue::from_str(&format!("Bearer {token}"))?;
        value.set_sensitive(true);
        headers.insert(reqwest::header::AUTHORIZATION, value);
    }
    let http = reqwest::Client::builder().timeout(Duration::from_secs(3)).default_headers(headers).build()?;
    let mut rng = StdRng::seed_from_u64(cfg.seed);
    let b64 = base64::engine::general_purpose::STANDARD;
    while now_us() < cfg.until_us {
        let resource = cfg.resources[rng.random_range(0..cfg.resources.len())].clone();
        let lease = rng.random_range(cfg.lease_ms.0..=cfg.lease_ms.1);
        let mut op = new_op(&cfg.id, OpKind::Acquire, &resource);
        let body = AcquireRequest {
            resource_id: resource.clone(),
            client_id: cfg.id.clone(),
            lease_duration_ms: lease,
            wait_ms: Some(rng.random_range(0..=lease)),
            lock_token: None,
        };
        let answer = send(http.post(format!("{}/v1/locks/acquire", cfg.locks_url)).json(&body)).await;
        let granted = settle(&mut op, answer).and_then(|b| serde_json::from_value::<AcquireResponse>(b).ok());
        // The lease as granted: a lock service may round the requested one up
        // (etcd grants whole seconds, at least two).
        let grant = granted.filter(|g| g.lock_acquired).and_then(|g| {
            Some((g.fencing_token?, g.lock_token?, g.lease_duration_ms.unwrap_or(lease), g.fencing_proof))
        });
        if let Some((token, lease_id, _, _)) = &grant {
            op.token = Some(*token);
            op.lock_token = Some(lease_id.clone());
        } else if op.outcome == Outcome::Ok {
            op.outcome = Outcome::Fail;
            op.reason = Some("not_acquired".into());
        }
        history.write(&Record::Op(op))?;
        let Some((token, lease_id, granted_ms, proof)) = grant else {
            tokio::time::sleep(Duration::from_millis(rng.random_range(10..100))).await;
            continue;
        };
        for seq in 1..=rng.random_range(1..=4u64) {
            // Sometimes stall: a slow holder whose lease runs out mid-work (a
            // third of the stalls outlast the granted lease).
            if rng.random_bool(0.15) {
                tokio::time::sleep(Duration::from_millis(rng.random_range(0..=granted_ms * 3 / 2))).await;
            }
            let unique = format!("{}/{token}/{seq}", cfg.id);
            let (file, mutation, value) = match rng.random_range(0..10) {
                0..7 => (LOG_FILE, Mutation::Append, format!("{unique}\n")),
                7..9 => (VALUE_FILE, Mutation::Put, unique),
                _ => (VALUE_FILE, Mutation::Delete, unique),
            };
            let bytes = (mutation != Mutation::Delete).then(|| b64.encode(&value));
            let mut op = new_op(&cfg.id, OpKind::Write, &resource);
            op.token = Some(token);
            op.sequence = Some(seq);
            op.lock_token = Some(lease_id.clone());
            op.file_path = Some(file.to_string());
            op.mutation = Some(mutation);
            op.value = Some(value);
            let body = WriteBody {
                resource_id: resource.clone(),
                fencing_token: token,
                write_payload: WritePayload { file_path: file.to_string(), mutation_type: mutation, bytes },
                lock_id: Some(resource.clone()),
                sequence: Some(seq),
                fencing_proof: proof.clone(),
            };
            op.start_us = now_us();
            let answer = send(http.post(format!("{}/v1/storage/write", cfg.storage_url)).json(&body)).await;
            if let Some(body) = settle(&mut op, answer) {
                op.high_water = serde_json::from_value::<WriteResponse>(body).ok().and_then(|r| r.high_water);
            }
            let rejected = op.outcome == Outcome::Fail;
            history.write(&Record::Op(op))?;
            if rejected {
                break;
            }
        }
        let mut op = new_op(&cfg.id, OpKind::Release, &resource);
        op.token = Some(token);
        op.lock_token = Some(lease_id.clone());
        let body = LeaseRef { resource_id: resource.clone(), lock_token: lease_id };
        let answer = send(http.post(format!("{}/v1/locks/release", cfg.locks_url)).json(&body)).await;
        settle(&mut op, answer);
        history.write(&Record::Op(op))?;
    }
    Ok(())
}
