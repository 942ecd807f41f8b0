//! The EC2 launch template of a Bottlerocket node group that shares its GPUs: its user data
//! carries Bottlerocket's device plugin settings (`gpu::bottlerocket`), which EKS merges with the
//! cluster settings it gives every Bottlerocket node (EKS user guide, "Customize managed nodes with
//! launch templates"; AWS Knowledge Center, "configure user data for Bottlerocket node groups").
//! A node group made with a launch template takes new versions of it (UpdateNodegroupVersion
//! recycles the nodes); one made without can never take one, which is why adding or removing the
//! template replaces the node group.
//!
//! Four EC2 calls over EC2's Query protocol, written here rather than through `aws-sdk-ec2`: that
//! crate generates every one of EC2's hundreds of operations and would cost more compile time than
//! the rest of the provider's AWS support together, for four calls. They are signed with aws-sigv4
//! (which the AWS SDK crates sign with), sent with the provider's reqwest, and their XML read with
//! aws-smithy-xml (which the Auto Scaling SDK reads its XML with). Wire format: the EC2 API
//! reference, "Query requests" (`Action`, `Version=2016-11-15`, lists as `Name.N`) and "Error
//! codes" (`<Response><Errors><Error><Code>`); shapes as botocore's `ec2/2016-11-15` model names
//! them.
//!
//! Retries follow the EKS calls': throttling (`RequestLimitExceeded`), 5xx and dropped
//! connections are tried again with backoff up to [`MAX_ATTEMPTS`], within the operation's
//! deadline and stop.

use std::time::SystemTime;

use aws_credential_types::provider::ProvideCredentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_xml::decode::{Document, ScopedDecoder, try_data};
use base64::Engine as _;

use super::client::{EksClient, MAX_ATTEMPTS, has_code};
use crate::cloud::error::{CloudError, Detail, error_chain};
use crate::operation::{Attempt, Backoff, Failure, OpCtx, retry, retryable_status};

const VERSION: &str = "2016-11-15";
/// EC2's answers here are a few KiB.
const MAX_BODY: usize = 1024 * 1024;
/// Bottlerocket's data volume (container images and storage) is its second block device; the
/// node group's `diskSize` cannot be given beside a launch template, so the template sizes it
/// (bottlerocket-os/bottlerocket README, "Default volumes"; EKS user guide, launch templates:
/// "Disk size" is specified in the template's block device mappings).
pub(super) const BOTTLEROCKET_DATA_DEVICE: &str = "/dev/xvdb";
const AUTH_CODES: &[&str] = &[
    "AuthFailure",
    "SignatureDoesNotMatch",
    "InvalidClientTokenId",
    "UnauthorizedOperation",
    "IncompleteSignature",
    "MissingAuthenticationToken",
];
const THROTTLING_CODES: &[&str] = &["RequestLimitExceeded", "Throttling", "ServiceUnavailable"];

/// A launch template version as the node group uses it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct TemplateRef {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) version: String,
}

/// What a launch template version holds that the provider writes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct TemplateData {
    /// The user data, decoded from base64.
    pub(super) user_data: Option<String>,
    /// The size of Bottlerocket's data volume, in GiB.
    pub(super) data_volume_gb: Option<u32>,
}

/// The launch template the provider names for a node group: unique per region, like the
/// template names themselves. EC2 allows 3 to 128 characters of `[a-zA-Z0-9().-/_]`, and EKS's
/// cluster and node group names are letters, digits, '-' and '_'; a pair too long for 128 keeps
/// the node group and a hash of the cluster.
pub(super) fn template_name(cluster: &str, nodegroup: &str) -> String {
    let name = format!("fracgpu/{cluster}/{nodegroup}");
    if name.len() <= 128 {
        return name;
    }
    let hash = cluster.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("fracgpu/{hash:016x}/{nodegroup}")
}

/// Whether a template is one the provider made (and may delete).
pub(super) fn made_here(name: &str) -> bool {
    name.starts_with("fracgpu/")
}

/// The `LaunchTemplateData.*` parameters of `data`.
fn data_params(data: &TemplateData) -> Vec<(String, String)> {
    let mut p = Vec::new();
    if let Some(u) = &data.user_data {
        p.push((
            "LaunchTemplateData.UserData".into(),
            base64::engine::general_purpose::STANDARD.encode(u),
        ));
    }
    if let Some(gb) = data.data_volume_gb {
        let m = "LaunchTemplateData.BlockDeviceMapping.1";
        p.push((format!("{m}.DeviceName"), BOTTLEROCKET_DATA_DEVICE.into()));
        p.push((format!("{m}.Ebs.VolumeSize"), gb.to_string()));
        p.push((format!("{m}.Ebs.VolumeType"), "gp3".into()));
    }
    p
}

