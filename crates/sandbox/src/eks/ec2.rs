//! Amazon EC2, as far as a managed node group's launch template goes: CreateLaunchTemplate,
//! CreateLaunchTemplateVersion, DescribeLaunchTemplates, DescribeLaunchTemplateVersions and
//! DeleteLaunchTemplate over EC2's Query protocol (`ec2_query.rs`; `POST /`, SigV4 service `ec2`),
//! per region (the credential scope's). The templates (`launch_templates.rs`) are what a node group
//! names in its `launchTemplate`; the ones EKS makes for its node groups (`asg.rs`) are listed and
//! read beside them.
//!
//! Written from the Amazon EC2 API reference (the five actions, `LaunchTemplate`,
//! `LaunchTemplateVersion`, `RequestLaunchTemplateData`) and botocore's
//! data/ec2/2016-11-15/service-2.json (wire names, `LaunchTemplateName` 3..=128 characters of
//! `[a-zA-Z0-9().\-/_]`, `VolumeType`). Errors, HTTP 400, with the messages as real answers quote
//! them where one was found:
//! - a name in use in the region: `InvalidLaunchTemplateName.AlreadyExistsException` "Launch
//!   template name already in use." (as moto's ec2/exceptions.py has it);
//! - a name out of its pattern: `InvalidLaunchTemplateName.MalformedException` "A launch template
//!   name must be between 3 and 128 characters, and may contain letters, numbers, and the
//!   following characters: - ( ) . / _." (github-aws-runners/terraform-aws-github-runner#932);
//! - a template id that does not exist: `InvalidLaunchTemplateId.NotFound` "The specified launch
//!   template, with template ID <id>, does not exist." (cartography-cncf/cartography#1519); a name:
//!   `InvalidLaunchTemplateName.NotFoundException`, "At least one of the launch templates
//!   specified in the request does not exist." from DescribeLaunchTemplates, "The specified launch
//!   template, with template name <name>, does not exist." where one template is named (moto);
//! - a version that does not exist: `InvalidLaunchTemplateId.VersionNotFound` "Could not find the
//!   specified version <v> for the launch template with ID <id>." (eksctl-io/eksctl#7786);
//! - user data that is not base64, or longer than 16 KB decoded ("User data is limited to 16 KB,
//!   in raw form, before it is base64-encoded": EC2 user guide, "Work with instance user data"):
//!   `InvalidUserData.Malformed`, "User data is limited to 16384 bytes" for the size (quoted in
//!   caltechlibrary/clasm's v0.0.6 release notes), "Invalid BASE64 encoding of user data." for
//!   the encoding;
//! - no template named: `MissingParameter`; an action this API does not have, or another API
//!   version: `InvalidAction`; no action: `MissingAction` (API reference, common client errors).

use std::borrow::Cow;

use axum::http::{Method, StatusCode};
use axum::response::Response;

use super::asg::eks_templates;
use super::ec2_query::{EC2_VERSION, Ec2Error, ec2_answer, ec2_error, items};
use super::launch_templates::{BlockDevice, LaunchTemplate, LtData, LtVersion, by_name};
use super::query::{Params, el};
use super::sigv4::sigv4_region;
use super::world::EksWorld;
use crate::api::{ApiRequest, CloudApi};
use crate::dates::rfc3339_millis;
use crate::{AWS_ACCOUNT, Ctx, Sandbox};

/// The EC2 API.
pub(crate) struct Ec2;

impl CloudApi for Ec2 {
    type Error = Ec2Error;

    fn dispatch(sb: &Sandbox, req: &ApiRequest) -> Result<Response, Ec2Error> {
        dispatch(sb, req)
    }

    /// EC2's server-side codes (API reference, "Server error codes"): `RequestLimitExceeded` for
    /// throttling, `Unavailable`, `InternalError`.
    fn injected(status: StatusCode, message: String) -> Ec2Error {
        let code = match status.as_u16() {
            429 => "RequestLimitExceeded",
            503 => "Unavailable",
            _ => "InternalError",
        };
        Ec2Error {
            status,
            code,
            message,
        }
    }
}

