//! Plans at real-cloud latency (no assertions; prints a table): `terraform plan` (refresh
//! included) of pools spread over AKS, GKE and EKS, with the sandbox answering every cloud
//! request at once, after 100 ms and after 300 ms (+-10% jitter), measured side by side on one
//! world, beside as many `terraform_data`; at 100 and 300 ms once more with `-parallelism` as
//! large as the pool count (terraform refreshes resource blocks one after another at its default
//! of 10, so the three clouds' blocks wait for their lists in turn); and the cloud requests per
//! refreshed pool, per cloud.
//! ARM, GKE and EKS answer a GET in tens to hundreds of milliseconds.
//! Sizes: `FRACGPU_BENCH_LATENCY_SIZES=20,200,2000` (default 200); clouds:
//! `FRACGPU_BENCH_LATENCY_CLOUDS=aks,eks` (default all three), the pools split evenly over them.
//! Run with `cargo bench --bench latency`.
//!
//! Each cloud's requests of one plan are printed beside the API's documented read quota, so that
//! a plan of many pools can be seen to stay clear of it (per-pool reads, two a pool, would not at
//! 2000 pools on ARM or Compute):
//! - ARM (AKS): subscription reads, a token bucket of 250 refilled at 25 a second per region
//!   (12,000 an hour per principal under the older limits):
//!   <https://learn.microsoft.com/en-us/azure/azure-resource-manager/management/request-limits-and-throttling>
//! - Kubernetes Engine API (GKE's node pools): 3,000 requests a minute per project:
//!   <https://cloud.google.com/kubernetes-engine/quotas>
//! - Compute Engine API (GKE's instance group sizes): read requests 1,500 a minute per project:
//!   <https://cloud.google.com/compute/docs/api-rate-limits>
//! - EKS: no request rate is published for ListNodegroups or DescribeNodegroup; EKS throttles
//!   per account and Region (ThrottlingException), and its Service Quotas list resource quotas:
//!   <https://docs.aws.amazon.com/eks/latest/userguide/service-quotas.html>

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ::sandbox::{ClusterSpec, Config, DEFAULT_SUBSCRIPTION, Latency, Sandbox};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use testkit::figures;

#[path = "support/workspace.rs"]
mod workspace;
use workspace::{Workspace, data_tf, pools_tf_on, secs};

const PROVIDER: &str = env!("CARGO_BIN_EXE_terraform-provider-fracgpu");
/// As in the `scale` benchmark: AKS's limit of agent pools per cluster, and GKE pools per
/// cluster spread as a large configuration would be.
const AKS_POOLS_PER_CLUSTER: usize = 100;
const GKE_POOLS_PER_CLUSTER: usize = 20;
/// EKS's default quota of managed node groups per cluster (L-6D54EA21): a refresh's EKS reads
/// are spread over clusters as a real account's would be. The quota can be raised, but not past
/// a hard limit of 100 per cluster (aws/containers-roadmap#2272 asks for more), so one cluster
/// of 200 or 2000 node groups, which the sandbox would hold, is not a configuration EKS allows.
const EKS_POOLS_PER_CLUSTER: usize = 30;
const LATENCIES_MS: [u64; 3] = [0, 100, 300];

/// Cloud requests seen, per cloud.
type Counts = Arc<Mutex<BTreeMap<&'static str, u64>>>;

fn cloud_of(path: &str) -> &'static str {
    if path.contains("/oauth2/") {
        "aks token"
    } else if path.starts_with("/subscriptions/") {
        "aks"
    } else if path.starts_with("/compute/") {
        "gke compute"
    } else if path.starts_with("/v1/") {
        "gke"
    } else if path.starts_with("/clusters") {
        "eks"
    } else {
        "other"
    }
}

async fn count(State(c): State<Counts>, req: Request, next: Next) -> Response {
    let cloud = cloud_of(req.uri().path());
    *c.lock().unwrap().entry(cloud).or_default() += 1;
    next.run(req).await
}

struct Running {
    url: String,
    sandbox: Sandbox,
    counts: Counts,
}

