//! Bottlerocket's NVIDIA device plugin settings: the TOML a node's user data carries to share its
//! GPUs, and the way back from such settings to the sharing mode they set up.
//!
//! Bottlerocket's NVIDIA variants run the device plugin as a host service configured from
//! `settings.kubelet-device-plugins.nvidia`, never from the GPU operator's ConfigMap or node
//! labels (bottlerocket.dev settings reference, "kubelet-device-plugins"). Both Karpenter's
//! `EC2NodeClass.spec.userData` and an EKS managed node group's launch template deliver them.
//! Facts followed, with their sources:
//! - time-slicing (`device-sharing-strategy = "time-slicing"`, `time-slicing.replicas`,
//!   `rename-by-default`, `fail-requests-greater-than-one`) since 1.25.0
//!   (bottlerocket-os/bottlerocket#4230);
//! - MIG (`device-partitioning-strategy = "mig"`, `mig.profile."<model>.<memory>gb"`) with the
//!   device plugin's `single` strategy only, since 1.34.0 (bottlerocket#4306, #4483);
//! - MPS (`device-sharing-strategy = "mps"`, `mps.replicas`) in the 1.54.x settings reference
//!   (bottlerocket-core-kit#789); its first release is not pinned down further.

use crate::catalog::GpuModel;
use crate::error::{DomainError, Field, summary};
use crate::sharing::{MigStrategy, SharingMode};

/// The table every setting here lives under.
const TABLE: &str = "settings.kubelet-device-plugins.nvidia";

/// The first Bottlerocket release whose device plugin takes the sharing, and its name.
pub fn min_version(sharing: &SharingMode) -> Option<((u32, u32, u32), &'static str)> {
    match sharing {
        SharingMode::None => None,
        SharingMode::TimeSlicing { .. } => Some(((1, 25, 0), "time-slicing")),
        SharingMode::Mps { .. } => Some(((1, 54, 0), "MPS")),
        SharingMode::Mig { .. } => Some(((1, 34, 0), "MIG")),
    }
}

/// What the settings cannot say: MPS that lets a container take several clients (the MPS table
/// has `replicas` only, so the host's plugin always refuses more than one).
pub fn check_sharing(sharing: &SharingMode) -> Result<(), DomainError> {
    match sharing {
        SharingMode::Mps {
            fail_requests_greater_than_one: false,
            ..
        } => Err(DomainError::new(
            Field::MpsFailRequestsGreaterThanOne,
            summary::INVALID_SHARING,
            "On Bottlerocket the NVIDIA device plugin is a host service whose MPS settings take \
             only the replica count (`mps.replicas`), so a container asking for more than one \
             slice is always refused. Remove fail_requests_greater_than_one = false, or run an \
             AL2023 NVIDIA image, where the GPU operator's device plugin (v0.20.0 and later) \
             honours it.",
        )),
        _ => Ok(()),
    }
}

/// How Bottlerocket's settings name a GPU model: its model in lower case and its memory in
/// whole GB, e.g. `a100.40gb`.
pub fn mig_key(gpu: &GpuModel) -> String {
    format!(
        "{}.{}gb",
        gpu.id
            .split('-')
            .next()
            .unwrap_or(gpu.id)
            .to_ascii_lowercase(),
        gpu.memory_mib.div_ceil(1024)
    )
}

/// The settings that share `gpu` as `sharing` says, as TOML user data; None for whole GPUs. A MIG
/// `mixed` strategy renders as `single`, the only one Bottlerocket has: callers refuse it first
/// ([`crate::check_eks_ami_type`]).
pub fn settings(sharing: &SharingMode, gpu: &GpuModel) -> Option<String> {
    Some(match sharing {
        SharingMode::None => return None,
        SharingMode::TimeSlicing {
            replicas,
            rename_by_default,
            fail_requests_greater_than_one,
        } => format!(
            "[{TABLE}]\ndevice-sharing-strategy = \"time-slicing\"\n\n\
            [{TABLE}.time-slicing]\nreplicas = {replicas}\n\
            rename-by-default = {rename_by_default}\n\
            fail-requests-greater-than-one = {fail_requests_greater_than_one}\n"
        ),
        SharingMode::Mps { replicas, .. } => format!(
            "[{TABLE}]\ndevice-sharing-strategy = \"mps\"\n\n\
            [{TABLE}.mps]\nreplicas = {replicas}\n"
        ),
        SharingMode::Mig { profile, .. } => format!(
            "[{TABLE}]\ndevice-partitioning-strategy = \"mig\"\n\n\
            [{TABLE}.mig.profile]\n\"{}\" = \"{profile}\"\n",
            mig_key(gpu)
        ),
    })
}

