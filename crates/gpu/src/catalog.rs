//! The GPU and machine-type catalog: data from shared/reference/gpu.md plus the lookups the provider needs.
//!
//! Memory is in MiB. Where we know what `nvidia-smi` reports for a part we store that (a T4 shows 15360 MiB,
//! not 16384), because a workload that plans against the marketing figure runs out of memory;
//! `MemorySource` says which figure a model carries. MIG profile memory is the nominal size in the profile's
//! name (`1g.5gb` = 5 x 1024 MiB): the instance a workload really sees is a little smaller.

use super::error::{DomainError, Field, list, summary};
use std::fmt;

/// The three clouds whose node pools we manage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Cloud {
    Aks,
    Gke,
    Eks,
}

impl Cloud {
    pub const ALL: [Cloud; 3] = [Cloud::Aks, Cloud::Gke, Cloud::Eks];

    /// Parses the provider's spelling: `aks`, `gke` or `eks` (case-insensitive).
    pub fn parse(s: &str) -> Result<Cloud, DomainError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "aks" => Ok(Cloud::Aks),
            "gke" => Ok(Cloud::Gke),
            "eks" => Ok(Cloud::Eks),
            _ => Err(DomainError::new(
                Field::Cloud,
                summary::UNKNOWN_CLOUD,
                format!("\"{s}\" is not a cloud this provider knows. Valid values: aks, gke, eks."),
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Cloud::Aks => "aks",
            Cloud::Gke => "gke",
            Cloud::Eks => "eks",
        }
    }

    /// The name prose uses (`AKS`), for error details; `as_str` is the spelling users write.
    pub(crate) fn title(self) -> &'static str {
        match self {
            Cloud::Aks => "AKS",
            Cloud::Gke => "GKE",
            Cloud::Eks => "EKS",
        }
    }
}

impl fmt::Display for Cloud {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// AKS's `gpuInstanceProfile`: AKS names a MIG layout by its compute slices only, so the profile it means
/// depends on the GPU of the VM size (MIG1g is 1g.5gb on an A100 40GB, 1g.10gb on an A100 80GB).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AksGpuInstanceProfile {
    Mig1g,
    Mig2g,
    Mig3g,
    Mig4g,
    Mig7g,
}

impl AksGpuInstanceProfile {
    pub const ALL: [AksGpuInstanceProfile; 5] = [
        AksGpuInstanceProfile::Mig1g,
        AksGpuInstanceProfile::Mig2g,
        AksGpuInstanceProfile::Mig3g,
        AksGpuInstanceProfile::Mig4g,
        AksGpuInstanceProfile::Mig7g,
    ];

    /// The ARM API's spelling (`MIG1g`).
    pub fn as_str(self) -> &'static str {
        match self {
            AksGpuInstanceProfile::Mig1g => "MIG1g",
            AksGpuInstanceProfile::Mig2g => "MIG2g",
            AksGpuInstanceProfile::Mig3g => "MIG3g",
            AksGpuInstanceProfile::Mig4g => "MIG4g",
            AksGpuInstanceProfile::Mig7g => "MIG7g",
        }
    }

    /// Parses the ARM spelling; ARM compares enum values case-insensitively, so we do too.
    pub fn parse(s: &str) -> Option<AksGpuInstanceProfile> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(s.trim()))
    }
}

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

    pub fn mig_profile_names(&self) -> Vec<&'static str> {
        self.mig_profiles.iter().map(|p| p.name).collect()
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

/// A profile's compute share as `n/d` (`1/7`, `7/7`, `2/4`).
pub fn compute_share(gpu: &GpuModel, profile: &MigProfile) -> String {
    format!("{}/{}", profile.compute_slices, gpu.compute_slices)
}

/// AKS gpuInstanceProfile -> the profile it creates on this GPU.
pub fn mig_profile_for_aks(
    gpu: &GpuModel,
    aks: AksGpuInstanceProfile,
) -> Option<&'static MigProfile> {
    gpu.mig_profiles.iter().find(|p| p.aks == Some(aks))
}

/// MIG profile name -> the AKS gpuInstanceProfile that creates it on this GPU, if AKS can express it.
pub fn aks_profile_for(gpu: &GpuModel, profile: &str) -> Option<AksGpuInstanceProfile> {
    gpu.mig_profile(profile).and_then(|p| p.aks)
}

