//! Readers of one object share one copy of it.
//!
//! An object is read out of redb into memory once and answered from there
//! (streamed to the socket a chunk at a time, `http/storage.rs`). Without
//! sharing, every connection reading a 64 MiB object would hold its own
//! 64 MiB for as long as its client takes to read, so a few slow readers
//! could pin gigabytes. Here concurrent readers of the same object, as of the
//! same commit, hold one copy between them; the cache keeps only weak
//! references, so a copy lives exactly as long as some reader streams it.
//!
//! Invariants:
//! - an entry is an object and its resource's fence as one read transaction
//!   saw them; every commit that changes a resource (a write, a reset)
//!   removes that resource's entries before it is acknowledged;
//! - a reader inserts what it read only if no commit happened since before
//!   its read transaction began (`generation`), so a copy read before a
//!   commit is never handed to a reader that came after it.

use bytes::Bytes;
use fencing_runtime::Fence;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::Notify;
use tokio::sync::futures::OwnedNotified;

/// One object's place in the cache.
enum Entry {
    /// Shared by the readers that hold it, with the fence it was read with.
    Ready(Weak<Vec<u8>>, Option<Fence>),
    /// One reader is reading it; the others wait for its copy.
    Loading(Arc<Notify>),
}

/// Objects being read, by resource and path.
#[derive(Default)]
pub(super) struct ReadCache {
    entries: Mutex<ReadEntries>,
}

/// The entries and the commit generation they were read at, under the cache's mutex.
#[derive(Default)]
struct ReadEntries {
    /// Commits seen; a read that began at another generation is not shared.
    generation: u64,
    entries: HashMap<String, HashMap<String, Entry>>,
    /// Loads since the last sweep of entries no reader holds any more.
    loads: usize,
}

/// Loads between two sweeps of dead entries, so the map stays the size of what is being read.
const SWEEP_EVERY: usize = 1024;

impl ReadEntries {
    fn sweep(&mut self) {
        self.loads = 0;
        self.entries.retain(|_, paths| {
            paths.retain(|_, entry| match entry {
                Entry::Ready(weak, _) => weak.strong_count() > 0,
                Entry::Loading(_) => true,
            });
            !paths.is_empty()
        });
    }
}

/// What a lookup found.
pub(super) enum Lookup {
    /// The object (and fence) another reader holds.
    Shared(Bytes, Option<Fence>),
    /// Another reader is reading it: wait, then look again.
    Wait(OwnedNotified),
    /// Read it, then [`Load::finish`] (dropping the `Load` unfinished lets waiters go).
    Load(Load),
}

/// The one read of an object that others wait for.
pub(super) struct Load {
    cache: Arc<ReadCache>,
    resource: String,
    path: String,
    generation: u64,
    notify: Arc<Notify>,
    finished: bool,
}

impl ReadCache {
    pub(super) fn lookup(self: &Arc<Self>, resource: &str, path: &str) -> Lookup {
        let mut read = self.entries.lock().expect("read cache");
        let generation = read.generation;
        read.loads += 1;
        if read.loads >= SWEEP_EVERY {
            read.sweep();
        }
        let paths = read.entries.entry(resource.to_owned()).or_default();
        match paths.get(path) {
            Some(Entry::Ready(weak, fence)) => {
                if let Some(bytes) = weak.upgrade() {
                    return Lookup::Shared(Bytes::from_owner(SharedBytes(bytes)), fence.clone());
                }
            }
            Some(Entry::Loading(notify)) => return Lookup::Wait(notify.clone().notified_owned()),
            None => {}
        }
        let notify = Arc::new(Notify::new());
        paths.insert(path.to_owned(), Entry::Loading(notify.clone()));
        Lookup::Load(Load {
            cache: self.clone(),
            resource: resource.to_owned(),
            path: path.to_owned(),
            generation,
            notify,
            finished: false,
        })
    }

