//! EKS node groups: the lifecycle, pagination, and the region the signature selects.

use super::*;

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

fn gpu_group(name: &str, extra: Value) -> Value {
    let mut b = json!({"nodegroupName": name, "nodeRole": "arn:aws:iam::123456789012:role/n", "subnets": ["subnet-1"],
        "instanceTypes": ["g5.xlarge"], "amiType": "AL2023_x86_64_NVIDIA"});
    for (k, v) in extra.as_object().unwrap() {
        b[k] = v.clone();
    }
    b
}

#[tokio::test]
async fn eks_refuses_amazon_linux_2_for_kubernetes_1_33() {
    let s = start(0).await;
    let base = "/clusters/sandbox-eks/node-groups";
    // The cluster runs 1.33, so a node group of its version gets no AL2 AMI.
    for ami in ["AL2_x86_64_GPU", "AL2_x86_64", "AL2_ARM_64"] {
        let r = s
            .eks(
                Method::POST,
                base,
                Some(&gpu_group("al2", json!({"amiType": ami}))),
            )
            .await;
        assert_eq!(
            (r.status, r.header("x-amzn-errortype").as_deref()),
            (StatusCode::BAD_REQUEST, Some("InvalidParameterException")),
            "{ami}: {}",
            r.text
        );
        assert_eq!(
            r.body["message"],
            format!("AMI Type {ami} is only supported for kubernetes versions 1.32 or earlier")
        );
    }
    // A 1.32 node group still gets one, and cannot move to 1.33 on it.
    let r = s
        .eks(
            Method::POST,
            base,
            Some(&gpu_group(
                "al2",
                json!({"amiType": "AL2_x86_64_GPU", "version": "1.32"}),
            )),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    eventually(5, || async {
        (s.eks(Method::GET, &format!("{base}/al2"), None).await.body["nodegroup"]["status"]
            == "ACTIVE")
            .then_some(())
    })
    .await;
    let r = s
        .eks(
            Method::POST,
            &format!("{base}/al2/update-version"),
            Some(&json!({"version": "1.33"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert_eq!(
        r.body["message"],
        "AMI Type AL2_x86_64_GPU is only supported for kubernetes versions 1.32 or earlier"
    );
}

#[tokio::test]
async fn eks_scales_a_node_group_to_zero_with_a_max_of_at_least_one() {
    let s = start(0).await;
    let base = "/clusters/sandbox-eks/node-groups";
    let zero =
        |max: i64| json!({"scalingConfig": {"minSize": 0, "maxSize": max, "desiredSize": 0}});
    let r = s
        .eks(Method::POST, base, Some(&gpu_group("none", zero(0))))
        .await;
    assert_eq!(
        (r.status, r.header("x-amzn-errortype").as_deref()),
        (StatusCode::BAD_REQUEST, Some("InvalidParameterException")),
        "{}",
        r.text
    );
    let r = s
        .eks(Method::POST, base, Some(&gpu_group("zero", zero(1))))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    eventually(5, || async {
        (s.eks(Method::GET, &format!("{base}/zero"), None).await.body["nodegroup"]["status"]
            == "ACTIVE")
            .then_some(())
    })
    .await;
    // No nodes until it is scaled up.
    let n = changed(&s.sink.take(), "zero");
    assert_eq!(n.last().map(|n| n.node_count), Some(0));
    let r = s
        .eks(
            Method::POST,
            &format!("{base}/zero/update-config"),
            Some(&json!({"scalingConfig": {"minSize": 0, "maxSize": 0, "desiredSize": 0}})),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    let r = s
        .eks(
            Method::POST,
            &format!("{base}/zero/update-config"),
            Some(&json!({"scalingConfig": {"desiredSize": 1}})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    eventually(5, || async {
        changed(&s.sink.take(), "zero")
            .last()
            .map(|n| n.node_count)
            .filter(|c| *c == 1)
    })
    .await;
}

#[tokio::test]
async fn eks_refuses_a_node_group_past_the_per_cluster_quota() {
    let s = start(0).await;
    let base = "/clusters/sandbox-eks/node-groups";
    for i in 0..30 {
        let r = s
            .eks(
                Method::POST,
                base,
                Some(&gpu_group(&format!("ng{i}"), json!({}))),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "ng{i}: {}", r.text);
    }
    let r = s
        .eks(Method::POST, base, Some(&gpu_group("ng30", json!({}))))
        .await;
    assert_eq!(
        (r.status, r.header("x-amzn-errortype").as_deref()),
        (
            StatusCode::BAD_REQUEST,
            Some("ResourceLimitExceededException")
        ),
        "{}",
        r.text
    );
    assert_eq!(r.body["clusterName"], "sandbox-eks");
    assert_eq!(r.body["nodegroupName"], "ng30");
    // The limit is per cluster: a retried create of an existing group is still answered, and once a
    // group is gone there is room again.
    let retry = gpu_group("ng0", json!({}));
    assert_eq!(
        s.eks(Method::POST, base, Some(&retry))
            .await
            .header("x-amzn-errortype")
            .as_deref(),
        Some("ResourceInUseException")
    );
    eventually(5, || async {
        (s.eks(Method::GET, &format!("{base}/ng0"), None).await.body["nodegroup"]["status"]
            == "ACTIVE")
            .then_some(())
    })
    .await;
    assert_eq!(
        s.eks(Method::DELETE, &format!("{base}/ng0"), None)
            .await
            .status,
        StatusCode::OK
    );
    eventually(5, || async {
        (s.eks(Method::GET, &format!("{base}/ng0"), None)
            .await
            .status
            == StatusCode::NOT_FOUND)
            .then_some(())
    })
    .await;
    let r = s
        .eks(Method::POST, base, Some(&gpu_group("ng30", json!({}))))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
}

#[tokio::test]
async fn eks_bottlerocket_nodes_report_their_image() {
    let s = start(0).await;
    let base = "/clusters/sandbox-eks/node-groups";
    for (name, ami) in [
        ("br", "BOTTLEROCKET_x86_64_NVIDIA"),
        ("al", "AL2023_x86_64_NVIDIA"),
    ] {
        let r = s
            .eks(
                Method::POST,
                base,
                Some(&gpu_group(name, json!({"amiType": ami}))),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    }
    let seen = std::sync::Mutex::new(Vec::new());
    let events = eventually(5, || async {
        s.sb.settle();
        let mut e = seen.lock().unwrap();
        e.extend(s.sink.take());
        (!changed(&e, "br").is_empty() && !changed(&e, "al").is_empty()).then(|| e.clone())
    })
    .await;
    assert_eq!(
        changed(&events, "br")[0]
            .os_image
            .as_ref()
            .map(|o| o.name.as_str()),
        Some("Bottlerocket OS 1.51.0 (aws-k8s-1.33-nvidia)")
    );
    assert!(
        changed(&events, "al")[0]
            .os_image
            .as_ref()
            .is_some_and(|o| o.name.starts_with("Amazon Linux 2023"))
    );
}
