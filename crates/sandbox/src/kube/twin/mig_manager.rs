//! The GPU operator's MIG manager: whether it runs and with which default, the label the operator
//! gives a MIG-capable node, the geometry a node ends up with, and when a repartitioning fails.

use serde_json::Value;
use std::collections::BTreeMap;

use super::labels::MIG_CONFIG_LABEL;
use super::mig_configs::{Layout, MigConfigs};
use super::mig_geometry::mig_instances;
use super::node::NodeTwin;

/// The GPU operator's MIG manager on a cluster, from the ClusterPolicy's `spec.migManager`: whether it
/// runs (absent `enabled` means it does: `MIGManagerSpec.IsEnabled` in NVIDIA/gpu-operator
/// api/nvidia/v1/clusterpolicy_types.go) and the config the operator gives nodes that name none.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct MigManager {
    pub(crate) enabled: bool,
    pub(crate) default_config: String,
    /// Where it reads the configs a label may name.
    pub(crate) configs: MigConfigs,
}

/// The operator's test for a MIG-capable node when GPU feature discovery has not said (NVIDIA/gpu-operator
/// controllers/state_manager.go `hasMIGCapableGPU`): GPU feature discovery's `nvidia.com/mig.capable`
/// label when present, else the product names an A100, H100 or A30.
pub(crate) fn mig_capable(t: &NodeTwin) -> bool {
    if let Some(c) = t.mig_capable {
        return t.gpus > 0 && c;
    }
    let product = t.gpu_product.as_deref().unwrap_or_default().to_lowercase();
    t.gpus > 0 && ["a100", "h100", "a30"].iter().any(|g| product.contains(g))
}

/// The `nvidia.com/mig.config` label the operator adds to a node (NVIDIA/gpu-operator
/// controllers/nodelabeling_controller.go): a MIG-capable node with no such label gets `all-disabled`
/// while the MIG manager runs with that default (the chart's). Whatever geometry the cloud made, the MIG
/// manager then applies it: that is how a pool partitioned by the cloud (AKS `gpuInstanceProfile`) loses its
/// partitions unless its nodes carry their own label.
pub(crate) fn operator_mig_label(
    t: &NodeTwin,
    labels: &BTreeMap<String, String>,
    mm: &MigManager,
) -> Option<&'static str> {
    (mm.enabled
        && mm.default_config == "all-disabled"
        && mig_capable(t)
        && !labels.contains_key(MIG_CONFIG_LABEL))
    .then_some("all-disabled")
}

/// The MIG geometry a node ends up with, and the state label the MIG manager reports. Where the MIG manager
/// runs, the node's `nvidia.com/mig.config` label decides (`all-disabled`, or `all-<profile>` with `+me`
/// written `.me` as mig-parted names its configs); a node without the label keeps what the cloud made (AKS and
/// GKE partition at the pool; EKS has no such field). Without the MIG manager nothing repartitions.
pub(crate) fn mig_manager(
    t: &NodeTwin,
    labels: &BTreeMap<String, String>,
    mm: &MigManager,
) -> (Option<(String, u32)>, Option<&'static str>) {
    if t.host_device_plugin {
        // The operator's MIG manager does not run there; the OS partitions from its own settings.
        return (None, None);
    }
    let from_pool = || {
        if t.cloud == "eks" {
            return None;
        }
        t.mig_profile.clone().map(|p| {
            let n = if t.mig_instances_per_gpu > 0 {
                t.mig_instances_per_gpu
            } else {
                mig_instances(t.gpu_product.as_deref().unwrap_or(""), t.gpu_memory_mib, &p)
                    .unwrap_or(1)
            };
            (p, n)
        })
    };
    let want = labels.get(MIG_CONFIG_LABEL).filter(|_| mm.enabled);
    let Some(want) = want else {
        return (from_pool(), None);
    };
    if let MigConfigs::Named(configs) = &mm.configs {
        return match configs.get(want) {
            Some(Layout::Disabled) => (None, Some("success")),
            Some(Layout::Uniform(p, n)) => (Some((p.clone(), *n)), Some("success")),
            Some(Layout::Other) | None => (None, Some("failed")),
        };
    }
    if want == "all-disabled" {
        return (None, Some("success"));
    }
    let Some(profile) = want.strip_prefix("all-") else {
        return (None, Some("failed"));
    };
    let same_as_pool = t
        .mig_profile
        .as_deref()
        .is_some_and(|p| p.replace('+', ".") == profile);
    let n = if same_as_pool && t.mig_instances_per_gpu > 0 {
        Some(t.mig_instances_per_gpu)
    } else {
        mig_instances(
            t.gpu_product.as_deref().unwrap_or(""),
            t.gpu_memory_mib,
            profile,
        )
    };
    let profile = match (&t.mig_profile, same_as_pool) {
        (Some(p), true) => p.clone(),
        _ => profile.to_string(),
    };
    match n {
        Some(n) => (Some((profile, n)), Some("success")),
        None => (None, Some("failed")),
    }
}

/// Whether the MIG manager fails the node's `nvidia.com/mig.config` now, recording a new failure.
/// It cannot repartition GPUs that pods are using: mig-parted's apply fails (a MIG mode change
/// needs a GPU reset, which fails while processes hold the GPU, and a GPU instance in use cannot
/// be destroyed: NVIDIA's MIG user guide), and the MIG manager reports `failed` (NVIDIA/mig-parted
/// pkg/mig/reconfigure/reconfigure.go, `Run`). It acts on a change of the label only, so a config it
/// failed stays failed until the label changes. `gpu_users`: pods other than daemonset pods (the
/// GPU operator's operands, which the MIG manager stops itself) hold the node's GPUs. On failure
/// the node keeps its geometry and advertisement, and its state label reads `failed`.
pub(crate) fn mig_fails(
    t: &mut NodeTwin,
    labels: &BTreeMap<String, String>,
    mm: &MigManager,
    gpu_users: bool,
) -> bool {
    let label = labels.get(MIG_CONFIG_LABEL).filter(|_| mm.enabled);
    let Some(label) = label else {
        t.mig_refused = None;
        return false;
    };
    if t.mig_refused.as_ref() == Some(label) {
        return true;
    }
    let changed = t.seen_mig_label.as_ref() != Some(label);
    if changed && gpu_users {
        t.mig_refused = Some(label.clone());
        return true;
    }
    t.mig_refused = None;
    false
}

/// The ClusterPolicy's `spec.migManager.config.name`: the ConfigMap the manager reads, where it
/// names one (see `mig_configs`).
pub(crate) fn mig_config_name(cp: Option<&Value>) -> Option<&str> {
    cp?.pointer("/spec/migManager/config/name")?
        .as_str()
        .filter(|n| !n.is_empty())
}

/// The MIG manager as the ClusterPolicy sets it, with `named` the ConfigMap it names (when the
/// cluster holds it); none without the operator.
pub(crate) fn mig_manager_policy(cp: Option<&Value>, named: Option<&Value>) -> MigManager {
    let configs = MigConfigs::of(mig_config_name(cp), named);
    let Some(cp) = cp else {
        return MigManager::default();
    };
    MigManager {
        configs,
        enabled: cp
            .pointer("/spec/migManager/enabled")
            .and_then(Value::as_bool)
            .unwrap_or(true),
        default_config: cp
            .pointer("/spec/migManager/config/default")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
    }
}
