//! Fault injection on every cloud: errors in each cloud's shape, drops and delays, failed
//! operations, and routes added to the sandbox sitting behind the same fault layer.

use super::*;

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

#[tokio::test]
async fn extra_routes_are_served_behind_the_fault_layer() {
    use axum::routing::get;
    let sb = Sandbox::open(Config::instant()).unwrap();
    let extra = axum::Router::new().route(
        "/k8s/aks/sandbox-aks/version",
        get(|| async { "{\"gitVersion\":\"v1.33.3\"}" }),
    );
    let base = format!("http://{}", serve(sb.router_with(extra)).await);
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
async fn latency_delays_every_cloud_answer_but_not_the_control_plane() {
    let s = start(0).await;
    let tok = s.azure_token().await;
    let aks = format!("{}?{API}", aks_pools("sandbox-aks"));
    s.sb.set_latency(sandbox::Latency {
        base: std::time::Duration::from_millis(150),
        jitter: std::time::Duration::from_millis(50),
    });
    let t = std::time::Instant::now();
    assert_eq!(
        s.arm(&tok, Method::GET, &aks, None).await.status,
        StatusCode::OK
    );
    let took = t.elapsed();
    assert!(
        took >= std::time::Duration::from_millis(150) && took < std::time::Duration::from_secs(2),
        "{took:?}"
    );
    let t = std::time::Instant::now();
    let r = s.call(Method::GET, "/_sandbox/faults", &[], b"").await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(
        t.elapsed() < std::time::Duration::from_millis(150),
        "control plane delayed"
    );
    s.sb.set_latency(sandbox::Latency::default());
    let t = std::time::Instant::now();
    s.arm(&tok, Method::GET, &aks, None).await;
    assert!(
        t.elapsed() < std::time::Duration::from_millis(150),
        "latency off again"
    );
}