impl EksClient {
    /// Makes the template `name` with `data` as its first version.
    pub(super) async fn create_template(
        &self,
        region: &str,
        name: &str,
        data: &TemplateData,
        ctx: &OpCtx,
    ) -> Result<TemplateRef, CloudError> {
        let mut params = vec![("LaunchTemplateName".to_string(), name.to_string())];
        params.extend(data_params(data));
        let doc = self
            .ec2(ctx, region, "CreateLaunchTemplate", params)
            .await?;
        let t = doc.child("launchTemplate");
        Ok(TemplateRef {
            id: t.text("launchTemplateId"),
            name: t.text("launchTemplateName"),
            version: t.text("latestVersionNumber"),
        })
    }

    /// Adds a version of the template: `template`'s version with what `data` says instead
    /// (EC2's `SourceVersion`), so that what else the template holds stays as it was.
    pub(super) async fn new_template_version(
        &self,
        region: &str,
        template: &TemplateRef,
        data: &TemplateData,
        ctx: &OpCtx,
    ) -> Result<TemplateRef, CloudError> {
        let mut params = vec![
            ("LaunchTemplateId".to_string(), template.id.clone()),
            ("SourceVersion".to_string(), template.version.clone()),
        ];
        params.extend(data_params(data));
        let doc = self
            .ec2(ctx, region, "CreateLaunchTemplateVersion", params)
            .await?;
        let v = doc.child("launchTemplateVersion");
        Ok(TemplateRef {
            id: v.text("launchTemplateId"),
            name: v.text("launchTemplateName"),
            version: v.text("versionNumber"),
        })
    }

    /// One version of a template (by id, or by name when the id is empty), resolved: the
    /// reference carries the version's number even when asked for `$Latest` or `$Default`.
    pub(super) async fn template_version(
        &self,
        region: &str,
        template: &TemplateRef,
        ctx: &OpCtx,
    ) -> Result<(TemplateRef, TemplateData), CloudError> {
        let by = if template.id.is_empty() {
            ("LaunchTemplateName", template.name.clone())
        } else {
            ("LaunchTemplateId", template.id.clone())
        };
        let params = vec![
            (by.0.to_string(), by.1),
            ("LaunchTemplateVersion.1".into(), template.version.clone()),
        ];
        let doc = self
            .ec2(ctx, region, "DescribeLaunchTemplateVersions", params)
            .await?;
        let item = doc.child("launchTemplateVersionSet").child("item");
        if item.name.is_empty() {
            return Err(CloudError::BadResponse(
                format!(
                    "DescribeLaunchTemplateVersions of {} version {} answered no version",
                    template.name, template.version
                )
                .into(),
            ));
        }
        let d = item.child("launchTemplateData");
        let user_data = match d.child("userData").text.as_str() {
            "" => None,
            b64 => Some(decode_user_data(b64)?),
        };
        let data_volume_gb = d
            .child("blockDeviceMappingSet")
            .children
            .iter()
            .find(|m| m.text("deviceName") == BOTTLEROCKET_DATA_DEVICE)
            .and_then(|m| m.child("ebs").text("volumeSize").parse().ok());
        Ok((
            TemplateRef {
                id: item.text("launchTemplateId"),
                name: item.text("launchTemplateName"),
                version: item.text("versionNumber"),
            },
            TemplateData {
                user_data,
                data_volume_gb,
            },
        ))
    }

