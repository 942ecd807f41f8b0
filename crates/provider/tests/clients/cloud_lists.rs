//! Listing a cluster's pools on each cloud, over real HTTP against the sandbox: every page of a
//! paged answer is followed (ARM's nextLink, EKS's nextToken), a page pointing elsewhere is not,
//! each pool reads as `get` reads it, and a cluster that does not exist is an error.

use std::collections::BTreeMap;
use std::time::Duration;

use ::sandbox::{ClusterSpec, Config, DEFAULT_SUBSCRIPTION, Sandbox};
use axum::body::Body;
use axum::http::Request;
use axum::middleware::Next;
use axum::response::Response;
use fracgpu::cloud::aks::{AksClient, AksConfig};
use fracgpu::cloud::eks::{EksClient, EksConfig};
use fracgpu::cloud::gke::{GkeClient, GkeConfig};
use fracgpu::cloud::{
    AksPoolFields, CloudError, EksPoolFields, GkePoolFields, GkeSharing, Location, NodePools,
    OpCtx, PoolSpec, PoolTaint, Scaling, StopSignal, TargetFields,
};
use futures_util::future::join_all;

/// A sandbox over HTTP; `router` may wrap what it answers. Its base URL. Its EKS cluster's node
/// group quota is raised to 150 (EKS's default of 30 would end the list at one page).
async fn serve(router: impl FnOnce(axum::Router) -> axum::Router) -> (Sandbox, String) {
    let config = Config {
        clusters: ClusterSpec::defaults_with_nodegroup_quota(150),
        ..Config::instant()
    };
    crate::serve_sandbox(config, router).await
}

fn ctx() -> OpCtx {
    OpCtx::new(Duration::from_secs(120), StopSignal::default())
}

fn taint() -> PoolTaint {
    PoolTaint {
        key: "nvidia.com/gpu".into(),
        value: "Present".into(),
        effect: "NoSchedule".into(),
    }
}

fn spec(
    location: Location,
    name: &str,
    machine_type: &str,
    gpu_count: u32,
    target: TargetFields,
) -> PoolSpec {
    PoolSpec {
        location,
        name: name.into(),
        machine_type: machine_type.into(),
        scaling: Scaling::Fixed { nodes: 1 },
        spot: false,
        disk_size_gb: None,
        labels: BTreeMap::from([(
            "nvidia.com/device-plugin.config".to_string(),
            "time-sliced-4".to_string(),
        )]),
        taints: vec![taint()],
        gpu_count,
        node_template: BTreeMap::new(),
        target,
    }
}

fn aks_loc(cluster: &str) -> Location {
    Location::Aks {
        subscription_id: DEFAULT_SUBSCRIPTION.into(),
        resource_group: "sandbox-rg".into(),
        cluster: cluster.into(),
    }
}

fn aks_spec(name: &str) -> PoolSpec {
    spec(
        aks_loc("sandbox-aks"),
        name,
        "Standard_NC4as_T4_v3",
        1,
        TargetFields::Aks(AksPoolFields::default()),
    )
}

async fn aks(base: &str) -> AksClient {
    AksClient::new(AksConfig {
        sandbox: Some(base.to_string()),
        ..Default::default()
    })
    .expect("client")
}

/// Creates the pools concurrently, as a busy cluster's owners would have.
async fn create_all(client: &dyn NodePools, specs: &[PoolSpec]) {
    let ctx = ctx();
    for r in join_all(specs.iter().map(|s| client.create(s, &ctx))).await {
        r.expect("created");
    }
}

