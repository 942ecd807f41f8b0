//! The way back: from what a cloud reports about a pool (its labels, AKS's gpuInstanceProfile,
//! GKE's accelerator block) to the sharing mode that produced it. Read and import rely on this to
//! show drift in the user's own terms and to import a pool so that the next plan is empty.

use std::collections::BTreeMap;

use super::Cloud;
use super::catalog::{AksGpuInstanceProfile, GpuModel, mig_profile_for_aks};
use super::sharing::{
    DEVICE_PLUGIN_CONFIG_LABEL, GkeSharing, MIG_CONFIG_LABEL, MigStrategy, SHARING_LABEL,
    SharingMode,
};

/// What a cloud reports that bears on sharing.
pub struct Observed<'a> {
    pub cloud: Cloud,
    pub gpu: &'static GpuModel,
    /// The pool's node labels as the cloud holds them.
    pub labels: &'a BTreeMap<String, String>,
    pub aks_gpu_instance_profile: Option<&'a str>,
    pub gke_partition_size: Option<&'a str>,
    pub gke_sharing: Option<GkeSharing>,
    /// The Bottlerocket settings (TOML user data) an EKS node group's nodes start with, where the
    /// group has a launch template on a Bottlerocket AMI: they, not the labels, say how the host's
    /// device plugin shares the GPUs.
    pub bottlerocket_settings: Option<&'a str>,
}

/// The sharing mode the observations imply. `prior` supplies what no cloud records (the MIG
/// strategy on GKE, where GKE's own plugin has none).
pub fn sharing_from_observed(o: &Observed<'_>, prior: Option<&SharingMode>) -> SharingMode {
    if o.cloud == Cloud::Eks
        && let Some(settings) = o.bottlerocket_settings
    {
        return crate::bottlerocket::sharing_of(settings, o.gpu);
    }
    // A pool whose config has its own name says its settings in a label of their own; a pool
    // made before that, by its config's name.
    let config_label = o
        .labels
        .get(SHARING_LABEL)
        .or_else(|| o.labels.get(DEVICE_PLUGIN_CONFIG_LABEL))
        .map(String::as_str);
    let label_strategy = match config_label {
        Some("mig-single") => Some(MigStrategy::Single),
        Some("mig-mixed") => Some(MigStrategy::Mixed),
        _ => None,
    };
    let prior_strategy = match prior {
        Some(SharingMode::Mig { strategy, .. }) => Some(*strategy),
        _ => None,
    };
    match o.cloud {
        Cloud::Gke => {
            if let Some(p) = o.gke_partition_size {
                return SharingMode::Mig {
                    profile: p.to_string(),
                    strategy: prior_strategy.unwrap_or_default(),
                    gke_sharing: o.gke_sharing,
                };
            }
            match o.gke_sharing {
                Some(s) if s.strategy == super::GkeSharingStrategy::TimeSharing => {
                    SharingMode::TimeSlicing {
                        replicas: s.max_clients,
                        rename_by_default: false,
                        fail_requests_greater_than_one: false,
                    }
                }
                Some(s) => SharingMode::mps(s.max_clients),
                None => SharingMode::None,
            }
        }
        Cloud::Aks | Cloud::Eks => {
            let mig_profile = match o.cloud {
                Cloud::Aks => o
                    .aks_gpu_instance_profile
                    .and_then(AksGpuInstanceProfile::parse)
                    .and_then(|p| mig_profile_for_aks(o.gpu, p))
                    .map(|p| p.name.to_string()),
                // mig-parted's config names write `+me` as `.me` (`all-1g.5gb.me`).
                _ => o
                    .labels
                    .get(MIG_CONFIG_LABEL)
                    .and_then(|v| v.strip_prefix("all-"))
                    .and_then(|label| {
                        o.gpu
                            .mig_profiles
                            .iter()
                            .find(|p| crate::sharing::dotted(p) == label)
                    })
                    .map(|p| p.name.to_string()),
            };
            if let Some(profile) = mig_profile {
                // An unexpected or missing config label reads as the default strategy, so that the
                // plan restores the label.
                return SharingMode::Mig {
                    profile,
                    strategy: label_strategy.unwrap_or_default(),
                    gke_sharing: None,
                };
            }
            config_label
                .and_then(parse_config_name)
                .unwrap_or(SharingMode::None)
        }
    }
}

