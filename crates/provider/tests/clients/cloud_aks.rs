//! The AKS client over real HTTP against the in-process sandbox: pool lifecycle with and without operation
//! time, MIG and Spot pools, ARM validation errors, injected faults, deadlines, stop, idempotent create and
//! authentication; plus the configuration rules that need no network.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ::sandbox::{Config, DEFAULT_SUBSCRIPTION, Sandbox};
use fracgpu::cloud::aks::{AksClient, AksConfig, AzureSettings};
use fracgpu::cloud::{
    AksPoolFields, CloudError, Location, NodePools, OpCtx, Pool, PoolSpec, PoolTaint, Scaling,
    StopSignal, TargetFields,
};
use serde_json::{Value, json};

struct Env {
    sb: Sandbox,
    base: String,
    client: AksClient,
}

impl Env {
    /// The pool as a refresh reads it.
    async fn pool(&self, name: &str) -> Result<Option<Pool>, CloudError> {
        self.client.get(&loc(), name, &read_ctx()).await
    }
}

async fn start(op_time: Duration) -> Env {
    let sb = Sandbox::open(Config {
        op_time,
        ..Config::instant()
    })
    .expect("sandbox");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let app = sb.router();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let client = AksClient::new(AksConfig {
        sandbox: Some(base.clone()),
        ..Default::default()
    })
    .expect("client");
    Env { sb, base, client }
}

fn loc() -> Location {
    Location::Aks {
        subscription_id: DEFAULT_SUBSCRIPTION.into(),
        resource_group: "sandbox-rg".into(),
        cluster: "sandbox-aks".into(),
    }
}

fn gpu_taint() -> PoolTaint {
    PoolTaint {
        key: "nvidia.com/gpu".into(),
        value: "Present".into(),
        effect: "NoSchedule".into(),
    }
}

/// A time-sliced T4 pool as the resource would resolve it.
fn ts_spec(name: &str) -> PoolSpec {
    PoolSpec {
        location: loc(),
        name: name.into(),
        machine_type: "Standard_NC4as_T4_v3".into(),
        scaling: Scaling::Fixed { nodes: 2 },
        spot: false,
        disk_size_gb: None,
        labels: BTreeMap::from([
            ("team".to_string(), "ml".to_string()),
            (
                "nvidia.com/device-plugin.config".to_string(),
                "time-sliced-10".to_string(),
            ),
        ]),
        taints: vec![gpu_taint()],
        gpu_count: 1,
        node_template: BTreeMap::new(),
        target: TargetFields::Aks(AksPoolFields::default()),
    }
}

fn ctx(secs: u64) -> OpCtx {
    OpCtx::new(Duration::from_secs(secs), StopSignal::default())
}

/// The limit `terraform refresh` gives a read by default.
fn read_ctx() -> OpCtx {
    ctx(120)
}

async fn fault(env: &Env, f: Value) {
    let r = reqwest::Client::new()
        .post(format!("{}/_sandbox/faults", env.base))
        .json(&f)
        .send()
        .await
        .expect("arm fault");
    assert_eq!(r.status().as_u16(), 201, "fault {f} not armed");
}

async fn armed_faults(env: &Env) -> usize {
    let v: Value = reqwest::get(format!("{}/_sandbox/faults", env.base))
        .await
        .expect("faults")
        .json()
        .await
        .expect("json");
    v["faults"].as_array().map_or(0, Vec::len)
}

/// The pool as the sandbox holds it (its own ARM document), independent of the client's mapping.
fn inventory_pool(env: &Env, name: &str) -> Option<Value> {
    env.sb.inventory()["pools"]
        .as_array()
        .expect("pools")
        .iter()
        .find(|p| p["cloud"] == "aks" && p["name"] == name)
        .map(|p| p["resource"]["properties"].clone())
}

