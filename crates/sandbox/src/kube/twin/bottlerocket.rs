//! Bottlerocket's NVIDIA device plugin: a host service the OS configures from its own settings,
//! read at boot from the instance's user data (TOML), not from the GPU operator's objects. What it
//! advertises follows `settings.kubelet-device-plugins.nvidia` (bottlerocket.dev, OS 1.54.x, API
//! settings "kubelet-device-plugins"):
//! - `device-sharing-strategy = "time-slicing"` with `time-slicing.replicas`, `.rename-by-default`
//!   (and `.fail-requests-greater-than-one`, which changes no count): GPUs x replicas of
//!   `nvidia.com/gpu`, or of `nvidia.com/gpu.shared` when renamed ("8 GPU's x 10 replicas = 80",
//!   the page's example, with rename-by-default set);
//! - `device-sharing-strategy = "mps"` with `mps.replicas` and `mps.rename-by-default`: the same
//!   counts (MPS is not offered on MIG devices, as the NVIDIA device plugin refuses it);
//! - `device-partitioning-strategy = "mig"` with `mig.profile."<gpu>.<memory>gb" = "<profile>"`
//!   or `= "<number of partitions>"` (e.g. `"a100.40gb" = "1g.5gb"`, `"h100.80gb" = "4"`): every
//!   GPU of that model split so; MIG strategy `single` (bottlerocket#4483: "MIG support was added
//!   for MIG_STRATEGY single"), so the instances are `nvidia.com/gpu`, times the sharing replicas
//!   when time-slicing is set too (bottlerocket#4418). A profile for another GPU model leaves the
//!   node's GPUs whole.
//!
//! Defaults: where a setting is absent the NVIDIA device plugin's default is assumed (no renaming);
//! Bottlerocket's own defaults were not confirmed, so a sharing strategy without `replicas` is
//! refused here rather than guessed. User data that is not TOML, or a value of the wrong type,
//! stops the plugin (a Bottlerocket node does not boot with settings it cannot parse): the twin
//! then advertises nothing new and notes why.

use std::collections::BTreeMap;

use toml::{Table, Value};

use super::mig_geometry::mig_instances;

/// What a node's host device plugin works from: its GPUs, as GPU feature discovery names them,
/// and the user data the instance booted with.
pub(crate) struct Host<'a> {
    pub(crate) gpus: u32,
    pub(crate) product: &'a str,
    pub(crate) memory_mib: u64,
    pub(crate) user_data: Option<&'a str>,
}

/// The extended resources a Bottlerocket node's host device plugin advertises.
pub(crate) fn advertise(t: &Host<'_>) -> Result<BTreeMap<String, u64>, String> {
    let gpus = t.gpus as u64;
    let whole = || BTreeMap::from([("nvidia.com/gpu".to_string(), gpus)]);
    let Some(user_data) = t.user_data.filter(|u| !u.trim().is_empty()) else {
        return Ok(whole());
    };
    let doc: Table = toml::from_str(user_data)
        .map_err(|e| format!("Bottlerocket user data is not valid TOML: {e}"))?;
    let nvidia = nvidia_table(&doc)?;
    let Some(nvidia) = nvidia else {
        return Ok(whole());
    };
    let prefix = "settings.kubelet-device-plugins.nvidia";
    let strategy = string(nvidia, "device-sharing-strategy", prefix)?.unwrap_or("none");
    let sharing = match strategy {
        "none" => None,
        "time-slicing" | "mps" => {
            let section = match nvidia.get(strategy) {
                None => None,
                Some(Value::Table(t)) => Some(t),
                Some(_) => return Err(format!("{prefix}.{strategy} must be a table")),
            };
            let at = format!("{prefix}.{strategy}");
            let replicas = section
                .map(|s| integer(s, "replicas", &at))
                .transpose()?
                .flatten()
                .ok_or_else(|| format!("{at}.replicas is not set"))?;
            if replicas < 1 {
                return Err(format!("{at}.replicas must be at least 1, got {replicas}"));
            }
            let rename = section
                .map(|s| boolean(s, "rename-by-default", &at))
                .transpose()?
                .flatten()
                .unwrap_or(false);
            if let Some(s) = section.filter(|_| strategy == "time-slicing") {
                boolean(s, "fail-requests-greater-than-one", &at)?;
            }
            Some((strategy, replicas as u64, rename))
        }
        other => {
            return Err(format!(
                "{prefix}.device-sharing-strategy {other:?} is not one of none, time-slicing, mps"
            ));
        }
    };
    let partitions = match string(nvidia, "device-partitioning-strategy", prefix)?.unwrap_or("none")
    {
        "none" => None,
        "mig" => mig_partitions(t, nvidia, prefix)?,
        other => {
            return Err(format!(
                "{prefix}.device-partitioning-strategy {other:?} is not one of none, mig"
            ));
        }
    };
    if partitions.is_some() && sharing.is_some_and(|(s, _, _)| s == "mps") {
        return Err("MPS sharing is not supported on MIG devices".into());
    }
    let devices = gpus * partitions.unwrap_or(1) as u64;
    Ok(match sharing {
        None => BTreeMap::from([("nvidia.com/gpu".to_string(), devices)]),
        Some((_, replicas, rename)) => {
            let name = if rename {
                "nvidia.com/gpu.shared"
            } else {
                "nvidia.com/gpu"
            };
            BTreeMap::from([(name.to_string(), devices * replicas)])
        }
    })
}

