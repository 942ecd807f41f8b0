//! The Auto Scaling API over raw HTTP: the errors a client must tell apart (a group that does not
//! exist, a key or value too long, too many tags, bad pages, SigV4 for the wrong service), the XML
//! shapes they come in, and tags that survive a restart with the world.

use super::*;

/// Makes node group `name` (1..=4 nodes, 1 now) and returns its Auto Scaling group's name.
async fn node_group(s: &Srv, name: &str) -> String {
    let r = s
        .eks(
            Method::POST,
            "/clusters/sandbox-eks/node-groups",
            Some(
                &json!({"nodegroupName": name, "nodeRole": "arn:aws:iam::123456789012:role/n",
                "subnets": ["subnet-1"], "instanceTypes": ["g5.xlarge"],
                "scalingConfig": {"minSize": 0, "maxSize": 4, "desiredSize": 1}}),
            ),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    r.body["nodegroup"]["resources"]["autoScalingGroups"][0]["name"]
        .as_str()
        .unwrap()
        .to_string()
}

fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn put(asg: &str, tags: &[(&str, &str)]) -> String {
    let mut f = "Action=CreateOrUpdateTags".to_string();
    for (i, (k, v)) in tags.iter().enumerate() {
        let n = i + 1;
        f.push_str(&format!(
            "&Tags.member.{n}.ResourceId={asg}&Tags.member.{n}.ResourceType=auto-scaling-group\
             &Tags.member.{n}.Key={}&Tags.member.{n}.Value={}&Tags.member.{n}.PropagateAtLaunch=true",
            enc(k),
            enc(v)
        ));
    }
    f
}

/// The `<Error>` of an awsQuery answer: (type, code, message).
fn error_of(r: &Resp) -> (String, String, String) {
    let get = |el: &str| {
        r.text
            .split(&format!("<{el}>"))
            .nth(1)
            .and_then(|t| t.split(&format!("</{el}>")).next())
            .unwrap_or_default()
            .to_string()
    };
    assert!(
        r.text.starts_with(
            "<ErrorResponse xmlns=\"http://autoscaling.amazonaws.com/doc/2011-01-01/\"><Error>"
        ),
        "{}",
        r.text
    );
    assert_eq!(r.header("content-type").as_deref(), Some("text/xml"));
    (get("Type"), get("Code"), get("Message"))
}

#[tokio::test]
async fn auto_scaling_errors_come_in_the_services_shape() {
    let s = start(0).await;
    let asg = node_group(&s, "gpu").await;

    // A group that does not exist: CreateOrUpdateTags and DeleteTags refuse, describing skips it.
    let r = s.autoscaling(&put("eks-missing", &[("a", "b")])).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        error_of(&r),
        (
            "Sender".into(),
            "ValidationError".into(),
            "AutoScalingGroup not found - AutoScaling Group eks-missing not found".into()
        )
    );
    let r = s
        .autoscaling("Action=DeleteTags&Tags.member.1.ResourceId=eks-missing&Tags.member.1.Key=a")
        .await;
    assert_eq!(error_of(&r).1, "ValidationError");
    let r = s
        .autoscaling("Action=DescribeAutoScalingGroups&AutoScalingGroupNames.member.1=eks-missing")
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert!(
        r.text.contains("<AutoScalingGroups></AutoScalingGroups>"),
        "{}",
        r.text
    );

    // One missing group refuses the whole call: the good tag beside it is not written.
    let mut two = put(&asg, &[("keep-out", "x")]);
    two.push_str("&Tags.member.2.ResourceId=eks-missing&Tags.member.2.Key=k&Tags.member.2.Value=v");
    assert_eq!(s.autoscaling(&two).await.status, StatusCode::BAD_REQUEST);
    let r = s
        .autoscaling("Action=DescribeTags&Filters.member.1.Name=key&Filters.member.1.Values.member.1=keep-out")
        .await;
    assert!(r.text.contains("<Tags></Tags>"), "{}", r.text);

    // Key and value lengths, with the constraint text the service writes.
    let long_key = "k".repeat(129);
    let r = s.autoscaling(&put(&asg, &[(&long_key, "v")])).await;
    let (_, code, message) = error_of(&r);
    assert_eq!(code, "ValidationError");
    assert!(
        message.contains("at 'tags.1.member.key' failed to satisfy constraint: Member must have length less than or equal to 128"),
        "{message}"
    );
    assert_eq!(
        s.autoscaling(&put(&asg, &[(&"k".repeat(128), "v")]))
            .await
            .status,
        StatusCode::OK
    );
    let r = s.autoscaling(&put(&asg, &[("v", &"x".repeat(257))])).await;
    assert!(error_of(&r).2.contains("'tags.1.member.value'"));
    assert_eq!(
        s.autoscaling(&put(&asg, &[("v", &"x".repeat(256))]))
            .await
            .status,
        StatusCode::OK
    );

    // 50 tags per group: EKS's four plus the two above leave room for 44.
    let keys: Vec<String> = (0..45).map(|i| format!("t{i}")).collect();
    let many: Vec<(&str, &str)> = keys.iter().map(|k| (k.as_str(), "1")).collect();
    let r = s.autoscaling(&put(&asg, &many)).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(error_of(&r).1, "LimitExceeded");
    let r = s.autoscaling(&put(&asg, &many[..44])).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert!(r.text.starts_with("<CreateOrUpdateTagsResponse xmlns=\"http://autoscaling.amazonaws.com/doc/2011-01-01/\"><ResponseMetadata><RequestId>"), "{}", r.text);
    // Overwriting an existing key does not count twice.
    assert_eq!(
        s.autoscaling(&put(&asg, &[("t0", "2")])).await.status,
        StatusCode::OK
    );

    // Pages.
    let r = s.autoscaling("Action=DescribeTags&MaxRecords=101").await;
    assert_eq!(error_of(&r).1, "ValidationError");
    let r = s.autoscaling("Action=DescribeTags&NextToken=garbage").await;
    assert_eq!(error_of(&r).1, "InvalidNextToken");
    let r = s.autoscaling("Action=DescribeTags&MaxRecords=30").await;
    assert!(r.text.contains("<NextToken>30</NextToken>"), "{}", r.text);
    let r = s
        .autoscaling("Action=DescribeTags&MaxRecords=30&NextToken=30")
        .await;
    assert_eq!(r.text.matches("<member>").count(), 20);
    assert!(!r.text.contains("<NextToken>"));
    let names: String = (1..=51)
        .map(|i| format!("&AutoScalingGroupNames.member.{i}=g{i}"))
        .collect();
    let r = s
        .autoscaling(&format!("Action=DescribeAutoScalingGroups{names}"))
        .await;
    assert_eq!(
        error_of(&r).2,
        "The number of group names that may be passed in is limited to 50."
    );
    let r = s
        .autoscaling("Action=DescribeTags&Filters.member.1.Name=colour")
        .await;
    assert_eq!(error_of(&r).1, "ValidationError");

    // The protocol: no action, an unknown one, another version, SigV4 for another service.
    let r = s.autoscaling("Nothing=1").await;
    assert_eq!(error_of(&r).1, "MissingAction");
    let r = s.autoscaling("Action=LaunchRockets").await;
    assert_eq!(error_of(&r).1, "InvalidAction");
    let r = s
        .call(
            Method::POST,
            "/",
            &eks_headers("us-east-1"),
            b"Action=DescribeTags&Version=2011-01-01",
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert_eq!(
        error_of(&r),
        (
            "Sender".into(),
            "InvalidSignatureException".into(),
            "Credential should be scoped to correct service: 'autoscaling'.".into()
        )
    );
}

#[tokio::test]
async fn auto_scaling_group_follows_its_node_group_and_keeps_its_tags_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("world.json");
    let cfg = || Config {
        op_time: Duration::from_millis(0),
        state_file: Some(file.clone()),
        // The autoscalers act at once (their wait for more pods is tested on its own).
        pod_buffers: sandbox::PodBuffers::NONE,
        ..Config::default()
    };
    let asg;
    {
        let s = start_with(cfg()).await;
        asg = node_group(&s, "keep").await;
        let r = s
            .autoscaling(&put(
                &asg,
                &[(
                    "k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu",
                    "10",
                )],
            ))
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    }
    let s = start_with(cfg()).await;
    let r = s
        .autoscaling(&format!(
            "Action=DescribeAutoScalingGroups&AutoScalingGroupNames.member.1={asg}"
        ))
        .await;
    assert!(
        r.text.contains("<Key>k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu</Key><Value>10</Value>"),
        "{}",
        r.text
    );
    assert!(
        r.text.contains(
            "<MinSize>0</MinSize><MaxSize>4</MaxSize><DesiredCapacity>1</DesiredCapacity>"
        )
    );
    // Gone with its node group.
    let r = s
        .eks(
            Method::DELETE,
            "/clusters/sandbox-eks/node-groups/keep",
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    s.sb.settle();
    let r = s
        .autoscaling(&format!(
            "Action=DescribeAutoScalingGroups&AutoScalingGroupNames.member.1={asg}"
        ))
        .await;
    assert!(
        r.text.contains("<AutoScalingGroups></AutoScalingGroups>"),
        "{}",
        r.text
    );
}

/// Every `<name>` element's text.
fn all(text: &str, name: &str) -> Vec<String> {
    text.split(&format!("<{name}>"))
        .skip(1)
        .filter_map(|t| t.split(&format!("</{name}>")).next())
        .map(str::to_string)
        .collect()
}

/// What cluster-autoscaler's AWS provider asks of a group: its instances (with the zone and id
/// its Nodes' provider IDs carry) and the launch template EKS made for it, then
/// SetDesiredCapacity within the bounds, TerminateInstanceInAutoScalingGroup of one instance (its
/// id never comes back) and the activities both leave.
#[tokio::test]
async fn a_group_is_sized_as_cluster_autoscaler_sizes_it() {
    let s = start(0).await;
    let asg = node_group(&s, "gpu").await;
    let describe = format!("Action=DescribeAutoScalingGroups&AutoScalingGroupNames.member.1={asg}");
    let instances = || async {
        let r = s.autoscaling(&describe).await;
        (all(&r.text, "InstanceId"), r.text)
    };
    let (ids, text) = instances().await;
    assert_eq!(ids.len(), 1, "{text}");
    assert!(ids[0].starts_with("i-0") && ids[0].len() == 19, "{text}");
    assert!(text.contains("<AvailabilityZone>us-east-1a</AvailabilityZone><LifecycleState>InService</LifecycleState>"), "{text}");
    let template = super::ec2::tag(&text, "LaunchTemplateName").unwrap();
    assert_eq!(
        template,
        format!("eks-{}", asg.trim_start_matches("eks-gpu-"))
    );
    let r = super::ec2::ec2_at(
        &s,
        "/",
        "us-east-1",
        &format!("Action=DescribeLaunchTemplateVersions&LaunchTemplateName={template}&LaunchTemplateVersion.1=1"),
    )
    .await;
    assert_eq!(
        r.status,
        StatusCode::OK,
        "EC2 shows the template EKS made: {}",
        r.text
    );
    assert_eq!(
        super::ec2::tag(&r.text, "versionNumber").as_deref(),
        Some("1")
    );

    let set = |n: i64| {
        format!(
            "Action=SetDesiredCapacity&AutoScalingGroupName={asg}&DesiredCapacity={n}&HonorCooldown=false"
        )
    };
    let r = s.autoscaling(&set(5)).await;
    assert_eq!(
        error_of(&r).2,
        "New SetDesiredCapacity value 5 is above max value 4 for the AutoScalingGroup."
    );
    let r = s.autoscaling(&set(3)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let (three, _) = instances().await;
    assert_eq!(three.len(), 3);
    assert_eq!(three[0], ids[0], "the first instance stays");
    let ng = s
        .eks(Method::GET, "/clusters/sandbox-eks/node-groups/gpu", None)
        .await;
    assert_eq!(ng.body["nodegroup"]["scalingConfig"]["desiredSize"], 3);

    let terminate = |id: &str, decrement: bool| {
        format!(
            "Action=TerminateInstanceInAutoScalingGroup&InstanceId={id}&ShouldDecrementDesiredCapacity={decrement}"
        )
    };
    let r = s.autoscaling(&terminate(&three[1], true)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(
        super::ec2::tag(&r.text, "Description"),
        Some(format!("Terminating EC2 instance: {}", three[1]))
    );
    let (two, _) = instances().await;
    assert_eq!(two, vec![three[0].clone(), three[2].clone()]);
    // Without decrementing, the group replaces it with a new instance.
    let r = s.autoscaling(&terminate(&two[0], false)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let (replaced, _) = instances().await;
    assert_eq!(replaced.len(), 2);
    assert!(
        !replaced.contains(&three[0]) && !replaced.contains(&three[1]),
        "{replaced:?}"
    );
    let r = s.autoscaling(&terminate("i-0000000000000000", true)).await;
    assert_eq!(
        error_of(&r).2,
        "Instance Id not found - No managed instance found for instance ID: i-0000000000000000"
    );
    let r = s.autoscaling(&set(0)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert!(instances().await.0.is_empty());

    let r = s
        .autoscaling(&format!(
            "Action=DescribeScalingActivities&AutoScalingGroupName={asg}"
        ))
        .await;
    let described = all(&r.text, "Description");
    assert_eq!(described.len(), 2 + 1 + 2 + 2, "{}", r.text);
    assert_eq!(
        described[0],
        format!("Terminating EC2 instance: {}", replaced[1])
    );
    assert!(described.contains(&format!("Launching a new EC2 instance: {}", three[2])));
    assert!(described.contains(&format!("Launching a new EC2 instance: {}", replaced[1])));
    let r = s
        .autoscaling("Action=DescribeScalingActivities&AutoScalingGroupName=eks-missing")
        .await;
    assert_eq!(error_of(&r).1, "ValidationError");
}

/// A group at its minimum does not shrink by a termination.
#[tokio::test]
async fn terminating_at_the_minimum_without_replacement_is_refused() {
    let s = start(0).await;
    let r = s
        .eks(
            Method::POST,
            "/clusters/sandbox-eks/node-groups",
            Some(
                &json!({"nodegroupName": "fixed", "nodeRole": "arn:aws:iam::123456789012:role/n",
                "subnets": ["subnet-1"], "instanceTypes": ["g5.xlarge"],
                "scalingConfig": {"minSize": 1, "maxSize": 2, "desiredSize": 1}}),
            ),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let asg = r.body["nodegroup"]["resources"]["autoScalingGroups"][0]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let r = s
        .autoscaling(&format!(
            "Action=DescribeAutoScalingGroups&AutoScalingGroupNames.member.1={asg}"
        ))
        .await;
    let id = all(&r.text, "InstanceId").remove(0);
    let r = s
        .autoscaling(&format!(
            "Action=TerminateInstanceInAutoScalingGroup&InstanceId={id}&ShouldDecrementDesiredCapacity=true"
        ))
        .await;
    assert_eq!(
        error_of(&r).2,
        "Currently, desiredSize equals minSize (1). Terminating instance without replacement will \
         violate group's min size constraint. Either set shouldDecrementDesiredCapacity flag to \
         false or lower group's min size."
    );
    let r = s
        .autoscaling(&format!(
            "Action=SetDesiredCapacity&AutoScalingGroupName={asg}&DesiredCapacity=0"
        ))
        .await;
    assert_eq!(
        error_of(&r).2,
        "New SetDesiredCapacity value 0 is below min value 1 for the AutoScalingGroup."
    );
}
