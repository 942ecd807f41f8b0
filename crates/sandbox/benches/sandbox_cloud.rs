//! Throughput and memory of the sandbox: requests per second for GET and create (on AKS, PUT) on
//! each cloud API at 1 and 16 concurrent clients, over real HTTP on loopback, and the process RSS
//! with 1,000 pools.
//! Prints figures only (`cargo bench --bench sandbox_cloud`); nothing here is a pass/fail check.
//!
//! Figures from a shared 2-core machine (2026-11-30), server and clients in this one process,
//! optimised build (`CARGO_PROFILE_DEV_OPT_LEVEL=3 CARGO_PROFILE_DEV_DEBUG_ASSERTIONS=false
//! cargo bench --bench sandbox_cloud --profile dev`, which avoids a full release build of the deps):
//! GET 17-27k req/s and create 10-18k req/s at 1 and 16 clients; 1,000 pools add about 2.5 MiB of
//! RSS. A plain debug build does 4-6k GET and 3-4k create req/s.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{Method, Request};
use sandbox::{ClusterSpec, Config, Sandbox};

use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use testkit::figures;

type HttpClient = Client<HttpConnector, Full<Bytes>>;

const RUN: Duration = Duration::from_millis(1500);

/// AKS allows 100 pools per cluster, and that limit cannot be raised: the thousand pools' AKS
/// third is spread over four clusters (pool `p{n}` goes to cluster `n % 4`).
const AKS_CLUSTERS: [&str; 4] = ["sandbox-aks", "bench-aks-1", "bench-aks-2", "bench-aks-3"];
/// Names the AKS create measurement cycles through: the first PUT of a name creates the pool, the
/// next ones update it (ARM's PUT is create-or-update), so the clusters stay under their limit.
const AKS_PUT_NAMES: u64 = 40;

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

#[derive(Clone)]
struct Target {
    base: String,
    token: String,
}

