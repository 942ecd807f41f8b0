//! gcloud drives GKE node pools with sharing and partitions through their whole lifecycle.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcloud_creates_lists_updates_and_deletes_shared_and_partitioned_pools() {
    if tools::require(Tool::Gcloud).is_none() {
        return;
    }
    let s = start(300).await;
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "ya29.sandbox").unwrap();
    let env = vec![
        (
            "CLOUDSDK_CONFIG",
            dir.path().join("gcloud").display().to_string(),
        ),
        (
            "CLOUDSDK_API_ENDPOINT_OVERRIDES_CONTAINER",
            format!("{}/", s.base),
        ),
        (
            "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE",
            token.display().to_string(),
        ),
        ("CLOUDSDK_CORE_PROJECT", "sandbox-project".to_string()),
        ("CLOUDSDK_CORE_DISABLE_PROMPTS", "1".to_string()),
    ];
    let loc = ["--cluster", "sandbox-gke", "--location", "us-central1"];
    let np = |args: &[&str]| {
        let mut v = vec!["container", "node-pools"];
        v.extend_from_slice(args);
        v.extend_from_slice(&loc);
        v.into_iter().map(str::to_string).collect::<Vec<_>>()
    };
    let g = |args: Vec<String>| {
        let env = env.clone();
        async move {
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            let o = run("gcloud", &a, &env).await;
            assert!(o.ok, "gcloud {}: {}", args.join(" "), o.stderr);
            o
        }
    };

    g(np(&[
        "create",
        "shared",
        "--machine-type",
        "g2-standard-8",
        "--num-nodes",
        "2",
        "--node-labels",
        "team=ml",
        "--accelerator",
        "type=nvidia-l4,count=1,gpu-sharing-strategy=time-sharing,max-shared-clients-per-gpu=10",
    ]))
    .await;
    g(np(&[
        "create",
        "mig",
        "--machine-type",
        "a2-highgpu-1g",
        "--num-nodes",
        "1",
        "--node-locations",
        "us-central1-b",
        "--node-taints",
        "dedicated=gpu:NoSchedule",
        "--accelerator",
        "type=nvidia-tesla-a100,count=1,gpu-partition-size=1g.5gb,gpu-driver-version=latest",
    ]))
    .await;
    // Autoscaling bounds for the whole pool rather than per zone.
    g(np(&[
        "create",
        "total",
        "--machine-type",
        "g2-standard-4",
        "--num-nodes",
        "0",
        "--enable-autoscaling",
        "--total-min-nodes",
        "2",
        "--total-max-nodes",
        "6",
    ]))
    .await;
    let list = g(np(&["list", "--format", "json"])).await.json();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["mig", "shared", "total"]);
    // --num-nodes is per zone: the pools span the regional cluster's three zones unless told.
    assert_eq!(list[1]["initialNodeCount"], 2);
    assert_eq!(
        list[1]["locations"],
        json!(["us-central1-a", "us-central1-b", "us-central1-c"])
    );
    assert_eq!(
        list[1]["instanceGroupUrls"].as_array().map(Vec::len),
        Some(3)
    );
    assert_eq!(list[0]["locations"], json!(["us-central1-b"]));
    assert_eq!(
        (
            &list[2]["autoscaling"]["totalMinNodeCount"],
            &list[2]["autoscaling"]["totalMaxNodeCount"],
            &list[2]["autoscaling"]["minNodeCount"]
        ),
        (&json!(2), &json!(6), &Value::Null)
    );
    let shared = &list[1]["config"]["accelerators"][0];
    assert_eq!(
        shared["gpuSharingConfig"],
        json!({"gpuSharingStrategy": "TIME_SHARING", "maxSharedClientsPerGpu": "10"})
    );
    assert_eq!(
        list[0]["config"]["accelerators"][0]["gpuPartitionSize"],
        "1g.5gb"
    );
    assert_eq!(
        list[0]["config"]["taints"][0],
        json!({"key": "dedicated", "value": "gpu", "effect": "NO_SCHEDULE"})
    );

    // Updates: labels (nodePools.update), size (setSize, after reading the cluster), autoscaling (clusters.update).
    g(np(&["update", "shared", "--node-labels", "team=infra"])).await;
    let resize = [
        "container",
        "clusters",
        "resize",
        "sandbox-gke",
        "--node-pool",
        "shared",
        "--num-nodes",
        "3",
        "--location",
        "us-central1",
    ];
    let o = run("gcloud", &resize, &env).await;
    assert!(o.ok, "resize: {}", o.stderr);
    g(np(&[
        "update",
        "mig",
        "--enable-autoscaling",
        "--min-nodes",
        "1",
        "--max-nodes",
        "4",
    ]))
    .await;
    let shared = g(np(&["describe", "shared", "--format", "json"]))
        .await
        .json();
    assert_eq!(shared["config"]["labels"], json!({"team": "infra"}));
    assert_eq!(shared["status"], "RUNNING");
    let mig = g(np(&["describe", "mig", "--format", "json"])).await.json();
    assert_eq!(
        (
            mig["autoscaling"]["enabled"].as_bool(),
            mig["autoscaling"]["maxNodeCount"].as_i64()
        ),
        (Some(true), Some(4))
    );
    let cluster = g(vec![
        "container".into(),
        "clusters".into(),
        "describe".into(),
        "sandbox-gke".into(),
        "--location".into(),
        "us-central1".into(),
        "--format".into(),
        "json".into(),
    ])
    .await
    .json();
    assert_eq!(
        cluster["currentNodeCount"], 12,
        "shared: 3 per zone in 3 zones; mig: 1 in its zone; total: its minimum of 2"
    );

    // The node hand-off saw GKE's sharing and partition labels.
    let events = s.sink.take();
    let last = |pool: &str| {
        events.iter().rev().find_map(|e| match e {
            NodeEvent::Changed(n) if n.pool == pool => Some(n.clone()),
            _ => None,
        })
    };
    let sh = last("shared").expect("shared nodes");
    assert_eq!(
        (sh.node_count, sh.gke_sharing.clone()),
        (9, Some(("TIME_SHARING".to_string(), 10)))
    );
    assert_eq!(sh.labels["team"], "infra");
    let mg = last("mig").expect("mig nodes");
    assert_eq!(
        (
            mg.mig_profile.as_deref(),
            mg.mig_instances_per_gpu,
            mg.node_count
        ),
        (Some("1g.5gb"), 7, 1)
    );
    assert_eq!(mg.zones, ["us-central1-b"]);
    assert_eq!(last("total").expect("total nodes").node_count, 2);

    // nodePools.update moves a pool to fewer zones; each keeps its per-zone size.
    g(np(&[
        "update",
        "shared",
        "--node-locations",
        "us-central1-a,us-central1-c",
    ]))
    .await;
    let shared = g(np(&["describe", "shared", "--format", "json"]))
        .await
        .json();
    assert_eq!(
        shared["locations"],
        json!(["us-central1-a", "us-central1-c"])
    );
    assert_eq!(
        s.sb.inventory()["pools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "shared")
            .map(|p| p["nodes"].clone()),
        Some(json!(6))
    );

    // A bad request surfaces GKE's message through gcloud.
    let bad = np(&[
        "create",
        "bad",
        "--machine-type",
        "a2-highgpu-1g",
        "--accelerator",
        "type=nvidia-tesla-a100,count=1,gpu-partition-size=1g.10gb",
    ]);
    let a: Vec<&str> = bad.iter().map(String::as_str).collect();
    let o = run("gcloud", &a, &env).await;
    assert!(!o.ok && o.stderr.contains("1g.10gb"), "{}", o.stderr);

    g(np(&["delete", "shared"])).await;
    g(np(&["delete", "mig"])).await;
    g(np(&["delete", "total"])).await;
    let list = g(np(&["list", "--format", "json"])).await.json();
    assert_eq!(list, json!([]));
    assert_eq!(s.sb.inventory()["pools"], json!([]));
}
