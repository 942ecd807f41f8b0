//! A pool's hardware: the GPU model and count its nodes carry. Usually that is the catalog's answer for the
//! machine type; the user's `gpu_model` / `gpu_count` override it, which is how a size newer than this
//! provider, or a GCP n1 type with attached T4s, still works.

use super::lookup::{gpu_model, is_gcp_n1, machine_type};
use super::models::T4;
use super::{Cloud, GpuModel};
use crate::error::{DomainError, Field, summary};

/// The GPUs of a pool's nodes: the catalog's answer for the machine type, or the user's override.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hardware {
    /// The machine type as the catalog spells it (or as given, for one outside the catalog).
    pub machine_type: String,
    pub gpu: &'static GpuModel,
    pub gpus_per_node: u32,
    /// The `nvidia.com/gpu.product` label the nodes will carry.
    pub gpu_product: &'static str,
}

/// Most GPUs any machine type carries today; more is a typo.
pub const MAX_GPUS_PER_NODE: u32 = 16;

/// Resolves a pool's hardware. `gpu_model` / `gpu_count` override the catalog (its counts are partly from
/// secondary tables). A machine type outside the catalog is accepted only when both are given, so a new
/// size works without a provider release while a typo without overrides still fails with suggestions.
/// GCP n1 types get T4s only as attached accelerators, so they need both overrides and the GPU must be a T4.
pub fn resolve_hardware(
    cloud: Cloud,
    machine: &str,
    gpu_model_override: Option<&str>,
    gpu_count_override: Option<u32>,
) -> Result<Hardware, Vec<DomainError>> {
    let mut errors = Vec::new();
    let model = match gpu_model_override {
        Some(id) => match gpu_model(id) {
            Ok(g) => Some(g),
            Err(e) => {
                errors.push(e);
                None
            }
        },
        None => None,
    };
    if let Some(count) = gpu_count_override
        && !(1..=MAX_GPUS_PER_NODE).contains(&count)
    {
        errors.push(DomainError::new(
            Field::GpuCount,
            summary::INVALID_GPU_COUNT,
            format!("gpu_count is {count}; a node carries 1 to {MAX_GPUS_PER_NODE} GPUs."),
        ));
    }
    if cloud == Cloud::Gke && is_gcp_n1(machine) {
        if gpu_model_override.is_none() || gpu_count_override.is_none() {
            errors.push(DomainError::new(
                Field::MachineType,
                summary::UNKNOWN_MACHINE_TYPE,
                format!(
                    "\"{machine}\" has no GPU of its own: n1 machine types get T4s as attached \
                     accelerators. Set gpu_model = \"nvidia-tesla-t4\" and gpu_count (1, 2 or 4)."
                ),
            ));
        } else if model.is_some_and(|g| g.id != T4.id) {
            errors.push(DomainError::new(
                Field::GpuModel,
                summary::UNKNOWN_GPU_MODEL,
                "n1 machine types can attach only T4s among the catalog's GPUs. Valid values: T4, \
                 nvidia-tesla-t4.",
            ));
        } else if gpu_count_override.is_some_and(|c| ![1, 2, 4].contains(&c)) {
            errors.push(DomainError::new(
                Field::GpuCount,
                summary::INVALID_GPU_COUNT,
                "An n1 machine type attaches 1, 2 or 4 T4s. Valid values: 1, 2, 4.",
            ));
        }
        return match (errors.is_empty(), model, gpu_count_override) {
            (true, Some(gpu), Some(count)) => Ok(Hardware {
                machine_type: machine.trim().to_ascii_lowercase(),
                gpu,
                gpus_per_node: count,
                gpu_product: gpu.gpu_product,
            }),
            _ => Err(errors),
        };
    }
    match machine_type(cloud, machine) {
        Ok(mt) if errors.is_empty() => Ok(Hardware {
            machine_type: mt.name.to_string(),
            gpu: model.unwrap_or(mt.gpu),
            gpus_per_node: gpu_count_override.unwrap_or(mt.gpu_count),
            gpu_product: match model {
                Some(g) if g.id != mt.gpu.id => g.gpu_product,
                _ => mt.gpu_product(),
            },
        }),
        Ok(_) => Err(errors),
        Err(unknown) => match (model, gpu_count_override) {
            (Some(gpu), Some(count)) if errors.is_empty() => Ok(Hardware {
                machine_type: machine.trim().to_string(),
                gpu,
                gpus_per_node: count,
                gpu_product: gpu.gpu_product,
            }),
            _ => {
                errors.insert(0, unknown);
                Err(errors)
            }
        },
    }
}