fn start(n: usize) -> (Running, [String; 3]) {
    let mut clusters = ClusterSpec::defaults();
    let [a, g, e] = split(n);
    for k in 0..a.div_ceil(AKS_POOLS_PER_CLUSTER) {
        clusters.push(ClusterSpec::Aks {
            subscription: DEFAULT_SUBSCRIPTION.into(),
            resource_group: "sandbox-rg".into(),
            name: format!("lat-aks-{k}"),
            location: "eastus".into(),
        });
    }
    for k in 0..g.div_ceil(GKE_POOLS_PER_CLUSTER) {
        clusters.push(ClusterSpec::Gke {
            project: "sandbox-project".into(),
            location: "us-central1".into(),
            name: format!("lat-gke-{k}"),
        });
    }
    for k in 0..e.div_ceil(EKS_POOLS_PER_CLUSTER) {
        clusters.push(ClusterSpec::Eks {
            region: "us-east-1".into(),
            name: format!("lat-eks-{k}"),
            nodegroup_quota: None,
        });
    }
    let sandbox = Sandbox::open(Config {
        op_time: Duration::ZERO,
        clusters,
        ..Config::default()
    })
    .expect("sandbox opens");
    let counts = Counts::default();
    let router = sandbox
        .router()
        .layer(axum::middleware::from_fn_with_state(counts.clone(), count));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, router).await.unwrap();
        });
    });
    let addr = rx.recv().expect("sandbox listening");
    let aks = format!("\"lat-aks-${{floor(count.index / {AKS_POOLS_PER_CLUSTER})}}\"");
    let gke = format!("\"lat-gke-${{floor(count.index / {GKE_POOLS_PER_CLUSTER})}}\"");
    let eks = format!("\"lat-eks-${{floor(count.index / {EKS_POOLS_PER_CLUSTER})}}\"");
    (
        Running {
            url: format!("http://{addr}"),
            sandbox,
            counts,
        },
        [aks, gke, eks],
    )
}

