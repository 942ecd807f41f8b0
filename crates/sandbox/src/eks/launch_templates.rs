//! EC2 launch templates, as far as EKS managed node groups use them: a named, versioned set of
//! launch parameters (here the user data and the block device mappings), per region. The EC2 API
//! (`ec2.rs`) makes and reads them; a node group made or updated with one (`operations.rs`) copies
//! the version it names, so the model stands apart from both.
//!
//! Sources: Amazon EC2 API reference, CreateLaunchTemplate, CreateLaunchTemplateVersion,
//! DescribeLaunchTemplateVersions ("`$Latest`, `$Default`, or a version number") and the
//! `LaunchTemplate`/`LaunchTemplateVersion` shapes; botocore data/ec2/2016-11-15/service-2.json.
//! A template's first version is its default until changed (ModifyLaunchTemplate, not modelled).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct LaunchTemplate {
    /// `lt-0` and 16 hexadecimal digits (the 17-character form EC2 gives new ids).
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) region: String,
    pub(crate) created_at: u64,
    pub(crate) default_version: u64,
    /// Version N is `versions[N - 1]`; versions are never deleted here.
    pub(crate) versions: Vec<LtVersion>,
    /// The tags of the `launch-template` tag specification, in request order.
    pub(crate) tags: Vec<(String, String)>,
    pub(crate) client_token: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct LtVersion {
    pub(crate) number: u64,
    pub(crate) description: Option<String>,
    pub(crate) created_at: u64,
    pub(crate) data: LtData,
}

/// The launch parameters modelled: what a managed node group's launch template carries for a
/// Bottlerocket node (its TOML settings in the user data, and the root volume).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct LtData {
    /// Base64, as the request gave it (EC2 answers it back as given).
    pub(crate) user_data: Option<String>,
    pub(crate) block_devices: Vec<BlockDevice>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct BlockDevice {
    pub(crate) device_name: Option<String>,
    pub(crate) volume_size: Option<i64>,
    pub(crate) volume_type: Option<String>,
}

impl LaunchTemplate {
    pub(crate) fn latest(&self) -> u64 {
        self.versions.len() as u64
    }

    /// The version a request names: `$Latest`, `$Default` or a number.
    pub(crate) fn version(&self, v: &str) -> Option<&LtVersion> {
        let n = match v {
            "$Latest" => self.latest(),
            "$Default" => self.default_version,
            n => n.parse().ok()?,
        };
        self.versions.get(usize::try_from(n).ok()?.checked_sub(1)?)
    }
}

/// The templates of every region, by id.
pub(crate) type Templates = BTreeMap<String, LaunchTemplate>;

/// A region's template with this id.
pub(crate) fn by_id<'a>(all: &'a Templates, region: &str, id: &str) -> Option<&'a LaunchTemplate> {
    all.get(id).filter(|t| t.region == region)
}

/// A region's template with this name (names are unique in a region).
pub(crate) fn by_name<'a>(
    all: &'a Templates,
    region: &str,
    name: &str,
) -> Option<&'a LaunchTemplate> {
    all.values().find(|t| t.region == region && t.name == name)
}
