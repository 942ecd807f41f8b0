//! EC2 launch templates over raw HTTP (EC2's Query protocol on the shared root, told from Auto
//! Scaling by the SigV4 scope): the lifecycle, `$Latest`/`$Default`/numbered versions, each error
//! in EC2's shape, regions, faults; EKS node groups that name a template; and the Bottlerocket
//! nodes that read the template's TOML settings in the twin.

use super::*;
use base64::Engine as _;
use sandbox::kube::KubeApi;

pub(crate) fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

pub(crate) fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// The headers of an EC2 call signed (in shape) for `region`.
pub(crate) fn ec2_headers(region: &str) -> Vec<(&'static str, String)> {
    vec![
        (
            "authorization",
            format!(
                "AWS4-HMAC-SHA256 Credential=AKIDSANDBOX/20261130/{region}/ec2/aws4_request, \
                 SignedHeaders=content-type;host;x-amz-date, Signature={}",
                "0123456789abcdef".repeat(4)
            ),
        ),
        ("x-amz-date", "20261130T080000Z".to_string()),
        (
            "content-type",
            "application/x-www-form-urlencoded; charset=utf-8".to_string(),
        ),
    ]
}

/// An EC2 call to `url` (the sandbox's root, or another server's): `form` follows
/// `Version=2016-11-15&`.
pub(crate) async fn ec2_at(s: &Srv, url: &str, region: &str, form: &str) -> Resp {
    let headers = ec2_headers(region);
    let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let body = format!("Version=2016-11-15&{form}");
    s.call(Method::POST, url, &h, body.as_bytes()).await
}

async fn ec2(s: &Srv, region: &str, form: &str) -> Resp {
    ec2_at(s, "/", region, form).await
}

/// The text of the first `<name>` element.
pub(crate) fn tag(text: &str, name: &str) -> Option<String> {
    Some(
        text.split(&format!("<{name}>"))
            .nth(1)?
            .split(&format!("</{name}>"))
            .next()?
            .to_string(),
    )
}

/// Every `<name>` element's text.
fn tags(text: &str, name: &str) -> Vec<String> {
    text.split(&format!("<{name}>"))
        .skip(1)
        .filter_map(|t| t.split(&format!("</{name}>")).next())
        .map(str::to_string)
        .collect()
}

/// The code and message of an EC2 error answer, checking its shape.
fn error_of(r: &Resp) -> (String, String) {
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert!(
        r.text.contains("<Response><Errors><Error><Code>") && r.text.contains("<RequestID>"),
        "{}",
        r.text
    );
    (
        tag(&r.text, "Code").unwrap_or_default(),
        tag(&r.text, "Message").unwrap_or_default(),
    )
}

pub(crate) fn create_form(name: &str, user_data: Option<&str>) -> String {
    let mut f = format!(
        "Action=CreateLaunchTemplate&LaunchTemplateName={}\
         &LaunchTemplateData.BlockDeviceMapping.1.DeviceName=%2Fdev%2Fxvdb\
         &LaunchTemplateData.BlockDeviceMapping.1.Ebs.VolumeSize=80\
         &LaunchTemplateData.BlockDeviceMapping.1.Ebs.VolumeType=gp3",
        enc(name)
    );
    if let Some(u) = user_data {
        f.push_str(&format!("&LaunchTemplateData.UserData={}", enc(&b64(u))));
    }
    f
}