/// `settings.kubelet-device-plugins.nvidia`, when the user data has it.
fn nvidia_table(doc: &Table) -> Result<Option<&Table>, String> {
    let mut table = doc;
    let mut path = String::new();
    for key in ["settings", "kubelet-device-plugins", "nvidia"] {
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(key);
        match table.get(key) {
            None => return Ok(None),
            Some(Value::Table(t)) => table = t,
            Some(_) => return Err(format!("{path} must be a table")),
        }
    }
    Ok(Some(table))
}

/// MIG instances per GPU for this node's GPU model, or None when the settings name no profile
/// for it.
fn mig_partitions(t: &Host<'_>, nvidia: &Table, prefix: &str) -> Result<Option<u32>, String> {
    let profiles = match nvidia.get("mig").map(|m| (m, m.get("profile"))) {
        None | Some((_, None)) => return Ok(None),
        Some((_, Some(Value::Table(p)))) => p,
        Some(_) => return Err(format!("{prefix}.mig.profile must be a table")),
    };
    let key = gpu_key(t);
    let Some(value) = profiles.get(&key) else {
        return Ok(None);
    };
    let Value::String(value) = value else {
        return Err(format!("{prefix}.mig.profile.\"{key}\" must be a string"));
    };
    if let Ok(n) = value.parse::<u32>() {
        // A number of partitions: NVIDIA's MIG geometries split a GPU into 1 to 7 instances.
        return if (1..=7).contains(&n) {
            Ok(Some(n))
        } else {
            Err(format!(
                "{n} MIG partitions are not possible on a {key} GPU"
            ))
        };
    }
    mig_instances(t.product, t.memory_mib, value)
        .map(Some)
        .ok_or_else(|| format!("MIG profile {value:?} is not valid for a {key} GPU"))
}

/// The key Bottlerocket's MIG settings use for a GPU model: the model in lower case and its
/// memory in GB, rounded up (`a100.40gb`, `h100.80gb`).
pub(crate) fn gpu_key(t: &Host<'_>) -> String {
    let product = t.product;
    let model = product
        .split(['-', ' '])
        .filter(|p| !p.eq_ignore_ascii_case("nvidia"))
        .find(|p| {
            p.starts_with(|c: char| c.is_ascii_alphabetic())
                && p.bytes().any(|b| b.is_ascii_digit())
        })
        .unwrap_or(product)
        .to_ascii_lowercase();
    format!("{model}.{}gb", t.memory_mib.div_ceil(1024))
}

fn string<'a>(t: &'a Table, key: &str, at: &str) -> Result<Option<&'a str>, String> {
    match t.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("{at}.{key} must be a string")),
    }
}

fn integer(t: &Table, key: &str, at: &str) -> Result<Option<i64>, String> {
    match t.get(key) {
        None => Ok(None),
        Some(Value::Integer(i)) => Ok(Some(*i)),
        Some(_) => Err(format!("{at}.{key} must be an integer")),
    }
}