impl Target {
    fn request(&self, cloud: &str, create: bool, n: u64) -> Request<Full<Bytes>> {
        let (method, url, body, auth) = match (cloud, create) {
            ("aks", false) => (Method::GET, format!("{}/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/sandbox-rg/providers/Microsoft.ContainerService/managedClusters/sandbox-aks/agentPools/fixed?api-version=2025-10-01", self.base), String::new(), format!("Bearer {}", self.token)),
            ("aks", true) => (Method::PUT, format!("{}/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/sandbox-rg/providers/Microsoft.ContainerService/managedClusters/{}/agentPools/p{n}?api-version=2025-10-01", self.base, AKS_CLUSTERS[(n % AKS_CLUSTERS.len() as u64) as usize]), r#"{"properties":{"vmSize":"Standard_NC24ads_A100_v4","count":1,"gpuInstanceProfile":"MIG1g"}}"#.to_string(), format!("Bearer {}", self.token)),
            ("gke", false) => (Method::GET, format!("{}/v1/projects/sandbox-project/locations/us-central1/clusters/sandbox-gke/nodePools/fixed", self.base), String::new(), String::new()),
            ("gke", true) => (Method::POST, format!("{}/v1/projects/sandbox-project/locations/us-central1/clusters/sandbox-gke/nodePools", self.base), format!(r#"{{"nodePool":{{"name":"p{n}","initialNodeCount":"1","config":{{"machineType":"g2-standard-8","accelerators":[{{"acceleratorCount":"1","acceleratorType":"nvidia-l4","gpuSharingConfig":{{"gpuSharingStrategy":1,"maxSharedClientsPerGpu":"10"}}}}]}}}}}}"#), String::new()),
            ("eks", false) => (Method::GET, format!("{}/clusters/sandbox-eks/node-groups/fixed", self.base), String::new(), sig()),
            (_, _) => (Method::POST, format!("{}/clusters/sandbox-eks/node-groups", self.base), format!(r#"{{"nodegroupName":"p{n}","nodeRole":"arn:aws:iam::123456789012:role/n","subnets":["subnet-1"],"instanceTypes":["g5.xlarge"]}}"#), sig()),
        };
        let mut b = Request::builder()
            .method(method)
            .uri(url)
            .header("content-type", "application/json")
            .header("x-amz-date", "20261130T080000Z");
        if !auth.is_empty() {
            b = b.header("authorization", auth);
        }
        b.body(Full::new(Bytes::from(body))).expect("request")
    }
}

fn sig() -> String {
    format!(
        "AWS4-HMAC-SHA256 Credential=AKID/20261130/us-east-1/eks/aws4_request, SignedHeaders=host;x-amz-date, Signature={}",
        "ab".repeat(32)
    )
}

async fn send(client: &HttpClient, req: Request<Full<Bytes>>) -> u16 {
    match client.request(req).await {
        Ok(r) => {
            let status = r.status().as_u16();
            let _ = r.into_body().collect().await;
            status
        }
        Err(_) => 0,
    }
}

async fn measure(
    t: &Target,
    client: &HttpClient,
    cloud: &'static str,
    create: bool,
    clients: usize,
    counter: Arc<AtomicU64>,
) -> (f64, u64) {
    let errors = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (t, client, counter, errors, done) = (
            t.clone(),
            client.clone(),
            counter.clone(),
            errors.clone(),
            done.clone(),
        );
        tasks.push(tokio::spawn(async move {
            while start.elapsed() < RUN {
                let mut n = counter.fetch_add(1, Ordering::Relaxed);
                if cloud == "aks" && create {
                    n %= AKS_PUT_NAMES;
                }
                let status = send(&client, t.request(cloud, create, n)).await;
                if !(200..300).contains(&status) {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for task in tasks {
        let _ = task.await;
    }
    (
        done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64(),
        errors.load(Ordering::Relaxed),
    )
}

async fn token(client: &HttpClient, base: &str) -> String {
    let req = Request::post(format!("{base}/t/oauth2/v2.0/token"))
        .body(Full::new(Bytes::from_static(
            b"grant_type=client_credentials&client_id=a&client_secret=b&scope=https%3A%2F%2Fmanagement.azure.com%2F.default",
        )))
        .expect("request");
    let resp = client.request(req).await.expect("token");
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v["access_token"].as_str().map(str::to_string))
        .unwrap_or_default()
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let rss_start = rss_kib();
    // The AKS clusters above, and EKS's node group quota (30 by default) raised, as Service Quotas
    // allows, for the thousand pools and the create measurement.
    let mut clusters = ClusterSpec::defaults_with_nodegroup_quota(1_000_000);
    for name in &AKS_CLUSTERS[1..] {
        clusters.push(ClusterSpec::Aks {
            subscription: sandbox::DEFAULT_SUBSCRIPTION.into(),
            resource_group: "sandbox-rg".into(),
            name: (*name).into(),
            location: "eastus".into(),
        });
    }
    let sb = Sandbox::open(Config {
        clusters,
        ..Config::instant()
    })
    .expect("sandbox");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let router = sb.router();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    let t = Target {
        token: token(&client, &base).await,
        base,
    };
    println!(
        "fracgpu-sandbox benchmark ({} build), loopback HTTP/1.1 with keep-alive",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );

    // Memory first, in a fresh process and world: exactly 1,000 pools, a third per cloud.
    let rss_empty = rss_kib();
    let mut created = 0;
    for i in 0..1000u64 {
        let cloud = ["aks", "gke", "eks"][(i % 3) as usize];
        if (200..300).contains(&send(&client, t.request(cloud, true, 1_000_000 + i)).await) {
            created += 1;
        }
    }
    sb.settle();
    let rss_full = rss_kib();
    let listed = sb.inventory()["pools"].as_array().map_or(0, |a| a.len());
    println!(
        "RSS: process start {rss_start} KiB, serving an empty world {rss_empty} KiB, with 1,000 pools {rss_full} KiB (+{} KiB; {created} created, inventory lists {listed})",
        rss_full.saturating_sub(rss_empty)
    );

    // Fixed pools for the GETs.
    for cloud in ["aks", "gke", "eks"] {
        let mut req = t.request(cloud, true, 0);
        let uri = req.uri().to_string().replace("/p0?", "/fixed?");
        *req.uri_mut() = uri.parse().expect("uri");
        let body = req.body().clone().collect().await.expect("body").to_bytes();
        let body = String::from_utf8_lossy(&body).replace("\"p0\"", "\"fixed\"");
        *req.body_mut() = Full::new(Bytes::from(body));
        assert!(
            (200..300).contains(&send(&client, req).await),
            "fixture {cloud}"
        );
    }
    println!("{} ms per figure", RUN.as_millis());
    println!(
        "{:<5} {:<7} {:>9} {:>12} {:>7}",
        "cloud", "op", "clients", "req/s", "errors"
    );
    let counter = Arc::new(AtomicU64::new(1));
    for cloud in ["aks", "gke", "eks"] {
        for create in [false, true] {
            for clients in [1, 16] {
                let (rps, errors) =
                    measure(&t, &client, cloud, create, clients, counter.clone()).await;
                let op = match (create, cloud) {
                    (false, _) => "get",
                    // Creates of 40 names, then updates of them (see AKS_PUT_NAMES).
                    (true, "aks") => "put",
                    (true, _) => "create",
                };
                println!("{cloud:<5} {op:<7} {clients:>9} {rps:>12.0} {errors:>7}");
                if clients == 16 {
                    figures::record(
                        &format!("sandbox_{cloud}_{op}"),
                        &format!("sandbox {} {op}, 16 clients", cloud.to_uppercase()),
                        rps,
                        "req/s",
                        &format!("{errors} errors"),
                    );
                }
            }
        }
    }
}
