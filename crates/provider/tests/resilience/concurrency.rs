//! 100 `fracgpu_nodepool`s on AKS, GKE and EKS applied and destroyed with `-parallelism=50`:
//! no create fails, none is made twice (the sandbox counts the creates that made a pool), state
//! and cloud agree pool by pool, and the destroy leaves nothing.
//!
//! GKE runs at most 5 operations per cluster and answers a sixth with 429; the 33 GKE pools share
//! 3 clusters, so the provider queues their operations per cluster: none is refused, none gives up,
//! none is made twice.

use std::time::{Duration, Instant};

use crate::common::pools::{self, Decl};
use crate::common::sandbox;
use crate::common::terraform::Workspace;
use ::sandbox::{ClusterSpec, Config, DEFAULT_SUBSCRIPTION};

const POOLS: usize = 100;
const AKS_CLUSTERS: &[&str] = &["sandbox-aks", "sandbox-aks-2"];
const GKE_CLUSTERS: &[&str] = &["sandbox-gke", "sandbox-gke-2", "sandbox-gke-3"];
const EKS_CLUSTERS: &[&str] = &["sandbox-eks", "sandbox-eks-2"];

fn world() -> Vec<ClusterSpec> {
    let mut clusters = Vec::new();
    for name in AKS_CLUSTERS {
        clusters.push(ClusterSpec::Aks {
            subscription: DEFAULT_SUBSCRIPTION.into(),
            resource_group: "sandbox-rg".into(),
            name: (*name).into(),
            location: "eastus".into(),
        });
    }
    for name in GKE_CLUSTERS {
        clusters.push(ClusterSpec::Gke {
            project: "sandbox-project".into(),
            location: "us-central1".into(),
            name: (*name).into(),
        });
    }
    for name in EKS_CLUSTERS {
        clusters.push(ClusterSpec::Eks {
            region: "us-east-1".into(),
            name: (*name).into(),
            nodegroup_quota: None,
        });
    }
    clusters
}

/// Pool i goes to cloud i mod 3 and to that cloud's clusters in turn.
fn fleet() -> Vec<Decl> {
    (0..POOLS)
        .map(|i| {
            let (cloud, clusters) = match i % 3 {
                0 => ("aks", AKS_CLUSTERS),
                1 => ("gke", GKE_CLUSTERS),
                _ => ("eks", EKS_CLUSTERS),
            };
            let cluster = clusters[(i / 3) % clusters.len()];
            // A GKE pool's total splits over the regional clusters' three zones.
            let per_zone = if cloud == "gke" { 3 } else { 1 };
            Decl::new(
                cloud,
                cluster,
                &format!("conc{cloud}{i}"),
                per_zone * (1 + (i % 2) as u32),
            )
        })
        .collect()
}

