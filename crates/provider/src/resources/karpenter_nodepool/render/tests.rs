//! The renderer's checks and objects, per provisioner: what each argument turns into, and the
//! problems it reports on which argument.

use std::collections::BTreeMap;
use std::sync::Arc;

use gpu::{MigStrategy, SharingMode};
use serde_json::json;

use super::super::provisioner::node_class::{NodeClass, Provisioner};
use super::super::provisioner::{AksClass, AmiFamily, Aws, Ec2Class, Nap};
use super::*;

fn pool(gpu: &str, sharing: SharingMode, provisioner: Arc<dyn Provisioner>) -> KarpenterPool {
    KarpenterPool {
        name: "slices".into(),
        provisioner,
        gpu: gpu::gpu_model(gpu).unwrap(),
        gpu_counts: vec![1, 4],
        sharing,
        labels: BTreeMap::new(),
        taints: None,
        capacity_types: vec!["on-demand".into()],
        limit_gpus: Some(8),
        disruption: None,
        weight: None,
        overlays_read: true,
        config_name: None,
    }
}

fn ts(replicas: u32) -> SharingMode {
    SharingMode::TimeSlicing {
        replicas,
        rename_by_default: false,
        fail_requests_greater_than_one: false,
    }
}

fn aws() -> Arc<dyn Provisioner> {
    Arc::new(Aws(NodeClass::Existing("default".into())))
}

fn attributes(problems: &[Problem]) -> Vec<&str> {
    problems
        .iter()
        .map(|p| match p {
            Problem::Argument { attribute, .. } => *attribute,
            Problem::Domain(_) => "domain",
        })
        .collect()
}

#[test]
fn time_slicing_overlays_count_slices_per_gpu_count() {
    let r = render(&pool("T4", ts(10), aws())).unwrap();
    assert_eq!(r.capacity[&1]["nvidia.com/gpu"], 10);
    assert_eq!(r.capacity[&4]["nvidia.com/gpu"], 40);
    assert_eq!(r.overlays.len(), 2);
    assert_eq!(r.overlays[1]["metadata"]["name"], "slices-gpu4");
    assert_eq!(r.overlays[1]["spec"]["capacity"]["nvidia.com/gpu"], "40");
    assert_eq!(r.limits["nvidia.com/gpu"], 80, "8 GPUs of 10 slices");
    // Without the overlays Karpenter counts whole GPUs of nvidia.com/gpu: the limit says 8.
    let mut blind = pool("T4", ts(10), aws());
    blind.overlays_read = false;
    let r0 = render(&blind).unwrap();
    assert_eq!(r0.limits["nvidia.com/gpu"], 8, "8 whole GPUs");
    assert_eq!(r0.node_pool["spec"]["limits"]["nvidia.com/gpu"], "8");
    assert_eq!(
        r0.overlays, r.overlays,
        "the overlays are the same either way"
    );
    let labels = &r.node_pool["spec"]["template"]["metadata"]["labels"];
    assert_eq!(labels["nvidia.com/device-plugin.config"], "fracgpu-slices");
    assert!(labels.get("fracgpu.dev/sharing").is_none());
    // Another number of replicas: the same template labels, so Karpenter sees no drift.
    let eight = render(&pool("T4", ts(8), aws())).unwrap();
    assert_eq!(
        eight.node_pool["spec"]["template"]["metadata"]["labels"],
        *labels
    );
    // A pool made while names said the settings keeps its name while they hold.
    let mut legacy = pool("T4", ts(10), aws());
    legacy.config_name = Some("time-sliced-10".into());
    let kept = render(&legacy).unwrap();
    let labels = &kept.node_pool["spec"]["template"]["metadata"]["labels"];
    assert_eq!(labels["nvidia.com/device-plugin.config"], "time-sliced-10");
    assert!(labels.get("fracgpu.dev/sharing").is_none());
    let reqs = r.node_pool["spec"]["template"]["spec"]["requirements"]
        .as_array()
        .unwrap();
    assert!(
        reqs.contains(&json!({"key": "karpenter.k8s.aws/instance-gpu-name",
        "operator": "In", "values": ["t4"]}))
    );
    assert!(
        reqs.contains(&json!({"key": "karpenter.k8s.aws/instance-gpu-count",
        "operator": "In", "values": ["1", "4"]}))
    );
}

