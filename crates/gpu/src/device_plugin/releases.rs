//! What a release of the device plugin makes of a config: the settings it reads and the ones it
//! passes over without a word. Two settings of this model came with v0.20.0 (k8s-device-plugin
//! v0.20.0 CHANGELOG.md and the v0.17.4..v0.20.0 diff of api/config/v1):
//! - `flags.plugin.sharedDevicesAllocationPolicy`: earlier plugins have no such flag and the YAML
//!   decoder they use drops keys it does not know, so the policy is always `distributed` there;
//! - `failRequestsGreaterThanOne: false` under `sharing.mps`: v0.17 to v0.19 set it to true for
//!   MPS whatever the config says (api/config/v1/config.go), and their `ValidateRequest`
//!   (internal/rm/rm.go) refuses a container asking for more than one MPS replica; v0.20.0 keeps
//!   an explicit `false` and lets such a request through.
//!
//! Where a cluster runs a release is in its image tag (`nvcr.io/nvidia/k8s-device-plugin:v0.18.1`)
//! or the GPU operator's ClusterPolicy `spec.devicePlugin.version` (`v0.18.1`); a digest or a tag
//! of another form says nothing, and then nothing is claimed.

use super::model::{DevicePluginConfig, SharingKind};

/// A device plugin release, `(major, minor, patch)`.
pub type Release = (u32, u32, u32);

/// The first release that reads both settings above.
pub const SHARING_OPTIONS_SINCE: Release = (0, 20, 0);

/// A release before every one: what it passes over is every setting some release passes over.
pub const OLDEST: Release = (0, 0, 0);

/// The release a version or image tag names: `v0.18.1`, `0.20.0`, `v0.20.0-ubi9` or an image
/// `repo/k8s-device-plugin:v0.18.1`. None for a digest or anything else.
pub fn release_of(version_or_image: &str) -> Option<Release> {
    if version_or_image.contains('@') {
        return None;
    }
    // The tag is after the last `:` that follows the last `/` (a registry may carry a port).
    let last = version_or_image.rsplit('/').next()?;
    let tag = last.rsplit_once(':').map_or(last, |(_, t)| t);
    let tag = tag.strip_prefix('v').unwrap_or(tag);
    let core = tag.split(['-', '+']).next()?;
    let mut parts = core.split('.').map(|p| p.parse::<u32>().ok());
    let r = (parts.next()??, parts.next()??, parts.next()??);
    parts.next().is_none().then_some(r)
}

/// The settings of `config` that `release` passes over, as the config's text spells them.
pub fn ignored_by(config: &DevicePluginConfig, release: Release) -> Vec<&'static str> {
    let mut ignored = Vec::new();
    if release >= SHARING_OPTIONS_SINCE {
        return ignored;
    }
    if config.allocation_policy.is_some() {
        ignored.push("flags.plugin.sharedDevicesAllocationPolicy");
    }
    if config
        .sharing
        .as_ref()
        .is_some_and(|s| s.kind == SharingKind::Mps && !s.fail_requests_greater_than_one)
    {
        ignored.push("sharing.mps.failRequestsGreaterThanOne: false");
    }
    ignored
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device_plugin::parse;

    #[test]
    fn releases_are_read_from_versions_and_image_tags() {
        assert_eq!(release_of("v0.18.1"), Some((0, 18, 1)));
        assert_eq!(release_of("0.20.0"), Some((0, 20, 0)));
        assert_eq!(release_of("v0.20.0-ubi9"), Some((0, 20, 0)));
        assert_eq!(
            release_of("nvcr.io/nvidia/k8s-device-plugin:v0.17.4"),
            Some((0, 17, 4))
        );
        assert_eq!(
            release_of("registry.local:5000/k8s-device-plugin:v0.20.1"),
            Some((0, 20, 1))
        );
        assert_eq!(release_of("registry.local:5000/k8s-device-plugin"), None);
        assert_eq!(
            release_of("nvcr.io/nvidia/k8s-device-plugin@sha256:ab12"),
            None
        );
        assert_eq!(release_of("latest"), None);
        assert_eq!(release_of("v1.2"), None);
    }

    #[test]
    fn settings_before_v0_20_are_named_and_later_ones_pass() {
        let relaxed = parse(
            "version: v1\nflags:\n  plugin:\n    sharedDevicesAllocationPolicy: packed\n\
             sharing:\n  mps:\n    failRequestsGreaterThanOne: false\n    resources:\n    \
             - name: nvidia.com/gpu\n      replicas: 4\n",
        )
        .unwrap();
        assert_eq!(
            ignored_by(&relaxed, (0, 18, 1)),
            [
                "flags.plugin.sharedDevicesAllocationPolicy",
                "sharing.mps.failRequestsGreaterThanOne: false"
            ]
        );
        assert!(ignored_by(&relaxed, (0, 20, 0)).is_empty());
        assert_eq!(ignored_by(&relaxed, OLDEST).len(), 2);
        // MPS's default (refuse) and time-slicing's `false` mean the same on every release.
        let strict = parse(
            "version: v1\nsharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n      \
             replicas: 4\n",
        )
        .unwrap();
        assert!(ignored_by(&strict, (0, 17, 4)).is_empty());
        let ts = parse(
            "version: v1\nsharing:\n  timeSlicing:\n    failRequestsGreaterThanOne: false\n    \
             resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n",
        )
        .unwrap();
        assert!(ignored_by(&ts, (0, 17, 4)).is_empty());
    }
}
