//! GKE node pools: the lifecycle with int or string enums and int64s, partitions and built-in
//! accelerators, autoscaling through clusters.update, and the concurrent-operations quota.

use super::*;
use sandbox::ClusterSpec;

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
    // initialNodeCount is per zone: two nodes in each of the regional cluster's three zones.
    assert_eq!(
        (
            n[0].gpu_product.as_deref(),
            n[0].gpus_per_node,
            n[0].node_count
        ),
        (Some("NVIDIA-L4"), 1, 6)
    );
    assert_eq!(
        n[0].zones,
        ["a", "a", "b", "b", "c", "c"].map(|z| format!("us-central1-{z}"))
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
        9,
        "setSize's nodeCount is per zone too"
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
        Some(6),
        "the per-zone minimum in each of three zones"
    );
}

/// A regional cluster has three zones and a pool one instance group in each, every count per zone;
/// a pool can name fewer zones, and totals bound the whole pool.
#[tokio::test]
async fn gke_pools_span_the_clusters_zones_and_count_per_zone() {
    let s = start(0).await;
    let c = s.gke(Method::GET, GKE_CLUSTER, None).await.body;
    assert_eq!(
        c["locations"],
        json!(["us-central1-a", "us-central1-b", "us-central1-c"])
    );
    let create = |name: &str, extra: Value| {
        let mut np = json!({"name": name, "initialNodeCount": 1, "config": {"machineType": "g2-standard-4"}});
        for (k, v) in extra.as_object().unwrap() {
            np[k] = v.clone();
        }
        json!({ "nodePool": np })
    };
    let nps = format!("{GKE_CLUSTER}/nodePools");
    let r = s
        .gke(Method::POST, &nps, Some(&create("all", json!({}))))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let r = s
        .gke(
            Method::POST,
            &nps,
            Some(&create(
                "two",
                json!({"locations": ["us-central1-c", "us-central1-a"]}),
            )),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let r = s
        .gke(
            Method::POST,
            &nps,
            Some(&create(
                "total",
                json!({"initialNodeCount": 0, "autoscaling": {"enabled": true, "totalMinNodeCount": 4, "totalMaxNodeCount": 8}}),
            )),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    s.sb.settle();
    let all = s.gke(Method::GET, &format!("{nps}/all"), None).await.body;
    assert_eq!(
        all["locations"],
        json!(["us-central1-a", "us-central1-b", "us-central1-c"])
    );
    let groups: Vec<String> = all["instanceGroupUrls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u.as_str().unwrap().to_string())
        .collect();
    assert_eq!(groups.len(), 3);
    for (url, zone) in groups.iter().zip(["a", "b", "c"]) {
        assert!(
            url.starts_with(&format!(
                "https://www.googleapis.com/compute/v1/projects/sandbox-project/zones/us-central1-{zone}/instanceGroupManagers/gke-sandbox-gke-all-"
            )),
            "{url}"
        );
        let igm = s
            .call(
                Method::GET,
                url.strip_prefix("https://www.googleapis.com").unwrap(),
                &[],
                b"",
            )
            .await;
        assert_eq!(igm.body["targetSize"], 1, "{}", igm.text);
    }
    let two = s.gke(Method::GET, &format!("{nps}/two"), None).await.body;
    assert_eq!(two["locations"], json!(["us-central1-a", "us-central1-c"]));
    let inv = s.sb.inventory();
    let nodes = |name: &str| {
        inv["pools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .map(|p| p["nodes"].clone())
    };
    assert_eq!(
        (nodes("all"), nodes("two"), nodes("total")),
        (Some(json!(3)), Some(json!(2)), Some(json!(4)))
    );
    // The autoscaler spreads a total minimum over the zones.
    let total = changed(&s.sink.take(), "total");
    assert_eq!(
        total.last().unwrap().zones,
        ["a", "a", "b", "c"].map(|z| format!("us-central1-{z}"))
    );

    // setSize is per zone.
    let r = s
        .gke(
            Method::POST,
            &format!("{nps}/two:setSize"),
            Some(&json!({"nodeCount": 2})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    s.sb.settle();
    assert_eq!(nodes_of(&s, "two"), 4);
    // nodePools.update moves a pool to other zones, keeping its per-zone size.
    let r = s
        .gke(
            Method::PUT,
            &format!("{nps}/two"),
            Some(&json!({"locations": ["us-central1-b"]})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    s.sb.settle();
    assert_eq!(nodes_of(&s, "two"), 2);

    // Zones outside the cluster's region are refused.
    let r = s
        .gke(
            Method::POST,
            &nps,
            Some(&create("far", json!({"locations": ["europe-west4-a"]}))),
        )
        .await;
    assert_eq!(
        (r.status, r.body["error"]["status"].as_str()),
        (StatusCode::BAD_REQUEST, Some("INVALID_ARGUMENT")),
        "{}",
        r.text
    );
}

fn nodes_of(s: &Srv, pool: &str) -> i64 {
    s.sb.inventory()["pools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == pool)
        .and_then(|p| p["nodes"].as_i64())
        .unwrap_or(-1)
}

/// GKE refuses a pool whose accelerator one of its zones does not offer, naming the zone; a zonal
/// cluster has its one zone.
#[tokio::test]
async fn gke_refuses_an_accelerator_one_zone_lacks() {
    let s = start_with(Config {
        op_time: Duration::ZERO,
        clusters: vec![
            ClusterSpec::Gke {
                project: "sandbox-project".into(),
                location: "europe-west4".into(),
                name: "eu".into(),
            },
            ClusterSpec::Gke {
                project: "sandbox-project".into(),
                location: "europe-west4-a".into(),
                name: "eu-zonal".into(),
            },
        ],
        ..Config::default()
    })
    .await;
    let regional = "/v1/projects/sandbox-project/locations/europe-west4/clusters/eu";
    let zonal = "/v1/projects/sandbox-project/locations/europe-west4-a/clusters/eu-zonal";
    let a100 = |name: &str, locations: Value| {
        json!({"nodePool": {"name": name, "initialNodeCount": 1, "locations": locations,
            "config": {"machineType": "a2-highgpu-1g", "accelerators": [{"acceleratorCount": "1", "acceleratorType": "nvidia-tesla-a100"}]}}})
    };
    let r = s
        .gke(
            Method::POST,
            &format!("{regional}/nodePools"),
            Some(&a100("a100", json!([]))),
        )
        .await;
    assert_eq!(
        (r.status, r.body["error"]["message"].as_str()),
        (
            StatusCode::BAD_REQUEST,
            Some("Accelerator type \"nvidia-tesla-a100\" does not exist in zone europe-west4-c.")
        ),
        "{}",
        r.text
    );
    // Without the zone that lacks it, the pool is made.
    let r = s
        .gke(
            Method::POST,
            &format!("{regional}/nodePools"),
            Some(&a100("a100", json!(["europe-west4-a", "europe-west4-b"]))),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let c = s.gke(Method::GET, zonal, None).await.body;
    assert_eq!(c["locations"], json!(["europe-west4-a"]));
    let r = s
        .gke(
            Method::POST,
            &format!("{zonal}/nodePools"),
            Some(&a100("a100z", json!(null))),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    s.sb.settle();
    assert_eq!(
        nodes_of(&s, "a100"),
        2,
        "the regional pool: one node in each of two zones"
    );
    assert_eq!(nodes_of(&s, "a100z"), 1, "the zonal pool: one node");
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

/// Compute's `instanceGroupManagers.aggregatedList` and `list`, as a client reads every pool's
/// size in a few requests: `items` keyed by `zones/{zone}` with the managers or a
/// NO_RESULTS_ON_PAGE warning, pages cut by `maxResults` and followed by `nextPageToken`.
#[tokio::test]
async fn gke_instance_group_managers_list_aggregated_and_per_zone() {
    let s = start(200).await;
    let nps = format!("{GKE_CLUSTER}/nodePools");
    for (name, extra) in [
        ("all", json!({})),
        (
            "two",
            json!({"locations": ["us-central1-c", "us-central1-a"]}),
        ),
    ] {
        let mut np = json!({"name": name, "initialNodeCount": 2, "config": {"machineType": "g2-standard-4"}});
        for (k, v) in extra.as_object().unwrap() {
            np[k] = v.clone();
        }
        let r = s
            .gke(Method::POST, &nps, Some(&json!({ "nodePool": np })))
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    }
    s.sb.settle();
    let agg = "/compute/v1/projects/sandbox-project/aggregated/instanceGroupManagers";
    let get = |path: String| {
        let s = &s;
        async move { s.call(Method::GET, &path, &[], b"").await }
    };
    let whole = get(agg.to_string()).await;
    assert_eq!(whole.status, StatusCode::OK, "{}", whole.text);
    assert_eq!(
        whole.body["kind"],
        "compute#instanceGroupManagerAggregatedList"
    );
    assert!(whole.body.get("nextPageToken").is_none(), "{}", whole.text);
    let items = whole.body["items"].as_object().unwrap();
    let in_zone = |items: &serde_json::Map<String, Value>, z: &str| {
        items[&format!("zones/us-central1-{z}")]["instanceGroupManagers"]
            .as_array()
            .map(|a| a.len())
            .unwrap_or(0)
    };
    assert_eq!(
        (
            in_zone(items, "a"),
            in_zone(items, "b"),
            in_zone(items, "c")
        ),
        (2, 1, 2)
    );
    // Each manager as its own GET answers it, and the pool's instanceGroupUrls name them.
    let pool = s.gke(Method::GET, &format!("{nps}/two"), None).await.body;
    for url in pool["instanceGroupUrls"].as_array().unwrap() {
        let path = url
            .as_str()
            .unwrap()
            .strip_prefix("https://www.googleapis.com")
            .unwrap();
        let one = get(path.to_string()).await.body;
        assert_eq!(one["targetSize"], 2);
        let zone = one["zone"].as_str().unwrap();
        let listed = items[&format!("zones/{zone}")]["instanceGroupManagers"]
            .as_array()
            .unwrap();
        assert!(listed.contains(&one), "{one} in {listed:?}");
    }

    // Two managers a page: three pages, and a zone with nothing on a page has a warning.
    let (mut token, mut names, mut pages) = (None::<String>, Vec::new(), 0);
    loop {
        let q = match &token {
            Some(t) => format!("{agg}?maxResults=2&pageToken={t}"),
            None => format!("{agg}?maxResults=2"),
        };
        let page = get(q).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.text);
        pages += 1;
        for (scope, v) in page.body["items"].as_object().unwrap() {
            match v.get("instanceGroupManagers") {
                Some(l) => names.extend(
                    l.as_array()
                        .unwrap()
                        .iter()
                        .map(|m| (scope.clone(), m["name"].as_str().unwrap().to_string())),
                ),
                None => assert_eq!(v["warning"]["code"], "NO_RESULTS_ON_PAGE", "{v}"),
            }
        }
        token = page.body["nextPageToken"].as_str().map(str::to_string);
        if token.is_none() {
            break;
        }
    }
    assert_eq!((pages, names.len()), (3, 5), "{names:?}");

    // One zone's list.
    let zone = get(
        "/compute/v1/projects/sandbox-project/zones/us-central1-b/instanceGroupManagers".into(),
    )
    .await;
    assert_eq!(zone.status, StatusCode::OK, "{}", zone.text);
    assert_eq!(zone.body["items"].as_array().unwrap().len(), 1);
    assert_eq!(zone.body["items"][0]["targetSize"], 2);
    // Filters are not evaluated here, so they are refused, not ignored.
    let filtered = get(format!("{agg}?filter=name%20eq%20gke-.*")).await;
    assert_eq!(filtered.status.as_u16(), 400, "{}", filtered.text);
    let bad = get(format!("{agg}?maxResults=501")).await;
    assert_eq!(bad.status.as_u16(), 400, "{}", bad.text);
}