/// A VM size / instance type / machine type with GPUs attached.
#[derive(Debug, PartialEq, Eq)]
pub struct MachineType {
    pub cloud: Cloud,
    pub name: &'static str,
    pub gpu: &'static GpuModel,
    pub gpu_count: u32,
    /// Set when the machine's GPU form factor carries another `nvidia.com/gpu.product` than the model's.
    pub gpu_product_override: Option<&'static str>,
}

impl MachineType {
    pub fn gpu_product(&self) -> &'static str {
        self.gpu_product_override.unwrap_or(self.gpu.gpu_product)
    }
}

// --- data -------------------------------------------------------------------------------------------------

use AksGpuInstanceProfile::{Mig1g, Mig2g, Mig3g, Mig4g, Mig7g};

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

pub static T4: GpuModel = GpuModel {
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

pub static A10G: GpuModel = GpuModel {
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

pub static L4: GpuModel = GpuModel {
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

pub static L40S: GpuModel = GpuModel {
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

pub static A30: GpuModel = GpuModel {
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

pub static A100_40GB: GpuModel = GpuModel {
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
        p("4g.20gb", 1, 20, 4, Some(Mig4g), true),
        p("7g.40gb", 1, 40, 7, Some(Mig7g), true),
    ],
};

pub static A100_80GB: GpuModel = GpuModel {
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
        p("4g.40gb", 1, 40, 4, Some(Mig4g), true),
        p("7g.80gb", 1, 80, 7, Some(Mig7g), true),
    ],
};

pub static H100_80GB: GpuModel = GpuModel {
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
        p("4g.40gb", 1, 40, 4, Some(Mig4g), true),
        p("7g.80gb", 1, 80, 7, Some(Mig7g), true),
    ],
};

pub static H100_NVL: GpuModel = GpuModel {
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

pub static H200: GpuModel = GpuModel {
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
        p("4g.71gb", 1, 71, 4, Some(Mig4g), true),
        p("7g.141gb", 1, 141, 7, Some(Mig7g), true),
    ],
};

pub static B200: GpuModel = GpuModel {
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
        p("4g.90gb", 1, 90, 4, None, true),
        p("7g.180gb", 1, 180, 7, None, true),
    ],
};

pub static GB200: GpuModel = GpuModel {
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
        p("4g.93gb", 1, 93, 4, None, true),
        p("7g.186gb", 1, 186, 7, None, true),
    ],
};

static GPUS: [&GpuModel; 12] = [
    &T4, &A10G, &L4, &L40S, &A30, &A100_40GB, &A100_80GB, &H100_80GB, &H100_NVL, &H200, &B200,
    &GB200,
];

const fn m(
    cloud: Cloud,
    name: &'static str,
    gpu: &'static GpuModel,
    gpu_count: u32,
) -> MachineType {
    MachineType {
        cloud,
        name,
        gpu,
        gpu_count,
        gpu_product_override: None,
    }
}

// NC A100 v4 carries the PCIe card, whose GFD product label differs from the SXM4 module's.
const fn m_pcie_a100(name: &'static str, gpu_count: u32) -> MachineType {
    MachineType {
        cloud: Cloud::Aks,
        name,
        gpu: &A100_80GB,
        gpu_count,
        gpu_product_override: Some("NVIDIA-A100-80GB-PCIe"),
    }
}

use Cloud::{Aks, Eks, Gke};

