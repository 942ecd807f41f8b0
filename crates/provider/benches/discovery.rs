//! Prints how long finding the pools of a large cluster takes (no assertions): the cloud client's
//! list of a cluster of 200 pools on each cloud (the call behind `list "fracgpu_nodepool"` and the
//! data source `fracgpu_nodepools`), and `terraform query` of that cluster end to end with
//! terraform 1.15 (process starts included). Run with `cargo bench --bench discovery`.
//!
//! AKS allows at most 100 pools a cluster (the sandbox refuses the 101st as AKS does), so the AKS
//! cluster here has 100, two pages of the sandbox's list; EKS's node group quota (30 by default) is
//! raised to 200, as Service Quotas allows.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ::sandbox::{ClusterSpec, Config, DEFAULT_SUBSCRIPTION, Sandbox};
use fracgpu::cloud::{
    AksPoolFields, EksPoolFields, GkePoolFields, GkeSharing, Location, NodePools, OpCtx, PoolSpec,
    PoolTaint, Scaling, StopSignal, TargetFields,
};
use futures_util::stream::{self, StreamExt};
use testkit::figures;
use testkit::tools::{self, Tool};

const PROVIDER: &str = env!("CARGO_BIN_EXE_terraform-provider-fracgpu");
const POOLS: usize = 200;

/// The pools of the cluster on `cloud`: [`POOLS`], or AKS's limit.
fn pools_on(cloud: &str) -> usize {
    if cloud == "aks" { 100 } else { POOLS }
}
const ROUNDS: usize = 5;

fn ctx() -> OpCtx {
    OpCtx::new(Duration::from_secs(600), StopSignal::default())
}

fn location(cloud: &str) -> Location {
    match cloud {
        "aks" => Location::Aks {
            subscription_id: DEFAULT_SUBSCRIPTION.into(),
            resource_group: "sandbox-rg".into(),
            cluster: "sandbox-aks".into(),
        },
        "gke" => Location::Gke {
            project: "sandbox-project".into(),
            location: "us-central1".into(),
            cluster: "sandbox-gke".into(),
        },
        _ => Location::Eks {
            region: "us-east-1".into(),
            cluster: "sandbox-eks".into(),
        },
    }
}

/// A time-sliced pool of one GPU on `cloud`, one node.
fn spec(cloud: &str, i: usize) -> PoolSpec {
    let (machine, gpu_count, target, labels) = match cloud {
        "aks" => (
            "Standard_NC4as_T4_v3",
            1,
            TargetFields::Aks(AksPoolFields::default()),
            true,
        ),
        "gke" => (
            "g2-standard-4",
            1,
            TargetFields::Gke(GkePoolFields {
                accelerator_type: Some("nvidia-l4".into()),
                sharing: Some(GkeSharing::TimeSharing { max_clients: 4 }),
                ..GkePoolFields::default()
            }),
            false,
        ),
        _ => (
            "g4dn.xlarge",
            0,
            TargetFields::Eks(EksPoolFields {
                node_role_arn: "arn:aws:iam::123456789012:role/gpu-nodes".into(),
                subnet_ids: vec!["subnet-0a1".into()],
                ami_type: "AL2023_x86_64_NVIDIA".into(),
                bottlerocket_settings: None,
            }),
            true,
        ),
    };
    // GKE runs as many nodes in each of the regional cluster's three zones, and taints its GPU
    // nodes itself.
    let gke = cloud == "gke";
    PoolSpec {
        location: location(cloud),
        name: format!("p{i:03}"),
        machine_type: machine.into(),
        scaling: Scaling::Fixed {
            nodes: if gke { 3 } else { 1 },
        },
        spot: false,
        disk_size_gb: None,
        labels: if labels {
            BTreeMap::from([(
                "nvidia.com/device-plugin.config".to_string(),
                "time-sliced-4".to_string(),
            )])
        } else {
            BTreeMap::new()
        },
        taints: if gke {
            Vec::new()
        } else {
            vec![PoolTaint {
                key: "nvidia.com/gpu".into(),
                value: "Present".into(),
                effect: "NoSchedule".into(),
            }]
        },
        gpu_count,
        node_template: BTreeMap::new(),
        target,
    }
}

