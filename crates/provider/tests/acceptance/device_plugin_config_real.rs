//! `fracgpu_device_plugin_config` with delivery "cluster_policy" on a control plane (`testkit::apiserver`), beside
//! NVIDIA's gpu-operator chart v25.10.1 installed by helm 3, with the sandbox's twin playing the
//! GPU stack through the API (`RemoteTwin`: hand-made nodes with GPU feature discovery's hardware
//! labels, the device plugin DaemonSet the operator would run): create -> the ConfigMap, the
//! pointer and the restart -> the node advertises the shared GPUs -> empty plan -> update in
//! place -> a hand edit is drift that apply repairs -> import -> destroy.

use super::device_plugin_config::config;
use crate::common::operator::{Chart, MISSING_KUBECONFIG, OperatorCluster};
use crate::common::terraform::{REQUIRED_PROVIDERS, Workspace};
use crate::common::tools::Tool;
use ::sandbox::kube::remote_twin::RemoteTwin;
use serde_json::{Value, json};

const NS: &str = "gpu-operator";
const CM: &str = "time-slicing-config";

/// The device plugin DaemonSet as the GPU operator makes it (the parts the tests need).
pub(crate) const DAEMONSET: &str = r#"{"apiVersion": "apps/v1", "kind": "DaemonSet",
  "metadata": {"name": "nvidia-device-plugin-daemonset", "namespace": "gpu-operator"},
  "spec": {"selector": {"matchLabels": {"app": "nvidia-device-plugin-daemonset"}},
    "template": {"metadata": {"labels": {"app": "nvidia-device-plugin-daemonset"}},
      "spec": {"nodeSelector": {"nvidia.com/gpu.deploy.device-plugin": "true"},
        "containers": [{"name": "nvidia-device-plugin", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.18.1"}]}}}}"#;

/// An A10G node as GPU feature discovery labels it, selecting the `time-sliced-10` config.
const NODE: &str = r#"{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-a10g", "labels": {
    "kubernetes.io/hostname": "gpu-a10g", "nvidia.com/gpu.product": "NVIDIA-A10G",
    "nvidia.com/gpu.count": "1", "nvidia.com/gpu.memory": "23028", "nvidia.com/mig.capable": "false",
    "nvidia.com/device-plugin.config": "time-sliced-10"}}}"#;

struct Twin {
    twin: RemoteTwin,
    rt: tokio::runtime::Runtime,
}

impl Twin {
    /// What the node advertises once the GPU stack acted on what changed.
    fn shared_gpus(&self, op: &OperatorCluster) -> Option<String> {
        let r = self.rt.block_on(self.twin.sync_once()).expect("twin sync");
        assert!(r.refused.is_empty(), "{r:?}");
        let node: Value = serde_json::from_str(
            &op.server
                .kubectl_ok(&["get", "node", "gpu-a10g", "-o", "json"]),
        )
        .unwrap();
        node.pointer("/status/allocatable/nvidia.com~1gpu.shared")
            .and_then(Value::as_str)
            .map(str::to_string)
    }
}

fn restart_annotation(op: &OperatorCluster) -> Option<String> {
    let ds: Value = serde_json::from_str(&op.server.kubectl_ok(&[
        "get",
        "daemonset",
        "-n",
        NS,
        "nvidia-device-plugin-daemonset",
        "-o",
        "json",
    ]))
    .unwrap();
    ds.pointer("/spec/template/metadata/annotations/fracgpu.dev~1restartedAt")
        .and_then(Value::as_str)
        .map(str::to_string)
}

#[test]
fn cluster_policy_delivery_lifecycle_on_a_control_plane() {
    let Some(op) = OperatorCluster::start(Tool::Helm3) else {
        return;
    };
    op.install(Chart::Nvidia, &[]);
    op.server
        .kubectl_stdin(&["apply", "-f", "-"], &format!("{DAEMONSET}\n{NODE}"));
    let twin = Twin {
        twin: RemoteTwin::new(
            &op.server.url,
            Some(&op.server.ca_pem()),
            op.server.admin_token(),
        )
        .unwrap(),
        rt: tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap(),
    };
    assert_eq!(twin.shared_gpus(&op), None, "no config yet: whole GPUs");

    let ws = Workspace::new(&config(&op.kc(), 10)).env("KUBECONFIG", MISSING_KUBECONFIG);
    ws.init();
    let out = ws.apply();
    assert!(
        !out.text().contains("Node label names no config")
            && !out.text().contains("outside the operator's namespace"),
        "{}",
        out.text()
    );
    let (pointer, keys) = op.operator_reads(NS);
    assert_eq!(pointer, json!({"name": CM, "default": "all"}));
    assert_eq!(keys, ["all", "mps-4", "time-sliced-10"]);
    assert_eq!(
        op.cluster_policy()["spec"]["mig"]["strategy"],
        "none",
        "taken over from helm 3"
    );
    let first_restart = restart_annotation(&op).expect("the device plugin restarted");
    assert_eq!(twin.shared_gpus(&op).as_deref(), Some("10"));
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());

    // In place: new data, a restart, the node follows.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    ws.write("main.tf", &config(&op.kc(), 4));
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "{}", plan.text());
    assert!(plan.stdout.contains("update in-place"), "{}", plan.stdout);
    ws.apply();
    assert_ne!(restart_annotation(&op), Some(first_restart));
    assert_eq!(twin.shared_gpus(&op).as_deref(), Some("4"));

    // A hand edit that changes the meaning is drift; apply repairs it.
    let edited = op.configmap(NS, CM).unwrap()["time-sliced-10"]
        .as_str()
        .unwrap()
        .replace("replicas: 4", "replicas: 7");
    let patch = json!({"data": {"time-sliced-10": edited}}).to_string();
    op.server.kubectl_ok(&[
        "-n",
        NS,
        "patch",
        "configmap",
        CM,
        "--type=merge",
        "-p",
        &patch,
    ]);
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "a hand edit is drift:\n{}", plan.text());
    assert!(plan.stdout.contains("replicas: 7"), "{}", plan.stdout);
    ws.apply();
    assert!(
        op.configmap(NS, CM).unwrap()["time-sliced-10"]
            .as_str()
            .unwrap()
            .contains("replicas: 4")
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());

    // Import into a fresh state: the plan is empty again.
    ws.ok(&["state", "rm", "fracgpu_device_plugin_config.this"]);
    ws.ok(&[
        "import",
        "-no-color",
        "fracgpu_device_plugin_config.this",
        &format!("{NS}/{CM}"),
    ]);
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "plan after import is empty:\n{}", plan.text());

    // Destroy: the ConfigMap goes and the pointer is given up. The import kept no record of
    // the strategy helm had; giving the field up would delete it, which the real API server
    // refuses (an invalid ClusterPolicy; the sandbox had let that pass), so it goes back to what
    // the operator's release rendered there, under helm's manager.
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert!(op.configmap(NS, CM).is_none());
    let policy = op.cluster_policy();
    assert!(
        policy["spec"]["devicePlugin"].get("config").is_none(),
        "{policy}"
    );
    assert_eq!(policy["spec"]["mig"]["strategy"], "single");
    let holders: Vec<&str> = policy["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["fieldsV1"].pointer("/f:spec/f:mig/f:strategy").is_some())
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert_eq!(holders, ["helm"], "{policy}");
    assert_eq!(twin.shared_gpus(&op), None, "whole GPUs again");
}

