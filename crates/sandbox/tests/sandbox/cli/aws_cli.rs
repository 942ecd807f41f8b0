//! The aws CLI drives the EKS node group lifecycle.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws_cli_drives_the_node_group_lifecycle() {
    if tools::require(Tool::Aws).is_none() {
        return;
    }
    let s = start(300).await;
    let dir = tempfile::tempdir().unwrap();
    let env = aws_env(dir.path());
    let e = s.base.as_str();
    let o = aws(e, &env, CREATE).await;
    assert!(o.ok, "{}", o.stderr);
    assert_eq!(o.json()["nodegroup"]["status"], "CREATING");
    let ng = wait_status(e, &env, "ACTIVE").await;
    assert_eq!(ng["nodegroup"]["diskSize"], 50);
    assert_eq!(ng["nodegroup"]["tags"], json!({"env": "test"}));
    let o = aws(
        e,
        &env,
        &["list-nodegroups", "--cluster-name", "sandbox-eks"],
    )
    .await;
    assert_eq!(o.json()["nodegroups"], json!(["gpu"]));

    let o = aws(
        e,
        &env,
        &[
            "update-nodegroup-config",
            "--cluster-name",
            "sandbox-eks",
            "--nodegroup-name",
            "gpu",
            "--scaling-config",
            "desiredSize=3",
            "--labels",
            "addOrUpdateLabels={nvidia.com/device-plugin.config=time-sliced-4}",
            "--taints",
            "removeTaints=[{key=nvidia.com/gpu,value=true,effect=NO_SCHEDULE}]",
        ],
    )
    .await;
    assert!(o.ok, "{}", o.stderr);
    let id = o.json()["update"]["id"].as_str().unwrap().to_string();
    let mut status = String::new();
    for _ in 0..100 {
        let o = aws(
            e,
            &env,
            &[
                "describe-update",
                "--name",
                "sandbox-eks",
                "--nodegroup-name",
                "gpu",
                "--update-id",
                &id,
            ],
        )
        .await;
        assert!(o.ok, "{}", o.stderr);
        status = o.json()["update"]["status"].as_str().unwrap().to_string();
        if status != "InProgress" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status, "Successful");
    let ng = wait_status(e, &env, "ACTIVE").await;
    assert_eq!(ng["nodegroup"]["scalingConfig"]["desiredSize"], 3);
    assert_eq!(ng["nodegroup"]["taints"], json!([]));
    assert_eq!(
        ng["nodegroup"]["labels"]["nvidia.com/device-plugin.config"],
        "time-sliced-4"
    );

    let o = aws(
        e,
        &env,
        &[
            "update-nodegroup-version",
            "--cluster-name",
            "sandbox-eks",
            "--nodegroup-name",
            "gpu",
        ],
    )
    .await;
    assert!(o.ok, "{}", o.stderr);
    assert_eq!(o.json()["update"]["type"], "VersionUpdate");
    wait_status(e, &env, "ACTIVE").await;

    // Validation errors come back as the aws CLI shows EKS's.
    let o = aws(
        e,
        &env,
        &[
            "update-nodegroup-config",
            "--cluster-name",
            "sandbox-eks",
            "--nodegroup-name",
            "gpu",
            "--scaling-config",
            "minSize=5",
        ],
    )
    .await;
    assert!(
        !o.ok && o.stderr.contains("InvalidParameterException"),
        "{}",
        o.stderr
    );

    let o = aws(
        e,
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
    assert_eq!(o.json()["nodegroup"]["status"], "DELETING");
    let mut gone = false;
    for _ in 0..100 {
        let o = aws(
            e,
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
        if !o.ok {
            assert!(
                o.stderr.contains("ResourceNotFoundException"),
                "{}",
                o.stderr
            );
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone);
    assert!(
        s.sink
            .take()
            .iter()
            .any(|e| matches!(e, NodeEvent::Deleted { pool, .. } if pool == "gpu"))
    );
}