async fn lifecycle(op_time: Duration) {
    let env = start(op_time).await;
    let spec = ts_spec("ts");
    let created = env.client.create(&spec, &ctx(60)).await.expect("create");
    assert_eq!(created.spec, spec);
    assert_eq!(created.status, "Succeeded");
    assert!(
        created
            .id
            .starts_with(&format!("/subscriptions/{DEFAULT_SUBSCRIPTION}/"))
            && created.id.ends_with(
                "/providers/Microsoft.ContainerService/managedClusters/sandbox-aks/agentPools/ts"
            ),
        "{}",
        created.id
    );
    let props = inventory_pool(&env, "ts").expect("pool in the sandbox");
    assert_eq!(props["vmSize"], "Standard_NC4as_T4_v3");
    assert_eq!(props["count"], 2);
    assert_eq!(props["mode"], "User");
    assert_eq!(props["osType"], "Linux");
    assert_eq!(props["scaleSetPriority"], "Regular");
    assert_eq!(
        props["nodeLabels"]["nvidia.com/device-plugin.config"],
        "time-sliced-10"
    );
    assert_eq!(
        props["nodeTaints"],
        json!(["nvidia.com/gpu=Present:NoSchedule"])
    );
    // The cloud chose the disk size and OS SKU; they must not read back as the user's.
    assert_eq!(props["osDiskSizeGB"], 128);
    assert_eq!(props["osSKU"], "Ubuntu");

    let got = env.pool("ts").await.expect("get").expect("some");
    assert_eq!(got.spec, spec);
    assert_eq!(got.id, created.id);

    // In place: count, labels, taints.
    let mut spec2 = spec.clone();
    spec2.scaling = Scaling::Fixed { nodes: 3 };
    spec2.labels.insert("tier".into(), "gold".into());
    spec2.labels.remove("team");
    spec2.taints.push(PoolTaint {
        key: "dedicated".into(),
        value: String::new(),
        effect: "NoExecute".into(),
    });
    let updated = env
        .client
        .update(&got, &spec2, &ctx(60))
        .await
        .expect("update");
    assert_eq!(updated.spec, spec2);
    let props = inventory_pool(&env, "ts").unwrap();
    assert_eq!(props["count"], 3);
    assert_eq!(props["nodeLabels"].get("team"), None);
    assert_eq!(
        props["nodeTaints"],
        json!(["nvidia.com/gpu=Present:NoSchedule", "dedicated:NoExecute"])
    );
    assert_eq!(props["provisioningState"], "Succeeded");

    // Autoscaling on, then off again.
    let mut spec3 = spec2.clone();
    spec3.scaling = Scaling::Auto { min: 1, max: 5 };
    let auto = env
        .client
        .update(&updated, &spec3, &ctx(60))
        .await
        .expect("autoscale");
    assert_eq!(auto.spec, spec3);
    let props = inventory_pool(&env, "ts").unwrap();
    assert_eq!(props["enableAutoScaling"], true);
    assert_eq!(
        (props["minCount"].clone(), props["maxCount"].clone()),
        (json!(1), json!(5))
    );
    assert_eq!(
        props["count"], 3,
        "the current size is kept inside the new range"
    );
    assert_eq!(env.pool("ts").await.unwrap().unwrap().spec, spec3);
    let fixed = env
        .client
        .update(&auto, &spec, &ctx(60))
        .await
        .expect("back to fixed");
    assert_eq!(fixed.spec, spec);
    assert_eq!(inventory_pool(&env, "ts").unwrap().get("minCount"), None);

    env.client
        .delete(&loc(), "ts", &ctx(60))
        .await
        .expect("delete");
    assert!(env.pool("ts").await.expect("get").is_none());
    assert!(inventory_pool(&env, "ts").is_none());
    // Deleting what is gone is success.
    env.client
        .delete(&loc(), "ts", &ctx(60))
        .await
        .expect("delete again");
}

#[tokio::test]
async fn time_sliced_pool_lifecycle_instant() {
    lifecycle(Duration::ZERO).await;
}

#[tokio::test]
async fn time_sliced_pool_lifecycle_with_operation_time() {
    let t = Instant::now();
    lifecycle(Duration::from_millis(300)).await;
    // Five mutations that each take 300 ms cannot finish sooner: the client really waited for them.
    assert!(
        t.elapsed() >= Duration::from_millis(1500),
        "{:?}",
        t.elapsed()
    );
}

#[tokio::test]
async fn mig_pool_with_explicit_disk_and_os_sku_round_trips() {
    let env = start(Duration::from_millis(300)).await;
    let mut spec = ts_spec("mig");
    spec.machine_type = "Standard_NC24ads_A100_v4".into();
    spec.aks_mut().gpu_instance_profile = Some("MIG1g".into());
    spec.labels.remove("nvidia.com/device-plugin.config");
    spec.disk_size_gb = Some(128); // equal to AKS's default, but the user's own choice
    spec.aks_mut().os_sku = Some("Ubuntu2204".into());
    spec.scaling = Scaling::Auto { min: 0, max: 4 };
    let pool = env.client.create(&spec, &ctx(60)).await.expect("create");
    assert_eq!(pool.spec, spec);
    let props = inventory_pool(&env, "mig").unwrap();
    assert_eq!(props["gpuInstanceProfile"], "MIG1g");
    assert_eq!(props["osSKU"], "Ubuntu2204");
    assert_eq!(props["enableAutoScaling"], true);
    let got = env.pool("mig").await.unwrap().unwrap();
    assert_eq!(got.spec, spec);
    assert_eq!(got.spec.gpu_count, 1);
}

