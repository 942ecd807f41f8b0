//! The node template an autoscaled pool tells its cluster autoscaler, through the real terraform
//! against the sandbox over HTTP: on AKS the agent pool's tags (which AKS copies to the scale set
//! cluster-autoscaler reads) say what a node offers once its device plugin runs, its labels and
//! its taints; they are set on create, read back into state, set back when changed outside
//! terraform (drift that `plan -detailed-exitcode` sees), removed when the pool stops
//! autoscaling, and other tags are left alone. GKE's autoscaler counts shared GPUs itself: its
//! pools carry no template.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::outside::Outside;
use crate::common::sandbox::{self, Running};
use crate::common::terraform::{REQUIRED_PROVIDERS, Workspace};

const RESOURCES: &str = "k8s.io_cluster-autoscaler_node-template_resources_";
const LABEL: &str = "k8s.io_cluster-autoscaler_node-template_label_";
const TAINT: &str = "k8s.io_cluster-autoscaler_node-template_taint_";

/// One A100 per node, time-sliced four ways; autoscaled from zero, or a fixed node when `fixed`.
fn config(url: &str, fixed: bool, labels: usize) -> String {
    let scaling = if fixed {
        "  node_count   = 1\n".to_string()
    } else {
        "  autoscaling {\n    min_nodes = 0\n    max_nodes = 3\n  }\n".to_string()
    };
    let labels: String = (0..labels).map(|i| format!("    l{i} = \"v\"\n")).collect();
    format!(
        "{REQUIRED_PROVIDERS}\nprovider \"fracgpu\" {{\n  sandbox = \"{url}\"\n}}\n\
         resource \"fracgpu_nodepool\" \"a100\" {{\n  name         = \"a100ts\"\n  \
         machine_type = \"Standard_NC24ads_A100_v4\"\n{scaling}  labels = {{\n    team = \"ml\"\n{labels}  }}\n  \
         aks {{\n    resource_group = \"sandbox-rg\"\n    cluster_name   = \"sandbox-aks\"\n  }}\n  \
         time_slicing {{ replicas = 4 }}\n}}\n\
         resource \"fracgpu_nodepool\" \"l4\" {{\n  name         = \"l4ts\"\n  \
         machine_type = \"g2-standard-4\"\n  autoscaling {{\n    min_nodes = 0\n    max_nodes = 3\n  }}\n  \
         gke {{\n    location = \"us-central1\"\n    cluster  = \"sandbox-gke\"\n  }}\n  \
         time_slicing {{ replicas = 4 }}\n}}\n"
    )
}

fn tags(sb: &Running, pool: &str) -> BTreeMap<String, String> {
    serde_json::from_value(sb.pool(pool)["properties"]["tags"].clone()).unwrap_or_default()
}

fn template(tags: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    tags.iter()
        .filter(|(k, _)| k.starts_with("k8s.io_cluster-autoscaler_node-template_"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn state_of(ws: &Workspace, name: &str) -> Value {
    ws.show_json()["values"]["root_module"]["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["name"] == name)
        .map(|r| r["values"].clone())
        .unwrap_or(Value::Null)
}

#[test]
fn an_autoscaled_aks_pool_tells_cluster_autoscaler_its_slices_labels_and_taints() {
    let sb = sandbox::start(Duration::ZERO);
    // curl speaks ARM for the change made outside terraform.
    let Some(outside) = Outside::new(&sb.url) else {
        return;
    };
    let ws = Workspace::new(&config(&sb.url, false, 0));
    ws.init();
    ws.apply();

    let t = template(&tags(&sb, "a100ts"));
    assert_eq!(t[&format!("{RESOURCES}nvidia.com_gpu")], "4", "{t:?}");
    assert_eq!(t[&format!("{LABEL}team")], "ml");
    assert_eq!(
        t[&format!("{LABEL}nvidia.com_device-plugin.config")],
        "time-sliced-4"
    );
    assert_eq!(t[&format!("{TAINT}nvidia.com_gpu")], "Present:NoSchedule");
    let state = state_of(&ws, "a100");
    assert_eq!(
        serde_json::from_value::<BTreeMap<String, String>>(
            state["autoscaler_node_template"].clone()
        )
        .unwrap(),
        t
    );
    assert_eq!(state_of(&ws, "l4")["autoscaler_node_template"], json!({}));
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "the plan is empty:\n{}", plan.text());

    // Someone drops the resources tag and adds a stale one, with ARM's API: the plan sees it and
    // the apply sets the template back, keeping the provider's other tag.
    let mut props = sb.pool("a100ts")["properties"].clone();
    let mut changed = tags(&sb, "a100ts");
    changed.remove(&format!("{RESOURCES}nvidia.com_gpu"));
    changed.insert(format!("{LABEL}stale"), "x".into());
    props["tags"] = json!(changed);
    for read_only in [
        "provisioningState",
        "currentOrchestratorVersion",
        "nodeImageVersion",
    ] {
        props.as_object_mut().unwrap().remove(read_only);
    }
    outside.arm_put_pool("a100ts", props);
    sb.sandbox.settle();
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "drift shows:\n{}", plan.text());
    assert!(
        plan.stdout
            .contains("fracgpu_nodepool.a100 will be updated in-place"),
        "{}",
        plan.stdout
    );
    ws.apply();
    let after = tags(&sb, "a100ts");
    assert_eq!(template(&after), t);
    assert!(after.contains_key("fracgpu-cloud-defaults"), "{after:?}");

    // A fixed pool needs no template: its tags go, the provider's own stays.
    ws.write("main.tf", &config(&sb.url, true, 0));
    ws.apply();
    let fixed = tags(&sb, "a100ts");
    assert!(template(&fixed).is_empty(), "{fixed:?}");
    assert!(fixed.contains_key("fracgpu-cloud-defaults"), "{fixed:?}");
    assert_eq!(state_of(&ws, "a100")["autoscaler_node_template"], json!({}));
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "the plan is empty:\n{}", plan.text());
}

/// Azure allows 50 tags on a resource: an autoscaled pool whose labels and taints need more is
/// refused at plan time, naming `labels`, before anything is created.
#[test]
fn an_autoscaled_aks_pool_over_azures_tag_limit_is_refused_at_plan_time() {
    let sb = sandbox::start(Duration::ZERO);
    let ws = Workspace::new(&config(&sb.url, false, 48));
    ws.init();
    let out = ws.run(&["plan", "-no-color", "-input=false"]);
    assert_ne!(out.code, 0, "{}", out.text());
    let text = out.text();
    assert!(
        text.contains("Too many labels and taints for an autoscaled AKS pool"),
        "{text}"
    );
    assert!(text.contains("labels"), "{text}");
    assert!(text.contains("fixed node_count"), "{text}");
    assert!(sb.pools().iter().all(|(_, _, n)| n != "a100ts"));
    // As a fixed pool it fits.
    ws.write("main.tf", &config(&sb.url, true, 48));
    let out = ws.run(&["plan", "-no-color", "-input=false"]);
    assert_eq!(out.code, 0, "{}", out.text());
}
