//! The GPU models the catalog knows and their MIG profiles, as data: memory, compute capability, the
//! profiles each part can be partitioned into and which of them AKS and GKE can ask for. Profile names,
//! instance counts and compute shares follow NVIDIA's table of supported MIG profiles
//! (<https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html>); which of them
//! GKE takes as `gpuPartitionSize` follows the table of partition sizes in GKE's "Running
//! multi-instance GPUs" guide (<https://cloud.google.com/kubernetes-engine/docs/how-to/gpus-multi>),
//! which lists no 4g size on any GPU: NVIDIA's 4g profiles are AKS's (MIG4g) and the MIG manager's
//! only. B200 and GB200 are treated the same way (no 4g) until GKE's table says otherwise.
//!
//! Memory is in MiB. Where we know what `nvidia-smi` reports for a part we store that (a T4 shows 15360 MiB,
//! not 16384), because a workload that plans against the marketing figure runs out of memory;
//! `MemorySource` says which figure a model carries. MIG profile memory is the nominal size in the profile's
//! name (`1g.5gb` = 5 x 1024 MiB): the instance a workload really sees is a little smaller.

use super::AksGpuInstanceProfile::{self, Mig1g, Mig2g, Mig3g, Mig4g, Mig7g};

/// Where a model's `memory_mib` comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemorySource {
    /// What `nvidia-smi` reports on the part.
    NvidiaSmi,
    /// The marketing size x 1024 (no `nvidia-smi` figure known to us); the real figure is a little lower.
    Nominal,
}

/// One MIG profile of one GPU model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigProfile {
    /// NVIDIA's name, e.g. `1g.5gb` or `1g.5gb+me`.
    pub name: &'static str,
    /// How many instances of this profile one GPU holds when partitioned uniformly.
    pub max_instances: u32,
    /// Nominal memory of one instance (the size in the name x 1024).
    pub memory_mib: u32,
    /// Compute share as a numerator over the model's `compute_slices` (sevenths; quarters on the A30).
    pub compute_slices: u8,
    /// The AKS `gpuInstanceProfile` that yields this profile, if AKS can express it.
    pub aks: Option<AksGpuInstanceProfile>,
    /// Whether GKE accepts it as `gpuPartitionSize`.
    pub gke: bool,
}

impl MigProfile {
    /// `+me` profiles carry the GPU's media engines; no managed cloud API can ask for them.
    pub fn has_media_extensions(&self) -> bool {
        self.name.ends_with("+me")
    }
}

/// A GPU model.
#[derive(Debug, PartialEq, Eq)]
pub struct GpuModel {
    /// Our id, e.g. `A100-40GB`.
    pub id: &'static str,
    pub marketing_name: &'static str,
    pub memory_mib: u32,
    pub memory_source: MemorySource,
    /// CUDA compute capability (major, minor); MPS allows fewer clients on old parts.
    pub compute_capability: (u8, u8),
    /// The denominator of MIG compute shares (7, or 4 on the A30); 0 when the GPU has no MIG.
    pub compute_slices: u8,
    /// GKE's `acceleratorType`, where GKE offers the part.
    pub gke_accelerator: Option<&'static str>,
    /// The `nvidia.com/gpu.product` label GPU feature discovery sets, for the part's common form factor
    /// (a machine type with another form factor overrides it).
    pub gpu_product: &'static str,
    pub mig_profiles: &'static [MigProfile],
}

impl GpuModel {
    pub fn mig_capable(&self) -> bool {
        !self.mig_profiles.is_empty()
    }

    /// The profile of that name on this GPU (exact, case-insensitive).
    pub fn mig_profile(&self, name: &str) -> Option<&'static MigProfile> {
        self.mig_profiles
            .iter()
            .find(|p| p.name.eq_ignore_ascii_case(name.trim()))
    }

    /// The profiles GKE accepts as `gpuPartitionSize` on this GPU (empty when GKE does not offer it).
    pub fn gke_partition_sizes(&self) -> Vec<&'static str> {
        if self.gke_accelerator.is_none() {
            return Vec::new();
        }
        self.mig_profiles
            .iter()
            .filter(|p| p.gke)
            .map(|p| p.name)
            .collect()
    }

    /// Compute capability as `7.5`.
    pub fn compute_capability_string(&self) -> String {
        format!(
            "{}.{}",
            self.compute_capability.0, self.compute_capability.1
        )
    }
}

/// AKS gpuInstanceProfile -> the profile it creates on this GPU.
pub(crate) fn mig_profile_for_aks(
    gpu: &GpuModel,
    aks: AksGpuInstanceProfile,
) -> Option<&'static MigProfile> {
    gpu.mig_profiles.iter().find(|p| p.aks == Some(aks))
}