#[tokio::test]
async fn spot_pool() {
    let env = start(Duration::ZERO).await;
    let mut spec = ts_spec("spot");
    spec.spot = true;
    spec.disk_size_gb = Some(200);
    let pool = env.client.create(&spec, &ctx(60)).await.expect("create");
    assert_eq!(pool.spec, spec);
    let props = inventory_pool(&env, "spot").unwrap();
    assert_eq!(props["scaleSetPriority"], "Spot");
    assert_eq!(props["scaleSetEvictionPolicy"], "Delete");
    assert_eq!(props["spotMaxPrice"], -1.0);
    assert_eq!(props["osDiskSizeGB"], 200);
    let got = env.pool("spot").await.unwrap().unwrap();
    assert_eq!(got.spec, spec);
    // Labels of a Spot pool change in place too.
    let mut spec2 = spec.clone();
    spec2.labels.insert("x".into(), "y".into());
    let up = env
        .client
        .update(&got, &spec2, &ctx(60))
        .await
        .expect("update");
    assert_eq!(up.spec, spec2);
}

fn api_code(r: Result<impl std::fmt::Debug, CloudError>) -> (u16, String, String) {
    match r {
        Err(CloudError::Api {
            status,
            code,
            message,
        }) => (status, code, message),
        other => panic!("expected an ARM error, got {other:?}"),
    }
}

#[tokio::test]
async fn arm_validation_errors_surface_with_their_codes() {
    let env = start(Duration::ZERO).await;

    let (status, code, msg) = api_code(env.client.create(&ts_spec("Bad_Name"), &ctx(30)).await);
    assert_eq!((status, code.as_str()), (400, "InvalidParameter"), "{msg}");
    assert!(msg.contains("Bad_Name"), "{msg}");

    let mut mig_on_t4 = ts_spec("migt4");
    mig_on_t4.aks_mut().gpu_instance_profile = Some("MIG1g".into());
    let (status, code, msg) = api_code(env.client.create(&mig_on_t4, &ctx(30)).await);
    assert_eq!((status, code.as_str()), (400, "InvalidParameter"), "{msg}");
    assert!(msg.contains("MIG"), "{msg}");

    let mut unknown_vm = ts_spec("unknown");
    unknown_vm.machine_type = "Standard_Nope_v9".into();
    let (status, code, _) = api_code(env.client.create(&unknown_vm, &ctx(30)).await);
    assert_eq!((status, code.as_str()), (400, "VMSizeNotSupported"));

    let mut bad_taint = ts_spec("badtaint");
    bad_taint.taints[0].effect = "Sometimes".into();
    let (_, code, _) = api_code(env.client.create(&bad_taint, &ctx(30)).await);
    assert_eq!(code, "InvalidParameter");

    let mut no_cluster = ts_spec("nocluster");
    no_cluster.location = Location::Aks {
        subscription_id: DEFAULT_SUBSCRIPTION.into(),
        resource_group: "sandbox-rg".into(),
        cluster: "missing".into(),
    };
    let (status, code, _) = api_code(env.client.create(&no_cluster, &ctx(30)).await);
    assert_eq!((status, code.as_str()), (404, "ResourceNotFound"));

    // A wrong subscription is an error, not "the pool is gone".
    let wrong_sub = Location::Aks {
        subscription_id: "11111111-1111-1111-1111-111111111111".into(),
        resource_group: "sandbox-rg".into(),
        cluster: "sandbox-aks".into(),
    };
    let (status, code, _) = api_code(env.client.get(&wrong_sub, "ts", &read_ctx()).await);
    assert_eq!((status, code.as_str()), (404, "SubscriptionNotFound"));
    assert!(env.sb.inventory()["pools"].as_array().unwrap().is_empty());
}

