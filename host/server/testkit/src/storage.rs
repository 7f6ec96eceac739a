//! Engine conformance checks shared by every backend's tests.
//!
//! Each check uses its own resource ids (prefixed by the caller), so checks
//! can run against one engine instance in any order.

use fencing_runtime::{Fence, Rejection};
use fencing_store::{Engine, Mutation, StorageError, ValidWrite, WriteOutcome, WriteRequest};
use std::sync::Arc;

/// A write as a client asks for it, not yet validated.
pub fn raw(resource: &str, token: u64, path: &str, mutation: Mutation, bytes: &[u8]) -> WriteRequest {
    WriteRequest {
        resource_id: resource.to_owned(),
        lock_id: resource.to_owned(),
        token,
        sequence: None,
        file_path: path.to_owned(),
        mutation,
        bytes: bytes.to_vec(),
        proof: None,
    }
}

/// A valid write, as an engine takes it.
pub fn req(resource: &str, token: u64, path: &str, mutation: Mutation, bytes: &[u8]) -> ValidWrite {
    raw(resource, token, path, mutation, bytes).validate().expect("a valid test write")
}

fn admitted(out: &WriteOutcome) -> bool {
    matches!(out, WriteOutcome::Admitted { .. })
}

/// Runs every check against `engine`.
pub async fn run_all(engine: Arc<dyn Engine>, prefix: &str) {
    gc_pause_story(engine.as_ref(), &format!("{prefix}gc")).await;
    mutations(engine.as_ref(), &format!("{prefix}mut")).await;
    wrong_lock_and_invalid(engine.as_ref(), &format!("{prefix}lock")).await;
    too_large_changes_nothing(engine.as_ref(), &format!("{prefix}big")).await;
    bad_names(engine.as_ref()).await;
    concurrent_admissions_are_monotonic(engine.clone(), &format!("{prefix}race")).await;
    reset_replaces_the_fence(engine.as_ref(), &format!("{prefix}reset")).await;
}

/// An operator's reset: a bricked resource (mark at 2^63-1, the most every
/// engine stores) written again after its fence is removed; a re-bind to
/// another lock at a chosen mark; the data itself untouched.
pub async fn reset_replaces_the_fence(engine: &dyn Engine, r: &str) {
    let top = i64::MAX as u64;
    assert!(admitted(&engine.write(req(r, top, "/f", Mutation::Put, b"runaway")).await.unwrap()));
    assert!(!admitted(&engine.write(req(r, 5, "/f", Mutation::Put, b"real")).await.unwrap()));
    let before = engine.reset_fence(r, None, "test: runaway token").await.unwrap();
    assert_eq!(before.map(|f| f.high_water), Some(top));
    assert_eq!(engine.fence(r).await.unwrap(), None);
    assert_eq!(engine.read(r, "/f").await.unwrap().bytes.as_deref(), Some(&b"runaway"[..]), "data untouched");
    assert!(admitted(&engine.write(req(r, 5, "/f", Mutation::Put, b"real")).await.unwrap()));
    let to = Fence { lock: "other-lock".into(), high_water: 20, sequence: None };
    let before = engine.reset_fence(r, Some(to.clone()), "test: re-bind").await.unwrap();
    assert_eq!(before.map(|f| (f.lock, f.high_water)), Some((r.to_owned(), 5)));
    assert_eq!(engine.fence(r).await.unwrap(), Some(to));
    let mut w = raw(r, 21, "/f", Mutation::Put, b"rebound");
    w.lock_id = "other-lock".into();
    assert!(admitted(&engine.write(w.validate().unwrap()).await.unwrap()));
    assert!(!admitted(&engine.write(req(r, 30, "/f", Mutation::Put, b"old lock")).await.unwrap()));
}

/// The GC-pause scenario: A holds 33, B writes with 34, A's late write with 33 is refused; data is B's.
pub async fn gc_pause_story(engine: &dyn Engine, r: &str) {
    let path = "/uploads/orders-2026-05.csv";
    assert!(admitted(&engine.write(req(r, 33, path, Mutation::Put, b"A-early")).await.unwrap()));
    let b = engine.write(req(r, 34, path, Mutation::Put, b"B")).await.unwrap();
    assert_eq!(b, WriteOutcome::Admitted { high_water: 34, sequence: None, new_term: true });
    let a = engine.write(req(r, 33, path, Mutation::Put, b"A-late")).await.unwrap();
    match a {
        WriteOutcome::Rejected { rejection: Rejection::StaleToken { presented: 33, high_water: 34 }, fence } => {
            assert_eq!(fence.unwrap().high_water, 34)
        }
        other => panic!("expected stale_token, got {other:?}"),
    }
    let read = engine.read(r, path).await.unwrap();
    assert_eq!(read.bytes.as_deref(), Some(&b"B"[..]));
    assert_eq!(read.fence.unwrap().high_water, 34);
    assert_eq!(engine.fence(r).await.unwrap().unwrap().high_water, 34);
}

