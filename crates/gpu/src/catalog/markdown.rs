//! The catalog as markdown, for the provider's generated docs: the tables users read are printed from the
//! same data the provider validates against, so they cannot drift apart.

use super::machines::MACHINE_TYPES;
use super::models::GPUS;
use super::{MemorySource, compute_share};

/// The catalog as markdown tables (machine types, GPU models, MIG profiles), so docs are generated from the
/// data the provider validates against rather than typed by hand.
pub fn catalog_markdown() -> String {
    let mut out = String::new();
    out.push_str("## Machine types\n\n");
    out.push_str("| Cloud | Machine type | GPU | GPUs | Memory per GPU (MiB) | MIG |\n");
    out.push_str("|---|---|---|---|---|---|\n");
    for mt in MACHINE_TYPES {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            mt.cloud,
            mt.name,
            mt.gpu.id,
            mt.gpu_count,
            mt.gpu.memory_mib,
            yes_no(mt.gpu.mig_capable())
        ));
    }
    out.push_str(
        "\nGKE n1 machine types (`n1-standard-*`, `n1-highmem-*`, `n1-highcpu-*`) take 1, 2 or 4 T4s as \
         attached accelerators: set `gpu_model = \"nvidia-tesla-t4\"` and `gpu_count` on the \
             pool.\n",
    );
    out.push_str("\n## GPU models\n\n");
    out.push_str(
        "| GPU | Name | Memory (MiB) | Memory figure | Compute capability | MIG | GKE accelerator | \
         nvidia.com/gpu.product |\n",
    );
    out.push_str("|---|---|---|---|---|---|---|---|\n");
    for g in GPUS {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            g.id,
            g.marketing_name,
            g.memory_mib,
            match g.memory_source {
                MemorySource::NvidiaSmi => "nvidia-smi",
                MemorySource::Nominal => "nominal",
            },
            g.compute_capability_string(),
            yes_no(g.mig_capable()),
            g.gke_accelerator.unwrap_or("-"),
            g.gpu_product
        ));
    }
    out.push_str("\n## MIG profiles\n\n");
    out.push_str(
        "| GPU | Profile | Instances per GPU | Memory (MiB) | Compute share | AKS gpuInstanceProfile | \
         GKE gpuPartitionSize |\n",
    );
    out.push_str("|---|---|---|---|---|---|---|\n");
    for g in GPUS.iter().filter(|g| g.mig_capable()) {
        for prof in g.mig_profiles {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} |\n",
                g.id,
                prof.name,
                prof.max_instances,
                prof.memory_mib,
                compute_share(g, prof),
                prof.aks.map_or("-", |a| a.as_str()),
                yes_no(g.gke_partition_sizes().contains(&prof.name))
            ));
        }
    }
    out
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}
