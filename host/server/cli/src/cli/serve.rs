//! `fencing serve`: one HTTP server for the roles this process runs.
//!
//! This file parses and checks the flags, reads the key and token files, and
//! turns them into a `fencing_server::assembly::Config`; the server builds
//! itself from that (`assembly.rs`: the storage API when the role includes
//! storage, the lock API when it includes locks, `GET /metrics` over the one
//! shared registry, and the layers in their order). Flags common to every
//! server subcommand:
//! `--listen` (default 127.0.0.1:7070) and `--data-dir` (default ./fencing-data).
//! The whole router is wrapped in [`fencing_server::http::auth`]: with
//! `--auth-token-file` mutating requests need the writers' bearer token
//! (reads and `/metrics` stay open unless `--auth-reads`); the operator
//! routes need an operator's token from `--admin-token-file` and are off
//! without one. Token and key files are read and checked before anything
//! starts: an unreadable, invalid, too short or loosely permitted file, or
//! keys that cannot work together, is bad input (exit 2) naming the file.

use super::values::TokenModeArg;
use anyhow::Context;
use clap::{Args, ValueEnum};
use fencing_runtime::proof::Signer;
use fencing_runtime::{GuardKind, Policy, Verifier};
use fencing_server::assembly::{self, Config, GuardChoice, LocksConfig, StartError, StorageConfig, Store};
use fencing_server::http::ConnLimits;
use fencing_server::http::auth::{Access, BearerAuth};
use fencing_server::http::gate::HostRules;
use fencing_server::http::operators::Operators;
use fencing_server::keys;
use fencing_server::locks::EmbeddedConfig;
use fencing_server::storage::FlapConfig;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Which services this process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Role {
    All,
    Storage,
    Locks,
}

impl Role {
    pub fn storage(self) -> bool {
        matches!(self, Role::All | Role::Storage)
    }
    pub fn locks(self) -> bool {
        matches!(self, Role::All | Role::Locks)
    }
}

/// Which store backs the storage role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StoreKind {
    /// Embedded redb file under `--data-dir`.
    Redb,
    /// PostgreSQL at `--postgres-url`.
    Postgres,
}