#[tokio::test]
async fn throttling_server_errors_and_dropped_connections_are_retried() {
    let env = start(Duration::from_millis(300)).await;
    fault(
        &env,
        json!({"match": {"method": "PUT", "path_contains": "/agentPools/"}, "count": 3, "kind": "429", "retry_after": 1}),
    )
    .await;
    fault(
        &env,
        json!({"match": {"method": "GET", "path_contains": "/operations/"}, "count": 2, "kind": "503"}),
    )
    .await;
    let t = Instant::now();
    let spec = ts_spec("flaky");
    let pool = env.client.create(&spec, &ctx(60)).await.expect("create");
    assert_eq!(pool.spec, spec);
    assert!(
        t.elapsed() >= Duration::from_secs(3),
        "Retry-After: 1 on three 429s was not honoured ({:?})",
        t.elapsed()
    );
    assert_eq!(armed_faults(&env).await, 0, "every fault was hit");

    fault(
        &env,
        json!({"match": {"method": "PUT"}, "count": 1, "kind": "drop"}),
    )
    .await;
    fault(
        &env,
        json!({"match": {"method": "GET", "path_contains": "/agentPools/"}, "count": 2, "kind": "500"}),
    )
    .await;
    let mut spec2 = spec.clone();
    spec2.scaling = Scaling::Fixed { nodes: 4 };
    let up = env
        .client
        .update(&pool, &spec2, &ctx(60))
        .await
        .expect("update through a dropped connection");
    assert_eq!(up.spec, spec2);
    assert_eq!(armed_faults(&env).await, 0);

    fault(
        &env,
        json!({"match": {"method": "DELETE"}, "count": 1, "kind": "drop"}),
    )
    .await;
    fault(
        &env,
        json!({"match": {"method": "GET"}, "count": 1, "kind": "drop"}),
    )
    .await;
    env.client
        .delete(&loc(), "flaky", &ctx(60))
        .await
        .expect("delete through dropped connections");
    assert!(env.pool("flaky").await.unwrap().is_none());
    assert_eq!(armed_faults(&env).await, 0);
}

#[tokio::test]
async fn a_failed_operation_is_reported_with_its_code() {
    let env = start(Duration::from_millis(300)).await;
    fault(
        &env,
        json!({"match": {"method": "PUT"}, "count": 1, "kind": "fail_operation"}),
    )
    .await;
    match env.client.create(&ts_spec("doomed"), &ctx(60)).await {
        Err(CloudError::OperationFailed { code, message }) => {
            assert_eq!(code, "AllocationFailed");
            assert!(message.contains("Standard_NC4as_T4_v3"), "{message}");
        }
        other => panic!("expected OperationFailed, got {other:?}"),
    }
    // The failed pool exists; a retried create provisions it again rather than failing on it.
    assert_eq!(
        inventory_pool(&env, "doomed").unwrap()["provisioningState"],
        "Failed"
    );
    let pool = env
        .client
        .create(&ts_spec("doomed"), &ctx(60))
        .await
        .expect("retried create");
    assert_eq!(pool.status, "Succeeded");

    fault(
        &env,
        json!({"match": {"method": "DELETE"}, "count": 1, "kind": "fail_operation"}),
    )
    .await;
    assert!(matches!(
        env.client.delete(&loc(), "doomed", &ctx(60)).await,
        Err(CloudError::OperationFailed { .. })
    ));
}

#[tokio::test]
async fn the_deadline_ends_the_wait() {
    let env = start(Duration::from_secs(30)).await;
    let t = Instant::now();
    match env
        .client
        .create(
            &ts_spec("slow"),
            &OpCtx::new(Duration::from_millis(1500), StopSignal::default()),
        )
        .await
    {
        Err(CloudError::Timeout { waiting_for, .. }) => {
            assert!(waiting_for.contains("slow"), "{waiting_for}")
        }
        other => panic!("expected Timeout, got {other:?}"),
    }
    assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
    // A request that hangs is cut by the deadline too (operations are instant here, so only the
    // hanging DELETE can run the clock out).
    let env = start(Duration::ZERO).await;
    env.client
        .create(&ts_spec("hang"), &ctx(30))
        .await
        .expect("create");
    fault(
        &env,
        json!({"match": {"method": "DELETE"}, "count": 1, "kind": "slow", "delay_ms": 20000}),
    )
    .await;
    let t = Instant::now();
    let r = env
        .client
        .delete(
            &loc(),
            "hang",
            &OpCtx::new(Duration::from_millis(800), StopSignal::default()),
        )
        .await;
    assert!(matches!(r, Err(CloudError::Timeout { .. })), "{r:?}");
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    env.client
        .delete(&loc(), "hang", &ctx(30))
        .await
        .expect("a delete with time to finish");
    assert!(inventory_pool(&env, "hang").is_none());
}

#[tokio::test]
async fn a_stop_ends_the_wait_promptly() {
    let env = start(Duration::from_secs(30)).await;
    let stop = StopSignal::default();
    let op = OpCtx::new(Duration::from_secs(600), stop.clone());
    let stopper = {
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(700)).await;
            stop.stop();
        })
    };
    let t = Instant::now();
    let r = env.client.create(&ts_spec("stopme"), &op).await;
    assert!(matches!(r, Err(CloudError::Stopped)), "{r:?}");
    assert!(
        t.elapsed() >= Duration::from_millis(600) && t.elapsed() < Duration::from_secs(3),
        "{:?}",
        t.elapsed()
    );
    stopper.await.unwrap();
    // The pool it started exists and is still being created: nothing was orphaned silently.
    assert_eq!(
        inventory_pool(&env, "stopme").unwrap()["provisioningState"],
        "Creating"
    );
}