static MACHINE_TYPES: &[MachineType] = &[
    // Azure
    m_pcie_a100("Standard_NC24ads_A100_v4", 1),
    m_pcie_a100("Standard_NC48ads_A100_v4", 2),
    m_pcie_a100("Standard_NC96ads_A100_v4", 4),
    m(Aks, "Standard_NC40ads_H100_v5", &H100_NVL, 1),
    m(Aks, "Standard_NC80adis_H100_v5", &H100_NVL, 2),
    m(Aks, "Standard_ND96asr_v4", &A100_40GB, 8),
    m(Aks, "Standard_ND96amsr_A100_v4", &A100_80GB, 8),
    m(Aks, "Standard_ND96isr_H100_v5", &H100_80GB, 8),
    m(Aks, "Standard_ND96isr_H200_v5", &H200, 8),
    m(Aks, "Standard_NC4as_T4_v3", &T4, 1),
    m(Aks, "Standard_NC8as_T4_v3", &T4, 1),
    m(Aks, "Standard_NC16as_T4_v3", &T4, 1),
    m(Aks, "Standard_NC64as_T4_v3", &T4, 4),
    // Google Cloud
    m(Gke, "a2-highgpu-1g", &A100_40GB, 1),
    m(Gke, "a2-highgpu-2g", &A100_40GB, 2),
    m(Gke, "a2-highgpu-4g", &A100_40GB, 4),
    m(Gke, "a2-highgpu-8g", &A100_40GB, 8),
    m(Gke, "a2-ultragpu-1g", &A100_80GB, 1),
    m(Gke, "a2-ultragpu-2g", &A100_80GB, 2),
    m(Gke, "a2-ultragpu-4g", &A100_80GB, 4),
    m(Gke, "a2-ultragpu-8g", &A100_80GB, 8),
    m(Gke, "a3-highgpu-8g", &H100_80GB, 8),
    m(Gke, "a3-ultragpu-8g", &H200, 8),
    m(Gke, "a4-highgpu-8g", &B200, 8),
    m(Gke, "g2-standard-4", &L4, 1),
    m(Gke, "g2-standard-8", &L4, 1),
    m(Gke, "g2-standard-12", &L4, 1),
    m(Gke, "g2-standard-16", &L4, 1),
    m(Gke, "g2-standard-24", &L4, 2),
    m(Gke, "g2-standard-32", &L4, 1),
    m(Gke, "g2-standard-48", &L4, 4),
    m(Gke, "g2-standard-96", &L4, 8),
    // AWS
    m(Eks, "p4d.24xlarge", &A100_40GB, 8),
    m(Eks, "p4de.24xlarge", &A100_80GB, 8),
    m(Eks, "p5.48xlarge", &H100_80GB, 8),
    m(Eks, "p5e.48xlarge", &H200, 8),
    m(Eks, "p5en.48xlarge", &H200, 8),
    m(Eks, "g5.xlarge", &A10G, 1),
    m(Eks, "g5.2xlarge", &A10G, 1),
    m(Eks, "g5.4xlarge", &A10G, 1),
    m(Eks, "g5.8xlarge", &A10G, 1),
    m(Eks, "g5.16xlarge", &A10G, 1),
    m(Eks, "g5.12xlarge", &A10G, 4),
    m(Eks, "g5.24xlarge", &A10G, 4),
    m(Eks, "g5.48xlarge", &A10G, 8),
    m(Eks, "g6.xlarge", &L4, 1),
    m(Eks, "g6.2xlarge", &L4, 1),
    m(Eks, "g6.4xlarge", &L4, 1),
    m(Eks, "g6.8xlarge", &L4, 1),
    m(Eks, "g6.16xlarge", &L4, 1),
    m(Eks, "g6.12xlarge", &L4, 4),
    m(Eks, "g6.24xlarge", &L4, 4),
    m(Eks, "g6.48xlarge", &L4, 8),
    m(Eks, "g6e.xlarge", &L40S, 1),
    m(Eks, "g6e.2xlarge", &L40S, 1),
    m(Eks, "g6e.4xlarge", &L40S, 1),
    m(Eks, "g6e.8xlarge", &L40S, 1),
    m(Eks, "g6e.16xlarge", &L40S, 1),
    m(Eks, "g6e.12xlarge", &L40S, 4),
    m(Eks, "g6e.24xlarge", &L40S, 4),
    m(Eks, "g6e.48xlarge", &L40S, 8),
    m(Eks, "g4dn.xlarge", &T4, 1),
    m(Eks, "g4dn.2xlarge", &T4, 1),
    m(Eks, "g4dn.4xlarge", &T4, 1),
    m(Eks, "g4dn.8xlarge", &T4, 1),
    m(Eks, "g4dn.16xlarge", &T4, 1),
    m(Eks, "g4dn.12xlarge", &T4, 4),
    m(Eks, "g4dn.metal", &T4, 8),
];

// --- lookups ----------------------------------------------------------------------------------------------

/// Every GPU model of the catalog.
pub fn all_gpu_models() -> &'static [&'static GpuModel] {
    &GPUS
}

