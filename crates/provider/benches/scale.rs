//! Whether the cost per pool stays flat as a configuration grows (no assertions; prints a table):
//! `terraform apply` and `terraform plan` (refresh included) of 20 and 200 pools, spread evenly
//! over AKS, GKE and EKS (100 AKS and 20 GKE pools per cluster), with operations that end at
//! once, against as many `terraform_data`.
//! `FRACGPU_BENCH_SCALE=2000` adds 2000 pools (about five minutes in a release build).
//! Run with `cargo bench --bench scale`.

use std::path::Path;
use std::time::Duration;

use ::sandbox::{ClusterSpec, Config, DEFAULT_SUBSCRIPTION};
use testkit::figures;

#[path = "support/workspace.rs"]
mod workspace;
use workspace::{Workspace, data_tf, pools_tf_on, secs};

#[allow(dead_code)]
#[path = "../tests/common/sandbox.rs"]
mod serve;

const PROVIDER: &str = env!("CARGO_BIN_EXE_terraform-provider-fracgpu");
/// AKS's agent pools per cluster (its limit), and GKE pools per cluster, spread over clusters as
/// a large configuration would be (GKE runs 5 operations per cluster at a time).
const AKS_POOLS_PER_CLUSTER: usize = 100;
const GKE_POOLS_PER_CLUSTER: usize = 20;

/// Wall times of one size: apply and the median plan, for the pools and for terraform_data,
/// and the CPU time of the applies (terraform and its providers).
struct Tier {
    n: usize,
    apply: Duration,
    plan: Duration,
    data_apply: Duration,
    data_plan: Duration,
    apply_cpu: Duration,
    data_apply_cpu: Duration,
}

fn measure(n: usize, rounds: usize) -> Tier {
    let (a, g) = (n / 3, n / 3);
    let e = n - a - g;
    // The default world, the EKS quota raised to hold every node group, and enough AKS clusters.
    let mut clusters = ClusterSpec::defaults_with_nodegroup_quota(n.max(30));
    for k in 0..a.div_ceil(AKS_POOLS_PER_CLUSTER) {
        clusters.push(ClusterSpec::Aks {
            subscription: DEFAULT_SUBSCRIPTION.into(),
            resource_group: "sandbox-rg".into(),
            name: format!("scale-aks-{k}"),
            location: "eastus".into(),
        });
    }
    for k in 0..g.div_ceil(GKE_POOLS_PER_CLUSTER) {
        clusters.push(ClusterSpec::Gke {
            project: "sandbox-project".into(),
            location: "us-central1".into(),
            name: format!("scale-gke-{k}"),
        });
    }
    let sb = serve::start_with(Config {
        op_time: Duration::ZERO,
        clusters,
        ..Config::default()
    });
    let aks = format!("\"scale-aks-${{floor(count.index / {AKS_POOLS_PER_CLUSTER})}}\"");
    let gke = format!("\"scale-gke-${{floor(count.index / {GKE_POOLS_PER_CLUSTER})}}\"");
    let pools = Workspace::new(
        Path::new(PROVIDER),
        &pools_tf_on(&sb.url, a, g, e, (&aks, &gke, "\"sandbox-eks\"")),
    );
    pools.init();
    let apply_args = ["apply", "-auto-approve", "-input=false"];
    let (apply, apply_cpu) = pools.tf_cpu(&apply_args, &[]);
    let data = Workspace::new(Path::new(PROVIDER), &data_tf(n));
    data.init();
    let (data_apply, data_apply_cpu) = data.tf_cpu(&apply_args, &[]);
    // Plans interleaved, medians.
    let plan = |ws: &Workspace| ws.tf(&["plan", "-input=false", "-refresh=true"]);
    let (mut p, mut d): (Vec<Duration>, Vec<Duration>) =
        (0..rounds).map(|_| (plan(&pools), plan(&data))).unzip();
    p.sort();
    d.sort();
    Tier {
        n,
        apply,
        plan: p[p.len() / 2],
        data_apply,
        data_plan: d[d.len() / 2],
        apply_cpu,
        data_apply_cpu,
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let mut sizes = vec![20, 200];
    if let Ok(more) = std::env::var("FRACGPU_BENCH_SCALE") {
        sizes.extend(
            more.split(',')
                .filter_map(|s| s.trim().parse::<usize>().ok()),
        );
    }
    println!(
        "fracgpu_nodepool at scale ({} build, operations end at once, parallelism 10)",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );
    let tiers: Vec<Tier> = sizes
        .iter()
        .map(|&n| measure(n, if n > 500 { 1 } else { 3 }))
        .collect();
    let ms = |d: Duration, n: usize| secs(d) * 1000.0 / n as f64;
    println!();
    println!(
        "{:>6} {:>10} {:>10} {:>7} {:>10}   {:>10} {:>10} {:>7}",
        "pools", "apply", "ms/pool", "x data", "CPU ms/pool", "plan", "ms/pool", "x data"
    );
    for t in &tiers {
        println!(
            "{:>6} {:>8.2} s {:>10.2} {:>6.2}x {:>11.2}   {:>8.2} s {:>10.2} {:>6.2}x",
            t.n,
            secs(t.apply),
            ms(t.apply, t.n),
            secs(t.apply) / secs(t.data_apply),
            ms(t.apply_cpu, t.n),
            secs(t.plan),
            ms(t.plan, t.n),
            secs(t.plan) / secs(t.data_plan),
        );
        println!(
            "{:>6} {:>8.2} s {:>10.2} {:>7} {:>11.2}   {:>8.2} s {:>10.2}   terraform_data",
            "",
            secs(t.data_apply),
            ms(t.data_apply, t.n),
            "",
            ms(t.data_apply_cpu, t.n),
            secs(t.data_plan),
            ms(t.data_plan, t.n),
        );
        figures::record(
            &format!("scale_apply{}", t.n),
            &format!("apply {} pools, per pool", t.n),
            ms(t.apply, t.n),
            "ms",
            &format!(
                "{:.2}x terraform_data ({:.2} ms per resource); CPU {:.2} ms per pool, {:.2} per resource",
                secs(t.apply) / secs(t.data_apply),
                ms(t.data_apply, t.n),
                ms(t.apply_cpu, t.n),
                ms(t.data_apply_cpu, t.n)
            ),
        );
        figures::record(
            &format!("scale_plan{}", t.n),
            &format!("plan {} pools, per pool", t.n),
            ms(t.plan, t.n),
            "ms",
            &format!(
                "{:.2}x terraform_data ({:.2} ms per resource)",
                secs(t.plan) / secs(t.data_plan),
                ms(t.data_plan, t.n)
            ),
        );
    }
}