#[tokio::test]
async fn create_adopts_its_own_pool_and_refuses_a_different_one() {
    let env = start(Duration::from_millis(300)).await;
    let spec = ts_spec("adopt");
    let first = env.client.create(&spec, &ctx(60)).await.expect("create");
    // A retried create (e.g. after the answer to the first was lost) adopts the identical pool.
    let again = env.client.create(&spec, &ctx(60)).await.expect("adopt");
    assert_eq!(again, first);

    // Adopting also works while the first create is still running.
    let spec2 = ts_spec("inflight");
    let first_ctx = ctx(60);
    let (a, b) = tokio::join!(env.client.create(&spec2, &first_ctx), async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        env.client.create(&spec2, &ctx(60)).await
    });
    assert_eq!(a.expect("first").spec, spec2);
    assert_eq!(b.expect("second").spec, spec2);

    let mut other = spec.clone();
    other.machine_type = "Standard_NC8as_T4_v3".into();
    other.scaling = Scaling::Fixed { nodes: 1 };
    let (status, code, msg) = api_code(env.client.create(&other, &ctx(60)).await);
    assert_eq!((status, code.as_str()), (409, "AgentPoolAlreadyExists"));
    assert!(
        msg.contains("terraform import") && msg.contains(&first.id),
        "{msg}"
    );
    assert!(
        msg.contains("machine_type") && msg.contains("scaling"),
        "{msg}"
    );
    assert_eq!(
        inventory_pool(&env, "adopt").unwrap()["count"],
        2,
        "left untouched"
    );
}

#[tokio::test]
async fn a_pool_made_elsewhere_with_aks_defaults_reads_as_not_set() {
    let env = start(Duration::ZERO).await;
    // `az aks nodepool add` style: a plain PUT without our tag, with AKS choosing disk and OS SKU.
    let token: Value = reqwest::Client::new()
        .post(format!(
            "{}/00000000-0000-0000-0000-000000000000/oauth2/v2.0/token",
            env.base
        ))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("grant_type=client_credentials&client_id=someone&client_secret=x&scope=https%3A%2F%2Fmanagement.azure.com%2F.default")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let url = format!(
        "{}{}?api-version=2025-10-01",
        env.base,
        AksClient::pool_id(&loc(), "byhand").unwrap()
    );
    let r = reqwest::Client::new()
        .put(url)
        .bearer_auth(token["access_token"].as_str().unwrap())
        .json(
            &json!({"properties": {"vmSize": "Standard_NC4as_T4_v3", "count": 2, "mode": "User",
            "nodeLabels": {"team": "ml", "nvidia.com/device-plugin.config": "time-sliced-10"},
            "nodeTaints": ["nvidia.com/gpu=Present:NoSchedule"]}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let spec = ts_spec("byhand");
    let got = env.pool("byhand").await.unwrap().unwrap();
    assert_eq!(got.spec, spec);
    // ... so creating it adopts it, and an in-place update works on it.
    let adopted = env.client.create(&spec, &ctx(30)).await.expect("adopt");
    let mut spec2 = spec.clone();
    spec2.scaling = Scaling::Fixed { nodes: 1 };
    let up = env
        .client
        .update(&adopted, &spec2, &ctx(30))
        .await
        .expect("update");
    assert_eq!(up.spec, spec2);
}

#[tokio::test]
async fn a_refused_client_secret_is_an_auth_error() {
    let env = start(Duration::ZERO).await;
    let client = AksClient::new(AksConfig {
        sandbox: Some(env.base.clone()),
        client_secret: Some("invalid".into()),
        ..Default::default()
    })
    .expect("client");
    match client.get(&loc(), "any", &read_ctx()).await {
        Err(CloudError::Auth(m)) => assert!(m.contains("AADSTS7000215"), "{m}"),
        other => panic!("expected Auth, got {other:?}"),
    }
    match client.create(&ts_spec("any"), &ctx(30)).await {
        Err(CloudError::Auth(_)) => {}
        other => panic!("expected Auth, got {other:?}"),
    }
    assert!(inventory_pool(&env, "any").is_none());
}

#[tokio::test]
async fn an_unreachable_sandbox_fails_with_a_clear_error() {
    // Bind and drop to get a port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let client = AksClient::new(AksConfig {
        sandbox: Some(format!("http://127.0.0.1:{port}")),
        ..Default::default()
    })
    .unwrap();
    let t = Instant::now();
    let r = client.delete(&loc(), "x", &ctx(60)).await;
    // The token request fails first: reported within seconds as an auth problem naming the cause.
    match r {
        Err(CloudError::Auth(m)) => {
            assert!(m.contains("sandbox token endpoint"), "{m}");
            assert!(m.to_lowercase().contains("connect"), "{m}");
        }
        other => panic!("expected Auth, got {other:?}"),
    }
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
}

// ------------------------------------------------------------------------------------------- config

fn lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let m: BTreeMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k| m.get(k).cloned()
}

