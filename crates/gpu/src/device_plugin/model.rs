//! The config document as types, holding only what decides how a node advertises its GPUs. The types
//! make impossible what the plugin would refuse outright (timeSlicing and mps at once); what needs a value
//! to check is left to `rules`.

/// The only config version the plugin knows.
pub(super) const CONFIG_VERSION: &str = "v1";

/// The resource name of a full GPU.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// `flags.migStrategy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MigStrategyFlag {
    None,
    Single,
    Mixed,
}

impl MigStrategyFlag {
    const ALL: [MigStrategyFlag; 3] = [
        MigStrategyFlag::None,
        MigStrategyFlag::Single,
        MigStrategyFlag::Mixed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            MigStrategyFlag::None => "none",
            MigStrategyFlag::Single => "single",
            MigStrategyFlag::Mixed => "mixed",
        }
    }

    /// The flag spelled exactly so, as the plugin compares it (case matters).
    pub(super) fn parse(s: &str) -> Option<MigStrategyFlag> {
        Self::ALL.into_iter().find(|f| f.as_str() == s)
    }
}

/// Which of the plugin's two sharing mechanisms a `sharing` block configures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SharingKind {
    TimeSlicing,
    Mps,
}

impl SharingKind {
    pub(super) fn key(self) -> &'static str {
        match self {
            SharingKind::TimeSlicing => "timeSlicing",
            SharingKind::Mps => "mps",
        }
    }
}

/// One entry of `sharing.<kind>.resources`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReplicatedResource {
    /// Fully qualified (`nvidia.com/gpu`, `nvidia.com/mig-1g.5gb`).
    pub name: String,
    pub replicas: u32,
}

/// The `sharing` block: timeSlicing or mps (the plugin refuses both at once, so the model cannot say it).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Sharing {
    pub kind: SharingKind,
    pub rename_by_default: bool,
    pub fail_requests_greater_than_one: bool,
    pub resources: Vec<ReplicatedResource>,
}

/// `flags.plugin.sharedDevicesAllocationPolicy` (NVIDIA/k8s-device-plugin v0.20.0,
/// api/config/v1/flags.go and consts.go): which GPUs' replicas the plugin offers the kubelet for a
/// request of shared devices, in GetPreferredAllocation (internal/rm/allocate.go): `distributed`,
/// its default, the GPU with the fewest replicas in use; `packed` the one with the most. It does
/// not act on whole GPUs, and plugins before v0.20.0 do not read it. Any other value stops the
/// plugin at start (cmd/nvidia-device-plugin/main.go, "invalid --shared-devices-allocation-policy
/// option").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AllocationPolicy {
    Distributed,
    Packed,
}

impl AllocationPolicy {
    pub const ALL: [AllocationPolicy; 2] =
        [AllocationPolicy::Distributed, AllocationPolicy::Packed];

    pub fn as_str(self) -> &'static str {
        match self {
            AllocationPolicy::Distributed => "distributed",
            AllocationPolicy::Packed => "packed",
        }
    }

    /// The value spelled exactly so, as the plugin compares it.
    pub fn parse(s: &str) -> Option<AllocationPolicy> {
        Self::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

/// One named config of the device plugin's ConfigMap.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct DevicePluginConfig {
    /// `None` leaves the strategy to the plugin's command line (see the `device_plugin` module docs).
    pub mig_strategy: Option<MigStrategyFlag>,
    /// `None` leaves it to the plugin's default (`distributed`).
    pub allocation_policy: Option<AllocationPolicy>,
    pub sharing: Option<Sharing>,
}

impl DevicePluginConfig {
    /// The empty ("all") config: no sharing, MIG strategy from the plugin's command line.
    pub fn is_empty(&self) -> bool {
        self.mig_strategy.is_none() && self.allocation_policy.is_none() && self.sharing.is_none()
    }
}
