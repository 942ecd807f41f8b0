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

async fn autoscaling(endpoint: &str, env: &[(&str, String)], args: &[&str]) -> Out {
    service("autoscaling", endpoint, env, args).await
}

/// `aws <service> --endpoint-url <endpoint> --output json <args>`.
async fn service(name: &str, endpoint: &str, env: &[(&str, String)], args: &[&str]) -> Out {
    let mut a = vec![name, "--endpoint-url", endpoint, "--output", "json"];
    a.extend_from_slice(args);
    run("aws", &a, env).await
}

/// The node group's Auto Scaling group, read and tagged with `aws autoscaling`: EKS's own tags,
/// cluster-autoscaler's node templates added and removed, and the group gone with its node group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws_cli_tags_the_node_groups_auto_scaling_group() {
    if tools::require(Tool::Aws).is_none() {
        return;
    }
    let s = start(0).await;
    let dir = tempfile::tempdir().unwrap();
    let env = aws_env(dir.path());
    let e = s.base.as_str();
    let o = aws(e, &env, CREATE).await;
    assert!(o.ok, "{}", o.stderr);
    let ng = wait_status(e, &env, "ACTIVE").await;
    let asg = ng["nodegroup"]["resources"]["autoScalingGroups"][0]["name"]
        .as_str()
        .unwrap()
        .to_string();

    let o = autoscaling(
        e,
        &env,
        &[
            "describe-auto-scaling-groups",
            "--auto-scaling-group-names",
            &asg,
        ],
    )
    .await;
    assert!(o.ok, "{}", o.stderr);
    let groups = o.json()["AutoScalingGroups"].clone();
    assert_eq!(groups.as_array().unwrap().len(), 1);
    let g = &groups[0];
    assert_eq!(g["AutoScalingGroupName"], asg.as_str());
    assert_eq!(
        (
            g["MinSize"].clone(),
            g["MaxSize"].clone(),
            g["DesiredCapacity"].clone()
        ),
        (json!(1), json!(3), json!(2))
    );
    let keys: Vec<&str> = g["Tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["Key"].as_str().unwrap())
        .collect();
    // EKS's own tags, not the node group's `env=test` (EKS does not copy those).
    assert_eq!(
        keys,
        [
            "eks:cluster-name",
            "eks:nodegroup-name",
            "k8s.io/cluster-autoscaler/enabled",
            "k8s.io/cluster-autoscaler/sandbox-eks"
        ]
    );

    let tag = |k: &str, v: &str| {
        format!(
            "ResourceId={asg},ResourceType=auto-scaling-group,Key={k},Value={v},PropagateAtLaunch=false"
        )
    };
    let res = tag(
        "k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu",
        "10",
    );
    let label = tag(
        "k8s.io/cluster-autoscaler/node-template/label/nvidia.com/device-plugin.config",
        "time-sliced-10",
    );
    let o = autoscaling(e, &env, &["create-or-update-tags", "--tags", &res, &label]).await;
    assert!(o.ok, "{}", o.stderr);
    let o = autoscaling(
        e,
        &env,
        &[
            "describe-tags",
            "--filters",
            &format!("Name=auto-scaling-group,Values={asg}"),
            "Name=key,Values=k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu",
        ],
    )
    .await;
    assert!(o.ok, "{}", o.stderr);
    assert_eq!(
        o.json()["Tags"],
        json!([{"ResourceId": asg, "ResourceType": "auto-scaling-group",
            "Key": "k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu",
            "Value": "10", "PropagateAtLaunch": false}])
    );
    // Pages: the CLI follows NextToken by itself; with --max-items it stops and hands one back.
    let o = autoscaling(e, &env, &["describe-tags", "--page-size", "2"]).await;
    assert_eq!(
        o.json()["Tags"].as_array().unwrap().len(),
        6,
        "{}",
        o.stdout
    );
    let o = autoscaling(e, &env, &["describe-tags", "--max-items", "4"]).await;
    assert_eq!(o.json()["Tags"].as_array().unwrap().len(), 4);
    assert!(o.json()["NextToken"].is_string(), "{}", o.stdout);

    let o = autoscaling(
        e,
        &env,
        &[
            "delete-tags",
            "--tags",
            &format!("ResourceId={asg},ResourceType=auto-scaling-group,Key=k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu"),
        ],
    )
    .await;
    assert!(o.ok, "{}", o.stderr);
    let o = autoscaling(
        e,
        &env,
        &[
            "describe-tags",
            "--filters",
            "Name=key,Values=k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu",
        ],
    )
    .await;
    assert_eq!(o.json()["Tags"], json!([]));

    // The aws CLI shows the service's error for a group that does not exist.
    let o = autoscaling(
        e,
        &env,
        &["create-or-update-tags", "--tags", "ResourceId=eks-nope,ResourceType=auto-scaling-group,Key=a,Value=b,PropagateAtLaunch=true"],
    )
    .await;
    assert!(!o.ok);
    assert!(
        o.stderr.contains("ValidationError")
            && o.stderr.contains("AutoScaling Group eks-nope not found"),
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
    assert!(o.ok, "{}", o.stderr);
    s.sb.settle();
    let o = autoscaling(
        e,
        &env,
        &[
            "describe-auto-scaling-groups",
            "--auto-scaling-group-names",
            &asg,
        ],
    )
    .await;
    assert!(o.ok, "{}", o.stderr);
    assert_eq!(o.json()["AutoScalingGroups"], json!([]));
}

async fn ec2(endpoint: &str, env: &[(&str, String)], args: &[&str]) -> Out {
    service("ec2", endpoint, env, args).await
}

/// A launch template made, versioned, read and deleted with `aws ec2` (botocore parses the
/// sandbox's EC2 XML), and named by a node group made with `aws eks`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws_cli_drives_launch_templates() {
    use base64::Engine as _;
    if tools::require(Tool::Aws).is_none() {
        return;
    }
    let s = start(0).await;
    let dir = tempfile::tempdir().unwrap();
    let env = aws_env(dir.path());
    let e = s.base.as_str();
    let toml =
        "[settings.kubelet-device-plugins.nvidia]\ndevice-sharing-strategy = \"time-slicing\"\n";
    let ud = base64::engine::general_purpose::STANDARD.encode(toml);
    let data = json!({"UserData": ud, "BlockDeviceMappings": [{"DeviceName": "/dev/xvdb",
        "Ebs": {"VolumeSize": 80, "VolumeType": "gp3"}}]})
    .to_string();
    let o = ec2(
        e,
        &env,
        &[
            "create-launch-template",
            "--launch-template-name",
            "br-ts",
            "--version-description",
            "first",
            "--launch-template-data",
            &data,
        ],
    )
    .await;
    assert!(o.ok, "{}", o.stderr);
    let lt = o.json()["LaunchTemplate"].clone();
    let id = lt["LaunchTemplateId"].as_str().unwrap().to_string();
    assert_eq!(lt["LaunchTemplateName"], "br-ts");
    assert_eq!(lt["LatestVersionNumber"], 1);
    let o = ec2(
        e,
        &env,
        &[
            "create-launch-template",
            "--launch-template-name",
            "br-ts",
            "--launch-template-data",
            "{}",
        ],
    )
    .await;
    assert!(
        !o.ok
            && o.stderr
                .contains("InvalidLaunchTemplateName.AlreadyExistsException"),
        "{}",
        o.stderr
    );
    let o = ec2(
        e,
        &env,
        &[
            "describe-launch-template-versions",
            "--launch-template-id",
            &id,
            "--versions",
            "$Latest",
        ],
    )
    .await;
    assert!(o.ok, "{}", o.stderr);
    let v = &o.json()["LaunchTemplateVersions"][0];
    assert_eq!(v["VersionNumber"], 1);
    assert_eq!(v["DefaultVersion"], true);
    assert_eq!(v["LaunchTemplateData"]["UserData"], ud);
    assert_eq!(
        v["LaunchTemplateData"]["BlockDeviceMappings"][0],
        json!({"DeviceName": "/dev/xvdb", "Ebs": {"VolumeSize": 80, "VolumeType": "gp3"}})
    );

    let o = aws(
        e,
        &env,
        &[
            "create-nodegroup",
            "--cluster-name",
            "sandbox-eks",
            "--nodegroup-name",
            "br",
            "--node-role",
            "arn:aws:iam::123456789012:role/node",
            "--subnets",
            "subnet-0a",
            "--instance-types",
            "g4dn.xlarge",
            "--ami-type",
            "BOTTLEROCKET_x86_64_NVIDIA",
            "--launch-template",
            "name=br-ts",
        ],
    )
    .await;
    assert!(o.ok, "{}", o.stderr);
    assert_eq!(
        o.json()["nodegroup"]["launchTemplate"],
        json!({"name": "br-ts", "version": "1", "id": id})
    );

    let o = ec2(
        e,
        &env,
        &["delete-launch-template", "--launch-template-id", &id],
    )
    .await;
    assert!(o.ok, "{}", o.stderr);
    let o = ec2(
        e,
        &env,
        &["describe-launch-templates", "--launch-template-ids", &id],
    )
    .await;
    assert!(
        !o.ok && o.stderr.contains("InvalidLaunchTemplateId.NotFound"),
        "{}",
        o.stderr
    );
}
