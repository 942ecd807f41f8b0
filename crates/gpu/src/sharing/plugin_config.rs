//! The NVIDIA device plugin config a sharing mode needs, and the name nodes select it by. AKS and EKS pools
//! share through the NVIDIA plugin, which reads one named config per node from a ConfigMap the pools of a
//! cluster have in common, so the name must say everything the config does.

use super::rules::{check_replicas, mig_sharing_off_gke};
use super::{MigStrategy, SharingMode};
use crate::device_plugin::{
    DevicePluginConfig, GPU_RESOURCE, MigStrategyFlag, ReplicatedResource, Sharing, SharingKind,
};
use crate::error::{DomainError, Field};

/// A device plugin config under the name nodes select it by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NamedConfig {
    pub name: String,
    pub config: DevicePluginConfig,
}

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
        SharingMode::Mps {
            replicas,
            fail_requests_greater_than_one,
        } => {
            check_replicas(*replicas, Field::MpsReplicas, "mps.replicas", &mut errors);
            let mut name = format!("mps-{replicas}");
            if !*fail_requests_greater_than_one {
                name.push_str("-relaxed");
            }
            NamedConfig {
                name,
                config: sharing_config(
                    SharingKind::Mps,
                    *replicas,
                    false,
                    *fail_requests_greater_than_one,
                ),
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
                    allocation_policy: None,
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

/// The name under which a pool's nodes select a config of their own: `fracgpu-<pool>`, the same
/// whatever the pool's time-slicing or MPS settings, so that changing them writes new content
/// under the name the nodes already carry. NVIDIA's config-manager fails a pod whose node label
/// names a config the ConfigMap lacks (k8s-device-plugin cmd/config-manager `updateConfigName`:
/// "specified config ... does not exist") and the plugin then serves no GPU, so a name that
/// changed with the settings (`time-sliced-10` to `time-sliced-8`) left the nodes without GPUs
/// between the relabel and the ConfigMap's write, in whichever order those came.
///
/// A label value (63 characters at most, alphanumeric at both ends) and a ConfigMap key: a longer
/// pool name, or one ending otherwise, keeps a prefix and a hash of the whole.
pub fn pool_config_name(pool: &str) -> String {
    let name = format!("fracgpu-{pool}");
    let ends_well = name
        .bytes()
        .last()
        .is_some_and(|b| b.is_ascii_alphanumeric());
    if name.len() <= 63 && ends_well {
        return name;
    }
    // FNV-1a: a stable, dependency-free hash; it only tells long names apart.
    let hash = pool.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let keep: String = name.chars().take(54).collect();
    let keep = keep.trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
    format!("{keep}-{:08x}", hash as u32)
}

/// Whether a mode's config is the pool's own (its settings vary per pool: time-slicing, MPS) rather
/// than one every pool of the mode shares (`all`, `mig-single`, `mig-mixed`).
pub fn own_config(mode: &SharingMode) -> bool {
    matches!(
        mode,
        SharingMode::TimeSlicing { .. } | SharingMode::Mps { .. }
    )
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
        allocation_policy: None,
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