pub async fn mutations(engine: &dyn Engine, r: &str) {
    let p = "/log.csv";
    engine.write(req(r, 1, p, Mutation::Append, b"a,")).await.unwrap();
    engine.write(req(r, 1, p, Mutation::Append, b"b,")).await.unwrap();
    engine.write(req(r, 2, p, Mutation::Append, b"c")).await.unwrap();
    assert_eq!(engine.read(r, p).await.unwrap().bytes.as_deref(), Some(&b"a,b,c"[..]));
    // A rejected delete leaves the object.
    let stale = engine.write(req(r, 1, p, Mutation::Delete, b"")).await.unwrap();
    assert!(matches!(stale, WriteOutcome::Rejected { .. }), "{stale:?}");
    assert!(engine.read(r, p).await.unwrap().bytes.is_some());
    assert!(admitted(&engine.write(req(r, 3, p, Mutation::Delete, b"")).await.unwrap()));
    let read = engine.read(r, p).await.unwrap();
    assert_eq!(read.bytes, None);
    assert_eq!(read.fence.unwrap().high_water, 3, "a delete still advances the fence");
    assert_eq!(engine.read(r, "/never").await.unwrap().bytes, None);
    assert_eq!(engine.fence(&format!("{r}-none")).await.unwrap(), None);
}

pub async fn wrong_lock_and_invalid(engine: &dyn Engine, r: &str) {
    assert!(admitted(&engine.write(req(r, 5, "/f", Mutation::Put, b"x")).await.unwrap()));
    let mut other = raw(r, 99, "/f", Mutation::Put, b"y");
    other.lock_id = "some-other-lock".into();
    let other = other.validate().unwrap();
    let out = engine.write(other).await.unwrap();
    assert!(matches!(out, WriteOutcome::Rejected { rejection: Rejection::WrongLock, .. }), "{out:?}");
    let zero = engine.write(req(r, 0, "/f", Mutation::Put, b"z")).await.unwrap();
    assert!(matches!(zero, WriteOutcome::Rejected { rejection: Rejection::InvalidToken, .. }), "{zero:?}");
    assert_eq!(engine.read(r, "/f").await.unwrap().bytes.as_deref(), Some(&b"x"[..]));
    assert_eq!(engine.fence(r).await.unwrap().unwrap().high_water, 5);
}

pub async fn too_large_changes_nothing(engine: &dyn Engine, r: &str) {
    let limit = fencing_store::MAX_OBJECT_BYTES;
    let half = vec![7u8; limit / 2 + 1];
    assert!(admitted(&engine.write(req(r, 1, "/big", Mutation::Put, &half)).await.unwrap()));
    let err = engine.write(req(r, 2, "/big", Mutation::Append, &half)).await.unwrap_err();
    assert!(matches!(err, StorageError::TooLarge { .. }), "{err:?}");
    assert_eq!(engine.fence(r).await.unwrap().unwrap().high_water, 1, "a failed write must not advance the fence");
    assert_eq!(engine.read(r, "/big").await.unwrap().bytes.unwrap().len(), half.len());
}

/// Bad names never become a [`ValidWrite`], so no engine sees them; reads
/// and fence lookups with bad names are refused by the engine itself.
pub async fn bad_names(engine: &dyn Engine) {
    for path in ["../etc/passwd", "a\0b", "", "/a//b"] {
        let err = raw("names", 1, path, Mutation::Put, b"x").validate().unwrap_err();
        assert!(matches!(err, StorageError::InvalidField { field: "file_path", .. }), "{path:?}: {err:?}");
        let err = engine.read("names", path).await.unwrap_err();
        assert!(matches!(err, StorageError::InvalidField { field: "file_path", .. }), "{path:?}: {err:?}");
    }
    let err = raw("", 1, "/ok", Mutation::Put, b"x").validate().unwrap_err();
    assert!(matches!(err, StorageError::InvalidField { field: "resource_id", .. }), "{err:?}");
    let err = engine.fence("").await.unwrap_err();
    assert!(matches!(err, StorageError::InvalidField { field: "resource_id", .. }), "{err:?}");
    assert_eq!(engine.fence("names").await.unwrap(), None);
}

/// Many concurrent writers with random tokens on one resource. Every admitted
/// write appends its token to a log; the log must be non-decreasing (no
/// admitted token below an earlier admitted one) and hold exactly the admitted tokens.
pub async fn concurrent_admissions_are_monotonic(engine: Arc<dyn Engine>, r: &str) {
    let mut tasks = Vec::new();
    for i in 0..64u64 {
        let engine = engine.clone();
        let r = r.to_owned();
        tasks.push(tokio::spawn(async move {
            let mut admitted = Vec::new();
            for j in 0..8u64 {
                let token = 1 + (i * 7919 + j * 104_729) % 50;
                let out = engine.write(req(&r, token, "/log", Mutation::Append, &token.to_be_bytes())).await.unwrap();
                if let WriteOutcome::Admitted { high_water, .. } = out {
                    assert_eq!(high_water, token);
                    admitted.push(token);
                }
            }
            admitted
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let log = engine.read(r, "/log").await.unwrap();
    let tokens: Vec<u64> =
        log.bytes.unwrap().chunks_exact(8).map(|c| u64::from_be_bytes(c.try_into().unwrap())).collect();
    assert!(tokens.windows(2).all(|w| w[0] <= w[1]), "admitted tokens went backwards: {tokens:?}");
    let mut sorted = all.clone();
    sorted.sort_unstable();
    assert_eq!(tokens, sorted, "log must hold exactly the acknowledged admissions");
    assert_eq!(log.fence.unwrap().high_water, *tokens.last().unwrap());
}
