//! HTTP clients of the `fencing` services (used by the CLI, tests and benches).
//!
//! - [`storage`]: the storage API client.
//! - [`locks`]: the lock API client and [`locks::HeldLock`], which keeps a
//!   lease alive and hands out its fencing token only while it is held.
//!
//! Both clients can carry a bearer token (`with_auth`) for a server started
//! with `--auth-token-file`; it is sent on mutating requests only, which are
//! the only ones such a server checks.

pub mod locks;
pub mod storage;

use std::sync::Arc;

/// Adds `Authorization: Bearer <token>` when a token is configured.
fn authorize(req: reqwest::RequestBuilder, token: Option<&Arc<str>>) -> reqwest::RequestBuilder {
    match token {
        Some(t) => req.bearer_auth(t),
        None => req,
    }
}