/// A profile's compute share as `n/d` (`1/7`, `7/7`, `2/4`).
pub fn compute_share(gpu: &GpuModel, profile: &MigProfile) -> String {
    format!("{}/{}", profile.compute_slices, gpu.compute_slices)
}

const fn p(
    name: &'static str,
    max_instances: u32,
    gb: u32,
    compute_slices: u8,
    aks: Option<AksGpuInstanceProfile>,
    gke: bool,
) -> MigProfile {
    MigProfile {
        name,
        max_instances,
        memory_mib: gb * 1024,
        compute_slices,
        aks,
        gke,
    }
}

pub(super) static T4: GpuModel = GpuModel {
    id: "T4",
    marketing_name: "NVIDIA T4",
    memory_mib: 15360,
    memory_source: MemorySource::NvidiaSmi,
    compute_capability: (7, 5),
    compute_slices: 0,
    gke_accelerator: Some("nvidia-tesla-t4"),
    gpu_product: "Tesla-T4",
    mig_profiles: &[],
};

pub(super) static A10G: GpuModel = GpuModel {
    id: "A10G",
    marketing_name: "NVIDIA A10G",
    memory_mib: 23028,
    memory_source: MemorySource::NvidiaSmi,
    compute_capability: (8, 6),
    compute_slices: 0,
    gke_accelerator: None,
    gpu_product: "NVIDIA-A10G",
    mig_profiles: &[],
};

pub(super) static L4: GpuModel = GpuModel {
    id: "L4",
    marketing_name: "NVIDIA L4",
    memory_mib: 23034,
    memory_source: MemorySource::NvidiaSmi,
    compute_capability: (8, 9),
    compute_slices: 0,
    gke_accelerator: Some("nvidia-l4"),
    gpu_product: "NVIDIA-L4",
    mig_profiles: &[],
};

pub(super) static L40S: GpuModel = GpuModel {
    id: "L40S",
    marketing_name: "NVIDIA L40S",
    memory_mib: 46068,
    memory_source: MemorySource::NvidiaSmi,
    compute_capability: (8, 9),
    compute_slices: 0,
    gke_accelerator: None,
    gpu_product: "NVIDIA-L40S",
    mig_profiles: &[],
};

pub(super) static A30: GpuModel = GpuModel {
    id: "A30-24GB",
    marketing_name: "NVIDIA A30 24GB",
    memory_mib: 24 * 1024,
    memory_source: MemorySource::Nominal,
    compute_capability: (8, 0),
    compute_slices: 4,
    gke_accelerator: None,
    gpu_product: "NVIDIA-A30",
    mig_profiles: &[
        p("1g.6gb", 4, 6, 1, None, false),
        p("1g.6gb+me", 1, 6, 1, None, false),
        p("2g.12gb", 2, 12, 2, None, false),
        p("2g.12gb+me", 1, 12, 2, None, false),
        p("4g.24gb", 1, 24, 4, None, false),
    ],
};

pub(super) static A100_40GB: GpuModel = GpuModel {
    id: "A100-40GB",
    marketing_name: "NVIDIA A100 40GB",
    memory_mib: 40960,
    memory_source: MemorySource::NvidiaSmi,
    compute_capability: (8, 0),
    compute_slices: 7,
    gke_accelerator: Some("nvidia-tesla-a100"),
    gpu_product: "NVIDIA-A100-SXM4-40GB",
    mig_profiles: &[
        p("1g.5gb", 7, 5, 1, Some(Mig1g), true),
        p("1g.5gb+me", 1, 5, 1, None, false),
        p("1g.10gb", 4, 10, 1, None, false),
        p("2g.10gb", 3, 10, 2, Some(Mig2g), true),
        p("3g.20gb", 2, 20, 3, Some(Mig3g), true),
        p("4g.20gb", 1, 20, 4, Some(Mig4g), false),
        p("7g.40gb", 1, 40, 7, Some(Mig7g), true),
    ],
};

pub(super) static A100_80GB: GpuModel = GpuModel {
    id: "A100-80GB",
    marketing_name: "NVIDIA A100 80GB",
    memory_mib: 81920,
    memory_source: MemorySource::NvidiaSmi,
    compute_capability: (8, 0),
    compute_slices: 7,
    gke_accelerator: Some("nvidia-a100-80gb"),
    gpu_product: "NVIDIA-A100-SXM4-80GB",
    mig_profiles: &[
        p("1g.10gb", 7, 10, 1, Some(Mig1g), true),
        p("1g.10gb+me", 1, 10, 1, None, false),
        p("1g.20gb", 4, 20, 1, None, false),
        p("2g.20gb", 3, 20, 2, Some(Mig2g), true),
        p("3g.40gb", 2, 40, 3, Some(Mig3g), true),
        p("4g.40gb", 1, 40, 4, Some(Mig4g), false),
        p("7g.80gb", 1, 80, 7, Some(Mig7g), true),
    ],
};

