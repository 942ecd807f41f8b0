//! 100 `fracgpu_nodepool`s on AKS, GKE and EKS applied and destroyed with `-parallelism=50`:
//! no create fails, none is made twice (the sandbox counts the creates that made a pool), state
//! and cloud agree pool by pool, and the destroy leaves nothing.
//!
//! GKE runs at most 5 operations per cluster and answers a sixth with 429; the 33 GKE pools share
//! 3 clusters, so some of their creates are refused and retried by the provider, which must
//! neither give up nor make a pool twice.

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
            Decl::new(
                cloud,
                cluster,
                &format!("conc{cloud}{i}"),
                1 + (i % 2) as u32,
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
    let per_cloud = |c: &str| creates.keys().filter(|(cloud, _, _)| cloud == c).count();
    // Create requests beyond one per pool: the provider's retries (of GKE's quota refusals).
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
