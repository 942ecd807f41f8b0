//! GKE node pools: the lifecycle with int or string enums and int64s, partitions and built-in
//! accelerators, autoscaling through clusters.update, and the concurrent-operations quota.

use super::*;

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
    // A cluster-level operation waits for the others, and is refused while they run.
    let r = s
        .gke(
            Method::PUT,
            GKE_CLUSTER,
            Some(&json!({"update": {"desiredMasterVersion": "latest"}})),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    let refused = &s.sb.inventory()["refused"];
    assert_eq!(
        refused,
        &json!([
            {"cloud": "gke", "cluster": "sandbox-gke", "status": "FAILED_PRECONDITION", "count": 2},
            {"cloud": "gke", "cluster": "sandbox-gke", "status": "RESOURCE_EXHAUSTED", "count": 1},
        ])
    );
}

/// While an operation on the cluster itself runs, GKE starts no node pool operation on it: 400
/// FAILED_PRECONDITION "Operation ... is currently updating cluster ...".
#[tokio::test]
async fn gke_cluster_operations_run_alone() {
    let s = start(300).await;
    let r = s
        .gke(
            Method::PUT,
            GKE_CLUSTER,
            Some(&json!({"update": {"desiredMasterVersion": "latest"}})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let create = json!({"nodePool": {"name": "late", "initialNodeCount": 1}});
    let r = s
        .gke(
            Method::POST,
            &format!("{GKE_CLUSTER}/nodePools"),
            Some(&create),
        )
        .await;
    assert_eq!(
        (r.status, r.body["error"]["status"].as_str()),
        (StatusCode::BAD_REQUEST, Some("FAILED_PRECONDITION")),
        "{}",
        r.text
    );
    let msg = r.body["error"]["message"].as_str().unwrap();
    assert!(
        msg.starts_with("Operation operation-")
            && msg.ends_with(
                "is currently updating cluster sandbox-gke. Please wait and try again once it is done."
            ),
        "{msg}"
    );
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    let r = s
        .gke(
            Method::POST,
            &format!("{GKE_CLUSTER}/nodePools"),
            Some(&create),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
}