pub(super) static H100_80GB: GpuModel = GpuModel {
    id: "H100-80GB",
    marketing_name: "NVIDIA H100 80GB HBM3",
    memory_mib: 81559,
    memory_source: MemorySource::NvidiaSmi,
    compute_capability: (9, 0),
    compute_slices: 7,
    gke_accelerator: Some("nvidia-h100-80gb"),
    gpu_product: "NVIDIA-H100-80GB-HBM3",
    mig_profiles: &[
        p("1g.10gb", 7, 10, 1, Some(Mig1g), true),
        p("1g.10gb+me", 1, 10, 1, None, false),
        p("1g.20gb", 4, 20, 1, None, true),
        p("2g.20gb", 3, 20, 2, Some(Mig2g), true),
        p("3g.40gb", 2, 40, 3, Some(Mig3g), true),
        p("4g.40gb", 1, 40, 4, Some(Mig4g), false),
        p("7g.80gb", 1, 80, 7, Some(Mig7g), true),
    ],
};

pub(super) static H100_NVL: GpuModel = GpuModel {
    id: "H100-NVL-94GB",
    marketing_name: "NVIDIA H100 NVL 94GB",
    memory_mib: 94 * 1024,
    memory_source: MemorySource::Nominal,
    compute_capability: (9, 0),
    compute_slices: 7,
    gke_accelerator: None,
    gpu_product: "NVIDIA-H100-NVL",
    mig_profiles: &[
        p("1g.12gb", 7, 12, 1, Some(Mig1g), false),
        p("1g.12gb+me", 1, 12, 1, None, false),
        p("1g.24gb", 4, 24, 1, None, false),
        p("2g.24gb", 3, 24, 2, Some(Mig2g), false),
        p("3g.47gb", 2, 47, 3, Some(Mig3g), false),
        p("4g.47gb", 1, 47, 4, Some(Mig4g), false),
        p("7g.94gb", 1, 94, 7, Some(Mig7g), false),
    ],
};

pub(super) static H200: GpuModel = GpuModel {
    id: "H200-141GB",
    marketing_name: "NVIDIA H200 141GB",
    memory_mib: 143771,
    memory_source: MemorySource::NvidiaSmi,
    compute_capability: (9, 0),
    compute_slices: 7,
    gke_accelerator: Some("nvidia-h200-141gb"),
    gpu_product: "NVIDIA-H200",
    mig_profiles: &[
        p("1g.18gb", 7, 18, 1, Some(Mig1g), true),
        p("1g.18gb+me", 1, 18, 1, None, false),
        p("1g.35gb", 4, 35, 1, None, true),
        p("2g.35gb", 3, 35, 2, Some(Mig2g), true),
        p("3g.71gb", 2, 71, 3, Some(Mig3g), true),
        p("4g.71gb", 1, 71, 4, Some(Mig4g), false),
        p("7g.141gb", 1, 141, 7, Some(Mig7g), true),
    ],
};

pub(super) static B200: GpuModel = GpuModel {
    id: "B200",
    marketing_name: "NVIDIA B200",
    memory_mib: 180 * 1024,
    memory_source: MemorySource::Nominal,
    compute_capability: (10, 0),
    compute_slices: 7,
    gke_accelerator: Some("nvidia-b200"),
    gpu_product: "NVIDIA-B200",
    mig_profiles: &[
        p("1g.23gb", 7, 23, 1, None, true),
        p("1g.23gb+me", 1, 23, 1, None, false),
        p("1g.45gb", 4, 45, 1, None, true),
        p("2g.45gb", 3, 45, 2, None, true),
        p("3g.90gb", 2, 90, 3, None, true),
        p("4g.90gb", 1, 90, 4, None, false),
        p("7g.180gb", 1, 180, 7, None, true),
    ],
};

pub(super) static GB200: GpuModel = GpuModel {
    id: "GB200",
    marketing_name: "NVIDIA GB200",
    memory_mib: 186 * 1024,
    memory_source: MemorySource::Nominal,
    compute_capability: (10, 0),
    compute_slices: 7,
    gke_accelerator: Some("nvidia-gb200"),
    gpu_product: "NVIDIA-GB200",
    mig_profiles: &[
        p("1g.23gb", 7, 23, 1, None, true),
        p("1g.47gb", 4, 47, 1, None, true),
        p("2g.47gb", 3, 47, 2, None, true),
        p("3g.93gb", 2, 93, 3, None, true),
        p("4g.93gb", 1, 93, 4, None, false),
        p("7g.186gb", 1, 186, 7, None, true),
    ],
};

pub(super) static GPUS: [&GpuModel; 12] = [
    &T4, &A10G, &L4, &L40S, &A30, &A100_40GB, &A100_80GB, &H100_80GB, &H100_NVL, &H200, &B200,
    &GB200,
];
