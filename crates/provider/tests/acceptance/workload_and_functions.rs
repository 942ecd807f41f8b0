//! `data "fracgpu_workload"` and the provider functions, through the real terraform binary.

use crate::common::terraform::{REQUIRED_PROVIDERS, Workspace};
use serde_json::json;

fn applied(body: &str) -> (Workspace, serde_json::Value, String) {
    let ws = Workspace::new(&format!("{REQUIRED_PROVIDERS}\n{body}"));
    ws.init();
    let out = ws.apply();
    let outputs = ws.output_json();
    (ws, outputs, out.text())
}

#[test]
fn four_gigabytes_on_a_time_sliced_t4_takes_three_slices() {
    let (ws, out, apply_text) = applied(
        r#"
data "fracgpu_workload" "llm" {
  cloud         = "eks"
  machine_type  = "g4dn.xlarge"
  pool_name     = "inference"
  time_slicing { replicas = 10 }
  gpu_memory_mb = 4000
}
output "w" { value = data.fracgpu_workload.llm }
"#,
    );
    let w = &out["w"]["value"];
    assert_eq!(w["fits"], true);
    assert_eq!(w["reason"], serde_json::Value::Null);
    assert_eq!(w["resource_name"], "nvidia.com/gpu");
    assert_eq!(w["quantity"], 3);
    assert_eq!(w["memory_limit_mb"], 4608);
    assert_eq!(w["slices_per_node"], 10);
    assert_eq!(w["resources"], json!({"nvidia.com/gpu": "3"}));
    assert_eq!(
        w["node_selector"],
        json!({"eks.amazonaws.com/nodegroup": "inference", "nvidia.com/device-plugin.config": "fracgpu-inference"})
    );
    assert_eq!(w["tolerations"][0]["key"], "nvidia.com/gpu");
    assert_eq!(w["tolerations"][0]["effect"], "NoSchedule");
    assert_eq!(w["device_plugin_config_name"], "fracgpu-inference");
    assert!(w["warning"].as_str().unwrap().contains("4608 MiB"));
    // Time-slicing isolates nothing: terraform shows a warning naming the attribute.
    assert!(
        apply_text.contains("Workload memory is not isolated"),
        "{apply_text}"
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());
}

#[test]
fn mig_workload_on_aks_requests_its_instance() {
    let (_, out, _) = applied(
        r#"
data "fracgpu_workload" "small" {
  cloud        = "aks"
  machine_type = "Standard_NC24ads_A100_v4"
  mig { profile = "1g.10gb" }
  mig_profile  = "1g.10gb"
}
output "w" { value = data.fracgpu_workload.small }
"#,
    );
    let w = &out["w"]["value"];
    assert_eq!(w["fits"], true);
    assert_eq!(w["resources"], json!({"nvidia.com/mig-1g.10gb": "1"}));
    assert_eq!(w["slices_per_node"], 7);
    assert_eq!(w["warning"], serde_json::Value::Null, "MIG isolates memory");
    // No pool name given: the selector has only what sharing implies.
    assert!(
        w["node_selector"].get("agentpool").is_none(),
        "{}",
        w["node_selector"]
    );
}

#[test]
fn gke_time_sharing_refuses_a_workload_needing_two_shares() {
    let (_, out, _) = applied(
        r#"
data "fracgpu_workload" "big" {
  cloud         = "gke"
  machine_type  = "g2-standard-4"
  pool_name     = "shared"
  time_slicing { replicas = 10 }
  gpu_memory_mb = 4000
}
output "w" { value = data.fracgpu_workload.big }
"#,
    );
    let w = &out["w"]["value"];
    assert_eq!(w["fits"], false);
    assert!(
        w["reason"]
            .as_str()
            .unwrap()
            .contains("fewer clients per GPU"),
        "{w}"
    );
    assert_eq!(
        w["node_selector"]["cloud.google.com/gke-gpu-sharing-strategy"],
        "time-sharing"
    );
    assert_eq!(
        w["node_selector"]["cloud.google.com/gke-max-shared-clients-per-gpu"],
        "10"
    );
    assert_eq!(w["device_plugin_config_name"], serde_json::Value::Null);
}

#[test]
fn functions_answer() {
    let (_, out, _) = applied(
        r#"
output "profiles" { value = [for p in provider::fracgpu::mig_profiles("nvidia-tesla-a100") : "${p.name}/${p.instances_per_gpu}"] }
output "slices"   { value = provider::fracgpu::slices_for(4000, 15360, 10) }
output "yaml"     { value = provider::fracgpu::device_plugin_config("mps", 4) }
"#,
    );
    let profiles = out["profiles"]["value"].as_array().unwrap();
    assert_eq!(profiles[0], "1g.5gb/7");
    assert_eq!(out["slices"]["value"], 3);
    let yaml = out["yaml"]["value"].as_str().unwrap();
    assert!(
        yaml.contains("version: v1") && yaml.contains("mps:") && yaml.contains("replicas: 4"),
        "{yaml}"
    );
}

fn fails(body: &str, expected: &[&str]) {
    let ws = Workspace::new(&format!("{REQUIRED_PROVIDERS}\n{body}"));
    ws.init();
    let out = ws.run(&["plan", "-no-color"]);
    assert_eq!(out.code, 1, "plan must fail:\n{}", out.text());
    let text = out.text();
    for e in expected {
        assert!(text.contains(e), "expected {e:?} in:\n{text}");
    }
}

#[test]
fn bad_inputs_name_the_attribute_or_argument() {
    fails(
        r#"
data "fracgpu_workload" "x" {
  cloud         = "eks"
  machine_type  = "g4dn.xlarge"
  time_slicing { replicas = 49 }
  gpu_memory_mb = 100
}
"#,
        &["Value out of range", "replicas = 49", "between 2 and 48"],
    );
    fails(
        r#"
data "fracgpu_workload" "x" {
  cloud        = "aks"
  machine_type = "Standard_NC24ads_A100_v4"
  mig { profile = "1g.5gb" }
  mig_profile  = "1g.5gb"
}
"#,
        &[
            "Invalid MIG profile",
            r#"mig { profile = "1g.5gb" }"#,
            "1g.10gb",
        ],
    );
    fails(
        r#"
data "fracgpu_workload" "x" {
  cloud        = "eks"
  machine_type = "g4dn.xlarge"
  mig { profile = "1g.5gb" }
  mig_profile  = "1g.5gb"
}
"#,
        &["MIG not supported", "T4"],
    );
    fails(
        r#"
data "fracgpu_workload" "x" {
  cloud         = "eks"
  machine_type  = "g4dn.xlarge"
  gpu_memory_mb = 100
  mig_profile   = "1g.5gb"
}
"#,
        &["Conflicting arguments", "gpu_memory_mb"],
    );
    fails(
        r#"output "x" { value = provider::fracgpu::slices_for(4000, 15360, 0) }"#,
        &["Invalid function argument", "replicas"],
    );
    fails(
        r#"output "x" { value = provider::fracgpu::mig_profiles("V100") }"#,
        &[
            "Invalid function argument",
            "gpu_model",
            "Unknown GPU model",
        ],
    );
    fails(
        r#"output "x" { value = provider::fracgpu::device_plugin_config("time-slicing", 1) }"#,
        &["Invalid function argument", "replicas"],
    );
}
