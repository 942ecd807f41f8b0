//! The sandbox's cloud emulators over real HTTP: lifecycles, auth, async operations, node hand-off,
//! fault injection, inventory, persistence, and a table of bad requests with their error shapes.

mod sandbox_cloud_support;

use std::time::{Duration, Instant};

use axum::http::{Method, StatusCode};
use sandbox::{Config, NodeEvent, Sandbox};
use sandbox_cloud_support::*;
use serde_json::{Value, json};

fn changed(events: &[NodeEvent], pool: &str) -> Vec<sandbox::PoolNodes> {
    events
        .iter()
        .filter_map(|e| match e {
            NodeEvent::Changed(n) if n.pool == pool => Some(n.clone()),
            _ => None,
        })
        .collect()
}

fn deleted(events: &[NodeEvent], pool: &str) -> bool {
    events
        .iter()
        .any(|e| matches!(e, NodeEvent::Deleted { pool: p, .. } if p == pool))
}

// ---------------------------------------------------------------- AKS

#[tokio::test]
async fn aks_agent_pool_lifecycle_with_async_operations() {
    let s = start(300).await;
    let tok = s.azure_token().await;
    let pool = format!("{}/mig1?{API}", aks_pools("sandbox-aks"));
    let body = json!({"properties": {"vmSize": "Standard_NC24ads_A100_v4", "count": 2, "gpuInstanceProfile": "MIG1g", "mode": "User",
        "nodeLabels": {"team": "ml"}, "nodeTaints": ["sku=gpu:NoSchedule"], "osDiskSizeGB": 256}});
    let r = s.arm(&tok, Method::PUT, &pool, Some(&body)).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(r.body["properties"]["provisioningState"], "Creating");
    assert_eq!(r.body["name"], "mig1");
    assert_eq!(
        r.body["type"],
        "Microsoft.ContainerService/managedClusters/agentPools"
    );
    assert_eq!(r.header("retry-after").as_deref(), Some("1"));
    let op_url = r
        .header("azure-asyncoperation")
        .expect("Azure-AsyncOperation");
    assert!(
        op_url.starts_with(&s.base) && op_url.contains("/operations/"),
        "{op_url}"
    );

    // The operation document goes InProgress -> Succeeded.
    let op = s.arm(&tok, Method::GET, &op_url, None).await;
    assert_eq!(op.status, StatusCode::OK);
    assert_eq!(op.body["status"], "InProgress");
    let done = eventually(5, || async {
        let op = s.arm(&tok, Method::GET, &op_url, None).await;
        (op.body["status"] != "InProgress").then_some(op.body)
    })
    .await;
    assert_eq!(done["status"], "Succeeded");
    assert!(done["endTime"].is_string());

    let g = s.arm(&tok, Method::GET, &pool, None).await;
    assert_eq!(g.status, StatusCode::OK);
    let p = &g.body["properties"];
    assert_eq!(p["provisioningState"], "Succeeded");
    assert_eq!(p["count"], 2);
    assert_eq!(p["gpuInstanceProfile"], "MIG1g");
    assert_eq!(p["osDiskSizeGB"], 256);
    assert_eq!(p["nodeLabels"]["team"], "ml");
    assert_eq!(p["nodeTaints"][0], "sku=gpu:NoSchedule");

    let nodes = changed(&s.sink.take(), "mig1");
    assert_eq!(nodes.len(), 1);
    let n = &nodes[0];
    assert_eq!(
        (n.cloud, n.cluster.as_str(), n.node_count),
        ("aks", "sandbox-aks", 2)
    );
    assert_eq!(n.labels["agentpool"], "mig1");
    assert_eq!(n.labels["kubernetes.azure.com/agentpool"], "mig1");
    assert_eq!(
        n.labels["node.kubernetes.io/instance-type"],
        "Standard_NC24ads_A100_v4"
    );
    assert_eq!(n.labels["team"], "ml");
    assert_eq!(
        n.taints,
        vec![(
            "sku".to_string(),
            "gpu".to_string(),
            "NoSchedule".to_string()
        )]
    );
    assert_eq!(n.gpu_product.as_deref(), Some("NVIDIA-A100-80GB-PCIe"));
    assert_eq!((n.gpus_per_node, n.gpu_memory_mib), (1, 81920));
    assert_eq!(
        (n.mig_profile.as_deref(), n.mig_instances_per_gpu),
        (Some("1g.10gb"), 7)
    );

    // List.
    let l = s
        .arm(
            &tok,
            Method::GET,
            &format!("{}?{API}", aks_pools("sandbox-aks")),
            None,
        )
        .await;
    assert_eq!(l.body["value"].as_array().map(|a| a.len()), Some(1));

    // Update in place: count and autoscaling (PUT of the whole pool, like `az aks nodepool update`).
    let mut upd = g.body.clone();
    upd["properties"]["enableAutoScaling"] = json!(true);
    upd["properties"]["minCount"] = json!(1);
    upd["properties"]["maxCount"] = json!(4);
    upd["properties"]["count"] = json!(3);
    let r = s.arm(&tok, Method::PUT, &pool, Some(&upd)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["properties"]["provisioningState"], "Updating");
    // A second change while one runs is refused.
    let busy = s.arm(&tok, Method::PUT, &pool, Some(&upd)).await;
    assert_eq!(busy.status, StatusCode::CONFLICT);
    assert_eq!(busy.body["error"]["code"], "OperationNotAllowed");
    eventually(5, || async {
        (s.arm(&tok, Method::GET, &pool, None).await.body["properties"]["provisioningState"]
            == "Succeeded")
            .then_some(())
    })
    .await;
    let nodes = changed(&s.sink.take(), "mig1");
    assert_eq!(
        nodes.last().map(|n| n.node_count),
        Some(1),
        "autoscaling minimum"
    );

    // Immutable fields.
    for (field, value) in [
        ("vmSize", json!("Standard_NC48ads_A100_v4")),
        ("gpuInstanceProfile", json!("MIG2g")),
        ("osDiskSizeGB", json!(512)),
    ] {
        let mut bad = upd.clone();
        bad["properties"][field] = value;
        let r = s.arm(&tok, Method::PUT, &pool, Some(&bad)).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{field}");
        assert_eq!(
            r.body["error"]["code"], "PropertyChangeNotAllowed",
            "{field}"
        );
        assert_eq!(r.body["error"]["target"], field);
    }

    // A partial PUT (only labels) keeps the count, the VM size and the MIG profile, and replaces the labels.
    let r = s.arm(&tok, Method::PUT, &pool, Some(&json!({"properties": {"nodeLabels": {"team": "infra"}, "enableAutoScaling": true, "minCount": 1, "maxCount": 4}}))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let p = &r.body["properties"];
    assert_eq!(
        (
            p["count"].as_i64(),
            p["vmSize"].as_str(),
            p["gpuInstanceProfile"].as_str()
        ),
        (Some(3), Some("Standard_NC24ads_A100_v4"), Some("MIG1g"))
    );
    assert_eq!(p["nodeLabels"], json!({"team": "infra"}));
    assert!(
        p.get("nodeTaints").is_none(),
        "omitted taints are cleared by PUT"
    );
    s.sb.settle();

    // Delete: 202 with Location; Location polling answers 202 then 204.
    let d = s.arm(&tok, Method::DELETE, &pool, None).await;
    assert_eq!(d.status, StatusCode::ACCEPTED);
    let loc = d.header("location").expect("Location");
    assert!(d.header("azure-asyncoperation").is_some() && d.header("retry-after").is_some());
    assert_eq!(
        s.arm(&tok, Method::GET, &pool, None).await.body["properties"]["provisioningState"],
        "Deleting"
    );
    assert_eq!(
        s.arm(&tok, Method::GET, &loc, None).await.status,
        StatusCode::ACCEPTED
    );
    let fin = eventually(5, || async {
        let r = s.arm(&tok, Method::GET, &loc, None).await;
        (r.status != StatusCode::ACCEPTED).then_some(r.status)
    })
    .await;
    assert_eq!(fin, StatusCode::NO_CONTENT);
    let gone = s.arm(&tok, Method::GET, &pool, None).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    assert_eq!(gone.body["error"]["code"], "NotFound");
    assert!(deleted(&s.sink.take(), "mig1"));
    // Deleting again is idempotent.
    assert_eq!(
        s.arm(&tok, Method::DELETE, &pool, None).await.status,
        StatusCode::NO_CONTENT
    );
}

#[tokio::test]
async fn aks_auth_and_token_endpoint() {
    let s = start(0).await;
    let path = format!("{}?{API}", aks_pools("sandbox-aks"));
    let r = s.call(Method::GET, &path, &[], b"").await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert_eq!(r.body["error"]["code"], "AuthenticationFailed");
    let r = s.arm("not-issued", Method::GET, &path, None).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert_eq!(r.body["error"]["code"], "InvalidAuthenticationToken");
    let form = |secret: &str, grant: &str| {
        format!(
            "grant_type={grant}&client_id=app&client_secret={secret}&scope=https%3A%2F%2Fmanagement.azure.com%2F.default"
        )
    };
    let r = s
        .call(
            Method::POST,
            "/t/oauth2/v2.0/token",
            &[],
            form("invalid", "client_credentials").as_bytes(),
        )
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert_eq!(r.body["error"], "invalid_client");
    assert_eq!(r.body["error_codes"][0], 7000215);
    let r = s
        .call(
            Method::POST,
            "/t/oauth2/v2.0/token",
            &[],
            form("x", "password").as_bytes(),
        )
        .await;
    assert_eq!(
        (r.status, r.body["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("unsupported_grant_type"))
    );
    let r = s
        .call(
            Method::POST,
            "/t/oauth2/v2.0/token",
            &[],
            form("x", "client_credentials").as_bytes(),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["token_type"], "Bearer");
    assert!(r.body["expires_in"].as_u64().unwrap_or(0) > 3000);
    let tok = r.body["access_token"].as_str().unwrap().to_string();
    assert_eq!(tok.split('.').count(), 3, "JWT-shaped");
    assert_eq!(
        s.arm(&tok, Method::GET, &path, None).await.status,
        StatusCode::OK
    );
    // A client assertion (workload identity / OIDC) works too.
    let r = s.call(Method::POST, "/t/oauth2/v2.0/token", &[], b"grant_type=client_credentials&client_id=app&client_assertion=eyJ.x.y&client_assertion_type=urn%3Aietf%3Aparams%3Aoauth%3Aclient-assertion-type%3Ajwt-bearer&scope=https%3A%2F%2Fmanagement.azure.com%2F.default").await;
    assert_eq!(r.status, StatusCode::OK);
}

#[tokio::test]
async fn aks_spot_defaults_and_system_pool_rules() {
    let s = start(0).await;
    let tok = s.azure_token().await;
    let r = s
        .arm(&tok, Method::PUT, &format!("{}/spot1?{API}", aks_pools("sandbox-aks")), Some(&json!({"properties": {"vmSize": "Standard_NC4as_T4_v3", "scaleSetPriority": "spot", "count": 1}})))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(
        r.body["properties"]["scaleSetPriority"], "Spot",
        "enum canonicalised"
    );
    assert_eq!(r.body["properties"]["scaleSetEvictionPolicy"], "Delete");
    assert_eq!(r.body["properties"]["spotMaxPrice"], -1.0);
    s.sb.settle();
    let n = changed(&s.sink.take(), "spot1");
    assert!(n[0].taints.contains(&(
        "kubernetes.azure.com/scalesetpriority".into(),
        "spot".into(),
        "NoSchedule".into()
    )));
    assert_eq!(n[0].mig_profile, None);
    // The last System pool cannot be deleted.
    let sys = format!("{}/sys1?{API}", aks_pools("sandbox-aks"));
    assert_eq!(
        s.arm(
            &tok,
            Method::PUT,
            &sys,
            Some(&json!({"properties": {"mode": "System", "count": 1}}))
        )
        .await
        .status,
        StatusCode::CREATED
    );
    s.sb.settle();
    let r = s.arm(&tok, Method::DELETE, &sys, None).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.body["error"]["code"], "OperationNotAllowed");
}

// ---------------------------------------------------------------- GKE

#[tokio::test]
async fn gke_node_pool_lifecycle_accepts_int_enums_and_string_int64() {
    let s = start(200).await;
    // As google-cloud-container-v1 sends it: enum-encoding=int, int64 as strings.
    let create = json!({"nodePool": {"name": "shared", "initialNodeCount": "2",
        "config": {"machineType": "g2-standard-8", "labels": {"team": "ml"}, "oauthScopes": ["https://www.googleapis.com/auth/cloud-platform"], "serviceAccount": "nodes@p.iam.gserviceaccount.com",
            "taints": [{"key": "gpu", "value": "l4", "effect": 1}],
            "accelerators": [{"acceleratorCount": "1", "acceleratorType": "nvidia-l4",
                "gpuSharingConfig": {"gpuSharingStrategy": 1, "maxSharedClientsPerGpu": "10"},
                "gpuDriverInstallationConfig": {"gpuDriverVersion": 3}}]},
        "management": {"autoRepair": true, "autoUpgrade": true}}});
    let r = s
        .gke(
            Method::POST,
            &format!("{GKE_CLUSTER}/nodePools?$alt=json;enum-encoding=int"),
            Some(&create),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["operationType"], "CREATE_NODE_POOL");
    assert_eq!(r.body["status"], "RUNNING");
    assert!(
        r.body["targetLink"]
            .as_str()
            .unwrap()
            .ends_with("/clusters/sandbox-gke/nodePools/shared")
    );
    let op = r.body["name"].as_str().unwrap().to_string();
    let op_path = format!("/v1/projects/sandbox-project/locations/us-central1/operations/{op}");
    let during = s
        .gke(
            Method::GET,
            &format!("{GKE_CLUSTER}/nodePools/shared"),
            None,
        )
        .await;
    assert_eq!(during.body["status"], "PROVISIONING");
    let done = eventually(5, || async {
        let o = s.gke(Method::GET, &op_path, None).await;
        (o.body["status"] == "DONE").then_some(o.body)
    })
    .await;
    assert!(done.get("error").is_none() && done["endTime"].is_string());

    let p = s
        .gke(
            Method::GET,
            &format!("{GKE_CLUSTER}/nodePools/shared"),
            None,
        )
        .await
        .body;
    assert_eq!(p["status"], "RUNNING");
    let acc = &p["config"]["accelerators"][0];
    assert_eq!(acc["acceleratorCount"], "1");
    assert_eq!(
        acc["gpuSharingConfig"]["gpuSharingStrategy"],
        "TIME_SHARING"
    );
    assert_eq!(acc["gpuSharingConfig"]["maxSharedClientsPerGpu"], "10");
    assert_eq!(
        acc["gpuDriverInstallationConfig"]["gpuDriverVersion"],
        "LATEST"
    );
    assert_eq!(p["config"]["taints"][0]["effect"], "NO_SCHEDULE");
    assert_eq!(p["initialNodeCount"], 2);
    assert_eq!(
        p["config"]["oauthScopes"],
        json!(["https://www.googleapis.com/auth/cloud-platform"])
    );
    assert_eq!(
        p["config"]["serviceAccount"],
        "nodes@p.iam.gserviceaccount.com"
    );

    // The cluster lists its pools (gcloud's resize reads them there).
    let c = s.gke(Method::GET, GKE_CLUSTER, None).await.body;
    assert_eq!(c["status"], "RUNNING");
    assert_eq!(c["nodePools"][0]["name"], "shared");

    let n = changed(&s.sink.take(), "shared");
    assert_eq!(n.len(), 1);
    assert_eq!(n[0].labels["cloud.google.com/gke-nodepool"], "shared");
    assert_eq!(
        n[0].labels["cloud.google.com/gke-gpu-sharing-strategy"],
        "time-sharing"
    );
    assert_eq!(
        n[0].labels["cloud.google.com/gke-max-shared-clients-per-gpu"],
        "10"
    );
    assert_eq!(n[0].gke_sharing, Some(("TIME_SHARING".to_string(), 10)));
    assert_eq!(
        (
            n[0].gpu_product.as_deref(),
            n[0].gpus_per_node,
            n[0].node_count
        ),
        (Some("NVIDIA-L4"), 1, 2)
    );
    assert!(
        n[0].taints
            .contains(&("gpu".into(), "l4".into(), "NoSchedule".into()))
    );

    // Update labels (replaces all) and the sharing config in place.
    let upd = json!({"labels": {"labels": {"team": "infra"}}, "accelerators": [{"acceleratorCount": 1, "acceleratorType": "nvidia-l4",
        "gpuSharingConfig": {"gpuSharingStrategy": "MPS", "maxSharedClientsPerGpu": 4}}]});
    let r = s
        .gke(
            Method::PUT,
            &format!("{GKE_CLUSTER}/nodePools/shared"),
            Some(&upd),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(
        s.gke(
            Method::GET,
            &format!("{GKE_CLUSTER}/nodePools/shared"),
            None
        )
        .await
        .body["status"],
        "RECONCILING"
    );
    // A second mutation while one runs: FAILED_PRECONDITION.
    let busy = s
        .gke(
            Method::POST,
            &format!("{GKE_CLUSTER}/nodePools/shared:setSize"),
            Some(&json!({"nodeCount": 3})),
        )
        .await;
    assert_eq!(busy.status, StatusCode::BAD_REQUEST);
    assert_eq!(busy.body["error"]["status"], "FAILED_PRECONDITION");
    eventually(5, || async {
        (s.gke(
            Method::GET,
            &format!("{GKE_CLUSTER}/nodePools/shared"),
            None,
        )
        .await
        .body["status"]
            == "RUNNING")
            .then_some(())
    })
    .await;
    let p = s
        .gke(
            Method::GET,
            &format!("{GKE_CLUSTER}/nodePools/shared"),
            None,
        )
        .await
        .body;
    assert_eq!(p["config"]["labels"], json!({"team": "infra"}));
    assert_eq!(
        p["config"]["accelerators"][0]["gpuSharingConfig"]["gpuSharingStrategy"],
        "MPS"
    );

    // setSize, setAutoscaling.
    let r = s
        .gke(
            Method::POST,
            &format!("{GKE_CLUSTER}/nodePools/shared:setSize"),
            Some(&json!({"nodeCount": "3"})),
        )
        .await;
    assert_eq!(r.body["operationType"], "SET_NODE_POOL_SIZE");
    eventually(5, || async {
        (s.gke(
            Method::GET,
            &format!("{GKE_CLUSTER}/nodePools/shared"),
            None,
        )
        .await
        .body["status"]
            == "RUNNING")
            .then_some(())
    })
    .await;
    assert_eq!(
        s.gke(Method::GET, GKE_CLUSTER, None).await.body["currentNodeCount"],
        3
    );
    let r = s.gke(Method::POST, &format!("{GKE_CLUSTER}/nodePools/shared:setAutoscaling"), Some(&json!({"autoscaling": {"enabled": true, "minNodeCount": 1, "maxNodeCount": "5", "locationPolicy": 2}}))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    eventually(5, || async {
        (s.gke(
            Method::GET,
            &format!("{GKE_CLUSTER}/nodePools/shared"),
            None,
        )
        .await
        .body["status"]
            == "RUNNING")
            .then_some(())
    })
    .await;
    let p = s
        .gke(
            Method::GET,
            &format!("{GKE_CLUSTER}/nodePools/shared"),
            None,
        )
        .await
        .body;
    assert_eq!(
        p["autoscaling"],
        json!({"enabled": true, "minNodeCount": 1, "maxNodeCount": 5, "locationPolicy": "ANY"})
    );

    // Delete.
    let r = s
        .gke(
            Method::DELETE,
            &format!("{GKE_CLUSTER}/nodePools/shared"),
            None,
        )
        .await;
    assert_eq!(r.body["operationType"], "DELETE_NODE_POOL");
    eventually(5, || async {
        (s.gke(
            Method::GET,
            &format!("{GKE_CLUSTER}/nodePools/shared"),
            None,
        )
        .await
        .status
            == StatusCode::NOT_FOUND)
            .then_some(())
    })
    .await;
    let gone = s
        .gke(
            Method::GET,
            &format!("{GKE_CLUSTER}/nodePools/shared"),
            None,
        )
        .await;
    assert_eq!(gone.body["error"]["status"], "NOT_FOUND");
    assert_eq!(gone.body["error"]["code"], 404);
    assert!(deleted(&s.sink.take(), "shared"));
    let ops = s
        .gke(
            Method::GET,
            "/v1/projects/sandbox-project/locations/us-central1/operations",
            None,
        )
        .await;
    assert_eq!(ops.body["operations"].as_array().map(|a| a.len()), Some(5));
}

#[tokio::test]
async fn gke_partitioned_pool_and_builtin_accelerators() {
    let s = start(0).await;
    let create = json!({"nodePool": {"name": "mig", "initialNodeCount": 1, "config": {"machineType": "a2-highgpu-1g",
        "accelerators": [{"acceleratorCount": "1", "acceleratorType": "nvidia-tesla-a100", "gpuPartitionSize": "1g.5gb"}]}}});
    let r = s
        .gke(
            Method::POST,
            &format!("{GKE_CLUSTER}/nodePools"),
            Some(&create),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    s.sb.settle();
    let n = changed(&s.sink.take(), "mig");
    assert_eq!(
        (n[0].mig_profile.as_deref(), n[0].mig_instances_per_gpu),
        (Some("1g.5gb"), 7)
    );
    assert_eq!(
        n[0].labels["cloud.google.com/gke-gpu-partition-size"],
        "1g.5gb"
    );
    assert_eq!(n[0].gpu_product.as_deref(), Some("NVIDIA-A100-SXM4-40GB"));
    // Partition size cannot change in place.
    let upd = json!({"accelerators": [{"acceleratorCount": "1", "acceleratorType": "nvidia-tesla-a100", "gpuPartitionSize": "2g.10gb"}]});
    let r = s
        .gke(
            Method::PUT,
            &format!("{GKE_CLUSTER}/nodePools/mig"),
            Some(&upd),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    // GKE fills in the GPUs of a machine type that comes with them.
    let r = s.gke(Method::POST, &format!("{GKE_CLUSTER}/nodePools"), Some(&json!({"nodePool": {"name": "ultra", "initialNodeCount": 1, "config": {"machineType": "a2-ultragpu-2g"}}}))).await;
    assert_eq!(r.status, StatusCode::OK);
    let p = s
        .gke(Method::GET, &format!("{GKE_CLUSTER}/nodePools/ultra"), None)
        .await
        .body;
    assert_eq!(
        p["config"]["accelerators"][0],
        json!({"acceleratorCount": "2", "acceleratorType": "nvidia-a100-80gb"})
    );
    assert_eq!(p["config"]["serviceAccount"], "default");
    assert_eq!(
        p["config"]["oauthScopes"].as_array().map(|a| a.len()),
        Some(6),
        "GKE's default scopes"
    );
}

#[tokio::test]
async fn gke_cluster_update_sets_pool_autoscaling() {
    let s = start(0).await;
    let r = s
        .gke(
            Method::POST,
            &format!("{GKE_CLUSTER}/nodePools"),
            Some(&json!({"nodePool": {"name": "cpu", "initialNodeCount": 1}})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let r = s.gke(Method::PUT, GKE_CLUSTER, Some(&json!({"update": {"desiredNodePoolId": "cpu", "desiredNodePoolAutoscaling": {"enabled": true, "minNodeCount": 2, "maxNodeCount": 4}}}))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    s.sb.settle();
    let p = s
        .gke(Method::GET, &format!("{GKE_CLUSTER}/nodePools/cpu"), None)
        .await
        .body;
    assert_eq!(p["autoscaling"]["minNodeCount"], 2);
    assert_eq!(
        changed(&s.sink.take(), "cpu").last().map(|n| n.node_count),
        Some(2)
    );
}

// ---------------------------------------------------------------- EKS

#[tokio::test]
async fn eks_node_group_lifecycle() {
    let s = start(200).await;
    let base = "/clusters/sandbox-eks/node-groups";
    let create = json!({"nodegroupName": "gpu", "nodeRole": "arn:aws:iam::123456789012:role/node", "subnets": ["subnet-a", "subnet-b"],
        "scalingConfig": {"minSize": 1, "maxSize": 4, "desiredSize": 2}, "instanceTypes": ["g5.xlarge"], "amiType": "AL2023_x86_64_NVIDIA",
        "labels": {"nvidia.com/device-plugin.config": "time-sliced-10"}, "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}],
        "tags": {"env": "test"}, "clientRequestToken": "tok-1"});
    let r = s.eks(Method::POST, base, Some(&create)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let ng = &r.body["nodegroup"];
    assert_eq!(ng["status"], "CREATING");
    assert!(
        ng["nodegroupArn"]
            .as_str()
            .unwrap()
            .starts_with("arn:aws:eks:us-east-1:123456789012:nodegroup/sandbox-eks/gpu/")
    );
    assert_eq!(ng["diskSize"], 20);
    // Same clientRequestToken: idempotent; another token: ResourceInUse.
    assert_eq!(
        s.eks(Method::POST, base, Some(&create)).await.status,
        StatusCode::OK
    );
    let mut other = create.clone();
    other["clientRequestToken"] = json!("tok-2");
    let r = s.eks(Method::POST, base, Some(&other)).await;
    assert_eq!(
        (r.status, r.header("x-amzn-errortype").as_deref()),
        (StatusCode::CONFLICT, Some("ResourceInUseException"))
    );

    let path = format!("{base}/gpu");
    eventually(5, || async {
        (s.eks(Method::GET, &path, None).await.body["nodegroup"]["status"] == "ACTIVE")
            .then_some(())
    })
    .await;
    let n = changed(&s.sink.take(), "gpu");
    assert_eq!(n[0].labels["eks.amazonaws.com/nodegroup"], "gpu");
    assert_eq!(
        n[0].labels["nvidia.com/device-plugin.config"],
        "time-sliced-10"
    );
    assert_eq!(n[0].labels["eks.amazonaws.com/capacityType"], "ON_DEMAND");
    assert_eq!(
        (
            n[0].node_count,
            n[0].gpus_per_node,
            n[0].gpu_product.as_deref()
        ),
        (2, 1, Some("NVIDIA-A10G"))
    );
    assert_eq!(
        n[0].taints,
        vec![(
            "nvidia.com/gpu".to_string(),
            "true".to_string(),
            "NoSchedule".to_string()
        )]
    );

    let l = s.eks(Method::GET, base, None).await;
    assert_eq!(l.body["nodegroups"], json!(["gpu"]));

    // update-config: labels, taints, scaling.
    let upd = json!({"labels": {"addOrUpdateLabels": {"nvidia.com/device-plugin.config": "time-sliced-4"}, "removeLabels": []},
        "taints": {"removeTaints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]},
        "scalingConfig": {"desiredSize": 3}});
    let r = s
        .eks(Method::POST, &format!("{path}/update-config"), Some(&upd))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(
        (
            r.body["update"]["type"].as_str(),
            r.body["update"]["status"].as_str()
        ),
        (Some("ConfigUpdate"), Some("InProgress"))
    );
    let id = r.body["update"]["id"].as_str().unwrap().to_string();
    assert_eq!(
        s.eks(Method::GET, &path, None).await.body["nodegroup"]["status"],
        "UPDATING"
    );
    let busy = s.eks(Method::DELETE, &path, None).await;
    assert_eq!(
        busy.header("x-amzn-errortype").as_deref(),
        Some("ResourceInUseException")
    );
    let upath = format!("/clusters/sandbox-eks/updates/{id}?nodegroupName=gpu");
    let u = eventually(5, || async {
        let u = s.eks(Method::GET, &upath, None).await;
        (u.body["update"]["status"] != "InProgress").then_some(u.body)
    })
    .await;
    assert_eq!(u["update"]["status"], "Successful");
    let ng = s.eks(Method::GET, &path, None).await.body;
    assert_eq!(
        ng["nodegroup"]["scalingConfig"],
        json!({"minSize": 1, "maxSize": 4, "desiredSize": 3})
    );
    assert_eq!(ng["nodegroup"]["taints"], json!([]));
    assert_eq!(
        ng["nodegroup"]["labels"]["nvidia.com/device-plugin.config"],
        "time-sliced-4"
    );
    let n = changed(&s.sink.take(), "gpu");
    assert_eq!(n.last().map(|n| n.node_count), Some(3));

    // update-version, list updates.
    let r = s
        .eks(
            Method::POST,
            &format!("{path}/update-version"),
            Some(&json!({"version": "1.33"})),
        )
        .await;
    assert_eq!(r.body["update"]["type"], "VersionUpdate");
    eventually(5, || async {
        (s.eks(Method::GET, &path, None).await.body["nodegroup"]["status"] == "ACTIVE")
            .then_some(())
    })
    .await;
    let ids = s
        .eks(
            Method::GET,
            "/clusters/sandbox-eks/updates?nodegroupName=gpu",
            None,
        )
        .await;
    assert_eq!(ids.body["updateIds"].as_array().map(|a| a.len()), Some(2));

    // Delete.
    let r = s.eks(Method::DELETE, &path, None).await;
    assert_eq!(r.body["nodegroup"]["status"], "DELETING");
    eventually(5, || async {
        (s.eks(Method::GET, &path, None).await.status == StatusCode::NOT_FOUND).then_some(())
    })
    .await;
    let r = s.eks(Method::GET, &path, None).await;
    assert_eq!(
        r.header("x-amzn-errortype").as_deref(),
        Some("ResourceNotFoundException")
    );
    assert_eq!(r.body["message"], "No node group found for name: gpu.");
    assert!(deleted(&s.sink.take(), "gpu"));
    // Clusters.
    let c = s.eks(Method::GET, "/clusters/sandbox-eks", None).await;
    assert_eq!(
        (
            c.body["cluster"]["status"].as_str(),
            c.body["cluster"]["version"].as_str()
        ),
        (Some("ACTIVE"), Some("1.33"))
    );
    assert_eq!(
        s.eks(Method::GET, "/clusters", None).await.body["clusters"],
        json!(["sandbox-eks"])
    );
}

#[tokio::test]
async fn eks_list_paginates_and_region_selects_cluster() {
    let s = start(0).await;
    for i in 0..5 {
        let r = s.eks(Method::POST, "/clusters/sandbox-eks/node-groups", Some(&json!({"nodegroupName": format!("ng{i}"), "nodeRole": "arn:aws:iam::123456789012:role/n", "subnets": ["subnet-1"]}))).await;
        assert_eq!(r.status, StatusCode::OK);
    }
    let p1 = s
        .eks(
            Method::GET,
            "/clusters/sandbox-eks/node-groups?maxResults=2",
            None,
        )
        .await
        .body;
    assert_eq!(p1["nodegroups"], json!(["ng0", "ng1"]));
    let tok = p1["nextToken"].as_str().unwrap();
    let p2 = s
        .eks(
            Method::GET,
            &format!("/clusters/sandbox-eks/node-groups?maxResults=2&nextToken={tok}"),
            None,
        )
        .await
        .body;
    assert_eq!(p2["nodegroups"], json!(["ng2", "ng3"]));
    // Defaults as EKS applies them.
    let ng = s
        .eks(Method::GET, "/clusters/sandbox-eks/node-groups/ng0", None)
        .await
        .body;
    assert_eq!(ng["nodegroup"]["instanceTypes"], json!(["t3.medium"]));
    assert_eq!(ng["nodegroup"]["amiType"], "AL2023_x86_64_STANDARD");
    assert_eq!(
        ng["nodegroup"]["scalingConfig"],
        json!({"minSize": 2, "maxSize": 2, "desiredSize": 2})
    );
    // Another region has no such cluster.
    let r = s
        .call(
            Method::GET,
            "/clusters/sandbox-eks/node-groups",
            &eks_headers("eu-west-1"),
            b"",
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(
        r.header("x-amzn-errortype").as_deref(),
        Some("ResourceNotFoundException")
    );
}

// ---------------------------------------------------------------- faults

async fn arm_fault(s: &Srv, fault: Value) {
    let r = s
        .call(
            Method::POST,
            "/_sandbox/faults",
            &[],
            fault.to_string().as_bytes(),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
}

#[tokio::test]
async fn faults_answer_in_each_clouds_shape_then_stop() {
    let s = start(0).await;
    let tok = s.azure_token().await;
    let aks = format!("{}?{API}", aks_pools("sandbox-aks"));
    arm_fault(&s, json!({"match": {"path_contains": "/agentPools"}, "count": 2, "kind": "429", "retry_after": 7})).await;
    for _ in 0..2 {
        let r = s.arm(&tok, Method::GET, &aks, None).await;
        assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.header("retry-after").as_deref(), Some("7"));
        assert_eq!(r.body["error"]["code"], "TooManyRequests");
    }
    assert_eq!(
        s.arm(&tok, Method::GET, &aks, None).await.status,
        StatusCode::OK,
        "count exhausted"
    );

    arm_fault(
        &s,
        json!({"match": {"method": "GET", "path_contains": "/nodePools"}, "kind": "503"}),
    )
    .await;
    let r = s
        .gke(Method::GET, &format!("{GKE_CLUSTER}/nodePools"), None)
        .await;
    assert_eq!(
        (
            r.status,
            r.body["error"]["status"].as_str(),
            r.body["error"]["code"].as_u64()
        ),
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Some("UNAVAILABLE"),
            Some(503)
        )
    );

    arm_fault(
        &s,
        json!({"match": {"path_contains": "/clusters/sandbox-eks"}, "kind": "500"}),
    )
    .await;
    let r = s
        .eks(Method::GET, "/clusters/sandbox-eks/node-groups", None)
        .await;
    assert_eq!(
        (r.status, r.header("x-amzn-errortype").as_deref()),
        (StatusCode::INTERNAL_SERVER_ERROR, Some("ServerException"))
    );
    assert!(r.body["message"].is_string());

    // The method filter: a POST does not consume a GET-only fault.
    arm_fault(
        &s,
        json!({"match": {"method": "GET", "path_contains": "/node-groups"}, "kind": "429"}),
    )
    .await;
    let r = s.eks(Method::POST, "/clusters/sandbox-eks/node-groups", Some(&json!({"nodegroupName": "x", "nodeRole": "arn:aws:iam::1:role/r", "subnets": ["subnet-1"]}))).await;
    assert_eq!(r.status, StatusCode::OK);
    let listed = s.call(Method::GET, "/_sandbox/faults", &[], b"").await;
    assert_eq!(listed.body["faults"].as_array().map(|a| a.len()), Some(1));
    assert_eq!(
        s.call(Method::DELETE, "/_sandbox/faults", &[], b"")
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(
        s.eks(Method::GET, "/clusters/sandbox-eks/node-groups", None)
            .await
            .status,
        StatusCode::OK
    );

    // Bad fault definitions are refused.
    let r = s
        .call(Method::POST, "/_sandbox/faults", &[], br#"{"kind": "418"}"#)
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn drop_and_slow_faults() {
    let s = start(0).await;
    arm_fault(
        &s,
        json!({"match": {"path_contains": "/v1/"}, "kind": "drop"}),
    )
    .await;
    let r = s.try_call(Method::GET, GKE_CLUSTER, &[], b"").await;
    assert!(
        r.is_err(),
        "connection should be cut, got {:?}",
        r.map(|r| r.status)
    );
    assert_eq!(
        s.gke(Method::GET, GKE_CLUSTER, None).await.status,
        StatusCode::OK
    );

    arm_fault(
        &s,
        json!({"match": {"path_contains": "/v1/"}, "kind": "slow", "delay_ms": 400}),
    )
    .await;
    let t = Instant::now();
    assert_eq!(
        s.gke(Method::GET, GKE_CLUSTER, None).await.status,
        StatusCode::OK
    );
    assert!(t.elapsed() >= Duration::from_millis(400));
}

#[tokio::test]
async fn fail_operation_fault_ends_operations_failed_in_each_cloud() {
    let s = start(0).await;
    let tok = s.azure_token().await;
    arm_fault(&s, json!({"match": {"method": "PUT", "path_contains": "/agentPools/"}, "kind": "fail_operation"})).await;
    let pool = format!("{}/bad1?{API}", aks_pools("sandbox-aks"));
    let r = s
        .arm(
            &tok,
            Method::PUT,
            &pool,
            Some(&json!({"properties": {"vmSize": "Standard_D4s_v5"}})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    let op = s
        .arm(
            &tok,
            Method::GET,
            &r.header("azure-asyncoperation").unwrap(),
            None,
        )
        .await
        .body;
    assert_eq!(op["status"], "Failed");
    assert_eq!(op["error"]["code"], "AllocationFailed");
    assert_eq!(
        s.arm(&tok, Method::GET, &pool, None).await.body["properties"]["provisioningState"],
        "Failed"
    );

    arm_fault(&s, json!({"match": {"method": "POST", "path_contains": "/nodePools"}, "kind": "fail_operation"})).await;
    let r = s
        .gke(
            Method::POST,
            &format!("{GKE_CLUSTER}/nodePools"),
            Some(&json!({"nodePool": {"name": "bad", "initialNodeCount": 1}})),
        )
        .await;
    let op = s
        .gke(
            Method::GET,
            &format!(
                "/v1/projects/sandbox-project/locations/us-central1/operations/{}",
                r.body["name"].as_str().unwrap()
            ),
            None,
        )
        .await
        .body;
    assert_eq!(op["status"], "DONE");
    assert_eq!(op["error"]["code"], 8);
    assert_eq!(
        s.gke(Method::GET, &format!("{GKE_CLUSTER}/nodePools/bad"), None)
            .await
            .body["status"],
        "ERROR"
    );

    arm_fault(
        &s,
        json!({"match": {"path_contains": "/node-groups"}, "kind": "fail_operation"}),
    )
    .await;
    s.eks(Method::POST, "/clusters/sandbox-eks/node-groups", Some(&json!({"nodegroupName": "bad", "nodeRole": "arn:aws:iam::1:role/r", "subnets": ["subnet-1"]}))).await;
    let ng = s
        .eks(Method::GET, "/clusters/sandbox-eks/node-groups/bad", None)
        .await
        .body;
    assert_eq!(ng["nodegroup"]["status"], "CREATE_FAILED");
    assert_eq!(
        ng["nodegroup"]["health"]["issues"][0]["code"],
        "AsgInstanceLaunchFailures"
    );
    // No nodes for failed pools.
    assert!(
        s.sink
            .take()
            .iter()
            .all(|e| !matches!(e, NodeEvent::Changed(_)))
    );
}

#[tokio::test]
async fn failed_update_keeps_the_previous_spec() {
    let s = start(0).await;
    s.eks(Method::POST, "/clusters/sandbox-eks/node-groups", Some(&json!({"nodegroupName": "ng", "nodeRole": "arn:aws:iam::1:role/r", "subnets": ["subnet-1"]}))).await;
    arm_fault(
        &s,
        json!({"match": {"path_contains": "update-config"}, "kind": "fail_operation"}),
    )
    .await;
    let r = s
        .eks(
            Method::POST,
            "/clusters/sandbox-eks/node-groups/ng/update-config",
            Some(&json!({"scalingConfig": {"maxSize": 5, "desiredSize": 4}})),
        )
        .await;
    let id = r.body["update"]["id"].as_str().unwrap().to_string();
    let u = s
        .eks(
            Method::GET,
            &format!("/clusters/sandbox-eks/updates/{id}"),
            None,
        )
        .await
        .body;
    assert_eq!(u["update"]["status"], "Failed");
    assert_eq!(
        u["update"]["errors"][0]["errorCode"],
        "AsgInstanceLaunchFailures"
    );
    let ng = s
        .eks(Method::GET, "/clusters/sandbox-eks/node-groups/ng", None)
        .await
        .body;
    assert_eq!(
        (
            ng["nodegroup"]["status"].as_str(),
            ng["nodegroup"]["scalingConfig"]["desiredSize"].as_i64()
        ),
        (Some("ACTIVE"), Some(2))
    );
}

// ---------------------------------------------------------------- inventory, timers, persistence

#[tokio::test]
async fn inventory_lists_every_pool_of_every_cloud() {
    let s = start(0).await;
    let tok = s.azure_token().await;
    s.arm(
        &tok,
        Method::PUT,
        &format!("{}/b?{API}", aks_pools("sandbox-aks")),
        Some(&json!({"properties": {}})),
    )
    .await;
    s.arm(
        &tok,
        Method::PUT,
        &format!("{}/a?{API}", aks_pools("sandbox-aks")),
        Some(&json!({"properties": {}})),
    )
    .await;
    s.gke(
        Method::POST,
        &format!("{GKE_CLUSTER}/nodePools"),
        Some(&json!({"nodePool": {"name": "g", "initialNodeCount": 1}})),
    )
    .await;
    s.eks(Method::POST, "/clusters/sandbox-eks/node-groups", Some(&json!({"nodegroupName": "e", "nodeRole": "arn:aws:iam::1:role/r", "subnets": ["subnet-1"]}))).await;
    let inv = s
        .call(Method::GET, "/_sandbox/inventory", &[], b"")
        .await
        .body;
    let clusters: Vec<(&str, &str)> = inv["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["cloud"].as_str().unwrap(), c["name"].as_str().unwrap()))
        .collect();
    assert_eq!(
        clusters,
        vec![
            ("aks", "sandbox-aks"),
            ("gke", "sandbox-gke"),
            ("eks", "sandbox-eks")
        ]
    );
    let pools: Vec<(&str, &str, &str)> = inv["pools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["cloud"].as_str().unwrap(),
                p["name"].as_str().unwrap(),
                p["state"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        pools,
        vec![
            ("aks", "a", "Succeeded"),
            ("aks", "b", "Succeeded"),
            ("gke", "g", "RUNNING"),
            ("eks", "e", "ACTIVE")
        ]
    );
    assert_eq!(inv["pools"][3]["resource"]["nodegroupName"], "e");
    assert_eq!(inv, s.sb.inventory(), "stable");
}

#[tokio::test]
async fn timers_settle_operations_without_requests() {
    let s = start(150).await;
    s.eks(Method::POST, "/clusters/sandbox-eks/node-groups", Some(&json!({"nodegroupName": "t", "nodeRole": "arn:aws:iam::1:role/r", "subnets": ["subnet-1"]}))).await;
    assert!(s.sink.take().is_empty(), "not before the operation time");
    let ev = eventually(5, || async {
        let e = s.sink.take();
        (!e.is_empty()).then_some(e)
    })
    .await;
    assert_eq!(changed(&ev, "t").len(), 1);
}

#[tokio::test]
async fn zero_operation_time_settles_on_next_read() {
    let s = start(0).await;
    let tok = s.azure_token().await;
    let pool = format!("{}/fast?{API}", aks_pools("sandbox-aks"));
    let r = s
        .arm(
            &tok,
            Method::PUT,
            &pool,
            Some(&json!({"properties": {"count": 1}})),
        )
        .await;
    assert_eq!(r.body["properties"]["provisioningState"], "Creating");
    assert_eq!(r.header("retry-after").as_deref(), Some("0"));
    assert_eq!(
        s.arm(&tok, Method::GET, &pool, None).await.body["properties"]["provisioningState"],
        "Succeeded"
    );
}

#[tokio::test]
async fn state_file_survives_restart_and_is_written_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("world.json");
    let cfg = || Config {
        op_time: Duration::from_secs(3600),
        state_file: Some(file.clone()),
        ..Config::default()
    };
    let tok;
    {
        let s = start_with(cfg()).await;
        tok = s.azure_token().await;
        let r = s
            .arm(
                &tok,
                Method::PUT,
                &format!("{}/keep?{API}", aks_pools("sandbox-aks")),
                Some(&json!({"properties": {"count": 3}})),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED);
        s.gke(
            Method::POST,
            &format!("{GKE_CLUSTER}/nodePools"),
            Some(&json!({"nodePool": {"name": "keep", "initialNodeCount": 1}})),
        )
        .await;
        let saved: Value =
            serde_json::from_slice(&std::fs::read(&file).unwrap()).expect("valid JSON on disk");
        assert!(saved["aks"]["clusters"].is_object());
    }
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name())
        .collect();
    assert_eq!(leftovers.len(), 1, "no temporary files left: {leftovers:?}");
    // A new process restores the world, its tokens and the in-flight operations.
    let s = start_with(cfg()).await;
    let g = s
        .arm(
            &tok,
            Method::GET,
            &format!("{}/keep?{API}", aks_pools("sandbox-aks")),
            None,
        )
        .await;
    assert_eq!(g.status, StatusCode::OK, "{}", g.text);
    assert_eq!(
        (
            g.body["properties"]["count"].as_i64(),
            g.body["properties"]["provisioningState"].as_str()
        ),
        (Some(3), Some("Creating"))
    );
    assert_eq!(
        s.gke(Method::GET, &format!("{GKE_CLUSTER}/nodePools/keep"), None)
            .await
            .status,
        StatusCode::OK
    );
    drop(s);
    // A corrupt file is an error, not a silently empty world.
    std::fs::write(&file, b"{not json").unwrap();
    assert!(Sandbox::open(cfg()).is_err());
}

#[tokio::test]
async fn garbage_never_panics_or_500s() {
    let s = start(0).await;
    let tok = s.azure_token().await;
    let auth = format!("Bearer {tok}");
    let paths = [
        format!("{}/p?{API}", aks_pools("sandbox-aks")),
        format!("{}?{API}", aks_pools("sandbox-aks")),
        format!("{GKE_CLUSTER}/nodePools"),
        format!("{GKE_CLUSTER}/nodePools/p"),
        format!("{GKE_CLUSTER}/nodePools/p:setSize"),
        GKE_CLUSTER.to_string(),
        "/clusters/sandbox-eks/node-groups".to_string(),
        "/clusters/sandbox-eks/node-groups/p/update-config".to_string(),
        "/clusters/sandbox-eks/updates/x".to_string(),
        "/t/oauth2/v2.0/token".to_string(),
        "/_sandbox/faults".to_string(),
        "/subscriptions/%ZZ/%%/x?api-version=%".to_string(),
    ];
    let bodies: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"null".to_vec(),
        b"[1,2]".to_vec(),
        b"{\"properties\": []}".to_vec(),
        b"{\"nodePool\": {\"name\": 5, \"config\": {\"accelerators\": {}}}}".to_vec(),
        b"{\"nodePool\": {\"name\": \"x\", \"initialNodeCount\": \"99999999999999999999\"}}"
            .to_vec(),
        b"{\"nodegroupName\": \"\xff\xfe\"}".to_vec(),
        b"{\"scalingConfig\": {\"minSize\": -9223372036854775808}, \"labels\": 3}".to_vec(),
        b"{\"properties\": {\"count\": 1e400, \"nodeTaints\": [null]}}".to_vec(),
        (0..512).map(|_| fastrand::u8(..)).collect(),
    ];
    let mut seen = 0;
    for p in &paths {
        for m in [
            Method::GET,
            Method::PUT,
            Method::POST,
            Method::DELETE,
            Method::PATCH,
        ] {
            for b in &bodies {
                let headers = eks_headers("us-east-1");
                let h = [("authorization", auth.as_str()), headers[1], headers[2]];
                let hdrs: &[(&str, &str)] = if p.starts_with("/clusters") {
                    &headers
                } else {
                    &h
                };
                let r = s.call(m.clone(), p, hdrs, b).await;
                assert!(
                    r.status.as_u16() < 500,
                    "{m} {p} -> {} {}",
                    r.status,
                    r.text
                );
                assert!(
                    r.status.is_success() || r.text.starts_with('{'),
                    "{m} {p}: error bodies are JSON: {}",
                    r.text
                );
                seen += 1;
            }
        }
    }
    assert_eq!(seen, paths.len() * 5 * bodies.len());
}

// ---------------------------------------------------------------- bad requests

struct Case {
    api: &'static str,
    method: Method,
    path: String,
    body: String,
    status: u16,
    code: &'static str,
}

fn case(
    api: &'static str,
    method: Method,
    path: impl Into<String>,
    body: Value,
    status: u16,
    code: &'static str,
) -> Case {
    let body = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    Case {
        api,
        method,
        path: path.into(),
        body,
        status,
        code,
    }
}

fn raw(
    api: &'static str,
    method: Method,
    path: impl Into<String>,
    body: &str,
    status: u16,
    code: &'static str,
) -> Case {
    Case {
        api,
        method,
        path: path.into(),
        body: body.to_string(),
        status,
        code,
    }
}

#[tokio::test]
async fn bad_requests_get_the_real_status_and_error_shape() {
    let s = start(0).await;
    let tok = s.azure_token().await;
    // Fixtures for conflicts and updates.
    assert_eq!(
        s.gke(
            Method::POST,
            &format!("{GKE_CLUSTER}/nodePools"),
            Some(&json!({"nodePool": {"name": "dup", "initialNodeCount": 1}}))
        )
        .await
        .status,
        StatusCode::OK
    );
    let ng = json!({"nodegroupName": "dup", "nodeRole": "arn:aws:iam::123456789012:role/n", "subnets": ["subnet-1"]});
    assert_eq!(
        s.eks(Method::POST, "/clusters/sandbox-eks/node-groups", Some(&ng))
            .await
            .status,
        StatusCode::OK
    );

    let pool = |name: &str| format!("{}/{name}?{API}", aks_pools("sandbox-aks"));
    let props = |p: Value| json!({ "properties": p });
    let np = |p: Value| json!({ "nodePool": p });
    let nps = format!("{GKE_CLUSTER}/nodePools");
    let a100 = |extra: Value| {
        let mut a = json!({"acceleratorCount": "1", "acceleratorType": "nvidia-tesla-a100"});
        for (k, v) in extra.as_object().unwrap() {
            a[k] = v.clone();
        }
        np(
            json!({"name": "p", "initialNodeCount": 1, "config": {"machineType": "a2-highgpu-1g", "accelerators": [a]}}),
        )
    };
    let ngs = "/clusters/sandbox-eks/node-groups";
    let eks_ng = |extra: Value| {
        let mut b = json!({"nodegroupName": "n1", "nodeRole": "arn:aws:iam::123456789012:role/n", "subnets": ["subnet-1"]});
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        b
    };
    use Method as M;
    let cases = vec![
        // ---- ARM
        case(
            "arm",
            M::PUT,
            pool("Bad_Name"),
            props(json!({})),
            400,
            "InvalidParameter",
        ),
        case(
            "arm",
            M::PUT,
            pool("abcdefghijklm"),
            props(json!({})),
            400,
            "InvalidParameter",
        ),
        case(
            "arm",
            M::PUT,
            pool("winpool1"),
            props(json!({"osType": "Windows"})),
            400,
            "InvalidParameter",
        ),
        case(
            "arm",
            M::PUT,
            pool("p"),
            props(json!({"osType": "Mac"})),
            400,
            "InvalidParameter",
        ),
        case(
            "arm",
            M::PUT,
            pool("p"),
            props(json!({"osSKU": "Debian"})),
            400,
            "InvalidParameter",
        ),
        case(
            "arm",
            M::PUT,
            pool("p"),
            props(json!({"osSKU": "Windows2022"})),
            400,
            "InvalidParameter",
        ),
        case(
            "arm",
            M::PUT,
            pool("p"),
            props(json!({"scaleSetPriority": "Cheap"})),
            400,
            "InvalidParameter",
        ),
        case(
            "arm",
            M::PUT,
            pool("p"),
            props(json!({"scaleSetEvictionPolicy": "Delete"})),
            400,
            "InvalidParameter",
        ),
        case(
            "arm",
            M::PUT,
            pool("p"),
            props(json!({"mode": "Worker"})),
            400,
            "InvalidParameter",
        ),
        case(
            "arm",
            M::PUT,
            pool("p"),
            props(json!({"vmSize": "Standard_NC24ads_A100_v4", "gpuInstanceProfile": "MIG5g"})),
            400,
            "InvalidParameter",
        ),
        case(
            "arm",
            M::PUT,
            pool("p"),
            props(json!({"vmSize": "Standard_NC4as_T4_v3", "gpuInstanceProfile": "MIG1g"})),
            400,
            "InvalidParameter",
        ),
        case(
            "arm",
            M::PUT,
            pool("p"),
            props(
                json!({"vmSize": "Standard_NC24ads_A100_v4", "gpuInstanceProfile": "MIG1g", "osSKU": "AzureLinux"}),
            ),
            400,
            "InvalidParameter",
        ),
        case(
            "arm",
            M::PUT,
            pool("p"),
            props(json!({"count": 1001})),
            400,
            "InvalidParameter",
        ),
        case(
            "arm",
            M::PUT,
            pool("p"),
            props(json!({"count": -1})),
            400,
            "InvalidParameter",
        ),
        case(
            "arm",
            M::PUT,
            pool("p"),
            props(json!({"enableAutoScaling": true, "minCount": 5, "maxCount": 2})),
            400,
            "InvalidParameter",
        ),
        case(
            "arm",
            M::PUT,
            pool("p"),
            props(json!({"enableAutoScaling": true})),
            400,
            "InvalidParameter",
        ),
        case(
            "arm",
            M::PUT,
            pool("p"),
            props(json!({"minCount": 1, "maxCount": 2})),
            400,
            "InvalidParameter",
        ),
        case(
            "arm",
            M::PUT,
            pool("p"),
            props(json!({"enableAutoScaling": true, "minCount": 1, "maxCount": 2, "count": 5})),
            400,
            "InvalidParameter",
        ),
        case(
            "arm",
            M::PUT,
            pool("p"),
            props(json!({"vmSize": "Standard_Imaginary_v9"})),
            400,
            "VMSizeNotSupported",
        ),
        case(
            "arm",
            M::PUT,
            pool("p"),
            props(json!({"count": "two"})),
            400,
            "InvalidRequestContent",
        ),
        raw(
            "arm",
            M::PUT,
            pool("p"),
            "{not json",
            400,
            "InvalidRequestContent",
        ),
        case(
            "arm",
            M::PUT,
            pool("p"),
            props(json!({"nodeTaints": ["novalue"]})),
            400,
            "InvalidParameter",
        ),
        case(
            "arm",
            M::PUT,
            pool("p"),
            props(json!({"nodeTaints": ["a=b:Sometimes"]})),
            400,
            "InvalidParameter",
        ),
        case(
            "arm",
            M::PUT,
            pool("p"),
            props(json!({"nodeLabels": {"kubernetes.azure.com/mode": "x"}})),
            400,
            "InvalidParameter",
        ),
        case(
            "arm",
            M::PUT,
            pool("p"),
            props(json!({"scaleSetPriority": "Spot", "spotMaxPrice": -5})),
            400,
            "InvalidParameter",
        ),
        case(
            "arm",
            M::PUT,
            pool("p"),
            props(json!({"osDiskSizeGB": 10})),
            400,
            "InvalidParameter",
        ),
        case(
            "arm",
            M::PUT,
            pool("p"),
            props(json!({"mode": "System", "count": 0})),
            400,
            "InvalidParameter",
        ),
        case(
            "arm",
            M::PUT,
            pool("p"),
            props(json!({"orchestratorVersion": "1.20.0"})),
            400,
            "AgentPoolK8sVersionNotSupported",
        ),
        case(
            "arm",
            M::PUT,
            pool("p"),
            props(json!({"maxPods": 5})),
            400,
            "InvalidParameter",
        ),
        case(
            "arm",
            M::GET,
            aks_pools("sandbox-aks"),
            Value::Null,
            400,
            "MissingApiVersionParameter",
        ),
        case(
            "arm",
            M::GET,
            format!("{}?api-version=2024-05-01", aks_pools("sandbox-aks")),
            Value::Null,
            400,
            "NoRegisteredProviderFound",
        ),
        case(
            "arm",
            M::GET,
            format!("{}?api-version=latest", aks_pools("sandbox-aks")),
            Value::Null,
            400,
            "InvalidApiVersionParameter",
        ),
        case(
            "arm",
            M::GET,
            format!("{}?{API}", aks_pools("no-such-cluster")),
            Value::Null,
            404,
            "ResourceNotFound",
        ),
        case(
            "arm",
            M::GET,
            format!(
                "/subscriptions/{SUB}/resourceGroups/nope/providers/Microsoft.ContainerService/managedClusters/sandbox-aks/agentPools?{API}"
            ),
            Value::Null,
            404,
            "ResourceGroupNotFound",
        ),
        case("arm", M::GET, pool("absent"), Value::Null, 404, "NotFound"),
        case(
            "arm",
            M::POST,
            pool("p"),
            props(json!({})),
            405,
            "MethodNotAllowed",
        ),
        // ---- GKE
        case(
            "gke",
            M::POST,
            &nps,
            json!({"parent": "x"}),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "gke",
            M::POST,
            &nps,
            np(json!({"name": "Bad", "initialNodeCount": 1})),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "gke",
            M::POST,
            &nps,
            np(json!({"name": "a".repeat(41), "initialNodeCount": 1})),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "gke",
            M::POST,
            &nps,
            np(json!({"name": "p", "initialNodeCount": 1, "config": {"machineType": "z9-mega-1"}})),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "gke",
            M::POST,
            &nps,
            np(
                json!({"name": "p", "initialNodeCount": 1, "config": {"machineType": "n1-standard-4", "accelerators": [{"acceleratorCount": 1, "acceleratorType": "nvidia-tesla-k9000"}]}}),
            ),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "gke",
            M::POST,
            &nps,
            a100(json!({"gpuPartitionSize": "1g.10gb"})),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "gke",
            M::POST,
            &nps,
            np(
                json!({"name": "p", "initialNodeCount": 1, "config": {"machineType": "g2-standard-8", "accelerators": [{"acceleratorCount": 1, "acceleratorType": "nvidia-l4", "gpuPartitionSize": "1g.5gb"}]}}),
            ),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "gke",
            M::POST,
            &nps,
            a100(
                json!({"gpuSharingConfig": {"gpuSharingStrategy": "TIME_SHARING", "maxSharedClientsPerGpu": "49"}}),
            ),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "gke",
            M::POST,
            &nps,
            a100(
                json!({"gpuSharingConfig": {"gpuSharingStrategy": 7, "maxSharedClientsPerGpu": 2}}),
            ),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "gke",
            M::POST,
            &nps,
            a100(
                json!({"gpuPartitionSize": "1g.5gb", "gpuSharingConfig": {"gpuSharingStrategy": "MPS", "maxSharedClientsPerGpu": 2}}),
            ),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "gke",
            M::POST,
            &nps,
            a100(json!({"acceleratorCount": "2"})),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "gke",
            M::POST,
            &nps,
            np(
                json!({"name": "p", "initialNodeCount": 1, "config": {"machineType": "g2-standard-8", "accelerators": [{"acceleratorCount": 1, "acceleratorType": "nvidia-tesla-t4"}]}}),
            ),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "gke",
            M::POST,
            &nps,
            np(
                json!({"name": "p", "initialNodeCount": 1, "autoscaling": {"enabled": true, "minNodeCount": 5, "maxNodeCount": 2}}),
            ),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "gke",
            M::POST,
            &nps,
            np(
                json!({"name": "p", "initialNodeCount": 1, "autoscaling": {"enabled": true, "minNodeCount": 1, "totalMaxNodeCount": 2}}),
            ),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "gke",
            M::POST,
            &nps,
            np(
                json!({"name": "p", "initialNodeCount": 1, "config": {"taints": [{"key": "a", "value": "b"}]}}),
            ),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "gke",
            M::POST,
            &nps,
            np(json!({"name": "p", "initialNodeCount": 0})),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "gke",
            M::POST,
            &nps,
            np(json!({"name": "p", "initialNodeCount": "abc"})),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "gke",
            M::POST,
            &nps,
            np(json!({"name": "dup", "initialNodeCount": 1})),
            409,
            "ALREADY_EXISTS",
        ),
        case(
            "gke",
            M::POST,
            "/v1/projects/sandbox-project/locations/us-central1/clusters/nope/nodePools",
            np(json!({"name": "p", "initialNodeCount": 1})),
            404,
            "NOT_FOUND",
        ),
        case(
            "gke",
            M::POST,
            format!("{nps}/dup:setSize"),
            json!({"nodeCount": -1}),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "gke",
            M::GET,
            "/v1/projects/sandbox-project/locations/us-central1/operations/operation-nope",
            Value::Null,
            404,
            "NOT_FOUND",
        ),
        case(
            "gke",
            M::POST,
            format!("{nps}/dup:frobnicate"),
            json!({}),
            405,
            "UNIMPLEMENTED",
        ),
        // ---- EKS
        case(
            "eks",
            M::POST,
            ngs,
            json!({"nodegroupName": "n1", "subnets": ["subnet-1"]}),
            400,
            "InvalidParameterException",
        ),
        case(
            "eks",
            M::POST,
            ngs,
            eks_ng(json!({"nodegroupName": "-bad"})),
            400,
            "InvalidParameterException",
        ),
        case(
            "eks",
            M::POST,
            ngs,
            eks_ng(json!({"scalingConfig": {"minSize": 3, "maxSize": 2, "desiredSize": 2}})),
            400,
            "InvalidParameterException",
        ),
        case(
            "eks",
            M::POST,
            ngs,
            eks_ng(json!({"scalingConfig": {"minSize": 1, "maxSize": 2, "desiredSize": 3}})),
            400,
            "InvalidParameterException",
        ),
        case(
            "eks",
            M::POST,
            ngs,
            eks_ng(json!({"scalingConfig": {"minSize": 2, "maxSize": 4, "desiredSize": 1}})),
            400,
            "InvalidParameterException",
        ),
        case(
            "eks",
            M::POST,
            ngs,
            eks_ng(json!({"taints": [{"key": "a", "value": "b", "effect": "NoSchedule"}]})),
            400,
            "InvalidParameterException",
        ),
        case(
            "eks",
            M::POST,
            ngs,
            eks_ng(json!({"amiType": "UBUNTU"})),
            400,
            "InvalidParameterException",
        ),
        case(
            "eks",
            M::POST,
            ngs,
            eks_ng(json!({"instanceTypes": ["p9.huge"]})),
            400,
            "InvalidParameterException",
        ),
        case(
            "eks",
            M::POST,
            ngs,
            eks_ng(json!({"capacityType": "CHEAP"})),
            400,
            "InvalidParameterException",
        ),
        case(
            "eks",
            M::POST,
            ngs,
            eks_ng(json!({"subnets": []})),
            400,
            "InvalidParameterException",
        ),
        case(
            "eks",
            M::POST,
            ngs,
            eks_ng(json!({"tags": {"aws:owner": "me"}})),
            400,
            "InvalidParameterException",
        ),
        case(
            "eks",
            M::POST,
            ngs,
            eks_ng(json!({"scalingConfig": {"minSize": 1, "maxSize": 100000, "desiredSize": 1}})),
            400,
            "InvalidParameterException",
        ),
        case(
            "arm",
            M::PUT,
            pool("p"),
            props(json!({"gpuProfile": {"driver": "Maybe"}})),
            400,
            "InvalidParameter",
        ),
        case(
            "eks",
            M::POST,
            ngs,
            eks_ng(json!({"nodeRole": "node-role"})),
            400,
            "InvalidParameterException",
        ),
        case(
            "eks",
            M::POST,
            ngs,
            eks_ng(json!({"amiType": "AL2023_x86_64_NVIDIA", "instanceTypes": ["t3.medium"]})),
            400,
            "InvalidParameterException",
        ),
        case(
            "eks",
            M::POST,
            ngs,
            eks_ng(
                json!({"taints": (0..51).map(|i| json!({"key": format!("k{i}"), "effect": "NO_SCHEDULE"})).collect::<Vec<_>>()}),
            ),
            400,
            "InvalidParameterException",
        ),
        case(
            "eks",
            M::POST,
            ngs,
            eks_ng(json!({"nodegroupName": "dup"})),
            409,
            "ResourceInUseException",
        ),
        case(
            "eks",
            M::POST,
            "/clusters/nope/node-groups",
            eks_ng(json!({})),
            404,
            "ResourceNotFoundException",
        ),
        case(
            "eks",
            M::GET,
            format!("{ngs}/absent"),
            Value::Null,
            404,
            "ResourceNotFoundException",
        ),
        case(
            "eks",
            M::POST,
            format!("{ngs}/dup/update-config"),
            json!({}),
            400,
            "InvalidParameterException",
        ),
        case(
            "eks",
            M::POST,
            format!("{ngs}/dup/update-config"),
            json!({"labels": {"addOrUpdateLabels": {"a": "b"}, "removeLabels": ["a"]}}),
            400,
            "InvalidParameterException",
        ),
        case(
            "eks",
            M::POST,
            format!("{ngs}/dup/update-config"),
            json!({"scalingConfig": {"desiredSize": 9}}),
            400,
            "InvalidParameterException",
        ),
        case(
            "eks",
            M::POST,
            format!("{ngs}/dup/update-version"),
            json!({"version": "1.40"}),
            400,
            "InvalidParameterException",
        ),
        case(
            "eks",
            M::GET,
            format!("{ngs}?maxResults=500"),
            Value::Null,
            400,
            "InvalidParameterException",
        ),
        case(
            "eks",
            M::GET,
            "/clusters/sandbox-eks/updates/0000",
            Value::Null,
            404,
            "ResourceNotFoundException",
        ),
        case(
            "eks-noauth",
            M::GET,
            ngs,
            Value::Null,
            403,
            "MissingAuthenticationTokenException",
        ),
        case(
            "eks-s3",
            M::GET,
            ngs,
            Value::Null,
            403,
            "InvalidSignatureException",
        ),
        case(
            "eks-nodate",
            M::GET,
            ngs,
            Value::Null,
            403,
            "IncompleteSignatureException",
        ),
        // ---- Azure AD
        raw(
            "aad",
            M::POST,
            "/t/oauth2/v2.0/token",
            "client_id=a&client_secret=b",
            400,
            "invalid_request",
        ),
        raw(
            "aad",
            M::POST,
            "/t/oauth2/v2.0/token",
            "grant_type=client_credentials&client_id=a&client_secret=b&scope=https%3A%2F%2Fmanagement.azure.com",
            400,
            "invalid_scope",
        ),
    ];
    assert!(cases.len() >= 80, "{} cases", cases.len());
    let auth = format!("Bearer {tok}");
    let mut failures = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let eks = eks_headers("us-east-1");
        let s3: &'static str = Box::leak(eks[0].1.replace("/eks/", "/s3/").into_boxed_str());
        let headers: Vec<(&str, &str)> = match c.api {
            "arm" => vec![
                ("authorization", &auth),
                ("content-type", "application/json"),
            ],
            "gke" => vec![("content-type", "application/json")],
            "eks" => eks.to_vec(),
            "eks-noauth" => vec![eks[1]],
            "eks-s3" => vec![("authorization", s3), eks[1]],
            "eks-nodate" => vec![eks[0]],
            _ => vec![("content-type", "application/x-www-form-urlencoded")],
        };
        let r = s
            .call(c.method.clone(), &c.path, &headers, c.body.as_bytes())
            .await;
        let got = match c.api {
            "arm" => r.body["error"]["code"].as_str().map(str::to_string),
            "gke" => {
                // google.rpc: numeric code equals the HTTP status, and a message.
                assert_eq!(
                    r.body["error"]["code"].as_u64(),
                    Some(r.status.as_u16() as u64),
                    "case {i}: {}",
                    r.text
                );
                assert!(r.body["error"]["message"].is_string(), "case {i}");
                r.body["error"]["status"].as_str().map(str::to_string)
            }
            "aad" => r.body["error"].as_str().map(str::to_string),
            _ => {
                assert!(
                    r.body["message"].is_string(),
                    "case {i}: restJson1 body has a message: {}",
                    r.text
                );
                r.header("x-amzn-errortype")
            }
        };
        if r.status.as_u16() != c.status || got.as_deref() != Some(c.code) {
            failures.push(format!(
                "case {i} {} {} {}: want {} {}, got {} {:?}: {}",
                c.api, c.method, c.path, c.status, c.code, r.status, got, r.text
            ));
        }
        if c.api == "arm" {
            assert!(
                r.body["error"]["message"]
                    .as_str()
                    .is_some_and(|m| !m.is_empty()),
                "case {i}: ARM errors carry a message"
            );
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases wrong:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    // Nothing was created by the bad requests.
    let inv = s.sb.inventory();
    let names: Vec<&str> = inv["pools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["dup", "dup"]);
}

#[tokio::test]
async fn extra_routes_are_served_behind_the_fault_layer() {
    use axum::routing::get;
    let sb = Sandbox::open(Config::instant()).unwrap();
    let extra = axum::Router::new().route(
        "/k8s/aks/sandbox-aks/version",
        get(|| async { "{\"gitVersion\":\"v1.33.3\"}" }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let router = sb.router_with(extra);
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    let s = start(0).await; // only for its HTTP client
    let r = s
        .call(
            Method::GET,
            &format!("{base}/k8s/aks/sandbox-aks/version"),
            &[],
            b"",
        )
        .await;
    assert_eq!(
        (r.status, r.body["gitVersion"].as_str()),
        (StatusCode::OK, Some("v1.33.3"))
    );
    let f = s
        .call(
            Method::POST,
            &format!("{base}/_sandbox/faults"),
            &[],
            br#"{"match": {"path_contains": "/k8s/"}, "kind": "503"}"#,
        )
        .await;
    assert_eq!(f.status, StatusCode::CREATED);
    assert_eq!(
        s.call(
            Method::GET,
            &format!("{base}/k8s/aks/sandbox-aks/version"),
            &[],
            b""
        )
        .await
        .status,
        StatusCode::SERVICE_UNAVAILABLE
    );
    // The cloud APIs are still there, and unknown paths get a JSON 404.
    assert_eq!(
        s.call(Method::GET, &format!("{base}{GKE_CLUSTER}"), &[], b"")
            .await
            .status,
        StatusCode::OK
    );
    let r = s
        .call(Method::GET, &format!("{base}/nowhere"), &[], b"")
        .await;
    assert_eq!(
        (r.status, r.body["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("NotFound"))
    );
}

#[tokio::test]
async fn restart_replays_the_nodes_of_restored_pools() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("world.json");
    let cfg = |ms: u64| Config {
        op_time: Duration::from_millis(ms),
        state_file: Some(file.clone()),
        ..Config::default()
    };
    {
        let s = start_with(cfg(0)).await;
        let tok = s.azure_token().await;
        let r = s
            .arm(
                &tok,
                Method::PUT,
                &format!("{}/a1?{API}", aks_pools("sandbox-aks")),
                Some(&json!({"properties": {"count": 2}})),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED);
        let r = s.eks(Method::POST, "/clusters/sandbox-eks/node-groups", Some(&json!({"nodegroupName": "e1", "nodeRole": "arn:aws:iam::1:role/r", "subnets": ["subnet-1"]}))).await;
        assert_eq!(r.status, StatusCode::OK);
        s.sb.settle();
        // One more pool whose creation is still running when the process stops: no nodes yet.
        let _ = s;
    }
    {
        let s = start_with(cfg(3_600_000)).await;
        let r = s
            .gke(
                Method::POST,
                &format!("{GKE_CLUSTER}/nodePools"),
                Some(&json!({"nodePool": {"name": "slow", "initialNodeCount": 1}})),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK);
        let replayed: Vec<String> = s
            .sink
            .take()
            .iter()
            .filter_map(|e| match e {
                NodeEvent::Changed(n) => Some(n.pool.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(
            replayed,
            vec!["a1".to_string(), "e1".to_string()],
            "restored pools' nodes told to the new sink"
        );
    }
    let s = start_with(cfg(3_600_000)).await;
    let mut replayed: Vec<(&str, String, u32)> = s
        .sink
        .take()
        .iter()
        .filter_map(|e| match e {
            NodeEvent::Changed(n) => Some((n.cloud, n.pool.clone(), n.node_count)),
            _ => None,
        })
        .collect();
    replayed.sort();
    assert_eq!(
        replayed,
        vec![("aks", "a1".to_string(), 2), ("eks", "e1".to_string(), 2)],
        "the GKE pool is still PROVISIONING"
    );
    assert_eq!(s.sb.replay_nodes(), 2);
}

#[tokio::test]
async fn restored_operations_in_flight_finish_on_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("world.json");
    let cfg = || Config {
        op_time: Duration::from_millis(400),
        state_file: Some(file.clone()),
        ..Config::default()
    };
    {
        let ng = json!({"nodegroupName": "late", "nodeRole": "arn:aws:iam::1:role/r", "subnets": ["subnet-1"]});
        let srv = start_with(cfg()).await;
        let r = srv
            .eks(Method::POST, "/clusters/sandbox-eks/node-groups", Some(&ng))
            .await;
        assert_eq!(r.body["nodegroup"]["status"], "CREATING");
    }
    // The new process gets no request at all; its timer settles the restored operation.
    let s = start_with(cfg()).await;
    let ev = eventually(5, || async {
        let e = s.sink.take();
        (!e.is_empty()).then_some(e)
    })
    .await;
    assert_eq!(changed(&ev, "late").len(), 1);
}

#[tokio::test]
async fn gke_limits_concurrent_operations_per_cluster() {
    let s = start(3_600_000).await;
    for i in 0..5 {
        let r = s
            .gke(
                Method::POST,
                &format!("{GKE_CLUSTER}/nodePools"),
                Some(&json!({"nodePool": {"name": format!("p{i}"), "initialNodeCount": 1}})),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    }
    let r = s
        .gke(
            Method::POST,
            &format!("{GKE_CLUSTER}/nodePools"),
            Some(&json!({"nodePool": {"name": "p5", "initialNodeCount": 1}})),
        )
        .await;
    assert_eq!(
        (r.status, r.body["error"]["status"].as_str()),
        (StatusCode::TOO_MANY_REQUESTS, Some("RESOURCE_EXHAUSTED"))
    );
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("concurrent operations quota 5")
    );
    // A pool with an operation in flight refuses another one with FAILED_PRECONDITION.
    let r = s
        .gke(Method::DELETE, &format!("{GKE_CLUSTER}/nodePools/p0"), None)
        .await;
    assert_eq!(
        (r.status, r.body["error"]["status"].as_str()),
        (StatusCode::BAD_REQUEST, Some("FAILED_PRECONDITION"))
    );
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("is currently creating a node pool")
    );
    assert_eq!(
        s.sb.inventory()["pools"].as_array().map(|a| a.len()),
        Some(5)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_creates_of_one_name_make_one_pool() {
    let s = std::sync::Arc::new(start(3_600_000).await);
    let tok = s.azure_token().await;
    let mut tasks = Vec::new();
    for i in 0..16 {
        let (s, tok) = (s.clone(), tok.clone());
        tasks.push(tokio::spawn(async move {
            match i % 3 {
                0 => s.arm(&tok, Method::PUT, &format!("{}/race?{API}", aks_pools("sandbox-aks")), Some(&json!({"properties": {"count": 1}}))).await.status,
                1 => s.gke(Method::POST, &format!("{GKE_CLUSTER}/nodePools"), Some(&json!({"nodePool": {"name": "race", "initialNodeCount": 1}}))).await.status,
                _ => s.eks(Method::POST, "/clusters/sandbox-eks/node-groups", Some(&json!({"nodegroupName": "race", "nodeRole": "arn:aws:iam::1:role/r", "subnets": ["subnet-1"]}))).await.status,
            }
        }));
    }
    let mut statuses = Vec::new();
    for t in tasks {
        statuses.push(t.await.unwrap().as_u16());
    }
    let ok = statuses.iter().filter(|s| **s == 200 || **s == 201).count();
    // One winner per cloud; the losers see the pool busy (ARM 409), existing (GKE 409) or in use (EKS 409).
    assert_eq!(ok, 3, "{statuses:?}");
    assert!(
        statuses.iter().all(|s| [200, 201, 409].contains(s)),
        "{statuses:?}"
    );
    assert_eq!(
        s.sb.inventory()["pools"].as_array().map(|a| a.len()),
        Some(3)
    );
}
