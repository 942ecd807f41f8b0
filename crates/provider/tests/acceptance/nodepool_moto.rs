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

#[test]
fn eks_node_group_lifecycle_against_moto() {
    if crate::common::tools::require(crate::common::tools::Tool::Moto).is_none() {
        return;
    }
    let (_moto, url) = start_moto();
    // moto needs the cluster first, as EKS does.
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
        "time-sliced-10"
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
