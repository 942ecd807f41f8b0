//! What creating a pool costs in API requests, counted at the sandbox over real HTTP: GKE reads
//! no instance group back after its own create (the operation just set their size), EKS does not
//! describe a node group that CreateNodegroup just answered as CREATING, and the second operation
//! of a kind is first looked at about when the first was seen done, not after the backoff's short
//! first delays.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ::sandbox::{Config, Sandbox};
use axum::body::Body;
use axum::extract::State;
use axum::http::Request;
use axum::middleware::Next;
use axum::response::Response;
use fracgpu::cloud::eks::{EksClient, EksConfig};
use fracgpu::cloud::gke::{GkeClient, GkeConfig};
use fracgpu::cloud::{
    EksPoolFields, GkePoolFields, GkeSharing, Location, NodePools, OpCtx, PoolSpec, Scaling,
    StopSignal, TargetFields,
};

/// The requests seen: method and path.
type Seen = Arc<Mutex<Vec<String>>>;

async fn count(State(seen): State<Seen>, req: Request<Body>, next: Next) -> Response {
    seen.lock()
        .unwrap()
        .push(format!("{} {}", req.method(), req.uri().path()));
    next.run(req).await
}

/// A sandbox whose operations take `op_time`, behind a counting layer; its base URL.
async fn serve(op_time: Duration) -> (Sandbox, String, Seen) {
    let seen = Seen::default();
    let counting = seen.clone();
    let config = Config {
        op_time,
        ..Config::default()
    };
    let (sb, base) = crate::serve_sandbox(config, |r| {
        r.layer(axum::middleware::from_fn_with_state(counting, count))
    })
    .await;
    (sb, base, seen)
}

fn l4_pool(loc: &Location, name: &str) -> PoolSpec {
    PoolSpec {
        location: loc.clone(),
        name: name.into(),
        machine_type: "g2-standard-4".into(),
        // One node in each of the regional cluster's three zones.
        scaling: Scaling::Fixed { nodes: 3 },
        spot: false,
        disk_size_gb: None,
        labels: BTreeMap::new(),
        taints: Vec::new(),
        gpu_count: 1,
        node_template: BTreeMap::new(),
        target: TargetFields::Gke(GkePoolFields {
            accelerator_type: Some("nvidia-l4".into()),
            sharing: Some(GkeSharing::TimeSharing { max_clients: 4 }),
            ..GkePoolFields::default()
        }),
    }
}