/// Reads a device plugin config name the provider gives its pools: `time-sliced-<N>` with
/// optional `-renamed` and `-strict` suffixes, or `mps-<N>` with an optional `-relaxed`.
fn parse_config_name(name: &str) -> Option<SharingMode> {
    if let Some(rest) = name.strip_prefix("mps-") {
        let (rest, relaxed) = match rest.strip_suffix("-relaxed") {
            Some(r) => (r, true),
            None => (rest, false),
        };
        return rest.parse().ok().map(|replicas| SharingMode::Mps {
            replicas,
            fail_requests_greater_than_one: !relaxed,
        });
    }
    let rest = name.strip_prefix("time-sliced-")?;
    let (rest, strict) = match rest.strip_suffix("-strict") {
        Some(r) => (r, true),
        None => (rest, false),
    };
    let (rest, renamed) = match rest.strip_suffix("-renamed") {
        Some(r) => (r, true),
        None => (rest, false),
    };
    let replicas = rest.parse().ok()?;
    Some(SharingMode::TimeSlicing {
        replicas,
        rename_by_default: renamed,
        fail_requests_greater_than_one: strict,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        GkeSharingStrategy, PoolSpec, device_plugin_config, gpu_model, resolve_hardware, validate,
    };
    use proptest::prelude::*;

    #[test]
    fn config_names_read_back() {
        for mode in [
            SharingMode::TimeSlicing {
                replicas: 10,
                rename_by_default: false,
                fail_requests_greater_than_one: false,
            },
            SharingMode::TimeSlicing {
                replicas: 3,
                rename_by_default: true,
                fail_requests_greater_than_one: true,
            },
            SharingMode::TimeSlicing {
                replicas: 48,
                rename_by_default: false,
                fail_requests_greater_than_one: true,
            },
            SharingMode::mps(4),
        ] {
            let name = device_plugin_config(&mode).unwrap().name;
            assert_eq!(parse_config_name(&name), Some(mode), "{name}");
        }
        for bad in ["all", "time-sliced-", "time-sliced-x", "mps-", "mig-mixed"] {
            assert_eq!(parse_config_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_pool_made_before_configs_had_the_pools_name_reads_back_by_its_configs_name() {
        let hw = resolve_hardware(Cloud::Aks, "Standard_NC4as_T4_v3", None, None).unwrap();
        let old = BTreeMap::from([(
            DEVICE_PLUGIN_CONFIG_LABEL.to_string(),
            "time-sliced-10".to_string(),
        )]);
        let o = Observed {
            cloud: Cloud::Aks,
            gpu: hw.gpu,
            labels: &old,
            aks_gpu_instance_profile: None,
            gke_partition_size: None,
            gke_sharing: None,
            bottlerocket_settings: None,
        };
        let ten = SharingMode::TimeSlicing {
            replicas: 10,
            rename_by_default: false,
            fail_requests_greater_than_one: false,
        };
        assert_eq!(sharing_from_observed(&o, None), ten);
        // The sharing label wins over the config's name.
        let mut both = old.clone();
        both.insert(SHARING_LABEL.to_string(), "mps-4".to_string());
        let o = Observed { labels: &both, ..o };
        assert_eq!(sharing_from_observed(&o, None), SharingMode::mps(4));
    }

    fn round_trip(cloud: Cloud, machine: &str, mode: SharingMode) {
        let hw = resolve_hardware(cloud, machine, None, None).unwrap();
        let gpu = hw.gpu;
        let d = validate(&PoolSpec {
            cloud,
            pool_name: "pool1".into(),
            hardware: hw,
            sharing: mode.clone(),
            taints: None,
            labels: BTreeMap::new(),
        })
        .unwrap();
        let o = Observed {
            cloud,
            gpu,
            labels: &d.node_labels,
            aks_gpu_instance_profile: d.aks_gpu_instance_profile.map(|p| p.as_str()),
            gke_partition_size: d
                .gke_accelerator
                .as_ref()
                .and_then(|a| a.gpu_partition_size),
            gke_sharing: d.gke_accelerator.as_ref().and_then(|a| a.sharing),
            bottlerocket_settings: None,
        };
        assert_eq!(
            sharing_from_observed(&o, Some(&d.sharing)),
            d.sharing,
            "{cloud:?} {machine}"
        );
    }

    #[test]
    fn what_the_provider_creates_reads_back_as_the_same_mode() {
        round_trip(
            Cloud::Aks,
            "Standard_NC24ads_A100_v4",
            SharingMode::Mig {
                profile: "1g.10gb".into(),
                strategy: MigStrategy::Single,
                gke_sharing: None,
            },
        );
        round_trip(
            Cloud::Eks,
            "p4d.24xlarge",
            SharingMode::Mig {
                profile: "3g.20gb".into(),
                strategy: MigStrategy::Mixed,
                gke_sharing: None,
            },
        );
        round_trip(
            Cloud::Gke,
            "a2-highgpu-1g",
            SharingMode::Mig {
                profile: "1g.5gb".into(),
                strategy: MigStrategy::Mixed,
                gke_sharing: Some(GkeSharing {
                    strategy: GkeSharingStrategy::TimeSharing,
                    max_clients: 2,
                }),
            },
        );
        round_trip(Cloud::Gke, "g2-standard-4", SharingMode::mps(8));
        round_trip(Cloud::Aks, "Standard_NC4as_T4_v3", SharingMode::None);
        // The MIG manager's config names write a media-extension profile with '.'.
        round_trip(
            Cloud::Eks,
            "p4d.24xlarge",
            SharingMode::Mig {
                profile: "1g.5gb+me".into(),
                strategy: MigStrategy::Mixed,
                gke_sharing: None,
            },
        );
    }

    #[test]
    fn a_changed_label_reads_as_the_mode_it_names() {
        let labels: BTreeMap<String, String> = [(
            DEVICE_PLUGIN_CONFIG_LABEL.to_string(),
            "time-sliced-5".to_string(),
        )]
        .into();
        let o = Observed {
            cloud: Cloud::Eks,
            gpu: gpu_model("T4").unwrap(),
            labels: &labels,
            aks_gpu_instance_profile: None,
            gke_partition_size: None,
            gke_sharing: None,
            bottlerocket_settings: None,
        };
        assert_eq!(
            sharing_from_observed(&o, None),
            SharingMode::TimeSlicing {
                replicas: 5,
                rename_by_default: false,
                fail_requests_greater_than_one: false
            }
        );
    }

    proptest! {
        #[test]
        fn time_slicing_and_mps_names_round_trip(replicas in 2u32..=48, renamed: bool, strict: bool, mps: bool) {
            let mode = if mps { SharingMode::mps(replicas) } else {
                SharingMode::TimeSlicing { replicas, rename_by_default: renamed, fail_requests_greater_than_one: strict }
            };
            let name = device_plugin_config(&mode).unwrap().name;
            prop_assert_eq!(parse_config_name(&name), Some(mode));
        }
    }
}
