//! The storage service: an [`Engine`] plus its metrics and rejection logs.
//!
//! Every write that reaches the engine is timed and counted exactly once:
//! admitted, rejected by reason, or refused because the guard failed. Each
//! refusal emits one `tracing` line with resource, presented token and high-water.

use super::{Engine, ReadResult, StorageError, StorageMetrics, ValidWrite, WriteOutcome};
use fencing_runtime::Fence;
use std::sync::Arc;
use std::time::Instant;

/// Shared by the HTTP handlers (cheap to clone).
#[derive(Clone)]
pub struct StorageService {
    engine: Arc<dyn Engine>,
    metrics: Arc<StorageMetrics>,
}

/// An admitted or refused write, with the flapping state of its resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    pub outcome: WriteOutcome,
    pub flapping: bool,
}

impl StorageService {
    pub fn new(engine: Arc<dyn Engine>, metrics: Arc<StorageMetrics>) -> StorageService {
        if let Some(bytes) = engine.stored_bytes() {
            metrics.set_stored_bytes(bytes);
        }
        StorageService { engine, metrics }
    }

    /// Writes through the engine and records the outcome.
    pub async fn write(&self, req: ValidWrite) -> Result<Recorded, StorageError> {
        let start = Instant::now();
        let resource = req.resource_id.clone();
        let presented = req.token;
        let outcome = match self.engine.write(req).await {
            Ok(outcome) => outcome,
            Err(e) => {
                match &e {
                    StorageError::QuotaExceeded { used, quota } => {
                        self.metrics.space_refused("quota");
                        tracing::warn!(resource = ?resource, used, quota, "write refused: the store's quota is reached");
                    }
                    StorageError::NoSpace(why) => {
                        self.metrics.space_refused("disk_full");
                        tracing::warn!(resource = ?resource, why, "write refused: no space");
                    }
                    _ => {}
                }
                return Err(e);
            }
        };
        self.metrics.observe_latency(start.elapsed());
        if let Some(bytes) = self.engine.stored_bytes() {
            self.metrics.set_stored_bytes(bytes);
        }
        let flapping = match &outcome {
            WriteOutcome::Admitted { high_water, new_term, .. } => {
                self.metrics.admitted(&resource, *high_water, *new_term)
            }
            WriteOutcome::Rejected { rejection, fence } => {
                let reason = rejection.reason();
                self.metrics.rejected(reason);
                let high_water = fence.as_ref().map_or(0, |f| f.high_water);
                tracing::warn!(resource = ?resource, presented, high_water, reason, "write rejected by the fence");
                self.metrics.is_flapping(&resource)
            }
            WriteOutcome::ProofRefused { rejection, fence } => {
                let reason = rejection.reason();
                self.metrics.rejected(reason);
                let high_water = fence.as_ref().map_or(0, |f| f.high_water);
                tracing::warn!(resource = ?resource, presented, high_water, reason, "write refused: its proof does not show the lock service granted the token");
                self.metrics.is_flapping(&resource)
            }
            WriteOutcome::TooFarAhead { max_advance, fence } => {
                self.metrics.rejected("token_too_far_ahead");
                let high_water = fence.as_ref().map_or(0, |f| f.high_water);
                tracing::warn!(resource = ?resource, presented, high_water, max_advance, "write refused: token too far ahead of the high-water mark");
                self.metrics.is_flapping(&resource)
            }
            WriteOutcome::GuardFailed { failure, fence } => {
                let reason = failure.reason();
                self.metrics.guard_failed(reason);
                let high_water = fence.as_ref().map_or(0, |f| f.high_water);
                tracing::error!(resource = ?resource, presented, high_water, reason, error = %failure, "write refused: guard failed");
                self.metrics.is_flapping(&resource)
            }
        };
        Ok(Recorded { outcome, flapping })
    }

    /// Reads an object and the fence.
    pub async fn read(&self, resource_id: &str, file_path: &str) -> Result<ReadResult, StorageError> {
        self.engine.read(resource_id, file_path).await
    }

    /// An operator's reset of one fence (see [`Engine::reset_fence`]); the
    /// fence it replaced. The operator route records and logs it
    /// (`http/admin.rs`), with who asked.
    pub async fn reset_fence(
        &self,
        resource_id: &str,
        to: Option<Fence>,
        reason: &str,
    ) -> Result<Option<Fence>, StorageError> {
        self.engine.reset_fence(resource_id, to, reason).await
    }

    /// The fence and whether the resource is flapping.
    pub async fn fence(&self, resource_id: &str) -> Result<(Option<Fence>, bool), StorageError> {
        let fence = self.engine.fence(resource_id).await?;
        Ok((fence, self.metrics.is_flapping(resource_id)))
    }
}
