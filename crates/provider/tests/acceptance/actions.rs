//! Actions through terraform 1.15 (terraform 1.14 added them; 1.11 never calls them) against the
//! sandbox stack's Kubernetes API, whose twin plays the daemonset controller:
//! `fracgpu_device_plugin_rollout` run with `terraform apply -invoke`, then by a `terraform_data`'s
//! `action_trigger` on update, its progress lines in terraform's output and the restart on the
//! daemonset; a namespace without the operator's daemonsets ends in an error naming it.

use std::path::PathBuf;
use std::time::Duration;

use crate::common::sandbox::start_stack;
use crate::common::terraform::{REQUIRED_PROVIDERS, Workspace};
use crate::common::tools::{self, Tool};

const INVOKE: &str = "-invoke=action.fracgpu_device_plugin_rollout.now";

fn config(kubeconfig: &str, namespace: Option<&str>, revision: u32) -> String {
    let namespace = namespace
        .map(|n| format!("    namespace = \"{n}\"\n"))
        .unwrap_or_default();
    format!(
        r#"{REQUIRED_PROVIDERS}
action "fracgpu_device_plugin_rollout" "now" {{
  config {{
{namespace}    timeout = 60
    kubernetes {{ config_path = "{kubeconfig}" }}
  }}
}}

resource "terraform_data" "config_revision" {{
  input = {revision}
  lifecycle {{
    action_trigger {{
      events  = [after_update]
      actions = [action.fracgpu_device_plugin_rollout.now]
    }}
  }}
}}
"#
    )
}

fn terraform() -> Option<PathBuf> {
    tools::require(Tool::Terraform115)
}

fn restart_annotation(st: &crate::common::sandbox::RunningStack) -> Option<String> {
    let kubectl = tools::require(Tool::Kubectl).expect("kubectl (scripts/test-tools installs it)");
    let out = std::process::Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(st.kubeconfig("aks", "sandbox-aks"))
        .args([
            "-n",
            "gpu-operator",
            "get",
            "daemonset",
            "nvidia-device-plugin-daemonset",
            "-o",
            "jsonpath={.spec.template.metadata.annotations.fracgpu\\.dev/restartedAt}",
        ])
        .output()
        // A missing kubectl fails the test; it never reads as "no restart".
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (!s.is_empty()).then_some(s)
}

#[test]
fn device_plugin_rollout_by_invoke_and_by_trigger() {
    let Some(tf) = terraform() else { return };
    let st = start_stack(Duration::ZERO);
    let kc = st.kubeconfig("aks", "sandbox-aks").display().to_string();
    let ws = Workspace::new(&config(&kc, None, 1)).with_terraform(&tf);
    ws.init();
    ws.apply();
    assert_eq!(restart_annotation(&st), None, "a create triggers nothing");

    let out = ws.ok(&["apply", INVOKE, "-auto-approve", "-no-color"]);
    let text = out.text();
    let action = "Action action.fracgpu_device_plugin_rollout.now";
    for line in [
        "gpu-operator/nvidia-device-plugin-daemonset: restarted",
        "gpu-operator/nvidia-device-plugin-daemonset: rolled out",
        // The operator's other operands that read the config: GPU feature discovery's runs on
        // every GPU node; the MPS control daemon's too, with no pod where no node shares by MPS.
        "gpu-operator/gpu-feature-discovery: restarted",
        "gpu-operator/gpu-feature-discovery: rolled out",
        "gpu-operator/nvidia-device-plugin-mps-control-daemon: restarted",
    ] {
        assert!(
            text.contains(action) && text.contains(line),
            "no progress line {line:?}:\n{text}"
        );
    }
    let first = restart_annotation(&st).expect("the invoke restarts the device plugin");

    // Terraform's own resource changes; the trigger runs the rollout after the update.
    std::thread::sleep(Duration::from_millis(1100));
    ws.write("main.tf", &config(&kc, None, 2));
    let out = ws.ok(&["apply", "-auto-approve", "-no-color"]);
    assert!(
        out.text().contains("rolled out"),
        "the trigger ran no rollout:\n{}",
        out.text()
    );
    let second = restart_annotation(&st).expect("still restarted");
    assert_ne!(first, second, "the triggered rollout restarts again");
}

