//! What one request's handler gets beside the locked world: the time, the operation length, fault
//! injection's verdict, and where it records that the world changed and when an operation falls
//! due. The handle reads that record after the handler returns (to persist and arm timers), so a
//! handler never needs the handle itself.

use crate::nodes::NodeEvent;

/// The per-request context a handler gets with the locked world.
pub struct Ctx {
    pub(crate) now: u64,
    pub(crate) op_ms: u64,
    /// The next matching mutation must end Failed (fault injection).
    pub(crate) fail_operation: bool,
    pub(crate) events: Vec<NodeEvent>,
    pub(crate) mutated: bool,
    pub(crate) wake_at: Option<u64>,
    pub(crate) next_id: u64,
}

impl Ctx {
    /// Record that the world changed (persist after the request) and that an operation is due at `deadline`.
    pub(crate) fn schedule(&mut self, deadline: u64) {
        self.mutated = true;
        self.wake_at = Some(self.wake_at.map_or(deadline, |w| w.min(deadline)));
    }
    /// Asks for a look at the world at `at` (ms since the epoch), changing nothing now.
    pub(crate) fn wake(&mut self, at: u64) {
        self.wake_at = Some(self.wake_at.map_or(at, |w| w.min(at)));
    }
    pub(crate) fn mutated(&mut self) {
        self.mutated = true;
    }
    pub(crate) fn deadline(&self) -> u64 {
        self.now + self.op_ms
    }
    /// A fresh, unique id for an operation or update.
    pub(crate) fn new_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }
}
