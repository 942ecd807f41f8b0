//! The ways a pool can share its GPUs, in the user's terms. These are what the resources' `mig`,
//! `time_slicing` and `mps` blocks read into and what import reads back to, so they carry the user's
//! choices only; what a mode means on a given cloud and GPU is worked out by `validate`.

use crate::error::{DomainError, Field, summary};

/// `migStrategy`: how the NVIDIA plugin advertises MIG instances. Mixed (the default, as in the GPU
/// operator charts we meet) names each profile, so a pod asks for the size it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MigStrategy {
    /// Every instance is advertised as `nvidia.com/gpu`.
    Single,
    /// Each instance is advertised as `nvidia.com/mig-<profile>`.
    #[default]
    Mixed,
}

impl MigStrategy {
    /// Parses `single` or `mixed` (case-insensitive).
    pub fn parse(s: &str) -> Result<MigStrategy, DomainError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "single" => Ok(MigStrategy::Single),
            "mixed" => Ok(MigStrategy::Mixed),
            _ => Err(DomainError::new(
                Field::MigStrategy,
                summary::INVALID_SHARING,
                format!("\"{s}\" is not a MIG strategy. Valid values: single, mixed."),
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            MigStrategy::Single => "single",
            MigStrategy::Mixed => "mixed",
        }
    }
}

/// GKE's `gpuSharingConfig.gpuSharingStrategy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GkeSharingStrategy {
    TimeSharing,
    Mps,
}

impl GkeSharingStrategy {
    /// Parses the label spelling (`time-sharing`, `mps`) and the API's (`TIME_SHARING`, `MPS`).
    pub fn parse(s: &str) -> Result<GkeSharingStrategy, DomainError> {
        match s.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "time-sharing" => Ok(GkeSharingStrategy::TimeSharing),
            "mps" => Ok(GkeSharingStrategy::Mps),
            _ => Err(DomainError::new(
                Field::MigGkeSharing,
                summary::INVALID_SHARING,
                format!("\"{s}\" is not a GKE sharing strategy. Valid values: time-sharing, mps."),
            )),
        }
    }

    /// The value of the `cloud.google.com/gke-gpu-sharing-strategy` node label.
    pub fn label_value(self) -> &'static str {
        match self {
            GkeSharingStrategy::TimeSharing => "time-sharing",
            GkeSharingStrategy::Mps => "mps",
        }
    }
}

/// GKE's sharing of each GPU (or each MIG partition) among `max_clients` containers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GkeSharing {
    pub strategy: GkeSharingStrategy,
    pub max_clients: u32,
}

/// How a pool shares its GPUs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum SharingMode {
    /// Whole GPUs, one per request.
    #[default]
    None,
    /// Hardware partitions of one profile on every GPU. `gke_sharing` shares each partition further and
    /// exists on GKE only.
    Mig {
        profile: String,
        strategy: MigStrategy,
        gke_sharing: Option<GkeSharing>,
    },
    /// Each GPU advertised `replicas` times, with no memory or fault isolation.
    TimeSlicing {
        replicas: u32,
        rename_by_default: bool,
        fail_requests_greater_than_one: bool,
    },
    /// Each GPU shared by `replicas` MPS clients, each capped at 1/replicas of the memory.
    /// `fail_requests_greater_than_one` is the plugin's own default for MPS (true when a config
    /// leaves it out); only device plugin v0.20.0 and later honour `false` (k8s-device-plugin
    /// v0.20.0 api/config/v1/config.go keeps an explicit value, where v0.17 to v0.19 forced true).
    Mps {
        replicas: u32,
        fail_requests_greater_than_one: bool,
    },
}

impl SharingMode {
    /// MPS as the device plugin runs it by default: a container gets at most one client.
    pub fn mps(replicas: u32) -> SharingMode {
        SharingMode::Mps {
            replicas,
            fail_requests_greater_than_one: true,
        }
    }
}
