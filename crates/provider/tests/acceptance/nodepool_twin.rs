//! The outcome users want, checked on the sandbox's digital twin: after `terraform apply`, the
//! pool's nodes exist in the cluster with the labels and taints workloads select on, and GKE's
//! shared GPUs are advertised at once (AKS and EKS advertise after the device plugin config is
//! delivered: see the device plugin config tests).

use std::time::Duration;

use crate::common::terraform::{REQUIRED_PROVIDERS, Workspace};

#[test]
fn nodes_of_applied_pools_carry_what_workloads_select_on() {
    let sb = crate::common::sandbox::start_stack(Duration::ZERO);
    let ws = Workspace::new(&format!(
        r#"{REQUIRED_PROVIDERS}
provider "fracgpu" {{
  sandbox = "{url}"
}}

resource "fracgpu_nodepool" "gke" {{
  name         = "l4ts"
  machine_type = "g2-standard-8"
  node_count   = 3
  gke {{
    location = "us-central1"
    cluster  = "sandbox-gke"
  }}
  time_slicing {{ replicas = 8 }}
}}

resource "fracgpu_nodepool" "aks" {{
  name         = "a100ts"
  machine_type = "Standard_NC24ads_A100_v4"
  aks {{
    resource_group = "sandbox-rg"
    cluster_name   = "sandbox-aks"
  }}
  time_slicing {{ replicas = 10 }}
}}

output "gke" {{ value = fracgpu_nodepool.gke }}
output "aks" {{ value = fracgpu_nodepool.aks }}
"#,
        url = sb.url
    ));
    ws.init();
    ws.apply();
    let out = ws.output_json();

    // GKE: three nodes, one in each zone of the regional cluster, each advertising gpus x clients,
    // selected by the pool's node selector.
    let gke = &out["gke"]["value"];
    let nodes = sb.nodes("gke", "sandbox-gke", "l4ts");
    assert_eq!(
        nodes.len(),
        3,
        "the nodes registered: {:?}",
        sb.stack
            .kube
            .node_registration_errors("gke", "sandbox-gke", "l4ts")
    );
    // GKE taints GPU nodes `nvidia.com/gpu=present:NoSchedule` itself; the pool's default taint is
    // that one, not a second taint of the key and effect (the API server would refuse the node).
    let gpu_taint =
        serde_json::json!({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"});
    assert_eq!(gke["taints"], serde_json::json!([gpu_taint]));
    let pool = sb.stack.sandbox.inventory()["pools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "l4ts")
        .map(|p| p["resource"].clone())
        .unwrap();
    assert_eq!(
        pool["config"]["taints"],
        serde_json::Value::Null,
        "GKE's own taint is not asked for"
    );
    assert!(
        gke["tolerations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["key"] == "nvidia.com/gpu" && t["effect"] == "NoSchedule"),
        "{}",
        gke["tolerations"]
    );
    let mut zones: Vec<&str> = nodes
        .iter()
        .map(|n| {
            n["metadata"]["labels"]["topology.kubernetes.io/zone"]
                .as_str()
                .unwrap_or_default()
        })
        .collect();
    zones.sort();
    assert_eq!(zones, ["us-central1-a", "us-central1-b", "us-central1-c"]);
    assert_eq!(
        gke["gke"][0]["node_locations"],
        serde_json::json!(zones),
        "the pool's zones are the cluster's by default"
    );
    for node in &nodes {
        assert_eq!(node["spec"]["taints"], serde_json::json!([gpu_taint]));
        let labels = &node["metadata"]["labels"];
        for (k, v) in gke["node_selector"].as_object().unwrap() {
            assert_eq!(&labels[k], v, "node label {k}");
        }
        assert_eq!(
            node["status"]["allocatable"]["nvidia.com/gpu"],
            gke["slices_per_node"].to_string()
        );
    }

    // AKS: the node carries the selector labels and the GPU taint the tolerations match.
    let aks = &out["aks"]["value"];
    let nodes = sb.nodes("aks", "sandbox-aks", "a100ts");
    assert_eq!(nodes.len(), 1);
    let node = &nodes[0];
    for (k, v) in aks["node_selector"].as_object().unwrap() {
        assert_eq!(&node["metadata"]["labels"][k], v, "node label {k}");
    }
    let taint = &node["spec"]["taints"][0];
    let toleration = &aks["tolerations"][0];
    assert_eq!(taint["key"], toleration["key"]);
    assert_eq!(taint["effect"], toleration["effect"]);

    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "no drift after apply: {}", plan.text());

    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert!(
        sb.nodes("gke", "sandbox-gke", "l4ts").is_empty(),
        "nodes go with the pool"
    );
}

/// The GPU operator (with the chart's MIG manager defaults) labels every MIG-capable node that
/// names no MIG config `all-disabled`, and its MIG manager then turns MIG off: a pool partitioned
/// by the cloud keeps its partitions only when its nodes carry their own `nvidia.com/mig.config`.
#[test]
fn mig_pools_keep_their_partitions_under_the_operators_mig_manager() {
    let sb = crate::common::sandbox::start_stack(Duration::ZERO);
    let ws = Workspace::new(&format!(
        r#"{REQUIRED_PROVIDERS}
provider "fracgpu" {{
  sandbox = "{url}"
}}

resource "fracgpu_nodepool" "aks" {{
  name         = "a100mig"
  machine_type = "Standard_NC24ads_A100_v4"
  aks {{
    resource_group = "sandbox-rg"
    cluster_name   = "sandbox-aks"
  }}
  mig {{ profile = "1g.10gb" }}
}}

resource "fracgpu_nodepool" "gke" {{
  name         = "a100mig"
  machine_type = "a2-highgpu-1g"
  gke {{
    location = "us-central1"
    cluster  = "sandbox-gke"
  }}
  mig {{ profile = "1g.5gb" }}
}}
"#,
        url = sb.url
    ));
    ws.init();
    ws.apply();
    for (cloud, cluster, profile) in [
        ("aks", "sandbox-aks", "1g.10gb"),
        ("gke", "sandbox-gke", "1g.5gb"),
    ] {
        let nodes = sb.nodes(cloud, cluster, "a100mig");
        assert!(!nodes.is_empty(), "{cloud}");
        for node in &nodes {
            assert_eq!(
                node["metadata"]["labels"]["nvidia.com/mig.config"],
                format!("all-{profile}"),
                "{cloud}: the pool names its MIG config"
            );
            // The operator's ClusterPolicy has mig.strategy single: each of the GPU's seven
            // instances is advertised as nvidia.com/gpu (GKE's own plugin does the same).
            assert_eq!(
                node["status"]["allocatable"]["nvidia.com/gpu"], "7",
                "{cloud}: the partitions survive the MIG manager: {}",
                node["status"]
            );
        }
    }
}