/// Where `--store postgres` decides its writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PgGuardKind {
    /// In this server, with `--guard`/`--plugin`, before writing.
    Host,
    /// In PostgreSQL, by the `fencing` extension (`scripts/pg-extension install`), so direct SQL writers
    /// of the objects table share the fence.
    Extension,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:7070", env = "FENCING_LISTEN")]
    pub listen: SocketAddr,
    /// Directory for the embedded store and the compiled-plugin cache.
    #[arg(long, default_value = "./fencing-data", env = "FENCING_DATA_DIR")]
    pub data_dir: PathBuf,
    /// Which services to run.
    #[arg(long, value_enum, default_value = "all")]
    pub role: Role,
    /// Storage backend.
    #[arg(long, value_enum, default_value = "redb")]
    pub store: StoreKind,
    /// PostgreSQL connection string (with `--store postgres`), e.g. `host=127.0.0.1 port=5432 user=fencing dbname=fencing`.
    #[arg(long, env = "FENCING_POSTGRES_URL")]
    pub postgres_url: Option<String>,
    /// With `--store postgres`: decide writes in this server (`host`) or in the database's `fencing`
    /// extension (`extension`), which keeps the fences in `fencing.fences` and fences direct SQL writers too.
    #[arg(long, value_enum, default_value = "host")]
    pub pg_guard: PgGuardKind,
    /// Who decides writes: the Wasm component or the same rules linked natively.
    #[arg(long, default_value = "wasm", value_parser = super::named::<GuardKind>(GuardKind::ALL.map(GuardKind::name)))]
    pub guard: GuardKind,
    /// A `fencing:guard` component file; the embedded component when omitted.
    #[arg(long)]
    pub plugin: Option<PathBuf>,
    /// Token comparison policy.
    #[arg(long, default_value = "non-decreasing", value_parser = super::named::<Policy>(Policy::ALL.map(Policy::name)))]
    pub policy: Policy,
    /// A resource flaps when more than this many new tokens are admitted within `--flap-window`.
    #[arg(long, default_value_t = 10)]
    pub flap_max_terms: u32,
    /// The flapping window (e.g. `10s`, `1m`).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub flap_window: Duration,
    /// Most resources with per-resource metric series (the most recently written ones).
    #[arg(long, default_value_t = 1000)]
    pub metrics_max_resources: usize,
    /// Disable fencing: the storage admits every write whatever its token.
    /// Unsafe; it exists to show what fencing prevents (`fencing chaos --no-fencing`).
    #[arg(long)]
    pub no_fencing: bool,
    /// Require `Authorization: Bearer <token>` on every mutating request (storage writes, lock
    /// acquire/renew/release: any method but GET/HEAD/OPTIONS); the file holds the token, a trailing
    /// newline is ignored. Missing or wrong tokens get 401. Reads (`/v1/storage/read`, `/fence`,
    /// `/v1/locks/status`) and `GET /metrics` stay open.
    #[arg(long, env = "FENCING_AUTH_TOKEN_FILE")]
    pub auth_token_file: Option<PathBuf>,
    /// With `--auth-token-file`: reads and `GET /metrics` need the bearer token too.
    #[arg(long, requires = "auth_token_file")]
    pub auth_reads: bool,
    /// Turn on the operator routes (`POST /v1/admin/fences/reset`): the file names
    /// each operator and their own token, one `<name> <token>` a line (mode 0600;
    /// tokens of at least 16 characters, none of them the writers' token). Every
    /// use is recorded with the operator's name in `admin-audit.jsonl` in
    /// `--data-dir`. Without it the operator routes answer 403 `admin_disabled`.
    #[arg(long, env = "FENCING_ADMIN_TOKEN_FILE")]
    pub admin_token_file: Option<PathBuf>,
    /// Sign every grant (lock role): each grant and renewal carries a
    /// `fencing_proof` that this lock service granted that token for that
    /// lock. The file is the `OUT` of `fencing admin keygen` (one key).
    #[arg(long, env = "FENCING_SIGNING_KEY")]
    pub signing_key: Option<PathBuf>,
    /// Check every write's proof (storage role): a write whose
    /// `fencing_proof` is missing, malformed, made by a key not in this file
    /// or not for its lock and token is refused (409 `proof_missing`,
    /// `proof_malformed`, `proof_unknown_key`, `proof_bad`) before its fence
    /// is read. The file holds one or more keys (`OUT.pub` of `fencing admin
    /// keygen`; old and new during a rotation). With `--store postgres` it
    /// needs `--pg-guard host`.
    #[arg(long, env = "FENCING_VERIFY_KEYS")]
    pub verify_keys: Option<PathBuf>,
    /// Refuse (409 `token_too_far_ahead`) a write whose token is more than
    /// this far above its resource's high-water mark, so one runaway token
    /// (say 2^64-1) cannot push a resource out of every real holder's reach.
    /// A resource's first write counts from 0: its token may be at most this.
    /// Keep it well above how far tokens move between two writes (each
    /// restart of the embedded lock service jumps them by up to 2^20).
    /// 18446744073709551615 turns the bound off.
    #[arg(long, default_value_t = fencing_server::storage::DEFAULT_MAX_TOKEN_ADVANCE,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_token_advance: u64,
    /// With `--store redb`: bytes kept allocated beside the store (file
    /// `storage/space-reserve`) and given back when the disk fills, so the store
    /// can reopen and accept DELETEs on a full disk; every write is accepted
    /// again once the reserve can be taken back. 0 disables it.
    #[arg(long, default_value_t = fencing_server::storage::DEFAULT_SPACE_RESERVE)]
    pub space_reserve: u64,
    /// With `--store redb`: most bytes the store holds, counting objects, their resource names
    /// and paths, and fences (`fencing_storage_stored_bytes`); a write that would grow past it
    /// gets 507 `quota_exceeded`, writes that shrink the store always pass. Fences of resources
    /// with no objects are retired with `fencing admin retire-fences` (server stopped).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_store_bytes: Option<u64>,
    #[command(flatten)]
    pub locks: LockArgs,
    #[command(flatten)]
    pub http: HttpArgs,
}

