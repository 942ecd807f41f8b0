//! Text back to the model, as the plugin reads it. A config in a cluster may have been written by hand or by
//! another tool, so parsing accepts any YAML spelling the plugin would, normalises it to the meaning the
//! plugin gives it, and refuses what the plugin refuses.

use super::rules::{check_resource_name, check_resource_replicas, invalid, no_resources, qualify};
use super::{
    AllocationPolicy, CONFIG_VERSION, DevicePluginConfig, MigStrategyFlag, ReplicatedResource,
    Sharing, SharingKind,
};
use crate::error::DomainError;
use serde::Deserialize;
use std::fmt;

/// Parses one named config as the plugin would, refusing what the plugin refuses.
pub fn parse(text: &str) -> Result<DevicePluginConfig, DomainError> {
    let raw: Option<RawConfig> = serde_saphyr::from_str(text).map_err(|e| {
        invalid(format!(
            "The document is not a device plugin config: {e}. Expected a mapping with version, flags \
             and sharing, or an empty document."
        ))
    })?;
    let Some(raw) = raw else {
        return Ok(DevicePluginConfig::default());
    };
    if let Some(version) = raw.version.as_deref()
        && !version.is_empty()
        && version != CONFIG_VERSION
    {
        return Err(invalid(format!(
            "version is \"{version}\": the plugin refuses it (unknown version). Valid values: \
             {CONFIG_VERSION}."
        )));
    }
    let mig_strategy = match raw.flags.as_ref().and_then(|f| f.mig_strategy.clone()) {
        None => None,
        Some(s) => Some(MigStrategyFlag::parse(&s).ok_or_else(|| {
            invalid(format!(
                "flags.migStrategy is \"{s}\", which the plugin does not know. Valid values: none, \
                 single, mixed."
            ))
        })?),
    };
    let allocation_policy = match raw
        .flags
        .as_ref()
        .and_then(|f| f.plugin.as_ref())
        .and_then(|p| p.shared_devices_allocation_policy.as_deref())
    {
        None | Some("") => None,
        Some(p) => Some(AllocationPolicy::parse(p).ok_or_else(|| {
            invalid(format!(
                "flags.plugin.sharedDevicesAllocationPolicy is \"{p}\", which the plugin refuses \
                 at start (invalid --shared-devices-allocation-policy option). Valid values: \
                 distributed, packed."
            ))
        })?),
    };
    let sharing = match raw.sharing {
        None => None,
        Some(RawSharing {
            time_slicing: Some(_),
            mps: Some(_),
        }) => {
            return Err(invalid(
                "sharing has both timeSlicing and mps: the plugin refuses them together on one node. \
                 Keep one of them.",
            ));
        }
        Some(RawSharing {
            time_slicing: Some(r),
            mps: None,
        }) => Some(sharing_from_raw(SharingKind::TimeSlicing, r)?),
        Some(RawSharing {
            time_slicing: None,
            mps: Some(r),
        }) => Some(sharing_from_raw(SharingKind::Mps, r)?),
        Some(RawSharing {
            time_slicing: None,
            mps: None,
        }) => None,
    };
    let config = DevicePluginConfig {
        mig_strategy,
        allocation_policy,
        sharing,
    };
    config.validate()?;
    Ok(config)
}

fn sharing_from_raw(kind: SharingKind, raw: RawReplicated) -> Result<Sharing, DomainError> {
    let key = kind.key();
    let raw_resources = raw.resources.unwrap_or_default();
    if raw_resources.is_empty() {
        return Err(no_resources(key));
    }
    let mut resources = Vec::with_capacity(raw_resources.len());
    for r in raw_resources {
        let Some(name) = r.name else {
            return Err(invalid(format!(
                "A sharing.{key} resource has no name (\"no resource name specified\"). Add name, e.g. \
                 nvidia.com/gpu."
            )));
        };
        let name = qualify(&name);
        check_resource_name(&name, key)?;
        let Some(replicas) = r.replicas else {
            return Err(invalid(format!(
                "sharing.{key} resource \"{name}\" has no replicas (\"no replicas specified\"). Add \
                 replicas: 2 or more."
            )));
        };
        let replicas = check_resource_replicas(replicas.0, &name, key)?;
        resources.push(ReplicatedResource { name, replicas });
    }
    Ok(Sharing {
        kind,
        rename_by_default: raw.rename_by_default.unwrap_or(false),
        fail_requests_greater_than_one: raw
            .fail_requests_greater_than_one
            .unwrap_or(kind == SharingKind::Mps),
        resources,
    })
}

// What serde sees: everything optional, unknown keys ignored (as the plugin's JSON decoding does), so `parse`
// can answer with the plugin's own reasons.

#[derive(Deserialize)]
struct RawConfig {
    version: Option<String>,
    flags: Option<RawFlags>,
    sharing: Option<RawSharing>,
}

#[derive(Deserialize)]
struct RawFlags {
    #[serde(rename = "migStrategy")]
    mig_strategy: Option<String>,
    plugin: Option<RawPluginFlags>,
}

#[derive(Deserialize)]
struct RawPluginFlags {
    #[serde(rename = "sharedDevicesAllocationPolicy")]
    shared_devices_allocation_policy: Option<String>,
}

#[derive(Deserialize)]
struct RawSharing {
    #[serde(rename = "timeSlicing")]
    time_slicing: Option<RawReplicated>,
    mps: Option<RawReplicated>,
}

#[derive(Deserialize)]
struct RawReplicated {
    #[serde(rename = "renameByDefault")]
    rename_by_default: Option<bool>,
    #[serde(rename = "failRequestsGreaterThanOne")]
    fail_requests_greater_than_one: Option<bool>,
    resources: Option<Vec<RawResource>>,
}

#[derive(Deserialize)]
struct RawResource {
    name: Option<String>,
    replicas: Option<Replicas>,
}

/// An integer written as a YAML number. The plugin decodes through JSON, where `"10"` is a string and does
/// not go into an int; serde-saphyr would parse the quoted form as a number, so we ask for the token type.
struct Replicas(i64);

impl<'de> Deserialize<'de> for Replicas {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Replicas;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer number of replicas (not a string or a fraction)")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Replicas, E> {
                Ok(Replicas(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Replicas, E> {
                Ok(Replicas(i64::try_from(v).unwrap_or(i64::MAX)))
            }
        }
        d.deserialize_any(V)
    }
}