#[test]
fn a_namespace_without_the_operator_fails_naming_it() {
    let Some(tf) = terraform() else { return };
    let st = start_stack(Duration::ZERO);
    let kc = st.kubeconfig("aks", "sandbox-aks").display().to_string();
    let ws = Workspace::new(&config(&kc, Some("nowhere"), 1)).with_terraform(&tf);
    ws.init();
    let out = ws.run(&["apply", INVOKE, "-auto-approve", "-no-color"]);
    assert_ne!(out.code, 0, "{}", out.text());
    let text = out.text();
    assert!(text.contains("No device plugin daemonset"), "{text}");
    assert!(text.contains("\"nowhere\""), "{text}");
}

#[test]
fn the_rollout_example_invokes() {
    let Some(tf) = terraform() else { return };
    let st = start_stack(Duration::ZERO);
    let kc = st.kubeconfig("aks", "sandbox-aks").display().to_string();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let example = std::fs::read_to_string(
        root.join("examples/actions/fracgpu_device_plugin_rollout/action.tf"),
    )
    .unwrap();
    let ws = Workspace::new(&format!("{REQUIRED_PROVIDERS}\n{example}")).with_terraform(&tf);
    ws.init();
    let var = format!("-var=kubeconfig={kc}");
    ws.ok(&["apply", "-auto-approve", "-no-color", &var]);
    let out = ws.ok(&[
        "apply",
        "-invoke=action.fracgpu_device_plugin_rollout.this",
        "-auto-approve",
        "-no-color",
        &var,
    ]);
    assert!(out.text().contains("rolled out"), "{}", out.text());
    assert!(restart_annotation(&st).is_some());
}