/// Every machine type of the catalog, grouped by cloud (AKS, GKE, EKS) in catalog order.
pub fn all_machine_types() -> &'static [MachineType] {
    MACHINE_TYPES
}

/// A GPU model by our id (`A100-40GB`) or GKE accelerator name (`nvidia-tesla-a100`), case-insensitive.
pub fn gpu_model(id: &str) -> Result<&'static GpuModel, DomainError> {
    let wanted = id.trim();
    GPUS.iter()
        .copied()
        .find(|g| {
            g.id.eq_ignore_ascii_case(wanted)
                || g.gke_accelerator
                    .is_some_and(|a| a.eq_ignore_ascii_case(wanted))
        })
        .ok_or_else(|| {
            let names = GPUS
                .iter()
                .flat_map(|g| std::iter::once(g.id).chain(g.gke_accelerator));
            DomainError::new(
                Field::GpuModel,
                summary::UNKNOWN_GPU_MODEL,
                format!(
                    "\"{id}\" is not a GPU model in the catalog. Closest: {}. Valid values: {}.",
                    list(closest(wanted, names.clone(), 3)),
                    list(GPUS.iter().map(|g| g.id))
                ),
            )
        })
}

/// A machine type of one cloud by name. Matching ignores case (ARM treats VM sizes case-insensitively);
/// an unknown name is an error naming the closest known names of that cloud.
pub fn machine_type(cloud: Cloud, name: &str) -> Result<&'static MachineType, DomainError> {
    let wanted = name.trim();
    if let Some(found) = MACHINE_TYPES
        .iter()
        .find(|mt| mt.cloud == cloud && mt.name.eq_ignore_ascii_case(wanted))
    {
        return Ok(found);
    }
    let names = MACHINE_TYPES
        .iter()
        .filter(|mt| mt.cloud == cloud)
        .map(|mt| mt.name);
    let mut detail = format!(
        "\"{name}\" is not in the catalog of {} GPU machine types. Closest known names: {}.",
        cloud.title(),
        list(closest(wanted, names, 5))
    );
    if cloud == Cloud::Gke && is_gcp_n1(wanted) {
        detail.push_str(
            " n1 machine types have no GPU of their own: on a pool, attach T4s by setting gpu_model = \
             \"nvidia-tesla-t4\" and gpu_count (1, 2 or 4).",
        );
    } else if let Some(other) = Cloud::ALL.into_iter().find(|c| {
        *c != cloud
            && MACHINE_TYPES
                .iter()
                .any(|mt| mt.cloud == *c && mt.name.eq_ignore_ascii_case(wanted))
    }) {
        detail.push_str(&format!(
            " It is one of {}'s machine types.",
            other.title()
        ));
    } else {
        detail.push_str(
            " If it is a new size, set gpu_model and gpu_count on the pool to describe its GPUs.",
        );
    }
    Err(DomainError::new(
        Field::MachineType,
        summary::UNKNOWN_MACHINE_TYPE,
        detail,
    ))
}

