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

use testkit::tools::{self, Tool};
mod sandbox_cloud_support;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use sandbox::NodeEvent;
use sandbox_cloud_support::*;
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

// ---------------------------------------------------------------- gcloud

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcloud_creates_lists_updates_and_deletes_shared_and_partitioned_pools() {
    if tools::require(Tool::Gcloud).is_none() {
        return;
    }
    let s = start(300).await;
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "ya29.sandbox").unwrap();
    let env = vec![
        (
            "CLOUDSDK_CONFIG",
            dir.path().join("gcloud").display().to_string(),
        ),
        (
            "CLOUDSDK_API_ENDPOINT_OVERRIDES_CONTAINER",
            format!("{}/", s.base),
        ),
        (
            "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE",
            token.display().to_string(),
        ),
        ("CLOUDSDK_CORE_PROJECT", "sandbox-project".to_string()),
        ("CLOUDSDK_CORE_DISABLE_PROMPTS", "1".to_string()),
    ];
    let loc = ["--cluster", "sandbox-gke", "--location", "us-central1"];
    let np = |args: &[&str]| {
        let mut v = vec!["container", "node-pools"];
        v.extend_from_slice(args);
        v.extend_from_slice(&loc);
        v.into_iter().map(str::to_string).collect::<Vec<_>>()
    };
    let g = |args: Vec<String>| {
        let env = env.clone();
        async move {
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            let o = run("gcloud", &a, &env).await;
            assert!(o.ok, "gcloud {}: {}", args.join(" "), o.stderr);
            o
        }
    };

    g(np(&[
        "create",
        "shared",
        "--machine-type",
        "g2-standard-8",
        "--num-nodes",
        "2",
        "--node-labels",
        "team=ml",
        "--accelerator",
        "type=nvidia-l4,count=1,gpu-sharing-strategy=time-sharing,max-shared-clients-per-gpu=10",
    ]))
    .await;
    g(np(&[
        "create",
        "mig",
        "--machine-type",
        "a2-highgpu-1g",
        "--num-nodes",
        "1",
        "--node-taints",
        "dedicated=gpu:NoSchedule",
        "--accelerator",
        "type=nvidia-tesla-a100,count=1,gpu-partition-size=1g.5gb,gpu-driver-version=latest",
    ]))
    .await;
    let list = g(np(&["list", "--format", "json"])).await.json();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["mig", "shared"]);
    let shared = &list[1]["config"]["accelerators"][0];
    assert_eq!(
        shared["gpuSharingConfig"],
        json!({"gpuSharingStrategy": "TIME_SHARING", "maxSharedClientsPerGpu": "10"})
    );
    assert_eq!(
        list[0]["config"]["accelerators"][0]["gpuPartitionSize"],
        "1g.5gb"
    );
    assert_eq!(
        list[0]["config"]["taints"][0],
        json!({"key": "dedicated", "value": "gpu", "effect": "NO_SCHEDULE"})
    );

    // Updates: labels (nodePools.update), size (setSize, after reading the cluster), autoscaling (clusters.update).
    g(np(&["update", "shared", "--node-labels", "team=infra"])).await;
    let resize = [
        "container",
        "clusters",
        "resize",
        "sandbox-gke",
        "--node-pool",
        "shared",
        "--num-nodes",
        "3",
        "--location",
        "us-central1",
    ];
    let o = run("gcloud", &resize, &env).await;
    assert!(o.ok, "resize: {}", o.stderr);
    g(np(&[
        "update",
        "mig",
        "--enable-autoscaling",
        "--min-nodes",
        "1",
        "--max-nodes",
        "4",
    ]))
    .await;
    let shared = g(np(&["describe", "shared", "--format", "json"]))
        .await
        .json();
    assert_eq!(shared["config"]["labels"], json!({"team": "infra"}));
    assert_eq!(shared["status"], "RUNNING");
    let mig = g(np(&["describe", "mig", "--format", "json"])).await.json();
    assert_eq!(
        (
            mig["autoscaling"]["enabled"].as_bool(),
            mig["autoscaling"]["maxNodeCount"].as_i64()
        ),
        (Some(true), Some(4))
    );
    let cluster = g(vec![
        "container".into(),
        "clusters".into(),
        "describe".into(),
        "sandbox-gke".into(),
        "--location".into(),
        "us-central1".into(),
        "--format".into(),
        "json".into(),
    ])
    .await
    .json();
    assert_eq!(cluster["currentNodeCount"], 4, "3 shared + 1 mig");

    // The node hand-off saw GKE's sharing and partition labels.
    let events = s.sink.take();
    let last = |pool: &str| {
        events.iter().rev().find_map(|e| match e {
            NodeEvent::Changed(n) if n.pool == pool => Some(n.clone()),
            _ => None,
        })
    };
    let sh = last("shared").expect("shared nodes");
    assert_eq!(
        (sh.node_count, sh.gke_sharing.clone()),
        (3, Some(("TIME_SHARING".to_string(), 10)))
    );
    assert_eq!(sh.labels["team"], "infra");
    let mg = last("mig").expect("mig nodes");
    assert_eq!(
        (
            mg.mig_profile.as_deref(),
            mg.mig_instances_per_gpu,
            mg.node_count
        ),
        (Some("1g.5gb"), 7, 1)
    );

    // A bad request surfaces GKE's message through gcloud.
    let bad = np(&[
        "create",
        "bad",
        "--machine-type",
        "a2-highgpu-1g",
        "--accelerator",
        "type=nvidia-tesla-a100,count=1,gpu-partition-size=1g.10gb",
    ]);
    let a: Vec<&str> = bad.iter().map(String::as_str).collect();
    let o = run("gcloud", &a, &env).await;
    assert!(!o.ok && o.stderr.contains("1g.10gb"), "{}", o.stderr);

    g(np(&["delete", "shared"])).await;
    g(np(&["delete", "mig"])).await;
    let list = g(np(&["list", "--format", "json"])).await.json();
    assert_eq!(list, json!([]));
    assert_eq!(s.sb.inventory()["pools"], json!([]));
}

