//! The GKE client over real HTTP against the in-process sandbox: lifecycles for each sharing mode,
//! in-place updates, the emulator's validation errors, injected faults, deadlines, stop and
//! idempotent create.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ::sandbox::{Config, NodeEvent, PoolNodes, RecordingSink, Sandbox};
use fracgpu::cloud::gke::{GkeClient, GkeConfig, GkeTiming, canonical_spec};
use fracgpu::cloud::{
    CloudError, GkePoolFields, GkeSharing, Location, NodePools, OpCtx, Pool, PoolSpec, PoolTaint,
    Scaling, StopSignal, TargetFields,
};
use serde_json::{Value, json};

struct Env {
    base: String,
    sink: Arc<RecordingSink>,
    http: reqwest::Client,
    gke: GkeClient,
}

async fn start(op_time: Duration) -> Env {
    start_with(op_time, axum::Router::new()).await
}

/// A sandbox with extra routes beside it (a stand-in for APIs the sandbox does not serve).
async fn start_with(op_time: Duration, extra: axum::Router) -> Env {
    let sink = Arc::new(RecordingSink::default());
    let sb = Sandbox::open(Config {
        op_time,
        node_sink: Some(sink.clone()),
        ..Config::instant()
    })
    .expect("sandbox");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = sb.router().merge(extra);
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    let base = format!("http://{addr}");
    let gke = GkeClient::new(GkeConfig {
        sandbox: Some(base.clone()),
        ..GkeConfig::default()
    })
    .await
    .expect("client")
    .with_timing(GkeTiming {
        poll_first: Duration::from_millis(50),
        retry_first: Duration::from_millis(50),
    });
    Env {
        base,
        sink,
        http: reqwest::Client::new(),
        gke,
    }
}

impl Env {
    /// The pool as a refresh reads it.
    async fn pool(&self, name: &str) -> Result<Option<Pool>, CloudError> {
        self.gke.get(&loc(), name, &read_ctx()).await
    }

