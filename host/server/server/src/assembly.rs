//! A server built from a typed [`Config`]: what `fencing serve` runs, and
//! what a test or an embedding program builds without the command line.
//!
//! The command line (`host/server/cli`, `serve.rs`) parses and checks flags
//! and reads the key and token files; [`start`] takes the result and builds:
//! the lock service, the store and its guard, the routes, the layers and the
//! listener, in this order:
//! - the lock service opens before the store: its journal is rewritten at
//!   start, and on a nearly full disk that must come before the store takes
//!   its space reserve back (the store runs without the reserve; the lock
//!   service cannot run without its journal);
//! - the routes are merged (storage and operator routes, lock routes,
//!   `GET /metrics`, the OpenAPI document) and given the JSON fallbacks;
//! - authentication wraps them, and the gate (Host, media type, origin)
//!   wraps authentication, so a request for a foreign Host is refused before
//!   authentication can tell a guesser anything.
//!
//! [`Server::run`] then serves until its shutdown future completes.

use crate::http::audit::AuditLog;
use crate::http::auth::Access;
use crate::http::gate::HostRules;
use crate::http::{ConnLimits, ConnMetrics};
use crate::locks::{EmbeddedConfig, EmbeddedLocks, EtcdLocks, LockMetrics, LockService};
use crate::storage::{Engine, FlapConfig, PgGuard, PostgresEngine, RedbEngine, StorageMetrics, StorageService};
use crate::storage::{StorageError, StoreOptions};
use crate::telemetry::Metrics;
use axum::Router;
use axum::routing::get;
use fencing_runtime::proof::Signer;
use fencing_runtime::{Guard, NativeGuard, PluginError, Policy, UnfencedGuard, Verifier, WasmGuard};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

/// Everything a server is built from, checked and loaded (files read,
/// keys parsed) by whoever makes it.
pub struct Config {
    /// The address to listen on (port 0: any free port, see [`Server::local_addr`]).
    pub listen: SocketAddr,
    /// Holds the embedded store (`storage/`), the lock service's clock and
    /// journal, and the operators' audit log; created if missing.
    pub data_dir: PathBuf,
    /// The storage role, if this server runs it.
    pub storage: Option<StorageConfig>,
    /// The lock role, if this server runs it.
    pub locks: Option<LocksConfig>,
    /// The writers' and the operators' credentials.
    pub access: Access,
    /// The bounds on connections.
    pub limits: ConnLimits,
    /// The Host names and browser origins served (the listen port and the
    /// routes are added by [`start`]).
    pub host_rules: HostRules,
}

/// The storage role: which store, and how writes are decided.
pub struct StorageConfig {
    /// Which store, and its settings.
    pub store: Store,
    /// Who decides every write (with `Store::Postgres { in_database: true }`,
    /// the extension inside PostgreSQL instead).
    pub guard: GuardChoice,
    /// The token comparison policy.
    pub policy: Policy,
    /// Signed writes: the keys every write's proof is checked with.
    pub verifier: Option<Arc<Verifier>>,
    /// How far above a resource's high-water mark a token may be.
    pub max_token_advance: u64,
    /// When a resource counts as flapping, and how many resources get series of their own.
    pub flap: FlapConfig,
}

/// The store behind the storage role.
pub enum Store {
    /// The embedded store in `data_dir/storage`.
    Redb {
        /// Bytes kept allocated for a full disk (0: none).
        space_reserve: u64,
        /// The store's quota in bytes (`None`: none).
        max_bytes: Option<u64>,
    },
    /// PostgreSQL at `url`; with `in_database`, the `fencing` extension decides inside it.
    Postgres { url: String, in_database: bool },
}

/// Who decides the writes. Built after the lock service has opened (see
/// the module's order), in `data_dir/plugin-cache` for compiled components.
pub enum GuardChoice {
    /// The `fencing:guard` component under wasmtime: the embedded one, or this file.
    Wasm { plugin: Option<PathBuf> },
    /// The same rules linked natively.
    Native,
    /// No fencing: every write is admitted whatever its token. A
    /// demonstration of what fencing prevents, never protection.
    Unfenced,
    /// A guard the caller built.
    Given(Arc<dyn Guard>),
}

/// The lock role: which backend, and whether grants are signed.
pub struct LocksConfig {
    /// The backend.
    pub backend: LockBackend,
    /// Signs every grant and renewal (`fencing_proof`).
    pub signer: Option<Arc<Signer>>,
}

/// The lock service behind the lock role.
pub enum LockBackend {
    /// In this process; `data_dir` is set to the server's when `None`.
    Embedded(EmbeddedConfig),
    /// etcd at these client URLs.
    Etcd { endpoints: Vec<String> },
}

/// Why a server could not start; nothing is being served.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("create data directory {}: {source}", dir.display())]
    DataDir { dir: PathBuf, source: std::io::Error },
    #[error("open the embedded lock service: {0}")]
    Locks(#[from] crate::locks::OpenError),
    #[error("connect to etcd at {endpoints}: {message}")]
    Etcd { endpoints: String, message: String },
    #[error("open the operators' audit log in {}: {source}", dir.display())]
    Audit { dir: PathBuf, source: std::io::Error },
    #[error("{what}: {source}")]
    Store { what: String, source: StorageError },
    #[error("load embedded guard: {0}")]
    Guard(PluginError),
    #[error("plugin {}: {source}", path.display())]
    Plugin { path: PathBuf, source: PluginError },
    #[error("listen on {addr}: {source}")]
    Listen { addr: SocketAddr, source: std::io::Error },
}

