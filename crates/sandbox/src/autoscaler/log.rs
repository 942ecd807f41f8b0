//! What the twin's cluster-autoscaler decided and why, kept with the world (and its state file) so
//! that tests and the demo can read it at `GET /_sandbox/autoscaler`. The records follow upstream's
//! events on pods (kubernetes/autoscaler cluster-autoscaler/FAQ.md, "What events are emitted by
//! CA?"): `TriggeredScaleUp` "pod triggered scale-up, group: ..., sizes (current/new): 3/4", and
//! `NotTriggerScaleUp` "pod didn't trigger scale-up" with each group's reason.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The records kept (oldest dropped first).
const KEEP: usize = 500;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Decision {
    /// ms since the epoch
    pub(crate) at: u64,
    pub(crate) cloud: String,
    pub(crate) cluster: String,
    /// TriggeredScaleUp | NotTriggerScaleUp
    pub(crate) reason: String,
    /// The pool that grew (TriggeredScaleUp).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) pool: Option<String>,
    /// Nodes before and after (TriggeredScaleUp).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) sizes: Option<(u32, u32)>,
    pub(crate) pods: Vec<String>,
    pub(crate) message: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Log {
    pub(crate) decisions: Vec<Decision>,
    /// The last message per pod or pool, so that a run that decides the same as the last one
    /// records nothing new.
    #[serde(default)]
    last: BTreeMap<String, String>,
}

impl Log {
    /// Records a decision unless it repeats the last one about the same subject. Returns whether
    /// it was recorded.
    pub(crate) fn record(&mut self, subject: String, d: Decision) -> bool {
        if self.last.get(&subject) == Some(&d.message) {
            return false;
        }
        self.last.insert(subject, d.message.clone());
        self.decisions.push(d);
        if self.decisions.len() > KEEP {
            let extra = self.decisions.len() - KEEP;
            self.decisions.drain(..extra);
        }
        true
    }
}
