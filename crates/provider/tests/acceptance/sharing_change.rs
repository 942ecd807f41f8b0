//! Changing a time-sliced pool's replicas on a cluster whose nodes run, through terraform against
//! the sandbox, whose twin plays NVIDIA's config-manager as the real one behaves (a label naming a
//! config the ConfigMap lacks leaves a node without GPUs; a config's content reaches a process
//! only when its pod starts; see `crates/sandbox/src/kube/twin/config_manager.rs`). In one apply,
//! and in two (the pool first, then the config; and the config first), every node's label names a
//! config that exists and every node advertises 10 or 8 slices at every step, never none; once the
//! config changed, the device plugin, GPU feature discovery and MPS control daemon daemonsets
//! have been restarted and every node's readers run the new config.

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::common::sandbox::{self, RunningStack};
use crate::common::terraform::{REQUIRED_PROVIDERS, Workspace};

const POOL: &str = "ts";

/// A pool of two single-T4 nodes time-sliced `replicas` ways and the device plugin configs; the
/// pool's config comes from the pool (`wired`), or is written by name with the provider's
/// function, so that the config does not depend on the pool and can be applied first.
fn config(url: &str, kubeconfig: &str, replicas: u32, wired: bool) -> String {
    let own = if wired {
        "name = fracgpu_nodepool.ts.device_plugin_config_name\n    \
         yaml = fracgpu_nodepool.ts.device_plugin_config"
            .to_string()
    } else {
        format!(
            "name = \"fracgpu-{POOL}\"\n    \
             yaml = provider::fracgpu::device_plugin_config(\"time-slicing\", {replicas})"
        )
    };
    format!(
        "{REQUIRED_PROVIDERS}\nprovider \"fracgpu\" {{\n  sandbox = \"{url}\"\n}}\n\
         resource \"fracgpu_nodepool\" \"ts\" {{\n  name         = \"{POOL}\"\n  \
         machine_type = \"Standard_NC4as_T4_v3\"\n  node_count   = 2\n  \
         aks {{\n    resource_group = \"sandbox-rg\"\n    cluster_name   = \"sandbox-aks\"\n  }}\n  \
         time_slicing {{ replicas = {replicas} }}\n}}\n\
         resource \"fracgpu_device_plugin_config\" \"aks\" {{\n  kubernetes {{\n    config_path = \"{kubeconfig}\"\n  }}\n  \
         default_config = \"all\"\n  config {{ name = \"all\" }}\n  config {{\n    {own}\n  }}\n}}\n"
    )
}