/// Makes launch template `name` in us-east-1 with `user_data` (TOML, or none) and returns its id.
async fn launch_template(s: &Srv, name: &str, user_data: Option<&str>) -> String {
    let r = ec2(s, "us-east-1", &create_form(name, user_data)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    tag(&r.text, "launchTemplateId").unwrap()
}

/// Adds a version with `user_data` to template `id`, from version 1; returns its number.
async fn new_version(s: &Srv, id: &str, user_data: &str) -> String {
    let r = ec2(
        s,
        "us-east-1",
        &format!(
            "Action=CreateLaunchTemplateVersion&LaunchTemplateId={id}&SourceVersion=1\
             &LaunchTemplateData.UserData={}",
            enc(&b64(user_data))
        ),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    tag(&r.text, "versionNumber").unwrap()
}

pub(crate) fn time_slicing(replicas: u32) -> String {
    format!(
        "[settings.kubelet-device-plugins.nvidia]\ndevice-sharing-strategy = \"time-slicing\"\n\n\
         [settings.kubelet-device-plugins.nvidia.time-slicing]\nreplicas = {replicas}\n\
         rename-by-default = false\nfail-requests-greater-than-one = false\n"
    )
}

#[tokio::test]
async fn ec2_launch_template_lifecycle() {
    let s = start(0).await;
    let ts10 = time_slicing(10);
    let r = ec2(
        &s,
        "us-east-1",
        &format!(
            "{}&VersionDescription=first&ClientToken=tok-1&TagSpecification.1.ResourceType=launch-template\
             &TagSpecification.1.Tag.1.Key=team&TagSpecification.1.Tag.1.Value=ml",
            create_form("gpu-ts/10_(a)", Some(&ts10))
        ),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.header("content-type").as_deref(), Some("text/xml"));
    assert!(
        r.text.contains(
            "<CreateLaunchTemplateResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>"
        ),
        "{}",
        r.text
    );
    let id = tag(&r.text, "launchTemplateId").unwrap();
    assert!(
        id.len() == 20 && id.starts_with("lt-0") && id[3..].bytes().all(|b| b.is_ascii_hexdigit()),
        "{id}"
    );
    assert_eq!(
        tag(&r.text, "launchTemplateName").as_deref(),
        Some("gpu-ts/10_(a)")
    );
    assert_eq!(tag(&r.text, "defaultVersionNumber").as_deref(), Some("1"));
    assert_eq!(tag(&r.text, "latestVersionNumber").as_deref(), Some("1"));
    assert_eq!(
        tag(&r.text, "createdBy").as_deref(),
        Some("arn:aws:iam::123456789012:root")
    );
    assert!(
        r.text
            .contains("<tagSet><item><key>team</key><value>ml</value></item></tagSet>")
    );
    // The same client token again: the same template, not a duplicate.
    let again = ec2(
        &s,
        "us-east-1",
        &format!(
            "{}&ClientToken=tok-1",
            create_form("gpu-ts/10_(a)", Some(&ts10))
        ),
    )
    .await;
    assert_eq!(tag(&again.text, "launchTemplateId"), Some(id.clone()));

    // Version 2 from version 1: new user data, the block devices inherited.
    let ts4 = time_slicing(4);
    let r = ec2(
        &s,
        "us-east-1",
        &format!(
            "Action=CreateLaunchTemplateVersion&LaunchTemplateName={}&SourceVersion=1\
             &VersionDescription=four&LaunchTemplateData.UserData={}",
            enc("gpu-ts/10_(a)"),
            enc(&b64(&ts4))
        ),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert!(r.text.contains("<launchTemplateVersion><launchTemplateId>"));
    assert_eq!(tag(&r.text, "versionNumber").as_deref(), Some("2"));
    assert_eq!(tag(&r.text, "defaultVersion").as_deref(), Some("false"));
    assert_eq!(tag(&r.text, "userData"), Some(b64(&ts4)));
    assert!(
        r.text.contains(
            "<blockDeviceMappingSet><item><deviceName>/dev/xvdb</deviceName><ebs><volumeSize>80\
             </volumeSize><volumeType>gp3</volumeType></ebs></item></blockDeviceMappingSet>"
        ),
        "{}",
        r.text
    );

    // DescribeLaunchTemplates by id and by name.
    for q in [
        format!("LaunchTemplateId.1={id}"),
        format!("LaunchTemplateName.1={}", enc("gpu-ts/10_(a)")),
    ] {
        let r = ec2(
            &s,
            "us-east-1",
            &format!("Action=DescribeLaunchTemplates&{q}"),
        )
        .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        assert!(r.text.contains("<launchTemplates><item><launchTemplateId>"));
        assert_eq!(tag(&r.text, "latestVersionNumber").as_deref(), Some("2"));
        assert_eq!(tag(&r.text, "defaultVersionNumber").as_deref(), Some("1"));
    }

    // DescribeLaunchTemplateVersions: $Latest, $Default, a number, all.
    let versions = |v: &str| {
        format!(
            "Action=DescribeLaunchTemplateVersions&LaunchTemplateId={id}&LaunchTemplateVersion.1={v}"
        )
    };
    let r = ec2(&s, "us-east-1", &versions("%24Latest")).await;
    assert_eq!(tags(&r.text, "versionNumber"), ["2"]);
    assert_eq!(tag(&r.text, "versionDescription").as_deref(), Some("four"));
    let r = ec2(&s, "us-east-1", &versions("%24Default")).await;
    assert_eq!(tags(&r.text, "versionNumber"), ["1"]);
    assert_eq!(tag(&r.text, "defaultVersion").as_deref(), Some("true"));
    assert_eq!(tag(&r.text, "userData"), Some(b64(&ts10)));
    let r = ec2(&s, "us-east-1", &versions("1")).await;
    assert!(
        r.text.contains("<launchTemplateVersionSet><item>"),
        "{}",
        r.text
    );
    assert_eq!(tags(&r.text, "versionNumber"), ["1"]);
    let r = ec2(
        &s,
        "us-east-1",
        &format!("Action=DescribeLaunchTemplateVersions&LaunchTemplateId={id}"),
    )
    .await;
    assert_eq!(tags(&r.text, "versionNumber"), ["1", "2"]);
    // No template: $Latest of every template of the region.
    let other = launch_template(&s, "other", None).await;
    let r = ec2(
        &s,
        "us-east-1",
        "Action=DescribeLaunchTemplateVersions&LaunchTemplateVersion.1=%24Latest",
    )
    .await;
    assert_eq!(tags(&r.text, "versionNumber").len(), 2, "{}", r.text);
    assert!(r.text.contains(&other));

    // Delete by name; the id is gone.
    let r = ec2(
        &s,
        "us-east-1",
        &format!(
            "Action=DeleteLaunchTemplate&LaunchTemplateName={}",
            enc("gpu-ts/10_(a)")
        ),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert!(r.text.contains("<DeleteLaunchTemplateResponse"));
    assert_eq!(tag(&r.text, "launchTemplateId"), Some(id.clone()));
    let r = ec2(
        &s,
        "us-east-1",
        &format!("Action=DescribeLaunchTemplates&LaunchTemplateId.1={id}"),
    )
    .await;
    assert_eq!(error_of(&r).0, "InvalidLaunchTemplateId.NotFound");
}

#[tokio::test]
async fn ec2_launch_template_errors_come_in_ec2s_shape() {
    let s = start(0).await;
    let id = launch_template(&s, "gpu", Some("[settings]\n")).await;
    let cases: Vec<(String, &str, &str)> = vec![
        (
            create_form("gpu", None),
            "InvalidLaunchTemplateName.AlreadyExistsException",
            "Launch template name already in use.",
        ),
        (
            create_form("ab", None),
            "InvalidLaunchTemplateName.MalformedException",
            "A launch template name must be between 3 and 128 characters, and may contain \
             letters, numbers, and the following characters: - ( ) . / _.",
        ),
        (
            create_form("has space", None),
            "InvalidLaunchTemplateName.MalformedException",
            "",
        ),
        (
            create_form(&"x".repeat(129), None),
            "InvalidLaunchTemplateName.MalformedException",
            "",
        ),
        (
            "Action=CreateLaunchTemplate&LaunchTemplateData.UserData=e30%3D".into(),
            "MissingParameter",
            "The request must contain the parameter LaunchTemplateName",
        ),
        (
            "Action=CreateLaunchTemplate&LaunchTemplateName=bad-ud&LaunchTemplateData.UserData=%2A%2Anot-base64"
                .into(),
            "InvalidUserData.Malformed",
            "Invalid BASE64 encoding of user data.",
        ),
        (
            format!(
                "Action=CreateLaunchTemplate&LaunchTemplateName=big-ud&LaunchTemplateData.UserData={}",
                enc(&b64(&"#".repeat(16 * 1024 + 1)))
            ),
            "InvalidUserData.Malformed",
            "User data is limited to 16384 bytes",
        ),
        (
            "Action=DescribeLaunchTemplates&LaunchTemplateId.1=lt-0123456789abcdef0".into(),
            "InvalidLaunchTemplateId.NotFound",
            "The specified launch template, with template ID lt-0123456789abcdef0, does not exist.",
        ),
        (
            "Action=DescribeLaunchTemplates&LaunchTemplateName.1=nope".into(),
            "InvalidLaunchTemplateName.NotFoundException",
            "At least one of the launch templates specified in the request does not exist.",
        ),
        (
            "Action=DescribeLaunchTemplateVersions&LaunchTemplateName=nope".into(),
            "InvalidLaunchTemplateName.NotFoundException",
            "The specified launch template, with template name nope, does not exist.",
        ),
        (
            format!(
                "Action=DescribeLaunchTemplateVersions&LaunchTemplateId={id}&LaunchTemplateVersion.1=9"
            ),
            "InvalidLaunchTemplateId.VersionNotFound",
            "",
        ),
        (
            format!("Action=CreateLaunchTemplateVersion&LaunchTemplateId={id}&SourceVersion=3"),
            "InvalidLaunchTemplateId.VersionNotFound",
            "",
        ),
        (
            "Action=CreateLaunchTemplateVersion&LaunchTemplateData.UserData=e30%3D".into(),
            "MissingParameter",
            "",
        ),
        (
            "Action=DeleteLaunchTemplate&LaunchTemplateId=lt-0123456789abcdef0".into(),
            "InvalidLaunchTemplateId.NotFound",
            "",
        ),
        (
            "Action=DescribeLaunchTemplateVersions".into(),
            "MissingParameter",
            "",
        ),
        (
            "Action=RunInstances&ImageId=ami-1".into(),
            "InvalidAction",
            "The action RunInstances is not valid for this web service.",
        ),
    ];
    for (form, code, message) in cases {
        let r = ec2(&s, "us-east-1", &form).await;
        let (c, m) = error_of(&r);
        assert_eq!(c, code, "{form}: {}", r.text);
        if !message.is_empty() {
            assert_eq!(m, message, "{form}");
        }
    }
    let r = ec2(
        &s,
        "us-east-1",
        &format!(
            "Action=DescribeLaunchTemplateVersions&LaunchTemplateId={id}&LaunchTemplateVersion.1=9"
        ),
    )
    .await;
    assert_eq!(
        error_of(&r).1,
        format!("Could not find the specified version 9 for the launch template with ID {id}.")
    );
    // Another API version is not this API.
    let headers = ec2_headers("us-east-1");
    let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let r = s
        .call(
            Method::POST,
            "/",
            &h,
            b"Action=DescribeLaunchTemplates&Version=2014-01-01",
        )
        .await;
    assert_eq!(error_of(&r).0, "InvalidAction");
    // Auto Scaling still answers on the same root, in its own shape.
    let r = s.autoscaling("Action=DescribeLaunchTemplates").await;
    assert!(r.text.starts_with("<ErrorResponse"), "{}", r.text);
}

#[tokio::test]
async fn ec2_launch_templates_are_per_region() {
    let s = start(0).await;
    let east = launch_template(&s, "gpu", None).await;
    let r = ec2(&s, "us-west-2", &create_form("gpu", None)).await;
    assert_eq!(
        r.status,
        StatusCode::OK,
        "same name, another region: {}",
        r.text
    );
    let west = tag(&r.text, "launchTemplateId").unwrap();
    assert_ne!(east, west);
    let r = ec2(
        &s,
        "us-west-2",
        &format!("Action=DescribeLaunchTemplates&LaunchTemplateId.1={east}"),
    )
    .await;
    assert_eq!(error_of(&r).0, "InvalidLaunchTemplateId.NotFound");
    let r = ec2(&s, "us-west-2", "Action=DescribeLaunchTemplates").await;
    assert_eq!(
        tags(&r.text, "launchTemplateId"),
        std::slice::from_ref(&west)
    );
    // us-east-1's node groups see only us-east-1's templates.
    let r = s
        .eks(
            Method::POST,
            "/clusters/sandbox-eks/node-groups",
            Some(&br_group("west", "g4dn.xlarge", json!({"id": west}))),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
}

#[tokio::test]
async fn ec2_faults_answer_in_ec2s_shape() {
    let s = start(0).await;
    let r = s
        .call(
            Method::POST,
            "/_sandbox/faults",
            &[],
            json!({"match": {"method": "POST", "path_contains": "/"}, "count": 1, "kind": "503"})
                .to_string()
                .as_bytes(),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let r = ec2(&s, "us-east-1", "Action=DescribeLaunchTemplates").await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.text);
    assert!(
        r.text
            .contains("<Response><Errors><Error><Code>Unavailable</Code>"),
        "{}",
        r.text
    );
    let r = ec2(&s, "us-east-1", "Action=DescribeLaunchTemplates").await;
    assert_eq!(r.status, StatusCode::OK, "count exhausted: {}", r.text);
}

fn br_group(name: &str, instance: &str, lt: Value) -> Value {
    json!({"nodegroupName": name, "nodeRole": "arn:aws:iam::123456789012:role/n",
        "subnets": ["subnet-1"], "instanceTypes": [instance], "amiType": "BOTTLEROCKET_x86_64_NVIDIA",
        "scalingConfig": {"minSize": 0, "maxSize": 2, "desiredSize": 1}, "launchTemplate": lt})
}

async fn active(s: &Srv, name: &str) -> Value {
    let path = format!("/clusters/sandbox-eks/node-groups/{name}");
    eventually(10, || async {
        s.sb.settle();
        let r = s.eks(Method::GET, &path, None).await;
        (r.body["nodegroup"]["status"] == "ACTIVE").then(|| r.body["nodegroup"].clone())
    })
    .await
}

#[tokio::test]
async fn eks_node_groups_name_their_launch_template() {
    let s = start(0).await;
    let base = "/clusters/sandbox-eks/node-groups";
    let id = launch_template(&s, "br-ts", Some(&time_slicing(10))).await;
    let other = launch_template(&s, "br-other", None).await;

    let r = s
        .eks(
            Method::POST,
            base,
            Some(&br_group("ts", "g4dn.xlarge", json!({"name": "br-ts"}))),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(
        r.body["nodegroup"]["launchTemplate"],
        json!({"name": "br-ts", "version": "1", "id": id})
    );
    assert!(r.body["nodegroup"].get("diskSize").is_none());
    let ng = active(&s, "ts").await;
    assert_eq!(
        ng["launchTemplate"],
        json!({"name": "br-ts", "version": "1", "id": id})
    );

    // Refusals: a template that does not exist (by name, by id, a version), both id and name,
    // remote access or a disk size beside a template.
    for (lt, extra, needle) in [
        (json!({"name": "nope"}), json!({}), "nope"),
        (
            json!({"id": "lt-0123456789abcdef0"}),
            json!({}),
            "lt-0123456789abcdef0",
        ),
        (json!({"id": id, "version": "7"}), json!({}), "Version 7"),
        (
            json!({"id": id, "name": "br-ts"}),
            json!({}),
            "Either provide launch template ID or launch template name in the request.",
        ),
        (
            json!({"id": id}),
            json!({"remoteAccess": {"ec2SshKey": "k"}}),
            "Remote access configuration cannot be specified with a launch template.",
        ),
        (
            json!({"id": id}),
            json!({"diskSize": 50}),
            "Disk size must be specified within the launch template.",
        ),
    ] {
        let mut body = br_group("refused", "g4dn.xlarge", lt.clone());
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let r = s.eks(Method::POST, base, Some(&body)).await;
        assert_eq!(
            (r.status, r.header("x-amzn-errortype").as_deref()),
            (StatusCode::BAD_REQUEST, Some("InvalidParameterException")),
            "{lt}: {}",
            r.text
        );
        assert!(
            r.body["message"].as_str().unwrap().contains(needle),
            "{}",
            r.text
        );
    }

    // UpdateNodegroupVersion to version 2 of the same template.
    let v2 = new_version(&s, &id, &time_slicing(4)).await;
    assert_eq!(v2, "2");
    let r = s
        .eks(
            Method::POST,
            &format!("{base}/ts/update-version"),
            Some(&json!({"launchTemplate": {"id": id, "version": "2"}})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["update"]["type"], "VersionUpdate");
    let params = &r.body["update"]["params"];
    assert!(
        params
            .as_array()
            .unwrap()
            .contains(&json!({"type": "LaunchTemplateVersion", "value": "2"})),
        "{params}"
    );
    let ng = active(&s, "ts").await;
    assert_eq!(
        ng["launchTemplate"],
        json!({"name": "br-ts", "version": "2", "id": id})
    );

    // Another template, and a group made without one, are refused.
    let r = s
        .eks(
            Method::POST,
            &format!("{base}/ts/update-version"),
            Some(&json!({"launchTemplate": {"id": other, "version": "1"}})),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert_eq!(
        r.header("x-amzn-errortype").as_deref(),
        Some("InvalidParameterException")
    );
    let r = s
        .eks(
            Method::POST,
            base,
            Some(
                &json!({"nodegroupName": "plain", "nodeRole": "arn:aws:iam::123456789012:role/n",
                "subnets": ["subnet-1"], "instanceTypes": ["g5.xlarge"]}),
            ),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    active(&s, "plain").await;
    let r = s
        .eks(
            Method::POST,
            &format!("{base}/plain/update-version"),
            Some(&json!({"launchTemplate": {"name": "br-ts", "version": "1"}})),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert!(
        r.body["message"]
            .as_str()
            .unwrap()
            .contains("launch template")
    );
}

/// The allocatable `resource` of the first node of EKS node group `pool`.
fn allocatable(k: &KubeApi, pool: &str, resource: &str) -> Option<String> {
    let names = k.pool_node_names("eks", "sandbox-eks", pool);
    let node = k.object("eks", "sandbox-eks", "nodes", "", names.first()?)?;
    node["status"]["allocatable"][resource]
        .as_str()
        .map(str::to_string)
}

#[tokio::test]
async fn bottlerocket_nodes_advertise_their_launch_templates_settings() {
    let (s, k) = start_twin(0).await;
    let base = "/clusters/sandbox-eks/node-groups";
    let ts = launch_template(&s, "br-ts", Some(&time_slicing(10))).await;
    let mig = launch_template(
        &s,
        "br-mig",
        Some(
            "settings.kubelet-device-plugins.nvidia = { device-partitioning-strategy = \"mig\", \
             mig = { profile = { \"a100.40gb\" = \"1g.5gb\" } } }\n",
        ),
    )
    .await;
    let other_gpu = launch_template(
        &s,
        "br-h100",
        Some(
            "[settings.kubelet-device-plugins.nvidia]\ndevice-partitioning-strategy = \"mig\"\n\
             [settings.kubelet-device-plugins.nvidia.mig.profile]\n\"h100.80gb\" = \"1g.10gb\"\n",
        ),
    )
    .await;
    let plain = launch_template(&s, "br-plain", None).await;
    for (name, instance, id) in [
        ("ts", "g4dn.xlarge", &ts),
        ("mig", "p4d.24xlarge", &mig),
        ("h100", "p4d.24xlarge", &other_gpu),
        ("plain", "g4dn.xlarge", &plain),
    ] {
        let r = s
            .eks(
                Method::POST,
                base,
                Some(&br_group(name, instance, json!({"id": id}))),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        active(&s, name).await;
    }
    let gpus = |pool: &str| allocatable(&k, pool, "nvidia.com/gpu");
    assert_eq!(gpus("ts").as_deref(), Some("10"), "1 T4 x 10 replicas");
    assert_eq!(gpus("mig").as_deref(), Some("56"), "8 A100-40GB x 7 1g.5gb");
    assert_eq!(
        gpus("h100").as_deref(),
        Some("8"),
        "an H100 profile leaves A100s whole"
    );
    assert_eq!(
        gpus("plain").as_deref(),
        Some("1"),
        "no settings: whole GPUs"
    );

    // A new version with 4 replicas reaches the nodes once the update is done.
    new_version(&s, &ts, &time_slicing(4)).await;
    let r = s
        .eks(
            Method::POST,
            &format!("{base}/ts/update-version"),
            Some(&json!({"launchTemplate": {"id": ts, "version": "2"}})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    active(&s, "ts").await;
    eventually(5, || async {
        (gpus("ts").as_deref() == Some("4")).then_some(())
    })
    .await;
}