/// How the HTTP server treats connections and browsers.
#[derive(Debug, Clone, Args)]
pub struct HttpArgs {
    /// A request's head must arrive within this time of its first byte.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub header_timeout: Duration,
    /// A connection with no request in progress is closed after this long without a byte.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub idle_timeout: Duration,
    /// A request body may stall this long between two parts (then 408 `body_timeout`).
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub body_timeout: Duration,
    /// After `--body-timeout`, a request body must have arrived at this average rate or faster
    /// (bytes per second; then 408 `body_timeout`), so a body's total time is bounded.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..))]
    pub body_min_rate: u64,
    /// Most acquisitions with `wait_ms` one client address may have waiting at once (more get
    /// 503 `too_many_waiting`). Waiting acquisitions and slow bodies together hold at most three
    /// quarters of `--max-connections`; the rest is kept for quick requests.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_waiting_per_client: u64,
    /// Most request bodies past 64 KiB (each spooled to a temporary file) one client address
    /// may send at once (more get 503 `server_busy`). Spooled bodies still arriving after a
    /// second hold at most three quarters of the spool files; the rest is kept for large
    /// bodies that arrive quickly.
    #[arg(long, default_value_t = fencing_server::http::budget::DEFAULT_MAX_SPOOLING_PER_CLIENT as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_spooling_per_client: u64,
    /// A response write may wait this long for the client to read before the connection is closed.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub write_timeout: Duration,
    /// Most connections served at once; at the cap the longest-idle connection is closed to make
    /// room, or the new one is answered 503 if none is idle. Default: the open-file limit (raised
    /// to its hard limit at start) less 256 descriptors kept for the store and clients and one in
    /// nine kept for request bodies spooled to temporary files.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_connections: Option<u64>,
    /// On SIGTERM or ctrl-c: how long requests in progress may take to finish before the process exits anyway.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub shutdown_timeout: Duration,
    /// Host names served besides IP addresses and `localhost` (comma separated; `*` serves any
    /// Host). A request for any other name gets 421 `host_not_allowed`: this is what stops a
    /// web page that re-points its own name at this server (DNS rebinding) from reading it.
    #[arg(long, value_delimiter = ',')]
    pub allowed_hosts: Vec<String>,
    /// Browser origins (e.g. `https://app.example`) whose pages may send mutating requests;
    /// any other page's request gets 403 `cross_origin` (comma separated).
    #[arg(long, value_delimiter = ',')]
    pub allowed_origins: Vec<String>,
}

impl HttpArgs {
    /// The connection bounds, with the open-file limit raised first.
    pub fn limits(&self) -> anyhow::Result<ConnLimits> {
        for (name, d) in [
            ("--header-timeout", self.header_timeout),
            ("--idle-timeout", self.idle_timeout),
            ("--body-timeout", self.body_timeout),
            ("--write-timeout", self.write_timeout),
        ] {
            if d.is_zero() {
                return Err(super::usage(format!("{name} must be positive")));
            }
        }
        let fds = fencing_server::http::conn::raise_fd_limit().context("raise the open-file limit")?;
        let room = fds.saturating_sub(fencing_server::http::conn::RESERVED_FDS).max(16);
        // Every connection holds a socket, and a spooled body one file more: the
        // spool slots and the connections share what the limit leaves.
        let spool_files = (room / 9).clamp(2, 4096);
        let max = match self.max_connections {
            Some(n) if n + spool_files > room => {
                tracing::warn!(
                    max_connections = n,
                    spool_files,
                    open_file_limit = fds,
                    "--max-connections is above what the open-file limit leaves room for"
                );
                n
            }
            Some(n) => n,
            None => (room - spool_files).min(65_536),
        };
        Ok(ConnLimits {
            header_timeout: self.header_timeout,
            idle_timeout: self.idle_timeout,
            body_timeout: self.body_timeout,
            write_timeout: self.write_timeout,
            max_connections: usize::try_from(max).unwrap_or(usize::MAX),
            body_min_rate: self.body_min_rate,
            max_waiting_per_client: usize::try_from(self.max_waiting_per_client).unwrap_or(usize::MAX),
            spool_files: spool_files as usize,
            max_spooling_per_client: usize::try_from(self.max_spooling_per_client).unwrap_or(usize::MAX),
            shutdown_timeout: self.shutdown_timeout,
        })
    }

