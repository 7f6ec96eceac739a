//! `fencing serve`: one HTTP server for the roles this process runs.
//!
//! The router is built from parts and merged: the storage API when the role
//! includes storage, the lock API when it includes locks, and `GET /metrics`
//! over the one shared registry. Flags common to every server subcommand:
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
use axum::Router;
use axum::routing::get;
use clap::{Args, ValueEnum};
use fencing_runtime::proof::Signer;
use fencing_runtime::{Guard, GuardKind, NativeGuard, Policy, UnfencedGuard, Verifier, WasmGuard};
use fencing_server::http::audit::AuditLog;
use fencing_server::http::auth::{Access, BearerAuth};
use fencing_server::http::gate::HostRules;
use fencing_server::http::operators::Operators;
use fencing_server::http::{ConnLimits, ConnMetrics};
use fencing_server::keys;
use fencing_server::locks::{EmbeddedConfig, EmbeddedLocks, EtcdLocks, LockMetrics, LockService};
use fencing_server::storage::{
    Engine, FlapConfig, PgGuard, PostgresEngine, RedbEngine, StorageMetrics, StorageService, StoreOptions,
};
use fencing_server::telemetry::Metrics;
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
    std::fs::create_dir_all(&args.data_dir)
        .with_context(|| format!("create data directory {}", args.data_dir.display()))?;
    let metrics = Metrics::new();
    let mut app = Router::new();
    // The lock service opens first: its journal is rewritten at start, and on
    // a nearly full disk that must come before the store takes its space
    // reserve back (the store runs without the reserve; the lock service
    // cannot run without its journal).
    if args.role.locks() {
        let locks = lock_service(&args.locks, &args.data_dir, &metrics).await?;
        app = app.merge(match signing.signer {
            Some(signer) => fencing_server::http::locks::signing_router(locks, signer),
            None => fencing_server::http::locks::router(locks),
        });
    }
    if args.role.storage() {
        let audit = AuditLog::open(&args.data_dir)
            .with_context(|| format!("open the operators' audit log in {}", args.data_dir.display()))?;
        app = app.merge(storage_router(&args, &metrics, audit, signing.verifier).await?);
    }
    let m = metrics.clone();
    app = app.route("/metrics", get(move || std::future::ready(m.handler())));
    app = fencing_server::http::with_fallbacks(app.merge(fencing_server::http::openapi::router()));
    let authenticated = access.writers.is_some();
    let operators = access.operators.as_ref().map_or(0, Operators::len);
    app = fencing_server::http::auth::protect(app, access);
    // The gate is the outer layer: a request for a foreign Host is refused
    // before authentication can tell a guesser anything.
    let rules = args.http.host_rules().with_listen_port(args.listen.port());
    app = fencing_server::http::gate::protect(app, rules.with_routes(fencing_server::http::openapi::routes()));
    let conn_metrics = ConnMetrics::register(&metrics);
    let shutdown = fencing_server::http::shutdown_signal();
    let listener =
        tokio::net::TcpListener::bind(args.listen).await.with_context(|| format!("listen on {}", args.listen))?;
    tracing::info!(
        listen = %listener.local_addr()?, role = ?args.role, authenticated, operators, store = ?args.store,
        guard = ?args.guard, max_connections = limits.max_connections, "serving"
    );
    fencing_server::http::conn::serve_with(listener, app, limits, conn_metrics, shutdown)
        .await
        .context("serve HTTP")?;
    tracing::info!("stopped");
    Ok(())
}

/// Builds the guard the flags ask for.
pub fn build_guard(args: &ServeArgs) -> anyhow::Result<Arc<dyn Guard>> {
    let cache = args.data_dir.join("plugin-cache");
    if args.no_fencing {
        tracing::warn!("--no-fencing: every write is admitted whatever its token; stale writers can corrupt data");
        return Ok(Arc::new(UnfencedGuard));
    }
    Ok(match (args.guard, &args.plugin) {
        (GuardKind::Native, _) => Arc::new(NativeGuard),
        (GuardKind::Wasm, None) => Arc::new(WasmGuard::embedded(Some(&cache)).context("load embedded guard")?),
        (GuardKind::Wasm, Some(path)) => Arc::new(
            WasmGuard::from_file(path, Some(&cache))
                .map_err(|e| super::usage(format!("plugin {}: {e}", path.display())))?,
        ),
    })
}

async fn storage_router(
    args: &ServeArgs,
    metrics: &Metrics,
    audit: AuditLog,
    verifier: Option<Arc<Verifier>>,
) -> anyhow::Result<Router> {
    let guard = build_guard(args)?;
    let policy = args.policy;
    let engine: Arc<dyn Engine> = match args.store {
        StoreKind::Redb => {
            let dir = args.data_dir.join("storage");
            let options = StoreOptions { space_reserve: args.space_reserve, max_bytes: args.max_store_bytes, verifier };
            let engine = RedbEngine::open_with(&dir, guard, policy, options)
                .with_context(|| format!("open store in {}", dir.display()))?;
            engine.set_max_token_advance(Some(args.max_token_advance));
            Arc::new(engine)
        }
        StoreKind::Postgres => {
            let url = args.postgres_url.as_deref().expect("checked in run");
            let guard = match args.pg_guard {
                PgGuardKind::Host => PgGuard::Host(guard),
                PgGuardKind::Extension => PgGuard::Extension,
            };
            let mut engine = PostgresEngine::connect(url, guard, policy).await.context("connect to PostgreSQL")?;
            if let Some(verifier) = verifier {
                engine = engine.with_verifier(verifier)?;
            }
            Arc::new(engine.with_max_token_advance(Some(args.max_token_advance)))
        }
    };
    let flap = FlapConfig {
        max_term_changes: args.flap_max_terms,
        window: args.flap_window,
        max_tracked: args.metrics_max_resources,
    };
    let storage_metrics = Arc::new(StorageMetrics::new(metrics, flap));
    let service = StorageService::new(engine, storage_metrics);
    Ok(fencing_server::http::storage::router(service.clone())
        .merge(fencing_server::http::admin::router(service, audit)))
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

/// Builds the lock service the flags ask for, registering its metrics.
pub async fn lock_service(args: &LockArgs, data_dir: &Path, metrics: &Metrics) -> anyhow::Result<Arc<dyn LockService>> {
    let lock_metrics = LockMetrics::register(metrics);
    Ok(match args.backend {
        LockBackend::Embedded => {
            let cfg = EmbeddedConfig {
                data_dir: Some(data_dir.to_path_buf()),
                token_mode: args.token_mode.into(),
                reentrant: args.reentrant,
                max_held: usize::try_from(args.max_held_locks).unwrap_or(usize::MAX),
                background_grants: args.lease_sync() == LeaseSync::Background,
                ..EmbeddedConfig::default()
            };
            Arc::new(EmbeddedLocks::open(cfg, lock_metrics).context("open the embedded lock service")?)
        }
        LockBackend::Etcd => {
            if args.reentrant {
                return Err(super::usage("--reentrant is only supported by --locks embedded"));
            }
            if args.lease_sync.is_some() {
                return Err(super::usage("--lease-sync is only supported by --locks embedded"));
            }
            Arc::new(
                EtcdLocks::connect(&args.etcd_endpoints, lock_metrics)
                    .await
                    .with_context(|| format!("connect to etcd at {}", args.etcd_endpoints.join(",")))?,
            )
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
