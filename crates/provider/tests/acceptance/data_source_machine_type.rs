//! `data "fracgpu_machine_type"` through the real terraform binary.

use crate::common::terraform::{REQUIRED_PROVIDERS, Workspace};

fn config(cloud: &str, name: &str) -> String {
    format!(
        r#"{REQUIRED_PROVIDERS}
data "fracgpu_machine_type" "this" {{
  cloud = "{cloud}"
  name  = "{name}"
}}

output "gpu" {{
  value = {{
    model    = data.fracgpu_machine_type.this.gpu_model
    count    = data.fracgpu_machine_type.this.gpu_count
    memory   = data.fracgpu_machine_type.this.gpu_memory_mb
    mig      = data.fracgpu_machine_type.this.mig_capable
    profiles = [for p in data.fracgpu_machine_type.this.mig_profiles : "${{p.name}}x${{p.instances_per_gpu}}"]
    aks      = [for p in data.fracgpu_machine_type.this.mig_profiles : p.aks_gpu_instance_profile if p.aks_gpu_instance_profile != null]
  }}
}}
"#
    )
}

#[test]
fn init_validate_plan_apply_refresh_destroy() {
    let ws = Workspace::new(&config("aks", "Standard_NC48ads_A100_v4"));
    ws.init();
    ws.ok(&["validate", "-no-color"]);
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(
        code,
        2,
        "the first plan has outputs to create:\n{}",
        plan.text()
    );
    ws.apply();

    let out = ws.output_json();
    let gpu = &out["gpu"]["value"];
    assert_eq!(gpu["model"], "A100-80GB");
    assert_eq!(gpu["count"], 2);
    assert_eq!(gpu["mig"], true);
    assert!(gpu["memory"].as_i64().unwrap() > 79_000, "{gpu}");
    let profiles: Vec<&str> = gpu["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert!(
        profiles.contains(&"1g.10gbx7") && profiles.contains(&"7g.80gbx1"),
        "{profiles:?}"
    );
    assert_eq!(
        gpu["aks"],
        serde_json::json!(["MIG1g", "MIG2g", "MIG3g", "MIG4g", "MIG7g"])
    );

    // The data source is in state with every computed attribute known.
    let state = ws.show_json();
    let res = &state["values"]["root_module"]["resources"][0];
    assert_eq!(res["type"], "fracgpu_machine_type");
    assert_eq!(
        res["values"]["gpu_product"]
            .as_str()
            .map(|s| s.starts_with("NVIDIA-A100")),
        Some(true)
    );

    ws.ok(&["apply", "-refresh-only", "-auto-approve", "-no-color"]);
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(
        code,
        0,
        "nothing changes on a second plan:\n{}",
        plan.text()
    );
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert!(ws.show_json()["values"].is_null());
}

#[test]
fn machine_without_mig_has_no_profiles() {
    let ws = Workspace::new(&config("eks", "g4dn.xlarge"));
    ws.init();
    ws.apply();
    let gpu = &ws.output_json()["gpu"]["value"];
    assert_eq!(gpu["model"], "T4");
    assert_eq!(gpu["mig"], false);
    assert_eq!(gpu["profiles"], serde_json::json!([]));
}

#[test]
fn unknown_machine_type_names_the_attribute_and_suggests_names() {
    let ws = Workspace::new(&config("aks", "Standard_NC24ads_A100_v5"));
    ws.init();
    let out = ws.run(&["plan", "-no-color"]);
    assert_eq!(out.code, 1);
    let text = out.text();
    assert!(text.contains("Unknown machine type"), "{text}");
    // terraform points at the offending line of the configuration.
    assert!(
        text.contains(r#"name  = "Standard_NC24ads_A100_v5""#),
        "{text}"
    );
    assert!(
        text.contains("Standard_NC24ads_A100_v4"),
        "closest name suggested:\n{text}"
    );
}

#[test]
fn unknown_cloud_lists_the_valid_ones() {
    let ws = Workspace::new(&config("azure", "Standard_NC24ads_A100_v4"));
    ws.init();
    let out = ws.run(&["validate", "-no-color"]);
    assert_eq!(out.code, 1);
    let text = out.text();
    assert!(text.contains(r#"cloud = "azure""#), "{text}");
    assert!(text.contains(r#""aks", "gke", "eks""#), "{text}");
}

#[test]
fn schema_is_published() {
    let ws = Workspace::new(&config("gke", "a2-highgpu-1g"));
    ws.init();
    let out = ws.ok(&["providers", "schema", "-json"]);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let ds = &v["provider_schemas"]["registry.terraform.io/fracgpu/fracgpu"]["data_source_schemas"]
        ["fracgpu_machine_type"];
    assert_eq!(ds["block"]["attributes"]["cloud"]["required"], true);
    assert_eq!(ds["block"]["attributes"]["mig_profiles"]["computed"], true);
    assert_eq!(
        ds["block"]["attributes"]["mig_profiles"]["nested_type"]["nesting_mode"],
        "list"
    );
}
