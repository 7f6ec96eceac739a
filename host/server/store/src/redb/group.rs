//! Who commits the embedded store's queued work: group commit with an
//! inline leader.
//!
//! A writer that finds nobody committing and nothing queued commits its own
//! write on its own thread (inside `block_in_place`, so the runtime moves its
//! other tasks elsewhere meanwhile). A lone writer so pays for no thread
//! hand-off in either direction; waking a parked thread costs tens of
//! microseconds on a virtual machine, a large share of an `fdatasync`.
//! Otherwise the writer queues its task and waits for its answer, and the
//! background thread leads: it takes the queue in arrival order, a unit
//! (a batch of writes, or one reset) at a time, and does the chores
//! (checkpoints, reopening a closed store) between units.
//!
//! Invariants:
//! - at most one leader at a time ([`Leader`]), so units are committed one
//!   after another in the order their tasks were queued; the work's mutex
//!   is taken by that leader, and otherwise only between units by a reader
//!   ([`Group::between_units`]), which commits no unit;
//! - a writer commits inline only when nothing is queued and no chore is
//!   pending, so it never overtakes a task queued before it;
//! - a queued task is never stranded: a writer that queues while nobody
//!   leads makes the background thread the leader and wakes it, and a leader
//!   gives up the lead only under the queue lock with the queue empty;
//! - an inline leader commits only its own task: what was queued meanwhile,
//!   and any chore that came due, it hands to the background thread, so no
//!   writer's answer waits for other writers' work.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// What the leader commits.
pub(super) trait BatchCommit: Send + 'static {
    type Task: Send + 'static;
    /// Takes the next unit off the front of a non-empty queue.
    fn take(queue: &mut VecDeque<Self::Task>) -> Vec<Self::Task>;
    /// Commits one unit and answers each of its tasks.
    fn commit(&mut self, unit: Vec<Self::Task>);
    /// Whether a chore is due now.
    fn chores_due(&self) -> bool;
    /// Does the chores that are due; how long until they should be looked
    /// at again if no task arrives (`None`: not until one does).
    fn chores(&mut self) -> Option<Duration>;
}

/// Who holds the lead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Leader {
    Nobody,
    /// A writer, committing its own task on its own thread.
    Inline,
    /// The background thread, handed the lead and woken.
    Background,
}

struct Queue<T> {
    tasks: VecDeque<T>,
    leader: Leader,
    closed: bool,
}

/// The queue, the work, and the background thread's wake-up.
pub(super) struct Group<W: BatchCommit> {
    queue: Mutex<Queue<W::Task>>,
    wake: Condvar,
    work: Mutex<W>,
}

impl<W: BatchCommit> Group<W> {
    /// Starts the background thread (named `name`) over `work`.
    pub(super) fn start(name: &str, work: W) -> std::io::Result<(Arc<Group<W>>, std::thread::JoinHandle<()>)> {
        let group = Arc::new(Group {
            queue: Mutex::new(Queue { tasks: VecDeque::new(), leader: Leader::Nobody, closed: false }),
            wake: Condvar::new(),
            work: Mutex::new(work),
        });
        let background = group.clone();
        let handle = std::thread::Builder::new().name(name.into()).spawn(move || background.background())?;
        Ok((group, handle))
    }

    fn queue(&self) -> MutexGuard<'_, Queue<W::Task>> {
        self.queue.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn work(&self) -> MutexGuard<'_, W> {
        self.work.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs `f` on the work between two units, on this thread: for a
    /// reader that needs what the leader left pending settled first. It
    /// waits for the unit being committed, if any, and runs none itself.
    pub(super) fn between_units<R>(&self, f: impl FnOnce(&mut W) -> R) -> R {
        f(&mut self.work())
    }

    /// Commits `task` on this thread if nobody is committing and this is a
    /// worker of a multi-threaded runtime (or no runtime's thread at all);
    /// queues it for the leader otherwise. Gives the task back once closed.
    pub(super) fn submit(&self, task: W::Task) -> Result<(), W::Task> {
        let mut q = self.queue();
        if q.closed {
            return Err(task);
        }
        if q.leader == Leader::Nobody && q.tasks.is_empty() && may_block() {
            q.leader = Leader::Inline;
            drop(q);
            let run = || {
                // Should the commit panic, the lead still passes on.
                let mut hand_off = HandOff { group: self, due: true };
                let mut work = self.work();
                work.commit(vec![task]);
                hand_off.due = work.chores_due();
            };
            match tokio::runtime::Handle::try_current() {
                Ok(_) => tokio::task::block_in_place(run),
                Err(_) => run(),
            }
            return Ok(());
        }
        q.tasks.push_back(task);
        if q.leader == Leader::Nobody {
            q.leader = Leader::Background;
            self.wake.notify_one();
        }
        Ok(())
    }

    /// Refuses new tasks; the background thread commits what is queued and exits.
    pub(super) fn close(&self) {
        self.queue().closed = true;
        self.wake.notify_one();
    }

