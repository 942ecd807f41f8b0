//! A cluster that already holds as many pools as its cloud allows (AKS: 100 node pools, EKS: 30
//! managed node groups by default): the create fails with the cloud's own error, nothing is kept in
//! state, and the diagnostic says what to do about it.

use std::time::Duration;

use serde_json::json;

use crate::common::sandbox::{self, Running};
use crate::common::terraform::{REQUIRED_PROVIDERS, Workspace, flat};

const SUB: &str = "00000000-0000-0000-0000-000000000000";

/// One request to a cloud API: method, path, headers, JSON body.
type Request = (
    reqwest::Method,
    String,
    Vec<(&'static str, String)>,
    serde_json::Value,
);

/// Sends requests to the sandbox's cloud APIs as another tool would, outside terraform.
fn fill(sb: &Running, requests: Vec<Request>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let http = reqwest::Client::new();
        for (method, url, headers, body) in requests {
            let mut req = http.request(method, format!("{}{url}", sb.url)).json(&body);
            for (k, v) in headers {
                req = req.header(k, v);
            }
            let resp = req.send().await.unwrap();
            assert!(
                resp.status().is_success(),
                "{url}: {}",
                resp.text().await.unwrap()
            );
        }
    });
    std::thread::sleep(Duration::from_millis(100));
    sb.sandbox.settle();
}

fn azure_token(sb: &Running) -> String {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let token: serde_json::Value = reqwest::Client::new()
            .post(format!("{}/{SUB}/oauth2/v2.0/token", sb.url))
            .header("content-type", "application/x-www-form-urlencoded")
            .body("grant_type=client_credentials&client_id=ops&client_secret=s3cret&scope=https%3A%2F%2Fmanagement.azure.com%2F.default")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        token["access_token"].as_str().expect("token").to_string()
    })
}

fn config(sb: &Running, body: &str) -> String {
    format!(
        "{REQUIRED_PROVIDERS}\nprovider \"fracgpu\" {{\n  sandbox = \"{}\"\n}}\n\nresource \"fracgpu_nodepool\" \"p\" {{\n{body}\n}}\n",
        sb.url
    )
}

/// The failed apply: terraform's output, with nothing made and nothing in state.
fn refused(sb: &Running, ws: &Workspace, pools_before: usize) -> String {
    let out = ws.run(&["apply", "-no-color", "-auto-approve", "-input=false"]);
    assert_eq!(out.code, 1, "{}", out.text());
    assert_eq!(sb.pools().len(), pools_before, "nothing was made");
    let state = ws.run(&["state", "list"]);
    assert_eq!(state.stdout.trim(), "", "nothing in state");
    out.text()
}

#[test]
fn aks_refuses_a_node_pool_past_a_hundred_with_what_to_do() {
    let sb = sandbox::start(Duration::ZERO);
    let bearer = format!("Bearer {}", azure_token(&sb));
    let pools = "/subscriptions/{SUB}/resourceGroups/sandbox-rg/providers/Microsoft.ContainerService/managedClusters/sandbox-aks/agentPools".replace("{SUB}", SUB);
    fill(
        &sb,
        (0..100)
            .map(|i| {
                (
                    reqwest::Method::PUT,
                    format!("{pools}/cpu{i}?api-version=2025-10-01"),
                    vec![("authorization", bearer.clone())],
                    json!({"properties": {"vmSize": "Standard_NC4as_T4_v3", "count": 0, "mode": "User"}}),
                )
            })
            .collect(),
    );
    assert_eq!(sb.pools().len(), 100);
    let ws = Workspace::new(&config(
        &sb,
        "  name         = \"onemore\"\n  machine_type = \"Standard_NC24ads_A100_v4\"\n  aks {\n    resource_group = \"sandbox-rg\"\n    cluster_name   = \"sandbox-aks\"\n  }\n  time_slicing { replicas = 4 }",
    ));
    ws.init();
    let text = refused(&sb, &ws, 100);
    for needle in [
        "Node pool limit reached",
        "QuotaExceeded",
        "100 node pools",
        "Delete node pools",
        "another cluster",
    ] {
        assert!(
            flat(&text).contains(&flat(needle)),
            "missing {needle:?} in:\n{text}"
        );
    }
}

#[test]
fn eks_refuses_a_node_group_past_the_quota_with_what_to_do() {
    let sb = sandbox::start(Duration::ZERO);
    let sigv4 = vec![
        (
            "authorization",
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261130/us-east-1/eks/aws4_request, SignedHeaders=host;x-amz-date, Signature=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef".to_string(),
        ),
        ("x-amz-date", "20261130T000000Z".to_string()),
    ];
    fill(
        &sb,
        (0..30)
            .map(|i| {
                (
                    reqwest::Method::POST,
                    "/clusters/sandbox-eks/node-groups".to_string(),
                    sigv4.clone(),
                    json!({"nodegroupName": format!("cpu{i}"), "nodeRole": "arn:aws:iam::123456789012:role/n", "subnets": ["subnet-1"]}),
                )
            })
            .collect(),
    );
    assert_eq!(sb.pools().len(), 30);
    let ws = Workspace::new(&config(
        &sb,
        "  name         = \"onemore\"\n  machine_type = \"g4dn.xlarge\"\n  eks {\n    cluster_name  = \"sandbox-eks\"\n    node_role_arn = \"arn:aws:iam::123456789012:role/gpu-nodes\"\n    subnet_ids    = [\"subnet-0a1\"]\n  }\n  time_slicing { replicas = 4 }",
    ));
    ws.init();
    let text = refused(&sb, &ws, 30);
    for needle in [
        "Node pool limit reached",
        "ResourceLimitExceededException",
        "Managed node groups per cluster",
        "L-6D54EA21",
        "quota increase",
        "Delete node groups",
    ] {
        assert!(
            flat(&text).contains(&flat(needle)),
            "missing {needle:?} in:\n{text}"
        );
    }
}