/// The device plugin's table of a node's user data, when it parses: what [`settings`] writes and
/// [`sharing_of`] reads, and the only part of the user data this crate speaks for.
fn device_plugin_table(user_data: &str) -> Option<Option<toml::Value>> {
    let doc = user_data.parse::<toml::Table>().ok()?;
    Some(
        doc.get("settings")
            .and_then(|s| s.get("kubelet-device-plugins"))
            .and_then(|p| p.get("nvidia"))
            .cloned(),
    )
}

/// Whether two user data say the same to the device plugin (the rest of the settings aside):
/// whether a node group's launch template needs a new version for the sharing.
pub fn same_device_plugin_settings(a: &str, b: &str) -> bool {
    match (device_plugin_table(a), device_plugin_table(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// `user_data` with its device plugin settings replaced by those of `ours` (what [`settings`]
/// rendered), every other setting kept: a launch template can carry settings of its maker's
/// that a change of sharing must not drop. User data that is not TOML (Bottlerocket would not
/// boot from it) is replaced whole.
pub fn with_device_plugin_settings(user_data: Option<&str>, ours: &str) -> String {
    let theirs = user_data.filter(|u| !u.trim().is_empty());
    let (Some(Ok(mut doc)), Ok(mine)) = (
        theirs.map(|u| u.parse::<toml::Table>()),
        ours.parse::<toml::Table>(),
    ) else {
        return ours.to_string();
    };
    fn merge(into: &mut toml::Table, from: toml::Table) {
        for (k, v) in from {
            match (into.get_mut(&k), v) {
                (Some(toml::Value::Table(a)), toml::Value::Table(b)) => merge(a, b),
                (_, v) => {
                    into.insert(k, v);
                }
            }
        }
    }
    // Ours replace theirs whole: a sharing key of theirs that ours lacks must not linger.
    if let Some(toml::Value::Table(settings)) = doc.get_mut("settings")
        && let Some(toml::Value::Table(plugins)) = settings.get_mut("kubelet-device-plugins")
    {
        plugins.remove("nvidia");
    }
    merge(&mut doc, mine);
    doc.to_string()
}

/// The sharing that settings (TOML, as a node's user data holds it) set up on `gpu`: whole GPUs
/// when they say nothing the device plugin would act on, or do not parse (Bottlerocket then
/// keeps its defaults). Any TOML spelling is read, not only the one [`settings`] writes.
pub fn sharing_of(user_data: &str, gpu: &GpuModel) -> SharingMode {
    let Ok(doc) = user_data.parse::<toml::Table>() else {
        return SharingMode::None;
    };
    let Some(nvidia) = TABLE
        .split('.')
        .try_fold(&doc, |t, key| t.get(key)?.as_table())
    else {
        return SharingMode::None;
    };
    let text = |t: &toml::Table, k: &str| t.get(k).and_then(|v| v.as_str()).map(str::to_string);
    let flag = |t: &toml::Table, k: &str| t.get(k).and_then(|v| v.as_bool()).unwrap_or(false);
    let replicas = |t: Option<&toml::Table>| {
        t.and_then(|t| t.get("replicas")?.as_integer())
            .and_then(|n| u32::try_from(n).ok())
    };
    if text(nvidia, "device-partitioning-strategy").as_deref() == Some("mig") {
        let profile = nvidia
            .get("mig")
            .and_then(|m| m.get("profile"))
            .and_then(|p| p.get(mig_key(gpu)))
            .and_then(|p| p.as_str())
            .and_then(|p| gpu.mig_profiles.iter().find(|m| m.name == p));
        if let Some(p) = profile {
            return SharingMode::Mig {
                profile: p.name.to_string(),
                strategy: MigStrategy::Single,
                gke_sharing: None,
            };
        }
    }
    let table = |k: &str| nvidia.get(k).and_then(|v| v.as_table());
    match text(nvidia, "device-sharing-strategy").as_deref() {
        Some("time-slicing") => match replicas(table("time-slicing")) {
            Some(replicas) => {
                let t = table("time-slicing").unwrap_or(nvidia);
                SharingMode::TimeSlicing {
                    replicas,
                    rename_by_default: flag(t, "rename-by-default"),
                    fail_requests_greater_than_one: flag(t, "fail-requests-greater-than-one"),
                }
            }
            None => SharingMode::None,
        },
        Some("mps") => replicas(table("mps"))
            .map(SharingMode::mps)
            .unwrap_or(SharingMode::None),
        _ => SharingMode::None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu_model;

    #[test]
    fn what_is_written_reads_back() {
        let a100 = gpu_model("A100-40GB").expect("catalog");
        for mode in [
            SharingMode::TimeSlicing {
                replicas: 10,
                rename_by_default: false,
                fail_requests_greater_than_one: false,
            },
            SharingMode::TimeSlicing {
                replicas: 3,
                rename_by_default: true,
                fail_requests_greater_than_one: true,
            },
            SharingMode::mps(4),
            SharingMode::Mig {
                profile: "1g.5gb".into(),
                strategy: MigStrategy::Single,
                gke_sharing: None,
            },
        ] {
            let toml = settings(&mode, a100).expect("shared");
            assert_eq!(sharing_of(&toml, a100), mode, "{toml}");
        }
        assert_eq!(settings(&SharingMode::None, a100), None);
    }

    #[test]
    fn other_spellings_are_read_and_nonsense_is_whole_gpus() {
        let a100 = gpu_model("A100-40GB").expect("catalog");
        let dotted = "settings.kubelet-device-plugins.nvidia.device-sharing-strategy = \"mps\"\n\
            settings.kubelet-device-plugins.nvidia.mps = { replicas = 6 }\n";
        assert_eq!(sharing_of(dotted, a100), SharingMode::mps(6));
        // The cluster settings EKS merges in say nothing of sharing.
        let cluster = "[settings.kubernetes]\ncluster-name = \"c\"\n";
        assert_eq!(sharing_of(cluster, a100), SharingMode::None);
        assert_eq!(sharing_of("not = [toml", a100), SharingMode::None);
        // A MIG profile for another GPU leaves the device plugin without partitions.
        let other = "[settings.kubelet-device-plugins.nvidia]\n\
            device-partitioning-strategy = \"mig\"\n\
            [settings.kubelet-device-plugins.nvidia.mig.profile]\n\"h100.80gb\" = \"1g.10gb\"\n";
        assert_eq!(sharing_of(other, a100), SharingMode::None);
    }

    #[test]
    fn other_settings_are_kept_and_compared_apart() {
        let a100 = gpu_model("A100-40GB").expect("catalog");
        let four = settings(&SharingMode::mps(4), a100).unwrap();
        let eight = settings(&SharingMode::mps(8), a100).unwrap();
        let theirs = format!("[settings.kernel]\nlockdown = \"integrity\"\n\n{four}");
        assert!(same_device_plugin_settings(&theirs, &four));
        assert!(!same_device_plugin_settings(&theirs, &eight));
        let merged = with_device_plugin_settings(Some(&theirs), &eight);
        assert!(merged.contains("lockdown = \"integrity\""), "{merged}");
        assert_eq!(sharing_of(&merged, a100), SharingMode::mps(8));
        // A strategy of theirs that ours does not name goes with the rest of their table.
        let ts = settings(
            &SharingMode::TimeSlicing {
                replicas: 2,
                rename_by_default: false,
                fail_requests_greater_than_one: false,
            },
            a100,
        )
        .unwrap();
        let switched = with_device_plugin_settings(Some(&ts), &eight);
        assert!(!switched.contains("time-slicing"), "{switched}");
        assert_eq!(with_device_plugin_settings(None, &eight), eight);
        assert_eq!(
            with_device_plugin_settings(Some("not = [toml"), &eight),
            eight
        );
    }

    #[test]
    fn gpu_keys_follow_bottlerocket() {
        assert_eq!(mig_key(gpu_model("A100-40GB").unwrap()), "a100.40gb");
        assert_eq!(mig_key(gpu_model("H100-80GB").unwrap()), "h100.80gb");
    }
}