    /// After a commit that changed `resources`: their entries go (waiters
    /// wake and read again), and reads in flight are not shared.
    pub(super) fn committed<'a>(&self, resources: impl IntoIterator<Item = &'a str>) {
        let mut read = self.entries.lock().expect("read cache");
        read.generation += 1;
        for resource in resources {
            if let Some(paths) = read.entries.remove(resource) {
                for entry in paths.into_values() {
                    if let Entry::Loading(notify) = entry {
                        notify.notify_waiters();
                    }
                }
            }
        }
    }
}

impl Load {
    /// Shares what was read (unless a commit came since it began) and wakes the waiters.
    pub(super) fn finish(mut self, bytes: Vec<u8>, fence: &Option<Fence>) -> Bytes {
        let bytes = Arc::new(bytes);
        let mut read = self.cache.entries.lock().expect("read cache");
        let current = read.generation == self.generation;
        if let Some(paths) = read.entries.get_mut(&self.resource)
            && matches!(paths.get(&self.path), Some(Entry::Loading(n)) if Arc::ptr_eq(n, &self.notify))
        {
            if current {
                paths.insert(self.path.clone(), Entry::Ready(Arc::downgrade(&bytes), fence.clone()));
            } else {
                paths.remove(&self.path);
            }
        }
        self.notify.notify_waiters();
        self.finished = true;
        Bytes::from_owner(SharedBytes(bytes))
    }
}

impl Drop for Load {
    /// A read that failed, found nothing, or was cancelled: waiters read for themselves.
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let mut read = self.cache.entries.lock().expect("read cache");
        if let Some(paths) = read.entries.get_mut(&self.resource)
            && matches!(paths.get(&self.path), Some(Entry::Loading(n)) if Arc::ptr_eq(n, &self.notify))
        {
            paths.remove(&self.path);
            if paths.is_empty() {
                read.entries.remove(&self.resource);
            }
        }
        self.notify.notify_waiters();
    }
}

/// The owner `Bytes` keeps alive: the shared copy.
struct SharedBytes(Arc<Vec<u8>>);

impl AsRef<[u8]> for SharedBytes {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fence(h: u64) -> Option<Fence> {
        Some(Fence { lock: "l".into(), high_water: h, sequence: None })
    }

    fn load(cache: &Arc<ReadCache>) -> Load {
        match cache.lookup("r", "/a") {
            Lookup::Load(load) => load,
            _ => panic!("expected to load"),
        }
    }

    #[test]
    fn readers_share_one_copy_until_a_commit() {
        let cache = Arc::new(ReadCache::default());
        let first = load(&cache);
        assert!(matches!(cache.lookup("r", "/a"), Lookup::Wait(_)), "a second reader waits for the first");
        let held = first.finish(vec![1, 2, 3], &fence(5));
        match cache.lookup("r", "/a") {
            Lookup::Shared(bytes, f) => {
                assert_eq!((&bytes[..], f), (&held[..], fence(5)));
                assert_eq!(bytes.as_ptr(), held.as_ptr(), "the same copy");
            }
            _ => panic!("a reader holds it"),
        }
        cache.committed(["r"]);
        assert!(matches!(cache.lookup("r", "/a"), Lookup::Load(_)), "a commit to the resource ends sharing");
    }

    #[test]
    fn a_read_that_raced_a_commit_is_not_shared_and_a_dropped_copy_is_gone() {
        let cache = Arc::new(ReadCache::default());
        let racing = load(&cache);
        cache.committed(["other"]);
        let stale = racing.finish(vec![9], &fence(1));
        let next = load(&cache); // read before a commit: not shared
        drop(stale);
        drop(next.finish(vec![9], &fence(1)));
        assert!(matches!(cache.lookup("r", "/a"), Lookup::Load(_)), "nobody holds it: nothing is kept");
    }

    #[tokio::test]
    async fn an_abandoned_read_lets_its_waiters_go() {
        let cache = Arc::new(ReadCache::default());
        let first = load(&cache);
        let Lookup::Wait(waiting) = cache.lookup("r", "/a") else { panic!("waits") };
        drop(first);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiting).await.expect("woken");
        assert!(matches!(cache.lookup("r", "/a"), Lookup::Load(_)), "the next reader reads for itself");
    }
}