fn kubectl_json(stack: &RunningStack, args: &[&str]) -> Value {
    let kubectl = testkit::tools::find(testkit::tools::Tool::Kubectl).expect("kubectl");
    let out = Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(stack.kubeconfig("aks", "sandbox-aks"))
        .args(args)
        .args(["-o", "json"])
        .output()
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// Every node's label names a key of the ConfigMap the operator reads, and every node
/// advertises one of `slices` (whole, never 0); returns what the nodes advertise.
fn check(stack: &RunningStack, step: &str, slices: &[u64]) -> Vec<u64> {
    let policy = kubectl_json(
        stack,
        &["get", "clusterpolicies.nvidia.com", "cluster-policy"],
    );
    let cm_name = policy["spec"]["devicePlugin"]["config"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let cm = kubectl_json(stack, &["get", "configmap", "-n", "gpu-operator", &cm_name]);
    let nodes = stack.nodes("aks", "sandbox-aks", POOL);
    assert_eq!(nodes.len(), 2, "{step}");
    let mut seen = Vec::new();
    for n in &nodes {
        let name = n["metadata"]["name"].as_str().unwrap_or_default();
        let label = n["metadata"]["labels"]["nvidia.com/device-plugin.config"]
            .as_str()
            .unwrap_or_default();
        assert!(
            cm["data"].get(label).is_some(),
            "{step}: {name} names {label:?}, not a key of {cm_name}: {}",
            cm["data"]
        );
        let gpus: u64 = n["status"]["allocatable"]["nvidia.com/gpu"]
            .as_str()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        assert!(
            slices.contains(&gpus),
            "{step}: {name} advertises {gpus}, not one of {slices:?}: {}",
            n["metadata"]
        );
        seen.push(gpus);
    }
    seen
}

/// Every node's readers: (device plugin's config, its replicas, GFD's replicas).
fn readers(stack: &RunningStack) -> Vec<(String, u64, u64)> {
    stack
        .nodes("aks", "sandbox-aks", POOL)
        .iter()
        .map(|n| {
            let text = n["metadata"]["annotations"]["sandbox.fracgpu.dev/config-manager"]
                .as_str()
                .unwrap_or("{}");
            let r: Value = serde_json::from_str(text).unwrap();
            let replicas = |who: &str| r[who]["replicas"].as_u64().unwrap_or(0);
            (
                r["nvidia-device-plugin"]["config"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                replicas("nvidia-device-plugin"),
                replicas("gpu-feature-discovery"),
            )
        })
        .collect()
}

/// The restart annotation of each operand's pod template.
fn restarted_at(stack: &RunningStack) -> Vec<Value> {
    [
        "nvidia-device-plugin-daemonset",
        "gpu-feature-discovery",
        "nvidia-device-plugin-mps-control-daemon",
    ]
    .iter()
    .map(|ds| {
        kubectl_json(stack, &["get", "daemonset", "-n", "gpu-operator", ds])["spec"]
                ["template"]["metadata"]["annotations"]["fracgpu.dev/restartedAt"]
                .clone()
    })
    .collect()
}

fn start() -> Option<(RunningStack, String)> {
    testkit::tools::require(testkit::tools::Tool::Kubectl)?;
    let stack = sandbox::start_stack(Duration::ZERO);
    let kc = stack.kubeconfig("aks", "sandbox-aks").display().to_string();
    Some((stack, kc))
}

#[test]
fn replicas_change_in_one_apply_keeps_every_node_serving() {
    let Some((stack, kc)) = start() else {
        return;
    };
    let ws = Workspace::new(&config(&stack.url, &kc, 10, true));
    ws.init();
    ws.apply();
    assert_eq!(check(&stack, "created", &[10]), [10, 10]);
    let before = restarted_at(&stack);
    ws.write("main.tf", &config(&stack.url, &kc, 8, true));
    let out = ws.apply();
    assert!(
        !out.text().contains("move to another device plugin config"),
        "the name stays: {}",
        out.text()
    );
    assert_eq!(check(&stack, "after the apply", &[8]), [8, 8]);
    let after = restarted_at(&stack);
    for (b, a) in before.iter().zip(&after) {
        assert!(
            a.is_string() && a != b,
            "every operand restarted: {before:?} -> {after:?}"
        );
    }
    for (config, plugin, gfd) in readers(&stack) {
        assert_eq!((config.as_str(), plugin, gfd), ("fracgpu-ts", 8, 8));
    }
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());
}

#[test]
fn replicas_change_pool_first_then_config_keeps_every_node_serving() {
    let Some((stack, kc)) = start() else {
        return;
    };
    let ws = Workspace::new(&config(&stack.url, &kc, 10, true));
    ws.init();
    ws.apply();
    ws.write("main.tf", &config(&stack.url, &kc, 8, true));
    // The pool alone: its nodes keep their label, so they keep serving the config they run.
    ws.ok(&[
        "apply",
        "-auto-approve",
        "-input=false",
        "-no-color",
        "-target=fracgpu_nodepool.ts",
    ]);
    assert_eq!(check(&stack, "pool applied", &[10, 8]), [10, 10]);
    ws.apply();
    assert_eq!(check(&stack, "config applied", &[8]), [8, 8]);
    for (_, plugin, gfd) in readers(&stack) {
        assert_eq!((plugin, gfd), (8, 8));
    }
}

#[test]
fn replicas_change_config_first_then_pool_keeps_every_node_serving() {
    let Some((stack, kc)) = start() else {
        return;
    };
    let ws = Workspace::new(&config(&stack.url, &kc, 10, false));
    ws.init();
    ws.apply();
    assert_eq!(check(&stack, "created", &[10]), [10, 10]);
    ws.write("main.tf", &config(&stack.url, &kc, 8, false));
    ws.ok(&[
        "apply",
        "-auto-approve",
        "-input=false",
        "-no-color",
        "-target=fracgpu_device_plugin_config.aks",
    ]);
    assert_eq!(check(&stack, "config applied", &[8]), [8, 8]);
    ws.apply();
    assert_eq!(check(&stack, "pool applied", &[8]), [8, 8]);
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());
}

/// An EKS pool's MIG geometry changes in place, through the label the GPU operator's MIG manager
/// reads: the plan says that the manager refuses nodes whose GPUs pods use, and points at the
/// action that drains them.
#[test]
fn an_in_place_mig_change_says_what_the_mig_manager_does() {
    let sb = sandbox::start(Duration::ZERO);
    let pool = |profile: &str| {
        format!(
            "{REQUIRED_PROVIDERS}\nprovider \"fracgpu\" {{\n  sandbox = \"{}\"\n}}\n\
             resource \"fracgpu_nodepool\" \"mig\" {{\n  name         = \"migpool\"\n  \
             machine_type = \"p4d.24xlarge\"\n  node_count   = 1\n  \
             eks {{\n    cluster_name  = \"sandbox-eks\"\n    node_role_arn = \"arn:aws:iam::123456789012:role/gpu-nodes\"\n    \
             subnet_ids    = [\"subnet-0a1\"]\n  }}\n  mig {{ profile = \"{profile}\" }}\n}}\n",
            sb.url
        )
    };
    let ws = Workspace::new(&pool("1g.5gb"));
    ws.init();
    let out = ws.apply();
    assert!(
        !out.text().contains("repartitioned in place"),
        "{}",
        out.text()
    );
    ws.write("main.tf", &pool("2g.10gb"));
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "{}", plan.text());
    let text = plan.text().split_whitespace().collect::<Vec<_>>().join(" ");
    for part in [
        "updated in-place",
        "The pool's nodes are repartitioned in place",
        "\"all-1g.5gb\" to \"all-2g.10gb\"",
        "fracgpu_mig_reconfigure",
    ] {
        assert!(text.contains(part), "{part:?} in:\n{}", plan.text());
    }
}
