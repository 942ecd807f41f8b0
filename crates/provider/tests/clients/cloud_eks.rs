//! The EKS node group client over real HTTP: against the in-process sandbox (happy paths, validation,
//! fault injection, deadlines, stop, idempotent create) and, for the happy path, against moto.

use testkit::tools::{self, Tool};

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ::sandbox::{Config, Sandbox};
use fracgpu::cloud::eks::{EksClient, EksConfig, canonical_spec};
use fracgpu::cloud::{
    CloudError, EksPoolFields, Location, NodePools, OpCtx, Pool, PoolSpec, PoolTaint, Scaling,
    StopSignal, TargetFields,
};
use serde_json::{Value, json};

const CLUSTER: &str = "sandbox-eks";
const REGION: &str = "us-east-1";
const ROLE: &str = "arn:aws:iam::123456789012:role/eks-gpu-nodes";

struct Env {
    url: String,
    http: reqwest::Client,
    eks: EksClient,
}

async fn sandbox(op_time: Duration) -> Env {
    let sb = Sandbox::open(Config {
        op_time,
        ..Config::instant()
    })
    .expect("sandbox opens");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let router = sb.router();
    tokio::spawn(async move { axum::serve(listener, router).await });
    let eks = EksClient::new(EksConfig {
        sandbox: Some(url.clone()),
        region: Some(REGION.into()),
        ..EksConfig::default()
    })
    .await
    .expect("client")
    .with_poll_interval(Duration::from_millis(50), Duration::from_millis(200))
    .with_retry_interval(Duration::from_millis(50), Duration::from_millis(200));
    Env {
        url,
        http: reqwest::Client::new(),
        eks,
    }
}

impl Env {
    /// The pool as a refresh reads it.
    async fn pool(&self, name: &str) -> Result<Option<Pool>, CloudError> {
        self.eks.get(&loc(), name, &read_ctx()).await
    }

    async fn fault(&self, fault: Value) {
        let r = self
            .http
            .post(format!("{}/_sandbox/faults", self.url))
            .json(&fault)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 201, "fault accepted");
    }

    async fn armed_faults(&self) -> usize {
        let v: Value = self
            .http
            .get(format!("{}/_sandbox/faults", self.url))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        v["faults"].as_array().unwrap().len()
    }

    /// The sandbox's own document of every EKS node group (what DescribeNodegroup would answer).
    async fn nodegroups(&self) -> Vec<Value> {
        let v: Value = self
            .http
            .get(format!("{}/_sandbox/inventory", self.url))
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
            .filter(|p| p["cloud"] == "eks")
            .map(|p| p["resource"].clone())
            .collect()
    }

    async fn nodegroup(&self, name: &str) -> Value {
        self.nodegroups()
            .await
            .into_iter()
            .find(|n| n["nodegroupName"] == name)
            .unwrap_or_else(|| panic!("node group {name} in the sandbox"))
    }

    /// A raw SDK client on the same sandbox, for out-of-band changes.
    fn raw(&self) -> aws_sdk_eks::Client {
        raw_client(&self.url)
    }
}

fn raw_client(url: &str) -> aws_sdk_eks::Client {
    let conf = aws_sdk_eks::Config::builder()
        .behavior_version(aws_sdk_eks::config::BehaviorVersion::latest())
        .region(aws_sdk_eks::config::Region::new(REGION))
        .credentials_provider(aws_sdk_eks::config::Credentials::new(
            "AKIDTEST", "test", None, None, "test",
        ))
        .endpoint_url(url)
        .build();
    aws_sdk_eks::Client::from_conf(conf)
}

fn ctx(timeout: Duration) -> OpCtx {
    OpCtx::new(timeout, StopSignal::default())
}

/// The limit `terraform refresh` gives a read by default.
fn read_ctx() -> OpCtx {
    ctx(Duration::from_secs(120))
}

fn loc() -> Location {
    Location::Eks {
        region: REGION.into(),
        cluster: CLUSTER.into(),
    }
}

fn gpu_taint() -> PoolTaint {
    PoolTaint {
        key: "nvidia.com/gpu".into(),
        value: "Present".into(),
        effect: "NoSchedule".into(),
    }
}

/// A time-sliced g4dn.xlarge group as the resource layer would hand it over (already canonical).
fn time_sliced(name: &str) -> PoolSpec {
    PoolSpec {
        location: loc(),
        name: name.into(),
        machine_type: "g4dn.xlarge".into(),
        scaling: Scaling::Fixed { nodes: 1 },
        spot: false,
        disk_size_gb: None,
        labels: BTreeMap::from([
            (
                "nvidia.com/device-plugin.config".into(),
                "time-sliced-10".into(),
            ),
            ("team".into(), "ml".into()),
        ]),
        taints: vec![gpu_taint()],
        gpu_count: 0,
        node_template: BTreeMap::new(),
        target: TargetFields::Eks(EksPoolFields {
            node_role_arn: ROLE.into(),
            subnet_ids: vec!["subnet-0aaa".into(), "subnet-0bbb".into()],
            ami_type: "AL2023_x86_64_NVIDIA".into(),
            bottlerocket_settings: None,
        }),
    }
}

fn api_code(e: &CloudError) -> (u16, &str) {
    match e {
        CloudError::Api { status, code, .. } => (*status, code.as_str()),
        other => panic!("expected CloudError::Api, got {other:?}"),
    }
}

