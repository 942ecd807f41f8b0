//! A refresh's reads shared per cluster (`SharedReads`), counted at the sandbox over real HTTP:
//! many pools of one cluster read at once cost the first pool's own read and one list (its
//! pages), each pool reads as `get`
//! reads it, a write or a new refresh drops the snapshot so a change made elsewhere shows, a pool
//! deleted elsewhere reads as gone, and a list that fails falls back to each pool's own GET.
//! On GKE the clusters of one project share one aggregated list of instance groups per refresh.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ::sandbox::{ClusterSpec, Config, DEFAULT_SUBSCRIPTION};
use axum::body::Body;
use axum::extract::State;
use axum::http::Request;
use axum::middleware::Next;
use axum::response::Response;
use fracgpu::cloud::aks::{AksClient, AksConfig};
use fracgpu::cloud::eks::{EksClient, EksConfig};
use fracgpu::cloud::gke::{GkeClient, GkeConfig};
use fracgpu::cloud::{
    AksPoolFields, EksPoolFields, GkePoolFields, GkeSharing, Location, NodePools, OpCtx, Pool,
    PoolSpec, Scaling, SharedReads, StopSignal, TargetFields,
};
use futures_util::future::join_all;

/// The requests seen: method and path.
type Seen = Arc<Mutex<Vec<String>>>;

async fn count(State(seen): State<Seen>, req: Request<Body>, next: Next) -> Response {
    seen.lock()
        .unwrap()
        .push(format!("{} {}", req.method(), req.uri().path()));
    next.run(req).await
}

async fn serve() -> (String, Seen) {
    serve_with(Vec::new()).await
}

/// A sandbox of the default clusters and `more`.
async fn serve_with(more: Vec<ClusterSpec>) -> (String, Seen) {
    let seen = Seen::default();
    let counting = seen.clone();
    let mut clusters = ClusterSpec::defaults_with_nodegroup_quota(100);
    clusters.extend(more);
    let config = Config {
        clusters,
        ..Config::instant()
    };
    let (_sb, base) = crate::serve_sandbox(config, |r| {
        r.layer(axum::middleware::from_fn_with_state(counting, count))
    })
    .await;
    (base, seen)
}

/// The cloud requests seen since the last call (tokens left out: a credential caches its own).
fn taken(seen: &Seen) -> Vec<String> {
    seen.lock()
        .unwrap()
        .drain(..)
        .filter(|r| !r.contains("/oauth2/"))
        .collect()
}

fn ctx() -> OpCtx {
    OpCtx::new(Duration::from_secs(120), StopSignal::default())
}