/// User data, decoded, at most 16 KB.
const MAX_USER_DATA: usize = 16 * 1024;
const VOLUME_TYPES: &[&str] = &["standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"];

fn dispatch(sb: &Sandbox, req: &ApiRequest) -> Result<Response, Ec2Error> {
    let region = sigv4_region(&req.headers, "ec2").map_err(|e| {
        let (status, code, message) = e.parts();
        // EC2 names the SigV4 failures without the `Exception` suffix.
        let code = match code {
            "MissingAuthenticationTokenException" => "MissingAuthenticationToken",
            "IncompleteSignatureException" => "IncompleteSignature",
            _ => "AuthFailure",
        };
        Ec2Error {
            status,
            code,
            message: message.to_string(),
        }
    })?;
    let p = if req.method == Method::GET {
        Params::parse(req.uri.query().unwrap_or_default().as_bytes())
    } else {
        Params::parse(&req.body)
    };
    let Some(action) = p.get("Action") else {
        return Err(ec2_error(
            "MissingAction",
            "The request must contain the parameter Action",
        ));
    };
    if p.get("Version") != Some(EC2_VERSION) {
        return Err(invalid_action(action));
    }
    match action {
        "CreateLaunchTemplate" => sb.with_world(|w, ctx| create(&mut w.eks, ctx, &region, &p)),
        "CreateLaunchTemplateVersion" => {
            sb.with_world(|w, ctx| create_version(&mut w.eks, ctx, &region, &p))
        }
        "DescribeLaunchTemplates" => sb.with_world(|w, _| describe(&w.eks, &region, &p)),
        "DescribeLaunchTemplateVersions" => {
            sb.with_world(|w, _| describe_versions(&w.eks, &region, &p))
        }
        "DeleteLaunchTemplate" => sb.with_world(|w, ctx| delete(&mut w.eks, ctx, &region, &p)),
        _ => Err(invalid_action(action)),
    }
}

fn invalid_action(action: &str) -> Ec2Error {
    ec2_error(
        "InvalidAction",
        format!("The action {action} is not valid for this web service."),
    )
}

fn id_missing(id: &str) -> Ec2Error {
    ec2_error(
        "InvalidLaunchTemplateId.NotFound",
        format!("The specified launch template, with template ID {id}, does not exist."),
    )
}

fn name_missing(name: &str) -> Ec2Error {
    ec2_error(
        "InvalidLaunchTemplateName.NotFoundException",
        format!("The specified launch template, with template name {name}, does not exist."),
    )
}

fn version_missing(version: &str, id: &str) -> Ec2Error {
    ec2_error(
        "InvalidLaunchTemplateId.VersionNotFound",
        format!(
            "Could not find the specified version {version} for the launch template with ID {id}."
        ),
    )
}

fn valid_name(n: &str) -> bool {
    (3..=128).contains(&n.len())
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"().-/_".contains(&b))
}

/// A region's template, the user's or one EKS made for a node group (`asg.rs`).
fn find<'a>(
    eks: &'a EksWorld,
    region: &str,
    pick: impl Fn(&LaunchTemplate) -> bool,
) -> Option<Cow<'a, LaunchTemplate>> {
    if let Some(t) = eks
        .launch_templates
        .values()
        .find(|t| t.region == region && pick(t))
    {
        return Some(Cow::Borrowed(t));
    }
    eks_templates(eks, region).find(|t| pick(t)).map(Cow::Owned)
}

/// Every template of a region: the user's, then the ones EKS made.
fn all_templates<'a>(eks: &'a EksWorld, region: &'a str) -> Vec<Cow<'a, LaunchTemplate>> {
    eks.launch_templates
        .values()
        .filter(|t| t.region == region)
        .map(Cow::Borrowed)
        .chain(eks_templates(eks, region).map(Cow::Owned))
        .collect()
}

