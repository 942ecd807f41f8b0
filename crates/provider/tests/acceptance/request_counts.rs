//! What a real `terraform apply` of many pools costs in cloud requests, counted at the sandbox
//! over real HTTP, per cloud and per kind of request: the plan-time reads (GKE's cluster zones)
//! are once per cluster, not per pool, and the reads of an apply's refresh are the shared ones
//! (a list per cluster), so a configuration of many pools does not wait on one round trip per
//! pool and per kind.

use std::collections::BTreeMap;
use std::time::Duration;

use ::sandbox::{ClusterSpec, Config, DEFAULT_SUBSCRIPTION};

use crate::common::pools::{Decl, config};
use crate::common::sandbox::{self, Seen};
use crate::common::terraform::Workspace;

/// Pools per cloud, spread over two clusters of each cloud.
const PER_CLOUD: usize = 12;

fn clusters() -> Vec<ClusterSpec> {
    let mut clusters = ClusterSpec::defaults();
    clusters.push(ClusterSpec::Aks {
        subscription: DEFAULT_SUBSCRIPTION.into(),
        resource_group: "sandbox-rg".into(),
        name: "second-aks".into(),
        location: "eastus".into(),
    });
    clusters.push(ClusterSpec::Gke {
        project: "sandbox-project".into(),
        location: "us-central1".into(),
        name: "second-gke".into(),
    });
    clusters.push(ClusterSpec::Eks {
        region: "us-east-1".into(),
        name: "second-eks".into(),
        nodegroup_quota: None,
    });
    clusters
}

fn pools(labels: &str) -> Vec<Decl> {
    let mut out = Vec::new();
    for cloud in ["aks", "gke", "eks"] {
        for i in 0..PER_CLOUD {
            let cluster = if i % 2 == 0 { "sandbox" } else { "second" };
            // GKE's regional cluster has three zones: one node in each.
            let nodes = if cloud == "gke" { 3 } else { 1 };
            let mut d = Decl::new(
                cloud,
                &format!("{cluster}-{cloud}"),
                &format!("{cloud}{i}"),
                nodes,
            );
            d.labels.push(("rev".into(), labels.into()));
            out.push(d);
        }
    }
    out
}

/// The requests seen since the last call, by cloud and kind: the method and the path with the
/// names of pools, clusters and operations left out.
fn kinds(seen: &Seen) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for r in seen.lock().unwrap().drain(..) {
        *out.entry(kind(&r)).or_default() += 1;
    }
    out
}

/// Segments that name a collection: the one after it names an item, left out of the kind.
const COLLECTIONS: [&str; 14] = [
    "subscriptions",
    "resourceGroups",
    "managedClusters",
    "agentPools",
    "projects",
    "locations",
    "clusters",
    "nodePools",
    "operations",
    "zones",
    "instanceGroupManagers",
    "node-groups",
    "updates",
    "regions",
];

/// A request's cloud, method and the tail of its path from its last collection, names left out:
/// "aks GET agentPools/*" (one pool), "gke GET nodePools" (the list), "gke GET clusters/*".
fn kind(request: &str) -> String {
    let (method, path) = request.split_once(' ').unwrap_or((request, ""));
    let cloud = if path.contains("/oauth2/") {
        "token"
    } else if path.starts_with("/subscriptions/") {
        "aks"
    } else if path.starts_with("/v1/") || path.starts_with("/compute/") {
        "gke"
    } else if path.starts_with("/clusters") {
        "eks"
    } else {
        "other"
    };
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let named = |i: usize| i > 0 && COLLECTIONS.contains(&segments[i - 1]);
    let last = (0..segments.len())
        .rev()
        .find(|&i| COLLECTIONS.contains(&segments[i]) && !named(i))
        .unwrap_or(0);
    let tail: Vec<&str> = (last..segments.len())
        .map(|i| if named(i) { "*" } else { segments[i] })
        .collect();
    format!("{cloud} {method} {}", tail.join("/"))
}

/// The requests of `kinds` of one kind (see [`kind`]).
fn of(kinds: &BTreeMap<String, usize>, kind: &str) -> usize {
    kinds.get(kind).copied().unwrap_or(0)
}

/// The requests of `kinds` to one cloud.
fn to(kinds: &BTreeMap<String, usize>, cloud: &str) -> usize {
    let mine = kinds
        .iter()
        .filter(|(k, _)| k.starts_with(&format!("{cloud} ")));
    mine.map(|(_, n)| n).sum()
}

/// Asserts `got <= bound`, showing every request kind when not.
fn at_most(got: usize, bound: usize, what: &str, kinds: &BTreeMap<String, usize>) {
    assert!(got <= bound, "{what}: {got} > {bound}; {kinds:#?}");
}

