//! Device plugin v0.20.0's sharing options, through the real terraform against the sandbox, as
//! the twin's kubelet and plugin act on them: `mps.fail_requests_greater_than_one = false` lets a
//! container take two MPS slices, and `shared_devices_allocation_policy = "packed"` puts pods'
//! slices on one GPU, where `distributed` spreads them. On the cluster's v0.18.0 plugin neither
//! acts (the apply says so); once the ClusterPolicy runs v0.20.0, both do.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::device_plugin_config::{add_pool, add_pool_of, kubectl, node_allocatable, object};
use super::device_plugin_config_standalone::{
    NS as CHART_NS, POOL, RELEASE, Standalone, helm, pool_config,
};
use crate::common::sandbox::{RunningStack, start_stack};
use crate::common::terraform::{REQUIRED_PROVIDERS, Workspace, flat};
use crate::common::tools::Tool;

const NS: &str = "gpu-operator";
const CM: &str = "time-slicing-config";

fn config(kc: &str, mps_replicas: u32) -> String {
    format!(
        r#"{REQUIRED_PROVIDERS}
provider "fracgpu" {{
  kubernetes {{
    config_path = "{kc}"
  }}
}}

resource "fracgpu_device_plugin_config" "this" {{
  default_config = "all"
  config {{ name = "all" }}
  config {{
    name = "mps-relaxed"
    mps {{
      replicas                       = {mps_replicas}
      fail_requests_greater_than_one = false
    }}
  }}
  config {{
    name = "mps-strict"
    mps {{ replicas = 4 }}
  }}
  config {{
    name                             = "ts-packed"
    shared_devices_allocation_policy = "packed"
    time_slicing {{ replicas = 4 }}
  }}
  config {{
    name = "ts-spread"
    time_slicing {{ replicas = 4 }}
  }}
}}

output "configs" {{ value = fracgpu_device_plugin_config.this.config }}
"#
    )
}

/// Binds a pod asking for `gpus` of `nvidia.com/gpu` to the pool's node, as a scheduler would,
/// and returns it as the twin's kubelet left it.
fn bind_pod(st: &RunningStack, kc: &str, pool: &str, name: &str, gpus: u32) -> Value {
    let node = &st.stack.kube.pool_node_names("aks", "sandbox-aks", pool)[0];
    bind_pod_on(kc, node, name, gpus);
    object(st, "pods", "default", name).expect("the pod is stored")
}

