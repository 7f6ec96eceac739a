//! The operators' audit log: every use of an operator route, recorded in
//! `admin-audit.jsonl` in the data directory, one JSON object a line.
//!
//! Invariants:
//! - an operator action is recorded *before* it is applied (`"phase":
//!   "requested"`: who, from where, when, what they asked, why) and the
//!   record is synced; an action whose record cannot be written is refused
//!   (503 `audit_unavailable`) and applies nothing, so no change is ever
//!   made that the log does not show;
//! - its outcome follows (`"done"` with the state before and after, or
//!   `"failed"` with the error), also synced before the answer;
//! - the file is created owner-only (0600) and only ever appended to;
//! - the same facts go to the server's log at WARN, every value the client
//!   chose (names, reasons) written escaped and quoted, so a reason cannot
//!   forge a log field or line.

use super::ApiError;
use axum::http::StatusCode;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// File name of the audit log inside the data directory.
pub const AUDIT_FILE: &str = "admin-audit.jsonl";

/// The audit log, shared by the operator routes.
#[derive(Clone)]
pub struct AuditLog {
    path: PathBuf,
    file: Arc<Mutex<std::fs::File>>,
}

impl AuditLog {
    /// Opens (creating, 0600) `AUDIT_FILE` in `dir` for appending.
    pub fn open(dir: &Path) -> std::io::Result<AuditLog> {
        let path = dir.join(AUDIT_FILE);
        let file = std::fs::OpenOptions::new().create(true).append(true).mode(0o600).open(&path)?;
        Ok(AuditLog { path, file: Arc::new(Mutex::new(file)) })
    }

    /// Where the log is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `record` (with the time) as one line and syncs it.
    pub async fn record(&self, mut record: serde_json::Value) -> Result<(), ApiError> {
        record["at"] = serde_json::Value::String(crate::locks::rfc3339_now());
        let mut line = serde_json::to_vec(&record).map_err(ApiError::internal)?;
        line.push(b'\n');
        let file = self.file.clone();
        let written = tokio::task::spawn_blocking(move || {
            let mut file = file.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            file.write_all(&line).and_then(|()| file.sync_data())
        })
        .await
        .map_err(ApiError::internal)?;
        written.map_err(|e| {
            tracing::error!(error = %e, path = %self.path.display(), "cannot write the operators' audit log");
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "audit_unavailable",
                format!("the operators' audit log cannot be written, so nothing was changed: {e}"),
            )
            .with_field("authorization")
        })
    }
}

/// Appends `record` (with the time) to the audit log in `dir` and syncs it,
/// creating the log (0600) if need be: for the operator's offline commands
/// (`fencing admin bump-tokens`, `recover-leases`, ...), which record
/// themselves in the same log as the routes.
pub fn append(dir: &Path, mut record: serde_json::Value) -> std::io::Result<()> {
    record["at"] = serde_json::Value::String(crate::locks::rfc3339_now());
    let mut line = serde_json::to_vec(&record).map_err(std::io::Error::other)?;
    line.push(b'\n');
    let mut file = std::fs::OpenOptions::new().create(true).append(true).mode(0o600).open(dir.join(AUDIT_FILE))?;
    file.write_all(&line)?;
    file.sync_data()
}

/// Every line of the audit log in `dir` (for tests and tools).
pub fn read(dir: &Path) -> std::io::Result<Vec<serde_json::Value>> {
    let text = std::fs::read_to_string(dir.join(AUDIT_FILE))?;
    text.lines().map(|l| serde_json::from_str(l).map_err(std::io::Error::other)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[tokio::test]
    async fn records_are_appended_synced_and_private() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::open(dir.path()).unwrap();
        log.record(serde_json::json!({"phase": "requested", "operator": "alice"})).await.unwrap();
        drop(log);
        let log = AuditLog::open(dir.path()).unwrap();
        log.record(serde_json::json!({"phase": "done", "operator": "alice"})).await.unwrap();
        let lines = read(dir.path()).unwrap();
        assert_eq!(lines.len(), 2);
        assert_eq!((&lines[0]["phase"], &lines[1]["phase"]), (&"requested".into(), &"done".into()));
        assert!(lines[1]["at"].as_str().is_some_and(|t| t.ends_with('Z')));
        let mode = std::fs::metadata(log.path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    /// A record that cannot be written is a 503 the handler returns before
    /// it applies anything.
    #[tokio::test]
    async fn a_record_that_cannot_be_written_refuses_the_action() {
        let full = std::fs::OpenOptions::new().append(true).open("/dev/full").unwrap();
        let log = AuditLog { path: "/dev/full".into(), file: Arc::new(Mutex::new(full)) };
        let e = log.record(serde_json::json!({"phase": "requested"})).await.unwrap_err();
        assert_eq!((e.status, e.code), (StatusCode::SERVICE_UNAVAILABLE, "audit_unavailable"));
        assert!(e.message.contains("nothing was changed"), "{}", e.message);
    }
}
