//! `fencing admin`: an operator's commands.
//!
//! - `bump-tokens`: after restoring a data directory from a backup, moves
//!   the lock service's token ceiling above every token it may have handed
//!   out since (the restored clock knows only the tokens of its time). Runs
//!   offline, on the directory of a stopped server. It also replaces the
//!   restored lease journal, whose leases are the backup's, not today's, by
//!   one that makes the next start wait out the longest lease ever granted
//!   before its first grant, as a lease granted after the backup may still be
//!   running (`--keep-leases` keeps the journal when the directory was not
//!   restored). With `--to`, it also recreates a lost clock above the tokens
//!   the storage has seen.
//! - `recover-leases`: when the lease journal is lost or does not read back
//!   whole (the lock service refuses to start and names this command), keeps
//!   it aside and writes one that makes the next start grant nothing until
//!   the longest lease ever granted has run out.
//! - `reset-fence`: replaces one resource's fence on a running server
//!   (`POST /v1/admin/fences/reset`, with an operator's token from the
//!   server's `--admin-token-file`; a writer's token is refused).
//! - `retire-fences`: removes the fences of a stopped server's resources
//!   that hold no objects, leaving each lock a floor so no older token is
//!   admitted again (`host/server/store/src/redb/retire.rs`); `compact` then gives the
//!   space back. Its output counts the floors the store holds.
//! - `drop-floors`: folds the floors of a stopped server's store that are
//!   below every token the lock service can still hand out (or has out in a
//!   held lease) into one store floor, so floors stop filling the quota
//!   while every token they kept out stays out (`host/server/store/src/redb/retire.rs`).
//! - `keygen`: a key for signed tokens, the signing file and its verify
//!   file (`keygen.rs`).
//! - `compact`: shrinks a stopped server's store file to what its objects
//!   use (redb reuses the pages of deleted objects but never gives them back
//!   to the file system by itself).
//!
//! Exit codes: 0 done; 1 the server refused or could not be reached, or the
//! directory is in use; 2 bad input.

use anyhow::Context;
use clap::{Args, Subcommand};
use fencing_api::client::storage::StorageClient;
use fencing_api::wire::storage::ResetBody;
use fencing_server::locks::{Bump, CLOCK_FILE, ClockError, JOURNAL_FILE};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct AdminArgs {
    #[command(subcommand)]
    command: AdminCommand,
}

