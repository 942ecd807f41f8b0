//! The sandbox against independent real clients: the gcloud CLI (GKE), the aws CLI (EKS), and the
//! same EKS happy path run against moto to compare every field moto models. A missing tool fails
//! the test under CI=true and skips it elsewhere (`testkit::tools`).
//!
//! Where moto differs from the sandbox, moto is the one that departs from EKS (checked against the
//! EKS API reference); those fields are not compared:
//! - status: moto answers ACTIVE on create and on delete; EKS answers CREATING / DELETING and
//!   settles later (the sandbox after its operation time).
//! - remoteAccess: moto injects {"ec2SshKey": "eksKeypair"} and a remoteAccessSecurityGroup when the
//!   request has no remoteAccess; EKS omits both.
//! - resources.autoScalingGroups[].name: moto "eks-<uuid>", EKS "eks-<nodegroup>-<uuid>".
//! - version: moto gives every node group "1.19", even in a cluster created with
//!   --kubernetes-version 1.33; EKS defaults a node group to its cluster's version.
//! - releaseVersion: moto returns a fixed 2021 AMI release ("1.19.8-20210414") whatever the version.
//! - updateConfig: moto omits it; EKS returns {"maxUnavailable": 1} by default.
//! - update params: moto reports {"type": "Labels"|"ScalingConfig", "value": <Python repr>}; EKS uses
//!   the UpdateParamType values (LabelsToAdd, LabelsToRemove, DesiredSize, ...) with JSON values.
//! - update status: moto is Successful at once; EKS is InProgress first.
//! - update-nodegroup-version and describe-update are not implemented by moto (404 HTML).

mod aws_cli;
mod gcloud;
mod moto;

use testkit::tools::{self, Tool};

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::support::*;
use sandbox::NodeEvent;
use serde_json::{Value, json};

struct Out {
    ok: bool,
    stdout: String,
    stderr: String,
}

impl Out {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", self.stdout, self.stderr))
    }
}

async fn run(tool: &str, args: &[&str], env: &[(&str, String)]) -> Out {
    let mut cmd = tokio::process::Command::new(tool);
    cmd.args(args).stdin(Stdio::null()).kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .expect("tool finished within 120 s")
        .expect("tool runs");
    Out {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn aws_env(dir: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ACCESS_KEY_ID", "AKIDSANDBOX".to_string()),
        ("AWS_SECRET_ACCESS_KEY", "sandbox-secret".to_string()),
        ("AWS_DEFAULT_REGION", "us-east-1".to_string()),
        ("AWS_EC2_METADATA_DISABLED", "true".to_string()),
        ("AWS_PAGER", String::new()),
        ("AWS_CONFIG_FILE", dir.join("config").display().to_string()),
        (
            "AWS_SHARED_CREDENTIALS_FILE",
            dir.join("credentials").display().to_string(),
        ),
    ]
}

async fn aws(endpoint: &str, env: &[(&str, String)], args: &[&str]) -> Out {
    let mut a = vec!["eks", "--endpoint-url", endpoint, "--output", "json"];
    a.extend_from_slice(args);
    run("aws", &a, env).await
}

const CREATE: &[&str] = &[
    "create-nodegroup",
    "--cluster-name",
    "sandbox-eks",
    "--nodegroup-name",
    "gpu",
    "--node-role",
    "arn:aws:iam::123456789012:role/node",
    "--subnets",
    "subnet-0a",
    "subnet-0b",
    "--instance-types",
    "g5.xlarge",
    "--ami-type",
    "AL2023_x86_64_NVIDIA",
    "--capacity-type",
    "ON_DEMAND",
    "--disk-size",
    "50",
    "--scaling-config",
    "minSize=1,maxSize=3,desiredSize=2",
    "--labels",
    "nvidia.com/device-plugin.config=time-sliced-10",
    "--taints",
    "key=nvidia.com/gpu,value=true,effect=NO_SCHEDULE",
    "--tags",
    "env=test",
];

async fn wait_status(endpoint: &str, env: &[(&str, String)], want: &str) -> Value {
    for _ in 0..100 {
        let o = aws(
            endpoint,
            env,
            &[
                "describe-nodegroup",
                "--cluster-name",
                "sandbox-eks",
                "--nodegroup-name",
                "gpu",
            ],
        )
        .await;
        assert!(o.ok, "{}", o.stderr);
        let v = o.json();
        if v["nodegroup"]["status"] == want {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("node group never reached {want}");
}
