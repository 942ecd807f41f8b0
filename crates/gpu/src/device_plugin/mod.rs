//! The NVIDIA device plugin's config document (api/config/v1), as the plugin reads it.
//!
//! We model only what decides how a node advertises and hands out its GPUs: `flags.migStrategy`,
//! `flags.plugin.sharedDevicesAllocationPolicy` and `sharing` (timeSlicing or mps). Everything else the plugin reads (other flags, `resources`, `imex`) is ignored
//! here, as the plugin ignores keys it does not know; a resource entry's `rename` and `devices` are accepted
//! and dropped because current plugins ignore them too.
//!
//! Parsing normalises to the meaning the plugin gives a document, so a hand-written config with another key
//! order, flow style or comments compares equal to ours: resource names get the plugin's `nvidia.com/`
//! prefix, a missing `failRequestsGreaterThanOne` is false for time-slicing and true for MPS (the plugin
//! forces it for MPS unless set). Rendering is ours, not a serializer's, so the text is fixed: the same
//! model always gives the same bytes, and the provider can compare a deployed config by text or by model.
//!
//! The empty document is a real config: the GPU operator's chart writes `""` for the "all" (no sharing)
//! key. It means version v1, no sharing (each GPU advertised once), and `migStrategy` left to the plugin's
//! command line, which the operator fills from ClusterPolicy `spec.mig.strategy`. It parses to
//! `DevicePluginConfig::default()`, and that model renders back to the empty string.
//!
//! - `model`: the document as types.
//! - `rules`: what the plugin refuses, checked on our model and on parsed text alike.
//! - `render`: the model as the fixed text we write.
//! - `parse`: text anyone wrote, back to the model.
//! - `releases`: what a plugin release reads of a config and what it passes over.

mod model;
mod parse;
#[cfg(test)]
mod properties;
pub mod releases;
mod render;
mod rules;
#[cfg(test)]
mod tests;

use model::CONFIG_VERSION;
pub use model::{
    AllocationPolicy, DevicePluginConfig, GPU_RESOURCE, MigStrategyFlag, ReplicatedResource,
    Sharing, SharingKind,
};
pub use parse::parse;