struct Tier {
    per_cloud: [usize; 3],
    /// Plan wall time at each of LATENCIES_MS.
    plans: Vec<Duration>,
    /// The plan at each latency but 0 with `-parallelism` as large as the pool count.
    wide_plans: Vec<Duration>,
    data_plan: Duration,
    /// Requests of one plan at 0 ms, per cloud.
    requests: BTreeMap<&'static str, u64>,
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// `n` pools split evenly over the clouds FRACGPU_BENCH_LATENCY_CLOUDS names: AKS, GKE, EKS.
fn split(n: usize) -> [usize; 3] {
    let on = std::env::var("FRACGPU_BENCH_LATENCY_CLOUDS").unwrap_or_else(|_| "aks,gke,eks".into());
    let on: Vec<bool> = ["aks", "gke", "eks"]
        .iter()
        .map(|c| on.split(',').any(|x| x.trim() == *c))
        .collect();
    let k = on.iter().filter(|b| **b).count().max(1);
    let mut out = [0; 3];
    let mut left = n;
    for i in 0..3 {
        if on[i] {
            out[i] = n / k;
            left -= n / k;
        }
    }
    if let Some(last) = (0..3).rev().find(|i| on[*i]) {
        out[last] += left;
    }
    out
}

fn measure(n: usize) -> Tier {
    let [a, g, e] = split(n);
    let (sb, [aks, gke, eks]) = start(n);
    let pools = Workspace::new(
        Path::new(PROVIDER),
        &pools_tf_on(&sb.url, a, g, e, (&aks, &gke, &eks)),
    );
    pools.init();
    pools.apply();
    let data = Workspace::new(Path::new(PROVIDER), &data_tf(n));
    data.init();
    data.apply();
    let plan = |ws: &Workspace| ws.tf(&["plan", "-input=false", "-refresh=true"]);
    let wide = format!("-parallelism={n}");
    let wide_plan = |ws: &Workspace| ws.tf(&["plan", "-input=false", "-refresh=true", &wide]);
    let rounds = if n > 500 { 1 } else { 3 };
    // Requests of one plan, counted alone.
    sb.counts.lock().unwrap().clear();
    plan(&pools);
    let requests = sb.counts.lock().unwrap().clone();
    let mut plans = vec![Vec::new(); LATENCIES_MS.len()];
    let mut data_plans = Vec::new();
    let mut wide_plans = vec![Vec::new(); LATENCIES_MS.len() - 1];
    // Interleaved rounds, so a slow moment of the machine falls on every latency alike.
    for _ in 0..rounds {
        for (i, ms) in LATENCIES_MS.iter().enumerate() {
            sb.sandbox.set_latency(Latency {
                base: Duration::from_millis(ms - ms / 10),
                jitter: Duration::from_millis(ms / 5),
            });
            plans[i].push(plan(&pools));
            if i > 0 {
                wide_plans[i - 1].push(wide_plan(&pools));
            }
        }
        sb.sandbox.set_latency(Latency::default());
        data_plans.push(plan(&data));
    }
    pools.tf(&["destroy", "-auto-approve", "-input=false"]);
    Tier {
        per_cloud: [a, g, e],
        plans: plans.into_iter().map(median).collect(),
        wide_plans: wide_plans.into_iter().map(median).collect(),
        data_plan: median(data_plans),
        requests,
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let sizes: Vec<usize> = std::env::var("FRACGPU_BENCH_LATENCY_SIZES")
        .unwrap_or_else(|_| "200".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    println!(
        "fracgpu_nodepool plans at cloud latency ({} build, parallelism 10, refresh on)",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );
    for n in sizes {
        let t = measure(n);
        println!();
        println!(
            "{n} pools (AKS {}, GKE {}, EKS {})",
            t.per_cloud[0], t.per_cloud[1], t.per_cloud[2]
        );
        let base = secs(t.plans[0]);
        for (ms, d) in LATENCIES_MS.iter().zip(&t.plans) {
            println!(
                "  plan at {ms:>3} ms per request: {:>7.2} s  {:>5.2}x the plan at 0 ms",
                secs(*d),
                secs(*d) / base
            );
        }
        for (ms, d) in LATENCIES_MS[1..].iter().zip(&t.wide_plans) {
            println!(
                "  plan at {ms:>3} ms, -parallelism={n}: {:>7.2} s  {:>5.2}x the plan at 0 ms",
                secs(*d),
                secs(*d) / base
            );
        }
        println!(
            "  plan of {n} terraform_data:     {:>7.2} s  (the 0 ms plan is {:.2}x it)",
            secs(t.data_plan),
            base / secs(t.data_plan)
        );
        println!("  cloud requests of one plan, beside each API's documented read quota:");
        for (i, cloud) in ["aks", "gke", "eks"].iter().enumerate() {
            let compute = t.requests.get("gke compute").copied().unwrap_or(0);
            let own = t.requests.get(cloud).copied().unwrap_or(0);
            let r = own + if *cloud == "gke" { compute } else { 0 };
            let per = r as f64 / t.per_cloud[i].max(1) as f64;
            println!("    {cloud}: {r:>5} ({per:.2} per refreshed pool)");
            match *cloud {
                "aks" => println!(
                    "      ARM subscription reads: {own} of a bucket of 250 (refilled at 25/s)"
                ),
                "gke" => {
                    println!("      Kubernetes Engine API: {own} of 3,000 a minute per project");
                    println!("      Compute Engine reads: {compute} of 1,500 a minute per project");
                }
                _ => println!(
                    "      EKS: no published read rate; {own} requests, described concurrently"
                ),
            }
            figures::record(
                &format!("latency{n}_requests_{cloud}"),
                &format!("{cloud} requests per refreshed pool, plan of {n}"),
                per,
                "",
                &format!("{r} requests for {} pools", t.per_cloud[i]),
            );
        }
        for (ms, d) in LATENCIES_MS[1..].iter().zip(&t.wide_plans) {
            figures::record(
                &format!("latency{n}_ratio{ms}_wide"),
                &format!("plan {n} pools at {ms} ms, -parallelism={n} / at 0 ms"),
                secs(*d) / base,
                "x",
                &format!("{:.2} s vs {base:.2} s", secs(*d)),
            );
        }
        let tokens = t.requests.get("aks token").copied().unwrap_or(0);
        println!("    aks tokens: {tokens}");
        for (ms, d) in LATENCIES_MS.iter().zip(&t.plans).skip(1) {
            figures::record(
                &format!("latency{n}_ratio{ms}"),
                &format!("plan {n} pools at {ms} ms / at 0 ms"),
                secs(*d) / base,
                "x",
                &format!(
                    "{:.2} s vs {:.2} s; {n} terraform_data {:.2} s",
                    secs(*d),
                    base,
                    secs(t.data_plan)
                ),
            );
        }
    }
}
