//! `fencing admin`: an operator's commands.
//!
//! - `bump-tokens`: after restoring a data directory from a backup, moves
//!   the lock service's token ceiling above every token it may have handed
//!   out since (the restored clock knows only the tokens of its time). Runs
//!   offline, on the directory of a stopped server. It also drops the
//!   restored lease journal, whose leases are the backup's, not today's: the
//!   next start then waits out the longest lease ever granted before its
//!   first grant, as a lease granted after the backup may still be running
//!   (`--keep-leases` keeps the journal when the directory was not restored).
//! - `reset-fence`: replaces one resource's fence on a running server
//!   (`POST /v1/admin/fences/reset`, behind its bearer token).
//! - `retire-fences`: removes the fences of a stopped server's resources
//!   that hold no objects, leaving each lock a floor so no older token is
//!   admitted again (`storage/redb_retire.rs`); `compact` then gives the
//!   space back.
//! - `keygen`: a key for signed tokens, the signing file and its verify
//!   file (`keygen.rs`).
//! - `compact`: shrinks a stopped server's store file to what its objects
//!   use (redb reuses the pages of deleted objects but never gives them back
//!   to the file system by itself).
//!
//! Exit codes: 0 done; 1 the server refused or could not be reached, or the
//! directory is in use; 2 bad input.

use super::client::auth_token;
use anyhow::Context;
use clap::{Args, Subcommand};
use fencing_api::client::storage::StorageClient;
use fencing_api::wire::storage::ResetBody;
use fencing_server::locks::{Bump, ClockError, JOURNAL_FILE};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct AdminArgs {
    #[command(subcommand)]
    command: AdminCommand,
}

#[derive(Debug, Subcommand)]
enum AdminCommand {
    /// Raise the lock service's token ceiling in a stopped server's data
    /// directory, e.g. after restoring it from a backup.
    BumpTokens {
        /// The server's `--data-dir`.
        #[arg(long, default_value = "./fencing-data", env = "FENCING_DATA_DIR")]
        data_dir: PathBuf,
        /// Raise the ceiling by this much (more than the grants since the backup).
        #[arg(long, conflicts_with = "to", required_unless_present = "to")]
        by: Option<u64>,
        /// Raise the ceiling to at least this token (above the highest one seen since the backup).
        #[arg(long)]
        to: Option<u64>,
        /// Keep the lease journal (its leases are restored at the next start); for a directory that was not restored.
        #[arg(long)]
        keep_leases: bool,
    },
    /// Replace one resource's fence on a running server: with `--lock` and
    /// `--high-water` it becomes exactly that, with neither it is removed.
    ResetFence {
        /// The resource.
        resource: String,
        /// Why (logged with the old and new fence).
        #[arg(long)]
        reason: String,
        /// Bind the resource to this lock (with `--high-water`).
        #[arg(long, requires = "high_water")]
        lock: Option<String>,
        /// The new high-water mark (with `--lock`).
        #[arg(long, requires = "lock")]
        high_water: Option<u64>,
        /// Base URL of the server.
        #[arg(long, default_value = "http://127.0.0.1:7070", env = "FENCING_SERVER")]
        server: String,
        /// File holding the server's bearer token.
        #[arg(long, env = "FENCING_AUTH_TOKEN_FILE")]
        auth_token_file: PathBuf,
    },
    /// Retire the fences of resources with no objects in a stopped server's store (`--store
    /// redb`): each leaves its mark in its lock's floor, which a write to a resource without a
    /// fence must reach, so no older token gets in. Run `compact` after it to shrink the file.
    RetireFences {
        /// The server's `--data-dir`.
        #[arg(long, default_value = "./fencing-data", env = "FENCING_DATA_DIR")]
        data_dir: PathBuf,
    },
    /// Make a key for signed tokens: OUT is the lock service's `--signing-key`
    /// (mode 0600), OUT.pub the storage's `--verify-keys` (during a rotation,
    /// append it to the verify file the storage already reads).
    Keygen {
        /// The key's id, named in every proof it makes (a new id for each rotation).
        #[arg(long)]
        id: u32,
        /// How proofs are made and checked.
        #[arg(long, value_enum, default_value = "ed25519")]
        algorithm: super::keygen::KeyAlgorithm,
        /// Where the signing key goes (never overwritten).
        #[arg(long)]
        out: PathBuf,
    },
    /// Shrink a stopped server's store file (`--store redb`) after deletes.
    Compact {
        /// The server's `--data-dir`.
        #[arg(long, default_value = "./fencing-data", env = "FENCING_DATA_DIR")]
        data_dir: PathBuf,
    },
}

