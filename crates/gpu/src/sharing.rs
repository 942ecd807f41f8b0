//! The sharing model: how a pool's GPUs are shared (MIG, time-slicing, MPS or not at all), the rules each
//! cloud imposes, and what follows for the pods that land on the pool.
//!
//! `validate` checks a pool and collects every problem at once (a plan should show all of them, not one per
//! apply); on success it returns [`Derived`], the facts the cloud layer and the data sources need: the
//! extended resource name, slices and memory per slice, node selector, tolerations, the device plugin config
//! and the node labels that select it.
//!
//! Who advertises the GPUs differs per cloud, and that decides most rules. On GKE, Google's own device plugin
//! does, configured through the node pool's accelerator fields; it always advertises `nvidia.com/gpu` and
//! can time-share or MPS-share whole GPUs or MIG partitions. On AKS and EKS the NVIDIA device plugin (via the
//! GPU operator) does, configured by a named config that a node selects with the
//! `nvidia.com/device-plugin.config` label; it runs MPS on full GPUs only.

use super::catalog::{
    AksGpuInstanceProfile, Cloud, GpuModel, Hardware, MigProfile, all_machine_types,
};
use super::device_plugin::{
    DevicePluginConfig, GPU_RESOURCE, MigStrategyFlag, ReplicatedResource, Sharing, SharingKind,
};
use super::error::{DomainError, Field, list, summary};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

/// Fewest and most clients per GPU we accept for time-slicing, MPS and GKE sharing. 48 is GKE's and MPS's
/// limit; the NVIDIA plugin has none for time-slicing, but past 48 a slice is a sliver of memory.
pub const MIN_REPLICAS: u32 = 2;
pub const MAX_REPLICAS: u32 = 48;
/// MPS allows only 16 clients per GPU below this compute capability.
pub const MPS_FULL_CLIENTS_MIN_CC: (u8, u8) = (7, 5);
pub const MPS_MAX_CLIENTS_LOW_CC: u32 = 16;

/// The taint a GPU pool gets when the user names none: it keeps pods that do not ask for a GPU off the
/// expensive nodes, and it is the taint the GPU operator's components tolerate out of the box.
pub const DEFAULT_GPU_TAINT: Taint = Taint {
    key: Cow::Borrowed("nvidia.com/gpu"),
    value: Cow::Borrowed("Present"),
    effect: TaintEffect::NoSchedule,
};

/// The node label the NVIDIA device plugin reads to pick its named config.
pub const DEVICE_PLUGIN_CONFIG_LABEL: &str = "nvidia.com/device-plugin.config";
/// The node label the GPU operator's MIG manager reads to partition a node's GPUs.
pub const MIG_CONFIG_LABEL: &str = "nvidia.com/mig.config";

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
    Mps { replicas: u32 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl TaintEffect {
    /// Accepts Kubernetes' spelling (`NoSchedule`) and the GKE/EKS API spelling (`NO_SCHEDULE`).
    pub fn parse(s: &str) -> Option<TaintEffect> {
        match s.trim().replace('_', "").to_ascii_lowercase().as_str() {
            "noschedule" => Some(TaintEffect::NoSchedule),
            "prefernoschedule" => Some(TaintEffect::PreferNoSchedule),
            "noexecute" => Some(TaintEffect::NoExecute),
            _ => None,
        }
    }

    /// Kubernetes' spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Taint {
    pub key: Cow<'static, str>,
    /// Empty for a taint without a value.
    pub value: Cow<'static, str>,
    pub effect: TaintEffect,
}

impl Taint {
    /// Parses AKS's `key=value:Effect` (or `key:Effect`).
    pub fn parse(s: &str) -> Result<Taint, DomainError> {
        let bad = || {
            DomainError::new(
                Field::Taints,
                summary::INVALID_TAINT,
                format!(
                    "\"{s}\" is not a taint. Write key=value:Effect (or key:Effect) with Effect one of \
                     NoSchedule, PreferNoSchedule, NoExecute."
                ),
            )
        };
        let (kv, effect) = s.rsplit_once(':').ok_or_else(bad)?;
        let effect = TaintEffect::parse(effect).ok_or_else(bad)?;
        let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
        if key.trim().is_empty() {
            return Err(bad());
        }
        Ok(Taint {
            key: Cow::Owned(key.trim().to_string()),
            value: Cow::Owned(value.trim().to_string()),
            effect,
        })
    }

    /// The toleration a pod needs to land on nodes with this taint. The `nvidia.com/gpu` key is tolerated
    /// whatever its value, as NVIDIA's charts do: GKE taints GPU nodes `nvidia.com/gpu=present` (lowercase)
    /// on its own, and a pod must land there as well as on our `Present`.
    pub fn toleration(&self) -> Toleration {
        let any_value = self.value.is_empty() || self.key == DEFAULT_GPU_TAINT.key;
        Toleration {
            key: self.key.to_string(),
            operator: if any_value {
                TolerationOperator::Exists
            } else {
                TolerationOperator::Equal
            },
            value: if any_value {
                String::new()
            } else {
                self.value.to_string()
            },
            effect: self.effect,
        }
    }
}

impl fmt::Display for Taint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.value.is_empty() {
            write!(f, "{}:{}", self.key, self.effect.as_str())
        } else {
            write!(f, "{}={}:{}", self.key, self.value, self.effect.as_str())
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TolerationOperator {
    Equal,
    Exists,
}

impl TolerationOperator {
    pub fn as_str(self) -> &'static str {
        match self {
            TolerationOperator::Equal => "Equal",
            TolerationOperator::Exists => "Exists",
        }
    }
}

/// A pod toleration, in Kubernetes' terms.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Toleration {
    pub key: String,
    pub operator: TolerationOperator,
    /// Empty with `Exists`.
    pub value: String,
    pub effect: TaintEffect,
}

/// A GPU node pool as the user declares it, with its hardware already resolved
/// ([`super::resolve_hardware`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolSpec {
    pub cloud: Cloud,
    pub pool_name: String,
    pub hardware: Hardware,
    pub sharing: SharingMode,
    /// `None` gives the pool [`DEFAULT_GPU_TAINT`]; `Some(vec![])` means no taint at all.
    pub taints: Option<Vec<Taint>>,
    /// The user's own node labels.
    pub labels: BTreeMap<String, String>,
}

/// A device plugin config under the name nodes select it by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NamedConfig {
    pub name: String,
    pub config: DevicePluginConfig,
}

/// What GKE's node pool accelerator block must say.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GkeAccelerator {
    pub accelerator_type: &'static str,
    pub accelerator_count: u32,
    pub gpu_partition_size: Option<&'static str>,
    pub sharing: Option<GkeSharing>,
}