/// GCP n1 machine types take GPUs as separately attached accelerators.
fn is_gcp_n1(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    ["n1-standard-", "n1-highmem-", "n1-highcpu-"]
        .iter()
        .any(|prefix| {
            lower
                .strip_prefix(prefix)
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
}

/// The GPUs of a pool's nodes: the catalog's answer for the machine type, or the user's override.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hardware {
    /// The machine type as the catalog spells it (or as given, for one outside the catalog).
    pub machine_type: String,
    pub gpu: &'static GpuModel,
    pub gpus_per_node: u32,
    /// The `nvidia.com/gpu.product` label the nodes will carry.
    pub gpu_product: &'static str,
}

/// Most GPUs any machine type carries today; more is a typo.
pub const MAX_GPUS_PER_NODE: u32 = 16;

/// Resolves a pool's hardware. `gpu_model` / `gpu_count` override the catalog (its counts are partly from
/// secondary tables). A machine type outside the catalog is accepted only when both are given, so a new
/// size works without a provider release while a typo without overrides still fails with suggestions.
/// GCP n1 types get T4s only as attached accelerators, so they need both overrides and the GPU must be a T4.
pub fn resolve_hardware(
    cloud: Cloud,
    machine: &str,
    gpu_model_override: Option<&str>,
    gpu_count_override: Option<u32>,
) -> Result<Hardware, Vec<DomainError>> {
    let mut errors = Vec::new();
    let model = match gpu_model_override {
        Some(id) => match gpu_model(id) {
            Ok(g) => Some(g),
            Err(e) => {
                errors.push(e);
                None
            }
        },
        None => None,
    };
    if let Some(count) = gpu_count_override
        && !(1..=MAX_GPUS_PER_NODE).contains(&count)
    {
        errors.push(DomainError::new(
            Field::GpuCount,
            summary::INVALID_GPU_COUNT,
            format!("gpu_count is {count}; a node carries 1 to {MAX_GPUS_PER_NODE} GPUs."),
        ));
    }
    if cloud == Cloud::Gke && is_gcp_n1(machine) {
        if gpu_model_override.is_none() || gpu_count_override.is_none() {
            errors.push(DomainError::new(
                Field::MachineType,
                summary::UNKNOWN_MACHINE_TYPE,
                format!(
                    "\"{machine}\" has no GPU of its own: n1 machine types get T4s as attached \
                     accelerators. Set gpu_model = \"nvidia-tesla-t4\" and gpu_count (1, 2 or 4)."
                ),
            ));
        } else if model.is_some_and(|g| g.id != T4.id) {
            errors.push(DomainError::new(
                Field::GpuModel,
                summary::UNKNOWN_GPU_MODEL,
                "n1 machine types can attach only T4s among the catalog's GPUs. Valid values: T4, \
                 nvidia-tesla-t4.",
            ));
        } else if gpu_count_override.is_some_and(|c| ![1, 2, 4].contains(&c)) {
            errors.push(DomainError::new(
                Field::GpuCount,
                summary::INVALID_GPU_COUNT,
                "An n1 machine type attaches 1, 2 or 4 T4s. Valid values: 1, 2, 4.",
            ));
        }
        return match (errors.is_empty(), model, gpu_count_override) {
            (true, Some(gpu), Some(count)) => Ok(Hardware {
                machine_type: machine.trim().to_ascii_lowercase(),
                gpu,
                gpus_per_node: count,
                gpu_product: gpu.gpu_product,
            }),
            _ => Err(errors),
        };
    }
    match machine_type(cloud, machine) {
        Ok(mt) if errors.is_empty() => Ok(Hardware {
            machine_type: mt.name.to_string(),
            gpu: model.unwrap_or(mt.gpu),
            gpus_per_node: gpu_count_override.unwrap_or(mt.gpu_count),
            gpu_product: match model {
                Some(g) if g.id != mt.gpu.id => g.gpu_product,
                _ => mt.gpu_product(),
            },
        }),
        Ok(_) => Err(errors),
        Err(unknown) => match (model, gpu_count_override) {
            (Some(gpu), Some(count)) if errors.is_empty() => Ok(Hardware {
                machine_type: machine.trim().to_string(),
                gpu,
                gpus_per_node: count,
                gpu_product: gpu.gpu_product,
            }),
            _ => {
                errors.insert(0, unknown);
                Err(errors)
            }
        },
    }
}

// --- suggestions ------------------------------------------------------------------------------------------

/// The `n` names closest to `wanted`: names that start with it first (someone typing `A100` means an
/// A100, not the A10G one edit away), then by case-insensitive edit distance, then by longer common prefix
/// (`p5.24xlarge` is nearer `p5.48xlarge` than `g6.24xlarge`).
pub(crate) fn closest<'a>(
    wanted: &str,
    names: impl IntoIterator<Item = &'a str>,
    n: usize,
) -> Vec<&'a str> {
    // Suggestions are for typos; a long input would only cost quadratic time.
    let wanted: String = wanted.to_ascii_lowercase().chars().take(64).collect();
    let mut scored: Vec<(bool, usize, usize, &str)> = names
        .into_iter()
        .map(|name| {
            let lower = name.to_ascii_lowercase();
            let common = wanted
                .chars()
                .zip(lower.chars())
                .take_while(|(a, b)| a == b)
                .count();
            let starts = wanted.len() >= 2 && lower.starts_with(&wanted);
            (
                !starts,
                edit_distance(&wanted, &lower),
                usize::MAX - common,
                name,
            )
        })
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.3 == b.3);
    scored.into_iter().take(n).map(|(.., name)| name).collect()
}