    /// Deletes a template with all its versions; one already gone is not an error.
    pub(super) async fn delete_template(
        &self,
        region: &str,
        name: &str,
        ctx: &OpCtx,
    ) -> Result<(), CloudError> {
        let params = vec![("LaunchTemplateName".to_string(), name.to_string())];
        match self.ec2(ctx, region, "DeleteLaunchTemplate", params).await {
            Ok(_) => Ok(()),
            Err(e)
                if has_code(&e, "InvalidLaunchTemplateName.NotFoundException")
                    || has_code(&e, "InvalidLaunchTemplateId.NotFound") =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// One EC2 action, signed and retried; its answer's document.
    async fn ec2(
        &self,
        ctx: &OpCtx,
        region: &str,
        action: &str,
        params: Vec<(String, String)>,
    ) -> Result<Element, CloudError> {
        let region = self.region_or_default(region)?.to_string();
        let url = match &self.ec2.endpoint {
            Some(e) => format!("{}/", e.trim_end_matches('/')),
            None => format!("https://ec2.{region}.amazonaws.com/"),
        };
        let body = {
            let mut f = form_urlencoded::Serializer::new(String::new());
            f.append_pair("Action", action)
                .append_pair("Version", VERSION);
            for (k, v) in &params {
                f.append_pair(k, v);
            }
            f.finish()
        };
        let what = &format!("EC2 {action}");
        let attempt = || async {
            let failed = |last, retry_after| {
                Ok(Attempt::Failed(Failure {
                    last: Err(last),
                    retry_after,
                    waiting_for: format!("a retry of {what}"),
                }))
            };
            match self.ec2_once(ctx, &url, &region, &body, what).await {
                Ok(doc) => Ok(Attempt::Done(doc)),
                Err((e, true)) => {
                    if matches!(e, CloudError::Api { .. }) {
                        self.throttles
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    failed(e, None)
                }
                Err((e, false)) => Err(e),
            }
        };
        let log = |f: &Failure<Element, CloudError>, attempt: u32, _| {
            if let Err(e) = &f.last {
                tracing::debug!(attempt, call = %what, error = %e, "ec2 call failed, retrying");
            }
        };
        let backoff = Backoff::new(self.retry_first, self.retry_cap);
        retry(ctx, backoff, MAX_ATTEMPTS, attempt, log).await
    }

    /// One attempt; an error says whether it is worth another.
    async fn ec2_once(
        &self,
        ctx: &OpCtx,
        url: &str,
        region: &str,
        body: &str,
        what: &str,
    ) -> Result<Element, (CloudError, bool)> {
        let fatal = |e| (e, false);
        let credentials = match &self.ec2.credentials {
            Some(p) => ctx
                .run(what, p.provide_credentials())
                .await
                .map_err(|e| fatal(e.into()))?
                .map_err(|e| {
                    let message = format!("{what}: no AWS credentials: {}", error_chain(&e));
                    fatal(CloudError::Auth(Detail::caused_by(message, e)))
                })?,
            None => {
                return Err(fatal(CloudError::Auth(
                    format!("{what}: no AWS credentials were found").into(),
                )));
            }
        };
        let identity = credentials.into();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(region)
            .name("ec2")
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()
            .map_err(|e| fatal(CloudError::Auth(format!("{what}: {e}").into())))?
            .into();
        let content_type = "application/x-www-form-urlencoded; charset=utf-8";
        let signable = SignableRequest::new(
            "POST",
            url,
            [("content-type", content_type)].into_iter(),
            SignableBody::Bytes(body.as_bytes()),
        )
        .map_err(|e| fatal(CloudError::Auth(format!("{what}: {e}").into())))?;
        let (instructions, _) = sign(signable, &params)
            .map_err(|e| fatal(CloudError::Auth(format!("{what}: {e}").into())))?
            .into_parts();
        let mut req = self
            .ec2
            .http
            .post(url)
            .header("content-type", content_type)
            .timeout(self.attempt_timeout)
            .body(body.to_string());
        for (name, value) in instructions.headers() {
            req = req.header(name, value);
        }
        tracing::debug!(call = what, "ec2 request");
        let sent = async {
            let resp = req.send().await.map_err(|e| {
                let message = format!("{what}: {}", error_chain(&e));
                (CloudError::Transport(Detail::caused_by(message, e)), true)
            })?;
            let status = resp.status().as_u16();
            let bytes = crate::cloud::answer::read_body(resp, what, MAX_BODY)
                .await
                .map_err(|e| {
                    let again = matches!(e, CloudError::Transport(_));
                    (e, again)
                })?;
            let doc = Element::parse(&bytes).map_err(|e| {
                let message = format!("{what}: the answer (HTTP {status}) is not EC2's XML: {e}");
                (CloudError::BadResponse(message.into()), false)
            })?;
            if (200..300).contains(&status) {
                return Ok(doc);
            }
            let error = doc.child("Errors").child("Error");
            let code = Some(error.text("Code"))
                .filter(|c| !c.is_empty())
                .unwrap_or_else(|| format!("HTTP{status}"));
            let message = error.text("Message");
            let again = retryable_status(status) || THROTTLING_CODES.contains(&code.as_str());
            if AUTH_CODES.contains(&code.as_str()) {
                return Err((CloudError::Auth(format!("{code}: {message}").into()), again));
            }
            Err((
                CloudError::Api {
                    status,
                    code,
                    message,
                },
                again,
            ))
        };
        match ctx.run(what, sent).await {
            Ok(r) => r,
            Err(interrupted) => Err(fatal(interrupted.into())),
        }
    }
}

fn decode_user_data(b64: &str) -> Result<String, CloudError> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .map_err(|e| {
            CloudError::BadResponse(
                format!("a launch template's user data is not base64: {e}").into(),
            )
        })?;
    // User data that is not text holds no Bottlerocket settings (they are TOML).
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// An element of an EC2 answer: its name, its text (for the leaves named in [`LEAVES`]) and its
/// elements. Missing elements read as empty ones, so lookups chain.
#[derive(Debug, Default)]
pub(super) struct Element {
    name: String,
    text: String,
    children: Vec<Element>,
}

/// The elements read as text: the ones the provider reads (EC2's answers are otherwise
/// structures; a leaf read as a structure would lose its text).
const LEAVES: &[&str] = &[
    "launchTemplateId",
    "launchTemplateName",
    "latestVersionNumber",
    "defaultVersionNumber",
    "versionNumber",
    "userData",
    "deviceName",
    "volumeSize",
    "Code",
    "Message",
];

static EMPTY: Element = Element {
    name: String::new(),
    text: String::new(),
    children: Vec::new(),
};

impl Element {
    fn parse(bytes: &[u8]) -> Result<Element, String> {
        let mut doc = Document::try_from(bytes).map_err(|e| e.to_string())?;
        let mut root = doc.root_element().map_err(|e| e.to_string())?;
        Self::read(&mut root)
    }

    fn read(dec: &mut ScopedDecoder<'_, '_>) -> Result<Element, String> {
        let name = dec.start_el().local().to_string();
        if LEAVES.contains(&name.as_str()) {
            let text = try_data(dec).map_err(|e| e.to_string())?.into_owned();
            return Ok(Element {
                name,
                text,
                children: Vec::new(),
            });
        }
        let mut children = Vec::new();
        while let Some(mut tag) = dec.next_tag() {
            children.push(Self::read(&mut tag)?);
        }
        Ok(Element {
            name,
            text: String::new(),
            children,
        })
    }

    fn child(&self, name: &str) -> &Element {
        self.children
            .iter()
            .find(|c| c.name == name)
            .unwrap_or(&EMPTY)
    }

    fn text(&self, name: &str) -> String {
        self.child(name).text.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_and_errors_read() {
        let answer = br#"<?xml version="1.0" encoding="UTF-8"?>
<DescribeLaunchTemplateVersionsResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
  <requestId>r</requestId>
  <launchTemplateVersionSet><item>
    <launchTemplateId>lt-0123</launchTemplateId><launchTemplateName>fracgpu/c/g</launchTemplateName>
    <versionNumber>3</versionNumber>
    <launchTemplateData><userData>W3hdCg==</userData>
      <blockDeviceMappingSet><item><deviceName>/dev/xvdb</deviceName>
        <ebs><volumeSize>80</volumeSize><volumeType>gp3</volumeType></ebs></item></blockDeviceMappingSet>
    </launchTemplateData></item></launchTemplateVersionSet>
</DescribeLaunchTemplateVersionsResponse>"#;
        let doc = Element::parse(answer).unwrap();
        let item = doc.child("launchTemplateVersionSet").child("item");
        assert_eq!(item.text("versionNumber"), "3");
        let d = item.child("launchTemplateData");
        assert_eq!(decode_user_data(&d.text("userData")).unwrap(), "[x]\n");
        assert_eq!(
            d.child("blockDeviceMappingSet").children[0]
                .child("ebs")
                .text("volumeSize"),
            "80"
        );
        let error = br#"<Response><Errors><Error><Code>InvalidLaunchTemplateId.NotFound</Code><Message>The specified launch template, with template ID lt-1, does not exist.</Message></Error></Errors><RequestID>r</RequestID></Response>"#;
        let doc = Element::parse(error).unwrap();
        assert_eq!(
            doc.child("Errors").child("Error").text("Code"),
            "InvalidLaunchTemplateId.NotFound"
        );
        assert_eq!(doc.child("nothing").child("here").text("x"), "");
    }

    #[test]
    fn template_names_fit_ec2() {
        assert_eq!(template_name("prod", "t4"), "fracgpu/prod/t4");
        let long = template_name(&"c".repeat(100), &"g".repeat(63));
        assert!(
            long.len() <= 128 && long.ends_with(&"g".repeat(63)),
            "{long}"
        );
        assert!(made_here(&long));
        assert_ne!(long, template_name(&"d".repeat(100), &"g".repeat(63)));
    }
}