// ---------------------------------------------------------------- aws CLI

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws_cli_drives_the_node_group_lifecycle() {
    if tools::require(Tool::Aws).is_none() {
        return;
    }
    let s = start(300).await;
    let dir = tempfile::tempdir().unwrap();
    let env = aws_env(dir.path());
    let e = s.base.as_str();
    let o = aws(e, &env, CREATE).await;
    assert!(o.ok, "{}", o.stderr);
    assert_eq!(o.json()["nodegroup"]["status"], "CREATING");
    let ng = wait_status(e, &env, "ACTIVE").await;
    assert_eq!(ng["nodegroup"]["diskSize"], 50);
    assert_eq!(ng["nodegroup"]["tags"], json!({"env": "test"}));
    let o = aws(
        e,
        &env,
        &["list-nodegroups", "--cluster-name", "sandbox-eks"],
    )
    .await;
    assert_eq!(o.json()["nodegroups"], json!(["gpu"]));

    let o = aws(
        e,
        &env,
        &[
            "update-nodegroup-config",
            "--cluster-name",
            "sandbox-eks",
            "--nodegroup-name",
            "gpu",
            "--scaling-config",
            "desiredSize=3",
            "--labels",
            "addOrUpdateLabels={nvidia.com/device-plugin.config=time-sliced-4}",
            "--taints",
            "removeTaints=[{key=nvidia.com/gpu,value=true,effect=NO_SCHEDULE}]",
        ],
    )
    .await;
    assert!(o.ok, "{}", o.stderr);
    let id = o.json()["update"]["id"].as_str().unwrap().to_string();
    let mut status = String::new();
    for _ in 0..100 {
        let o = aws(
            e,
            &env,
            &[
                "describe-update",
                "--name",
                "sandbox-eks",
                "--nodegroup-name",
                "gpu",
                "--update-id",
                &id,
            ],
        )
        .await;
        assert!(o.ok, "{}", o.stderr);
        status = o.json()["update"]["status"].as_str().unwrap().to_string();
        if status != "InProgress" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status, "Successful");
    let ng = wait_status(e, &env, "ACTIVE").await;
    assert_eq!(ng["nodegroup"]["scalingConfig"]["desiredSize"], 3);
    assert_eq!(ng["nodegroup"]["taints"], json!([]));
    assert_eq!(
        ng["nodegroup"]["labels"]["nvidia.com/device-plugin.config"],
        "time-sliced-4"
    );

    let o = aws(
        e,
        &env,
        &[
            "update-nodegroup-version",
            "--cluster-name",
            "sandbox-eks",
            "--nodegroup-name",
            "gpu",
        ],
    )
    .await;
    assert!(o.ok, "{}", o.stderr);
    assert_eq!(o.json()["update"]["type"], "VersionUpdate");
    wait_status(e, &env, "ACTIVE").await;

    // Validation errors come back as the aws CLI shows EKS's.
    let o = aws(
        e,
        &env,
        &[
            "update-nodegroup-config",
            "--cluster-name",
            "sandbox-eks",
            "--nodegroup-name",
            "gpu",
            "--scaling-config",
            "minSize=5",
        ],
    )
    .await;
    assert!(
        !o.ok && o.stderr.contains("InvalidParameterException"),
        "{}",
        o.stderr
    );

    let o = aws(
        e,
        &env,
        &[
            "delete-nodegroup",
            "--cluster-name",
            "sandbox-eks",
            "--nodegroup-name",
            "gpu",
        ],
    )
    .await;
    assert_eq!(o.json()["nodegroup"]["status"], "DELETING");
    let mut gone = false;
    for _ in 0..100 {
        let o = aws(
            e,
            &env,
            &[
                "describe-nodegroup",
                "--cluster-name",
                "sandbox-eks",
                "--nodegroup-name",
                "gpu",
            ],
        )
        .await;
        if !o.ok {
            assert!(
                o.stderr.contains("ResourceNotFoundException"),
                "{}",
                o.stderr
            );
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone);
    assert!(
        s.sink
            .take()
            .iter()
            .any(|e| matches!(e, NodeEvent::Deleted { pool, .. } if pool == "gpu"))
    );
}

// ---------------------------------------------------------------- moto comparison

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// The fields moto models and gets right, with ARN and ASG ids made comparable.
fn comparable(ng: &Value) -> Value {
    let mut v = json!({});
    for f in [
        "nodegroupName",
        "clusterName",
        "capacityType",
        "scalingConfig",
        "instanceTypes",
        "subnets",
        "amiType",
        "nodeRole",
        "labels",
        "taints",
        "diskSize",
        "health",
        "tags",
    ] {
        v[f] = ng[f].clone();
    }
    let arn = ng["nodegroupArn"].as_str().unwrap_or("");
    v["nodegroupArn"] = json!(arn.rsplit_once('/').map(|(p, _)| p).unwrap_or(""));
    v["asgCount"] = json!(
        ng["resources"]["autoScalingGroups"]
            .as_array()
            .map(|a| a.len())
    );
    v["createdAtIsNumber"] = json!(ng["createdAt"].is_number());
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eks_happy_path_matches_moto() {
    if tools::require(Tool::Aws).is_none() || tools::require(Tool::Moto).is_none() {
        return;
    }
    let port = free_port();
    let mut moto = tokio::process::Command::new("python3")
        .args([
            "-m",
            "moto.server",
            "-H",
            "127.0.0.1",
            "-p",
            &port.to_string(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("moto starts");
    let moto_url = format!("http://127.0.0.1:{port}");
    let mut up = false;
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(up, "moto did not start");
    let s = start(0).await;
    let dir = tempfile::tempdir().unwrap();
    let env = aws_env(dir.path());
    // moto has no clusters until one is created; the sandbox's world has sandbox-eks.
    let o = aws(
        &moto_url,
        &env,
        &[
            "create-cluster",
            "--name",
            "sandbox-eks",
            "--kubernetes-version",
            "1.33",
            "--role-arn",
            "arn:aws:iam::123456789012:role/c",
            "--resources-vpc-config",
            "subnetIds=subnet-0a",
        ],
    )
    .await;
    assert!(o.ok, "{}", o.stderr);

    let mut answers: Vec<[Value; 2]> = Vec::new();
    for (i, endpoint) in [moto_url.as_str(), s.base.as_str()].into_iter().enumerate() {
        let mut a = vec![];
        let o = aws(endpoint, &env, CREATE).await;
        assert!(o.ok, "{endpoint}: {}", o.stderr);
        a.push(comparable(&o.json()["nodegroup"]));
        let d = wait_status(endpoint, &env, "ACTIVE").await;
        a.push(comparable(&d["nodegroup"]));
        let o = aws(
            endpoint,
            &env,
            &["list-nodegroups", "--cluster-name", "sandbox-eks"],
        )
        .await;
        a.push(o.json());
        let o = aws(
            endpoint,
            &env,
            &[
                "update-nodegroup-config",
                "--cluster-name",
                "sandbox-eks",
                "--nodegroup-name",
                "gpu",
                "--scaling-config",
                "minSize=0,maxSize=4,desiredSize=4",
                "--labels",
                "addOrUpdateLabels={team=ml},removeLabels=nvidia.com/device-plugin.config",
            ],
        )
        .await;
        assert!(o.ok, "{endpoint}: {}", o.stderr);
        a.push(json!({"type": o.json()["update"]["type"], "id_len": o.json()["update"]["id"].as_str().map(str::len)}));
        let d = wait_status(endpoint, &env, "ACTIVE").await;
        a.push(comparable(&d["nodegroup"]));
        let o = aws(endpoint, &env, CREATE).await;
        a.push(json!({"ok": o.ok, "error": o.stderr.contains("ResourceInUseException")}));
        let o = aws(
            endpoint,
            &env,
            &[
                "describe-nodegroup",
                "--cluster-name",
                "sandbox-eks",
                "--nodegroup-name",
                "missing",
            ],
        )
        .await;
        a.push(json!({"ok": o.ok, "error": o.stderr.contains("ResourceNotFoundException")}));
        let o = aws(
            endpoint,
            &env,
            &[
                "delete-nodegroup",
                "--cluster-name",
                "sandbox-eks",
                "--nodegroup-name",
                "gpu",
            ],
        )
        .await;
        assert!(o.ok, "{endpoint}: {}", o.stderr);
        a.push(comparable(&o.json()["nodegroup"]));
        let mut gone = false;
        for _ in 0..100 {
            let o = aws(
                endpoint,
                &env,
                &[
                    "describe-nodegroup",
                    "--cluster-name",
                    "sandbox-eks",
                    "--nodegroup-name",
                    "gpu",
                ],
            )
            .await;
            if !o.ok && o.stderr.contains("ResourceNotFoundException") {
                gone = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        a.push(json!({ "gone": gone }));
        for (step, v) in a.into_iter().enumerate() {
            if i == 0 {
                answers.push([v, Value::Null]);
            } else {
                answers[step][1] = v;
            }
        }
    }
    let steps = [
        "create",
        "describe",
        "list",
        "update-config",
        "describe after update",
        "create again",
        "describe missing",
        "delete",
        "after delete",
    ];
    let mut diffs = Vec::new();
    for (step, [moto, sandbox]) in answers.iter().enumerate() {
        if moto != sandbox {
            diffs.push(format!(
                "{}:\n  moto    {moto}\n  sandbox {sandbox}",
                steps[step]
            ));
        }
    }
    assert!(
        diffs.is_empty(),
        "sandbox and moto disagree:\n{}",
        diffs.join("\n")
    );
    assert_eq!(answers[4][1]["labels"], json!({"team": "ml"}));
    let _ = moto.kill().await;
}