#[test]
fn an_apply_of_many_pools_reads_per_cluster_not_per_pool() {
    const P: usize = PER_CLOUD;
    const C: usize = 2;
    let (sb, seen) = sandbox::start_counted(Config {
        clusters: clusters(),
        ..Config::instant()
    });
    let ws = Workspace::new(&config(&sb.url, &pools("1"), ""));
    ws.init();
    kinds(&seen);

    // Create. GKE's plan reads each cluster's zones once per provider process (the plan's and
    // the apply's), not once per pool; AKS and EKS read no cluster at all.
    ws.apply();
    let k = &kinds(&seen);
    at_most(of(k, "gke GET clusters/*"), 2 * C, "GKE cluster reads", k);
    assert_eq!(
        of(k, "aks GET managedClusters/*") + of(k, "eks GET clusters/*"),
        0,
        "{k:#?}"
    );
    // A create's own reads: ARM's PUT creates or replaces, so AKS reads first whether the pool
    // exists, and reads it back; GKE reads the pool back but none of its instance groups.
    at_most(
        of(k, "aks GET agentPools/*"),
        2 * P,
        "AKS reads of the creates",
        k,
    );
    at_most(
        of(k, "gke GET nodePools/*"),
        P,
        "GKE reads of the creates",
        k,
    );
    assert_eq!(of(k, "gke GET instanceGroupManagers/*"), 0, "{k:#?}");

    // A plan's refresh: one list per AKS and GKE cluster (a list costs them no more than a
    // read); GKE's instance groups in one aggregated list for the project; on EKS the first
    // pool's own read, then one list that describes each node group once.
    let (code, out) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", out.text());
    let plan = &kinds(&seen);
    at_most(to(plan, "aks"), C, "AKS requests of a refresh", plan);
    at_most(to(plan, "gke"), C + 1, "GKE requests of a refresh", plan);
    at_most(
        of(plan, "gke GET instanceGroupManagers"),
        1,
        "aggregated lists",
        plan,
    );
    at_most(
        of(plan, "eks GET node-groups/*"),
        P + C,
        "EKS describes of a refresh",
        plan,
    );

    // Every pool's labels changed in place. The apply's refresh is the plan's, its plan reads no
    // cluster (the zones are in state), and each update reads what it must: AKS and EKS read the
    // pool once before changing it (no read of the provider's own besides) and once after; GKE
    // reads the pool and its groups before, the pool after.
    ws.write("main.tf", &config(&sb.url, &pools("2"), ""));
    ws.apply();
    let k = &kinds(&seen);
    assert_eq!(
        of(k, "aks PUT agentPools/*"),
        P,
        "every AKS pool updated: {k:#?}"
    );
    assert_eq!(of(k, "eks POST node-groups/*/update-config"), P, "{k:#?}");
    assert_eq!(of(k, "gke GET clusters/*"), 0, "{k:#?}");
    at_most(
        of(k, "aks GET managedClusters/*"),
        C,
        "AKS lists (each cluster's document)",
        k,
    );
    at_most(
        of(k, "aks GET agentPools/*"),
        C + 2 * P,
        "AKS reads of the apply",
        k,
    );
    at_most(
        of(k, "eks GET node-groups/*"),
        P + C + 2 * P,
        "EKS describes of the apply",
        k,
    );
    at_most(
        of(k, "gke GET nodePools/*"),
        C + 2 * P,
        "GKE pool reads of the apply",
        k,
    );
    at_most(
        of(k, "gke GET instanceGroupManagers/*"),
        3 * (C + P),
        "GKE group reads of the apply",
        k,
    );
    let (code, out) = ws.plan_exit_code();
    assert_eq!(code, 0, "the update converged: {}", out.text());
}

/// An AKS block refreshed after another finds the provider's Azure access token already
/// fetched: the token is asked for when terraform configures the provider, not by the block's
/// first read, which would wait that round trip. Here the AKS pool depends on the GKE pool, so
/// terraform reads it only once the GKE pool's refresh is done; the sandbox holds the GKE reads
/// back until a token has been asked for (or 30 seconds have passed). A provider that fetches
/// its token on the first ARM call has them answered after the hold, the token second.
#[test]
fn the_azure_token_is_asked_for_when_the_provider_is_configured() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[derive(Clone, Default)]
    struct Watch {
        holding: Arc<AtomicBool>,
        token_asked: Arc<tokio::sync::Notify>,
        asked: Arc<AtomicBool>,
        events: Seen,
    }
    let watch = Watch::default();
    let w = watch.clone();
    let sb = sandbox::start_with_layer(Config::instant(), move |r| {
        r.layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| {
                let w = w.clone();
                async move {
                    let path = req.uri().path().to_string();
                    if path.contains("/oauth2/") {
                        w.events.lock().unwrap().push("token asked".into());
                        w.asked.store(true, Ordering::SeqCst);
                        w.token_asked.notify_waiters();
                    }
                    let list = req.method() == "GET" && path.starts_with("/v1/projects/");
                    if list && w.holding.load(Ordering::SeqCst) {
                        let asked = w.token_asked.notified();
                        if !w.asked.load(Ordering::SeqCst) {
                            let _ = tokio::time::timeout(Duration::from_secs(30), asked).await;
                        }
                    }
                    let answer = next.run(req).await;
                    if list {
                        w.events.lock().unwrap().push("GKE read answered".into());
                    }
                    answer
                }
            },
        ))
    });
    let gke = Decl::new("gke", "sandbox-gke", "gke0", 3);
    let aks = Decl::new("aks", "sandbox-aks", "aks0", 1);
    let main = format!(
        "{}{}",
        config(&sb.url, std::slice::from_ref(&gke), ""),
        aks.hcl("  depends_on = [fracgpu_nodepool.gke0]\n")
    );
    let ws = Workspace::new(&main);
    ws.init();
    ws.apply();

    watch.events.lock().unwrap().clear();
    watch.asked.store(false, Ordering::SeqCst);
    watch.holding.store(true, Ordering::SeqCst);
    let (code, out) = ws.plan_exit_code();
    assert_eq!(code, 0, "{}", out.text());
    let events = watch.events.lock().unwrap().clone();
    assert_eq!(
        events,
        ["token asked", "GKE read answered"],
        "one token, asked for before the GKE pool's refresh could end (and used by the AKS read)"
    );
}
