//! AKS agent pools through ARM: the lifecycle with async operations, auth and the token endpoint,
//! spot defaults and the system pool rules.

use super::*;

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

/// PUTs the pool back with `change` applied, as `az aks nodepool update` does.
async fn put_back(s: &Srv, tok: &str, url: &str, change: impl FnOnce(&mut Value)) -> Resp {
    let mut pool = s.arm(tok, Method::GET, url, None).await.body;
    change(&mut pool);
    s.arm(tok, Method::PUT, url, Some(&pool)).await
}

async fn succeeded(s: &Srv, tok: &str, url: &str) -> Value {
    eventually(5, || async {
        let p = s.arm(tok, Method::GET, url, None).await.body;
        (p["properties"]["provisioningState"] == "Succeeded").then_some(p)
    })
    .await
}

#[tokio::test]
async fn aks_migrates_the_os_sku_in_place_between_ubuntu_and_azure_linux() {
    let s = start(0).await;
    let tok = s.azure_token().await;
    let url = format!("{}/ts1?{API}", aks_pools("sandbox-aks"));
    let r = s
        .arm(&tok, Method::PUT, &url, Some(&json!({"properties": {"vmSize": "Standard_NC24ads_A100_v4", "count": 1, "osSKU": "Ubuntu"}})))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    succeeded(&s, &tok, &url).await;
    s.sink.take();
    // Ubuntu -> AzureLinux -> AzureLinux3 -> Ubuntu2404: each an update of the same pool.
    for sku in ["AzureLinux", "AzureLinux3", "Ubuntu2404"] {
        let r = put_back(&s, &tok, &url, |p| p["properties"]["osSKU"] = json!(sku)).await;
        assert_eq!(r.status, StatusCode::OK, "{sku}: {}", r.text);
        assert_eq!(r.body["properties"]["provisioningState"], "Updating");
        let p = succeeded(&s, &tok, &url).await;
        assert_eq!(p["properties"]["osSKU"], sku);
    }
    // The nodes are reimaged.
    let n = changed(&s.sink.take(), "ts1");
    assert_eq!(
        n.last()
            .and_then(|n| n.os_image.as_ref().map(|o| o.name.as_str())),
        Some("Ubuntu 24.04.3 LTS")
    );
    assert_eq!(
        n.last()
            .map(|n| n.labels["kubernetes.azure.com/os-sku"].as_str()),
        Some("Ubuntu2404")
    );
    // Outside the two families there is no migration.
    let r = put_back(&s, &tok, &url, |p| {
        p["properties"]["osSKU"] = json!("CBLMariner")
    })
    .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert_eq!(r.body["error"]["code"], "PropertyChangeNotAllowed");
    assert_eq!(r.body["error"]["target"], "osSKU");
    // A MIG pool cannot move to Azure Linux, which has no MIG.
    let mig = format!("{}/mig1?{API}", aks_pools("sandbox-aks"));
    let r = s
        .arm(&tok, Method::PUT, &mig, Some(&json!({"properties": {"vmSize": "Standard_NC24ads_A100_v4", "count": 1, "gpuInstanceProfile": "MIG1g"}})))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    succeeded(&s, &tok, &mig).await;
    let r = put_back(&s, &tok, &mig, |p| {
        p["properties"]["osSKU"] = json!("AzureLinux")
    })
    .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert_eq!(r.body["error"]["target"], "properties.gpuInstanceProfile");
}

