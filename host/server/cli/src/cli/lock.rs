//! `fencing lock acquire|renew|release|status`: the lock API from the shell.
//!
//! Prints the service's JSON answer on stdout. Exit codes: 0 done, 1 refused
//! (held, wrong or expired lease) or unreachable, 2 bad input (checked here
//! before sending, or a 400 from the service).

use super::usage;
use anyhow::Context;
use clap::{Args, Subcommand};
use fencing_api::client::locks::{ClientError, LockClient};
use fencing_api::wire::locks::{AcquireRequest, LeaseRef};
use fencing_server::locks::{self, Acquired};
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct LockArgs {
    /// Base URL of the lock service.
    #[arg(long, env = "FENCING_SERVER", default_value = "http://127.0.0.1:7070", global = true)]
    server: String,
    /// File holding the bearer token of a server started with `--auth-token-file`
    /// (sent on acquire, renew and release).
    #[arg(long, env = "FENCING_AUTH_TOKEN_FILE", global = true)]
    auth_token_file: Option<std::path::PathBuf>,
    #[command(subcommand)]
    command: LockCommand,
}

#[derive(Debug, Subcommand)]
enum LockCommand {
    /// Acquire a lease; prints the grant (token, lease id) or the remaining lease time.
    Acquire {
        resource_id: String,
        #[arg(long)]
        client_id: String,
        #[arg(long, default_value_t = 10_000)]
        lease_ms: u64,
        /// Wait (FIFO) up to this long for the lock.
        #[arg(long)]
        wait_ms: Option<u64>,
        /// Re-enter a lease you hold (server with `--reentrant`): its lock_token.
        #[arg(long)]
        lock_token: Option<String>,
    },
    /// Extend a lease.
    Renew { resource_id: String, lock_token: String },
    /// Release a lease.
    Release { resource_id: String, lock_token: String },
    /// Show the holder, token and remaining lease.
    Status { resource_id: String },
}

pub fn run(args: LockArgs) -> anyhow::Result<ExitCode> {
    let client =
        LockClient::new(args.server.clone()).with_auth(super::client::auth_token(args.auth_token_file.as_deref())?);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().context("start runtime")?;
    rt.block_on(async move {
        let out = match args.command {
            LockCommand::Acquire { resource_id, client_id, lease_ms, wait_ms, lock_token } => {
                let req = AcquireRequest { resource_id, client_id, lease_duration_ms: lease_ms, wait_ms, lock_token };
                locks::validate_acquire(&req).map_err(|e| usage(e.to_string()))?;
                match client.acquire(&req).await.map_err(|e| classify(e, &args.server))? {
                    Acquired::Granted(g) => (serde_json::to_string_pretty(&g)?, ExitCode::SUCCESS),
                    Acquired::Refused(r) => (serde_json::to_string_pretty(&r)?, ExitCode::FAILURE),
                }
            }
            LockCommand::Renew { resource_id, lock_token } => {
                check_lease(&resource_id, &lock_token)?;
                let r = client.renew(&resource_id, &lock_token).await.map_err(|e| classify(e, &args.server))?;
                (serde_json::to_string_pretty(&r)?, ExitCode::SUCCESS)
            }
            LockCommand::Release { resource_id, lock_token } => {
                check_lease(&resource_id, &lock_token)?;
                let r = client.release(&resource_id, &lock_token).await.map_err(|e| classify(e, &args.server))?;
                (serde_json::to_string_pretty(&r)?, ExitCode::SUCCESS)
            }
            LockCommand::Status { resource_id } => {
                locks::validate_name("resource_id", &resource_id).map_err(|e| usage(e.to_string()))?;
                let s = client.status(&resource_id).await.map_err(|e| classify(e, &args.server))?;
                (serde_json::to_string_pretty(&s)?, ExitCode::SUCCESS)
            }
        };
        println!("{}", out.0);
        Ok(out.1)
    })
}

fn check_lease(resource_id: &str, lock_token: &str) -> anyhow::Result<()> {
    let lease = LeaseRef { resource_id: resource_id.into(), lock_token: lock_token.into() };
    locks::validate_lease(&lease).map(|_| ()).map_err(|e| usage(e.to_string()))
}

fn classify(e: ClientError, server: &str) -> anyhow::Error {
    if e.is_bad_input() {
        usage(e.to_string())
    } else {
        anyhow::Error::new(e).context(format!("lock service {server}"))
    }
}
