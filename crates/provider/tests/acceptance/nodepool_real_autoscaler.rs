//! A real cluster-autoscaler (its AWS provider) drives an EKS pool the provider wrote, through the
//! sandbox's Auto Scaling, EC2 and EKS APIs and the cluster's Kubernetes API, with the sandbox's
//! own autoscalers off. It runs where `FRACGPU_CLUSTER_AUTOSCALER` names a cluster-autoscaler
//! binary built with the AWS provider (no registry ships one); elsewhere it says it did not run.
//!
//! What stands in for the parts of a cluster the sandbox does not run: no kube-scheduler marks
//! pods it cannot place, so the test marks its pods `PodScheduled=False`, reason
//! `Unschedulable`, as the scheduler does (cluster-autoscaler acts only on such pods:
//! utils/kubernetes/listers.go `isUnschedulable`).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::nodepool_autoscaler_template::{kubectl_apply, pods, state_of};
use crate::common::outside::Outside;
use crate::common::sandbox;
use crate::common::terraform::{REQUIRED_PROVIDERS, Workspace};

/// The environment variable naming the binary.
const BINARY: &str = "FRACGPU_CLUSTER_AUTOSCALER";

/// The process, killed when the test ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// cluster-autoscaler's cloud config: its Auto Scaling, EC2 and EKS clients sent to the sandbox
/// (`[ServiceOverride]`, read by the AWS provider's `getResolver`: each service by its endpoint
/// id, for the region the session has).
fn cloud_config(url: &str) -> String {
    ["autoscaling", "ec2", "eks"]
        .iter()
        .enumerate()
        .map(|(i, service)| {
            format!(
                "[ServiceOverride \"{i}\"]\nService={service}\nRegion=us-east-1\nURL={url}\n\
                 SigningRegion=us-east-1\n"
            )
        })
        .collect::<Vec<_>>()
        .concat()
}

fn start(binary: &Path, dir: &Path, url: &str, kubeconfig: &Path) -> Running {
    std::fs::write(
        dir.join("cloud.conf"),
        format!("[Global]\n{}", cloud_config(url)),
    )
    .unwrap();
    let log = std::fs::File::create(dir.join("cluster-autoscaler.log")).unwrap();
    let child = Command::new(binary)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", dir)
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "AKIDSANDBOX")
        .env("AWS_SECRET_ACCESS_KEY", "sandbox")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .args([
            "--cloud-provider=aws",
            "--node-group-auto-discovery=asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/sandbox-eks",
            "--leader-elect=false",
            "--scan-interval=2s",
            // The sandbox does not serve DescribeInstanceTypes: the provider's static list
            // (which has g4dn.xlarge and its GPU) is what it falls back to anyway.
            "--aws-use-static-instance-list=true",
            "--v=2",
        ])
        .arg(format!("--cloud-config={}", dir.join("cloud.conf").display()))
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .stdout(log.try_clone().map(Stdio::from).unwrap())
        .stderr(Stdio::from(log))
        .spawn()
        .unwrap_or_else(|e| panic!("{BINARY}={}: {e}", binary.display()));
    Running(child)
}

