//! The replicas change of `sharing_change.rs` on a control plane (a real kube-apiserver where
//! `KUBEBUILDER_ASSETS` names one, else the sandbox's), with a Karpenter pool: the GPU operator's
//! ClusterPolicy (CRD and the chart's rendering from the fixtures) and the three daemonsets that
//! read the device plugin config, the twin playing Karpenter, the device plugin, GPU feature
//! discovery and their config-managers against the server (`RemoteTwin`). In one apply and in two
//! (the pool first), every node's label names a config that exists and every node advertises 10 or
//! 8 slices, never none; after the config's apply every reader runs the new one.

use serde_json::Value;
use testkit::apiserver::{self, ApiServer};

use sandbox::kube::remote_twin::RemoteTwin;

use super::karpenter_objects::{KARPENTER, karpenter_server};
use crate::common::terraform::{REQUIRED_PROVIDERS, Workspace};

/// The operands' daemonsets as the operator renders them, as far as the twin reads them.
fn operand(name: &str) -> String {
    format!(
        r#"{{"apiVersion": "apps/v1", "kind": "DaemonSet",
  "metadata": {{"name": "{name}", "namespace": "gpu-operator"}},
  "spec": {{"selector": {{"matchLabels": {{"app": "{name}"}}}},
    "template": {{"metadata": {{"labels": {{"app": "{name}"}}}},
      "spec": {{"containers": [{{"name": "{name}", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.18.1"}}]}}}}}}}}"#
    )
}

fn config(replicas: u32, kubeconfig: &str) -> String {
    format!(
        r#"{REQUIRED_PROVIDERS}
provider "fracgpu" {{}}

resource "fracgpu_karpenter_nodepool" "t4" {{
  name       = "t4-slices"
  gpu_model  = "T4"
  gpu_counts = [1]
  time_slicing {{ replicas = {replicas} }}
  eks {{
    node_class {{
      role                = "KarpenterNodeRole-sandbox"
      subnet_tags         = {{ "karpenter.sh/discovery" = "sandbox-eks" }}
      security_group_tags = {{ "karpenter.sh/discovery" = "sandbox-eks" }}
    }}
  }}
}}

resource "fracgpu_device_plugin_config" "this" {{
  namespace      = "gpu-operator"
  default_config = "all"
  kubernetes {{
    config_path = "{kubeconfig}"
  }}
  config {{ name = "all" }}
  config {{
    name = fracgpu_karpenter_nodepool.t4.device_plugin_config_name
    yaml = fracgpu_karpenter_nodepool.t4.device_plugin_config
  }}
}}
"#
    )
}

struct Cluster {
    server: ApiServer,
    twin: RemoteTwin,
    rt: tokio::runtime::Runtime,
}

impl Cluster {
    fn start() -> Option<Cluster> {
        let server = karpenter_server()?;
        let fixtures = apiserver::fixtures()?;
        server.install_crds(&fixtures, &["nvidia.com_clusterpolicies.yaml"]);
        server.kubectl_ok(&["create", "namespace", "gpu-operator"]);
        let sample = fixtures.join("samples/clusterpolicy.yaml");
        server.kubectl_ok(&[
            "apply",
            "--server-side",
            "-f",
            &sample.display().to_string(),
        ]);
        for name in [
            "nvidia-device-plugin-daemonset",
            "gpu-feature-discovery",
            "nvidia-device-plugin-mps-control-daemon",
        ] {
            server.kubectl_stdin(&["apply", "-f", "-"], &operand(name));
        }
        server.kubectl_stdin(
            &["apply", "-f", "-"],
            &KARPENTER.replace("ON_OR_OFF", "true"),
        );
        let twin =
            RemoteTwin::new(&server.url, Some(&server.ca_pem()), server.admin_token()).ok()?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .ok()?;
        Some(Cluster { server, twin, rt })
    }

    /// The GPU stack's turn: Karpenter, then the operands on every node.
    fn settle(&self) {
        self.rt
            .block_on(self.twin.karpenter_once())
            .expect("karpenter pass");
        self.rt.block_on(self.twin.sync_once()).expect("twin pass");
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.server.kubectl_ok(&all)).expect("JSON")
    }

    /// Every node of the pool names a config the ConfigMap holds and advertises one of
    /// `slices`; what they advertise.
    fn check(&self, step: &str, slices: &[u64]) -> Vec<u64> {
        let policy = self.json(&["get", "clusterpolicies.nvidia.com", "cluster-policy"]);
        let cm = policy["spec"]["devicePlugin"]["config"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let data = self.json(&["get", "configmap", "-n", "gpu-operator", &cm])["data"].clone();
        let nodes = self.json(&["get", "nodes", "-l", "karpenter.sh/nodepool=t4-slices"]);
        let items = nodes["items"].as_array().cloned().unwrap_or_default();
        assert!(!items.is_empty(), "{step}: no node");
        items
            .iter()
            .map(|n| {
                let label = n["metadata"]["labels"]["nvidia.com/device-plugin.config"]
                    .as_str()
                    .unwrap_or_default();
                assert!(
                    data.get(label).is_some(),
                    "{step}: the node names {label:?}, not a key of {cm}: {data}"
                );
                let gpus = n["status"]["allocatable"]["nvidia.com/gpu"]
                    .as_str()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                assert!(
                    slices.contains(&gpus),
                    "{step}: the node advertises {gpus}, not one of {slices:?}: {}",
                    n["metadata"]
                );
                gpus
            })
            .collect()
    }
}

/// Pods of one slice each on the pool, for Karpenter to launch a node for.
fn pods(pool: &Value) -> String {
    let items: Vec<Value> = (0..3)
        .map(|i| {
            serde_json::json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("model-{i}"), "namespace": "default"},
                "spec": {"nodeSelector": pool["node_selector"], "tolerations": pool["tolerations"],
                    "containers": [{"name": "m", "image": "example.com/model:1",
                        "resources": {"limits": {"nvidia.com/gpu": 1}}}]}})
        })
        .collect();
    serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()
}

fn started(c: &Cluster) -> Workspace {
    let kc = c.server.kubeconfig().display().to_string();
    let ws = Workspace::new(&config(10, &kc)).env("KUBECONFIG", &kc);
    ws.init();
    ws.apply();
    let pool = ws.show_json()["values"]["root_module"]["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["address"] == "fracgpu_karpenter_nodepool.t4")
        .map(|r| r["values"].clone())
        .expect("the pool in state");
    c.server.kubectl_stdin(&["create", "-f", "-"], &pods(&pool));
    c.settle();
    assert_eq!(c.check("created", &[10]), [10]);
    ws
}

#[test]
fn replicas_change_on_a_control_plane_keeps_the_node_serving() {
    let Some(c) = Cluster::start() else {
        return;
    };
    let kc = c.server.kubeconfig().display().to_string();
    let ws = started(&c);
    ws.write("main.tf", &config(8, &kc));
    ws.apply();
    c.settle();
    assert_eq!(c.check("one apply", &[8]), [8]);
    let node = &c.json(&["get", "nodes", "-l", "karpenter.sh/nodepool=t4-slices"])["items"][0];
    assert_eq!(
        node["metadata"]["labels"]["nvidia.com/gpu.replicas"], "8",
        "GPU feature discovery was restarted too"
    );
}

#[test]
fn replicas_change_pool_first_on_a_control_plane_keeps_the_node_serving() {
    let Some(c) = Cluster::start() else {
        return;
    };
    let kc = c.server.kubeconfig().display().to_string();
    let ws = started(&c);
    ws.write("main.tf", &config(8, &kc));
    ws.ok(&[
        "apply",
        "-auto-approve",
        "-input=false",
        "-no-color",
        "-target=fracgpu_karpenter_nodepool.t4",
    ]);
    c.settle();
    assert_eq!(c.check("pool applied", &[10, 8]), [10]);
    ws.apply();
    c.settle();
    assert_eq!(c.check("config applied", &[8]), [8]);
}