/// The template a request names by `LaunchTemplateId` or `LaunchTemplateName` (the id wins when
/// both are given).
fn named<'a>(
    eks: &'a EksWorld,
    region: &str,
    p: &Params,
) -> Result<Cow<'a, LaunchTemplate>, Ec2Error> {
    let nonempty = |k: &str| p.get(k).filter(|v| !v.is_empty());
    if let Some(id) = nonempty("LaunchTemplateId") {
        return find(eks, region, |t| t.id == id).ok_or_else(|| id_missing(id));
    }
    if let Some(name) = nonempty("LaunchTemplateName") {
        return find(eks, region, |t| t.name == name).ok_or_else(|| name_missing(name));
    }
    Err(ec2_error(
        "MissingParameter",
        "The request must contain the parameter LaunchTemplateName or LaunchTemplateId",
    ))
}

/// `LaunchTemplateData.*` over `base`: what the request gives replaces what the source version had
/// (CreateLaunchTemplateVersion: "the new version inherits the same launch parameters as the
/// source version, except for parameters that you specify").
fn launch_data(p: &Params, base: LtData) -> Result<LtData, Ec2Error> {
    let mut data = base;
    if let Some(u) = p.get("UserData") {
        use base64::Engine as _;
        let compact: String = u.split_whitespace().collect();
        let raw = base64::engine::general_purpose::STANDARD
            .decode(&compact)
            .map_err(|_| {
                ec2_error(
                    "InvalidUserData.Malformed",
                    "Invalid BASE64 encoding of user data.",
                )
            })?;
        if raw.len() > MAX_USER_DATA {
            return Err(ec2_error(
                "InvalidUserData.Malformed",
                format!("User data is limited to {MAX_USER_DATA} bytes"),
            ));
        }
        data.user_data = Some(u.to_string());
    }
    if p.has("BlockDeviceMapping") {
        let mut devices = Vec::new();
        for m in p.items("BlockDeviceMapping") {
            let size = match m.get("Ebs.VolumeSize") {
                None => None,
                Some(s) => Some(s.parse::<i64>().ok().filter(|n| *n > 0).ok_or_else(|| {
                    ec2_error(
                        "InvalidParameterValue",
                        format!("Value ({s}) for parameter volumeSize is invalid."),
                    )
                })?),
            };
            let kind = m.get("Ebs.VolumeType");
            if let Some(k) = kind.filter(|k| !VOLUME_TYPES.contains(k)) {
                return Err(ec2_error(
                    "InvalidParameterValue",
                    format!(
                        "Value ({k}) for parameter volumeType is invalid. Allowed values are \
                         {}.",
                        VOLUME_TYPES.join(", ")
                    ),
                ));
            }
            devices.push(BlockDevice {
                device_name: m.get("DeviceName").map(str::to_string),
                volume_size: size,
                volume_type: kind.map(str::to_string),
            });
        }
        data.block_devices = devices;
    }
    Ok(data)
}

/// The tags of the request's `launch-template` tag specifications.
fn template_tags(p: &Params) -> Vec<(String, String)> {
    p.items("TagSpecification")
        .into_iter()
        .filter(|s| s.get("ResourceType") == Some("launch-template"))
        .flat_map(|s| {
            s.items("Tag").into_iter().map(|t| {
                (
                    t.get("Key").unwrap_or_default().to_string(),
                    t.get("Value").unwrap_or_default().to_string(),
                )
            })
        })
        .collect()
}

fn created_by() -> String {
    format!("arn:aws:iam::{AWS_ACCOUNT}:root")
}

/// The `LaunchTemplate` shape.
fn template_xml(t: &LaunchTemplate) -> String {
    let mut out = [
        el("launchTemplateId", &t.id),
        el("launchTemplateName", &t.name),
        el("createTime", &rfc3339_millis(t.created_at)),
        el("createdBy", &created_by()),
        el("defaultVersionNumber", &t.default_version.to_string()),
        el("latestVersionNumber", &t.latest().to_string()),
    ]
    .concat();
    if !t.tags.is_empty() {
        let tags: Vec<String> = t
            .tags
            .iter()
            .map(|(k, v)| el("key", k) + &el("value", v))
            .collect();
        out.push_str(&items("tagSet", &tags));
    }
    out
}