pub fn run(args: AdminArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        AdminCommand::BumpTokens { data_dir, by, to, keep_leases } => {
            let how = match (by, to) {
                (Some(n), None) => Bump::By(n),
                (None, Some(n)) => Bump::To(n),
                _ => return Err(super::usage("give --by or --to")),
            };
            let (before, after) = fencing_server::locks::bump(&data_dir, how).map_err(|e| match e {
                // Nothing to bump, or a ceiling past u64: the command line is wrong.
                ClockError::Io { ref cause, .. } if cause.kind() == std::io::ErrorKind::NotFound => {
                    super::usage(format!("{}: {e}", data_dir.display()))
                }
                e @ ClockError::Overflow { .. } => super::usage(e.to_string()),
                e => anyhow::Error::new(e).context(format!("bump tokens in {}", data_dir.display())),
            })?;
            let journal = data_dir.join(JOURNAL_FILE);
            let dropped = !keep_leases && journal.exists();
            if dropped {
                std::fs::remove_file(&journal).with_context(|| format!("remove {}", journal.display()))?;
            }
            let report = serde_json::json!({
                "data_dir": data_dir,
                "previous_ceiling": before.ceiling,
                "ceiling": after.ceiling,
                "leases_dropped": dropped,
                "first_grant_waits_ms": if dropped { after.max_lease_ms } else { 0 },
            });
            println!("{}", serde_json::to_string_pretty(&report)?);
            Ok(ExitCode::SUCCESS)
        }
        AdminCommand::Keygen { id, algorithm, out } => {
            let report = super::keygen::keygen(id, algorithm, &out)?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            Ok(ExitCode::SUCCESS)
        }
        AdminCommand::RetireFences { data_dir } => {
            let dir = store_dir(&data_dir)?;
            let retired = fencing_server::storage::retire_empty_fences(&dir)
                .with_context(|| format!("retire fences in {}", dir.display()))?;
            println!("{}", serde_json::to_string_pretty(&retired)?);
            Ok(ExitCode::SUCCESS)
        }
        AdminCommand::Compact { data_dir } => {
            let dir = store_dir(&data_dir)?;
            let (before, after) =
                fencing_server::storage::compact(&dir).with_context(|| format!("compact {}", dir.display()))?;
            let report = serde_json::json!({ "store": dir, "bytes_before": before, "bytes_after": after });
            println!("{}", serde_json::to_string_pretty(&report)?);
            Ok(ExitCode::SUCCESS)
        }
        AdminCommand::ResetFence { resource, reason, lock, high_water, server, auth_token_file } => {
            let token = auth_token(Some(&auth_token_file))?;
            let client = StorageClient::new(&server).with_auth(token);
            let body = ResetBody { resource_id: resource, reason, lock_id: lock, high_water };
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            let answer = rt.block_on(client.reset_fence(&body))?;
            println!("{}", serde_json::to_string_pretty(&answer.body)?);
            Ok(match answer.status {
                200 => ExitCode::SUCCESS,
                400 => ExitCode::from(2),
                _ => ExitCode::FAILURE,
            })
        }
    }
}

/// The embedded store's directory inside `data_dir`; a usage error if there is none.
fn store_dir(data_dir: &std::path::Path) -> anyhow::Result<PathBuf> {
    let dir = data_dir.join("storage");
    if !dir.join("fencing.redb").exists() {
        return Err(super::usage(format!("{}: no store here (fencing.redb)", dir.display())));
    }
    Ok(dir)
}