/// How well a workload on the pool is walled off from its neighbours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Isolation {
    /// A whole GPU per request.
    WholeGpu,
    /// MIG: separate compute and memory in hardware.
    Hardware,
    /// MPS: memory capped per client, faults shared.
    MemoryLimit,
    /// Time-slicing: nothing; each workload must keep to its share by itself.
    None,
}

/// The facts that follow from a valid pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Derived {
    pub cloud: Cloud,
    pub gpu: &'static GpuModel,
    pub gpus_per_node: u32,
    /// The sharing mode with the MIG profile spelled as the catalog spells it.
    pub sharing: SharingMode,
    /// The MIG profile, for MIG pools.
    pub mig_profile: Option<&'static MigProfile>,
    /// The extended resource pods request.
    pub resource_name: String,
    /// Schedulable units per GPU: 1, the replicas, the MIG instances, or instances x GKE clients.
    pub slices_per_gpu: u32,
    pub slices_per_node: u32,
    /// Memory of one unit (MiB, floor).
    pub memory_per_slice_mib: u32,
    pub isolation: Isolation,
    /// Selects the pool's nodes.
    pub node_selector: BTreeMap<String, String>,
    /// The pool's taints (the default when the user named none).
    pub taints: Vec<Taint>,
    /// What a pod needs to tolerate those taints.
    pub tolerations: Vec<Toleration>,
    /// Labels the provider must set on the pool's nodes (beside the user's own).
    pub node_labels: BTreeMap<String, String>,
    /// The NVIDIA device plugin config the nodes select (AKS and EKS; GKE's own plugin reads none).
    pub device_plugin_config: Option<NamedConfig>,
    /// AKS's `gpuInstanceProfile`, for MIG pools on AKS.
    pub aks_gpu_instance_profile: Option<AksGpuInstanceProfile>,
    /// GKE's accelerator block, for pools on GKE.
    pub gke_accelerator: Option<GkeAccelerator>,
}

// --- validation -------------------------------------------------------------------------------------------