/// The `LaunchTemplateVersion` shape.
fn version_xml(t: &LaunchTemplate, v: &LtVersion) -> String {
    let mut data = String::new();
    if !v.data.block_devices.is_empty() {
        let devices: Vec<String> = v
            .data
            .block_devices
            .iter()
            .map(|d| {
                let mut ebs = String::new();
                if let Some(s) = d.volume_size {
                    ebs.push_str(&el("volumeSize", &s.to_string()));
                }
                if let Some(k) = &d.volume_type {
                    ebs.push_str(&el("volumeType", k));
                }
                let name = d
                    .device_name
                    .as_deref()
                    .map(|n| el("deviceName", n))
                    .unwrap_or_default();
                format!("{name}<ebs>{ebs}</ebs>")
            })
            .collect();
        data.push_str(&items("blockDeviceMappingSet", &devices));
    }
    if let Some(u) = &v.data.user_data {
        data.push_str(&el("userData", u));
    }
    let description = v
        .description
        .as_deref()
        .map(|d| el("versionDescription", d))
        .unwrap_or_default();
    [
        el("launchTemplateId", &t.id),
        el("launchTemplateName", &t.name),
        el("versionNumber", &v.number.to_string()),
        description,
        el("createTime", &rfc3339_millis(v.created_at)),
        el("createdBy", &created_by()),
        el(
            "defaultVersion",
            if v.number == t.default_version {
                "true"
            } else {
                "false"
            },
        ),
        format!("<launchTemplateData>{data}</launchTemplateData>"),
    ]
    .concat()
}

fn create(
    eks: &mut EksWorld,
    ctx: &mut Ctx,
    region: &str,
    p: &Params,
) -> Result<Response, Ec2Error> {
    let name = p
        .get("LaunchTemplateName")
        .filter(|n| !n.is_empty())
        .ok_or_else(|| {
            ec2_error(
                "MissingParameter",
                "The request must contain the parameter LaunchTemplateName",
            )
        })?;
    if !valid_name(name) {
        return Err(ec2_error(
            "InvalidLaunchTemplateName.MalformedException",
            "A launch template name must be between 3 and 128 characters, and may contain \
             letters, numbers, and the following characters: - ( ) . / _.",
        ));
    }
    let token = p.get("ClientToken").filter(|t| !t.is_empty());
    // A retry with the same client token answers the template that token made (EC2 API
    // reference, "Ensuring idempotency").
    if let Some(t) = token.and_then(|tok| {
        eks.launch_templates
            .values()
            .find(|t| t.region == region && t.client_token.as_deref() == Some(tok))
    }) {
        return Ok(ec2_answer(
            "CreateLaunchTemplate",
            &format!("<launchTemplate>{}</launchTemplate>", template_xml(t)),
        ));
    }
    if by_name(&eks.launch_templates, region, name).is_some() {
        return Err(ec2_error(
            "InvalidLaunchTemplateName.AlreadyExistsException",
            "Launch template name already in use.",
        ));
    }
    let data = launch_data(&p.nested("LaunchTemplateData"), LtData::default())?;
    let id = loop {
        let id = format!("lt-0{:016x}", fastrand::u64(..));
        if !eks.launch_templates.contains_key(&id) {
            break id;
        }
    };
    let t = LaunchTemplate {
        id: id.clone(),
        name: name.to_string(),
        region: region.to_string(),
        created_at: ctx.now,
        default_version: 1,
        versions: vec![LtVersion {
            number: 1,
            description: p.get("VersionDescription").map(str::to_string),
            created_at: ctx.now,
            data,
        }],
        tags: template_tags(p),
        client_token: token.map(str::to_string),
    };
    let doc = format!("<launchTemplate>{}</launchTemplate>", template_xml(&t));
    eks.launch_templates.insert(id, t);
    ctx.mutated();
    Ok(ec2_answer("CreateLaunchTemplate", &doc))
}

