//! The same EKS happy path against moto and against the sandbox, comparing every field moto
//! models (see the module above for where moto departs from EKS).

use super::*;
use crate::cloud::ec2::{b64, create_form, ec2_at, enc, tag};
use axum::http::StatusCode;

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

/// EC2 launch templates: the same raw requests to moto and to the sandbox answer the same codes
/// for a duplicate name, a template id and a template name that do not exist, and a version that
/// does not exist, and the same version documents. (moto departs from EC2 elsewhere:
/// DescribeLaunchTemplates skips an id that does not exist, where EC2 answers
/// InvalidLaunchTemplateId.NotFound, and DeleteLaunchTemplate answers a missing id with
/// InvalidLaunchTemplateName.NotFoundException; neither is compared.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ec2_launch_template_answers_match_moto() {
    if tools::require(Tool::Moto).is_none() {
        return;
    }
    let moto = Moto::start().await;
    let s = start(0).await;
    let toml = "[settings.kubelet-device-plugins.nvidia]\ndevice-sharing-strategy = \"mps\"\n";
    let mut answers: Vec<Vec<Value>> = Vec::new();
    for url in [format!("{}/", moto.url), "/".to_string()] {
        let call = |form: String| {
            let (s, url) = (&s, url.clone());
            async move { ec2_at(s, &url, "us-east-1", &form).await }
        };
        let outcome = |r: &Resp| json!({"status": r.status.as_u16(), "code": tag(&r.text, "Code")});
        let mut a = Vec::new();
        let r = call(create_form("moto-cmp", Some(toml))).await;
        assert_eq!(r.status, StatusCode::OK, "{url}: {}", r.text);
        let id = tag(&r.text, "launchTemplateId").unwrap();
        a.push(json!({"name": tag(&r.text, "launchTemplateName"),
            "default": tag(&r.text, "defaultVersionNumber"), "latest": tag(&r.text, "latestVersionNumber")}));
        a.push(outcome(&call(create_form("moto-cmp", None)).await));
        a.push(outcome(
            &call(
                "Action=DescribeLaunchTemplateVersions&LaunchTemplateId=lt-0123456789abcdef0"
                    .into(),
            )
            .await,
        ));
        a.push(outcome(
            &call("Action=DescribeLaunchTemplates&LaunchTemplateName.1=nope".into()).await,
        ));
        a.push(outcome(
            &call(format!(
                "Action=DescribeLaunchTemplateVersions&LaunchTemplateId={id}&LaunchTemplateVersion.1=9"
            ))
            .await,
        ));
        let r = call(format!(
            "Action=CreateLaunchTemplateVersion&LaunchTemplateId={id}&SourceVersion=1\
             &LaunchTemplateData.UserData={}",
            enc(&b64("[settings]\n"))
        ))
        .await;
        a.push(json!({"version": tag(&r.text, "versionNumber")}));
        for v in ["%24Latest", "%24Default", "1"] {
            let r = call(format!(
                "Action=DescribeLaunchTemplateVersions&LaunchTemplateName=moto-cmp&LaunchTemplateVersion.1={v}"
            ))
            .await;
            assert_eq!(r.status, StatusCode::OK, "{url} {v}: {}", r.text);
            a.push(json!({"version": tag(&r.text, "versionNumber"),
                "default": tag(&r.text, "defaultVersion"), "userData": tag(&r.text, "userData")}));
        }
        answers.push(a);
    }
    let steps = [
        "create",
        "create again",
        "versions of a missing id",
        "describe a missing name",
        "a missing version",
        "create version 2",
        "$Latest",
        "$Default",
        "version 1",
    ];
    let diffs: Vec<String> = steps
        .iter()
        .enumerate()
        .filter(|(i, _)| answers[0][*i] != answers[1][*i])
        .map(|(i, step)| {
            format!(
                "{step}:\n  moto    {}\n  sandbox {}",
                answers[0][i], answers[1][i]
            )
        })
        .collect();
    assert!(
        diffs.is_empty(),
        "sandbox and moto disagree:\n{}",
        diffs.join("\n")
    );
    assert_eq!(
        answers[1][4]["code"],
        "InvalidLaunchTemplateId.VersionNotFound"
    );
    moto.stop().await;
}
