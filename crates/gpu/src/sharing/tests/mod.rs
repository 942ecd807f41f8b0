//! Tests of the sharing model. `refusals` and `facts` go through `validate`, as the provider does; the
//! pieces it is built from that the provider also calls on their own are tested here.

mod facts;
mod refusals;

use super::rules::check_pool_name;
use super::*;
use crate::catalog::{AksGpuInstanceProfile, Cloud, GpuModel, MemorySource, resolve_hardware};
use crate::error::{DomainError, Field};
use std::borrow::Cow;
use std::collections::BTreeMap;

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
fn bottlerocket_shares_but_not_by_mixed_mig() {
    for sharing in [
        mig("1g.5gb", MigStrategy::Single, None),
        ts(4),
        SharingMode::mps(2),
        SharingMode::None,
    ] {
        assert!(check_eks_ami_type(&sharing, "BOTTLEROCKET_x86_64_NVIDIA").is_ok());
    }
    let mixed = mig("1g.5gb", MigStrategy::Mixed, None);
    let err = check_eks_ami_type(&mixed, "BOTTLEROCKET_ARM_64_NVIDIA").unwrap_err();
    assert_eq!(
        (err.field, err.summary),
        (
            Field::MigStrategy,
            "MIG strategy not supported on Bottlerocket"
        )
    );
    assert!(
        err.detail.contains("AL2023_ARM_64_NVIDIA") && err.detail.contains("\"single\""),
        "{}",
        err.detail
    );
    assert!(check_eks_ami_type(&mixed, "AL2023_x86_64_NVIDIA").is_ok());
}

#[test]
fn device_plugin_configs_per_mode() {
    let named = device_plugin_config(&SharingMode::mps(4)).unwrap();
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
