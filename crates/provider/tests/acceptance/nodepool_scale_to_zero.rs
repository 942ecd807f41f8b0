//! Pools of zero nodes on every cloud, as `az aks nodepool add --node-count 0`, `gcloud container
//! node-pools create --num-nodes 0` and an EKS node group of desired size 0 make them: a fixed
//! `node_count = 0` and `autoscaling { min_nodes = 0 }` apply, read back as written (an empty
//! plan), scale up and back down in place, import, and leave no nodes in the cluster while at zero.

use std::time::Duration;

use crate::common::sandbox::{self, RunningStack};
use crate::common::terraform::{REQUIRED_PROVIDERS, Workspace};

const AKS: &str =
    "  aks {\n    resource_group = \"sandbox-rg\"\n    cluster_name   = \"sandbox-aks\"\n  }";
const GKE: &str = "  gke {\n    location = \"us-central1\"\n    cluster  = \"sandbox-gke\"\n  }";
const EKS: &str = "  eks {\n    cluster_name  = \"sandbox-eks\"\n    node_role_arn = \"arn:aws:iam::123456789012:role/gpu-nodes\"\n    subnet_ids    = [\"subnet-0a1\", \"subnet-0b2\"]\n  }";

const CLOUDS: [(&str, &str, &str); 3] = [
    ("aks", "Standard_NC24ads_A100_v4", AKS),
    ("gke", "g2-standard-4", GKE),
    ("eks", "g4dn.xlarge", EKS),
];

/// `fixed<cloud>` with `node_count = fixed` on the clouds in `fixed_on`, and with `auto`,
/// `auto<cloud>` scaling 0 to 2 on every cloud.
fn config(url: &str, fixed: u32, fixed_on: &[&str], auto: bool) -> String {
    let mut out =
        format!("{REQUIRED_PROVIDERS}\nprovider \"fracgpu\" {{\n  sandbox = \"{url}\"\n}}\n");
    for (cloud, machine, place) in CLOUDS {
        if fixed_on.contains(&cloud) {
            out.push_str(&format!(
                "\nresource \"fracgpu_nodepool\" \"fixed{cloud}\" {{\n  name         = \"fixed{cloud}\"\n  machine_type = \"{machine}\"\n  node_count   = {fixed}\n{place}\n  time_slicing {{ replicas = 4 }}\n}}\n"
            ));
        }
        if auto {
            out.push_str(&format!(
                "\nresource \"fracgpu_nodepool\" \"auto{cloud}\" {{\n  name         = \"auto{cloud}\"\n  machine_type = \"{machine}\"\n  autoscaling {{\n    min_nodes = 0\n    max_nodes = 2\n  }}\n{place}\n  time_slicing {{ replicas = 4 }}\n}}\n"
            ));
        }
    }
    out
}

/// A pool's document as its cloud's API answers it.
fn pool(sb: &RunningStack, name: &str) -> serde_json::Value {
    let inv = sb.stack.sandbox.inventory();
    inv["pools"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == name)
        .map(|p| p["resource"].clone())
        .unwrap_or(serde_json::Value::Null)
}

fn state_of(ws: &Workspace, name: &str) -> serde_json::Value {
    ws.show_json()["values"]["root_module"]["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["name"] == name)
        .map(|r| r["values"].clone())
        .unwrap_or(serde_json::Value::Null)
}

fn plan_is_empty(ws: &Workspace) {
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "the plan is empty:\n{}", plan.text());
}

/// The clouds whose fixed zero the emulators accept: see the GKE test below.
const FIXED: &[&str] = &["aks", "eks"];