/// Prints a figure and hands it to `scripts/bench`'s summary.
fn report(key: &str, label: &str, value: f64, unit: &str, note: &str) {
    println!("{label:<58} {value:>9.3} {unit}   {note}");
    figures::record(key, label, value, unit, note);
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// `terraform query` of the cluster's pools, with terraform 1.15 and the provider from an
/// offline mirror; None when that terraform is not available.
fn query(url: &str, cloud: &str) -> Option<Duration> {
    let tf = tools::find(Tool::Terraform115).ok()?;
    let root = tempfile::tempdir().unwrap();
    let cli = ::sandbox::demo::local_mirror(root.path(), Path::new(PROVIDER))
        .map_err(|e| e.0)
        .unwrap();
    let dir = root.path().join("work");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("main.tf"),
        format!(
            "terraform {{\n  required_providers {{\n    fracgpu = {{ source = \"fracgpu/fracgpu\" }}\n  }}\n}}\nprovider \"fracgpu\" {{\n  sandbox = \"{url}\"\n}}\n"
        ),
    )
    .unwrap();
    let cluster = match cloud {
        "aks" => {
            "aks {\n      resource_group = \"sandbox-rg\"\n      cluster_name = \"sandbox-aks\"\n    }"
        }
        "gke" => "gke {\n      location = \"us-central1\"\n      cluster = \"sandbox-gke\"\n    }",
        _ => "eks {\n      cluster_name = \"sandbox-eks\"\n    }",
    };
    std::fs::write(
        dir.join("pools.tfquery.hcl"),
        format!(
            "list \"fracgpu_nodepool\" \"all\" {{\n  provider = fracgpu\n  limit    = {}\n  config {{\n    {cluster}\n  }}\n}}\n",
            pools_on(cloud)
        ),
    )
    .unwrap();
    let run = |args: &[&str]| {
        let t = Instant::now();
        let out = Command::new(&tf)
            .args(args)
            .current_dir(&dir)
            .env("TF_CLI_CONFIG_FILE", &cli)
            .env("CHECKPOINT_DISABLE", "1")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "terraform {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let listed = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.starts_with("list.fracgpu_nodepool.all"))
            .count();
        (t.elapsed(), listed)
    };
    run(&["init", "-input=false", "-no-color"]);
    let mut times = Vec::new();
    for _ in 0..ROUNDS {
        let (took, listed) = run(&["query", "-no-color"]);
        assert_eq!(listed, pools_on(cloud), "terraform query listed every pool");
        times.push(took);
    }
    Some(median(times))
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    // EKS's node group quota raised to fit them (30 by default, adjustable).
    let clusters = ClusterSpec::defaults_with_nodegroup_quota(POOLS);
    let sandbox = Sandbox::open(Config {
        op_time: Duration::ZERO,
        clusters,
        ..Config::default()
    })
    .expect("sandbox opens");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let url = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let router = sandbox.router();
        tokio::spawn(async move { axum::serve(listener, router).await });
        url
    });
    let settings =
        fracgpu::cloud::CloudSettings::from_config(&tfplugin::Value::Null, Some(url.clone()));
    println!(
        "terraform-provider-fracgpu discovery benchmark ({} build): {POOLS} pools a cluster (AKS: 100)",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );
    for cloud in ["aks", "gke", "eks"] {
        let (client, listed) = rt.block_on(async {
            let client: std::sync::Arc<dyn NodePools> = settings
                .connect(gpu::Cloud::parse(cloud).expect("cloud"))
                .await
                .expect("client");
            let ctx = ctx();
            let made: Vec<_> = stream::iter(0..pools_on(cloud))
                .map(|i| {
                    let client = client.clone();
                    let ctx = &ctx;
                    async move { client.create(&spec(cloud, i), ctx).await }
                })
                .buffer_unordered(16)
                .collect()
                .await;
            assert!(made.iter().all(Result::is_ok), "{cloud}: every pool made");
            let mut times = Vec::new();
            for _ in 0..ROUNDS {
                let t = Instant::now();
                let pools = client.list(&location(cloud), &ctx).await.expect("list");
                times.push(t.elapsed());
                assert_eq!(pools.len(), pools_on(cloud));
            }
            (client, median(times))
        });
        drop(client);
        report(
            &format!("list200_{cloud}"),
            &format!(
                "list a cluster of {} pools, {} client",
                pools_on(cloud),
                cloud.to_uppercase()
            ),
            secs(listed),
            "s",
            &format!("median of {ROUNDS}, in process"),
        );
        match query(&url, cloud) {
            Some(took) => report(
                &format!("query200_{cloud}"),
                &format!("  terraform query of those {} pools", pools_on(cloud)),
                secs(took),
                "s",
                &format!("median of {ROUNDS}: terraform 1.15 and provider starts included"),
            ),
            None => println!(
                "terraform 1.15 not found (scripts/test-tools installs it): no query figure"
            ),
        }
    }
}