/// Validates a pool, collecting every problem, and derives its placement facts.
pub fn validate(spec: &PoolSpec) -> Result<Derived, Vec<DomainError>> {
    let mut errors = Vec::new();
    let gpu = spec.hardware.gpu;
    let gpus = spec.hardware.gpus_per_node;

    if let Err(e) = check_pool_name(spec.cloud, &spec.pool_name) {
        errors.push(e);
    }
    if spec.cloud == Cloud::Gke && gpu.gke_accelerator.is_none() {
        errors.push(DomainError::new(
            Field::GpuModel,
            summary::UNKNOWN_GPU_MODEL,
            format!(
                "GKE offers no {} accelerator. GPUs GKE offers: {}.",
                gpu.id,
                list(
                    super::catalog::all_gpu_models()
                        .iter()
                        .filter_map(|g| g.gke_accelerator)
                )
            ),
        ));
    }
    let taints = spec
        .taints
        .clone()
        .unwrap_or_else(|| vec![DEFAULT_GPU_TAINT]);
    for t in &taints {
        if t.key.trim().is_empty() || t.key.contains(char::is_whitespace) {
            errors.push(DomainError::new(
                Field::Taints,
                summary::INVALID_TAINT,
                format!("The taint \"{t}\" has an empty or blank key. Give every taint a key, e.g. nvidia.com/gpu."),
            ));
        }
    }

    // Labels and selectors follow from the mode, so a broken mode ends here; the problems found so far
    // (name, taints, mode) are all reported.
    let Some(mode) = check_mode(spec, &mut errors) else {
        return Err(errors);
    };

    let mut node_selector = BTreeMap::new();
    let mut node_labels = BTreeMap::new();
    let pool = spec.pool_name.clone();
    match spec.cloud {
        Cloud::Gke => {
            node_selector.insert("cloud.google.com/gke-nodepool".to_string(), pool);
            if let Some(sharing) = mode.gke_sharing {
                node_selector.insert(
                    "cloud.google.com/gke-gpu-sharing-strategy".to_string(),
                    sharing.strategy.label_value().to_string(),
                );
                node_selector.insert(
                    "cloud.google.com/gke-max-shared-clients-per-gpu".to_string(),
                    sharing.max_clients.to_string(),
                );
            }
            if let Some(profile) = mode.mig_profile {
                node_selector.insert(
                    "cloud.google.com/gke-gpu-partition-size".to_string(),
                    profile.name.to_string(),
                );
            }
        }
        Cloud::Aks | Cloud::Eks => {
            let pool_key = if spec.cloud == Cloud::Aks {
                "agentpool"
            } else {
                "eks.amazonaws.com/nodegroup"
            };
            node_selector.insert(pool_key.to_string(), pool);
            if let Some(named) = &mode.device_plugin_config {
                node_selector.insert(DEVICE_PLUGIN_CONFIG_LABEL.to_string(), named.name.clone());
                node_labels.insert(DEVICE_PLUGIN_CONFIG_LABEL.to_string(), named.name.clone());
            }
            // EKS has no node-group MIG field: the GPU operator's MIG manager partitions the GPUs when it
            // sees this label. AKS partitions them itself from gpuInstanceProfile.
            if spec.cloud == Cloud::Eks
                && let Some(profile) = mode.mig_profile
            {
                let value = mig_config_name(profile);
                node_selector.insert(MIG_CONFIG_LABEL.to_string(), value.clone());
                node_labels.insert(MIG_CONFIG_LABEL.to_string(), value);
            }
        }
    }

    for (key, value) in &spec.labels {
        if let Some(ours) = node_labels.get(key)
            && ours != value
        {
            errors.push(DomainError::new(
                Field::Labels,
                summary::CONFLICTING_LABEL,
                format!(
                    "The label {key}={value} conflicts with the {key}={ours} this pool's sharing needs. \
                     Remove it from labels: the provider sets it."
                ),
            ));
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }

    let slices_per_node = mode.slices_per_gpu.saturating_mul(gpus);
    Ok(Derived {
        cloud: spec.cloud,
        gpu,
        gpus_per_node: gpus,
        sharing: mode.sharing,
        mig_profile: mode.mig_profile,
        resource_name: mode.resource_name,
        slices_per_gpu: mode.slices_per_gpu,
        slices_per_node,
        memory_per_slice_mib: mode.memory_per_slice_mib,
        isolation: mode.isolation,
        node_selector,
        tolerations: taints.iter().map(Taint::toleration).collect(),
        taints,
        node_labels,
        device_plugin_config: mode.device_plugin_config,
        aks_gpu_instance_profile: mode
            .mig_profile
            .and_then(|p| p.aks)
            .filter(|_| spec.cloud == Cloud::Aks),
        gke_accelerator: gpu
            .gke_accelerator
            .filter(|_| spec.cloud == Cloud::Gke)
            .map(|accelerator_type| GkeAccelerator {
                accelerator_type,
                accelerator_count: gpus,
                gpu_partition_size: mode.mig_profile.map(|p| p.name),
                sharing: mode.gke_sharing,
            }),
    })
}

/// The per-mode part of a valid pool.
struct ModeFacts {
    sharing: SharingMode,
    mig_profile: Option<&'static MigProfile>,
    resource_name: String,
    slices_per_gpu: u32,
    memory_per_slice_mib: u32,
    isolation: Isolation,
    gke_sharing: Option<GkeSharing>,
    device_plugin_config: Option<NamedConfig>,
}

fn check_mode(spec: &PoolSpec, errors: &mut Vec<DomainError>) -> Option<ModeFacts> {
    let gpu = spec.hardware.gpu;
    let cloud = spec.cloud;
    let nvidia_plugin = cloud != Cloud::Gke;
    let before = errors.len();
    let facts = match &spec.sharing {
        SharingMode::None => ModeFacts {
            sharing: SharingMode::None,
            mig_profile: None,
            resource_name: GPU_RESOURCE.to_string(),
            slices_per_gpu: 1,
            memory_per_slice_mib: gpu.memory_mib,
            isolation: Isolation::WholeGpu,
            gke_sharing: None,
            device_plugin_config: None,
        },
        SharingMode::TimeSlicing {
            replicas,
            rename_by_default,
            ..
        } => {
            check_replicas(
                *replicas,
                Field::TimeSlicingReplicas,
                "time_slicing.replicas",
                errors,
            );
            if cloud == Cloud::Gke && *rename_by_default {
                errors.push(DomainError::new(
                    Field::TimeSlicingRenameByDefault,
                    summary::INVALID_SHARING,
                    "GKE's time-sharing always advertises nvidia.com/gpu; rename_by_default works only with \
                     the NVIDIA device plugin on AKS and EKS. Set rename_by_default = false on GKE.",
                ));
            }
            let resource_name = if nvidia_plugin && *rename_by_default {
                format!("{GPU_RESOURCE}.shared")
            } else {
                GPU_RESOURCE.to_string()
            };
            ModeFacts {
                sharing: spec.sharing.clone(),
                mig_profile: None,
                resource_name,
                slices_per_gpu: *replicas,
                memory_per_slice_mib: per_slice(gpu.memory_mib, *replicas),
                isolation: Isolation::None,
                gke_sharing: (cloud == Cloud::Gke).then_some(GkeSharing {
                    strategy: GkeSharingStrategy::TimeSharing,
                    max_clients: *replicas,
                }),
                device_plugin_config: None,
            }
        }
        SharingMode::Mps { replicas } => {
            check_replicas(*replicas, Field::MpsReplicas, "mps.replicas", errors);
            check_mps_clients(gpu, *replicas, Field::MpsReplicas, "mps.replicas", errors);
            ModeFacts {
                sharing: spec.sharing.clone(),
                mig_profile: None,
                resource_name: GPU_RESOURCE.to_string(),
                slices_per_gpu: *replicas,
                memory_per_slice_mib: per_slice(gpu.memory_mib, *replicas),
                isolation: Isolation::MemoryLimit,
                gke_sharing: (cloud == Cloud::Gke).then_some(GkeSharing {
                    strategy: GkeSharingStrategy::Mps,
                    max_clients: *replicas,
                }),
                device_plugin_config: None,
            }
        }
        SharingMode::Mig {
            profile,
            strategy,
            gke_sharing,
        } => {
            let found = check_mig_profile(spec, profile, errors);
            if let Some(sharing) = gke_sharing {
                if nvidia_plugin {
                    errors.push(mig_sharing_off_gke(
                        Some(cloud),
                        *strategy,
                        sharing.strategy,
                    ));
                } else {
                    check_replicas(
                        sharing.max_clients,
                        Field::MigGkeMaxClients,
                        "mig.gke_sharing.max_clients",
                        errors,
                    );
                    // MPS runs on whole GPUs only (NVIDIA's MPS and GKE's MPS guide alike); GKE
                    // refuses it on partitions, while time-sharing of partitions is supported.
                    if sharing.strategy == GkeSharingStrategy::Mps {
                        errors.push(DomainError::new(
                            Field::MigGkeSharing,
                            summary::INVALID_SHARING,
                            "GKE cannot run MPS on MIG partitions: MPS shares whole GPUs only. Use \
                             gke_sharing strategy \"time-sharing\" on the partitions, or mps without mig.",
                        ));
                    }
                }
            }
            let found = found?;
            let clients = gke_sharing.map_or(1, |s| s.max_clients);
            let resource_name = match (cloud, strategy) {
                (Cloud::Gke, _) | (_, MigStrategy::Single) => GPU_RESOURCE.to_string(),
                (_, MigStrategy::Mixed) => mig_resource_name(found),
            };
            ModeFacts {
                sharing: SharingMode::Mig {
                    profile: found.name.to_string(),
                    strategy: *strategy,
                    gke_sharing: *gke_sharing,
                },
                mig_profile: Some(found),
                resource_name,
                slices_per_gpu: found.max_instances.saturating_mul(clients),
                memory_per_slice_mib: per_slice(found.memory_mib, clients),
                isolation: match gke_sharing.map(|s| s.strategy) {
                    None => Isolation::Hardware,
                    Some(GkeSharingStrategy::Mps) => Isolation::MemoryLimit,
                    Some(GkeSharingStrategy::TimeSharing) => Isolation::None,
                },
                gke_sharing: *gke_sharing,
                device_plugin_config: None,
            }
        }
    };
    if errors.len() > before {
        return None;
    }
    let device_plugin_config = if nvidia_plugin {
        match device_plugin_config(&facts.sharing) {
            Ok(named) => Some(named),
            Err(e) => {
                errors.push(e);
                return None;
            }
        }
    } else {
        None
    };
    Some(ModeFacts {
        device_plugin_config,
        ..facts
    })
}

fn check_mig_profile(
    spec: &PoolSpec,
    profile: &str,
    errors: &mut Vec<DomainError>,
) -> Option<&'static MigProfile> {
    let gpu = spec.hardware.gpu;
    let cloud = spec.cloud;
    if !gpu.mig_capable() {
        let capable: Vec<&str> = all_machine_types()
            .iter()
            .filter(|mt| mt.cloud == cloud && mt.gpu.mig_capable())
            .map(|mt| mt.name)
            .collect();
        errors.push(DomainError::new(
            Field::MigProfile,
            summary::MIG_NOT_SUPPORTED,
            format!(
                "{} carries {} GPUs, which have no MIG. Use time_slicing or mps on this machine type, or a \
                 MIG-capable one: {}.",
                spec.hardware.machine_type,
                gpu.id,
                list(capable)
            ),
        ));
        return None;
    }
    let allowed: Vec<&'static MigProfile> = gpu
        .mig_profiles
        .iter()
        .filter(|p| match cloud {
            Cloud::Aks => p.aks.is_some(),
            Cloud::Gke => p.gke,
            Cloud::Eks => true,
        })
        .collect();
    let allowed_text = match cloud {
        Cloud::Aks => list(
            allowed
                .iter()
                .map(|p| format!("{} ({})", p.name, p.aks.map_or("", |a| a.as_str()))),
        ),
        _ => list(allowed.iter().map(|p| p.name)),
    };
    let Some(found) = gpu.mig_profile(profile) else {
        let owners: Vec<&str> = super::catalog::all_gpu_models()
            .iter()
            .filter(|g| g.mig_profile(profile).is_some())
            .map(|g| g.id)
            .collect();
        let whose = if owners.is_empty() {
            String::new()
        } else {
            format!(" It is a profile of the {}.", list(owners))
        };
        errors.push(DomainError::new(
            Field::MigProfile,
            summary::INVALID_MIG_PROFILE,
            format!(
                "\"{profile}\" is not a MIG profile of the {} on {}.{whose} Valid values: {allowed_text}.",
                gpu.id, spec.hardware.machine_type
            ),
        ));
        return None;
    };
    let refused = match cloud {
        Cloud::Aks if found.aks.is_none() => Some(format!(
            "AKS can create only the profiles its gpuInstanceProfile (MIG1g to MIG7g) names{}; \"{}\" is not \
             one of them.",
            if found.has_media_extensions() {
                ", never a +me profile"
            } else {
                ""
            },
            found.name
        )),
        Cloud::Gke if !found.gke => Some(format!(
            "GKE does not accept \"{}\" as gpu_partition_size for {}{}.",
            found.name,
            gpu.gke_accelerator.unwrap_or(gpu.id),
            if found.has_media_extensions() {
                " (no +me profile is)"
            } else {
                ""
            }
        )),
        _ => None,
    };
    if let Some(why) = refused {
        errors.push(DomainError::new(
            Field::MigProfile,
            summary::INVALID_MIG_PROFILE,
            format!(
                "{why} Valid values on {} for the {}: {allowed_text}.",
                cloud.title(),
                gpu.id
            ),
        ));
        return None;
    }
    Some(found)
}