#[test]
fn a_hundred_pools_at_parallelism_fifty_are_each_created_once() {
    let sb = sandbox::start_with(Config {
        op_time: Duration::from_millis(500),
        clusters: world(),
        ..Config::default()
    });
    let fleet = fleet();
    let ws = Workspace::new(&pools::config(&sb.url, &fleet, ""));
    ws.init();

    let t = Instant::now();
    let out = ws.run(&[
        "apply",
        "-no-color",
        "-auto-approve",
        "-input=false",
        "-parallelism=50",
    ]);
    let apply_time = t.elapsed();
    assert_eq!(
        out.code,
        0,
        "every create succeeds at parallelism 50:\n{}",
        out.text()
    );

    let state = pools::state_pools(&ws);
    let inv = sb.sandbox.inventory();
    let agreement = pools::compare(&state, &pools::inventory_pools(&inv));
    assert!(
        agreement.orphans.is_empty() && agreement.ghosts.is_empty() && agreement.differ.is_empty(),
        "state and cloud agree: {agreement:?}"
    );
    assert_eq!(agreement.in_both, POOLS);
    assert_eq!(agreement.tainted, 0);
    let creates = pools::creates(&inv);
    let twice: Vec<_> = creates.iter().filter(|(_, n)| n.made != 1).collect();
    assert_eq!(creates.len(), POOLS, "a create per pool: {creates:?}");
    assert!(twice.is_empty(), "pools made more than once: {twice:?}");
    assert_eq!(
        inv["refused"],
        serde_json::json!([]),
        "GKE refused no operation: each waited for its turn"
    );
    let per_cloud = |c: &str| creates.keys().filter(|(cloud, _, _)| cloud == c).count();
    // Create requests beyond one per pool: the provider's retries.
    let retried = |c: &str| {
        let (pools, requests) = creates
            .iter()
            .filter(|((cloud, _, _), _)| cloud == c)
            .fold((0, 0), |(p, r), (_, n)| {
                (p + usize::from(n.requests > 1), r + n.requests)
            });
        format!("{c} {requests} requests, {pools} pools retried")
    };
    let requests = format!("{}, {}, {}", retried("aks"), retried("gke"), retried("eks"));

    let t = Instant::now();
    let out = ws.run(&[
        "destroy",
        "-no-color",
        "-auto-approve",
        "-input=false",
        "-parallelism=50",
    ]);
    let destroy_time = t.elapsed();
    assert_eq!(out.code, 0, "destroy succeeds:\n{}", out.text());
    assert!(pools::state_pools(&ws).is_empty(), "state is empty");
    let left = pools::inventory_pools(&sb.sandbox.inventory());
    assert!(left.is_empty(), "the cloud is empty: {left:?}");
    eprintln!(
        "{POOLS} pools ({} AKS on {} clusters, {} GKE on {}, {} EKS on {}), parallelism 50, operations of 500 ms: apply {apply_time:.1?}, destroy {destroy_time:.1?}; pools made once each: {}; create requests: {requests}",
        per_cloud("aks"),
        AKS_CLUSTERS.len(),
        per_cloud("gke"),
        GKE_CLUSTERS.len(),
        per_cloud("eks"),
        EKS_CLUSTERS.len(),
        creates.len()
    );
}

/// GKE refuses a sixth concurrent operation on a cluster (429 RESOURCE_EXHAUSTED) and a node pool
/// operation while an operation on the cluster runs (400 FAILED_PRECONDITION). Ten pools on one
/// cluster, applied and destroyed at parallelism 10: the provider queues its operations per cluster,
/// so every one waits its turn and the cluster refuses none of them.
#[test]
fn ten_pools_on_one_gke_cluster_wait_their_turn_and_none_is_refused() {
    let sb = sandbox::start(Duration::from_millis(500));
    let fleet: Vec<Decl> = (0..10)
        .map(|i| Decl::new("gke", "sandbox-gke", &format!("queued{i}"), 3))
        .collect();
    let ws = Workspace::new(&pools::config(&sb.url, &fleet, ""));
    ws.init();
    let run = |cmd: &str| {
        let out = ws.run(&[
            cmd,
            "-no-color",
            "-auto-approve",
            "-input=false",
            "-parallelism=10",
        ]);
        assert_eq!(out.code, 0, "{cmd}:\n{}", out.text());
    };
    run("apply");
    let inv = sb.sandbox.inventory();
    assert_eq!(
        inv["refused"],
        serde_json::json!([]),
        "no request refused on apply"
    );
    let creates = pools::creates(&inv);
    assert_eq!(creates.len(), 10);
    for (pool, n) in &creates {
        assert_eq!(
            (n.made, n.requests),
            (1, 1),
            "{pool:?}: one create request, accepted"
        );
    }
    run("destroy");
    let inv = sb.sandbox.inventory();
    assert_eq!(
        inv["refused"],
        serde_json::json!([]),
        "no request refused on destroy"
    );
    assert!(pools::inventory_pools(&inv).is_empty());
}
