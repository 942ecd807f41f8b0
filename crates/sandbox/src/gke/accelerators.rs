//! A GKE pool's GPUs (`config.accelerators`): which accelerator types fit which machine types and
//! in what counts, MIG partition sizes, GPU sharing and the driver, the GPUs GKE fills in for the
//! machine types that come with them, and the zones that offer each type. Failures are
//! INVALID_ARGUMENT with GKE's messages.

use serde_json::{Map, Value};

use super::error::{GError, invalid};
use super::fields::{enumv, int, object, string};
use super::world::Accelerator;
use crate::catalog;

const SHARING: &[&str] = &["GPU_SHARING_STRATEGY_UNSPECIFIED", "TIME_SHARING", "MPS"];
const DRIVER: &[&str] = &[
    "GPU_DRIVER_VERSION_UNSPECIFIED",
    "INSTALLATION_DISABLED",
    "DEFAULT",
    "LATEST",
];

/// GKE refuses a pool whose accelerator is not offered in one of its zones, naming the first.
pub(super) fn check_zones_offer(
    accelerators: &[Accelerator],
    zones: &[String],
) -> Result<(), GError> {
    for a in accelerators {
        if let Some(z) = zones
            .iter()
            .find(|z| !catalog::gke_accelerator_in_zone(&a.accelerator_type, z))
        {
            return Err(invalid(format!(
                "Accelerator type \"{}\" does not exist in zone {z}.",
                a.accelerator_type
            )));
        }
    }
    Ok(())
}

/// The GPUs that come with a2/a3/a4/g2 machine types, which GKE fills in when a pool names none.
pub(super) fn builtin(machine_type: &str) -> Option<Accelerator> {
    let (b, m) = (
        catalog::gke_builtin_accelerator(machine_type)?,
        catalog::gcp_machine_type(machine_type)?,
    );
    Some(Accelerator {
        count: m.gpu.map_or(0, |g| g.1 as i64),
        accelerator_type: b.name.to_string(),
        gpu_partition_size: None,
        sharing: None,
        driver_version: None,
    })
}

/// The machine type a list of accelerators is read against.
struct Machine<'a> {
    name: &'a str,
    /// The first zone of the pool, which GKE names when a type does not exist.
    zone: &'a str,
    /// The GPUs the machine type comes with, if it comes with any.
    builtin: Option<&'static catalog::GkeAccelerator>,
    gpus: i64,
}

pub(super) fn parse_accelerators(
    v: Option<&Value>,
    machine_type: &str,
    zone: &str,
) -> Result<Vec<Accelerator>, GError> {
    let list = match v {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a.clone(),
        Some(_) => return Err(invalid("Invalid value at 'accelerators': expected a list.")),
    };
    let machine = Machine {
        name: machine_type,
        zone,
        builtin: catalog::gke_builtin_accelerator(machine_type),
        gpus: catalog::gcp_machine_type(machine_type)
            .and_then(|m| m.gpu)
            .map_or(0, |g| g.1 as i64),
    };
    if list.len() > 1 {
        return Err(invalid(
            "Only one accelerator type per node pool is supported.",
        ));
    }
    list.iter().map(|a| accelerator(a, &machine)).collect()
}

fn accelerator(a: &Value, machine: &Machine) -> Result<Accelerator, GError> {
    let Some(a) = a.as_object() else {
        return Err(invalid(
            "Invalid value at 'accelerators': expected objects.",
        ));
    };
    let ty = string(a, "acceleratorType")?.unwrap_or("");
    let Some(info) = catalog::gke_accelerator(ty) else {
        return Err(invalid(format!(
            "Accelerator type \"{ty}\" does not exist in zone {}.",
            machine.zone
        )));
    };
    let count = int(a, "acceleratorCount")?.unwrap_or(0);
    if count < 1 {
        return Err(invalid(format!(
            "Accelerator count must be at least 1 (got {count})."
        )));
    }
    check_fits_machine(info, ty, count, machine)?;
    let partition = string(a, "gpuPartitionSize")?
        .filter(|p| !p.is_empty())
        .map(str::to_string);
    if let Some(p) = &partition
        && catalog::gke_partition(info, p).is_none()
    {
        let valid = if info.partitions.is_empty() {
            "none (the GPU does not support MIG)".to_string()
        } else {
            info.partitions.join(", ")
        };
        return Err(invalid(format!(
            "GPU partition size \"{p}\" is not valid for accelerator {ty}. Valid sizes: \
                {valid}."
        )));
    }
    let sharing = match object(a, "gpuSharingConfig")? {
        None => None,
        Some(sc) => sharing(sc, partition.is_some())?,
    };
    let driver = match object(a, "gpuDriverInstallationConfig")? {
        None => None,
        Some(d) => enumv(d, "gpuDriverVersion", DRIVER)?.map(str::to_string),
    };
    Ok(Accelerator {
        count,
        accelerator_type: ty.to_string(),
        gpu_partition_size: partition,
        sharing,
        driver_version: driver,
    })
}

/// A machine type that comes with GPUs takes only those, all of them; any other takes 1, 2, 4 or 8
/// GPUs of a type made for its family.
fn check_fits_machine(
    info: &catalog::GkeAccelerator,
    ty: &str,
    count: i64,
    machine: &Machine,
) -> Result<(), GError> {
    let machine_type = machine.name;
    match machine.builtin {
        Some(b) => {
            if b.name != ty || count != machine.gpus {
                return Err(invalid(format!(
                    "Machine type {machine_type} comes with {} {} GPUs; \
                        accelerator {count} x {ty} does not match.",
                    machine.gpus, b.name
                )));
            }
        }
        None => {
            if !machine_type.starts_with(info.machine_prefix) {
                return Err(invalid(format!(
                    "Accelerator type {ty} cannot be attached to machine type {machine_type}."
                )));
            }
            if ![1, 2, 4, 8].contains(&count) {
                return Err(invalid(format!(
                    "{count} x {ty} is not a supported accelerator count for {machine_type}: \
                        use 1, 2, 4 or 8."
                )));
            }
        }
    }
    Ok(())
}

/// `gpuSharingConfig`: (strategy, clients per GPU), or none when it names no strategy and no count.
fn sharing(sc: &Map<String, Value>, partitioned: bool) -> Result<Option<(String, i64)>, GError> {
    let strategy = enumv(sc, "gpuSharingStrategy", SHARING)?;
    let max = int(sc, "maxSharedClientsPerGpu")?.unwrap_or(0);
    match strategy {
        None if max == 0 => Ok(None),
        None => Err(invalid(
            "gpuSharingConfig.gpuSharingStrategy must be TIME_SHARING or MPS when \
                maxSharedClientsPerGpu is set.",
        )),
        Some(s) => {
            if !(1..=48).contains(&max) {
                return Err(invalid(format!(
                    "maxSharedClientsPerGpu must be between 1 and 48 (got {max})."
                )));
            }
            if s == "MPS" && partitioned {
                return Err(invalid(
                    "The MPS GPU sharing strategy cannot be combined with GPU partitions.",
                ));
            }
            Ok(Some((s.to_string(), max)))
        }
    }
}