#[tokio::test]
async fn aks_gpu_driver_is_an_enum_fixed_at_creation() {
    let s = start(0).await;
    let tok = s.azure_token().await;
    let url = format!("{}/nodrv?{API}", aks_pools("sandbox-aks"));
    let body = |driver: &str| json!({"properties": {"vmSize": "Standard_NC24ads_A100_v4", "count": 1, "gpuProfile": {"driver": driver}}});
    let r = s.arm(&tok, Method::PUT, &url, Some(&body("Skip"))).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert_eq!(r.body["error"]["code"], "InvalidParameter");
    let r = s.arm(&tok, Method::PUT, &url, Some(&body("none"))).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let p = succeeded(&s, &tok, &url).await;
    assert_eq!(
        p["properties"]["gpuProfile"]["driver"], "None",
        "enum canonicalised"
    );
    // Kept when a PUT leaves it out; a change is refused.
    let r = put_back(&s, &tok, &url, |p| {
        p["properties"]
            .as_object_mut()
            .unwrap()
            .remove("gpuProfile");
        p["properties"]["count"] = json!(2);
    })
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let p = succeeded(&s, &tok, &url).await;
    assert_eq!(p["properties"]["gpuProfile"]["driver"], "None");
    let r = put_back(&s, &tok, &url, |p| {
        p["properties"]["gpuProfile"]["driver"] = json!("Install")
    })
    .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert_eq!(r.body["error"]["code"], "PropertyChangeNotAllowed");
    assert_eq!(r.body["error"]["target"], "gpuProfile.driver");
}

#[tokio::test]
async fn aks_user_pools_scale_to_zero() {
    let s = start(0).await;
    let tok = s.azure_token().await;
    let fixed = format!("{}/zero?{API}", aks_pools("sandbox-aks"));
    let r = s
        .arm(&tok, Method::PUT, &fixed, Some(&json!({"properties": {"vmSize": "Standard_NC24ads_A100_v4", "count": 0, "mode": "User"}})))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let auto = format!("{}/auto?{API}", aks_pools("sandbox-aks"));
    let r = s
        .arm(&tok, Method::PUT, &auto, Some(&json!({"properties": {"vmSize": "Standard_NC24ads_A100_v4", "count": 0, "enableAutoScaling": true, "minCount": 0, "maxCount": 3}})))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(succeeded(&s, &tok, &fixed).await["properties"]["count"], 0);
    assert_eq!(
        succeeded(&s, &tok, &auto).await["properties"]["minCount"],
        0
    );
    // A pool of zero nodes has no nodes.
    let events = s.sink.take();
    assert_eq!(changed(&events, "zero")[0].node_count, 0);
    assert_eq!(changed(&events, "auto")[0].node_count, 0);
}

#[tokio::test]
async fn aks_refuses_a_pool_past_a_hundred_per_cluster() {
    let s = start(0).await;
    let tok = s.azure_token().await;
    let cluster = s
        .arm(
            &tok,
            Method::GET,
            &format!(
                "/subscriptions/{SUB}/resourceGroups/sandbox-rg/providers/Microsoft.ContainerService/managedClusters/sandbox-aks?{API}"
            ),
            None,
        )
        .await;
    assert_eq!(cluster.body["properties"]["maxAgentPools"], 100);
    let body = json!({"properties": {"vmSize": "Standard_NC4as_T4_v3", "count": 0}});
    for i in 0..100 {
        let url = format!("{}/p{i}?{API}", aks_pools("sandbox-aks"));
        let r = s.arm(&tok, Method::PUT, &url, Some(&body)).await;
        assert_eq!(r.status, StatusCode::CREATED, "p{i}: {}", r.text);
    }
    let extra = format!("{}/p100?{API}", aks_pools("sandbox-aks"));
    let r = s.arm(&tok, Method::PUT, &extra, Some(&body)).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert_eq!(r.body["error"]["code"], "QuotaExceeded");
    // Updates of the pools there are still fine, and a deleted pool makes room.
    let p0 = format!("{}/p0?{API}", aks_pools("sandbox-aks"));
    succeeded(&s, &tok, &p0).await;
    assert_eq!(
        put_back(&s, &tok, &p0, |p| p["properties"]["count"] = json!(1))
            .await
            .status,
        StatusCode::OK
    );
    succeeded(&s, &tok, &p0).await;
    assert_eq!(
        s.arm(&tok, Method::DELETE, &p0, None).await.status,
        StatusCode::ACCEPTED
    );
    eventually(5, || async {
        (s.arm(&tok, Method::GET, &p0, None).await.status == StatusCode::NOT_FOUND).then_some(())
    })
    .await;
    let r = s.arm(&tok, Method::PUT, &extra, Some(&body)).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
}
