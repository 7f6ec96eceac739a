//! `fencing serve`: the HTTP server.
//!
//! On this branch it serves the lock API and `/metrics`; the storage engine
//! mounts beside it. The lock part is the flattened [`LockArgs`] plus one
//! line: `app = app.merge(crate::http::locks::router(lock_service(..).await?))`.

use super::usage;
use crate::locks::{EmbeddedConfig, EmbeddedLocks, EtcdLocks, LockMetrics, LockService, TokenMode};
use crate::telemetry::Metrics;
use anyhow::Context;
use axum::Router;
use axum::routing::get;
use clap::{Args, ValueEnum};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:7070")]
    listen: String,
    /// Directory for durable state (the lock service's generation clock).
    #[arg(long, default_value = "./fencing-data")]
    data_dir: PathBuf,
    /// Which services to run.
    #[arg(long, value_enum, default_value_t = Role::All)]
    role: Role,
    #[command(flatten)]
    locks: LockArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Role {
    All,
    Storage,
    Locks,
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
    #[arg(long, value_enum, default_value_t = TokenMode::PerLock)]
    pub token_mode: TokenMode,
    /// Re-acquiring a held lock with the same client_id returns the same lease and token.
    #[arg(long)]
    pub reentrant: bool,
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
                token_mode: args.token_mode,
                reentrant: args.reentrant,
                ..EmbeddedConfig::default()
            };
            Arc::new(EmbeddedLocks::open(cfg, lock_metrics).context("open the embedded lock service")?)
        }
        LockBackend::Etcd => {
            if args.reentrant {
                return Err(usage("--reentrant is only supported by --locks embedded"));
            }
            Arc::new(
                EtcdLocks::connect(&args.etcd_endpoints, lock_metrics)
                    .await
                    .with_context(|| format!("connect to etcd at {}", args.etcd_endpoints.join(",")))?,
            )
        }
    })
}

pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    if args.role == Role::Storage {
        return Err(usage("--role storage: the storage engine is not part of this build"));
    }
    let rt = tokio::runtime::Runtime::new().context("start the async runtime")?;
    rt.block_on(async {
        let metrics = Metrics::new();
        let locks = lock_service(&args.locks, &args.data_dir, &metrics).await?;
        let m = metrics.clone();
        let app = Router::new()
            .route("/metrics", get(move || std::future::ready(m.handler())))
            .merge(crate::http::locks::router(locks));
        let listener = tokio::net::TcpListener::bind(&args.listen)
            .await
            .map_err(|e| usage(format!("--listen {}: {e}", args.listen)))?;
        let addr = listener.local_addr().context("local address")?;
        tracing::info!(%addr, role = ?args.role, backend = ?args.locks.backend, "fencing serve listening");
        crate::http::serve(listener, app).await.context("serve")?;
        Ok(ExitCode::SUCCESS)
    })
}
