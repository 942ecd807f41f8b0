//! AKS's view of MIG. An AKS node pool takes no MIG profile, only a `gpuInstanceProfile` naming compute
//! slices, so both writing a pool and reading one back need the GPU to know which profile is meant, as the
//! AKS MIG guide describes it (<https://learn.microsoft.com/azure/aks/gpu-multi-instance>). This is the
//! name; what it means on each GPU is data of the models (`MigProfile::aks`), looked up there
//! (`mig_profile_for_aks`), so the models use this module and not the other way round.

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