/// An A10G node as GPU feature discovery labels it, selecting the config `ts`.
const CHART_NODE: &str = r#"{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-chart", "labels": {
    "kubernetes.io/hostname": "gpu-chart", "nvidia.com/gpu.product": "NVIDIA-A10G",
    "nvidia.com/gpu.count": "1", "nvidia.com/gpu.memory": "23028", "nvidia.com/mig.capable": "false",
    "nvidia.com/device-plugin.config": "ts"}}}"#;

/// NVIDIA's standalone device plugin chart on a control plane (no GPU operator), installed by
/// helm 4, with the twin playing the chart's plugin through the API (it reads what the chart's
/// daemonset says): the `nvidia_device_plugin` delivery points the release at its ConfigMap and
/// the node advertises the pool's slices; the plan after is empty; a hand `helm upgrade
/// --reuse-values --set config.default=...` is drift that apply repairs; destroy gives the
/// release its values back and the node its whole GPU.
#[test]
fn standalone_chart_delivery_lifecycle_on_a_control_plane() {
    let Some(op) = OperatorCluster::start(Tool::Helm4) else {
        return;
    };
    let chart = op
        .fixtures
        .join("charts/nvidia-device-plugin-0.20.0.tgz")
        .display()
        .to_string();
    let ns = "nvidia-device-plugin";
    op.helm(ns, &["install", "nvdp", &chart, "--create-namespace"]);
    op.server.kubectl_stdin(&["apply", "-f", "-"], CHART_NODE);
    let twin = RemoteTwin::new(
        &op.server.url,
        Some(&op.server.ca_pem()),
        op.server.admin_token(),
    )
    .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let gpus = || -> Option<String> {
        let r = rt.block_on(twin.sync_once()).expect("twin sync");
        assert!(r.refused.is_empty(), "{r:?}");
        let node: Value = serde_json::from_str(&op.server.kubectl_ok(&[
            "get",
            "node",
            "gpu-chart",
            "-o",
            "json",
        ]))
        .unwrap();
        node.pointer("/status/allocatable/nvidia.com~1gpu")
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    assert_eq!(
        gpus().as_deref(),
        Some("1"),
        "the chart's plugin, no config: one GPU"
    );

    let tf = format!(
        r#"{REQUIRED_PROVIDERS}
resource "fracgpu_device_plugin_config" "this" {{
  delivery       = "nvidia_device_plugin"
  default_config = "all"
  kubernetes {{
    config_path = "{kc}"
  }}
  config {{ name = "all" }}
  config {{
    name = "ts"
    time_slicing {{ replicas = 4 }}
  }}
  nvidia_device_plugin {{
    release   = "nvdp"
    namespace = "{ns}"
    chart     = "{chart}"
    helm_path = "{helm}"
  }}
}}
"#,
        kc = op.kc(),
        helm = op.helm.display(),
    );
    let ws = Workspace::new(&tf).env("KUBECONFIG", MISSING_KUBECONFIG);
    ws.init();
    ws.apply();
    assert_eq!(
        gpus().as_deref(),
        Some("4"),
        "the node serves its config's slices"
    );
    // The twin's kubelet admits pods by what is left: two slices, then three more find room for
    // two only.
    let pod = |name: &str, n: u32| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": "gpu-chart", "containers": [{"name": "m", "image": "example.com/m:1",
                "resources": {"limits": {"nvidia.com/gpu": n}}}]}})
        .to_string()
    };
    let status = |name: &str| -> Value {
        rt.block_on(twin.kubelet_once()).expect("kubelet pass");
        let p: Value = serde_json::from_str(
            &op.server
                .kubectl_ok(&["get", "pod", "-n", "default", name, "-o", "json"]),
        )
        .unwrap();
        p["status"].clone()
    };
    op.server
        .kubectl_stdin(&["create", "--validate=false", "-f", "-"], &pod("two", 2));
    assert_eq!(status("two")["phase"], "Running");
    op.server
        .kubectl_stdin(&["create", "--validate=false", "-f", "-"], &pod("three", 3));
    let three = status("three");
    assert_eq!(
        (&three["phase"], &three["reason"]),
        (&json!("Failed"), &json!("OutOfnvidia.com/gpu")),
        "{three}"
    );
    op.server.kubectl_ok(&[
        "delete",
        "pod",
        "-n",
        "default",
        "two",
        "three",
        "--wait=false",
    ]);
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());

    op.helm(
        ns,
        &[
            "upgrade",
            "nvdp",
            &chart,
            "--reuse-values",
            "--set",
            "config.default=ts",
        ],
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "a hand helm upgrade is drift:\n{}", plan.text());
    ws.apply();
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());

    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    let values = op.helm(ns, &["get", "values", "nvdp", "-o", "json"]);
    assert_eq!(
        values.trim(),
        "null",
        "the release's values are given back: {values}"
    );
    assert_eq!(
        gpus().as_deref(),
        Some("1"),
        "the node has its whole GPU back"
    );
}