/// `cloud` is `None` when the caller knows no cloud (the config function), and then the text names both.
fn mig_sharing_off_gke(
    cloud: Option<Cloud>,
    strategy: MigStrategy,
    sharing: GkeSharingStrategy,
) -> DomainError {
    let where_ = cloud.map_or("AKS and EKS", Cloud::title);
    let detail = match (sharing, strategy) {
        (GkeSharingStrategy::Mps, MigStrategy::Mixed) => format!(
            "MPS cannot be combined with MIG strategy mixed: the NVIDIA device plugin, which shares GPUs on \
             {}, runs MPS on full GPUs only and refuses it with migStrategy mixed. Drop gke_sharing, or use \
             mps without MIG.",
            where_
        ),
        (GkeSharingStrategy::Mps, MigStrategy::Single) => format!(
            "MPS does not run on MIG devices with the NVIDIA device plugin, which shares GPUs on {}. Drop \
             gke_sharing, or use mps without MIG.",
            where_
        ),
        (GkeSharingStrategy::TimeSharing, _) => format!(
            "Sharing on top of MIG partitions (gke_sharing) is GKE's feature; on {} drop gke_sharing, or use \
             time_slicing on whole GPUs.",
            where_
        ),
    };
    DomainError::new(Field::MigGkeSharing, summary::INVALID_SHARING, detail)
}

fn check_replicas(replicas: u32, field: Field, name: &str, errors: &mut Vec<DomainError>) {
    if !(MIN_REPLICAS..=MAX_REPLICAS).contains(&replicas) {
        errors.push(DomainError::new(
            field,
            summary::INVALID_REPLICAS,
            format!(
                "{name} is {replicas}; use {MIN_REPLICAS} to {MAX_REPLICAS} clients per GPU (fewer than 2 \
                 is no sharing; 48 is the most GKE and MPS allow)."
            ),
        ));
    }
}

fn check_mps_clients(
    gpu: &GpuModel,
    clients: u32,
    field: Field,
    name: &str,
    errors: &mut Vec<DomainError>,
) {
    if gpu.compute_capability < MPS_FULL_CLIENTS_MIN_CC && clients > MPS_MAX_CLIENTS_LOW_CC {
        errors.push(DomainError::new(
            field,
            summary::INVALID_REPLICAS,
            format!(
                "{name} is {clients}, but MPS allows at most {MPS_MAX_CLIENTS_LOW_CC} clients per GPU below \
                 compute capability {}.{} and the {} has {}. Use {MIN_REPLICAS} to {MPS_MAX_CLIENTS_LOW_CC}.",
                MPS_FULL_CLIENTS_MIN_CC.0,
                MPS_FULL_CLIENTS_MIN_CC.1,
                gpu.id,
                gpu.compute_capability_string()
            ),
        ));
    }
}

/// Pool name rules of each cloud's API, checked here because the name also becomes a node selector value.
pub fn check_pool_name(cloud: Cloud, name: &str) -> Result<(), DomainError> {
    let b = name.as_bytes();
    let lower_alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let (ok, rule) = match cloud {
        Cloud::Aks => (
            (1..=12).contains(&b.len()) && b[0].is_ascii_lowercase() && b.iter().all(lower_alnum),
            "AKS pool names are 1 to 12 lowercase letters and digits, starting with a letter",
        ),
        Cloud::Gke => (
            (1..=40).contains(&b.len())
                && b[0].is_ascii_lowercase()
                && b.last().is_some_and(lower_alnum)
                && b.iter().all(|c| lower_alnum(c) || *c == b'-'),
            "GKE node pool names are 1 to 40 lowercase letters, digits and '-', starting with a letter and \
             ending with a letter or digit",
        ),
        Cloud::Eks => (
            (1..=63).contains(&b.len())
                && b[0].is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'_'),
            "EKS node group names are 1 to 63 letters, digits, '-' and '_', starting with a letter or digit",
        ),
    };
    if ok {
        Ok(())
    } else {
        Err(DomainError::new(
            Field::PoolName,
            summary::INVALID_POOL_NAME,
            format!("\"{name}\" is not a valid pool name: {rule}."),
        ))
    }
}