#[test]
fn pools_scale_to_zero_on_every_cloud() {
    let sb = sandbox::start_stack(Duration::ZERO);
    let ws = Workspace::new(&config(&sb.url, 0, FIXED, true));
    ws.init();
    ws.apply();

    // What each cloud holds for a pool of zero.
    let aks = &pool(&sb, "fixedaks")["properties"];
    assert_eq!(
        (aks["count"].as_u64(), aks["enableAutoScaling"].as_bool()),
        (Some(0), Some(false))
    );
    let aks = &pool(&sb, "autoaks")["properties"];
    assert_eq!(
        (
            aks["count"].as_u64(),
            aks["minCount"].as_u64(),
            aks["maxCount"].as_u64()
        ),
        (Some(0), Some(0), Some(2))
    );
    // The pool's bounds are totals over its zones; proto3 JSON may leave a zero out.
    let gke = pool(&sb, "autogke");
    assert_eq!(
        (
            gke["autoscaling"]["enabled"].as_bool(),
            gke["autoscaling"]["totalMinNodeCount"]
                .as_u64()
                .unwrap_or(0),
            gke["autoscaling"]["totalMaxNodeCount"].as_u64()
        ),
        (Some(true), 0, Some(2))
    );
    // EKS wants maxSize >= 1: a fixed zero is min 0, max 1, desired 0.
    assert_eq!(
        pool(&sb, "fixedeks")["scalingConfig"],
        serde_json::json!({"minSize": 0, "maxSize": 1, "desiredSize": 0})
    );
    assert_eq!(
        pool(&sb, "autoeks")["scalingConfig"],
        serde_json::json!({"minSize": 0, "maxSize": 2, "desiredSize": 0})
    );
    // No nodes while at zero.
    for (cloud, cluster) in [
        ("aks", "sandbox-aks"),
        ("gke", "sandbox-gke"),
        ("eks", "sandbox-eks"),
    ] {
        for kind in ["fixed", "auto"] {
            let name = format!("{kind}{cloud}");
            assert!(
                sb.nodes(cloud, cluster, &name).is_empty(),
                "{name} has nodes"
            );
        }
    }
    // State says what was written: a fixed zero, not autoscaling.
    for cloud in ["aks", "gke", "eks"] {
        if FIXED.contains(&cloud) {
            let fixed = state_of(&ws, &format!("fixed{cloud}"));
            assert_eq!(fixed["node_count"], 0, "{cloud}: {fixed}");
            assert_eq!(
                fixed["autoscaling"],
                serde_json::json!([]),
                "{cloud}: {fixed}"
            );
        }
        let auto = state_of(&ws, &format!("auto{cloud}"));
        assert_eq!(
            auto["node_count"],
            serde_json::Value::Null,
            "{cloud}: {auto}"
        );
        assert_eq!(auto["autoscaling"][0]["min_nodes"], 0, "{cloud}: {auto}");
    }
    plan_is_empty(&ws);

    // Up to one node and back to zero, in place.
    ws.write("main.tf", &config(&sb.url, 1, FIXED, true));
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "{}", plan.text());
    assert!(
        plan.stdout.contains("2 to change") && !plan.stdout.contains("replaced"),
        "{}",
        plan.stdout
    );
    ws.apply();
    assert_eq!(
        pool(&sb, "fixedeks")["scalingConfig"],
        serde_json::json!({"minSize": 1, "maxSize": 1, "desiredSize": 1})
    );
    assert_eq!(sb.nodes("eks", "sandbox-eks", "fixedeks").len(), 1);
    assert_eq!(sb.nodes("aks", "sandbox-aks", "fixedaks").len(), 1);
    plan_is_empty(&ws);
    ws.write("main.tf", &config(&sb.url, 0, FIXED, true));
    ws.apply();
    assert_eq!(
        pool(&sb, "fixedeks")["scalingConfig"],
        serde_json::json!({"minSize": 0, "maxSize": 1, "desiredSize": 0})
    );
    assert!(sb.nodes("eks", "sandbox-eks", "fixedeks").is_empty());
    plan_is_empty(&ws);

    // An autoscaled pool the autoscaler left at zero stays autoscaling, even where EKS stores it
    // as it stores a fixed zero (min 0, max 1, desired 0).
    let one = config(&sb.url, 0, FIXED, true).replace("max_nodes = 2", "max_nodes = 1");
    ws.write("main.tf", &one);
    ws.apply();
    assert_eq!(
        pool(&sb, "autoeks")["scalingConfig"],
        serde_json::json!({"minSize": 0, "maxSize": 1, "desiredSize": 0})
    );
    assert_eq!(state_of(&ws, "autoeks")["autoscaling"][0]["max_nodes"], 1);
    plan_is_empty(&ws);

    // Imported, the fixed zero of EKS reads as node_count 0.
    let fresh = Workspace::new(&one);
    fresh.init();
    fresh.ok(&[
        "import",
        "-no-color",
        "fracgpu_nodepool.fixedeks",
        "sandbox-eks:fixedeks",
    ]);
    assert_eq!(state_of(&fresh, "fixedeks")["node_count"], 0);

    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert_eq!(sb.pools(), vec![]);
}

/// GKE's node pool API accepts a pool of zero nodes without autoscaling (terraform-provider-google
/// #752 allowed it after trying it), and the pool then has no nodes.
#[test]
fn gke_pool_of_zero_nodes() {
    let sb = sandbox::start_stack(Duration::ZERO);
    let ws = Workspace::new(&config(&sb.url, 0, &["gke"], false));
    ws.init();
    ws.apply();
    assert_eq!(state_of(&ws, "fixedgke")["node_count"], 0);
    assert!(sb.nodes("gke", "sandbox-gke", "fixedgke").is_empty());
    plan_is_empty(&ws);
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
}
