//! Grant property: every admitted write carries a token its writer was
//! granted (`forged_token_admitted`).
//!
//! A write's token is the writer's claim that the lock service granted it
//! that token for that lock. The history holds every grant a client
//! received (an acquisition recorded `ok` with its token); a client that
//! never received one cannot have learned the token from the lock service,
//! so an admitted write under it is a forged token the storage took. A token
//! learned from an acquisition whose answer was lost (recorded `info`) is
//! no exception: the client never saw it.

use super::Report;
use crate::history::{Op, OpKind, Outcome};
use std::collections::HashSet;

/// Reports every admitted write whose client holds no grant of its lock and token.
pub fn check_grants(ops: &[&Op], report: &mut Report) {
    let granted: HashSet<(&str, &str, u64)> = ops
        .iter()
        .filter(|op| op.op == OpKind::Acquire && op.outcome == Outcome::Ok)
        .filter_map(|op| Some((op.client.as_str(), lock_of(op), op.token?)))
        .collect();
    for w in ops.iter().filter(|op| op.op == OpKind::Write && op.outcome == Outcome::Ok) {
        let Some(token) = w.token else { continue };
        if !granted.contains(&(w.client.as_str(), lock_of(w), token)) {
            report.violate(
                "forged_token_admitted",
                &w.resource,
                &[w],
                format!(
                    "{} wrote with token {token} of {}, which it was never granted, and it was admitted",
                    w.client,
                    lock_of(w)
                ),
            );
        }
    }
}

fn lock_of(op: &Op) -> &str {
    op.lock.as_deref().unwrap_or(&op.resource)
}