/// MIG is not supported on Azure Linux node images, so an AKS MIG pool must run Ubuntu.
pub fn check_aks_os_sku(sharing: &SharingMode, os_sku: &str) -> Result<(), DomainError> {
    let sku = os_sku.trim().to_ascii_lowercase();
    let azure_linux = sku.starts_with("azurelinux") || sku == "cblmariner" || sku == "mariner";
    if matches!(sharing, SharingMode::Mig { .. }) && azure_linux {
        return Err(DomainError::new(
            Field::OsSku,
            summary::INVALID_OS_SKU,
            format!(
                "AKS does not support MIG on Azure Linux node images (os_sku \"{os_sku}\"). Use an Ubuntu \
                 os_sku (Ubuntu, Ubuntu2204, Ubuntu2404) for a MIG pool, or share with time_slicing or mps."
            ),
        ));
    }
    Ok(())
}

fn per_slice(memory_mib: u32, slices: u32) -> u32 {
    memory_mib.checked_div(slices).unwrap_or(0)
}

/// `nvidia.com/mig-<profile>` as the NVIDIA plugin names a mixed-strategy MIG resource. A resource name
/// cannot hold '+', so a `+me` profile is written with '.' (`mig-1g.5gb.me`).
pub fn mig_resource_name(profile: &MigProfile) -> String {
    format!("nvidia.com/mig-{}", profile.name.replace('+', "."))
}

/// The MIG manager config that partitions every GPU of a node into one profile (`all-1g.5gb`).
fn mig_config_name(profile: &MigProfile) -> String {
    format!("all-{}", profile.name.replace('+', "."))
}

// --- device plugin config for a mode ----------------------------------------------------------------------

/// The NVIDIA device plugin config a mode needs, under the name nodes select it by.
///
/// Names encode every setting, so one name always means one config in the shared ConfigMap:
/// - no sharing: `all`, the empty config (the name and content the GPU operator charts use);
/// - time-slicing: `time-sliced-<N>`, with `-renamed` when rename_by_default and `-strict` when
///   fail_requests_greater_than_one (so `time-sliced-10-renamed`);
/// - MPS: `mps-<N>`;
/// - MIG: `mig-single` or `mig-mixed`.
///
/// Sharing configs set `migStrategy: none` explicitly rather than inherit the operator's global strategy:
/// charts default that to mixed, and the plugin refuses MPS with mixed.
pub fn device_plugin_config(mode: &SharingMode) -> Result<NamedConfig, DomainError> {
    let mut errors = Vec::new();
    let named = match mode {
        SharingMode::None => NamedConfig {
            name: "all".to_string(),
            config: DevicePluginConfig::default(),
        },
        SharingMode::TimeSlicing {
            replicas,
            rename_by_default,
            fail_requests_greater_than_one,
        } => {
            check_replicas(
                *replicas,
                Field::TimeSlicingReplicas,
                "time_slicing.replicas",
                &mut errors,
            );
            let mut name = format!("time-sliced-{replicas}");
            if *rename_by_default {
                name.push_str("-renamed");
            }
            if *fail_requests_greater_than_one {
                name.push_str("-strict");
            }
            NamedConfig {
                name,
                config: sharing_config(
                    SharingKind::TimeSlicing,
                    *replicas,
                    *rename_by_default,
                    *fail_requests_greater_than_one,
                ),
            }
        }
        SharingMode::Mps { replicas } => {
            check_replicas(*replicas, Field::MpsReplicas, "mps.replicas", &mut errors);
            NamedConfig {
                name: format!("mps-{replicas}"),
                config: sharing_config(SharingKind::Mps, *replicas, false, true),
            }
        }
        SharingMode::Mig {
            strategy,
            gke_sharing,
            ..
        } => {
            if let Some(sharing) = gke_sharing {
                errors.push(mig_sharing_off_gke(None, *strategy, sharing.strategy));
            }
            NamedConfig {
                name: format!("mig-{}", strategy.as_str()),
                config: DevicePluginConfig {
                    mig_strategy: Some(match strategy {
                        MigStrategy::Single => MigStrategyFlag::Single,
                        MigStrategy::Mixed => MigStrategyFlag::Mixed,
                    }),
                    sharing: None,
                },
            }
        }
    };
    if let Some(first) = errors.into_iter().next() {
        return Err(first);
    }
    named.config.validate()?;
    Ok(named)
}

/// The rendered YAML of [`device_plugin_config`], what the `device_plugin_config` provider function returns.
pub fn device_plugin_config_yaml(mode: &SharingMode) -> Result<String, DomainError> {
    device_plugin_config(mode)?.config.render()
}