fn names(pools: &[fracgpu::cloud::Pool]) -> Vec<String> {
    pools.iter().map(|p| p.spec.name.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aks_follows_every_page_of_the_list() {
    let (_sb, base) = serve(|r| r).await;
    let client = aks(&base).await;
    // 60 pools: two pages of the sandbox's 50 (ARM pages its lists; AKS allows 100 pools).
    let specs: Vec<PoolSpec> = (0..60).map(|i| aks_spec(&format!("p{i:02}"))).collect();
    create_all(&client, &specs).await;
    let listed = client.list(&aks_loc("sandbox-aks"), &ctx()).await.unwrap();
    let mut expected: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
    expected.sort();
    assert_eq!(names(&listed), expected);
    // Each pool as `get` reads it.
    let one = client
        .get(&aks_loc("sandbox-aks"), "p42", &ctx())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(listed.iter().find(|p| p.spec.name == "p42"), Some(&one));
}

/// Rewrites every `nextLink` of an answer to point at another host.
async fn next_link_elsewhere(req: Request<Body>, next: Next) -> Response {
    let res = next.run(req).await;
    let (parts, body) = res.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let mut doc: serde_json::Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(_) => return Response::from_parts(parts, Body::from(bytes)),
    };
    if let Some(link) = doc.get_mut("nextLink").filter(|l| l.is_string()) {
        let path = link
            .as_str()
            .unwrap()
            .splitn(4, '/')
            .nth(3)
            .unwrap()
            .to_string();
        *link = format!("http://169.254.169.254/{path}").into();
    }
    let mut res = Response::from_parts(parts, Body::from(doc.to_string()));
    res.headers_mut().remove("content-length");
    res
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aks_does_not_follow_a_next_link_to_another_host() {
    let (_sb, base) = serve(|r| r.layer(axum::middleware::from_fn(next_link_elsewhere))).await;
    let client = aks(&base).await;
    let specs: Vec<PoolSpec> = (0..51).map(|i| aks_spec(&format!("p{i:02}"))).collect();
    create_all(&client, &specs).await;
    let e = client
        .list(&aks_loc("sandbox-aks"), &ctx())
        .await
        .unwrap_err();
    let text = e.to_string();
    assert!(
        matches!(e, CloudError::BadResponse(_)) && text.contains("not followed"),
        "the bearer token never leaves the ARM endpoint: {text}"
    );
    assert!(text.contains("169.254.169.254"), "{text}");
}

/// An EKS client of the sandbox at `base` and its cluster with `n` node groups made, named
/// `ng000`...
async fn eks_with_groups(base: &str, n: usize) -> (EksClient, Location) {
    let client = EksClient::new(EksConfig {
        sandbox: Some(base.to_string()),
        region: Some("us-east-1".into()),
        ..EksConfig::default()
    })
    .await
    .expect("client")
    .with_poll_interval(Duration::from_millis(20), Duration::from_millis(100));
    let loc = Location::Eks {
        region: "us-east-1".into(),
        cluster: "sandbox-eks".into(),
    };
    let specs: Vec<PoolSpec> = (0..n)
        .map(|i| {
            spec(
                loc.clone(),
                &format!("ng{i:03}"),
                "g4dn.xlarge",
                0,
                TargetFields::Eks(EksPoolFields {
                    node_role_arn: "arn:aws:iam::123456789012:role/gpu-nodes".into(),
                    subnet_ids: vec!["subnet-0a1".into()],
                    ami_type: "AL2023_x86_64_NVIDIA".into(),
                    bottlerocket_settings: None,
                }),
            )
        })
        .collect();
    create_all(&client, &specs).await;
    (client, loc)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eks_follows_every_page_of_the_list() {
    let (_sb, base) = serve(|r| r).await;
    // 120 node groups: two pages of ListNodegroups' 100, the first page's describes under way
    // while the second is asked for.
    let (client, loc) = eks_with_groups(&base, 120).await;
    let listed = client.list(&loc, &ctx()).await.unwrap();
    assert_eq!(listed.len(), 120);
    assert_eq!(names(&listed)[119], "ng119");
    let one = client.get(&loc, "ng007", &ctx()).await.unwrap().unwrap();
    assert_eq!(listed[7], one);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eks_list_whose_describes_are_throttled_still_describes_every_group() {
    let (_sb, base) = serve(|r| r).await;
    let (client, loc) = eks_with_groups(&base, 120).await;
    // A burst of ThrottlingException on the describes (not on ListNodegroups, whose path has
    // no trailing slash): the list retries them, its window narrowed (the window's own unit
    // tests show by how much).
    let armed = reqwest::Client::new()
        .post(format!("{base}/_sandbox/faults"))
        .json(&serde_json::json!({
            "match": {"method": "GET", "path_contains": "/node-groups/"},
            "count": 12, "kind": "429", "retry_after": 0
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(armed.status().as_u16(), 201, "fault accepted");
    let listed = client.list(&loc, &ctx()).await.unwrap();
    let left: serde_json::Value = reqwest::get(format!("{base}/_sandbox/faults"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        left["faults"].as_array().unwrap().len(),
        0,
        "all 12 were met"
    );
    assert_eq!(listed.len(), 120, "{:?}", names(&listed));
    for (i, pool) in listed.iter().enumerate() {
        let name = format!("ng{i:03}");
        let one = client.get(&loc, &name, &ctx()).await.unwrap();
        assert_eq!(Some(pool), one.as_ref(), "{name} as get reads it");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gke_lists_each_pool_as_get_reads_it() {
    let (_sb, base) = serve(|r| r).await;
    let client = GkeClient::new(GkeConfig {
        sandbox: Some(base.clone()),
        ..GkeConfig::default()
    })
    .await
    .expect("client");
    let loc = Location::Gke {
        project: "sandbox-project".into(),
        location: "us-central1".into(),
        cluster: "sandbox-gke".into(),
    };
    let l4 = |name: &str, clients: u32| {
        let mut s = spec(
            loc.clone(),
            name,
            "g2-standard-4",
            1,
            TargetFields::Gke(GkePoolFields {
                accelerator_type: Some("nvidia-l4".into()),
                sharing: Some(GkeSharing::TimeSharing {
                    max_clients: clients,
                }),
                ..GkePoolFields::default()
            }),
        );
        s.labels.clear();
        // GKE taints its GPU nodes itself, and runs as many nodes in each of the regional
        // cluster's three zones: one each.
        s.taints.clear();
        s.scaling = Scaling::Fixed { nodes: 3 };
        s
    };
    create_all(&client, &[l4("b-shared", 4), l4("a-shared", 10)]).await;
    let listed = client.list(&loc, &ctx()).await.unwrap();
    assert_eq!(names(&listed), ["a-shared", "b-shared"]);
    for p in &listed {
        let got = client
            .get(&loc, &p.spec.name, &ctx())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(p, &got);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_a_cluster_that_does_not_exist_is_an_error_on_each_cloud() {
    let (_sb, base) = serve(|r| r).await;
    let aks = aks(&base).await;
    let gke = GkeClient::new(GkeConfig {
        sandbox: Some(base.clone()),
        ..GkeConfig::default()
    })
    .await
    .unwrap();
    let eks = EksClient::new(EksConfig {
        sandbox: Some(base.clone()),
        region: Some("us-east-1".into()),
        ..EksConfig::default()
    })
    .await
    .unwrap();
    let cases: [(&dyn NodePools, Location, &str); 3] = [
        (&aks, aks_loc("nope"), "ResourceNotFound"),
        (
            &gke,
            Location::Gke {
                project: "sandbox-project".into(),
                location: "us-central1".into(),
                cluster: "nope".into(),
            },
            "NOT_FOUND",
        ),
        (
            &eks,
            Location::Eks {
                region: "us-east-1".into(),
                cluster: "nope".into(),
            },
            "ResourceNotFoundException",
        ),
    ];
    for (client, loc, code) in cases {
        let e = client.list(&loc, &ctx()).await.unwrap_err();
        assert!(
            e.to_string().contains(code) || format!("{e:?}").contains(code),
            "{}: {e:?}",
            loc.cloud()
        );
    }
}
