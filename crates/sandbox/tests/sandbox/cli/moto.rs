//! The same EKS happy path against moto and against the sandbox, comparing every field moto
//! models (see the module above for where moto departs from EKS).

use super::*;

/// The fields moto models and gets right, with ARN and ASG ids made comparable.
fn comparable(ng: &Value) -> Value {
    let mut v = json!({});
    for f in [
        "nodegroupName",
        "clusterName",
        "capacityType",
        "scalingConfig",
        "instanceTypes",
        "subnets",
        "amiType",
        "nodeRole",
        "labels",
        "taints",
        "diskSize",
        "health",
        "tags",
    ] {
        v[f] = ng[f].clone();
    }
    let arn = ng["nodegroupArn"].as_str().unwrap_or("");
    v["nodegroupArn"] = json!(arn.rsplit_once('/').map(|(p, _)| p).unwrap_or(""));
    v["asgCount"] = json!(
        ng["resources"]["autoScalingGroups"]
            .as_array()
            .map(|a| a.len())
    );
    v["createdAtIsNumber"] = json!(ng["createdAt"].is_number());
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eks_happy_path_matches_moto() {
    if tools::require(Tool::Aws).is_none() || tools::require(Tool::Moto).is_none() {
        return;
    }
    let moto = Moto::start().await;
    let moto_url = moto.url.clone();
    let s = start(0).await;
    let dir = tempfile::tempdir().unwrap();
    let env = aws_env(dir.path());
    // moto has no clusters until one is created; the sandbox's world has sandbox-eks.
    let o = aws(
        &moto_url,
        &env,
        &[
            "create-cluster",
            "--name",
            "sandbox-eks",
            "--kubernetes-version",
            "1.33",
            "--role-arn",
            "arn:aws:iam::123456789012:role/c",
            "--resources-vpc-config",
            "subnetIds=subnet-0a",
        ],
    )
    .await;
    assert!(o.ok, "{}", o.stderr);

    let mut answers: Vec<[Value; 2]> = Vec::new();
    for (i, endpoint) in [moto_url.as_str(), s.base.as_str()].into_iter().enumerate() {
        let mut a = vec![];
        let o = aws(endpoint, &env, CREATE).await;
        assert!(o.ok, "{endpoint}: {}", o.stderr);
        a.push(comparable(&o.json()["nodegroup"]));
        let d = wait_status(endpoint, &env, "ACTIVE").await;
        a.push(comparable(&d["nodegroup"]));
        let o = aws(
            endpoint,
            &env,
            &["list-nodegroups", "--cluster-name", "sandbox-eks"],
        )
        .await;
        a.push(o.json());
        let o = aws(
            endpoint,
            &env,
            &[
                "update-nodegroup-config",
                "--cluster-name",
                "sandbox-eks",
                "--nodegroup-name",
                "gpu",
                "--scaling-config",
                "minSize=0,maxSize=4,desiredSize=4",
                "--labels",
                "addOrUpdateLabels={team=ml},removeLabels=nvidia.com/device-plugin.config",
            ],
        )
        .await;
        assert!(o.ok, "{endpoint}: {}", o.stderr);
        a.push(json!({"type": o.json()["update"]["type"], "id_len": o.json()["update"]["id"].as_str().map(str::len)}));
        let d = wait_status(endpoint, &env, "ACTIVE").await;
        a.push(comparable(&d["nodegroup"]));
        let o = aws(endpoint, &env, CREATE).await;
        a.push(json!({"ok": o.ok, "error": o.stderr.contains("ResourceInUseException")}));
        let o = aws(
            endpoint,
            &env,
            &[
                "describe-nodegroup",
                "--cluster-name",
                "sandbox-eks",
                "--nodegroup-name",
                "missing",
            ],
        )
        .await;
        a.push(json!({"ok": o.ok, "error": o.stderr.contains("ResourceNotFoundException")}));
        let o = aws(
            endpoint,
            &env,
            &[
                "delete-nodegroup",
                "--cluster-name",
                "sandbox-eks",
                "--nodegroup-name",
                "gpu",
            ],
        )
        .await;
        assert!(o.ok, "{endpoint}: {}", o.stderr);
        a.push(comparable(&o.json()["nodegroup"]));
        let mut gone = false;
        for _ in 0..100 {
            let o = aws(
                endpoint,
                &env,
                &[
                    "describe-nodegroup",
                    "--cluster-name",
                    "sandbox-eks",
                    "--nodegroup-name",
                    "gpu",
                ],
            )
            .await;
            if !o.ok && o.stderr.contains("ResourceNotFoundException") {
                gone = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        a.push(json!({ "gone": gone }));
        for (step, v) in a.into_iter().enumerate() {
            if i == 0 {
                answers.push([v, Value::Null]);
            } else {
                answers[step][1] = v;
            }
        }
    }
    let steps = [
        "create",
        "describe",
        "list",
        "update-config",
        "describe after update",
        "create again",
        "describe missing",
        "delete",
        "after delete",
    ];
    let mut diffs = Vec::new();
    for (step, [moto, sandbox]) in answers.iter().enumerate() {
        if moto != sandbox {
            diffs.push(format!(
                "{}:\n  moto    {moto}\n  sandbox {sandbox}",
                steps[step]
            ));
        }
    }
    assert!(
        diffs.is_empty(),
        "sandbox and moto disagree:\n{}",
        diffs.join("\n")
    );
    assert_eq!(answers[4][1]["labels"], json!({"team": "ml"}));
    moto.stop().await;
}