#[test]
fn explicit_values_win_over_arm_environment_variables() {
    let env = lookup(&[
        ("ARM_TENANT_ID", "env-tenant"),
        ("ARM_CLIENT_ID", "env-client"),
        ("ARM_CLIENT_SECRET", "env-secret"),
        ("ARM_USE_MSI", "true"),
        ("ARM_USE_CLI", "false"),
    ]);
    let cfg = AksConfig::from_lookup_and(
        &env,
        AzureSettings {
            tenant_id: Some("tf-tenant".into()),
            use_msi: Some(false),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(cfg.tenant_id.as_deref(), Some("tf-tenant"));
    assert_eq!(cfg.client_id.as_deref(), Some("env-client"));
    assert_eq!(cfg.client_secret.as_deref(), Some("env-secret"));
    assert!(!cfg.use_msi && !cfg.use_cli);

    // azurerm's default: the Azure CLI is on unless turned off.
    let cfg = AksConfig::from_lookup_and(lookup(&[]), AzureSettings::default()).unwrap();
    assert!(cfg.use_cli && !cfg.use_msi && !cfg.use_oidc);
    assert_eq!(
        cfg,
        AksConfig {
            use_cli: true,
            ..Default::default()
        }
    );

    // Pointed at a sandbox, the real credentials of the environment stay at home.
    let env = lookup(&[
        ("ARM_TENANT_ID", "env-tenant"),
        ("ARM_CLIENT_SECRET", "env-secret"),
        ("FRACGPU_SANDBOX", "http://127.0.0.1:9"),
    ]);
    let cfg = AksConfig::from_lookup_and(&env, AzureSettings::default()).unwrap();
    assert_eq!(cfg.sandbox.as_deref(), Some("http://127.0.0.1:9"));
    assert_eq!((cfg.tenant_id, cfg.client_secret), (None, None));
    let cfg = AksConfig::from_lookup_and(
        &env,
        AzureSettings {
            client_secret: Some("invalid".into()),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(cfg.client_secret.as_deref(), Some("invalid"));

    let err =
        AksConfig::from_lookup_and(lookup(&[("ARM_USE_MSI", "yes")]), AzureSettings::default())
            .unwrap_err();
    assert!(err.to_string().contains("ARM_USE_MSI=yes"), "{err}");
}

#[test]
fn aks_workload_identity_uses_the_pods_azure_variables() {
    let vars = [
        ("ARM_USE_AKS_WORKLOAD_IDENTITY", "true"),
        ("AZURE_TENANT_ID", "pod-tenant"),
        ("AZURE_CLIENT_ID", "pod-client"),
        ("AZURE_FEDERATED_TOKEN_FILE", "/var/run/secrets/token"),
    ];
    let cfg = AksConfig::from_lookup_and(lookup(&vars), AzureSettings::default()).unwrap();
    assert!(cfg.use_aks_workload_identity && cfg.use_oidc);
    assert_eq!(cfg.tenant_id.as_deref(), Some("pod-tenant"));
    assert_eq!(cfg.client_id.as_deref(), Some("pod-client"));
    assert_eq!(
        cfg.oidc_token_file_path.as_deref(),
        Some("/var/run/secrets/token")
    );
    // Without the switch the AZURE_* variables are not azurerm's and are ignored.
    let cfg = AksConfig::from_lookup_and(lookup(&vars[1..]), AzureSettings::default()).unwrap();
    assert_eq!(cfg.tenant_id, None);
    assert_eq!(cfg.oidc_token_file_path, None);

    // The client builds the workload identity credential from it: the token file must exist...
    let err = AksClient::new(
        AksConfig::from_lookup_and(lookup(&vars), AzureSettings::default()).unwrap(),
    )
    .unwrap_err();
    assert!(
        matches!(&err, CloudError::Auth(m) if m.contains("/var/run/secrets/token")),
        "{err:?}"
    );
    // ... and then no network is needed until the first call.
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), "eyJhbGciOiJSUzI1NiJ9.e30.sig").unwrap();
    let path = file.path().to_string_lossy().into_owned();
    let mut vars = vars.to_vec();
    vars[3].1 = &path;
    let client = AksClient::new(
        AksConfig::from_lookup_and(lookup(&vars), AzureSettings::default()).unwrap(),
    )
    .expect("workload identity client");
    assert!(format!("{client:?}").contains("AKS workload identity"));

    let govt = AksConfig::from_lookup_and(
        lookup(&[("ARM_ENVIRONMENT", "usgovernment")]),
        AzureSettings::default(),
    )
    .unwrap();
    assert_eq!(
        govt.arm_endpoint.as_deref(),
        Some("https://management.usgovcloudapi.net")
    );
}

#[test]
fn credentials_are_chosen_in_azurerm_order() {
    let all = AksConfig {
        tenant_id: Some("t".into()),
        client_id: Some("c".into()),
        client_secret: Some("s3cret-value".into()),
        use_oidc: true,
        oidc_token: Some("eyJhbGciOi.oidc".into()),
        use_msi: true,
        ..Default::default()
    };
    let dbg = |c: AksConfig| format!("{:?}", AksClient::new(c).expect("client"));
    let d = dbg(all.clone());
    assert!(d.contains("client secret"), "{d}");
    assert!(!d.contains("s3cret") && !d.contains("eyJ"), "{d}");
    let no_secret = AksConfig {
        client_secret: None,
        ..all.clone()
    };
    assert!(dbg(no_secret.clone()).contains("OIDC token"));
    let msi = AksConfig {
        use_oidc: false,
        ..no_secret
    };
    assert!(dbg(msi).contains("managed identity"));
}

#[test]
fn no_credentials_is_an_auth_error_naming_the_variables() {
    let err = AksClient::new(AksConfig::default()).unwrap_err();
    let CloudError::Auth(m) = err else {
        panic!("expected Auth, got {err:?}")
    };
    for var in [
        "ARM_TENANT_ID",
        "ARM_CLIENT_ID",
        "ARM_CLIENT_SECRET",
        "ARM_USE_OIDC",
        "ARM_OIDC_TOKEN_FILE_PATH",
        "ARM_USE_AKS_WORKLOAD_IDENTITY",
        "ARM_USE_MSI",
        "ARM_USE_CLI",
    ] {
        assert!(m.contains(var), "{var} missing from: {m}");
    }
    // A secret without the ids it belongs to says so.
    let err = AksClient::new(AksConfig {
        client_secret: Some("s".into()),
        ..Default::default()
    })
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("ARM_TENANT_ID or ARM_CLIENT_ID is missing"),
        "{err}"
    );
}

// ------------------------------------------------------------------------------------------- a scripted ARM

/// A tiny ARM of our own for the paths the sandbox never takes: an operation followed only through
/// `Location`, none at all, an operation URL on a foreign host, and an oversized answer.
mod scripted {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    use axum::Router;
    use axum::body::Bytes;
    use axum::extract::State;
    use axum::http::{HeaderValue, Method, StatusCode, Uri};
    use axum::response::{IntoResponse, Response};
    use axum::routing::{any, post};
    use serde_json::{Value, json};

    #[derive(Default)]
    pub struct Arm {
        pub base: String,
        pub pools: HashMap<String, (Value, usize)>,
        pub location_polls: usize,
        pub token_requests: usize,
    }

    pub type Shared = Arc<Mutex<Arm>>;

    pub async fn serve() -> (String, Shared) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let state: Shared = Arc::new(Mutex::new(Arm {
            base: base.clone(),
            ..Default::default()
        }));
        let app = Router::new()
            .route("/{tenant}/oauth2/v2.0/token", post(token))
            .route("/ops/{name}", any(op))
            .route("/subscriptions/{*rest}", any(pool))
            .with_state(state.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        (base, state)
    }

    async fn token(State(s): State<Shared>) -> Response {
        s.lock().unwrap().token_requests += 1;
        axum::Json(json!({"token_type": "Bearer", "expires_in": 3599, "access_token": "scripted"}))
            .into_response()
    }

    async fn op(State(s): State<Shared>) -> Response {
        let mut s = s.lock().unwrap();
        s.location_polls += 1;
        let status = if s.location_polls < 3 {
            StatusCode::ACCEPTED
        } else {
            StatusCode::NO_CONTENT
        };
        let mut r = status.into_response();
        r.headers_mut()
            .insert("retry-after", HeaderValue::from_static("0"));
        r
    }

    async fn pool(State(s): State<Shared>, method: Method, uri: Uri, body: Bytes) -> Response {
        let name = uri.path().rsplit('/').next().unwrap_or("").to_string();
        let mut s = s.lock().unwrap();
        if name == "big" {
            // 5 MiB of valid JSON: only the size is wrong.
            let filler = "x".repeat(5 * 1024 * 1024);
            return axum::Json(json!({"properties": {"vmSize": filler}})).into_response();
        }
        match method {
            Method::PUT => {
                let doc: Value = serde_json::from_slice(&body).unwrap();
                let mut props = doc["properties"].clone();
                props["provisioningState"] = json!("Creating");
                s.pools.insert(name.clone(), (props.clone(), 0));
                let mut r = (
                    StatusCode::CREATED,
                    axum::Json(json!({"name": name, "properties": props})),
                )
                    .into_response();
                let h = r.headers_mut();
                match name.as_str() {
                    "loc" => {
                        h.insert(
                            "location",
                            HeaderValue::from_str(&format!("{}/ops/loc", s.base)).unwrap(),
                        );
                    }
                    "foreign" => {
                        h.insert(
                            "azure-asyncoperation",
                            HeaderValue::from_static("http://arm.invalid/ops/foreign"),
                        );
                    }
                    _ => {}
                }
                h.insert("retry-after", HeaderValue::from_static("0"));
                r
            }
            Method::GET => {
                let polls = s.location_polls;
                let Some((props, gets)) = s.pools.get_mut(&name) else {
                    return (
                        StatusCode::NOT_FOUND,
                        axum::Json(
                            json!({"error": {"code": "NotFound", "message": "no such pool"}}),
                        ),
                    )
                        .into_response();
                };
                *gets += 1;
                let done = if name == "loc" {
                    polls >= 3
                } else {
                    *gets >= 3
                };
                props["provisioningState"] = json!(if done { "Succeeded" } else { "Creating" });
                axum::Json(json!({"name": name, "properties": props.clone()})).into_response()
            }
            _ => StatusCode::METHOD_NOT_ALLOWED.into_response(),
        }
    }
}

async fn scripted_client() -> (AksClient, scripted::Shared) {
    let (base, state) = scripted::serve().await;
    let client = AksClient::new(AksConfig {
        sandbox: Some(base),
        ..Default::default()
    })
    .unwrap();
    (client, state)
}

#[tokio::test]
async fn an_operation_with_only_a_location_header_is_followed_to_its_end() {
    let (client, state) = scripted_client().await;
    let spec = ts_spec("loc");
    let pool = client.create(&spec, &ctx(30)).await.expect("create");
    assert_eq!(pool.spec, spec);
    assert_eq!(pool.status, "Succeeded");
    let s = state.lock().unwrap();
    assert_eq!(
        s.location_polls, 3,
        "polled Location until it stopped answering 202"
    );
    // The credential cached its token: one token request for all of the above.
    assert_eq!(s.token_requests, 1);
}

#[tokio::test]
async fn without_operation_headers_the_pool_itself_is_polled() {
    let (client, state) = scripted_client().await;
    let spec = ts_spec("plain");
    let pool = client.create(&spec, &ctx(30)).await.expect("create");
    assert_eq!(pool.status, "Succeeded");
    assert_eq!(pool.spec, spec);
    assert!(state.lock().unwrap().pools["plain"].1 >= 3);
}

#[tokio::test]
async fn an_operation_url_on_another_host_never_gets_the_token() {
    let (client, state) = scripted_client().await;
    let t = Instant::now();
    let pool = client
        .create(&ts_spec("foreign"), &ctx(30))
        .await
        .expect("create");
    assert_eq!(pool.status, "Succeeded");
    // Following http://arm.invalid would have failed and been retried for many seconds.
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    assert!(state.lock().unwrap().pools["foreign"].1 >= 3);
}

#[tokio::test]
async fn an_oversized_answer_is_refused() {
    let (client, _state) = scripted_client().await;
    match client.get(&loc(), "big", &read_ctx()).await {
        Err(CloudError::BadResponse(m)) => assert!(m.contains("larger than"), "{m}"),
        other => panic!("expected BadResponse, got {other:?}"),
    }
}

#[tokio::test]
async fn an_update_that_needs_a_new_pool_is_refused_before_any_request() {
    let (client, state) = scripted_client().await;
    let spec = ts_spec("plain");
    let pool = client.create(&spec, &ctx(30)).await.expect("create");
    let gets_before = state.lock().unwrap().pools["plain"].1;
    let mut other = spec.clone();
    other.machine_type = "Standard_NC8as_T4_v3".into();
    other.aks_mut().gpu_instance_profile = Some("MIG1g".into());
    let (status, code, msg) = api_code(client.update(&pool, &other, &ctx(30)).await);
    assert_eq!((status, code.as_str()), (400, "PropertyChangeNotAllowed"));
    assert!(
        msg.contains("machine_type") && msg.contains("gpu_instance_profile"),
        "{msg}"
    );
    assert_eq!(state.lock().unwrap().pools["plain"].1, gets_before);
}
