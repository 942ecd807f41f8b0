//! How the clouds' long-running operations finish. Every cloud answers a mutation at once and
//! finishes it later (ARM's async operations, GKE's Operations, EKS's node group states and
//! updates); the sandbox models that one way for all three: a mutation puts an entry on its cloud's
//! [`Queue`], keyed by the time it is due, and [`settle`] finishes whatever is due when a request or a
//! timer looks at the world. One mechanism keeps the three clouds' timing identical, and lets the
//! world re-arm its timers from the queues alone after a restart.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::Ctx;
use super::nodes::NodeEvent;

/// What a pending operation does to its pool, as each cloud's state machine needs to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Kind {
    Create,
    Update,
    Delete,
}

impl Kind {
    /// The operation in progress, as the clouds' conflict messages name it.
    pub(crate) fn in_progress(self) -> &'static str {
        match self {
            Kind::Create => "creating",
            Kind::Update => "updating",
            Kind::Delete => "deleting",
        }
    }
}

/// An entry of a queue: it starts with the time, in ms since the epoch, that it is due.
pub(crate) trait Due: Ord + Clone {
    fn deadline(&self) -> u64;
}

/// ARM and GKE: (deadline, operation id).
impl Due for (u64, String) {
    fn deadline(&self) -> u64 {
        self.0
    }
}

/// EKS, whose node groups carry their own state: (deadline, cluster key, node group).
impl Due for (u64, String, String) {
    fn deadline(&self) -> u64 {
        self.0
    }
}

/// Unfinished operations in deadline order, so settling looks only at what is due. Serialized as
/// the plain set it wraps, the shape state files have always had.
#[derive(Debug, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct Queue<E: Ord>(BTreeSet<E>);

impl<E: Ord> Default for Queue<E> {
    fn default() -> Self {
        Queue(BTreeSet::new())
    }
}

impl<E: Due> Queue<E> {
    /// Puts an operation on the queue and asks the world for a timer at its deadline.
    pub(crate) fn add(&mut self, ctx: &mut Ctx, entry: E) {
        ctx.schedule(entry.deadline());
        self.0.insert(entry);
    }

    /// The entries still waiting, earliest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &E> {
        self.0.iter()
    }

    fn pop_due(&mut self, now: u64) -> Option<E> {
        if self.0.first()?.deadline() > now {
            return None;
        }
        self.0.pop_first()
    }
}

/// A cloud's world as far as settling goes: its queue and what finishing one entry does.
pub(crate) trait Operations {
    type Entry: Due;

    fn queue(&mut self) -> &mut Queue<Self::Entry>;

    /// Finishes the operation of an entry that came due (succeeded, failed by fault injection, or
    /// superseded), telling `events` about pools that changed. Returns whether the world changed.
    fn finish(&mut self, entry: Self::Entry, now: u64, events: &mut Vec<NodeEvent>) -> bool;
}

/// Finishes every operation of one cloud that is due at `now`. Returns whether anything changed.
pub(crate) fn settle(ops: &mut impl Operations, now: u64, events: &mut Vec<NodeEvent>) -> bool {
    let mut changed = false;
    while let Some(entry) = ops.queue().pop_due(now) {
        changed |= ops.finish(entry, now, events);
    }
    changed
}

/// Seconds a client should wait before polling an operation due at `deadline`.
pub(crate) fn retry_after_secs(now: u64, deadline: u64) -> u64 {
    deadline.saturating_sub(now).div_ceil(1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after() {
        assert_eq!(retry_after_secs(1000, 2001), 2);
        assert_eq!(retry_after_secs(5000, 2000), 0);
    }

    #[test]
    fn only_due_entries_settle_in_deadline_order() {
        struct Log(Queue<(u64, String)>, Vec<String>);
        impl Operations for Log {
            type Entry = (u64, String);
            fn queue(&mut self) -> &mut Queue<(u64, String)> {
                &mut self.0
            }
            fn finish(&mut self, e: (u64, String), _: u64, _: &mut Vec<NodeEvent>) -> bool {
                self.1.push(e.1);
                true
            }
        }
        let mut log = Log(Queue::default(), Vec::new());
        for (d, id) in [(30, "c"), (10, "a"), (20, "b")] {
            log.0.0.insert((d, id.to_string()));
        }
        assert!(!settle(&mut log, 5, &mut Vec::new()));
        assert!(settle(&mut log, 20, &mut Vec::new()));
        assert_eq!(log.1, ["a", "b"]);
        assert_eq!(log.0.iter().count(), 1);
    }
}