    async fn fault(&self, f: Value) {
        let r = self
            .http
            .post(format!("{}/_sandbox/faults", self.base))
            .json(&f)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 201, "{}", r.text().await.unwrap());
    }

    async fn armed_faults(&self) -> usize {
        let v: Value = self
            .http
            .get(format!("{}/_sandbox/faults", self.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        v["faults"].as_array().map_or(0, Vec::len)
    }

    /// The pool document the sandbox holds (what a GET on the GKE API returns).
    async fn resource(&self, name: &str) -> Value {
        let v: Value = self
            .http
            .get(format!("{}/_sandbox/inventory", self.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        v["pools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["cloud"] == "gke" && p["name"] == name)
            .map(|p| p["resource"].clone())
            .unwrap_or(Value::Null)
    }

    /// The nodes the sandbox last reported for the pool.
    fn last_nodes(&self, pool: &str) -> Option<PoolNodes> {
        self.sink
            .events
            .lock()
            .unwrap()
            .iter()
            .rev()
            .find_map(|e| match e {
                NodeEvent::Changed(n) if n.pool == pool => Some(n.clone()),
                _ => None,
            })
    }
}

fn loc() -> Location {
    Location::Gke {
        project: "sandbox-project".into(),
        location: "us-central1".into(),
        cluster: "sandbox-gke".into(),
    }
}

fn ctx(timeout: Duration) -> OpCtx {
    OpCtx::new(timeout, StopSignal::default())
}

/// The limit `terraform refresh` gives a read by default.
fn read_ctx() -> OpCtx {
    ctx(Duration::from_secs(120))
}

fn long() -> OpCtx {
    ctx(Duration::from_secs(60))
}

fn gpu_taint() -> PoolTaint {
    PoolTaint {
        key: "nvidia.com/gpu".into(),
        value: "Present".into(),
        effect: "NoSchedule".into(),
    }
}

/// g2-standard-4 (one L4) time-shared between 10 clients.
fn time_sharing(name: &str) -> PoolSpec {
    PoolSpec {
        location: loc(),
        name: name.into(),
        machine_type: "g2-standard-4".into(),
        scaling: Scaling::Fixed { nodes: 2 },
        spot: false,
        disk_size_gb: None,
        labels: BTreeMap::from([
            ("team".into(), "ml".into()),
            (
                "nvidia.com/device-plugin.config".into(),
                "time-sliced-10".into(),
            ),
        ]),
        taints: vec![gpu_taint()],
        gpu_count: 1,
        node_template: BTreeMap::new(),
        target: TargetFields::Gke(GkePoolFields {
            accelerator_type: Some("nvidia-l4".into()),
            partition_size: None,
            sharing: Some(GkeSharing::TimeSharing { max_clients: 10 }),
            // Two of the regional cluster's three zones: one node in each.
            node_locations: vec!["us-central1-a".into(), "us-central1-b".into()],
        }),
    }
}

fn expect_api(r: Result<impl std::fmt::Debug, CloudError>, status: u16, code: &str) -> String {
    match r {
        Err(CloudError::Api {
            status: s,
            code: c,
            message,
        }) if s == status && c == code => message,
        other => panic!("expected {status} {code}, got {other:?}"),
    }
}

#[tokio::test]
async fn time_sharing_pool_lives_and_changes_in_place() {
    let env = start(Duration::from_millis(300)).await;
    let spec = time_sharing("ts");
    let t0 = Instant::now();
    let pool = env.gke.create(&spec, &long()).await.unwrap();
    assert!(
        t0.elapsed() >= Duration::from_millis(300),
        "create must wait for the operation"
    );
    assert_eq!(
        pool.id,
        "projects/sandbox-project/locations/us-central1/clusters/sandbox-gke/nodePools/ts"
    );
    assert_eq!(pool.status, "RUNNING");
    assert_eq!(pool.spec, spec);
    assert_eq!(env.pool("ts").await.unwrap(), Some(pool.clone()));

    // What went over the wire, as GKE stores it.
    let r = env.resource("ts").await;
    let acc = &r["config"]["accelerators"][0];
    assert_eq!(acc["acceleratorType"], "nvidia-l4");
    assert_eq!(acc["acceleratorCount"], "1");
    assert_eq!(
        acc["gpuSharingConfig"]["gpuSharingStrategy"],
        "TIME_SHARING"
    );
    assert_eq!(acc["gpuSharingConfig"]["maxSharedClientsPerGpu"], "10");
    assert_eq!(
        acc["gpuDriverInstallationConfig"]["gpuDriverVersion"],
        "DEFAULT"
    );
    assert_eq!(r["config"]["diskSizeGb"], 100, "GKE's default disk");
    assert_eq!(r["config"]["taints"][0]["effect"], "NO_SCHEDULE");
    // Two nodes in all: one in each of the pool's two zones.
    assert_eq!(r["initialNodeCount"], 1);
    assert_eq!(r["locations"], json!(["us-central1-a", "us-central1-b"]));
    let nodes = env.last_nodes("ts").unwrap();
    assert_eq!(nodes.node_count, 2);
    assert_eq!(nodes.zones, ["us-central1-a", "us-central1-b"]);
    assert_eq!(nodes.gke_sharing, Some(("TIME_SHARING".into(), 10)));

    // setSize: a total of four is two per zone.
    let mut want = spec.clone();
    want.scaling = Scaling::Fixed { nodes: 4 };
    let p = env.gke.update(&pool, &want, &long()).await.unwrap();
    assert_eq!(p.spec, want);
    assert_eq!(env.last_nodes("ts").unwrap().node_count, 4);

    // A third zone and a total of six: the pool's locations change, then setSize makes it two
    // per zone.
    let before = p;
    want.gke_mut().node_locations = vec![
        "us-central1-a".into(),
        "us-central1-b".into(),
        "us-central1-c".into(),
    ];
    want.scaling = Scaling::Fixed { nodes: 6 };
    let p = env.gke.update(&before, &want, &long()).await.unwrap();
    assert_eq!(p.spec, want);
    assert_eq!(env.last_nodes("ts").unwrap().node_count, 6);
    // A total the zones cannot split is refused before anything changes.
    let mut uneven = want.clone();
    uneven.scaling = Scaling::Fixed { nodes: 4 };
    expect_api(
        env.gke.update(&p, &uneven, &long()).await,
        400,
        "INVALID_ARGUMENT",
    );

    // setAutoscaling
    let before = p;
    want.scaling = Scaling::Auto { min: 1, max: 5 };
    let p = env.gke.update(&before, &want, &long()).await.unwrap();
    assert_eq!(p.spec, want);
    assert_eq!(env.pool("ts").await.unwrap().unwrap().spec, want);
    assert_eq!(r_autoscaling(&env.resource("ts").await), (true, 1, 5));

    // labels (replace all)
    let before = p;
    want.labels.remove("team");
    want.labels.insert("tier".into(), "gold".into());
    let p = env.gke.update(&before, &want, &long()).await.unwrap();
    assert_eq!(p.spec, want);
    assert_eq!(env.pool("ts").await.unwrap().unwrap().spec, want);

    // taints
    let before = p;
    want.taints.push(PoolTaint {
        key: "dedicated".into(),
        value: "inference".into(),
        effect: "PreferNoSchedule".into(),
    });
    let p = env.gke.update(&before, &want, &long()).await.unwrap();
    assert_eq!(p.spec, want);
    let r = env.resource("ts").await;
    assert_eq!(r["config"]["taints"][1]["effect"], "PREFER_NO_SCHEDULE");
    assert_eq!(env.pool("ts").await.unwrap().unwrap().spec, want);

    // autoscaling off again, back to a fixed size: two operations
    let before = p;
    want.scaling = Scaling::Fixed { nodes: 3 };
    let p = env.gke.update(&before, &want, &long()).await.unwrap();
    assert_eq!(p.spec, want);
    assert!(!r_autoscaling(&env.resource("ts").await).0);
    assert_eq!(env.last_nodes("ts").unwrap().node_count, 3);

    // fields that need a new pool are refused, not silently ignored
    let mut replace = want.clone();
    replace.machine_type = "g2-standard-8".into();
    let msg = expect_api(
        env.gke.update(&p, &replace, &long()).await,
        400,
        "INVALID_ARGUMENT",
    );
    assert!(msg.contains("machine_type"), "{msg}");

    env.gke.delete(&loc(), "ts", &long()).await.unwrap();
    assert_eq!(env.pool("ts").await.unwrap(), None);
    assert_eq!(env.resource("ts").await, Value::Null);
    // deleting what is gone is success
    env.gke.delete(&loc(), "ts", &long()).await.unwrap();
}

/// GKE's autoscaling of a pool: (enabled, total minimum, total maximum); the client sends totals.
fn r_autoscaling(r: &Value) -> (bool, i64, i64) {
    let a = &r["autoscaling"];
    assert!(a.get("minNodeCount").is_none(), "no per-zone limits: {a}");
    (
        a["enabled"].as_bool().unwrap_or(false),
        a["totalMinNodeCount"].as_i64().unwrap_or(0),
        a["totalMaxNodeCount"].as_i64().unwrap_or(0),
    )
}

#[tokio::test]
async fn partitioned_a100_with_time_sharing_on_top_round_trips() {
    let env = start(Duration::ZERO).await;
    let mut spec = time_sharing("mig");
    spec.machine_type = "a2-highgpu-1g".into();
    spec.disk_size_gb = Some(200);
    spec.gpu_count = 1;
    let gke = spec.gke_mut();
    gke.accelerator_type = Some("nvidia-tesla-a100".into());
    gke.partition_size = Some("1g.5gb".into());
    gke.sharing = Some(GkeSharing::TimeSharing { max_clients: 3 });
    let pool = env.gke.create(&spec, &long()).await.unwrap();
    assert_eq!(pool.spec, spec);
    assert_eq!(env.pool("mig").await.unwrap().unwrap(), pool);
    let r = env.resource("mig").await;
    assert_eq!(r["config"]["accelerators"][0]["gpuPartitionSize"], "1g.5gb");
    assert_eq!(r["config"]["diskSizeGb"], 200);
    let nodes = env.last_nodes("mig").unwrap();
    assert_eq!(nodes.mig_profile.as_deref(), Some("1g.5gb"));
    assert_eq!(nodes.mig_instances_per_gpu, 7);
    assert_eq!(nodes.gke_sharing, Some(("TIME_SHARING".into(), 3)));
}

#[tokio::test]
async fn mps_on_spot_with_autoscaling_from_zero_round_trips() {
    let env = start(Duration::ZERO).await;
    let mut spec = time_sharing("mps");
    spec.spot = true;
    spec.scaling = Scaling::Auto { min: 0, max: 3 };
    spec.gke_mut().sharing = Some(GkeSharing::Mps { max_clients: 4 });
    let pool = env.gke.create(&spec, &long()).await.unwrap();
    assert_eq!(pool.spec, spec);
    assert_eq!(env.pool("mps").await.unwrap().unwrap().spec, spec);
    let r = env.resource("mps").await;
    assert_eq!(r["config"]["spot"], true);
    assert_eq!(r["initialNodeCount"], 0);
    assert_eq!(r_autoscaling(&r), (true, 0, 3));
    assert_eq!(
        r["config"]["accelerators"][0]["gpuSharingConfig"]["gpuSharingStrategy"],
        "MPS"
    );
    assert_eq!(
        env.last_nodes("mps").unwrap().labels["cloud.google.com/gke-spot"],
        "true"
    );
}

#[tokio::test]
async fn the_default_disk_size_written_out_reads_back_canonically() {
    let env = start(Duration::ZERO).await;
    let mut spec = time_sharing("disk");
    spec.disk_size_gb = Some(100);
    let pool = env.gke.create(&spec, &long()).await.unwrap();
    assert_ne!(pool.spec, spec);
    assert_eq!(pool.spec, canonical_spec(&spec));
}

#[tokio::test]
async fn emulator_validation_errors_surface_with_the_google_rpc_status() {
    let env = start(Duration::ZERO).await;

    let mut bad = time_sharing("badpart");
    bad.gke_mut().partition_size = Some("1g.5gb".into());
    let msg = expect_api(env.gke.create(&bad, &long()).await, 400, "INVALID_ARGUMENT");
    assert!(msg.contains("partition size"), "{msg}");

    let mut bad = time_sharing("mpsmig");
    bad.machine_type = "a2-highgpu-1g".into();
    bad.gke_mut().accelerator_type = Some("nvidia-tesla-a100".into());
    bad.gke_mut().partition_size = Some("1g.5gb".into());
    bad.gke_mut().sharing = Some(GkeSharing::Mps { max_clients: 2 });
    let msg = expect_api(env.gke.create(&bad, &long()).await, 400, "INVALID_ARGUMENT");
    assert!(msg.contains("MPS"), "{msg}");

    let mut bad = time_sharing("toomany");
    bad.gke_mut().sharing = Some(GkeSharing::TimeSharing { max_clients: 49 });
    let msg = expect_api(env.gke.create(&bad, &long()).await, 400, "INVALID_ARGUMENT");
    assert!(msg.contains("48"), "{msg}");

    let mut bad = time_sharing("nomachine");
    bad.machine_type = "g2-standard-5".into();
    expect_api(env.gke.create(&bad, &long()).await, 400, "INVALID_ARGUMENT");

    let mut bad = time_sharing("Upper");
    bad.name = "Upper_Case".into();
    let msg = expect_api(env.gke.create(&bad, &long()).await, 400, "INVALID_ARGUMENT");
    assert!(msg.contains("node pool name"), "{msg}");

    let mut elsewhere = time_sharing("x");
    elsewhere.location = Location::Gke {
        project: "sandbox-project".into(),
        location: "us-central1".into(),
        cluster: "no-such-cluster".into(),
    };
    expect_api(env.gke.create(&elsewhere, &long()).await, 404, "NOT_FOUND");

    // nothing was created by any of these
    let inv: Value = env
        .http
        .get(format!("{}/_sandbox/inventory", env.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(inv["pools"], json!([]));

    // an update of a pool that does not exist
    let ghost = fracgpu::cloud::Pool {
        id: "x".into(),
        spec: time_sharing("ghost"),
        status: "RUNNING".into(),
    };
    let mut want = ghost.spec.clone();
    want.scaling = Scaling::Fixed { nodes: 6 };
    expect_api(
        env.gke.update(&ghost, &want, &long()).await,
        404,
        "NOT_FOUND",
    );
}

#[tokio::test]
async fn throttling_and_unavailability_are_retried() {
    let env = start(Duration::from_millis(100)).await;
    env.fault(json!({"match": {"method": "POST", "path_contains": "/nodePools"}, "count": 3, "kind": "429", "retry_after": 0}))
        .await;
    env.fault(json!({"match": {"method": "GET", "path_contains": "/operations/"}, "count": 3, "kind": "503"}))
        .await;
    env.fault(json!({"match": {"method": "GET", "path_contains": "/nodePools/"}, "count": 2, "kind": "500"}))
        .await;
    let spec = time_sharing("flaky");
    let pool = env.gke.create(&spec, &long()).await.unwrap();
    assert_eq!(pool.spec, spec);
    assert_eq!(
        env.armed_faults().await,
        0,
        "every fault was hit and retried"
    );
}

#[tokio::test]
async fn a_429_honours_retry_after() {
    let env = start(Duration::ZERO).await;
    env.fault(json!({"match": {"method": "POST", "path_contains": "/nodePools"}, "count": 1, "kind": "429", "retry_after": 1}))
        .await;
    let t0 = Instant::now();
    env.gke.create(&time_sharing("ra"), &long()).await.unwrap();
    assert!(t0.elapsed() >= Duration::from_secs(1), "{:?}", t0.elapsed());
}

#[tokio::test]
async fn retries_give_up_after_a_bounded_number_of_attempts() {
    let env = start(Duration::ZERO).await;
    env.fault(json!({"match": {"method": "POST", "path_contains": "/nodePools"}, "count": 50, "kind": "503", "retry_after": 0}))
        .await;
    expect_api(
        env.gke.create(&time_sharing("down"), &long()).await,
        503,
        "UNAVAILABLE",
    );
    let v: Value = env
        .http
        .get(format!("{}/_sandbox/faults", env.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    // One attempt and eight retries, then the 503 is the answer.
    assert_eq!(v["faults"][0]["count"], 50 - 9, "{v}");
}

#[tokio::test]
async fn a_dropped_connection_is_retried() {
    let env = start(Duration::from_millis(100)).await;
    env.fault(json!({"match": {"method": "POST", "path_contains": "/nodePools"}, "count": 1, "kind": "drop"}))
        .await;
    env.fault(json!({"match": {"method": "GET", "path_contains": "/operations/"}, "count": 1, "kind": "drop"}))
        .await;
    let spec = time_sharing("dropped");
    let pool = env.gke.create(&spec, &long()).await.unwrap();
    assert_eq!(pool.spec, spec);
    assert_eq!(env.armed_faults().await, 0);

    env.fault(json!({"match": {"method": "DELETE"}, "count": 1, "kind": "drop"}))
        .await;
    env.gke.delete(&loc(), "dropped", &long()).await.unwrap();
    assert_eq!(env.pool("dropped").await.unwrap(), None);
}

#[tokio::test]
async fn a_failed_operation_is_reported_with_its_code() {
    let env = start(Duration::from_millis(100)).await;
    env.fault(json!({"match": {"method": "POST", "path_contains": "/nodePools"}, "count": 1, "kind": "fail_operation"}))
        .await;
    match env.gke.create(&time_sharing("doomed"), &long()).await {
        Err(CloudError::OperationFailed { code, message }) => {
            assert_eq!(code, "RESOURCE_EXHAUSTED");
            assert!(
                message.contains("ZONE_RESOURCE_POOL_EXHAUSTED"),
                "{message}"
            );
        }
        other => panic!("expected OperationFailed, got {other:?}"),
    }
    // The pool exists in ERROR (so the resource can save it as tainted) and can be deleted.
    let p = env.pool("doomed").await.unwrap().unwrap();
    assert_eq!(p.status, "ERROR");
    env.gke.delete(&loc(), "doomed", &long()).await.unwrap();
    assert_eq!(env.pool("doomed").await.unwrap(), None);

    // A failed update restores the previous values.
    let spec = time_sharing("upd");
    let pool = env.gke.create(&spec, &long()).await.unwrap();
    env.fault(json!({"match": {"method": "PUT"}, "count": 1, "kind": "fail_operation"}))
        .await;
    let mut want = spec.clone();
    want.labels.insert("extra".into(), "1".into());
    assert!(matches!(
        env.gke.update(&pool, &want, &long()).await,
        Err(CloudError::OperationFailed { .. })
    ));
    assert_eq!(env.pool("upd").await.unwrap().unwrap().spec, spec);
}

#[tokio::test]
async fn a_short_deadline_times_out_and_a_later_delete_waits_for_the_running_operation() {
    let env = start(Duration::from_secs(2)).await;
    let t0 = Instant::now();
    match env
        .gke
        .create(&time_sharing("slow"), &ctx(Duration::from_millis(400)))
        .await
    {
        Err(CloudError::Timeout { waiting_for, .. }) => {
            assert!(waiting_for.contains("operation"), "{waiting_for}")
        }
        other => panic!("expected Timeout, got {other:?}"),
    }
    assert!(t0.elapsed() < Duration::from_millis(1500));
    // The pool is still PROVISIONING: GKE refuses the delete (FAILED_PRECONDITION, operation in
    // progress) until the create finishes; the client waits and retries.
    let p = env.pool("slow").await.unwrap().unwrap();
    assert_eq!(p.status, "PROVISIONING");
    env.gke.delete(&loc(), "slow", &long()).await.unwrap();
    assert!(t0.elapsed() >= Duration::from_secs(2));
    assert_eq!(env.pool("slow").await.unwrap(), None);
}

#[tokio::test]
async fn a_busy_pool_refuses_with_failed_precondition_when_the_deadline_is_too_short() {
    let env = start(Duration::from_secs(2)).await;
    let _ = env
        .gke
        .create(&time_sharing("busy"), &ctx(Duration::from_millis(100)))
        .await;
    // Waiting for the other operation is bounded by our own deadline.
    match env
        .gke
        .delete(&loc(), "busy", &ctx(Duration::from_millis(500)))
        .await
    {
        Err(CloudError::Timeout { waiting_for, .. }) => {
            assert!(waiting_for.contains("FAILED_PRECONDITION"), "{waiting_for}")
        }
        other => panic!("expected Timeout, got {other:?}"),
    }
}

#[tokio::test]
async fn a_slow_answer_is_cut_at_the_deadline() {
    let env = start(Duration::ZERO).await;
    env.fault(json!({"match": {"method": "POST"}, "count": 1, "kind": "slow", "delay_ms": 3000}))
        .await;
    let t0 = Instant::now();
    assert!(matches!(
        env.gke
            .create(&time_sharing("sluggish"), &ctx(Duration::from_millis(300)))
            .await,
        Err(CloudError::Timeout { .. })
    ));
    assert!(t0.elapsed() < Duration::from_millis(1500));
}

#[tokio::test]
async fn stop_ends_the_wait_promptly() {
    let env = start(Duration::from_secs(5)).await;
    let stop = StopSignal::default();
    let c = OpCtx::new(Duration::from_secs(60), stop.clone());
    let gke = env.gke.clone();
    let t0 = Instant::now();
    let task = tokio::spawn(async move { gke.create(&time_sharing("stopme"), &c).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.stop();
    let r = task.await.unwrap();
    assert!(matches!(r, Err(CloudError::Stopped)), "{r:?}");
    assert!(t0.elapsed() < Duration::from_secs(2));
    // What exists is still visible for the state.
    assert!(env.pool("stopme").await.unwrap().is_some());
}

#[tokio::test]
async fn a_retried_create_adopts_its_own_pool_and_refuses_a_different_one() {
    let env = start(Duration::from_millis(500)).await;
    let spec = time_sharing("again");
    // The first attempt gives up before the operation ends (as after a crash or a lost answer)...
    assert!(matches!(
        env.gke
            .create(&spec, &ctx(Duration::from_millis(100)))
            .await,
        Err(CloudError::Timeout { .. })
    ));
    // ...the retry finds ALREADY_EXISTS, waits for provisioning and adopts the pool.
    let pool = env.gke.create(&spec, &long()).await.unwrap();
    assert_eq!(pool.spec, spec);
    assert_eq!(pool.status, "RUNNING");
    // Adopting an already running identical pool works too.
    assert_eq!(env.gke.create(&spec, &long()).await.unwrap(), pool);

    let mut other = spec.clone();
    other.gke_mut().sharing = Some(GkeSharing::TimeSharing { max_clients: 4 });
    let msg = expect_api(env.gke.create(&other, &long()).await, 409, "ALREADY_EXISTS");
    assert!(msg.contains("terraform import"), "{msg}");
    assert!(msg.contains("nodePools/again"), "{msg}");
}

#[tokio::test]
async fn an_access_token_and_endpoint_override_reach_the_api() {
    let env = start(Duration::ZERO).await;
    let gke = GkeClient::new(GkeConfig {
        access_token: Some("ya29.not-a-real-token".into()),
        endpoint: Some(format!("{}/", env.base)),
        ..GkeConfig::default()
    })
    .await
    .unwrap();
    assert_eq!(gke.get(&loc(), "none", &read_ctx()).await.unwrap(), None);
}

#[tokio::test]
async fn bad_credentials_are_an_auth_error_that_does_not_echo_them() {
    let r = GkeClient::new(GkeConfig {
        credentials: Some("{\"type\": \"service_account\", \"private_key\": \"SECRET\"".into()),
        ..GkeConfig::default()
    })
    .await;
    match r {
        Err(CloudError::Auth(m)) => assert!(!m.contains("SECRET"), "{m}"),
        other => panic!("expected Auth, got {other:?}"),
    }
    let r = GkeClient::new(GkeConfig {
        credentials: Some("/nonexistent/key.json".into()),
        ..GkeConfig::default()
    })
    .await;
    assert!(matches!(r, Err(CloudError::Auth(_))), "{r:?}");
}

#[tokio::test]
async fn a_fixed_size_is_read_from_the_instance_group_managers() {
    // GKE's node pool keeps only initialNodeCount; the size comes from the pool's instance group
    // managers, which the sandbox serves like Compute Engine does.
    let env = start(Duration::ZERO).await;
    let spec = time_sharing("igm");
    assert_eq!(env.gke.create(&spec, &long()).await.unwrap().spec, spec);
    // Someone resizes the pool out of band (gcloud's `clusters resize`): the read shows it.
    let url = format!(
        "{}/v1/projects/sandbox-project/locations/us-central1/clusters/sandbox-gke/nodePools/igm:setSize",
        env.base
    );
    let resp = reqwest::Client::new()
        .post(url)
        .json(&json!({"nodeCount": 5}))
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success(), "{}", resp.text().await.unwrap());
    let p = loop {
        let p = env.pool("igm").await.unwrap().unwrap();
        if p.status == "RUNNING" {
            break p;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // setSize's nodeCount is per zone: five in each of the pool's two zones.
    assert_eq!(p.spec.scaling, Scaling::Fixed { nodes: 10 });
}

/// A pool that names no zones runs in the cluster's, which the client reads once and keeps.
#[tokio::test]
async fn a_pool_without_zones_gets_the_clusters_read_once() {
    let env = start(Duration::ZERO).await;
    let mut spec = time_sharing("default");
    spec.gke_mut().node_locations.clear();
    spec.scaling = Scaling::Fixed { nodes: 3 };
    let zones = env.gke.cluster_zones(&loc(), &long()).await.unwrap();
    assert_eq!(zones, ["us-central1-a", "us-central1-b", "us-central1-c"]);
    let pool = env.gke.create(&spec, &long()).await.unwrap();
    assert_eq!(pool.spec.gke().node_locations, zones, "the cluster's zones");
    assert_eq!(env.resource("default").await["initialNodeCount"], 1);
    // The cluster was read once: a fault armed on GKE reads now is never met.
    env.fault(json!({"match": {"method": "GET", "path_contains": "/clusters/sandbox-gke"}, "count": 1, "kind": "500"}))
        .await;
    assert_eq!(
        env.gke.default_zones(&loc(), &long()).await.unwrap(),
        Some(zones)
    );
    assert_eq!(env.armed_faults().await, 1, "no read of the cluster");
}

#[tokio::test]
async fn an_access_token_is_sent_as_a_bearer_header_and_the_sandbox_gets_none() {
    use std::sync::Mutex;
    // A stand-in GKE that records the Authorization header and knows no pools.
    let seen = Arc::new(Mutex::new(Vec::<Option<String>>::new()));
    let sn = seen.clone();
    let app = axum::Router::new().fallback(move |headers: axum::http::HeaderMap| {
        let sn = sn.clone();
        async move {
            sn.lock().unwrap().push(
                headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string),
            );
            (
                axum::http::StatusCode::NOT_FOUND,
                axum::Json(
                    json!({"error": {"code": 404, "message": "Not found", "status": "NOT_FOUND"}}),
                ),
            )
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let with_token = GkeClient::new(GkeConfig {
        access_token: Some("ya29.test-token".into()),
        endpoint: Some(base.clone()),
        ..GkeConfig::default()
    })
    .await
    .unwrap();
    assert_eq!(
        with_token.get(&loc(), "p", &read_ctx()).await.unwrap(),
        None
    );
    let sandboxed = GkeClient::new(GkeConfig {
        access_token: Some("ya29.test-token".into()),
        sandbox: Some(base),
        ..GkeConfig::default()
    })
    .await
    .unwrap();
    assert_eq!(sandboxed.get(&loc(), "p", &read_ctx()).await.unwrap(), None);
    assert_eq!(
        *seen.lock().unwrap(),
        vec![Some("Bearer ya29.test-token".to_string()), None]
    );
}

/// Operations of other clients on the cluster make GKE refuse ours: an operation on the cluster
/// itself (400 FAILED_PRECONDITION) and a full quota (429 RESOURCE_EXHAUSTED). Both are waited out
/// until the deadline, not given up after the transient retries.
#[tokio::test]
async fn other_clients_operations_on_the_cluster_are_waited_out() {
    let env = start(Duration::from_millis(1500)).await;
    let cluster = format!(
        "{}/v1/projects/sandbox-project/locations/us-central1/clusters/sandbox-gke",
        env.base
    );
    let r = env
        .http
        .put(&cluster)
        .json(&json!({"update": {"desiredMasterVersion": "latest"}}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    let t0 = Instant::now();
    env.gke
        .create(&time_sharing("patient"), &long())
        .await
        .unwrap();
    assert!(
        t0.elapsed() >= Duration::from_millis(1400),
        "{:?}",
        t0.elapsed()
    );

    // Five pools of someone else's fill the quota.
    for i in 0..5 {
        let r = env
            .http
            .post(format!("{cluster}/nodePools"))
            .json(&json!({"nodePool": {"name": format!("theirs{i}"), "initialNodeCount": 3}}))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    }
    let t0 = Instant::now();
    env.gke.delete(&loc(), "patient", &long()).await.unwrap();
    assert!(
        t0.elapsed() >= Duration::from_millis(1400),
        "{:?}",
        t0.elapsed()
    );
    let inv: Value = env
        .http
        .get(format!("{}/_sandbox/inventory", env.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let statuses: Vec<&str> = inv["refused"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["status"].as_str())
        .collect();
    assert_eq!(statuses, ["FAILED_PRECONDITION", "RESOURCE_EXHAUSTED"]);
}
