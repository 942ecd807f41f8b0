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
        "gpu-operator/gpu-feature-discovery: not present, skipped",
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