#[derive(Debug, Subcommand)]
enum AdminCommand {
    /// Raise the lock service's token ceiling in a stopped server's data
    /// directory, e.g. after restoring it from a backup (or, with `--to`,
    /// recreate a lost clock above every token handed out).
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
    /// After the lock service refused to start because its lease journal is
    /// missing or does not read back whole: keep the journal aside and make
    /// the next start grant no lock until the longest lease ever granted has
    /// run out (offline, on a stopped server's directory).
    RecoverLeases {
        /// The server's `--data-dir`.
        #[arg(long, default_value = "./fencing-data", env = "FENCING_DATA_DIR")]
        data_dir: PathBuf,
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
        /// File holding your operator token: your line of the server's
        /// `--admin-token-file` (`<name> <token>`), or the token alone.
        #[arg(long, env = "FENCING_ADMIN_TOKEN_FILE")]
        admin_token_file: PathBuf,
    },
    /// Retire the fences of resources with no objects in a stopped server's store (`--store
    /// redb`): each leaves its mark in its lock's floor, which a write to a resource without a
    /// fence must reach, so no older token gets in. Run `compact` after it to shrink the file.
    RetireFences {
        /// The server's `--data-dir`.
        #[arg(long, default_value = "./fencing-data", env = "FENCING_DATA_DIR")]
        data_dir: PathBuf,
    },
    /// Fold the floors of a stopped server's store (`--store redb`) that the
    /// lock service has passed into one store floor, the highest of them: it
    /// refuses every token any of them refused (never letting an older token
    /// in), and every token the lock service grants from now on is above it.
    /// Prints the floors and their bytes before and after, and the leases the
    /// next start restores with lower tokens; `compact` then shrinks the file.
    DropFloors {
        /// The server's `--data-dir`.
        #[arg(long, default_value = "./fencing-data", env = "FENCING_DATA_DIR")]
        data_dir: PathBuf,
        /// Drop floors below this token, which should be at or below every token
        /// the lock service can still grant (for etcd, its revision now): a
        /// holder of a lower token is refused on resources without a fence.
        /// Default: read from the stopped embedded lock service in `--data-dir`
        /// (a `--role all` server): its clock's ceiling + 1.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        below: Option<u64>,
    },
    /// Make a key for signed tokens: OUT is the lock service's `--signing-key`
    /// (mode 0600); for Ed25519 OUT.pub is the storage's `--verify-keys` (during
    /// a rotation, append it to the verify file the storage already reads). An
    /// HMAC secret has nothing public and gets no .pub: the storage's
    /// `--verify-keys` is a copy of OUT, kept 0600.
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
            let arguments = serde_json::json!({ "by": by, "to": to, "keep_leases": keep_leases });
            audited(&data_dir.clone(), "bump-tokens", arguments, || {
                let how = match (by, to) {
                    (Some(n), None) => Bump::By(n),
                    (None, Some(n)) => Bump::To(n),
                    _ => return Err(super::usage("give --by or --to")),
                };
                let clock = data_dir.join(CLOCK_FILE);
                let lost_clock = !clock.exists() && data_dir.join(JOURNAL_FILE).exists();
                let (before, after) = match (lost_clock, how) {
                    // The journal shows a lock service ran here, and its clock is gone: recreate it.
                    (true, Bump::To(n)) => {
                        let after = fencing_server::locks::recreate_clock(&data_dir, n)
                            .with_context(|| format!("recreate the clock in {}", data_dir.display()))?;
                        (fencing_server::locks::ClockState::default(), after)
                    }
                    (true, Bump::By(_)) => {
                        return Err(super::usage(format!(
                            "{} is lost: give --to with a token above every one the lock service handed out",
                            clock.display()
                        )));
                    }
                    (false, how) => fencing_server::locks::bump(&data_dir, how).map_err(|e| match e {
                        // Nothing to bump, or a ceiling past u64: the command line is wrong.
                        ClockError::Io { ref cause, .. } if cause.kind() == std::io::ErrorKind::NotFound => {
                            super::usage(format!("{}: {e}", data_dir.display()))
                        }
                        e @ ClockError::Overflow { .. } => super::usage(e.to_string()),
                        e => anyhow::Error::new(e).context(format!("bump tokens in {}", data_dir.display())),
                    })?,
                };
                let replaced = !keep_leases;
                if replaced {
                    fencing_server::locks::replace_leases(&data_dir)
                        .with_context(|| format!("replace the lease journal in {}", data_dir.display()))?;
                }
                let report = serde_json::json!({
                    "data_dir": data_dir,
                    "previous_ceiling": before.ceiling,
                    "ceiling": after.ceiling,
                    "leases_dropped": replaced,
                    "first_grant_waits_ms": if replaced { after.max_lease_ms } else { 0 },
                });
                Ok(report)
            })
        }
        AdminCommand::RecoverLeases { data_dir } => {
            audited(&data_dir.clone(), "recover-leases", serde_json::json!({}), || {
                let recovered = fencing_server::locks::recover_leases(&data_dir).map_err(|e| match e {
                    fencing_server::locks::RecoverError::Refused(why) => super::usage(why),
                    e => anyhow::Error::new(e).context(format!("recover the lease journal in {}", data_dir.display())),
                })?;
                Ok(serde_json::to_value(recovered)?)
            })
        }
        AdminCommand::Keygen { id, algorithm, out } => {
            let report = super::keygen::keygen(id, algorithm, &out)?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            Ok(ExitCode::SUCCESS)
        }
        AdminCommand::RetireFences { data_dir } => {
            audited(&data_dir.clone(), "retire-fences", serde_json::json!({}), || {
                let dir = store_dir(&data_dir)?;
                let retired = fencing_server::storage::retire_empty_fences(&dir)
                    .with_context(|| format!("retire fences in {}", dir.display()))?;
                Ok(serde_json::to_value(retired)?)
            })
        }
        AdminCommand::DropFloors { data_dir, below } => {
            audited(&data_dir.clone(), "drop-floors", serde_json::json!({ "below": below }), || {
                let dir = store_dir(&data_dir)?;
                let tokens = match data_dir.join(CLOCK_FILE).exists() {
                    true => Some(
                        fencing_server::locks::lock_tokens(&data_dir)
                            .with_context(|| format!("read the lock service's tokens in {}", data_dir.display()))?,
                    ),
                    false => None,
                };
                let below = match (below, &tokens) {
                    (Some(n), _) => n,
                    (None, Some(tokens)) => tokens.next_grant,
                    (None, None) => {
                        return Err(super::usage(format!(
                            "{}: no lock service ran in this directory; give --below with a token at or below every \
                         token your lock service can still grant",
                            data_dir.display()
                        )));
                    }
                };
                let dropped = fencing_server::storage::drop_floors_below(&dir, below)
                    .with_context(|| format!("drop floors in {}", dir.display()))?;
                let mut report = serde_json::to_value(dropped)?;
                // Leases the next start restores whose token is below the store floor: their
                // holders' writes to resources without a fence are refused until they acquire again.
                if let (Some(tokens), Some((floor, _))) = (&tokens, dropped.store_floor) {
                    let below_floor: Vec<&str> =
                        tokens.held.iter().filter(|(_, t)| *t < floor).map(|(name, _)| name.as_str()).collect();
                    report["held_leases_below_store_floor"] = below_floor.into();
                }
                Ok(report)
            })
        }
        AdminCommand::Compact { data_dir } => audited(&data_dir.clone(), "compact", serde_json::json!({}), || {
            let dir = store_dir(&data_dir)?;
            let (before, after) =
                fencing_server::storage::compact(&dir).with_context(|| format!("compact {}", dir.display()))?;
            Ok(serde_json::json!({ "store": dir, "bytes_before": before, "bytes_after": after }))
        }),
        AdminCommand::ResetFence { resource, reason, lock, high_water, server, admin_token_file } => {
            let token = fencing_server::http::operators::client_token(&admin_token_file)
                .map_err(|e| super::usage(e.to_string()))?;
            let client = StorageClient::new(&server).with_auth(Some(token));
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

/// Runs an offline command on the stopped server's `data_dir`, recorded in
/// the same operators' audit log as the operator routes
/// (`admin-audit.jsonl`): `requested` (the command, its arguments, the
/// operating-system account) synced before it runs, so nothing changes
/// unrecorded, then `done` with its report (the state before and after) or
/// `failed` with the error; prints the report. A directory that does not
/// exist holds nothing to change and records nothing.
fn audited(
    data_dir: &Path,
    action: &str,
    arguments: serde_json::Value,
    run: impl FnOnce() -> anyhow::Result<serde_json::Value>,
) -> anyhow::Result<ExitCode> {
    use fencing_server::http::audit::append;
    let record = data_dir.is_dir();
    let uid = std::fs::metadata("/proc/self").map(|m| std::os::unix::fs::MetadataExt::uid(&m)).ok();
    let asked = serde_json::json!({
        "action": action, "via": "fencing admin", "arguments": arguments,
        "operator": std::env::var("USER").ok(), "uid": uid, "pid": std::process::id(),
    });
    let phase = |phase: &str, key: &str, value: serde_json::Value| {
        let mut out = asked.clone();
        out["phase"] = phase.into();
        if !key.is_empty() {
            out[key] = value;
        }
        out
    };
    let log_error = || format!("record the command in the operators' audit log in {}", data_dir.display());
    if record {
        append(data_dir, phase("requested", "", serde_json::Value::Null))
            .with_context(|| format!("{}; nothing was changed", log_error()))?;
    }
    match run() {
        Ok(report) => {
            if record {
                append(data_dir, phase("done", "report", report.clone()))
                    .with_context(|| format!("{} (the command was done: {report})", log_error()))?;
            }
            println!("{}", serde_json::to_string_pretty(&report)?);
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            if record && let Err(log) = append(data_dir, phase("failed", "error", format!("{e:#}").into())) {
                eprintln!("warning: {}: {log}", log_error());
            }
            Err(e)
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