#[tokio::test]
async fn time_sliced_group_create_get_update_delete() {
    let env = sandbox(Duration::from_millis(300)).await;
    let spec = time_sliced("ts10");

    let t = Instant::now();
    let pool = env
        .eks
        .create(&spec, &ctx(Duration::from_secs(30)))
        .await
        .unwrap();
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "create waited for the operation"
    );
    assert_eq!(pool.id, "sandbox-eks:ts10");
    assert_eq!(pool.status, "ACTIVE");
    assert_eq!(pool.spec, spec);
    assert_eq!(canonical_spec(&spec), spec);

    // What went over the wire, as the emulator understood it.
    let ng = env.nodegroup("ts10").await;
    assert_eq!(ng["amiType"], "AL2023_x86_64_NVIDIA");
    assert_eq!(ng["capacityType"], "ON_DEMAND");
    assert_eq!(ng["instanceTypes"], json!(["g4dn.xlarge"]));
    assert_eq!(ng["nodeRole"], ROLE);
    assert_eq!(
        ng["scalingConfig"],
        json!({"minSize": 1, "maxSize": 1, "desiredSize": 1})
    );
    assert_eq!(
        ng["labels"]["nvidia.com/device-plugin.config"],
        "time-sliced-10"
    );
    assert_eq!(
        ng["taints"],
        json!([{"key": "nvidia.com/gpu", "value": "Present", "effect": "NO_SCHEDULE"}])
    );
    // EKS's default disk size reads back as the spec's None: no perpetual diff.
    assert_eq!(ng["diskSize"], 20);

    let got = env.pool("ts10").await.unwrap().expect("exists");
    assert_eq!(got, pool);

    // In place: autoscaling, one label changed, one removed, one added, taints swapped.
    let mut next = spec.clone();
    next.scaling = Scaling::Auto { min: 0, max: 3 };
    next.labels.remove("team");
    next.labels.insert(
        "nvidia.com/device-plugin.config".into(),
        "time-sliced-4".into(),
    );
    next.labels.insert("tier".into(), "batch".into());
    next.taints = vec![PoolTaint {
        key: "dedicated".into(),
        value: String::new(),
        effect: "PreferNoSchedule".into(),
    }];
    let updated = env
        .eks
        .update(&pool, &next, &ctx(Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(updated.spec, next);
    assert_eq!(updated.status, "ACTIVE");
    let ng = env.nodegroup("ts10").await;
    assert_eq!(
        ng["labels"],
        json!({"nvidia.com/device-plugin.config": "time-sliced-4", "tier": "batch"})
    );
    assert_eq!(
        ng["taints"],
        json!([{"key": "dedicated", "value": "", "effect": "PREFER_NO_SCHEDULE"}])
    );
    // The autoscaler's desired size (1) is inside the new bounds and left alone.
    assert_eq!(
        ng["scalingConfig"],
        json!({"minSize": 0, "maxSize": 3, "desiredSize": 1})
    );
    assert_eq!(env.pool("ts10").await.unwrap().unwrap().spec, next);

    // An update with nothing to change makes no call and returns the group.
    let same = env
        .eks
        .update(&updated, &next, &ctx(Duration::from_secs(5)))
        .await
        .unwrap();
    assert_eq!(same.spec, next);

    // Back to a fixed size below the old desired size.
    let mut fixed = next.clone();
    fixed.scaling = Scaling::Fixed { nodes: 2 };
    let back = env
        .eks
        .update(&updated, &fixed, &ctx(Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(back.spec, fixed);

    env.eks
        .delete(&loc(), "ts10", &ctx(Duration::from_secs(30)))
        .await
        .unwrap();
    assert!(env.pool("ts10").await.unwrap().is_none());
    assert!(env.nodegroups().await.is_empty());
    // Deleting what is gone is success.
    env.eks
        .delete(&loc(), "ts10", &ctx(Duration::from_secs(5)))
        .await
        .unwrap();
}

#[tokio::test]
async fn mig_p4d_group_round_trips() {
    let env = sandbox(Duration::from_millis(300)).await;
    let mut spec = time_sliced("mig1g");
    spec.machine_type = "p4d.24xlarge".into();
    spec.labels = BTreeMap::from([("nvidia.com/mig.config".into(), "all-1g.5gb".into())]);
    spec.disk_size_gb = Some(200);
    spec.scaling = Scaling::Fixed { nodes: 2 };
    let pool = env
        .eks
        .create(&spec, &ctx(Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(pool.spec, spec);
    let ng = env.nodegroup("mig1g").await;
    assert_eq!(ng["diskSize"], 200);
    assert_eq!(ng["instanceTypes"], json!(["p4d.24xlarge"]));
    assert_eq!(ng["labels"], json!({"nvidia.com/mig.config": "all-1g.5gb"}));
    assert_eq!(env.pool("mig1g").await.unwrap().unwrap().spec, spec);
    env.eks
        .delete(&loc(), "mig1g", &ctx(Duration::from_secs(30)))
        .await
        .unwrap();
    assert!(env.pool("mig1g").await.unwrap().is_none());
}

#[tokio::test]
async fn spot_autoscaled_group_starts_at_min() {
    let env = sandbox(Duration::from_millis(300)).await;
    let mut spec = time_sliced("spot");
    spec.spot = true;
    spec.scaling = Scaling::Auto { min: 0, max: 4 };
    let pool = env
        .eks
        .create(&spec, &ctx(Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(pool.spec, spec);
    let ng = env.nodegroup("spot").await;
    assert_eq!(ng["capacityType"], "SPOT");
    assert_eq!(
        ng["scalingConfig"],
        json!({"minSize": 0, "maxSize": 4, "desiredSize": 0})
    );
    assert_eq!(env.pool("spot").await.unwrap().unwrap().spec, spec);
}

#[tokio::test]
async fn specs_eks_cannot_hold_exactly_read_back_canonical() {
    let env = sandbox(Duration::ZERO).await;
    let mut spec = time_sliced("canon");
    spec.disk_size_gb = Some(20);
    spec.scaling = Scaling::Auto { min: 2, max: 2 };
    spec.gpu_count = 1;
    spec.eks_mut().subnet_ids.reverse();
    spec.taints.push(PoolTaint {
        key: "a-first".into(),
        value: "x".into(),
        effect: "NoExecute".into(),
    });
    let pool = env
        .eks
        .create(&spec, &ctx(Duration::from_secs(10)))
        .await
        .unwrap();
    assert_ne!(pool.spec, spec);
    assert_eq!(pool.spec, canonical_spec(&spec));
}

#[tokio::test]
async fn validation_errors_surface_with_the_aws_code() {
    let env = sandbox(Duration::ZERO).await;
    let mut bad = time_sliced("badscale");
    bad.scaling = Scaling::Auto { min: 5, max: 2 };
    let e = env
        .eks
        .create(&bad, &ctx(Duration::from_secs(10)))
        .await
        .unwrap_err();
    assert_eq!(api_code(&e), (400, "InvalidParameterException"));
    assert!(e.to_string().contains("Minimum capacity 5"), "{e}");

    let mut bad = time_sliced("badtaint");
    bad.taints[0].effect = "Sometimes".into();
    let e = env
        .eks
        .create(&bad, &ctx(Duration::from_secs(10)))
        .await
        .unwrap_err();
    assert_eq!(api_code(&e), (400, "InvalidParameterException"));
    assert!(e.to_string().contains("Sometimes"), "{e}");

    let mut bad = time_sliced("badami");
    bad.machine_type = "m5.large".into();
    let e = env
        .eks
        .create(&bad, &ctx(Duration::from_secs(10)))
        .await
        .unwrap_err();
    assert_eq!(api_code(&e), (400, "InvalidParameterException"));

    // A cluster that does not exist.
    let mut bad = time_sliced("nocluster");
    bad.location = Location::Eks {
        region: REGION.into(),
        cluster: "nope".into(),
    };
    let e = env
        .eks
        .create(&bad, &ctx(Duration::from_secs(10)))
        .await
        .unwrap_err();
    assert_eq!(api_code(&e), (404, "ResourceNotFoundException"));

    // An update the API refuses (bad taint effect) is an Api error too, and changes nothing.
    let good = time_sliced("good");
    let pool = env
        .eks
        .create(&good, &ctx(Duration::from_secs(10)))
        .await
        .unwrap();
    let mut next = good.clone();
    next.taints[0].effect = "Sometimes".into();
    let e = env
        .eks
        .update(&pool, &next, &ctx(Duration::from_secs(10)))
        .await
        .unwrap_err();
    assert_eq!(api_code(&e), (400, "InvalidParameterException"));
    assert_eq!(env.pool("good").await.unwrap().unwrap().spec, good);
    assert_eq!(
        env.nodegroups().await.len(),
        1,
        "no failed create left a group"
    );
}

#[tokio::test]
async fn throttling_bursts_are_retried_honouring_retry_after() {
    let env = sandbox(Duration::from_millis(300)).await;
    env.fault(json!({"match": {"method": "POST", "path_contains": "/node-groups"}, "count": 3, "kind": "429", "retry_after": 0}))
        .await;
    let pool = env
        .eks
        .create(&time_sliced("throttled"), &ctx(Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(pool.status, "ACTIVE");
    assert_eq!(env.armed_faults().await, 0, "all three 429s were met");

    env.fault(json!({"match": {"method": "GET", "path_contains": "/node-groups/throttled"}, "count": 1, "kind": "429", "retry_after": 1}))
        .await;
    let t = Instant::now();
    env.pool("throttled").await.unwrap().unwrap();
    assert!(
        t.elapsed() >= Duration::from_secs(1),
        "Retry-After: 1 honoured"
    );

    // A burst longer than the retry budget ends as the throttling error, not a hang.
    env.fault(json!({"match": {"method": "GET", "path_contains": "/node-groups/throttled"}, "count": 20, "kind": "429", "retry_after": 0}))
        .await;
    let e = env.pool("throttled").await.unwrap_err();
    assert_eq!(api_code(&e), (429, "ThrottlingException"));
}

#[tokio::test]
async fn service_unavailable_and_500_are_retried() {
    let env = sandbox(Duration::from_millis(300)).await;
    env.fault(json!({"match": {"method": "GET", "path_contains": "/node-groups/"}, "count": 3, "kind": "503"}))
        .await;
    env.fault(json!({"match": {"method": "DELETE"}, "count": 2, "kind": "500"}))
        .await;
    let spec = time_sliced("unavail");
    let pool = env
        .eks
        .create(&spec, &ctx(Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(pool.spec, spec);
    env.eks
        .delete(&loc(), "unavail", &ctx(Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(env.armed_faults().await, 0);
    assert!(env.nodegroups().await.is_empty());
}

#[tokio::test]
async fn a_dropped_connection_is_retried_and_the_create_succeeds_once() {
    let env = sandbox(Duration::from_millis(300)).await;
    env.fault(json!({"match": {"method": "POST", "path_contains": "/node-groups"}, "count": 1, "kind": "drop"}))
        .await;
    env.fault(json!({"match": {"method": "GET", "path_contains": "/node-groups/dropped"}, "count": 1, "kind": "drop"}))
        .await;
    let spec = time_sliced("dropped");
    let pool = env
        .eks
        .create(&spec, &ctx(Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(pool.spec, spec);
    assert_eq!(env.armed_faults().await, 0);
    assert_eq!(env.nodegroups().await.len(), 1);
}

#[tokio::test]
async fn failed_operations_end_as_operation_failed() {
    let env = sandbox(Duration::from_millis(300)).await;
    env.fault(json!({"match": {"method": "POST", "path_contains": "/node-groups"}, "count": 1, "kind": "fail_operation"}))
        .await;
    let e = env
        .eks
        .create(&time_sliced("doomed"), &ctx(Duration::from_secs(30)))
        .await
        .unwrap_err();
    match &e {
        CloudError::OperationFailed { code, message } => {
            assert_eq!(code, "AsgInstanceLaunchFailures");
            assert!(message.contains("CREATE_FAILED"), "{message}");
            assert!(
                message.contains("InsufficientInstanceCapacity"),
                "{message}"
            );
        }
        other => panic!("expected OperationFailed, got {other:?}"),
    }
    // The failed group exists (so the resource can keep it in state, tainted) and can be deleted.
    let failed = env.pool("doomed").await.unwrap().unwrap();
    assert_eq!(failed.status, "CREATE_FAILED");
    env.eks
        .delete(&loc(), "doomed", &ctx(Duration::from_secs(30)))
        .await
        .unwrap();

    // A failed update leaves the old configuration.
    let spec = time_sliced("upfail");
    let pool = env
        .eks
        .create(&spec, &ctx(Duration::from_secs(30)))
        .await
        .unwrap();
    env.fault(
        json!({"match": {"path_contains": "/update-config"}, "count": 1, "kind": "fail_operation"}),
    )
    .await;
    let mut next = spec.clone();
    next.scaling = Scaling::Fixed { nodes: 3 };
    let e = env
        .eks
        .update(&pool, &next, &ctx(Duration::from_secs(30)))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, CloudError::OperationFailed { code, .. } if code == "AsgInstanceLaunchFailures"),
        "{e:?}"
    );
    assert_eq!(env.pool("upfail").await.unwrap().unwrap().spec, spec);

    // A group that failed to create cannot be updated in place: said at once, no waiting.
    env.fault(json!({"match": {"method": "POST", "path_contains": "/node-groups"}, "count": 1, "kind": "fail_operation"}))
        .await;
    let broken = time_sliced("broken");
    env.eks
        .create(&broken, &ctx(Duration::from_secs(30)))
        .await
        .unwrap_err();
    let failed = env.pool("broken").await.unwrap().unwrap();
    let mut next = broken.clone();
    next.labels.insert("x".into(), "y".into());
    let e = env
        .eks
        .update(&failed, &next, &ctx(Duration::from_secs(30)))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, CloudError::OperationFailed { message, .. } if message.contains("CREATE_FAILED")),
        "{e:?}"
    );

    // A failed delete.
    env.fault(json!({"match": {"method": "DELETE"}, "count": 1, "kind": "fail_operation"}))
        .await;
    let e = env
        .eks
        .delete(&loc(), "upfail", &ctx(Duration::from_secs(30)))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, CloudError::OperationFailed { message, .. } if message.contains("DELETE_FAILED")),
        "{e:?}"
    );
}

#[tokio::test]
async fn the_deadline_ends_waits_and_slow_calls() {
    // An operation slower than the deadline.
    let env = sandbox(Duration::from_secs(20)).await;
    let t = Instant::now();
    let e = env
        .eks
        .create(&time_sliced("slowop"), &ctx(Duration::from_millis(800)))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, CloudError::Timeout { waiting_for, .. } if waiting_for.starts_with("node group sandbox-eks:slowop to become ACTIVE")),
        "{e:?}"
    );
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    // The group exists and reads back (status CREATING) so it can be saved as tainted.
    let p = env.pool("slowop").await.unwrap().unwrap();
    assert_eq!(p.status, "CREATING");

    // A request slower than the deadline.
    env.fault(json!({"match": {"method": "POST"}, "count": 1, "kind": "slow", "delay_ms": 5000}))
        .await;
    let t = Instant::now();
    let e = env
        .eks
        .create(&time_sliced("slowcall"), &ctx(Duration::from_millis(500)))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, CloudError::Timeout { waiting_for, .. } if waiting_for == "CreateNodegroup of sandbox-eks:slowcall"),
        "{e:?}"
    );
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
}

#[tokio::test]
async fn stop_ends_a_create_promptly() {
    let env = sandbox(Duration::from_secs(20)).await;
    let stop = StopSignal::default();
    let op = OpCtx::new(Duration::from_secs(60), stop.clone());
    let eks = std::sync::Arc::new(env.eks);
    let worker = {
        let eks = eks.clone();
        tokio::spawn(async move { eks.create(&time_sliced("stopped"), &op).await })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    let t = Instant::now();
    stop.stop();
    let r = tokio::time::timeout(Duration::from_secs(2), worker)
        .await
        .expect("stopped within 2s")
        .unwrap();
    assert!(matches!(r, Err(CloudError::Stopped)), "{r:?}");
    assert!(t.elapsed() < Duration::from_secs(1));
    // A stopped context refuses further calls at once.
    let op = OpCtx::new(Duration::from_secs(60), stop);
    let r = eks.delete(&loc(), "stopped", &op).await;
    assert!(matches!(r, Err(CloudError::Stopped)), "{r:?}");
}

#[tokio::test]
async fn create_is_idempotent_and_adopts_only_a_matching_group() {
    let env = sandbox(Duration::from_millis(300)).await;
    let spec = time_sliced("idem");
    let first = env
        .eks
        .create(&spec, &ctx(Duration::from_secs(30)))
        .await
        .unwrap();
    // Same spec, same clientRequestToken: EKS answers with the existing group.
    let again = env
        .eks
        .create(&spec, &ctx(Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(first, again);
    assert_eq!(env.nodegroups().await.len(), 1);

    // A group made by another request (another token) that matches the spec is adopted.
    let mut raw = env
        .raw()
        .create_nodegroup()
        .cluster_name(CLUSTER)
        .nodegroup_name("adopt")
        .node_role(ROLE)
        .subnets("subnet-0bbb")
        .subnets("subnet-0aaa")
        .instance_types("g4dn.xlarge")
        .ami_type(aws_sdk_eks::types::AmiTypes::Al2023X8664Nvidia)
        .scaling_config(
            aws_sdk_eks::types::NodegroupScalingConfig::builder()
                .min_size(1)
                .max_size(1)
                .desired_size(1)
                .build(),
        )
        .taints(
            aws_sdk_eks::types::Taint::builder()
                .key("nvidia.com/gpu")
                .value("Present")
                .effect(aws_sdk_eks::types::TaintEffect::NoSchedule)
                .build(),
        )
        .client_request_token("someone-else");
    for (k, v) in &spec.labels {
        raw = raw.labels(k, v);
    }
    raw.send().await.unwrap();
    let mut adopt = spec.clone();
    adopt.name = "adopt".into();
    let pool = env
        .eks
        .create(&adopt, &ctx(Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(pool.spec, adopt);
    assert_eq!(pool.status, "ACTIVE");

    // One that differs is a conflict that tells the user to import it.
    let mut other = spec.clone();
    other.labels.insert("team".into(), "infra".into());
    let e = env
        .eks
        .create(&other, &ctx(Duration::from_secs(30)))
        .await
        .unwrap_err();
    assert_eq!(api_code(&e), (409, "ResourceInUseException"));
    assert!(
        e.to_string().contains("terraform import") && e.to_string().contains("sandbox-eks:idem"),
        "{e}"
    );
    assert_eq!(env.nodegroups().await.len(), 2);
}

#[tokio::test]
async fn a_deleting_group_reads_as_gone_and_delete_waits_for_it() {
    let env = sandbox(Duration::from_millis(500)).await;
    let spec = time_sliced("going");
    env.eks
        .create(&spec, &ctx(Duration::from_secs(30)))
        .await
        .unwrap();
    env.raw()
        .delete_nodegroup()
        .cluster_name(CLUSTER)
        .nodegroup_name("going")
        .send()
        .await
        .unwrap();
    assert!(env.pool("going").await.unwrap().is_none());
    assert_eq!(
        env.nodegroups().await.len(),
        1,
        "still DELETING in the sandbox"
    );
    // Delete meets ResourceInUseException (already deleting) and waits for the end.
    env.eks
        .delete(&loc(), "going", &ctx(Duration::from_secs(30)))
        .await
        .unwrap();
    assert!(env.nodegroups().await.is_empty());

    // A create of the same name while the old group is still deleting waits and then creates.
    env.eks
        .create(&spec, &ctx(Duration::from_secs(30)))
        .await
        .unwrap();
    env.raw()
        .delete_nodegroup()
        .cluster_name(CLUSTER)
        .nodegroup_name("going")
        .send()
        .await
        .unwrap();
    let mut next = spec.clone();
    next.labels.insert("generation".into(), "2".into());
    let pool = env
        .eks
        .create(&next, &ctx(Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(pool.spec, next);
}

#[tokio::test]
async fn out_of_band_changes_show_as_drift_and_update_repairs_them() {
    let env = sandbox(Duration::from_millis(300)).await;
    let spec = time_sliced("drift");
    let pool = env
        .eks
        .create(&spec, &ctx(Duration::from_secs(30)))
        .await
        .unwrap();
    let upd = env
        .raw()
        .update_nodegroup_config()
        .cluster_name(CLUSTER)
        .nodegroup_name("drift")
        .labels(
            aws_sdk_eks::types::UpdateLabelsPayload::builder()
                .add_or_update_labels("rogue", "1")
                .build(),
        )
        .scaling_config(
            aws_sdk_eks::types::NodegroupScalingConfig::builder()
                .min_size(1)
                .max_size(5)
                .desired_size(1)
                .build(),
        )
        .send()
        .await
        .unwrap();
    assert!(upd.update.is_some());
    tokio::time::sleep(Duration::from_millis(400)).await;
    let drifted = env.pool("drift").await.unwrap().unwrap();
    assert_ne!(drifted.spec, spec);
    assert_eq!(drifted.spec.scaling, Scaling::Auto { min: 1, max: 5 });
    assert_eq!(drifted.spec.labels["rogue"], "1");
    let repaired = env
        .eks
        .update(&pool, &spec, &ctx(Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(repaired.spec, spec);
}

/// An autoscaled group's node template lives in tags on its Auto Scaling group: written on
/// create, read back by get and list, changed and pruned by update (tags outside the template's
/// prefix, EKS's own among them, untouched), and a tag removed behind the provider's back shows.
#[tokio::test]
async fn the_node_template_lives_on_the_groups_auto_scaling_group() {
    let env = sandbox(Duration::ZERO).await;
    let prefix = "k8s.io/cluster-autoscaler/node-template/";
    let mut spec = time_sliced("auto");
    spec.scaling = Scaling::Auto { min: 0, max: 3 };
    spec.node_template = BTreeMap::from([
        (
            format!("{prefix}resources/nvidia.com/gpu"),
            "10".to_string(),
        ),
        (format!("{prefix}label/team"), "ml".to_string()),
        (
            format!("{prefix}taint/nvidia.com/gpu"),
            "Present:NoSchedule".to_string(),
        ),
    ]);
    let pool = env
        .eks
        .create(&spec, &ctx(Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(pool.spec.node_template, spec.node_template);
    assert_eq!(env.pool("auto").await.unwrap().unwrap().spec, pool.spec);
    let listed = env.eks.list(&loc(), &read_ctx()).await.unwrap();
    let listed = listed.iter().find(|p| p.spec.name == "auto").unwrap();
    assert_eq!(listed.spec.node_template, spec.node_template);

    // The group as the Auto Scaling API shows it: EKS's tags beside the template.
    let asg = env.nodegroup("auto").await["resources"]["autoScalingGroups"][0]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let asgs = asg_client(&env.url)
        .describe_auto_scaling_groups()
        .auto_scaling_group_names(&asg)
        .send()
        .await
        .unwrap();
    let tags: BTreeMap<String, String> = asgs.auto_scaling_groups()[0]
        .tags()
        .iter()
        .map(|t| (t.key().unwrap().to_string(), t.value().unwrap().to_string()))
        .collect();
    assert_eq!(tags["eks:nodegroup-name"], "auto");
    assert_eq!(tags[&format!("{prefix}resources/nvidia.com/gpu")], "10");

    // Out of band: the resources tag goes. A read shows it; update puts it back and drops a
    // template tag the spec no longer names.
    delete_asg_tag(&env.url, &asg, &format!("{prefix}resources/nvidia.com/gpu")).await;
    let drifted = env.pool("auto").await.unwrap().unwrap();
    assert!(
        !drifted
            .spec
            .node_template
            .contains_key(&format!("{prefix}resources/nvidia.com/gpu"))
    );
    let mut want = spec.clone();
    want.node_template.remove(&format!("{prefix}label/team"));
    let updated = env
        .eks
        .update(&drifted, &want, &ctx(Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(updated.spec.node_template, want.node_template);
    assert_eq!(
        env.pool("auto").await.unwrap().unwrap().spec.node_template,
        want.node_template
    );
    let after = asg_client(&env.url)
        .describe_auto_scaling_groups()
        .auto_scaling_group_names(&asg)
        .send()
        .await
        .unwrap();
    let keys: Vec<&str> = after.auto_scaling_groups()[0]
        .tags()
        .iter()
        .filter_map(|t| t.key())
        .collect();
    assert!(keys.contains(&"eks:cluster-name"), "{keys:?}");
    assert!(
        !keys.contains(&format!("{prefix}label/team").as_str()),
        "{keys:?}"
    );

    // A list finds the templates through the `eks:cluster-name` tag EKS puts on the group; a
    // group stripped of it is read by name, and lists the same.
    delete_asg_tag(&env.url, &asg, "eks:cluster-name").await;
    let listed = env.eks.list(&loc(), &read_ctx()).await.unwrap();
    let listed = listed.iter().find(|p| p.spec.name == "auto").unwrap();
    assert_eq!(listed.spec.node_template, want.node_template);
}

/// Removes a tag from an Auto Scaling group, as a user would behind the provider's back.
async fn delete_asg_tag(url: &str, asg: &str, key: &str) {
    asg_client(url)
        .delete_tags()
        .tags(
            aws_sdk_autoscaling::types::Tag::builder()
                .resource_id(asg)
                .resource_type("auto-scaling-group")
                .key(key)
                .build(),
        )
        .send()
        .await
        .unwrap();
}

/// The Auto Scaling API of the sandbox, as a user's SDK would call it.
fn asg_client(url: &str) -> aws_sdk_autoscaling::Client {
    aws_sdk_autoscaling::Client::from_conf(
        aws_sdk_autoscaling::Config::builder()
            .behavior_version(aws_sdk_autoscaling::config::BehaviorVersion::latest())
            .region(aws_sdk_autoscaling::config::Region::new(REGION))
            .credentials_provider(aws_sdk_autoscaling::config::Credentials::new(
                "AKIDTEST", "test", None, None, "test",
            ))
            .endpoint_url(url)
            .build(),
    )
}

// ---------------------------------------------------------------- moto

struct Moto(Child);

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn start_moto() -> (Moto, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("python3")
        .args([
            "-m",
            "moto.server",
            "-H",
            "127.0.0.1",
            "-p",
            &port.to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("moto starts");
    let moto = Moto(child);
    let url = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let t = Instant::now();
    loop {
        if let Ok(r) = http.get(format!("{url}/moto-api/")).send().await
            && r.status().is_success()
        {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "moto did not come up"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    (moto, url)
}

#[tokio::test]
async fn moto_happy_path_round_trips() {
    if tools::require(Tool::Moto).is_none() {
        return;
    }
    let (_moto, url) = start_moto().await;
    raw_client(&url)
        .create_cluster()
        .name("moto-eks")
        .role_arn("arn:aws:iam::123456789012:role/eks-cluster")
        .resources_vpc_config(
            aws_sdk_eks::types::VpcConfigRequest::builder()
                .subnet_ids("subnet-0aaa")
                .build(),
        )
        .send()
        .await
        .expect("moto creates the cluster");

    let eks = EksClient::new(EksConfig {
        endpoint: Some(url.clone()),
        region: Some(REGION.into()),
        access_key: Some("testing".into()),
        secret_key: Some("testing".into()),
        ..EksConfig::default()
    })
    .await
    .unwrap()
    .with_poll_interval(Duration::from_millis(50), Duration::from_millis(200));
    let location = Location::Eks {
        region: REGION.into(),
        cluster: "moto-eks".into(),
    };

    for (name, disk, spot) in [("moto-ts", None, false), ("moto-spot", Some(100), true)] {
        let mut spec = time_sliced(name);
        spec.location = location.clone();
        spec.disk_size_gb = disk;
        spec.spot = spot;
        if spot {
            spec.scaling = Scaling::Auto { min: 0, max: 3 };
        }
        let pool = eks
            .create(&spec, &ctx(Duration::from_secs(30)))
            .await
            .unwrap();
        assert_eq!(pool.id, format!("moto-eks:{name}"));
        assert_eq!(pool.status, "ACTIVE");
        assert_eq!(pool.spec, spec, "moto's defaults must not show as drift");
        let got = eks
            .get(&location, name, &read_ctx())
            .await
            .unwrap()
            .expect("exists");
        assert_eq!(got, pool);
        // Idempotent against moto too: moto ignores clientRequestToken and answers
        // ResourceInUseException, so this is adoption by spec.
        let again = eks
            .create(&spec, &ctx(Duration::from_secs(30)))
            .await
            .unwrap();
        assert_eq!(again, pool);
    }

    // moto's own defaults are there on the wire and invisible in the spec.
    let raw = raw_client(&url)
        .describe_nodegroup()
        .cluster_name("moto-eks")
        .nodegroup_name("moto-ts")
        .send()
        .await
        .unwrap()
        .nodegroup
        .unwrap();
    assert_eq!(raw.disk_size(), Some(20));
    assert_eq!(
        raw.remote_access().and_then(|r| r.ec2_ssh_key()),
        Some("eksKeypair")
    );
    assert!(raw.release_version().is_some());

    // In place: moto answers UpdateNodegroupConfig with a finished update (it has no
    // DescribeUpdate), which the client takes as final.
    let current = eks
        .get(&location, "moto-ts", &read_ctx())
        .await
        .unwrap()
        .unwrap();
    let mut next = current.spec.clone();
    next.scaling = Scaling::Auto { min: 1, max: 4 };
    next.labels.insert("tier".into(), "batch".into());
    next.labels.remove("team");
    next.taints = vec![PoolTaint {
        key: "dedicated".into(),
        value: "ml".into(),
        effect: "NoExecute".into(),
    }];
    let updated = eks
        .update(&current, &next, &ctx(Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(updated.spec, next);
    assert_eq!(
        eks.get(&location, "moto-ts", &read_ctx())
            .await
            .unwrap()
            .unwrap()
            .spec,
        next
    );
    for name in ["moto-ts", "moto-spot"] {
        eks.delete(&location, name, &ctx(Duration::from_secs(30)))
            .await
            .unwrap();
        assert!(
            eks.get(&location, name, &read_ctx())
                .await
                .unwrap()
                .is_none()
        );
    }
}

// ---------------------------------------------------------------- regions, config, stub server

#[tokio::test]
async fn each_region_has_its_own_clusters() {
    let mut clusters = ::sandbox::ClusterSpec::defaults();
    clusters.push(::sandbox::ClusterSpec::Eks {
        region: "eu-west-1".into(),
        name: CLUSTER.into(),
        nodegroup_quota: None,
    });
    let sb = Sandbox::open(Config {
        clusters,
        ..Config::instant()
    })
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let router = sb.router();
    tokio::spawn(async move { axum::serve(listener, router).await });
    let eks = EksClient::new(EksConfig {
        sandbox: Some(url.clone()),
        region: Some(REGION.into()),
        ..EksConfig::default()
    })
    .await
    .unwrap();
    let eu = Location::Eks {
        region: "eu-west-1".into(),
        cluster: CLUSTER.into(),
    };
    let mut spec = time_sliced("eu");
    spec.location = eu.clone();
    let pool = eks
        .create(&spec, &ctx(Duration::from_secs(10)))
        .await
        .unwrap();
    assert_eq!(pool.spec.location, eu);
    assert!(eks.get(&eu, "eu", &read_ctx()).await.unwrap().is_some());
    assert!(eks.get(&loc(), "eu", &read_ctx()).await.unwrap().is_none());
    // An empty region in the location falls back to the provider's region.
    let default = Location::Eks {
        region: String::new(),
        cluster: CLUSTER.into(),
    };
    assert!(
        eks.get(&default, "eu", &read_ctx())
            .await
            .unwrap()
            .is_none()
    );

    // Without any region there is nothing to sign for: a clear error, no request.
    let no_region = EksClient::new(EksConfig {
        sandbox: Some(url),
        ..EksConfig::default()
    })
    .await
    .unwrap();
    let e = no_region
        .get(&default, "eu", &read_ctx())
        .await
        .unwrap_err();
    assert_eq!(api_code(&e), (0, "MissingRegion"));
}

#[tokio::test]
async fn half_given_static_keys_are_refused() {
    let e = EksClient::new(EksConfig {
        access_key: Some("AKIAEXAMPLE".into()),
        region: Some(REGION.into()),
        ..EksConfig::default()
    })
    .await
    .err()
    .expect("refused");
    assert!(
        matches!(&e, CloudError::Auth(m) if m.contains("secret_key")),
        "{e:?}"
    );
    assert!(!e.to_string().contains("AKIAEXAMPLE"));
}

/// Requests a stub saw: method, path and body.
type Seen = std::sync::Arc<std::sync::Mutex<Vec<(String, String, String)>>>;

/// A stand-in for EKS that answers every request with canned responses in order (the last one
/// repeats) and records the requests: for answers the sandbox does not give.
/// DescribeAutoScalingGroups finding nothing, as Auto Scaling's Query protocol answers it.
const NO_AUTO_SCALING_GROUPS: &str = "<DescribeAutoScalingGroupsResponse \
    xmlns=\"http://autoscaling.amazonaws.com/doc/2011-01-01/\"><DescribeAutoScalingGroupsResult>\
    <AutoScalingGroups/></DescribeAutoScalingGroupsResult><ResponseMetadata><RequestId>stub\
    </RequestId></ResponseMetadata></DescribeAutoScalingGroupsResponse>";

async fn stub(responses: Vec<(u16, Option<&'static str>, String)>) -> (String, Seen) {
    use axum::http::{HeaderValue, StatusCode};
    use axum::response::{IntoResponse, Response};
    let seen: Seen = Default::default();
    let log = seen.clone();
    let app = axum::Router::new().fallback(
        move |method: axum::http::Method, uri: axum::http::Uri, body: axum::body::Bytes| {
            // Auto Scaling's Query endpoint (a get's tag-filtered read of the group's Auto
            // Scaling group) is not what these scripts are about: it finds no group.
            let auto_scaling = method == axum::http::Method::POST && uri.path() == "/";
            let n = if auto_scaling {
                usize::MAX
            } else {
                let mut log = log.lock().unwrap();
                log.push((
                    method.to_string(),
                    uri.path().to_string(),
                    String::from_utf8_lossy(&body).into_owned(),
                ));
                log.len() - 1
            };
            let (status, kind, body) = if auto_scaling {
                (200, None, NO_AUTO_SCALING_GROUPS.to_string())
            } else {
                responses[n.min(responses.len() - 1)].clone()
            };
            async move {
                let mut r: Response = (StatusCode::from_u16(status).unwrap(), body).into_response();
                r.headers_mut()
                    .insert("content-type", HeaderValue::from_static("application/json"));
                if let Some(k) = kind {
                    r.headers_mut()
                        .insert("x-amzn-errortype", HeaderValue::from_static(k));
                }
                r
            }
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, seen)
}

async fn stub_client(url: &str) -> EksClient {
    EksClient::new(EksConfig {
        endpoint: Some(url.into()),
        region: Some(REGION.into()),
        access_key: Some("AKIDSTUB".into()),
        secret_key: Some("stub".into()),
        ..EksConfig::default()
    })
    .await
    .unwrap()
    .with_retry_interval(Duration::from_millis(10), Duration::from_millis(50))
}

fn nodegroup_doc() -> String {
    nodegroup_doc_in("ACTIVE")
}

fn nodegroup_doc_in(status: &str) -> String {
    json!({"nodegroup": {
        "nodegroupName": "stubbed", "clusterName": CLUSTER, "status": status,
        "capacityType": "ON_DEMAND", "instanceTypes": ["g4dn.xlarge"],
        "scalingConfig": {"minSize": 1, "maxSize": 1, "desiredSize": 1},
        "subnets": ["subnet-0bbb", "subnet-0aaa"], "amiType": "AL2023_x86_64_NVIDIA",
        "nodeRole": ROLE, "diskSize": 20, "releaseVersion": "1.33.5-20251120",
        "labels": {"nvidia.com/device-plugin.config": "time-sliced-10", "team": "ml",
                   "eks.amazonaws.com/nodegroup": "stubbed"},
        "taints": [{"key": "nvidia.com/gpu", "value": "Present", "effect": "NO_SCHEDULE"}],
        "remoteAccess": {"ec2SshKey": "k"}, "health": {"issues": []}
    }})
    .to_string()
}

#[tokio::test]
async fn throttling_as_aws_usually_sends_it_is_retried() {
    // Real AWS mostly throttles with HTTP 400 and the code in the error type.
    let throttled = (
        400,
        Some("ThrottlingException"),
        r#"{"message":"Rate exceeded"}"#.to_string(),
    );
    let (url, count) = stub(vec![
        throttled.clone(),
        throttled,
        (200, None, nodegroup_doc()),
    ])
    .await;
    let eks = stub_client(&url).await;
    let pool = eks
        .get(&loc(), "stubbed", &read_ctx())
        .await
        .unwrap()
        .expect("found");
    assert_eq!(count.lock().unwrap().len(), 3);
    // EKS's own additions (eks.amazonaws.com/* labels, remoteAccess, releaseVersion, diskSize 20)
    // do not reach the spec.
    let mut want = time_sliced("stubbed");
    want.eks_mut().subnet_ids.sort();
    assert_eq!(pool.spec, want);
}

#[tokio::test]
async fn client_errors_are_not_retried_and_garbage_is_a_bad_response() {
    let (url, count) = stub(vec![(
        400,
        Some("InvalidParameterException"),
        r#"{"message":"nope"}"#.to_string(),
    )])
    .await;
    let e = stub_client(&url)
        .await
        .get(&loc(), "x", &read_ctx())
        .await
        .unwrap_err();
    assert_eq!(api_code(&e), (400, "InvalidParameterException"));
    assert!(e.to_string().contains("nope"));
    assert_eq!(count.lock().unwrap().len(), 1);

    let (url, _) = stub(vec![(
        403,
        Some("UnrecognizedClientException"),
        r#"{"message":"The security token included in the request is invalid."}"#.to_string(),
    )])
    .await;
    let e = stub_client(&url)
        .await
        .get(&loc(), "x", &read_ctx())
        .await
        .unwrap_err();
    assert!(
        matches!(&e, CloudError::Auth(m) if m.contains("UnrecognizedClientException")),
        "{e:?}"
    );

    let (url, count) = stub(vec![(200, None, "{not json".to_string())]).await;
    let e = stub_client(&url)
        .await
        .get(&loc(), "x", &read_ctx())
        .await
        .unwrap_err();
    assert!(matches!(e, CloudError::BadResponse(_)), "{e:?}");
    assert_eq!(
        count.lock().unwrap().len(),
        1,
        "an unreadable answer will not improve"
    );

    // 5xx is retried, but only MAX_ATTEMPTS times.
    let (url, count) = stub(vec![(
        500,
        Some("ServerException"),
        r#"{"message":"boom"}"#.to_string(),
    )])
    .await;
    let e = stub_client(&url)
        .await
        .get(&loc(), "x", &read_ctx())
        .await
        .unwrap_err();
    assert_eq!(api_code(&e), (500, "ServerException"));
    assert_eq!(
        count.lock().unwrap().len() as u32,
        fracgpu::cloud::eks::MAX_ATTEMPTS,
        "bounded"
    );
}

#[tokio::test]
async fn a_replayed_create_of_a_deleted_group_is_sent_again_with_a_fresh_token() {
    // EKS answers the create (a replay of an earlier request with the same token), but the group
    // it names was deleted since: the client creates again under a new token.
    let not_found = (
        404,
        Some("ResourceNotFoundException"),
        r#"{"message":"No node group found for name: stubbed."}"#.to_string(),
    );
    let (url, seen) = stub(vec![
        (200, None, nodegroup_doc_in("CREATING")),
        not_found,
        (200, None, nodegroup_doc_in("CREATING")),
        (200, None, nodegroup_doc()),
    ])
    .await;
    let eks = stub_client(&url)
        .await
        .with_poll_interval(Duration::from_millis(10), Duration::from_millis(50));
    let pool = eks
        .create(&time_sliced("stubbed"), &ctx(Duration::from_secs(10)))
        .await
        .unwrap();
    assert_eq!(pool.status, "ACTIVE");
    let seen = seen.lock().unwrap().clone();
    let methods: Vec<&str> = seen.iter().map(|(m, _, _)| m.as_str()).collect();
    assert_eq!(methods, ["POST", "GET", "POST", "GET"]);
    let token = |body: &str| {
        serde_json::from_str::<Value>(body).unwrap()["clientRequestToken"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (first, second) = (token(&seen[0].2), token(&seen[2].2));
    assert_eq!(
        first,
        fracgpu::cloud::eks::request_token(&time_sliced("stubbed"))
    );
    assert!(second.starts_with(&first) && second != first, "{second}");
    // The request body carries the spec as EKS names it.
    let body: Value = serde_json::from_str(&seen[0].2).unwrap();
    assert_eq!(seen[0].1, "/clusters/sandbox-eks/node-groups");
    assert_eq!(body["nodegroupName"], "stubbed");
    assert_eq!(body["amiType"], "AL2023_x86_64_NVIDIA");
    assert_eq!(body["capacityType"], "ON_DEMAND");
    assert_eq!(
        body["scalingConfig"],
        json!({"minSize": 1, "maxSize": 1, "desiredSize": 1})
    );
    assert!(body.get("diskSize").is_none(), "None leaves EKS's default");
    assert_eq!(
        body["taints"],
        json!([{"key": "nvidia.com/gpu", "value": "Present", "effect": "NO_SCHEDULE"}])
    );
}