/// Levenshtein distance over chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = substitute.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

// --- docs -------------------------------------------------------------------------------------------------

/// The catalog as markdown tables (machine types, GPU models, MIG profiles), so docs are generated from the
/// data the provider validates against rather than typed by hand.
pub fn catalog_markdown() -> String {
    let mut out = String::new();
    out.push_str("## Machine types\n\n");
    out.push_str("| Cloud | Machine type | GPU | GPUs | Memory per GPU (MiB) | MIG |\n");
    out.push_str("|---|---|---|---|---|---|\n");
    for mt in MACHINE_TYPES {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            mt.cloud,
            mt.name,
            mt.gpu.id,
            mt.gpu_count,
            mt.gpu.memory_mib,
            yes_no(mt.gpu.mig_capable())
        ));
    }
    out.push_str(
        "\nGKE n1 machine types (`n1-standard-*`, `n1-highmem-*`, `n1-highcpu-*`) take 1, 2 or 4 T4s as \
         attached accelerators: set `gpu_model = \"nvidia-tesla-t4\"` and `gpu_count` on the pool.\n",
    );
    out.push_str("\n## GPU models\n\n");
    out.push_str(
        "| GPU | Name | Memory (MiB) | Memory figure | Compute capability | MIG | GKE accelerator | \
         nvidia.com/gpu.product |\n",
    );
    out.push_str("|---|---|---|---|---|---|---|---|\n");
    for g in GPUS {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            g.id,
            g.marketing_name,
            g.memory_mib,
            match g.memory_source {
                MemorySource::NvidiaSmi => "nvidia-smi",
                MemorySource::Nominal => "nominal",
            },
            g.compute_capability_string(),
            yes_no(g.mig_capable()),
            g.gke_accelerator.unwrap_or("-"),
            g.gpu_product
        ));
    }
    out.push_str("\n## MIG profiles\n\n");
    out.push_str(
        "| GPU | Profile | Instances per GPU | Memory (MiB) | Compute share | AKS gpuInstanceProfile | \
         GKE gpuPartitionSize |\n",
    );
    out.push_str("|---|---|---|---|---|---|---|\n");
    for g in GPUS.iter().filter(|g| g.mig_capable()) {
        for prof in g.mig_profiles {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} |\n",
                g.id,
                prof.name,
                prof.max_instances,
                prof.memory_mib,
                compute_share(g, prof),
                prof.aks.map_or("-", |a| a.as_str()),
                yes_no(prof.gke && g.gke_accelerator.is_some())
            ));
        }
    }
    out
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cloud_parses_its_three_names_and_rejects_others() {
        assert_eq!(Cloud::parse("AKS").unwrap(), Cloud::Aks);
        assert_eq!(Cloud::parse("gke").unwrap(), Cloud::Gke);
        assert_eq!(Cloud::parse(" eks ").unwrap(), Cloud::Eks);
        let err = Cloud::parse("azure").unwrap_err();
        assert_eq!(err.summary, "Unknown cloud");
        assert!(err.detail.contains("aks, gke, eks"), "{}", err.detail);
    }

    #[test]
    fn machine_type_lookup_finds_expanded_family_members() {
        let g5 = machine_type(Cloud::Eks, "g5.12xlarge").unwrap();
        assert_eq!((g5.gpu.id, g5.gpu_count), ("A10G", 4));
        let g5 = machine_type(Cloud::Eks, "g5.48xlarge").unwrap();
        assert_eq!(g5.gpu_count, 8);
        let g2 = machine_type(Cloud::Gke, "g2-standard-24").unwrap();
        assert_eq!((g2.gpu.id, g2.gpu_count), ("L4", 2));
        let nc = machine_type(Cloud::Aks, "standard_nc64as_t4_v3").unwrap();
        assert_eq!(
            (nc.name, nc.gpu.id, nc.gpu_count),
            ("Standard_NC64as_T4_v3", "T4", 4)
        );
        let nc = machine_type(Cloud::Aks, "Standard_NC8as_T4_v3").unwrap();
        assert_eq!(nc.gpu_count, 1);
        assert_eq!(machine_type(Cloud::Eks, "g4dn.metal").unwrap().gpu_count, 8);
    }

    #[test]
    fn unknown_machine_type_suggests_close_names_of_that_cloud() {
        let err = machine_type(Cloud::Eks, "g5.xlarg").unwrap_err();
        assert_eq!(err.summary, "Unknown machine type");
        assert_eq!(err.field, Field::MachineType);
        assert!(
            err.detail.contains("Closest known names: g5.xlarge, "),
            "{}",
            err.detail
        );
        let err = machine_type(Cloud::Eks, "p5.24xlarge").unwrap_err();
        assert!(
            err.detail
                .contains("g5.24xlarge, p5.48xlarge, p4d.24xlarge"),
            "{}",
            err.detail
        );
        let err = machine_type(Cloud::Aks, "Standard_NC24ads_A100").unwrap_err();
        assert!(
            err.detail
                .contains("Closest known names: Standard_NC24ads_A100_v4"),
            "{}",
            err.detail
        );
        // Suggestions never cross clouds, but the detail says where the name belongs.
        let err = machine_type(Cloud::Gke, "p4d.24xlarge").unwrap_err();
        assert!(!err.detail.contains("p4d.24xlarge,"), "{}", err.detail);
        assert!(
            err.detail.contains("It is one of EKS's machine types"),
            "{}",
            err.detail
        );
    }

    #[test]
    fn suggestions_are_at_most_five() {
        let err = machine_type(Cloud::Eks, "zzz").unwrap_err();
        let names = err
            .detail
            .split("Closest known names: ")
            .nth(1)
            .unwrap()
            .split('.')
            .next()
            .unwrap();
        assert!(names.split(", ").count() <= 5, "{}", err.detail);
    }

    #[test]
    fn gpu_model_lookup_accepts_ids_and_gke_names() {
        assert_eq!(gpu_model("a100-40gb").unwrap().id, "A100-40GB");
        assert_eq!(gpu_model("nvidia-tesla-a100").unwrap().id, "A100-40GB");
        assert_eq!(gpu_model("NVIDIA-A100-80GB").unwrap().id, "A100-80GB");
        assert_eq!(gpu_model("nvidia-h200-141gb").unwrap().id, "H200-141GB");
        let err = gpu_model("V100").unwrap_err();
        assert_eq!(err.summary, "Unknown GPU model");
        assert!(
            err.detail.contains("Valid values: T4, A10G"),
            "{}",
            err.detail
        );
    }

    #[test]
    fn aks_mapping_goes_both_ways_per_gpu() {
        assert_eq!(
            mig_profile_for_aks(&A100_40GB, AksGpuInstanceProfile::Mig1g)
                .unwrap()
                .name,
            "1g.5gb"
        );
        assert_eq!(
            mig_profile_for_aks(&A100_80GB, AksGpuInstanceProfile::Mig1g)
                .unwrap()
                .name,
            "1g.10gb"
        );
        assert_eq!(
            mig_profile_for_aks(&H100_NVL, AksGpuInstanceProfile::Mig7g)
                .unwrap()
                .name,
            "7g.94gb"
        );
        assert_eq!(
            aks_profile_for(&A100_40GB, "4g.20gb"),
            Some(AksGpuInstanceProfile::Mig4g)
        );
        assert_eq!(
            aks_profile_for(&A100_80GB, "3g.40gb"),
            Some(AksGpuInstanceProfile::Mig3g)
        );
        // What AKS cannot express: the 4-instance 1g profiles and +me.
        assert_eq!(aks_profile_for(&A100_80GB, "1g.20gb"), None);
        assert_eq!(aks_profile_for(&A100_40GB, "1g.10gb"), None);
        assert_eq!(aks_profile_for(&A100_40GB, "1g.5gb+me"), None);
        // A profile of another GPU has no mapping on this one.
        assert_eq!(aks_profile_for(&A100_80GB, "1g.5gb"), None);
        for gpu in [&A100_40GB, &A100_80GB, &H100_80GB, &H100_NVL, &H200] {
            for aks in AksGpuInstanceProfile::ALL {
                let prof = mig_profile_for_aks(gpu, aks).unwrap();
                assert_eq!(aks_profile_for(gpu, prof.name), Some(aks));
            }
        }
        assert_eq!(
            AksGpuInstanceProfile::parse("mig3g"),
            Some(AksGpuInstanceProfile::Mig3g)
        );
        assert_eq!(AksGpuInstanceProfile::parse("MIG5g"), None);
    }

    #[test]
    fn gke_partition_sizes_match_the_reference() {
        assert_eq!(
            A100_40GB.gke_partition_sizes(),
            ["1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"]
        );
        assert_eq!(
            A100_80GB.gke_partition_sizes(),
            ["1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]
        );
        assert_eq!(
            H100_80GB.gke_partition_sizes(),
            [
                "1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"
            ]
        );
        assert_eq!(
            H200.gke_partition_sizes(),
            [
                "1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"
            ]
        );
        assert!(H100_NVL.gke_partition_sizes().is_empty());
        assert!(T4.gke_partition_sizes().is_empty());
    }

    #[test]
    fn catalog_is_internally_consistent() {
        for g in GPUS {
            assert_eq!(g.mig_capable(), g.compute_slices > 0, "{}", g.id);
            for prof in g.mig_profiles {
                assert!(
                    prof.compute_slices <= g.compute_slices,
                    "{} {}",
                    g.id,
                    prof.name
                );
                assert!(
                    prof.memory_mib <= g.memory_mib + 1024,
                    "{} {}",
                    g.id,
                    prof.name
                );
                assert!(
                    prof.max_instances * u32::from(prof.compute_slices)
                        <= u32::from(g.compute_slices),
                    "{}",
                    prof.name
                );
                assert!(!(prof.has_media_extensions() && (prof.gke || prof.aks.is_some())));
            }
        }
        for (i, a) in MACHINE_TYPES.iter().enumerate() {
            assert!(a.gpu_count >= 1 && a.gpu_count <= MAX_GPUS_PER_NODE);
            for b in &MACHINE_TYPES[i + 1..] {
                assert!(!a.name.eq_ignore_ascii_case(b.name), "duplicate {}", a.name);
            }
        }
    }

    #[test]
    fn overrides_and_n1() {
        let hw = resolve_hardware(
            Cloud::Gke,
            "n1-standard-8",
            Some("nvidia-tesla-t4"),
            Some(2),
        )
        .unwrap();
        assert_eq!((hw.gpu.id, hw.gpus_per_node), ("T4", 2));
        let errs = resolve_hardware(Cloud::Gke, "n1-standard-8", None, None).unwrap_err();
        assert!(errs[0].detail.contains("nvidia-tesla-t4"), "{:?}", errs);
        let errs = resolve_hardware(Cloud::Gke, "n1-standard-8", Some("L4"), Some(3)).unwrap_err();
        assert_eq!(errs[0].field, Field::GpuModel);
        // An unknown size passes with both overrides, fails with suggestions without them.
        assert!(resolve_hardware(Cloud::Eks, "g7.xlarge", Some("L4"), Some(1)).is_ok());
        let errs = resolve_hardware(Cloud::Eks, "g7.xlarge", Some("L4"), None).unwrap_err();
        assert_eq!(errs[0].summary, "Unknown machine type");
        // A count override keeps the catalog's GPU; product label follows the machine type.
        let hw = resolve_hardware(Cloud::Aks, "Standard_NC24ads_A100_v4", None, Some(1)).unwrap();
        assert_eq!(hw.gpu_product, "NVIDIA-A100-80GB-PCIe");
        let errs = resolve_hardware(Cloud::Eks, "g5.xlarge", Some("X1"), Some(0)).unwrap_err();
        assert_eq!(errs.len(), 2, "{:?}", errs);
    }

    #[test]
    fn markdown_lists_every_machine_type_and_profile() {
        let md = catalog_markdown();
        for mt in MACHINE_TYPES {
            assert!(
                md.contains(&format!("| {} | {} |", mt.cloud, mt.name)),
                "{}",
                mt.name
            );
        }
        assert!(md.contains("| A100-40GB | 1g.5gb | 7 | 5120 | 1/7 | MIG1g | yes |"));
        assert!(md.contains("| A30-24GB | 2g.12gb | 2 | 12288 | 2/4 | - | no |"));
        assert!(
            md.contains("| T4 | NVIDIA T4 | 15360 | nvidia-smi | 7.5 | no | nvidia-tesla-t4 |")
        );
    }

    #[test]
    fn edit_distance_basics() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("same", "same"), 0);
    }
}