fn create_version(
    eks: &mut EksWorld,
    ctx: &mut Ctx,
    region: &str,
    p: &Params,
) -> Result<Response, Ec2Error> {
    let t = named(eks, region, p)?;
    let base = match p.get("SourceVersion").filter(|v| !v.is_empty()) {
        None => LtData::default(),
        Some(v) => t
            .version(v)
            .ok_or_else(|| version_missing(v, &t.id))?
            .data
            .clone(),
    };
    let data = launch_data(&p.nested("LaunchTemplateData"), base)?;
    let id = t.id.clone();
    let t = eks.launch_templates.get_mut(&id).expect("found above");
    let v = LtVersion {
        number: t.latest() + 1,
        description: p.get("VersionDescription").map(str::to_string),
        created_at: ctx.now,
        data,
    };
    let doc = format!(
        "<launchTemplateVersion>{}</launchTemplateVersion>",
        version_xml(t, &v)
    );
    t.versions.push(v);
    ctx.mutated();
    Ok(ec2_answer("CreateLaunchTemplateVersion", &doc))
}

fn describe(eks: &EksWorld, region: &str, p: &Params) -> Result<Response, Ec2Error> {
    let ids = p.item_strings("LaunchTemplateId");
    let names = p.item_strings("LaunchTemplateName");
    let mut chosen: Vec<Cow<LaunchTemplate>> = Vec::new();
    for id in &ids {
        chosen.push(find(eks, region, |t| &t.id == id).ok_or_else(|| id_missing(id))?);
    }
    for name in &names {
        chosen.push(find(eks, region, |t| &t.name == name).ok_or_else(|| {
            ec2_error(
                "InvalidLaunchTemplateName.NotFoundException",
                "At least one of the launch templates specified in the request does not exist.",
            )
        })?);
    }
    if ids.is_empty() && names.is_empty() {
        chosen = all_templates(eks, region);
    }
    chosen.dedup_by(|a, b| a.id == b.id);
    let members: Vec<String> = chosen.iter().map(|t| template_xml(t)).collect();
    Ok(ec2_answer(
        "DescribeLaunchTemplates",
        &items("launchTemplates", &members),
    ))
}

fn describe_versions(eks: &EksWorld, region: &str, p: &Params) -> Result<Response, Ec2Error> {
    let versions = p.item_strings("LaunchTemplateVersion");
    let named_any = ["LaunchTemplateId", "LaunchTemplateName"]
        .iter()
        .any(|k| p.get(k).is_some_and(|v| !v.is_empty()));
    let mut out = Vec::new();
    if named_any {
        let t = named(eks, region, p)?;
        if versions.is_empty() {
            out.extend(t.versions.iter().map(|v| version_xml(&t, v)));
        }
        for v in &versions {
            let found = t.version(v).ok_or_else(|| version_missing(v, &t.id))?;
            out.push(version_xml(&t, found));
        }
    } else {
        // Without a template, only `$Latest` and `$Default` of every template (the API
        // reference's DescribeLaunchTemplateVersions `Versions`).
        let wrong = "To describe the launch template data for all your launch templates, specify \
                     $Latest, $Default, or both for the versions, and omit the launch template ID \
                     and name and version numbers.";
        if versions.is_empty() {
            return Err(ec2_error("MissingParameter", wrong));
        }
        if versions.iter().any(|v| v != "$Latest" && v != "$Default") {
            return Err(ec2_error("InvalidParameterValue", wrong));
        }
        for t in all_templates(eks, region) {
            for v in &versions {
                if let Some(found) = t.version(v) {
                    out.push(version_xml(&t, found));
                }
            }
        }
    }
    Ok(ec2_answer(
        "DescribeLaunchTemplateVersions",
        &items("launchTemplateVersionSet", &out),
    ))
}

fn delete(
    eks: &mut EksWorld,
    ctx: &mut Ctx,
    region: &str,
    p: &Params,
) -> Result<Response, Ec2Error> {
    let id = named(eks, region, p)?.id.clone();
    let t = eks.launch_templates.remove(&id).expect("found above");
    ctx.mutated();
    Ok(ec2_answer(
        "DeleteLaunchTemplate",
        &format!("<launchTemplate>{}</launchTemplate>", template_xml(&t)),
    ))
}