    /// The Host and origin rules.
    pub fn host_rules(&self) -> HostRules {
        HostRules::new(&self.allowed_hosts, &self.allowed_origins)
    }
}

pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    if args.store == StoreKind::Postgres && args.postgres_url.is_none() {
        return Err(super::usage("--store postgres needs --postgres-url"));
    }
    if args.pg_guard == PgGuardKind::Extension {
        if args.store != StoreKind::Postgres {
            return Err(super::usage("--pg-guard extension needs --store postgres"));
        }
        if args.no_fencing || args.plugin.is_some() {
            return Err(super::usage(
                "--pg-guard extension decides inside PostgreSQL: choose its plugin with the fencing.plugin_path setting \
                 there; --no-fencing and --plugin do not apply",
            ));
        }
    }
    if args.plugin.is_some() && args.guard == GuardKind::Native {
        return Err(super::usage("--plugin needs --guard wasm"));
    }
    if args.store == StoreKind::Postgres && args.max_store_bytes.is_some() {
        return Err(super::usage("--max-store-bytes applies to --store redb; PostgreSQL has its own quotas"));
    }
    if args.flap_window.is_zero() {
        return Err(super::usage("--flap-window must be positive"));
    }
    if args.signing_key.is_some() && !args.role.locks() {
        return Err(super::usage("--signing-key signs grants: it needs a role with the lock service"));
    }
    if args.verify_keys.is_some() {
        if !args.role.storage() {
            return Err(super::usage("--verify-keys checks writes: it needs a role with the storage"));
        }
        if args.no_fencing {
            return Err(super::usage("--verify-keys and --no-fencing contradict each other"));
        }
        if args.store == StoreKind::Postgres && args.pg_guard == PgGuardKind::Extension {
            return Err(super::usage(
                "--verify-keys needs --pg-guard host: the extension decides inside PostgreSQL, which holds no keys",
            ));
        }
    }
    // Key and token files are read now, so a bad one is a usage error before anything starts.
    let signing = load_keys(&args)?;
    let access = load_access(&args)?;
    if !args.listen.ip().is_loopback() && access.writers.is_none() {
        tracing::warn!(
            listen = %args.listen,
            "listening beyond loopback without --auth-token-file: anyone who can reach this address can write, \
             take and release locks; give the writers a token (--auth-token-file) or listen on 127.0.0.1"
        );
    }
    let limits = args.http.limits()?;
    let runtime = tokio::runtime::Runtime::new().context("start tokio runtime")?;
    let result = runtime.block_on(serve(args, access, limits, signing));
    // Whatever the shutdown bound left behind (a request still waiting, a
    // blocking store call) must not keep the process, and with it the data
    // directory's lock, alive.
    runtime.shutdown_timeout(Duration::from_secs(1));
    result?;
    Ok(ExitCode::SUCCESS)
}

/// The keys of signed tokens, loaded from `--signing-key` and `--verify-keys`.
struct Signing {
    signer: Option<Arc<Signer>>,
    verifier: Option<Arc<Verifier>>,
}

