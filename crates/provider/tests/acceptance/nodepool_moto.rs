//! The EKS happy path of `fracgpu_nodepool` against moto, a second, independent EKS emulator:
//! create, an empty plan, an in-place update, destroy.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::terraform::{REQUIRED_PROVIDERS, Workspace};

struct Moto(Child);

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_moto() -> (Moto, String) {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("python3")
        .args([
            "-m",
            "moto.server",
            "-H",
            "127.0.0.1",
            "-p",
            &port.to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("moto starts");
    let moto = Moto(child);
    let url = format!("http://127.0.0.1:{port}");
    let t = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "moto did not come up"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    (moto, url)
}

const AWS_ENV: [(&str, &str); 3] = [
    ("AWS_ACCESS_KEY_ID", "testing"),
    ("AWS_SECRET_ACCESS_KEY", "testing"),
    ("AWS_DEFAULT_REGION", "us-east-1"),
];

/// The cluster `moto-eks`, made with boto3: moto needs the cluster first, as EKS does.
fn create_cluster(url: &str) {
    let status = Command::new("python3")
        .args([
            "-c",
            &format!(
                "import boto3; boto3.client('eks', endpoint_url='{url}', region_name='us-east-1').create_cluster(name='moto-eks', roleArn='arn:aws:iam::123456789012:role/eks', resourcesVpcConfig={{'subnetIds': ['subnet-1']}})"
            ),
        ])
        .envs(AWS_ENV)
        .status()
        .unwrap();
    assert!(status.success(), "cluster created in moto");
}

#[test]
fn eks_node_group_lifecycle_against_moto() {
    if crate::common::tools::require(crate::common::tools::Tool::Moto).is_none() {
        return;
    }
    let (_moto, url) = start_moto();
    create_cluster(&url);

    let config = |replicas: u32| {
        format!(
            r#"{REQUIRED_PROVIDERS}
provider "fracgpu" {{
  aws {{
    region   = "us-east-1"
    endpoint = "{url}"
  }}
}}

resource "fracgpu_nodepool" "p" {{
  name         = "t4shared"
  machine_type = "g4dn.xlarge"
  node_count   = 2
  eks {{
    cluster_name  = "moto-eks"
    node_role_arn = "arn:aws:iam::123456789012:role/gpu-nodes"
    subnet_ids    = ["subnet-1"]
  }}
  time_slicing {{ replicas = {replicas} }}
}}
"#
        )
    };
    let mut ws = Workspace::new(&config(10));
    for (k, v) in AWS_ENV {
        ws = ws.env(k, v);
    }
    ws.init();
    ws.apply();
    let state = ws.show_json();
    let values = &state["values"]["root_module"]["resources"][0]["values"];
    assert_eq!(values["id"], "moto-eks:t4shared");
    assert_eq!(
        values["node_labels"]["nvidia.com/device-plugin.config"],
        "fracgpu-t4shared"
    );
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "moto's defaults cause no diff:\n{}", plan.text());

    ws.write("main.tf", &config(5));
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2);
    assert!(plan.stdout.contains("updated in-place"), "{}", plan.stdout);
    ws.apply();
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", plan.text());

    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert!(ws.show_json()["values"].is_null());
}

/// moto's EKS names an Auto Scaling group for each node group but does not make it (moto's
/// autoscaling backend never hears of it), as real EKS always does: the one place where the
/// node template cannot be written. The autoscaled group is still created and recorded, not
/// tainted, with a warning; the next plan shows the template as a change, and the apply that
/// tries it names the missing group.
#[test]
fn an_autoscaled_group_whose_auto_scaling_group_is_missing_is_kept_with_a_warning() {
    if crate::common::tools::require(crate::common::tools::Tool::Moto).is_none() {
        return;
    }
    let (_moto, url) = start_moto();
    create_cluster(&url);
    let config = format!(
        r#"{REQUIRED_PROVIDERS}
provider "fracgpu" {{
  aws {{
    region   = "us-east-1"
    endpoint = "{url}"
  }}
}}

resource "fracgpu_nodepool" "p" {{
  name         = "t4auto"
  machine_type = "g4dn.xlarge"
  autoscaling {{
    min_nodes = 0
    max_nodes = 3
  }}
  eks {{
    cluster_name  = "moto-eks"
    node_role_arn = "arn:aws:iam::123456789012:role/gpu-nodes"
    subnet_ids    = ["subnet-1"]
  }}
  time_slicing {{ replicas = 10 }}
}}
"#
    );
    let mut ws = Workspace::new(&config);
    for (k, v) in AWS_ENV {
        ws = ws.env(k, v);
    }
    ws.init();
    let out = ws.apply();
    assert!(
        out.text().contains("Node template not written"),
        "{}",
        out.text()
    );
    let state = ws.show_json();
    let resource = &state["values"]["root_module"]["resources"][0];
    assert_eq!(resource["values"]["id"], "moto-eks:t4auto");
    assert!(resource["tainted"].is_null(), "not tainted: {resource}");
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 2, "{}", plan.text());
    assert!(
        plan.stdout
            .contains("k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu"),
        "{}",
        plan.stdout
    );
    let out = ws.run(&["apply", "-auto-approve", "-no-color", "-input=false"]);
    assert_ne!(out.code, 0, "{}", out.text());
    assert!(out.text().contains("does not exist"), "{}", out.text());
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert!(ws.show_json()["values"].is_null());
}

/// The launch template names (`fracgpu/...`) moto's EC2 holds, as boto3 lists them.
fn moto_templates(url: &str) -> String {
    let out = Command::new("python3")
        .args([
            "-c",
            &format!(
                "import boto3; print(sorted(t['LaunchTemplateName'] for t in boto3.client('ec2', endpoint_url='{url}', region_name='us-east-1').describe_launch_templates()['LaunchTemplates']))"
            ),
        ])
        .envs(AWS_ENV)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A Bottlerocket node group that shares its GPUs, against moto's EKS and EC2: the launch
/// template is made in moto's EC2, named by the node group, read back (an empty plan) and
/// deleted with the group.
#[test]
fn eks_bottlerocket_launch_template_against_moto() {
    if crate::common::tools::require(crate::common::tools::Tool::Moto).is_none() {
        return;
    }
    let (_moto, url) = start_moto();
    create_cluster(&url);
    let config = format!(
        r#"{REQUIRED_PROVIDERS}
provider "fracgpu" {{
  aws {{
    region   = "us-east-1"
    endpoint = "{url}"
  }}
}}

resource "fracgpu_nodepool" "p" {{
  name         = "br"
  machine_type = "g4dn.xlarge"
  node_count   = 1
  disk_size_gb = 60
  eks {{
    cluster_name  = "moto-eks"
    node_role_arn = "arn:aws:iam::123456789012:role/gpu-nodes"
    subnet_ids    = ["subnet-1"]
    ami_type      = "BOTTLEROCKET_x86_64_NVIDIA"
  }}
  mps {{ replicas = 3 }}
}}
"#
    );
    let mut ws = Workspace::new(&config);
    for (k, v) in AWS_ENV {
        ws = ws.env(k, v);
    }
    ws.init();
    ws.apply();
    assert_eq!(moto_templates(&url), "['fracgpu/moto-eks/br']");
    let state = ws.show_json();
    let values = &state["values"]["root_module"]["resources"][0]["values"];
    assert_eq!(values["disk_size_gb"], 60);
    assert_eq!(values["mps"][0]["replicas"], 3);
    let (code, plan) = ws.plan_exit_code();
    assert_eq!(code, 0, "read back from moto's EC2:\n{}", plan.text());
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert_eq!(moto_templates(&url), "[]");
}