#[test]
fn renamed_resources_zero_the_whole_gpus() {
    let sharing = SharingMode::TimeSlicing {
        replicas: 4,
        rename_by_default: true,
        fail_requests_greater_than_one: false,
    };
    let r = render(&pool("A10G", sharing.clone(), aws())).unwrap();
    assert_eq!(r.capacity[&1]["nvidia.com/gpu.shared"], 4);
    assert_eq!(r.capacity[&1]["nvidia.com/gpu"], 0);
    assert_eq!(
        r.limits.keys().collect::<Vec<_>>(),
        ["nvidia.com/gpu.shared"]
    );
    // No instance type offers the renamed resource without the overlays: its pods wait,
    // and the limit stays in slices.
    let mut blind = pool("A10G", sharing, aws());
    blind.overlays_read = false;
    assert_eq!(render(&blind).unwrap().limits, r.limits);
}

#[test]
fn bad_input_names_the_argument() {
    let mut p = pool("T4", ts(4), aws());
    p.gpu_counts = vec![2];
    p.limit_gpus = Some(1);
    let e = render(&p).unwrap_err();
    assert_eq!(attributes(&e), ["gpu_counts", "limit_gpus"]);

    let mig = SharingMode::Mig {
        profile: "1g.10gb".into(),
        strategy: MigStrategy::Mixed,
        gke_sharing: None,
    };
    let mut p = pool(
        "A100-80GB",
        mig,
        Arc::new(Nap(NodeClass::Existing("gpu".into()))),
    );
    p.gpu_counts = vec![1];
    let e = render(&p).unwrap_err();
    assert_eq!(attributes(&e), ["mig"]);

    let mut p = pool("T4", ts(4), aws());
    p.name = "Slices_1".into();
    assert_eq!(attributes(&render(&p).unwrap_err())[0], "name");
}

#[test]
fn nap_pins_the_gpu_by_name_or_by_size() {
    let nap = || -> Arc<dyn Provisioner> {
        Arc::new(Nap(NodeClass::Made(AksClass {
            image_family: "Ubuntu2204".into(),
        })))
    };
    let r = render(&pool("T4", ts(4), nap())).unwrap();
    let reqs = &r.node_pool["spec"]["template"]["spec"]["requirements"];
    assert!(
        reqs.as_array()
            .unwrap()
            .contains(&json!({"key": "karpenter.azure.com/sku-gpu-name",
        "operator": "In", "values": ["T4"]}))
    );
    assert_eq!(r.node_class.unwrap()["spec"]["gpu"]["mode"], "None");
    // The 40 GB A100 size names no accelerator.
    let mut p = pool("A100-40GB", ts(4), nap());
    p.gpu_counts = vec![8];
    let r = render(&p).unwrap();
    let reqs = &r.node_pool["spec"]["template"]["spec"]["requirements"];
    assert!(
        reqs.as_array()
            .unwrap()
            .contains(&json!({"key": "node.kubernetes.io/instance-type",
        "operator": "In", "values": ["Standard_ND96asr_v4"]}))
    );
}

#[test]
fn bottlerocket_gets_its_settings_and_no_labels() {
    let class = |v: &str| -> Arc<dyn Provisioner> {
        Arc::new(Aws(NodeClass::Made(Ec2Class {
            role: "KarpenterNodeRole".into(),
            subnet_tags: BTreeMap::from([("karpenter.sh/discovery".into(), "c".into())]),
            security_group_tags: BTreeMap::from([("karpenter.sh/discovery".into(), "c".into())]),
            ami_family: AmiFamily::Bottlerocket,
            ami_version: v.into(),
        })))
    };
    let r = render(&pool("T4", ts(4), class("latest"))).unwrap();
    let u = r.user_data.unwrap();
    assert!(u.contains("device-sharing-strategy = \"time-slicing\"") && u.contains("replicas = 4"));
    assert!(
        r.node_pool["spec"]["template"]["metadata"]["labels"]
            .get("nvidia.com/device-plugin.config")
            .is_none()
    );
    let e = render(&pool("T4", ts(4), class("v1.24.1"))).unwrap_err();
    assert_eq!(attributes(&e), ["eks.node_class.ami_version"]);
    let mig = SharingMode::Mig {
        profile: "1g.10gb".into(),
        strategy: MigStrategy::Mixed,
        gke_sharing: None,
    };
    let mut p = pool("A100-80GB", mig, class("latest"));
    p.gpu_counts = vec![8];
    assert_eq!(attributes(&render(&p).unwrap_err()), ["mig.strategy"]);
}