fn boolean(t: &Table, key: &str, at: &str) -> Result<Option<bool>, String> {
    match t.get(key) {
        None => Ok(None),
        Some(Value::Boolean(b)) => Ok(Some(*b)),
        Some(_) => Err(format!("{at}.{key} must be true or false")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node<'a>(product: &'a str, memory_mib: u64, gpus: u32, user_data: &'a str) -> Host<'a> {
        Host {
            gpus,
            product,
            memory_mib,
            user_data: Some(user_data),
        }
    }

    fn a100(user_data: &str) -> Result<BTreeMap<String, u64>, String> {
        advertise(&node("NVIDIA-A100-SXM4-40GB", 40960, 8, user_data))
    }

    fn one(name: &str, n: u64) -> Result<BTreeMap<String, u64>, String> {
        Ok(BTreeMap::from([(name.to_string(), n)]))
    }

    #[test]
    fn gpu_keys_are_the_model_and_memory_rounded_up() {
        assert_eq!(
            gpu_key(&node("NVIDIA-A100-SXM4-40GB", 40960, 1, "")),
            "a100.40gb"
        );
        assert_eq!(
            gpu_key(&node("NVIDIA-H100-80GB-HBM3", 81559, 1, "")),
            "h100.80gb"
        );
        assert_eq!(gpu_key(&node("NVIDIA-A10G", 23028, 1, "")), "a10g.23gb");
    }

    #[test]
    fn sharing_settings_multiply_or_rename_the_gpus() {
        let ts = "[settings.kubelet-device-plugins.nvidia]\ndevice-sharing-strategy = \"time-slicing\"\n\
                  [settings.kubelet-device-plugins.nvidia.time-slicing]\nreplicas = 10\n\
                  rename-by-default = false\nfail-requests-greater-than-one = false\n";
        assert_eq!(a100(ts), one("nvidia.com/gpu", 80));
        // Dotted keys and inline tables are the same TOML.
        let dotted = "settings.kubelet-device-plugins.nvidia.device-sharing-strategy = \"time-slicing\"\n\
                      settings.kubelet-device-plugins.nvidia.time-slicing = { replicas = 10, rename-by-default = true }\n";
        assert_eq!(a100(dotted), one("nvidia.com/gpu.shared", 80));
        let mps = "[settings.kubelet-device-plugins.nvidia]\ndevice-sharing-strategy = \"mps\"\nmps.replicas = 3\n";
        assert_eq!(a100(mps), one("nvidia.com/gpu", 24));
        assert_eq!(a100(""), one("nvidia.com/gpu", 8));
        assert_eq!(
            a100("[settings.kubernetes]\nmax-pods = 110\n"),
            one("nvidia.com/gpu", 8)
        );
    }

    #[test]
    fn mig_profiles_apply_to_their_gpu_model_only() {
        let mig = |key: &str, value: &str| {
            format!(
                "[settings.kubelet-device-plugins.nvidia]\ndevice-partitioning-strategy = \"mig\"\n\
                 [settings.kubelet-device-plugins.nvidia.mig.profile]\n\"{key}\" = \"{value}\"\n"
            )
        };
        assert_eq!(a100(&mig("a100.40gb", "1g.5gb")), one("nvidia.com/gpu", 56));
        assert_eq!(a100(&mig("a100.40gb", "3")), one("nvidia.com/gpu", 24));
        assert_eq!(a100(&mig("h100.80gb", "1g.10gb")), one("nvidia.com/gpu", 8));
        assert!(a100(&mig("a100.40gb", "1g.10gb+me.bad")).is_err());
        // MIG with time-slicing: the instances shared; with MPS: refused.
        let both = format!(
            "{}device-sharing-strategy = \"time-slicing\"\ntime-slicing.replicas = 2\n",
            mig("a100.40gb", "1g.5gb").replace(
                "[settings.kubelet-device-plugins.nvidia.mig.profile]\n\"a100.40gb\" = \"1g.5gb\"\n",
                "mig.profile.\"a100.40gb\" = \"1g.5gb\"\n"
            )
        );
        assert_eq!(a100(&both), one("nvidia.com/gpu", 112));
        assert!(a100(&both.replace("time-slicing", "mps")).is_err());
    }

    #[test]
    fn settings_the_os_cannot_read_stop_the_plugin() {
        assert!(a100("not = [toml").is_err());
        assert!(
            a100("[settings.kubelet-device-plugins.nvidia]\ndevice-sharing-strategy = \"vgpu\"\n")
                .is_err()
        );
        assert!(a100("[settings.kubelet-device-plugins.nvidia]\ndevice-sharing-strategy = \"time-slicing\"\n").is_err());
        assert!(
            a100("[settings.kubelet-device-plugins.nvidia]\ndevice-sharing-strategy = \"time-slicing\"\ntime-slicing.replicas = \"10\"\n")
                .is_err()
        );
    }
}
