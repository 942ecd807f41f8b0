//! The world as a whole: the inventory, timers that settle operations without requests, state
//! files and restarts, garbage that never panics, and racing creates.

use super::*;

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
