//! `shared_devices_allocation_policy` (the device plugin's
//! `flags.plugin.sharedDevicesAllocationPolicy`, v0.20.0) through the real terraform against the
//! sandbox: written into the config, read by the twin's plugin (the node serves the config's
//! slices), planned empty; a hand edit to the other policy is drift that apply repairs, and one
//! to a value the plugin refuses shows as drift too.

use std::time::Duration;

use super::device_plugin_config::{add_pool, node_allocatable, object, patch_configmap};
use crate::common::sandbox::start_stack;
use crate::common::terraform::{REQUIRED_PROVIDERS, Workspace};

const CM: &str = "time-slicing-config";
const NS: &str = "gpu-operator";

#[test]
fn the_allocation_policy_is_delivered_read_and_its_drift_repaired() {
    let st = start_stack(Duration::ZERO);
    let kc = st.kubeconfig("aks", "sandbox-aks").display().to_string();
    let ws = Workspace::new(&format!(
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
    name                             = "packed-4"
    shared_devices_allocation_policy = "packed"
    time_slicing {{ replicas = 4 }}
  }}
}}
"#
    ));
    ws.init();
    ws.apply();
    let text = |st: &crate::common::sandbox::RunningStack| {
        object(st, "configmaps", NS, CM).unwrap()["data"]["packed-4"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(
        text(&st).contains("flags:\n  plugin:\n    sharedDevicesAllocationPolicy: packed\n"),
        "{}",
        text(&st)
    );
    // The twin's plugin reads the config: the pool's node serves its four slices.
    add_pool(&st, "pk", "packed-4");
    assert_eq!(
        node_allocatable(&st, "pk", "nvidia.com/gpu").as_deref(),
        Some("4")
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());

    let edit = |to: &str| {
        let data = text(&st).replace(
            "sharedDevicesAllocationPolicy: packed",
            &format!("sharedDevicesAllocationPolicy: {to}"),
        );
        let patch = serde_json::json!({"data": {"packed-4": data}}).to_string();
        patch_configmap(&kc, &patch);
    };
    for to in ["distributed", "spread"] {
        edit(to);
        let (code, plan) = ws.plan_exit_code();
        assert_eq!(code, 2, "a hand edit to {to} is drift:\n{}", plan.text());
        assert!(
            plan.stdout
                .contains(&format!("sharedDevicesAllocationPolicy: {to}")),
            "{}",
            plan.stdout
        );
        ws.apply();
        assert!(text(&st).contains("sharedDevicesAllocationPolicy: packed"));
        let (code, plan) = ws.plan_exit_code();
        assert_eq!(code, 0, "{}", plan.text());
    }
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
}