    fn background(&self) {
        let mut q = self.queue();
        let mut timeout = None;
        loop {
            if q.leader == Leader::Background {
                let unit = (!q.tasks.is_empty()).then(|| W::take(&mut q.tasks));
                drop(q);
                let mut work = self.work();
                if let Some(unit) = unit {
                    work.commit(unit);
                }
                timeout = work.chores();
                drop(work);
                q = self.queue();
                if !q.tasks.is_empty() {
                    continue;
                }
                q.leader = Leader::Nobody;
            }
            if q.closed && q.tasks.is_empty() && q.leader == Leader::Nobody {
                return;
            }
            match timeout {
                None => q = self.wake.wait(q).unwrap_or_else(|poisoned| poisoned.into_inner()),
                Some(after) => {
                    let (guard, waited) =
                        self.wake.wait_timeout(q, after).unwrap_or_else(|poisoned| poisoned.into_inner());
                    q = guard;
                    if waited.timed_out() && q.leader == Leader::Nobody {
                        // The chores fall due with nothing queued: lead to do them.
                        q.leader = Leader::Background;
                    }
                }
            }
            if q.closed && q.leader == Leader::Nobody {
                q.leader = Leader::Background;
            }
        }
    }
}

/// Ends an inline leader's turn, when its commit returns or unwinds: the
/// lead goes back to nobody, or to the background thread if anything was
/// queued meanwhile or a chore is due.
struct HandOff<'a, W: BatchCommit> {
    group: &'a Group<W>,
    due: bool,
}

impl<W: BatchCommit> Drop for HandOff<'_, W> {
    fn drop(&mut self) {
        let mut q = self.group.queue();
        if q.tasks.is_empty() && !self.due {
            q.leader = Leader::Nobody;
        } else {
            q.leader = Leader::Background;
            self.group.wake.notify_one();
        }
    }
}

/// Whether blocking this thread on a commit is allowed: not on a
/// single-threaded runtime, whose one thread would stall everything else.
fn may_block() -> bool {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread,
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// Records which thread committed each task, in commit order.
    struct Log {
        committed: Vec<(u32, String)>,
        tx: mpsc::Sender<u32>,
    }

    impl BatchCommit for Log {
        type Task = u32;
        fn take(queue: &mut VecDeque<u32>) -> Vec<u32> {
            queue.drain(..).collect()
        }
        fn commit(&mut self, unit: Vec<u32>) {
            let thread = std::thread::current().name().unwrap_or("").to_owned();
            for t in unit {
                if t == 0 {
                    // A slow unit, so that others queue behind it.
                    std::thread::sleep(Duration::from_millis(50));
                }
                self.committed.push((t, thread.clone()));
                let _ = self.tx.send(t);
            }
        }
        fn chores_due(&self) -> bool {
            false
        }
        fn chores(&mut self) -> Option<Duration> {
            None
        }
    }

    fn group() -> (Arc<Group<Log>>, std::thread::JoinHandle<()>, mpsc::Receiver<u32>) {
        let (tx, rx) = mpsc::channel();
        let (g, h) = Group::start("bg", Log { committed: Vec::new(), tx }).unwrap();
        (g, h, rx)
    }

    #[test]
    fn a_lone_writer_commits_on_its_own_thread() {
        let (g, h, rx) = group();
        std::thread::Builder::new()
            .name("writer".into())
            .spawn({
                let g = g.clone();
                move || g.submit(7).unwrap()
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(rx.recv().unwrap(), 7);
        assert_eq!(g.work().committed, vec![(7, "writer".to_owned())]);
        g.close();
        h.join().unwrap();
    }

    #[test]
    fn tasks_queued_behind_a_leader_are_committed_in_order_by_the_background() {
        let (g, h, rx) = group();
        let slow = std::thread::spawn({
            let g = g.clone();
            move || g.submit(0).unwrap()
        });
        while g.queue().leader != Leader::Inline {
            std::thread::yield_now();
        }
        for t in 1..=5 {
            g.submit(t).unwrap();
        }
        slow.join().unwrap();
        let got: Vec<u32> = (0..6).map(|_| rx.recv_timeout(Duration::from_secs(5)).unwrap()).collect();
        assert_eq!(got, vec![0, 1, 2, 3, 4, 5], "in the order they were queued");
        assert!(
            g.work().committed[1..].iter().all(|(_, thread)| thread == "bg"),
            "the inline leader committed only its own"
        );
        g.close();
        h.join().unwrap();
        assert!(g.submit(9).is_err(), "closed");
    }

    #[test]
    fn close_commits_what_is_queued_first() {
        let (g, h, rx) = group();
        {
            let mut q = g.queue();
            q.tasks.extend([1, 2, 3]);
            q.leader = Leader::Background;
        }
        g.close();
        h.join().unwrap();
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), vec![1, 2, 3]);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_single_threaded_runtime_never_blocks_on_a_commit() {
        let (g, h, rx) = group();
        g.submit(4).unwrap();
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), 4);
        assert_eq!(g.work().committed, vec![(4, "bg".to_owned())]);
        g.close();
        h.join().unwrap();
    }
}
