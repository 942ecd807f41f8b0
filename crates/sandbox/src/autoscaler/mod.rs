//! The twin's cluster-autoscalers: pods that no node can take make an autoscaled pool grow, up to
//! its maximum, by the nodes the cloud's real autoscaler would add, judged from what that
//! autoscaler reads before a node exists (the Auto Scaling group's or scale set's node-template
//! tags, GKE's own view of the pool's GPU sharing). The cloud world's pool then has more nodes, and
//! the usual hand-off (`nodes.rs`) makes their Node objects. Scale-down is not modelled: nothing
//! here removes a node.
//!
//! `template.rs` holds each cloud's rules for a new node, `estimate.rs` packs pods onto nodes,
//! `run.rs` reads the pools, grows them and records why (`log.rs`). This file only re-exports.

mod estimate;
pub(crate) mod log;
mod run;
mod template;

pub(crate) use estimate::{refusal, take};
pub(crate) use run::run;