/// Creates a pod asking for `gpus` of `nvidia.com/gpu`, bound to `node`.
fn bind_pod_on(kc: &str, node: &str, name: &str, gpus: u32) {
    let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": node, "containers": [{"name": "model", "image": "example.com/model:1",
            "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}});
    let mut child = Command::new("kubectl")
        .args(["--kubeconfig", kc, "create", "--validate=false", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(pod.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The GPUs (device IDs without the replica) the pool's node handed each of `pods`.
fn gpus_of(st: &RunningStack, pool: &str, pods: &[&str]) -> Vec<String> {
    let node = &st.stack.kube.pool_node_names("aks", "sandbox-aks", pool)[0];
    let listed = st.stack.kube.pod_resources("aks", "sandbox-aks", node);
    pods.iter()
        .map(|p| {
            let pod = listed["pod_resources"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["name"] == *p)
                .unwrap_or_else(|| panic!("{p} holds devices: {listed}"));
            let id = pod["containers"][0]["devices"][0]["device_ids"][0]
                .as_str()
                .unwrap();
            id.split("::").next().unwrap().to_string()
        })
        .collect()
}

fn phase(pod: &Value) -> (&str, &str) {
    (
        pod["status"]["phase"].as_str().unwrap_or_default(),
        pod["status"]["reason"].as_str().unwrap_or_default(),
    )
}

#[test]
fn v0_20_sharing_options_act_on_a_v0_20_plugin_and_are_named_on_an_older_one() {
    let st = start_stack(Duration::ZERO);
    let kc = st.kubeconfig("aks", "sandbox-aks").display().to_string();
    let ws = Workspace::new(&config(&kc, 4));
    ws.init();
    let out = ws.apply();
    let said = flat(&format!("{}{}", out.stdout, out.stderr));
    // The sandbox's operator runs device plugin v0.18.0.
    assert!(
        said.contains("The device plugin passes over settings of these configs")
            && said.contains("device plugin v0.18.0")
            && said.contains("\"mps-relaxed\": sharing.mps.failRequestsGreaterThanOne: false")
            && said.contains("\"ts-packed\": flags.plugin.sharedDevicesAllocationPolicy")
            && !said.contains("\"mps-strict\":"),
        "{said}"
    );
    let cm = object(&st, "configmaps", NS, CM).unwrap();
    assert!(
        cm["data"]["mps-relaxed"].as_str().unwrap().contains(
            "  mps:\n    renameByDefault: false\n    failRequestsGreaterThanOne: false\n"
        ),
        "{cm}"
    );
    // MPS's default, spelled out in state as the plugin reads it.
    let configs = ws.output_json();
    let strict = configs["configs"]["value"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "mps-strict")
        .unwrap();
    assert_eq!(
        strict["mps"][0]["fail_requests_greater_than_one"], true,
        "{strict}"
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());

    add_pool(&st, "mpsr", "mps-relaxed");
    add_pool(&st, "mpss", "mps-strict");
    add_pool_of(&st, "pk", "ts-packed", "Standard_NC48ads_A100_v4");
    add_pool_of(&st, "sp", "ts-spread", "Standard_NC48ads_A100_v4");
    assert_eq!(
        node_allocatable(&st, "mpsr", "nvidia.com/gpu").as_deref(),
        Some("4")
    );
    assert_eq!(
        node_allocatable(&st, "pk", "nvidia.com/gpu").as_deref(),
        Some("8")
    );

    // v0.18.0 refuses two MPS slices to a container whatever the config says, and spreads.
    let two = bind_pod(&st, &kc, "mpsr", "two-old", 2);
    assert_eq!(phase(&two), ("Failed", "UnexpectedAdmissionError"), "{two}");
    assert!(
        two["status"]["message"].as_str().unwrap().contains(
            "invalid allocation request for \"nvidia.com/gpu\": invalid request: maximum request \
             size for shared resources is 1; found 2"
        ),
        "{two}"
    );
    for p in ["pk-a", "pk-b"] {
        assert_eq!(phase(&bind_pod(&st, &kc, "pk", p, 1)).0, "Running");
    }
    let spread = gpus_of(&st, "pk", &["pk-a", "pk-b"]);
    assert_ne!(spread[0], spread[1], "v0.18.0 has no packed policy");
    kubectl(
        &kc,
        &["delete", "pod", "-n", "default", "pk-a", "pk-b", "two-old"],
    );

    // The operator rolls the plugin to v0.20.0; the plugin pods restart and read the configs.
    kubectl(
        &kc,
        &[
            "patch",
            "clusterpolicy",
            "cluster-policy",
            "--type",
            "merge",
            "-p",
            r#"{"spec": {"devicePlugin": {"version": "v0.20.0"}}}"#,
        ],
    );
    let ds = object(&st, "daemonsets.apps", NS, "nvidia-device-plugin-daemonset").unwrap();
    assert_eq!(
        ds["spec"]["template"]["spec"]["containers"][0]["image"],
        "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"
    );
    let two = bind_pod(&st, &kc, "mpsr", "two", 2);
    assert_eq!(phase(&two), ("Running", ""), "{two}");
    let strict = bind_pod(&st, &kc, "mpss", "two-strict", 2);
    assert_eq!(
        phase(&strict),
        ("Failed", "UnexpectedAdmissionError"),
        "{strict}"
    );
    for p in ["pk-a", "pk-b", "sp-a", "sp-b"] {
        let pool = &p[..2];
        assert_eq!(phase(&bind_pod(&st, &kc, pool, p, 1)).0, "Running");
    }
    let packed = gpus_of(&st, "pk", &["pk-a", "pk-b"]);
    assert_eq!(packed[0], packed[1], "packed puts both on one GPU");
    let spread = gpus_of(&st, "sp", &["sp-a", "sp-b"]);
    assert_ne!(spread[0], spread[1], "distributed spreads them");
    // Six more take the spread node's room left: the next finds none.
    let node = &st.stack.kube.pool_node_names("aks", "sandbox-aks", "sp")[0];
    for p in ["sp-c", "sp-d", "sp-e", "sp-f", "sp-g", "sp-h"] {
        assert_eq!(phase(&bind_pod(&st, &kc, "sp", p, 1)).0, "Running");
    }
    let full = bind_pod(&st, &kc, "sp", "sp-i", 1);
    assert_eq!(phase(&full), ("Failed", "OutOfnvidia.com/gpu"), "{full}");
    assert!(
        full["status"]["message"].as_str().unwrap().contains(
            "Node didn't have enough resource: nvidia.com/gpu, requested: 1, used: 8, capacity: 8"
        ),
        "{node}: {full}"
    );

    // On v0.20.0 the next write names nothing.
    ws.write("main.tf", &config(&kc, 6));
    let out = ws.apply();
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(!said.contains("passes over"), "{said}");
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
}

/// The standalone chart's plugin, whose release is its image's tag: a node pool's relaxed MPS
/// config reaches it; the chart run at `image.tag=v0.18.1` refuses two slices (and the apply
/// names what it passes over), and once upgraded to v0.20.0 it grants them.
fn standalone_relaxed_mps(helm_tool: Tool) {
    let Some(Standalone {
        stack,
        kc,
        h,
        chart,
    }) = Standalone::start(helm_tool, Duration::from_millis(50))
    else {
        return;
    };
    let chart_s = chart.display().to_string();
    let kc_s = kc.display().to_string();
    helm(
        &h,
        &kc,
        &[
            "install",
            RELEASE,
            &chart_s,
            "--create-namespace",
            "--set",
            "image.tag=v0.18.1",
        ],
    );
    let ws = Workspace::new(&pool_config(
        &stack.url,
        &kc,
        &h,
        &chart,
        "mps {\n    replicas                       = 4\n    fail_requests_greater_than_one = false\n  }",
    ));
    ws.init();
    let out = ws.apply();
    let said = flat(&format!("{}{}", out.stdout, out.stderr));
    assert!(
        said.contains(&format!(
            "The cluster runs device plugin nvcr.io/nvidia/k8s-device-plugin:v0.18.1 (the image \
             of the daemonset {CHART_NS}/{RELEASE}-nvidia-device-plugin)"
        )) && said.contains("\"fracgpu-ts\": sharing.mps.failRequestsGreaterThanOne: false"),
        "{said}"
    );
    let bind = |name: &str| {
        let node = &stack.stack.kube.pool_node_names("aks", "sandbox-aks", POOL)[0];
        bind_pod_on(&kc_s, node, name, 2);
        object(&stack, "pods", "default", name).expect("stored")
    };
    let old = bind("two-old");
    assert_eq!(phase(&old), ("Failed", "UnexpectedAdmissionError"), "{old}");

    // The plugin upgraded by hand: its pods restart on v0.20.0, which honours the config.
    helm(
        &h,
        &kc,
        &[
            "upgrade",
            RELEASE,
            &chart_s,
            "--reuse-values",
            "--set",
            "image.tag=v0.20.0",
        ],
    );
    let two = bind("two");
    assert_eq!(phase(&two), ("Running", ""), "{two}");
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(
        code,
        0,
        "the image is not this resource's:\n{}",
        plan.text()
    );
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
}

#[test]
fn standalone_plugin_release_decides_relaxed_mps_helm4() {
    standalone_relaxed_mps(Tool::Helm4);
}

#[test]
fn standalone_plugin_release_decides_relaxed_mps_helm3() {
    standalone_relaxed_mps(Tool::Helm3);
}