/// A server built and listening, not yet serving.
pub struct Server {
    listener: tokio::net::TcpListener,
    app: Router,
    limits: ConnLimits,
    conn_metrics: ConnMetrics,
}

impl Server {
    /// The address it listens on.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` completes, then lets requests in progress
    /// finish within the limits' shutdown timeout.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send + 'static) -> std::io::Result<()> {
        crate::http::conn::serve_with(self.listener, self.app, self.limits, self.conn_metrics, shutdown).await
    }
}

/// Builds the server `config` describes and binds its listener.
pub async fn start(config: Config) -> Result<Server, StartError> {
    let Config { listen, data_dir, storage, locks, access, limits, host_rules } = config;
    std::fs::create_dir_all(&data_dir).map_err(|source| StartError::DataDir { dir: data_dir.clone(), source })?;
    let metrics = Metrics::new();
    let mut app = Router::new();
    if let Some(locks) = locks {
        let service = lock_service(locks.backend, &data_dir, &metrics).await?;
        app = app.merge(match locks.signer {
            Some(signer) => crate::http::locks::signing_router(service, signer),
            None => crate::http::locks::router(service),
        });
    }
    if let Some(storage) = storage {
        let audit = AuditLog::open(&data_dir).map_err(|source| StartError::Audit { dir: data_dir.clone(), source })?;
        let service = storage_service(storage, &data_dir, &metrics).await?;
        app =
            app.merge(crate::http::storage::router(service.clone())).merge(crate::http::admin::router(service, audit));
    }
    let m = metrics.clone();
    app = app.route("/metrics", get(move || std::future::ready(m.handler())));
    app = crate::http::with_fallbacks(app.merge(crate::http::openapi::router()));
    app = crate::http::auth::protect(app, access);
    let rules = host_rules.with_listen_port(listen.port()).with_routes(crate::http::openapi::routes());
    app = crate::http::gate::protect(app, rules);
    let conn_metrics = ConnMetrics::register(&metrics);
    let listener =
        tokio::net::TcpListener::bind(listen).await.map_err(|source| StartError::Listen { addr: listen, source })?;
    Ok(Server { listener, app, limits, conn_metrics })
}

/// Opens the lock service, registering its metrics.
async fn lock_service(
    backend: LockBackend,
    data_dir: &std::path::Path,
    metrics: &Metrics,
) -> Result<Arc<dyn LockService>, StartError> {
    let lock_metrics = LockMetrics::register(metrics);
    Ok(match backend {
        LockBackend::Embedded(mut cfg) => {
            cfg.data_dir.get_or_insert_with(|| data_dir.to_path_buf());
            Arc::new(EmbeddedLocks::open(cfg, lock_metrics)?)
        }
        LockBackend::Etcd { endpoints } => Arc::new(
            EtcdLocks::connect(&endpoints, lock_metrics)
                .await
                .map_err(|e| StartError::Etcd { endpoints: endpoints.join(","), message: e.to_string() })?,
        ),
    })
}

/// Opens the store and wraps it in the service that times and counts it.
async fn storage_service(
    config: StorageConfig,
    data_dir: &std::path::Path,
    metrics: &Metrics,
) -> Result<StorageService, StartError> {
    let StorageConfig { store, guard, policy, verifier, max_token_advance, flap } = config;
    let guard = build_guard(guard, data_dir)?;
    let engine: Arc<dyn Engine> = match store {
        Store::Redb { space_reserve, max_bytes } => {
            let options = StoreOptions { space_reserve, max_bytes, verifier };
            let dir = data_dir.join("storage");
            let engine = RedbEngine::open_with(&dir, guard, policy, options)
                .map_err(|source| StartError::Store { what: format!("open store in {}", dir.display()), source })?;
            engine.set_max_token_advance(Some(max_token_advance));
            Arc::new(engine)
        }
        Store::Postgres { url, in_database } => {
            let guard = if in_database { PgGuard::Extension } else { PgGuard::Host(guard) };
            let postgres = |source| StartError::Store { what: "connect to PostgreSQL".into(), source };
            let mut engine = PostgresEngine::connect(&url, guard, policy).await.map_err(postgres)?;
            if let Some(verifier) = verifier {
                engine = engine.with_verifier(verifier).map_err(postgres)?;
            }
            Arc::new(engine.with_max_token_advance(Some(max_token_advance)))
        }
    };
    Ok(StorageService::new(engine, Arc::new(StorageMetrics::new(metrics, flap))))
}

/// Builds the guard `choice` names, compiled components cached in `data_dir/plugin-cache`.
fn build_guard(choice: GuardChoice, data_dir: &std::path::Path) -> Result<Arc<dyn Guard>, StartError> {
    let cache = data_dir.join("plugin-cache");
    Ok(match choice {
        GuardChoice::Unfenced => {
            tracing::warn!("--no-fencing: every write is admitted whatever its token; stale writers can corrupt data");
            Arc::new(UnfencedGuard)
        }
        GuardChoice::Native => Arc::new(NativeGuard),
        GuardChoice::Wasm { plugin: None } => Arc::new(WasmGuard::embedded(Some(&cache)).map_err(StartError::Guard)?),
        GuardChoice::Wasm { plugin: Some(path) } => {
            Arc::new(WasmGuard::from_file(&path, Some(&cache)).map_err(|source| StartError::Plugin { path, source })?)
        }
        GuardChoice::Given(guard) => guard,
    })
}