fn log_tail(dir: &Path) -> String {
    let text = std::fs::read_to_string(dir.join("cluster-autoscaler.log")).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// Ten pending one-slice pods on a time-sliced EKS pool at zero nodes: the real
/// cluster-autoscaler reads the node template the provider wrote on the Auto Scaling group, asks
/// the group for one node (SetDesiredCapacity), and that node is the group's instance.
#[test]
fn a_real_cluster_autoscaler_scales_an_eks_pool_from_zero() {
    let Some(binary) = std::env::var_os(BINARY).filter(|b| !b.is_empty()) else {
        testkit::tools::not_run(&format!(
            "not run: {BINARY} names no cluster-autoscaler binary (built with the AWS provider)"
        ));
        return;
    };
    let Some(kubectl) = testkit::tools::require(testkit::tools::Tool::Kubectl) else {
        return;
    };
    let stack = sandbox::start_stack_with(::sandbox::Config {
        op_time: Duration::ZERO,
        autoscalers: false,
        ..::sandbox::Config::default()
    });
    let Some(outside) = Outside::new(&stack.url) else {
        return;
    };
    let kubeconfig = stack.kubeconfig("eks", "sandbox-eks");
    let ws = Workspace::new(&format!(
        "{REQUIRED_PROVIDERS}\nprovider \"fracgpu\" {{\n  sandbox = \"{url}\"\n}}\n\
         resource \"fracgpu_nodepool\" \"eks\" {{\n  name         = \"realca\"\n  \
         machine_type = \"g4dn.xlarge\"\n  autoscaling {{\n    min_nodes = 0\n    max_nodes = 4\n  }}\n  \
         eks {{\n    cluster_name  = \"sandbox-eks\"\n    node_role_arn = \"arn:aws:iam::123456789012:role/gpu-nodes\"\n    \
         subnet_ids    = [\"subnet-0a1\"]\n  }}\n  time_slicing {{ replicas = 10 }}\n}}\n\
         resource \"fracgpu_device_plugin_config\" \"eks\" {{\n  kubernetes {{\n    config_path = \"{kc}\"\n  }}\n  \
         default_config = \"all\"\n  config {{ name = \"all\" }}\n  config {{\n    \
         name = fracgpu_nodepool.eks.device_plugin_config_name\n    \
         yaml = fracgpu_nodepool.eks.device_plugin_config\n  }}\n}}\n",
        url = stack.url,
        kc = kubeconfig.display()
    ));
    ws.init();
    ws.apply();
    let pool = state_of(&ws, "eks");
    let dir = tempfile::tempdir().unwrap();
    let _ca = start(Path::new(&binary), dir.path(), &stack.url, &kubeconfig);
    let kubectl_ok = |args: &[&str]| {
        let out = Command::new(&kubectl)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let unschedulable = r#"{"status":{"conditions":[{"type":"PodScheduled","status":"False","reason":"Unschedulable","message":"0/0 nodes are available: no node of the pool runs yet."}]}}"#;
    for (i, pod) in pods(&pool, 10).split("\n---\n").enumerate() {
        kubectl_apply(&kubectl, &kubeconfig, pod);
        let name = format!("slice-{i}");
        kubectl_ok(&[
            "patch",
            "pod",
            &name,
            "--subresource=status",
            "--type=merge",
            "-p",
            unschedulable,
        ]);
    }
    let nodes = || stack.nodes("eks", "sandbox-eks", "realca");
    // Pods that request nvidia.com/gpu are held back 30 s, then the loop runs every 2 s.
    let start = Instant::now();
    while nodes().is_empty() && start.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(500));
    }
    let first = nodes();
    assert_eq!(
        first.len(),
        1,
        "one node for ten slices:\n{}",
        log_tail(dir.path())
    );
    let waited = start.elapsed();
    // A few more loops: the ten pods fit the new node, so no more nodes come.
    std::thread::sleep(Duration::from_secs(8));
    assert_eq!(
        nodes().len(),
        1,
        "still one node:\n{}",
        log_tail(dir.path())
    );
    let log = std::fs::read_to_string(dir.path().join("cluster-autoscaler.log")).unwrap();
    assert!(
        log.contains("Final scale-up plan") && log.contains("0->1 (max: 4)"),
        "{}",
        log_tail(dir.path())
    );
    assert!(
        waited >= Duration::from_secs(25),
        "the pods asked for nvidia.com/gpu (the API server requested their limits), so \
         cluster-autoscaler waited for more: {waited:?}"
    );
    // The node is the group's instance (its provider ID is how cluster-autoscaler matched it),
    // and the group's activity says who launched it.
    let groups: Value = serde_json::from_str(&outside.aws_autoscaling(&[
        "describe-auto-scaling-groups",
        "--filters",
        "Name=tag:eks:nodegroup-name,Values=realca",
    ]))
    .unwrap();
    let group = &groups["AutoScalingGroups"][0];
    assert_eq!(group["DesiredCapacity"], 1, "{group:#}");
    let instance = &group["Instances"][0];
    assert_eq!(
        first[0]["spec"]["providerID"].as_str(),
        Some(
            format!(
                "aws:///{}/{}",
                instance["AvailabilityZone"].as_str().unwrap_or_default(),
                instance["InstanceId"].as_str().unwrap_or_default()
            )
            .as_str()
        ),
        "{group:#}"
    );
    let activities: Value = serde_json::from_str(&outside.aws_autoscaling(&[
        "describe-scaling-activities",
        "--auto-scaling-group-name",
        group["AutoScalingGroupName"].as_str().unwrap_or_default(),
    ]))
    .unwrap();
    assert!(
        activities["Activities"][0]["Description"]
            .as_str()
            .is_some_and(|d| d.ends_with(instance["InstanceId"].as_str().unwrap_or("?"))),
        "{activities:#}"
    );
}
