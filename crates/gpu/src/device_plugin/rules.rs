//! What the plugin refuses in a config, with its own reasons. Both our model (before we render it) and text
//! read from a cluster (while we parse it) go through these checks, so a config we write is one a node
//! accepts, and a refusal names the plugin's message a user would find in its logs.

use super::{DevicePluginConfig, GPU_RESOURCE, MigStrategyFlag, SharingKind};
use crate::error::{DomainError, Field, summary};

/// The prefix the plugin puts on resource names that lack it.
const RESOURCE_PREFIX: &str = "nvidia.com";
/// The plugin's limit on a fully-qualified resource name.
const MAX_RESOURCE_NAME_LEN: usize = 63;

impl DevicePluginConfig {
    /// Checks the model against what the plugin refuses, so we never write a config a node would reject.
    pub(crate) fn validate(&self) -> Result<(), DomainError> {
        let Some(sharing) = &self.sharing else {
            return Ok(());
        };
        let key = sharing.kind.key();
        if sharing.resources.is_empty() {
            return Err(no_resources(key));
        }
        for r in &sharing.resources {
            check_resource_name(&r.name, key)?;
            if r.name != qualify(&r.name) {
                return Err(invalid(format!(
                    "sharing.{key} resource \"{}\" is not fully qualified; write \"{}\".",
                    r.name,
                    qualify(&r.name)
                )));
            }
            check_resource_replicas(i64::from(r.replicas), &r.name, key)?;
        }
        if sharing.kind == SharingKind::Mps {
            if self.mig_strategy == Some(MigStrategyFlag::Mixed) {
                return Err(invalid(
                    "sharing.mps with flags.migStrategy mixed: the plugin runs MPS on full GPUs only and \
                     refuses it with the mixed strategy. Use migStrategy none (or single), or time-slicing.",
                ));
            }
            if let Some(r) = sharing.resources.iter().find(|r| r.name != GPU_RESOURCE) {
                return Err(invalid(format!(
                    "sharing.mps resource \"{}\": MPS shares only full GPUs, advertised as {GPU_RESOURCE}. \
                     Valid values: {GPU_RESOURCE}.",
                    r.name
                )));
            }
        }
        Ok(())
    }
}

/// The plugin's NewResourceName: prefix `nvidia.com/` unless present.
pub(super) fn qualify(name: &str) -> String {
    match name.strip_prefix(RESOURCE_PREFIX) {
        Some(rest) if rest.starts_with('/') => name.to_string(),
        _ => format!("{RESOURCE_PREFIX}/{name}"),
    }
}

pub(super) fn check_resource_name(qualified: &str, key: &str) -> Result<(), DomainError> {
    if qualified.len() > MAX_RESOURCE_NAME_LEN {
        return Err(invalid(format!(
            "sharing.{key} resource \"{qualified}\" is {} characters long: the plugin refuses \
             fully-qualified resource names over {MAX_RESOURCE_NAME_LEN} characters. Use a shorter name.",
            qualified.len()
        )));
    }
    let local = qualified
        .split_once('/')
        .map_or(qualified, |(_, local)| local);
    if !is_dns_subdomain(local) {
        return Err(invalid(format!(
            "sharing.{key} resource \"{qualified}\" has an incorrect format: after \"nvidia.com/\" the \
             plugin wants lowercase letters, digits, '-' and '.', starting and ending with a letter or \
             digit (e.g. nvidia.com/gpu, nvidia.com/mig-1g.5gb)."
        )));
    }
    Ok(())
}

pub(super) fn check_resource_replicas(
    replicas: i64,
    name: &str,
    key: &str,
) -> Result<u32, DomainError> {
    if replicas < 2 {
        return Err(invalid(format!(
            "sharing.{key} resource \"{name}\" has replicas {replicas}: the plugin refuses it (\"number \
             of replicas must be >= 2\"). Use 2 or more, or drop the sharing block to advertise each GPU \
             once."
        )));
    }
    u32::try_from(replicas).map_err(|_| {
        invalid(format!(
            "sharing.{key} resource \"{name}\" has replicas {replicas}, more than any node can use."
        ))
    })
}

/// Kubernetes' DNS-1123 subdomain rule, which the plugin applies to the part after the prefix.
fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            let bytes = label.as_bytes();
            match (bytes.first(), bytes.last()) {
                (Some(first), Some(last)) => {
                    first.is_ascii_alphanumeric()
                        && last.is_ascii_alphanumeric()
                        && bytes
                            .iter()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
                }
                _ => false,
            }
        })
}

/// A `sharing` block without resources, whether our model or parsed text has it.
pub(super) fn no_resources(key: &str) -> DomainError {
    invalid(format!(
        "sharing.{key} has no resources: the plugin refuses it (\"no resources specified\"). List at \
         least one resource, e.g. {{name: nvidia.com/gpu, replicas: 10}}."
    ))
}

pub(super) fn invalid(detail: impl Into<String>) -> DomainError {
    DomainError::new(
        Field::DevicePluginConfig,
        summary::INVALID_DEVICE_PLUGIN_CONFIG,
        detail,
    )
}