/// Arms a fault on the sandbox.
async fn fault(base: &str, body: serde_json::Value) {
    let r = reqwest::Client::new()
        .post(format!("{base}/_sandbox/faults"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{:?}", r.text().await);
}

/// Reads every name at once through `shared`, as terraform's refresh would.
async fn read_all(
    shared: &SharedReads,
    client: &dyn NodePools,
    loc: &Location,
    names: &[String],
) -> Vec<Option<Pool>> {
    let ctx = ctx();
    join_all(names.iter().map(|n| shared.read(client, loc, n, &ctx)))
        .await
        .into_iter()
        .map(|r| r.expect("read"))
        .collect()
}

fn aks_loc() -> Location {
    Location::Aks {
        subscription_id: DEFAULT_SUBSCRIPTION.into(),
        resource_group: "sandbox-rg".into(),
        cluster: "sandbox-aks".into(),
    }
}

fn aks_spec(name: &str) -> PoolSpec {
    PoolSpec {
        location: aks_loc(),
        name: name.into(),
        machine_type: "Standard_NC4as_T4_v3".into(),
        scaling: Scaling::Fixed { nodes: 1 },
        spot: false,
        disk_size_gb: None,
        labels: BTreeMap::from([(
            "nvidia.com/device-plugin.config".to_string(),
            "time-sliced-4".to_string(),
        )]),
        taints: Vec::new(),
        gpu_count: 1,
        node_template: BTreeMap::new(),
        target: TargetFields::Aks(AksPoolFields::default()),
    }
}

fn aks(base: &str) -> AksClient {
    AksClient::new(AksConfig {
        sandbox: Some(base.to_string()),
        ..Default::default()
    })
    .expect("client")
}

/// The common scenario of every cloud: `n` pools made by `client`, read at once through a
/// snapshot (which must cost at most `max_requests`), each as `get` reads it; then a change and
/// a delete made by another client show after the refresh ends.
async fn scenario(
    client: &dyn NodePools,
    other: &dyn NodePools,
    specs: &[PoolSpec],
    seen: &Seen,
    max_requests: usize,
) {
    let loc = &specs[0].location;
    let ctx = ctx();
    for r in join_all(specs.iter().map(|s| client.create(s, &ctx))).await {
        r.expect("created");
    }
    let names: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
    taken(seen);
    let shared = SharedReads::default();
    let read = read_all(&shared, client, loc, &names).await;
    let requests = taken(seen);
    assert!(
        requests.len() <= max_requests,
        "{} pools read with {} requests: {requests:#?}",
        names.len(),
        requests.len()
    );
    for (name, pool) in names.iter().zip(&read) {
        let single = client.get(loc, name, &ctx).await.unwrap();
        assert_eq!(pool.as_ref(), single.as_ref(), "{name} as get reads it");
        assert!(pool.is_some(), "{name} exists");
    }
    taken(seen);

    // Elsewhere (the CLI, the portal): one pool scaled, one deleted.
    let mut changed = read[1].clone().unwrap();
    let mut bigger = changed.spec.clone();
    bigger.scaling = Scaling::Fixed { nodes: 2 };
    changed = other.update(&changed, &bigger, &ctx).await.unwrap();
    other.delete(loc, &names[2], &ctx).await.unwrap();

    // The same refresh still answers from its snapshot...
    let again = shared.read(client, loc, &names[1], &ctx).await.unwrap();
    assert_eq!(again.as_ref(), read[1].as_ref(), "one snapshot per refresh");
    // ...but a new one (the provider configured again) sees both changes, exactly.
    shared.clear();
    taken(seen);
    let next = read_all(&shared, client, loc, &names).await;
    assert_eq!(next[1].as_ref(), Some(&changed), "the change shows");
    assert_eq!(next[2], None, "the deleted pool reads as gone");
    assert_eq!(next[0], read[0], "the others are as they were");
    // The gone pool was asked after on its own, not taken for gone from the list alone.
    let requests = taken(seen);
    assert!(
        requests.len() <= max_requests + 1,
        "second refresh: {requests:#?}"
    );

    // A write through the provider drops the snapshot: a pool it creates reads back at once.
    shared.forget(loc);
    let mut extra = specs[0].clone();
    extra.name = format!("{}x", names[0]);
    client.create(&extra, &ctx).await.unwrap();
    let made = shared.read(client, loc, &extra.name, &ctx).await.unwrap();
    assert!(made.is_some(), "a pool made after the snapshot is found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aks_refresh_of_a_cluster_is_one_list() {
    let (base, seen) = serve().await;
    let (client, other) = (aks(&base), aks(&base));
    // 60 pools: two pages of the sandbox's agent pool list (50 a page), and one cluster document
    // whose agentPoolProfiles hold them all. That one GET costs no more than a read, so no read
    // goes on its own.
    let specs: Vec<PoolSpec> = (0..60).map(|i| aks_spec(&format!("p{i:02}"))).collect();
    scenario(&client, &other, &specs, &seen, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aks_failed_list_falls_back_to_single_reads() {
    let (base, seen) = serve().await;
    let client = aks(&base);
    let specs: Vec<PoolSpec> = (0..5).map(|i| aks_spec(&format!("f{i}"))).collect();
    let ctx = ctx();
    for s in &specs {
        client.create(s, &ctx).await.unwrap();
    }
    let names: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
    let shared = SharedReads::default();
    // The cluster's document is not JSON: the list fails, not retried.
    fault(
        &base,
        serde_json::json!({"match": {"method": "GET", "path_ends_with": "/managedClusters/sandbox-aks"}, "count": 1, "kind": "malformed"}),
    )
    .await;
    taken(&seen);
    let read = read_all(&shared, &client, &aks_loc(), &names).await;
    assert!(
        read.iter().all(Option::is_some),
        "every pool read: {read:?}"
    );
    let requests = taken(&seen);
    // The failed list, then one GET per pool.
    assert_eq!(requests.len(), names.len() + 1, "{requests:#?}");
    assert!(
        requests[0].ends_with("/managedClusters/sandbox-aks"),
        "{requests:#?}"
    );
}

async fn eks(base: &str) -> EksClient {
    EksClient::new(EksConfig {
        sandbox: Some(base.to_string()),
        region: Some("us-east-1".into()),
        ..EksConfig::default()
    })
    .await
    .expect("client")
    .with_poll_interval(Duration::from_millis(20), Duration::from_millis(100))
}

fn eks_spec(name: &str) -> PoolSpec {
    let mut s = aks_spec(name);
    s.location = Location::Eks {
        region: "us-east-1".into(),
        cluster: "sandbox-eks".into(),
    };
    s.machine_type = "g4dn.xlarge".into();
    s.target = TargetFields::Eks(EksPoolFields {
        node_role_arn: "arn:aws:iam::123456789012:role/gpu-nodes".into(),
        subnet_ids: vec!["subnet-0a1".into()],
        ami_type: "AL2023_x86_64_NVIDIA".into(),
        bottlerocket_settings: None,
    });
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eks_refresh_of_a_cluster_is_one_list_and_each_describe_once() {
    let (base, seen) = serve().await;
    let (client, other) = (eks(&base).await, eks(&base).await);
    // DescribeNodegroup has no batch form: one ListNodegroups page, then one describe each; the
    // groups' Auto Scaling groups (their node templates) in one DescribeAutoScalingGroups
    // filtered on the cluster's tag; beside them the first pool's own read (its describe and its
    // group's).
    let specs: Vec<PoolSpec> = (0..60).map(|i| eks_spec(&format!("ng{i:02}"))).collect();
    scenario(&client, &other, &specs, &seen, 1 + specs.len() + 1 + 2).await;
}

async fn gke(base: &str) -> GkeClient {
    GkeClient::new(GkeConfig {
        sandbox: Some(base.to_string()),
        ..GkeConfig::default()
    })
    .await
    .expect("client")
}

fn gke_loc() -> Location {
    Location::Gke {
        project: "sandbox-project".into(),
        location: "us-central1".into(),
        cluster: "sandbox-gke".into(),
    }
}

/// An L4 pool of one node in one zone of the regional cluster, the zones taken in turn.
fn gke_spec(i: usize) -> PoolSpec {
    let mut s = aks_spec(&format!("g{i:02}"));
    s.location = gke_loc();
    s.machine_type = "g2-standard-4".into();
    s.labels = BTreeMap::new();
    s.gpu_count = 1;
    s.target = TargetFields::Gke(GkePoolFields {
        accelerator_type: Some("nvidia-l4".into()),
        sharing: Some(GkeSharing::TimeSharing { max_clients: 4 }),
        partition_size: None,
        node_locations: vec![format!("us-central1-{}", ["a", "b", "c"][i % 3])],
    });
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gke_refresh_of_a_cluster_is_one_list_and_one_aggregated_list() {
    let (base, seen) = serve().await;
    let (client, other) = (gke(&base).await, gke(&base).await);
    // 60 pools over three zones. Per pool and zone a single read costs the pool's GET and its
    // instance group's GET: 120 requests. Shared: the project's cluster list (each cluster with
    // its node pools) and one aggregated instance group manager list: 2, 0.03 a pool.
    let specs: Vec<PoolSpec> = (0..60).map(gke_spec).collect();
    scenario(&client, &other, &specs, &seen, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gke_failed_aggregated_list_reads_each_pools_groups() {
    let (base, seen) = serve().await;
    let client = gke(&base).await;
    let specs: Vec<PoolSpec> = (0..4).map(gke_spec).collect();
    let ctx = ctx();
    for s in &specs {
        client.create(s, &ctx).await.unwrap();
    }
    let names: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
    // Two of the pools scaled elsewhere: the sizes must come from their groups all the same.
    for name in &names[..2] {
        let pool = client.get(&gke_loc(), name, &ctx).await.unwrap().unwrap();
        let mut bigger = pool.spec.clone();
        bigger.scaling = Scaling::Fixed { nodes: 3 };
        client.update(&pool, &bigger, &ctx).await.unwrap();
    }
    let shared = SharedReads::default();
    fault(
        &base,
        serde_json::json!({"match": {"method": "GET", "path_contains": "/aggregated/"}, "count": 1, "kind": "malformed"}),
    )
    .await;
    taken(&seen);
    let read = read_all(&shared, &client, &gke_loc(), &names).await;
    let sizes: Vec<Scaling> = read
        .iter()
        .map(|p| p.as_ref().unwrap().spec.scaling)
        .collect();
    assert_eq!(
        sizes,
        [3, 3, 1, 1].map(|nodes| Scaling::Fixed { nodes }),
        "sizes as the groups tell them"
    );
    let requests = taken(&seen);
    // The project's cluster list and the failed aggregated list, side by side, then each
    // listed pool's own group.
    assert_eq!(requests.len(), 2 + specs.len(), "{requests:#?}");
    let firsts = &requests[..2];
    assert!(
        firsts
            .iter()
            .any(|r| r.ends_with("/aggregated/instanceGroupManagers"))
            && firsts.iter().any(|r| r.ends_with("/locations/-/clusters")),
        "{requests:#?}"
    );
    for (name, pool) in names.iter().zip(&read) {
        let single = client.get(&gke_loc(), name, &ctx).await.unwrap();
        assert_eq!(pool.as_ref(), single.as_ref(), "{name} as get reads it");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gke_pools_over_the_clusters_three_zones_share_the_aggregated_list() {
    let (base, seen) = serve().await;
    let client = gke(&base).await;
    // The cluster's zones (no node_locations): three instance groups a pool, one node in each.
    let specs: Vec<PoolSpec> = (0..20)
        .map(|i| {
            let mut s = gke_spec(i);
            s.gke_mut().node_locations.clear();
            s.scaling = Scaling::Fixed { nodes: 3 };
            s
        })
        .collect();
    let ctx = ctx();
    for r in join_all(specs.iter().map(|s| client.create(s, &ctx))).await {
        r.expect("created");
    }
    let names: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
    taken(&seen);
    let shared = SharedReads::default();
    let read = read_all(&shared, &client, &gke_loc(), &names).await;
    let requests = taken(&seen);
    // Read one by one: 20 pools and 60 groups. Shared: the project's cluster list and the
    // aggregated list.
    assert!(requests.len() <= 2, "{requests:#?}");
    for (name, pool) in names.iter().zip(&read) {
        let single = client.get(&gke_loc(), name, &ctx).await.unwrap();
        assert_eq!(pool.as_ref(), single.as_ref(), "{name} as get reads it");
        assert_eq!(
            pool.as_ref().unwrap().spec.scaling,
            Scaling::Fixed { nodes: 3 }
        );
    }
}

fn gke_cluster(k: usize) -> Location {
    Location::Gke {
        project: "sandbox-project".into(),
        location: "us-central1".into(),
        cluster: format!("proj-gke-{k}"),
    }
}

/// Every cluster's pools (`names[k]` those of cluster k) read at once through `shared`.
async fn read_clusters(
    shared: &SharedReads,
    client: &dyn NodePools,
    names: &[Vec<String>],
) -> Vec<Vec<Option<Pool>>> {
    let reads = names
        .iter()
        .enumerate()
        .map(|(k, names)| async move { read_all(shared, client, &gke_cluster(k), names).await });
    join_all(reads).await
}

/// Requests whose path has `part`.
fn with(requests: &[String], part: &str) -> usize {
    requests.iter().filter(|r| r.contains(part)).count()
}

/// The GKE clusters [`project_of_clusters`] adds to the sandbox's project.
const PROJECT_CLUSTERS: usize = 4;

/// A sandbox with [`PROJECT_CLUSTERS`] more GKE clusters in the default project, ten pools in
/// each; the requests seen, the client that made them, another, and each cluster's pool names.
async fn project_of_clusters() -> (String, Seen, GkeClient, GkeClient, Vec<Vec<String>>) {
    const CLUSTERS: usize = PROJECT_CLUSTERS;
    let more = (0..CLUSTERS)
        .map(|k| ClusterSpec::Gke {
            project: "sandbox-project".into(),
            location: "us-central1".into(),
            name: format!("proj-gke-{k}"),
        })
        .collect();
    let (base, seen) = serve_with(more).await;
    let (client, other) = (gke(&base).await, gke(&base).await);
    let ctx = ctx();
    let specs: Vec<PoolSpec> = (0..CLUSTERS * 10)
        .map(|i| {
            let mut s = gke_spec(i);
            s.location = gke_cluster(i % CLUSTERS);
            s
        })
        .collect();
    for r in join_all(specs.iter().map(|s| client.create(s, &ctx))).await {
        r.expect("created");
    }
    let of = |k: usize| -> Vec<String> {
        let loc = gke_cluster(k);
        let mine = specs.iter().filter(|s| s.location == loc);
        mine.map(|s| s.name.clone()).collect()
    };
    let names: Vec<Vec<String>> = (0..CLUSTERS).map(of).collect();
    (base, seen, client, other, names)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gke_clusters_of_one_project_share_their_lists_per_refresh() {
    let (_base, seen, client, other, names) = project_of_clusters().await;
    let of = |k: usize| names[k].clone();
    let ctx = ctx();

    // One refresh over the four clusters: the project's clusters, each with its node pools, in
    // one list over every location (`locations/-`), and its instance groups in one aggregated
    // list, side by side: two requests, one round trip, for all four.
    taken(&seen);
    let shared = SharedReads::default();
    let read = read_clusters(&shared, &client, &names).await;
    let requests = taken(&seen);
    assert_eq!(
        with(&requests, "/aggregated/instanceGroupManagers"),
        1,
        "one aggregated list for the project: {requests:#?}"
    );
    assert_eq!(
        with(&requests, "/locations/-/clusters"),
        1,
        "one cluster list for the project: {requests:#?}"
    );
    assert_eq!(requests.len(), 2, "{requests:#?}");
    for (k, pools) in read.iter().enumerate() {
        for (name, pool) in names[k].iter().zip(pools) {
            let single = client.get(&gke_cluster(k), name, &ctx).await.unwrap();
            assert_eq!(pool.as_ref(), single.as_ref(), "{name} as get reads it");
            assert!(pool.is_some(), "{name} exists");
        }
    }

    // A pool scaled elsewhere: a single read (create, update, delete and import read so) sees
    // it at once, never the refresh's list.
    let (b0, b1) = (&of(1)[0], &of(1)[1]);
    let pool = client
        .get(&gke_cluster(1), b1, &ctx)
        .await
        .unwrap()
        .unwrap();
    let mut bigger = pool.spec.clone();
    bigger.scaling = Scaling::Fixed { nodes: 2 };
    other.update(&pool, &bigger, &ctx).await.unwrap();
    let single = client
        .get(&gke_cluster(1), b1, &ctx)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(single.spec.scaling, Scaling::Fixed { nodes: 2 });

    // A write to cluster 1 through the provider (as the resource writes: the snapshot dropped
    // before and after) drops the project's list it relied on: the next reads of cluster 1,
    // from a list, see the size that write set.
    shared.forget(&gke_cluster(1));
    let mut biggest = bigger.clone();
    biggest.scaling = Scaling::Fixed { nodes: 3 };
    let written = client.update(&single, &biggest, &ctx).await.unwrap();
    shared.forget(&gke_cluster(1));
    assert_eq!(written.spec.scaling, Scaling::Fixed { nodes: 3 });
    taken(&seen);
    let first = shared
        .read(&client, &gke_cluster(1), b0, &ctx)
        .await
        .unwrap();
    assert!(first.is_some());
    let rest = read_all(&shared, &client, &gke_cluster(1), &of(1)[1..]).await;
    assert_eq!(
        rest[0].as_ref().unwrap().spec.scaling,
        Scaling::Fixed { nodes: 3 },
        "the list after the write sees it"
    );
    let requests = taken(&seen);
    assert_eq!(
        with(&requests, "/aggregated/instanceGroupManagers"),
        1,
        "the project's list taken again after the write: {requests:#?}"
    );
    assert_eq!(
        with(&requests, "/locations/-/clusters"),
        1,
        "and its clusters: {requests:#?}"
    );

    // A new refresh takes it once again, for every cluster.
    shared.clear();
    taken(&seen);
    let again = read_clusters(&shared, &client, &names).await;
    let requests = taken(&seen);
    assert_eq!(with(&requests, "/aggregated/"), 1, "{requests:#?}");
    assert_eq!(
        again[1][1].as_ref().unwrap().spec.scaling,
        Scaling::Fixed { nodes: 3 }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gke_failed_cluster_list_reads_each_clusters_pools() {
    let (base, seen, client, _other, names) = project_of_clusters().await;
    let ctx = ctx();
    // The project's cluster list fails (here a broken answer; a role without
    // `container.clusters.list` would be refused): each cluster's own node pool list instead,
    // once per cluster, and the project's list not tried again in this refresh.
    fault(
        &base,
        serde_json::json!({"match": {"method": "GET", "path_ends_with": "/locations/-/clusters"},
        "count": 1, "kind": "malformed"}),
    )
    .await;
    taken(&seen);
    let shared = SharedReads::default();
    let read = read_clusters(&shared, &client, &names).await;
    let requests = taken(&seen);
    assert_eq!(with(&requests, "/locations/-/clusters"), 1, "{requests:#?}");
    assert_eq!(
        requests
            .iter()
            .filter(|r| r.ends_with("/nodePools"))
            .count(),
        PROJECT_CLUSTERS,
        "{requests:#?}"
    );
    assert_eq!(requests.len(), 1 + PROJECT_CLUSTERS + 1, "{requests:#?}");
    for (k, pools) in read.iter().enumerate() {
        for (name, pool) in names[k].iter().zip(pools) {
            let single = client.get(&gke_cluster(k), name, &ctx).await.unwrap();
            assert!(pool.is_some(), "{name} exists");
            assert_eq!(pool.as_ref(), single.as_ref(), "{name} as get reads it");
        }
    }
}

/// `n` EKS node groups `ng00`, `ng01`.. on the sandbox at `base`, and a refresh's shared reads of
/// them whose first read (of `ng00`, on its own) is done, so that the next read runs the list.
async fn eks_groups_read_once(base: &str, n: usize) -> (EksClient, Location, SharedReads) {
    let client = eks(base).await;
    let specs: Vec<PoolSpec> = (0..n).map(|i| eks_spec(&format!("ng{i:02}"))).collect();
    let ctx = ctx();
    for r in join_all(specs.iter().map(|s| client.create(s, &ctx))).await {
        r.expect("created");
    }
    let loc = specs[0].location.clone();
    let shared = SharedReads::default();
    let first = shared.read(&client, &loc, "ng00", &ctx).await.unwrap();
    assert!(first.is_some());
    (client, loc, shared)
}

/// [`eks_groups_read_once`] of twenty groups, of which the describe of `ng19` answers three
/// seconds late, once.
async fn a_late_describe(base: &str) -> (EksClient, Location, SharedReads) {
    let read_once = eks_groups_read_once(base, 20).await;
    fault(
        base,
        serde_json::json!({"match": {"method": "GET",
        "path_contains": "/node-groups/ng19"}, "count": 1, "kind": "slow", "delay_ms": 3000}),
    )
    .await;
    read_once
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eks_reads_are_answered_as_their_groups_are_described_not_when_the_list_ends() {
    let (base, _seen) = serve().await;
    let (client, loc, shared) = a_late_describe(&base).await;
    let ctx = ctx();
    // The second read runs the list, which cannot end before the late describe does; the third
    // is answered as soon as its own group is described.
    let lister = shared.read(&client, &loc, "ng01", &ctx);
    let early = shared.read(&client, &loc, "ng02", &ctx);
    tokio::pin!(lister);
    let early = tokio::select! {
        biased;
        _ = &mut lister => panic!("the list ended before ng02 was answered"),
        early = early => early.unwrap(),
    };
    assert_eq!(early, client.get(&loc, "ng02", &ctx).await.unwrap());
    assert!(lister.await.unwrap().is_some());
    // The late group came from the list too.
    let late = shared.read(&client, &loc, "ng19", &ctx).await.unwrap();
    assert_eq!(late, client.get(&loc, "ng19", &ctx).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_eks_list_leaves_no_read_waiting() {
    let (base, _seen) = serve().await;
    let (client, loc, shared) = a_late_describe(&base).await;
    let ctx = ctx();
    // The read running the list is dropped (terraform gave up on it) while the late describe
    // is out.
    tokio::select! {
        _ = shared.read(&client, &loc, "ng01", &ctx) => panic!("the list ended early"),
        _ = tokio::time::sleep(Duration::from_millis(500)) => {}
    }
    // The group that list never found is read on its own; without an end to the listing this
    // read would wait for ever (bounded here so that a regression fails instead of hanging).
    let late = tokio::time::timeout(
        Duration::from_secs(60),
        shared.read(&client, &loc, "ng19", &ctx),
    )
    .await
    .expect("a read after an abandoned list does not wait for it")
    .unwrap();
    assert_eq!(late, client.get(&loc, "ng19", &ctx).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eks_list_describes_first_the_groups_reads_wait_for() {
    let (base, seen) = serve().await;
    let (client, loc, shared) = eks_groups_read_once(&base, 60).await;
    let (loc, ctx) = (&loc, ctx());
    taken(&seen);
    // The read that lists waits for the last group of ListNodegroups' order.
    assert!(
        shared
            .read(&client, loc, "ng59", &ctx)
            .await
            .unwrap()
            .is_some()
    );
    let describes: Vec<String> = taken(&seen)
        .into_iter()
        .filter(|r| r.starts_with("GET ") && r.contains("/node-groups/"))
        .collect();
    assert_eq!(describes.len(), 60, "{describes:#?}");
    let at = describes.iter().position(|r| r.ends_with("/ng59")).unwrap();
    // Among the first window of describes, not the sixtieth.
    assert!(at < 16, "ng59 described {at}th: {describes:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eks_read_waits_for_its_own_describe_not_for_the_list_page() {
    let (base, seen) = serve().await;
    let (client, loc, shared) = eks_groups_read_once(&base, 3).await;
    let (loc, ctx) = (&loc, ctx());
    // ListNodegroups answers six seconds late, once.
    fault(
        &base,
        serde_json::json!({"match": {"method": "GET", "path_ends_with": "/node-groups"},
            "count": 1, "kind": "slow", "delay_ms": 6_000}),
    )
    .await;
    taken(&seen);
    // The second read runs the list; both reads are answered by their own describes, sent at
    // once, while the page is still out (the lister goes on until the list ends).
    let lister = shared.read(&client, loc, "ng01", &ctx);
    let other = shared.read(&client, loc, "ng02", &ctx);
    tokio::pin!(lister);
    // Biased: the lister is polled first, so it is the read that starts the list.
    let other = tokio::select! {
        biased;
        _ = &mut lister => panic!("the list ended before ng02 was answered"),
        other = other => other.unwrap(),
        _ = tokio::time::sleep(Duration::from_secs(5)) => {
            panic!("ng02 waited for the ListNodegroups page: {:#?}", taken(&seen))
        }
    };
    assert_eq!(other, client.get(loc, "ng02", &ctx).await.unwrap());
    assert!(lister.await.unwrap().is_some());
    let describes: Vec<String> = taken(&seen)
        .into_iter()
        .filter(|r| r.starts_with("GET ") && r.contains("/node-groups/"))
        .collect();
    // ng01 and ng02 for the reads, ng00 when the page names it, and ng02 once more by the
    // check above: each group of the list described once.
    assert_eq!(describes.len(), 4, "{describes:#?}");
}