/// The requests of one call, by kind: what the path ends with.
fn kinds(seen: &Seen) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for r in seen.lock().unwrap().drain(..) {
        let kind = if r.contains("/operations/") {
            "GET operation".to_string()
        } else if r.contains("/instanceGroupManagers/") {
            "GET instance group".to_string()
        } else {
            // A collection's POST, or a GET of one item of a collection.
            let (method, path) = r.split_once(' ').unwrap();
            let skip = usize::from(method == "GET");
            let collection = path.rsplit('/').nth(skip).unwrap_or_default();
            format!("{method} {collection}")
        };
        *out.entry(kind).or_default() += 1;
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gke_create_reads_no_instance_group_and_the_second_looks_once() {
    let (_sb, base, seen) = serve(Duration::from_millis(500)).await;
    let client = GkeClient::new(GkeConfig {
        sandbox: Some(base),
        ..GkeConfig::default()
    })
    .await
    .expect("client");
    let loc = Location::Gke {
        project: "sandbox-project".into(),
        location: "us-central1".into(),
        cluster: "sandbox-gke".into(),
    };
    let ctx = OpCtx::new(Duration::from_secs(60), StopSignal::default());

    let first = client.create(&l4_pool(&loc, "first"), &ctx).await.unwrap();
    assert_eq!(first.spec.scaling, Scaling::Fixed { nodes: 3 });
    let first_cost = kinds(&seen);
    // The cluster's zones (read once), the create, its operation until DONE (the backoff's
    // delays from 250 ms: two looks at least for 500 ms), the pool read back.
    assert_eq!(first_cost.get("GET clusters"), Some(&1), "{first_cost:?}");
    assert_eq!(first_cost.get("POST nodePools"), Some(&1), "{first_cost:?}");
    assert!(first_cost["GET operation"] >= 2, "{first_cost:?}");
    assert_eq!(first_cost.get("GET nodePools"), Some(&1), "{first_cost:?}");
    assert_eq!(first_cost.get("GET instance group"), None, "{first_cost:?}");

    // The second create's first look comes at 95% of the first wait, which ended after the
    // operation's 500 ms: it finds the operation DONE.
    let second = client.create(&l4_pool(&loc, "second"), &ctx).await.unwrap();
    assert_eq!(second.spec.scaling, Scaling::Fixed { nodes: 3 });
    let second_cost = kinds(&seen);
    assert_eq!(
        second_cost,
        BTreeMap::from([
            ("POST nodePools".to_string(), 1),
            ("GET operation".to_string(), 1),
            ("GET nodePools".to_string(), 1),
        ])
    );

    // A plain read still reads the instance groups: a resize made outside shows.
    client.get(&loc, "second", &ctx).await.unwrap().unwrap();
    assert_eq!(kinds(&seen).get("GET instance group"), Some(&3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eks_create_is_not_described_at_once_and_the_second_is_described_once() {
    let (_sb, base, seen) = serve(Duration::from_millis(500)).await;
    let client = EksClient::new(EksConfig {
        sandbox: Some(base),
        region: Some("us-east-1".into()),
        ..EksConfig::default()
    })
    .await
    .expect("client");
    let loc = Location::Eks {
        region: "us-east-1".into(),
        cluster: "sandbox-eks".into(),
    };
    let group = |name: &str| PoolSpec {
        location: loc.clone(),
        name: name.into(),
        machine_type: "g4dn.xlarge".into(),
        scaling: Scaling::Fixed { nodes: 1 },
        spot: false,
        disk_size_gb: None,
        labels: BTreeMap::new(),
        taints: Vec::new(),
        gpu_count: 0,
        node_template: BTreeMap::new(),
        target: TargetFields::Eks(EksPoolFields {
            node_role_arn: "arn:aws:iam::123456789012:role/gpu-nodes".into(),
            subnet_ids: vec!["subnet-0a1".into()],
            ami_type: "AL2023_x86_64_NVIDIA".into(),
            bottlerocket_settings: None,
        }),
    };
    let ctx = OpCtx::new(Duration::from_secs(60), StopSignal::default());

    // CreateNodegroup answers CREATING: the first look waits for the backoff's first delay, and
    // the looks go on until ACTIVE (two at least for 500 ms from 250 ms).
    client.create(&group("first"), &ctx).await.unwrap();
    let first_cost = kinds(&seen);
    assert_eq!(
        first_cost.get("POST node-groups"),
        Some(&1),
        "{first_cost:?}"
    );
    assert!(first_cost["GET node-groups"] >= 2, "{first_cost:?}");

    // The second is first described at 95% of the first wait, and is ACTIVE by then.
    client.create(&group("second"), &ctx).await.unwrap();
    assert_eq!(
        kinds(&seen),
        BTreeMap::from([
            ("POST node-groups".to_string(), 1),
            ("GET node-groups".to_string(), 1),
        ])
    );
}

/// Instance group reads in flight at once, at most, behind [`hold_instance_groups`].
#[derive(Default)]
struct Overlap {
    arrived: std::sync::atomic::AtomicUsize,
    inside: std::sync::atomic::AtomicUsize,
    most: std::sync::atomic::AtomicUsize,
}

/// Holds each instance group read until three have arrived (one pool's zones) or a second has
/// passed, so that reads sent together overlap here and reads sent one after another never do.
async fn hold_instance_groups(
    State(o): State<Arc<Overlap>>,
    req: Request<Body>,
    next: Next,
) -> Response {
    use std::sync::atomic::Ordering::SeqCst;
    if !req.uri().path().contains("/instanceGroupManagers/") {
        return next.run(req).await;
    }
    let inside = o.inside.fetch_add(1, SeqCst) + 1;
    o.most.fetch_max(inside, SeqCst);
    let target = (o.arrived.fetch_add(1, SeqCst) / 3 + 1) * 3;
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        while o.arrived.load(SeqCst) < target {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    let resp = next.run(req).await;
    o.inside.fetch_sub(1, SeqCst);
    resp
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gke_refresh_reads_the_instance_groups_of_its_zones_together() {
    // A refresh reads the pool and then its instance group in each zone (its current size):
    // against a real API every read is a round trip, so the zones' reads go out together and
    // a refresh costs two round trips, not four.
    let overlap = Arc::new(Overlap::default());
    let held = overlap.clone();
    let (_sb, base) = crate::serve_sandbox(Config::instant(), |r| {
        r.layer(axum::middleware::from_fn_with_state(
            held,
            hold_instance_groups,
        ))
    })
    .await;
    let client = GkeClient::new(GkeConfig {
        sandbox: Some(base),
        ..GkeConfig::default()
    })
    .await
    .expect("client");
    let loc = Location::Gke {
        project: "sandbox-project".into(),
        location: "us-central1".into(),
        cluster: "sandbox-gke".into(),
    };
    let ctx = OpCtx::new(Duration::from_secs(60), StopSignal::default());
    client.create(&l4_pool(&loc, "zones"), &ctx).await.unwrap();
    let pool = client.get(&loc, "zones", &ctx).await.unwrap().unwrap();
    assert_eq!(pool.spec.scaling, Scaling::Fixed { nodes: 3 });
    use std::sync::atomic::Ordering::SeqCst;
    assert_eq!(overlap.arrived.load(SeqCst), 3, "one read per zone");
    assert_eq!(
        overlap.most.load(SeqCst),
        3,
        "the three zones' instance groups were read one after another"
    );
}