/// Reads and checks the key files (`fencing_server::keys`): each file's own
/// problems, and a signing key that no verify key of this process checks.
fn load_keys(args: &ServeArgs) -> anyhow::Result<Signing> {
    let usage = |e: fencing_server::keys::KeyFileError| super::usage(e.to_string());
    let signer = args.signing_key.as_deref().map(keys::load_signer).transpose().map_err(usage)?;
    let verifier_keys = args.verify_keys.as_deref().map(keys::load_verifier_keys).transpose().map_err(usage)?;
    if let (Some(signer), Some(verify), Some(path)) = (&signer, &verifier_keys, &args.verify_keys) {
        keys::check_pair(signer, args.signing_key.as_deref().expect("with the signer"), verify, path).map_err(usage)?;
    }
    let verifier = match (verifier_keys, &args.verify_keys) {
        (Some(keys), Some(path)) => Some(Arc::new(keys::verifier(path, keys).map_err(usage)?)),
        _ => None,
    };
    Ok(Signing { signer: signer.map(Arc::new), verifier })
}

/// Reads the writers' and the operators' token files.
fn load_access(args: &ServeArgs) -> anyhow::Result<Access> {
    let usage = |e: fencing_server::secrets::SecretFileError| super::usage(e.to_string());
    let writers = match &args.auth_token_file {
        Some(path) => Some(BearerAuth::load(path).map_err(usage)?.with_reads(args.auth_reads)),
        None => None,
    };
    let operators = match &args.admin_token_file {
        Some(path) => {
            if !args.role.storage() {
                return Err(super::usage(
                    "--admin-token-file turns on the storage's operator routes: it needs a role with the storage",
                ));
            }
            Some(Operators::load(path, writers.as_ref().map(BearerAuth::token)).map_err(usage)?)
        }
        None => None,
    };
    Ok(Access { writers, operators })
}

async fn serve(args: ServeArgs, access: Access, limits: ConnLimits, signing: Signing) -> anyhow::Result<()> {
    let authenticated = access.writers.is_some();
    let operators = access.operators.as_ref().map_or(0, Operators::len);
    let config = config(&args, access, limits, signing)?;
    let server = assembly::start(config).await.map_err(|e| match e {
        // A plugin file that is not a `fencing:guard` component is bad input.
        StartError::Plugin { .. } => super::usage(e.to_string()),
        e => anyhow::Error::from(e),
    })?;
    tracing::info!(
        listen = %server.local_addr()?, role = ?args.role, authenticated, operators, store = ?args.store,
        guard = ?args.guard, max_connections = limits.max_connections, "serving"
    );
    server.run(fencing_server::http::shutdown_signal()).await.context("serve HTTP")?;
    tracing::info!("stopped");
    Ok(())
}

/// The server the flags describe, for `fencing_server::assembly::start`.
fn config(args: &ServeArgs, access: Access, limits: ConnLimits, signing: Signing) -> anyhow::Result<Config> {
    let storage = match args.role.storage() {
        true => Some(StorageConfig {
            store: match args.store {
                StoreKind::Redb => Store::Redb { space_reserve: args.space_reserve, max_bytes: args.max_store_bytes },
                StoreKind::Postgres => Store::Postgres {
                    url: args.postgres_url.clone().expect("checked in run"),
                    in_database: args.pg_guard == PgGuardKind::Extension,
                },
            },
            guard: guard_choice(args),
            policy: args.policy,
            verifier: signing.verifier,
            max_token_advance: args.max_token_advance,
            flap: FlapConfig {
                max_term_changes: args.flap_max_terms,
                window: args.flap_window,
                max_tracked: args.metrics_max_resources,
            },
        }),
        false => None,
    };
    let locks = match args.role.locks() {
        true => Some(LocksConfig { backend: lock_backend(&args.locks, &args.data_dir)?, signer: signing.signer }),
        false => None,
    };
    Ok(Config {
        listen: args.listen,
        data_dir: args.data_dir.clone(),
        storage,
        locks,
        access,
        limits,
        host_rules: args.http.host_rules(),
    })
}

/// Who decides writes, as the flags ask.
fn guard_choice(args: &ServeArgs) -> GuardChoice {
    match (args.no_fencing, args.guard) {
        (true, _) => GuardChoice::Unfenced,
        (false, GuardKind::Native) => GuardChoice::Native,
        (false, GuardKind::Wasm) => GuardChoice::Wasm { plugin: args.plugin.clone() },
    }
}