fn sharing_config(
    kind: SharingKind,
    replicas: u32,
    rename: bool,
    fail_gt_one: bool,
) -> DevicePluginConfig {
    DevicePluginConfig {
        mig_strategy: Some(MigStrategyFlag::None),
        sharing: Some(Sharing {
            kind,
            rename_by_default: rename,
            fail_requests_greater_than_one: fail_gt_one,
            resources: vec![ReplicatedResource {
                name: GPU_RESOURCE.to_string(),
                replicas,
            }],
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{MemorySource, resolve_hardware};

    fn pool(cloud: Cloud, machine: &str, sharing: SharingMode) -> PoolSpec {
        PoolSpec {
            cloud,
            pool_name: "gpupool".to_string(),
            hardware: resolve_hardware(cloud, machine, None, None).unwrap(),
            sharing,
            taints: None,
            labels: BTreeMap::new(),
        }
    }

    fn ts(replicas: u32) -> SharingMode {
        SharingMode::TimeSlicing {
            replicas,
            rename_by_default: false,
            fail_requests_greater_than_one: false,
        }
    }

    fn mig(profile: &str, strategy: MigStrategy, gke_sharing: Option<GkeSharing>) -> SharingMode {
        SharingMode::Mig {
            profile: profile.to_string(),
            strategy,
            gke_sharing,
        }
    }

    fn one_error(spec: &PoolSpec) -> DomainError {
        let errors = validate(spec).unwrap_err();
        assert_eq!(errors.len(), 1, "{errors:?}");
        errors.into_iter().next().unwrap()
    }

    #[test]
    fn time_slicing_replicas_48_is_accepted_and_49_refused() {
        let ok = validate(&pool(Cloud::Eks, "g4dn.xlarge", ts(48))).unwrap();
        assert_eq!(ok.slices_per_node, 48);
        for bad in [49, 1, 0] {
            let err = one_error(&pool(Cloud::Eks, "g4dn.xlarge", ts(bad)));
            assert_eq!(err.summary, "Invalid replica count");
            assert_eq!(err.field, Field::TimeSlicingReplicas);
            assert!(
                err.detail.contains(&format!("is {bad}; use 2 to 48")),
                "{}",
                err.detail
            );
        }
    }

    #[test]
    fn a_profile_of_another_gpu_is_refused_with_the_valid_ones() {
        let spec = pool(
            Cloud::Aks,
            "Standard_ND96amsr_A100_v4",
            mig("1g.5gb", MigStrategy::Mixed, None),
        );
        let err = one_error(&spec);
        assert_eq!(err.summary, "Invalid MIG profile");
        assert_eq!(err.field, Field::MigProfile);
        assert!(
            err.detail.contains("It is a profile of the A100-40GB"),
            "{}",
            err.detail
        );
        assert!(
            err.detail
                .contains("Valid values: 1g.10gb (MIG1g), 2g.20gb (MIG2g), 3g.40gb (MIG3g)"),
            "{}",
            err.detail
        );
        // And the same profile is fine on the 40 GB part.
        assert!(
            validate(&pool(
                Cloud::Aks,
                "Standard_ND96asr_v4",
                mig("1g.5gb", MigStrategy::Mixed, None)
            ))
            .is_ok()
        );
    }

    #[test]
    fn mig_on_a_machine_without_mig_is_refused() {
        let err = one_error(&pool(
            Cloud::Eks,
            "g5.xlarge",
            mig("1g.5gb", MigStrategy::Mixed, None),
        ));
        assert_eq!(err.summary, "MIG not supported");
        assert!(
            err.detail
                .contains("g5.xlarge carries A10G GPUs, which have no MIG"),
            "{}",
            err.detail
        );
        assert!(err.detail.contains("p4d.24xlarge"), "{}", err.detail);
    }

    #[test]
    fn mps_with_mig_mixed_is_refused_off_gke() {
        let sharing = Some(GkeSharing {
            strategy: GkeSharingStrategy::Mps,
            max_clients: 4,
        });
        let err = one_error(&pool(
            Cloud::Eks,
            "p4d.24xlarge",
            mig("1g.5gb", MigStrategy::Mixed, sharing),
        ));
        assert_eq!(err.summary, "Invalid GPU sharing");
        assert_eq!(err.field, Field::MigGkeSharing);
        assert!(
            err.detail
                .contains("MPS cannot be combined with MIG strategy mixed"),
            "{}",
            err.detail
        );
        let err = one_error(&pool(
            Cloud::Aks,
            "Standard_ND96asr_v4",
            mig("1g.5gb", MigStrategy::Single, sharing),
        ));
        assert!(
            err.detail.contains("MPS does not run on MIG devices"),
            "{}",
            err.detail
        );
        // The config function refuses the same.
        assert!(device_plugin_config(&mig("1g.5gb", MigStrategy::Mixed, sharing)).is_err());
        // GKE refuses MPS on partitions too; time-sharing of partitions it supports.
        let err = one_error(&pool(
            Cloud::Gke,
            "a2-highgpu-1g",
            mig("1g.5gb", MigStrategy::Mixed, sharing),
        ));
        assert_eq!(err.field, Field::MigGkeSharing);
        assert!(err.detail.contains("time-sharing"), "{}", err.detail);
        let shared = GkeSharing {
            strategy: GkeSharingStrategy::TimeSharing,
            max_clients: 4,
        };
        let d = validate(&pool(
            Cloud::Gke,
            "a2-highgpu-1g",
            mig("1g.5gb", MigStrategy::Mixed, Some(shared)),
        ))
        .unwrap();
        assert_eq!(d.slices_per_gpu, 28);
    }

    static V100: GpuModel = GpuModel {
        id: "V100",
        marketing_name: "test part below compute capability 7.5",
        memory_mib: 16384,
        memory_source: MemorySource::Nominal,
        compute_capability: (7, 0),
        compute_slices: 0,
        gke_accelerator: Some("nvidia-tesla-v100"),
        gpu_product: "Tesla-V100-SXM2-16GB",
        mig_profiles: &[],
    };

    #[test]
    fn mps_clients_are_capped_at_16_below_compute_capability_7_5() {
        // The T4 is 7.5 itself, so it gets the full 48.
        let t4 = validate(&pool(
            Cloud::Eks,
            "g4dn.xlarge",
            SharingMode::Mps { replicas: 17 },
        ))
        .unwrap();
        assert_eq!(
            (t4.slices_per_gpu, t4.memory_per_slice_mib),
            (17, 15360 / 17)
        );
        let mut old = pool(Cloud::Eks, "g4dn.xlarge", SharingMode::Mps { replicas: 17 });
        old.hardware.gpu = &V100;
        let err = one_error(&old);
        assert_eq!(err.field, Field::MpsReplicas);
        assert!(err.detail.contains("at most 16 clients"), "{}", err.detail);
        old.sharing = SharingMode::Mps { replicas: 16 };
        assert!(validate(&old).is_ok());
        assert!(
            one_error(&pool(
                Cloud::Eks,
                "g4dn.xlarge",
                SharingMode::Mps { replicas: 49 }
            ))
            .detail
            .contains("2 to 48")
        );
    }

    #[test]
    fn each_cloud_accepts_only_the_profiles_it_can_create() {
        let err = one_error(&pool(
            Cloud::Aks,
            "Standard_ND96amsr_A100_v4",
            mig("1g.20gb", MigStrategy::Mixed, None),
        ));
        assert!(err.detail.contains("AKS can create only"), "{}", err.detail);
        let err = one_error(&pool(
            Cloud::Aks,
            "Standard_ND96asr_v4",
            mig("1g.5gb+me", MigStrategy::Mixed, None),
        ));
        assert!(err.detail.contains("never a +me profile"), "{}", err.detail);
        let err = one_error(&pool(
            Cloud::Gke,
            "a2-highgpu-1g",
            mig("1g.10gb", MigStrategy::Mixed, None),
        ));
        assert!(
            err.detail.contains(
                "Valid values on GKE for the A100-40GB: 1g.5gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb"
            ),
            "{}",
            err.detail
        );
        assert!(
            one_error(&pool(
                Cloud::Gke,
                "a2-highgpu-1g",
                mig("1g.5gb+me", MigStrategy::Mixed, None)
            ))
            .detail
            .contains("no +me profile")
        );
        // EKS partitions through the MIG manager, which can create any profile.
        let d = validate(&pool(
            Cloud::Eks,
            "p4de.24xlarge",
            mig("1g.20gb", MigStrategy::Mixed, None),
        ))
        .unwrap();
        assert_eq!(
            (d.slices_per_node, d.resource_name.as_str()),
            (32, "nvidia.com/mig-1g.20gb")
        );
        let d = validate(&pool(
            Cloud::Eks,
            "p4d.24xlarge",
            mig("1g.5gb+me", MigStrategy::Mixed, None),
        ))
        .unwrap();
        assert_eq!(d.resource_name, "nvidia.com/mig-1g.5gb.me");
    }

    #[test]
    fn all_problems_are_reported_together() {
        let mut spec = pool(Cloud::Aks, "Standard_NC4as_T4_v3", ts(100));
        spec.pool_name = "Bad-Name".into();
        spec.taints = Some(vec![Taint {
            key: Cow::Borrowed(""),
            value: Cow::Borrowed("x"),
            effect: TaintEffect::NoSchedule,
        }]);
        let errors = validate(&spec).unwrap_err();
        let fields: Vec<Field> = errors.iter().map(|e| e.field).collect();
        assert_eq!(
            fields,
            [Field::PoolName, Field::Taints, Field::TimeSlicingReplicas],
            "{errors:?}"
        );
    }

    #[test]
    fn a_bad_name_and_a_label_conflict_are_reported_together() {
        let mut spec = pool(Cloud::Eks, "g5.xlarge", ts(4));
        spec.pool_name = "-bad".into();
        spec.labels
            .insert(DEVICE_PLUGIN_CONFIG_LABEL.into(), "other".into());
        let fields: Vec<Field> = validate(&spec)
            .unwrap_err()
            .iter()
            .map(|e| e.field)
            .collect();
        assert_eq!(fields, [Field::PoolName, Field::Labels]);
    }

    #[test]
    fn gke_time_sharing_facts() {
        let d = validate(&pool(Cloud::Gke, "g2-standard-24", ts(10))).unwrap();
        assert_eq!(d.resource_name, "nvidia.com/gpu");
        assert_eq!(
            (d.slices_per_gpu, d.slices_per_node, d.memory_per_slice_mib),
            (10, 20, 2303)
        );
        assert_eq!(d.isolation, Isolation::None);
        let selector: Vec<(&str, &str)> = d
            .node_selector
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            selector,
            [
                ("cloud.google.com/gke-gpu-sharing-strategy", "time-sharing"),
                ("cloud.google.com/gke-max-shared-clients-per-gpu", "10"),
                ("cloud.google.com/gke-nodepool", "gpupool"),
            ]
        );
        assert!(d.node_labels.is_empty());
        assert_eq!(d.device_plugin_config, None);
        assert_eq!(
            d.gke_accelerator,
            Some(GkeAccelerator {
                accelerator_type: "nvidia-l4",
                accelerator_count: 2,
                gpu_partition_size: None,
                sharing: Some(GkeSharing {
                    strategy: GkeSharingStrategy::TimeSharing,
                    max_clients: 10
                }),
            })
        );
    }

    #[test]
    fn gke_mps_and_partitions_facts() {
        let d = validate(&pool(
            Cloud::Gke,
            "g2-standard-4",
            SharingMode::Mps { replicas: 4 },
        ))
        .unwrap();
        assert_eq!(
            d.node_selector["cloud.google.com/gke-gpu-sharing-strategy"],
            "mps"
        );
        let shared = Some(GkeSharing {
            strategy: GkeSharingStrategy::TimeSharing,
            max_clients: 2,
        });
        let d = validate(&pool(
            Cloud::Gke,
            "a2-highgpu-2g",
            mig("1G.5GB", MigStrategy::Mixed, shared),
        ))
        .unwrap();
        assert_eq!(d.resource_name, "nvidia.com/gpu");
        assert_eq!(
            (d.slices_per_gpu, d.slices_per_node, d.memory_per_slice_mib),
            (14, 28, 2560)
        );
        assert_eq!(
            d.node_selector["cloud.google.com/gke-gpu-partition-size"],
            "1g.5gb"
        );
        assert_eq!(
            d.node_selector["cloud.google.com/gke-max-shared-clients-per-gpu"],
            "2"
        );
        assert_eq!(
            d.gke_accelerator.unwrap().gpu_partition_size,
            Some("1g.5gb")
        );
        let bad = Some(GkeSharing {
            strategy: GkeSharingStrategy::TimeSharing,
            max_clients: 49,
        });
        let err = one_error(&pool(
            Cloud::Gke,
            "a2-highgpu-2g",
            mig("1g.5gb", MigStrategy::Mixed, bad),
        ));
        assert_eq!(err.field, Field::MigGkeMaxClients);
    }

    #[test]
    fn aks_and_eks_facts() {
        let renamed = SharingMode::TimeSlicing {
            replicas: 10,
            rename_by_default: true,
            fail_requests_greater_than_one: false,
        };
        let d = validate(&pool(Cloud::Aks, "Standard_NC64as_T4_v3", renamed)).unwrap();
        assert_eq!(d.resource_name, "nvidia.com/gpu.shared");
        assert_eq!((d.slices_per_node, d.memory_per_slice_mib), (40, 1536));
        assert_eq!(d.node_selector["agentpool"], "gpupool");
        assert_eq!(
            d.node_selector[DEVICE_PLUGIN_CONFIG_LABEL],
            "time-sliced-10-renamed"
        );
        assert_eq!(
            d.node_labels[DEVICE_PLUGIN_CONFIG_LABEL],
            "time-sliced-10-renamed"
        );
        assert_eq!(d.aks_gpu_instance_profile, None);
        assert_eq!(d.gke_accelerator, None);

        let d = validate(&pool(
            Cloud::Eks,
            "p4d.24xlarge",
            mig("1g.5gb", MigStrategy::Mixed, None),
        ))
        .unwrap();
        assert_eq!(d.resource_name, "nvidia.com/mig-1g.5gb");
        assert_eq!(
            (d.slices_per_gpu, d.slices_per_node, d.memory_per_slice_mib),
            (7, 56, 5120)
        );
        assert_eq!(d.node_selector["eks.amazonaws.com/nodegroup"], "gpupool");
        assert_eq!(d.node_labels[MIG_CONFIG_LABEL], "all-1g.5gb");
        assert_eq!(d.node_labels[DEVICE_PLUGIN_CONFIG_LABEL], "mig-mixed");
        assert_eq!(d.isolation, Isolation::Hardware);

        let d = validate(&pool(
            Cloud::Aks,
            "Standard_ND96asr_v4",
            mig("3g.20gb", MigStrategy::Single, None),
        ))
        .unwrap();
        assert_eq!(d.resource_name, "nvidia.com/gpu");
        assert_eq!(d.slices_per_node, 16);
        assert_eq!(
            d.aks_gpu_instance_profile,
            Some(AksGpuInstanceProfile::Mig3g)
        );
        assert!(!d.node_labels.contains_key(MIG_CONFIG_LABEL));
        assert_eq!(
            d.device_plugin_config.unwrap().config.render().unwrap(),
            "version: v1\nflags:\n  migStrategy: single\n"
        );

        let d = validate(&pool(Cloud::Eks, "g5.xlarge", SharingMode::None)).unwrap();
        assert_eq!((d.slices_per_node, d.memory_per_slice_mib), (1, 23028));
        assert_eq!(d.node_labels[DEVICE_PLUGIN_CONFIG_LABEL], "all");
    }

    #[test]
    fn taints_default_and_tolerations() {
        let d = validate(&pool(Cloud::Eks, "g5.xlarge", ts(4))).unwrap();
        assert_eq!(d.taints, [DEFAULT_GPU_TAINT]);
        assert_eq!(
            d.tolerations,
            [Toleration {
                key: "nvidia.com/gpu".into(),
                operator: TolerationOperator::Exists,
                value: String::new(),
                effect: TaintEffect::NoSchedule,
            }]
        );
        let mut spec = pool(Cloud::Eks, "g5.xlarge", ts(4));
        spec.taints = Some(vec![]);
        assert!(validate(&spec).unwrap().tolerations.is_empty());
        spec.taints = Some(vec![Taint::parse("dedicated:NO_EXECUTE").unwrap()]);
        let t = &validate(&spec).unwrap().tolerations[0];
        assert_eq!(
            (t.operator, t.effect),
            (TolerationOperator::Exists, TaintEffect::NoExecute)
        );
        assert_eq!(
            Taint::parse("a=b:NoSchedule").unwrap().to_string(),
            "a=b:NoSchedule"
        );
        assert_eq!(Taint::parse("a=b").unwrap_err().summary, "Invalid taint");
    }

    #[test]
    fn user_labels_must_not_contradict_the_provider() {
        let mut spec = pool(Cloud::Eks, "g5.xlarge", ts(4));
        spec.labels
            .insert(DEVICE_PLUGIN_CONFIG_LABEL.into(), "time-sliced-8".into());
        spec.labels.insert("team".into(), "ml".into());
        let err = one_error(&spec);
        assert_eq!(
            (err.field, err.summary),
            (Field::Labels, "Conflicting node label")
        );
        assert!(err.detail.contains("time-sliced-4"), "{}", err.detail);
        spec.labels
            .insert(DEVICE_PLUGIN_CONFIG_LABEL.into(), "time-sliced-4".into());
        assert!(validate(&spec).is_ok());
    }

    #[test]
    fn gke_refuses_rename_and_gpus_it_does_not_offer() {
        let renamed = SharingMode::TimeSlicing {
            replicas: 4,
            rename_by_default: true,
            fail_requests_greater_than_one: false,
        };
        let err = one_error(&pool(Cloud::Gke, "g2-standard-4", renamed));
        assert_eq!(err.field, Field::TimeSlicingRenameByDefault);
        let mut spec = pool(Cloud::Gke, "g2-standard-4", ts(4));
        spec.hardware = resolve_hardware(Cloud::Gke, "g2-standard-4", Some("A10G"), None).unwrap();
        assert!(one_error(&spec).detail.contains("GKE offers no A10G"));
    }

    #[test]
    fn time_sharing_on_partitions_is_gke_only() {
        let sharing = Some(GkeSharing {
            strategy: GkeSharingStrategy::TimeSharing,
            max_clients: 4,
        });
        let err = one_error(&pool(
            Cloud::Aks,
            "Standard_ND96asr_v4",
            mig("1g.5gb", MigStrategy::Mixed, sharing),
        ));
        assert!(err.detail.contains("GKE's feature"), "{}", err.detail);
    }

    #[test]
    fn strategy_spellings() {
        assert_eq!(MigStrategy::parse("Single").unwrap(), MigStrategy::Single);
        assert!(
            MigStrategy::parse("none")
                .unwrap_err()
                .detail
                .contains("single, mixed")
        );
        assert_eq!(
            GkeSharingStrategy::parse("TIME_SHARING").unwrap(),
            GkeSharingStrategy::TimeSharing
        );
        assert_eq!(
            GkeSharingStrategy::parse("mps").unwrap(),
            GkeSharingStrategy::Mps
        );
        assert!(GkeSharingStrategy::parse("timeslicing").is_err());
        let sharing = Some(GkeSharing {
            strategy: GkeSharingStrategy::TimeSharing,
            max_clients: 4,
        });
        let err = device_plugin_config(&mig("1g.5gb", MigStrategy::Mixed, sharing)).unwrap_err();
        assert!(err.detail.contains("on AKS and EKS"), "{}", err.detail);
    }

    #[test]
    fn pool_names_follow_each_cloud() {
        assert!(check_pool_name(Cloud::Aks, "gpu1").is_ok());
        assert!(check_pool_name(Cloud::Aks, "gpupool123456").is_err());
        assert!(check_pool_name(Cloud::Aks, "").is_err());
        assert!(check_pool_name(Cloud::Gke, "gpu-pool-1").is_ok());
        assert!(check_pool_name(Cloud::Gke, "gpu-").is_err());
        assert!(check_pool_name(Cloud::Eks, "GPU_pool-1").is_ok());
        assert!(check_pool_name(Cloud::Eks, "-x").is_err());
    }

    #[test]
    fn aks_mig_needs_ubuntu() {
        let m = mig("1g.5gb", MigStrategy::Mixed, None);
        let err = check_aks_os_sku(&m, "AzureLinux").unwrap_err();
        assert_eq!(
            (err.field, err.summary),
            (Field::OsSku, "Unsupported OS SKU")
        );
        assert!(check_aks_os_sku(&m, "azurelinux3").is_err());
        assert!(check_aks_os_sku(&m, "Ubuntu2204").is_ok());
        assert!(check_aks_os_sku(&ts(4), "AzureLinux").is_ok());
    }

    #[test]
    fn device_plugin_configs_per_mode() {
        let named = device_plugin_config(&SharingMode::Mps { replicas: 4 }).unwrap();
        assert_eq!(named.name, "mps-4");
        assert_eq!(
            named.config.render().unwrap(),
            "version: v1\nflags:\n  migStrategy: none\nsharing:\n  mps:\n    renameByDefault: false\n    \
             failRequestsGreaterThanOne: true\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n"
        );
        let strict = SharingMode::TimeSlicing {
            replicas: 8,
            rename_by_default: false,
            fail_requests_greater_than_one: true,
        };
        assert_eq!(
            device_plugin_config(&strict).unwrap().name,
            "time-sliced-8-strict"
        );
        let none = device_plugin_config(&SharingMode::None).unwrap();
        assert_eq!(
            (none.name.as_str(), none.config.render().unwrap().as_str()),
            ("all", "")
        );
        assert_eq!(
            device_plugin_config_yaml(&ts(1)).unwrap_err().field,
            Field::TimeSlicingReplicas
        );
        let yaml = device_plugin_config_yaml(&ts(10)).unwrap();
        assert_eq!(
            crate::device_plugin::parse(&yaml).unwrap(),
            device_plugin_config(&ts(10)).unwrap().config
        );
    }
}