/// `fracgpu_mig_reconfigure` against the sandbox's EKS cluster, whose twin plays the MIG manager:
/// a hand-made A100 node (GPU feature discovery's hardware labels make it join the twin) whose GPU
/// a ReplicaSet's pod holds fails a relabel by hand; the action cordons it, drains it through the
/// eviction subresource, relabels it, sees `success` from the MIG manager and uncordons it; its
/// device plugin then serves the new partitions.
#[test]
fn mig_reconfigure_on_the_sandbox() {
    let Some(tf) = terraform() else { return };
    let st = start_stack(Duration::ZERO);
    let kc = st.kubeconfig("eks", "sandbox-eks");
    let kubectl = tools::require(Tool::Kubectl).expect("kubectl (scripts/test-tools installs it)");
    let run = |args: &[&str], input: Option<&str>| {
        let mut cmd = std::process::Command::new(&kubectl);
        cmd.arg("--kubeconfig").arg(&kc).args(args);
        if input.is_some() {
            cmd.stdin(std::process::Stdio::piped());
        }
        cmd.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn().expect("kubectl runs");
        if let Some(i) = input {
            use std::io::Write as _;
            child.stdin.take().unwrap().write_all(i.as_bytes()).unwrap();
        }
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // The sandbox's OpenAPI covers the kinds the provider writes, not pods: no client-side schema.
    run(
        &["create", "--validate=false", "-f", "-"],
        Some(
            r#"{"apiVersion": "v1", "kind": "List", "items": [
  {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "mig-a", "labels": {
    "kubernetes.io/hostname": "mig-a", "pool": "m", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB",
    "nvidia.com/gpu.count": "1", "nvidia.com/gpu.memory": "40960", "nvidia.com/mig.capable": "true"}}},
  {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "model-1", "namespace": "default",
    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "model", "uid": "6f1c9d2e-0000-4000-8000-000000000001", "controller": true}]},
   "spec": {"nodeName": "mig-a", "containers": [{"name": "m", "image": "example.com/model:1",
     "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}]}"#,
        ),
    );
    let node_json = || -> serde_json::Value {
        serde_json::from_str(&run(&["get", "node", "mig-a", "-o", "json"], None)).unwrap()
    };
    // Relabelled by hand under the pod that holds its GPU, the node's MIG manager fails.
    run(
        &[
            "label",
            "node",
            "mig-a",
            "--overwrite",
            "nvidia.com/mig.config=all-3g.20gb",
        ],
        None,
    );
    assert_eq!(
        node_json()["metadata"]["labels"]["nvidia.com/mig.config.state"],
        "failed"
    );
    let ws = Workspace::new(&format!(
        r#"{REQUIRED_PROVIDERS}
action "fracgpu_mig_reconfigure" "now" {{
  config {{
    node_selector = {{ pool = "m" }}
    config        = "all-2g.10gb"
    kubernetes {{ config_path = "{}" }}
  }}
}}
resource "terraform_data" "anchor" {{}}
"#,
        kc.display()
    ))
    .with_terraform(&tf);
    ws.init();
    let out = ws.ok(&[
        "apply",
        "-invoke=action.fracgpu_mig_reconfigure.now",
        "-auto-approve",
        "-no-color",
    ]);
    let text = out.text();
    for line in [
        "mig-a: cordoned",
        "mig-a: evicted default/model-1",
        "mig-a: drained (1 pod gone)",
        "mig-a: nvidia.com/mig.config=all-2g.10gb",
        "mig-a: reconfigured to all-2g.10gb, uncordoned",
    ] {
        assert!(text.contains(line), "no progress line {line:?}:\n{text}");
    }
    let node = node_json();
    assert_eq!(
        node["metadata"]["labels"]["nvidia.com/mig.config.state"],
        "success"
    );
    assert!(
        node["spec"]["unschedulable"].is_null(),
        "uncordoned: {node}"
    );
    // The single strategy: three 2g.10gb instances of the A100 40GB.
    assert_eq!(
        node["status"]["allocatable"]["nvidia.com/gpu"], "3",
        "{node}"
    );
    let pods = run(&["get", "pods", "-n", "default", "-o", "name"], None);
    assert!(!pods.contains("model-1"), "evicted: {pods}");

    // The docs' example, pointed at this node: it asks for the geometry the node has now.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let example =
        std::fs::read_to_string(root.join("examples/actions/fracgpu_mig_reconfigure/action.tf"))
            .unwrap();
    let ws = Workspace::new(&format!("{REQUIRED_PROVIDERS}\n{example}")).with_terraform(&tf);
    ws.init();
    let vars = [
        format!("-var=kubeconfig={}", kc.display()),
        r#"-var=node_selector={"pool" = "m"}"#.to_string(),
    ];
    let mut args = vec![
        "apply",
        "-invoke=action.fracgpu_mig_reconfigure.this",
        "-auto-approve",
        "-no-color",
    ];
    args.extend(vars.iter().map(String::as_str));
    let out = ws.ok(&args);
    assert!(
        out.text()
            .contains("mig-a: already at all-2g.10gb, left alone"),
        "{}",
        out.text()
    );

    // Tied to a resource's creation by an action_trigger.
    let ws = Workspace::new(&format!(
        r#"{REQUIRED_PROVIDERS}
action "fracgpu_mig_reconfigure" "seven" {{
  config {{
    node_selector = {{ pool = "m" }}
    config        = "all-1g.5gb"
    kubernetes {{ config_path = "{}" }}
  }}
}}
resource "terraform_data" "geometry" {{
  input = "all-1g.5gb"
  lifecycle {{
    action_trigger {{
      events  = [after_create]
      actions = [action.fracgpu_mig_reconfigure.seven]
    }}
  }}
}}
"#,
        kc.display()
    ))
    .with_terraform(&tf);
    ws.init();
    let out = ws.ok(&["apply", "-auto-approve", "-no-color"]);
    assert!(
        out.text()
            .contains("mig-a: reconfigured to all-1g.5gb, uncordoned"),
        "{}",
        out.text()
    );
    let node = node_json();
    assert_eq!(
        node["status"]["allocatable"]["nvidia.com/gpu"], "7",
        "{node}"
    );
}

/// An empty `node_selector` would select every node and restart every pod at once: refused at
/// plan time, naming the attribute, for both actions.
#[test]
fn an_empty_node_selector_is_refused_at_plan_time() {
    let Some(tf) = terraform() else { return };
    let ws = Workspace::new(&format!(
        r#"{REQUIRED_PROVIDERS}
action "fracgpu_device_plugin_rollout" "all" {{
  config {{
    node_selector = {{}}
  }}
}}
action "fracgpu_mig_reconfigure" "all" {{
  config {{
    node_selector = {{}}
    config        = "all-disabled"
  }}
}}
resource "terraform_data" "anchor" {{}}
"#
    ))
    .with_terraform(&tf);
    ws.init();
    for action in ["fracgpu_device_plugin_rollout", "fracgpu_mig_reconfigure"] {
        let out = ws.run(&["plan", &format!("-invoke=action.{action}.all"), "-no-color"]);
        assert_ne!(out.code, 0, "{}", out.text());
        let text = out.text();
        assert!(
            text.contains("Empty node_selector") && text.contains("node_selector"),
            "{action}:\n{text}"
        );
    }
}
