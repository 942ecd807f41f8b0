//! `fracgpu_mig_reconfigure` and where a node's MIG manager finds its configs, through terraform
//! 1.15 against the sandbox, whose twin plays the GPU operator's MIG manager: with no
//! `spec.migManager.config.name` (operator v26.3 and later) each node's manager generates its
//! configs from its GPUs into `<node>-mig-config`; with a name it reads that ConfigMap. A config
//! the node's manager does not have is refused before the node is cordoned, naming where the
//! manager looked; one it has is applied.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::common::sandbox::{RunningStack, start_stack};
use crate::common::terraform::{REQUIRED_PROVIDERS, Workspace};
use crate::common::tools::{self, Tool};

fn kubectl(st: &RunningStack, args: &[&str], input: Option<&str>) -> (bool, String) {
    let kubectl = tools::require(Tool::Kubectl).expect("kubectl (scripts/test-tools installs it)");
    let mut cmd = Command::new(kubectl);
    cmd.arg("--kubeconfig")
        .arg(st.kubeconfig("eks", "sandbox-eks"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("kubectl runs");
    if let Some(i) = input {
        use std::io::Write as _;
        child.stdin.take().unwrap().write_all(i.as_bytes()).unwrap();
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

fn ok(st: &RunningStack, args: &[&str], input: Option<&str>) -> String {
    let (success, text) = kubectl(st, args, input);
    assert!(success, "kubectl {}: {text}", args.join(" "));
    text
}

fn node(st: &RunningStack) -> Value {
    serde_json::from_str(&ok(st, &["get", "node", "mig-a", "-o", "json"], None)).unwrap()
}

fn action(st: &RunningStack, config: &str) -> Workspace {
    let ws = Workspace::new(&format!(
        r#"{REQUIRED_PROVIDERS}
action "fracgpu_mig_reconfigure" "now" {{
  config {{
    node_selector = {{ pool = "m" }}
    config        = "{config}"
    node_timeout  = 60
    kubernetes {{ config_path = "{}" }}
  }}
}}
resource "terraform_data" "anchor" {{}}
"#,
        st.kubeconfig("eks", "sandbox-eks").display()
    ))
    .with_terraform(&tools::require(Tool::Terraform115).expect("terraform 1.15"));
    ws.init();
    ws
}

const INVOKE: [&str; 4] = [
    "apply",
    "-invoke=action.fracgpu_mig_reconfigure.now",
    "-auto-approve",
    "-no-color",
];

fn set_policy_name(st: &RunningStack, name: &str) {
    let patch = format!(r#"{{"spec":{{"migManager":{{"config":{{"name":"{name}"}}}}}}}}"#);
    ok(
        st,
        &[
            "patch",
            "clusterpolicy",
            "cluster-policy",
            "--type=merge",
            "-p",
            &patch,
        ],
        None,
    );
}

#[test]
fn a_config_the_nodes_mig_manager_lacks_is_refused_before_the_node_is_touched() {
    if tools::require(Tool::Terraform115).is_none() || tools::require(Tool::Kubectl).is_none() {
        return;
    }
    let st = start_stack(Duration::ZERO);
    // The v26 ClusterPolicy: no config name, so the MIG managers generate their own.
    set_policy_name(&st, "");
    ok(
        &st,
        &["create", "--validate=false", "-f", "-"],
        Some(
            r#"{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "mig-a", "labels": {
  "kubernetes.io/hostname": "mig-a", "pool": "m", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB",
  "nvidia.com/gpu.count": "1", "nvidia.com/gpu.memory": "40960", "nvidia.com/mig.capable": "true"}}}"#,
        ),
    );
    let generated = ok(
        &st,
        &[
            "get",
            "configmap",
            "-n",
            "gpu-operator",
            "mig-a-mig-config",
            "-o",
            "json",
        ],
        None,
    );
    let generated: Value = serde_json::from_str(&generated).unwrap();
    let text = generated["data"]["config.yaml"].as_str().unwrap();
    assert!(
        text.contains("all-2g.10gb:") && !text.contains("my-layout"),
        "{text}"
    );

    // A layout of the user's own: not among the generated configs.
    let out = action(&st, "my-layout").run(&INVOKE);
    let said = out.text();
    assert_ne!(out.code, 0, "{said}");
    assert!(
        said.contains("MIG config not where the MIG manager looks")
            && said.contains("gpu-operator/mig-a-mig-config"),
        "{said}"
    );
    let n = node(&st);
    assert!(n["spec"]["unschedulable"].is_null(), "not cordoned: {n}");
    assert_ne!(
        n["metadata"]["labels"]["nvidia.com/mig.config"],
        "my-layout"
    );

    // One the manager generated is applied.
    let out = action(&st, "all-2g.10gb").run(&INVOKE);
    assert_eq!(out.code, 0, "{}", out.text());
    assert_eq!(node(&st)["status"]["allocatable"]["nvidia.com/gpu"], "3");

    // A ConfigMap the ClusterPolicy names that is not there: no config applies.
    set_policy_name(&st, "custom-mig");
    let out = action(&st, "all-2g.10gb").run(&INVOKE);
    let said = out.text();
    assert_ne!(out.code, 0, "{said}");
    assert!(
        said.contains("gpu-operator/custom-mig") && said.contains("does not exist"),
        "{said}"
    );
    set_policy_name(&st, "");

    // A ConfigMap of the user's own, named by the ClusterPolicy: only its configs exist, and
    // the generated ones are gone with the generation.
    ok(
        &st,
        &["create", "-f", "-"],
        Some(
            r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "custom-mig", "namespace": "gpu-operator"},
  "data": {"config.yaml": "version: v1\nmig-configs:\n  all-disabled:\n  - devices: all\n    mig-enabled: false\n  two-halves:\n  - devices: all\n    mig-enabled: true\n    mig-devices:\n      3g.20gb: 2\n"}}"#,
        ),
    );
    set_policy_name(&st, "custom-mig");
    let (gone, _) = kubectl(
        &st,
        &["get", "configmap", "-n", "gpu-operator", "mig-a-mig-config"],
        None,
    );
    assert!(
        !gone,
        "the generated configs go when the policy names a ConfigMap"
    );
    let out = action(&st, "all-1g.5gb").run(&INVOKE);
    let said = out.text();
    assert_ne!(out.code, 0, "{said}");
    assert!(
        said.contains("gpu-operator/custom-mig") && said.contains("two-halves"),
        "{said}"
    );
    let out = action(&st, "two-halves").run(&INVOKE);
    assert_eq!(out.code, 0, "{}", out.text());
    let n = node(&st);
    assert_eq!(n["status"]["allocatable"]["nvidia.com/gpu"], "2", "{n}");
    assert_eq!(
        n["metadata"]["labels"]["nvidia.com/mig.config.state"],
        "success"
    );
}