/// Lock service flags of `fencing serve`.
#[derive(Debug, Clone, Args)]
pub struct LockArgs {
    /// Lock backend.
    #[arg(long = "locks", value_enum, default_value_t = LockBackend::Embedded)]
    pub backend: LockBackend,
    /// etcd client URLs for `--locks etcd` (comma separated).
    #[arg(long, value_delimiter = ',', default_value = "http://127.0.0.1:2379")]
    pub etcd_endpoints: Vec<String>,
    /// Embedded backend: one token sequence per lock, or one for all locks.
    #[arg(long, value_enum, default_value_t = TokenModeArg::PerLock)]
    pub token_mode: TokenModeArg,
    /// Re-entry: an acquisition that presents the held lease's own
    /// `lock_token` gets the same lease and token back, with the new
    /// duration. A `client_id` alone never re-enters.
    #[arg(long)]
    pub reentrant: bool,
    /// Embedded backend: most leases held at once; one more is answered 503
    /// `too_many_locks` (and counted in `fencing_locks_capacity_refusals_total`).
    #[arg(long, default_value_t = fencing_server::locks::DEFAULT_MAX_HELD as u64, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_held_locks: u64,
    /// Embedded backend: when a grant is answered [default: background].
    /// `background` answers once the grant is written to the lease journal
    /// and syncs it right after (group commit, within 2 ms): a crashed or
    /// restarted process loses nothing and waits for nothing, and only after
    /// the machine itself stopped without a clean shutdown does every
    /// acquisition of a lock the journal does not hold first wait out the
    /// longest lease answered ahead of its sync in the last second or so.
    /// `each-grant` answers once the journal is synced (fdatasync): no wait
    /// after a power loss either, at the cost of a sync in every grant's
    /// latency (fewer acquisitions/s). See docs/locks.md.
    #[arg(long, value_enum)]
    pub lease_sync: Option<LeaseSync>,
}

impl LockArgs {
    /// `--lease-sync` as given, or its default.
    pub fn lease_sync(&self) -> LeaseSync {
        self.lease_sync.unwrap_or_default()
    }
}

/// `--lease-sync`: when the embedded service answers a grant. The default
/// is what `fencing serve` and `fencing chaos` use without the flag.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum LeaseSync {
    /// Once it is written to the journal file, ahead of its sync.
    #[default]
    Background,
    /// Once the journal holding it is synced.
    EachGrant,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LockBackend {
    Embedded,
    Etcd,
}

/// The lock service the flags ask for.
fn lock_backend(args: &LockArgs, data_dir: &Path) -> anyhow::Result<assembly::LockBackend> {
    Ok(match args.backend {
        LockBackend::Embedded => assembly::LockBackend::Embedded(EmbeddedConfig {
            data_dir: Some(data_dir.to_path_buf()),
            token_mode: args.token_mode.into(),
            reentrant: args.reentrant,
            max_held: usize::try_from(args.max_held_locks).unwrap_or(usize::MAX),
            background_grants: args.lease_sync() == LeaseSync::Background,
            ..EmbeddedConfig::default()
        }),
        LockBackend::Etcd => {
            if args.reentrant {
                return Err(super::usage("--reentrant is only supported by --locks embedded"));
            }
            if args.lease_sync.is_some() {
                return Err(super::usage("--lease-sync is only supported by --locks embedded"));
            }
            assembly::LockBackend::Etcd { endpoints: args.etcd_endpoints.clone() }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::{LeaseSync, LockArgs};
    use clap::Parser;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        locks: LockArgs,
    }

    fn lease_sync(args: &[&str]) -> LeaseSync {
        Flags::parse_from(std::iter::once("fencing").chain(args.iter().copied())).locks.lease_sync()
    }

    #[test]
    fn grants_are_answered_once_written_unless_each_grant_is_asked_for() {
        assert_eq!(lease_sync(&[]), LeaseSync::Background);
        assert_eq!(lease_sync(&["--lease-sync", "background"]), LeaseSync::Background);
        assert_eq!(lease_sync(&["--lease-sync", "each-grant"]), LeaseSync::EachGrant);
    }
}
