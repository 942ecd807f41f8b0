//! EKS AMI types as they really are: Amazon Linux 2 GPU AMIs end with Kubernetes 1.32 (a plan-time
//! warning names the replacement; EKS itself refuses them on 1.33 clusters), and Bottlerocket's NVIDIA
//! variants share GPUs only through their own settings, so a Bottlerocket pool without sharing is
//! fine and its nodes advertise whole GPUs.

use std::time::Duration;

use crate::common::sandbox;
use crate::common::terraform::{REQUIRED_PROVIDERS, Workspace, flat};

fn config(url: &str, ami: &str, sharing: &str) -> String {
    format!(
        "{REQUIRED_PROVIDERS}\nprovider \"fracgpu\" {{\n  sandbox = \"{url}\"\n}}\n\nresource \"fracgpu_nodepool\" \"p\" {{\n  name         = \"gpus\"\n  machine_type = \"g4dn.xlarge\"\n  eks {{\n    cluster_name  = \"sandbox-eks\"\n    node_role_arn = \"arn:aws:iam::123456789012:role/gpu-nodes\"\n    subnet_ids    = [\"subnet-0a1\"]\n    ami_type      = \"{ami}\"\n  }}\n{sharing}\n}}\n\noutput \"pool\" {{ value = fracgpu_nodepool.p }}\n"
    )
}

#[test]
fn eks_al2_gpu_ami_warns_at_plan_and_eks_refuses_it_on_1_33() {
    let sb = sandbox::start(Duration::ZERO);
    let ws = Workspace::new(&config(
        &sb.url,
        "AL2_x86_64_GPU",
        "  time_slicing { replicas = 4 }",
    ));
    ws.init();
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "{}", plan.text());
    let text = plan.text();
    for needle in [
        "Warning: Amazon Linux 2 GPU AMI",
        "ami_type      = \"AL2_x86_64_GPU\"",
        "2025-11-26",
        "1.33",
        "AL2023_x86_64_NVIDIA",
    ] {
        assert!(
            flat(&text).contains(&flat(needle)),
            "missing {needle:?} in:\n{text}"
        );
    }
    // The sandbox's cluster runs Kubernetes 1.33: EKS has no AL2 AMI for it.
    let out = ws.run(&["apply", "-no-color", "-auto-approve", "-input=false"]);
    assert_eq!(out.code, 1, "{}", out.text());
    assert!(
        flat(&out.text()).contains(
            "AMI Type AL2_x86_64_GPU is only supported for kubernetes versions 1.32 or earlier"
        ),
        "{}",
        out.text()
    );
    assert_eq!(sb.pools(), vec![]);
    // The default needs no warning.
    ws.write(
        "main.tf",
        &config(
            &sb.url,
            "AL2023_x86_64_NVIDIA",
            "  time_slicing { replicas = 4 }",
        ),
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "{}", plan.text());
    assert!(!plan.text().contains("Warning"), "{}", plan.text());
}

#[test]
fn eks_bottlerocket_pool_without_sharing_gets_whole_gpus() {
    let sb = sandbox::start_stack(Duration::ZERO);
    let ws = Workspace::new(&config(&sb.url, "BOTTLEROCKET_x86_64_NVIDIA", ""));
    ws.init();
    ws.apply();
    let p = &ws.output_json()["pool"]["value"];
    assert_eq!(p["resource_name"], "nvidia.com/gpu");
    assert_eq!(p["slices_per_node"], 1);
    let nodes = sb.nodes("eks", "sandbox-eks", "gpus");
    assert_eq!(nodes.len(), 1);
    assert!(
        nodes[0]["status"]["nodeInfo"]["osImage"]
            .as_str()
            .is_some_and(|o| o.starts_with("Bottlerocket")),
        "{}",
        nodes[0]
    );
    assert_eq!(nodes[0]["status"]["allocatable"]["nvidia.com/gpu"], "1");
    assert_eq!(ws.plan_exit_code().0, 0);
    // Sharing asked of it later is refused before anything changes.
    ws.write(
        "main.tf",
        &config(
            &sb.url,
            "BOTTLEROCKET_x86_64_NVIDIA",
            "  time_slicing { replicas = 4 }",
        ),
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 1, "{}", plan.text());
    assert!(
        flat(&plan.text()).contains("GPU sharing not available on Bottlerocket"),
        "{}",
        plan.text()
    );
    ws.write(
        "main.tf",
        &config(&sb.url, "BOTTLEROCKET_x86_64_NVIDIA", ""),
    );
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
}
