//! `fracgpu_machine_type`: what GPUs a machine type carries and how they can be partitioned.

use async_trait::async_trait;

use crate::model::domain_diagnostic;
use gpu::{self, Cloud, Field};
use tfplugin::api::DataSource;
use tfplugin::object::{Decoded, FromValue, ToValue};
use tfplugin::schema::{Attribute, Block, Nesting, Schema};
use tfplugin::validators::OneOf;
use tfplugin::{Diagnostics, Value};

pub struct MachineTypeDataSource;

pub fn schema() -> Schema {
    let profile = vec![
        Attribute::string("name")
            .computed()
            .describe("MIG profile name, e.g. `1g.10gb`."),
        Attribute::number("instances_per_gpu")
            .computed()
            .describe("How many instances of this profile one GPU holds."),
        Attribute::number("memory_mb")
            .computed()
            .describe("Memory of one instance, in MiB."),
        Attribute::string("compute_share")
            .computed()
            .describe("Share of the GPU's streaming multiprocessors, e.g. `1/7`."),
        Attribute::string("aks_gpu_instance_profile")
            .computed()
            .describe(
                "The AKS `gpuInstanceProfile` that creates this profile (`MIG1g`...), or \
                null when AKS cannot express it.",
            ),
        Attribute::bool("gke_partition_size")
            .computed()
            .describe("Whether GKE accepts this profile as `gpu_partition_size`."),
    ];
    Schema::new(
        0,
        Block::new(
            "The GPUs of a cloud machine type (VM size, instance type) and the MIG profiles \
            they can be split into, from the provider's catalog.",
        )
        .attr(
            Attribute::string("cloud")
                .required()
                .describe("The cloud the machine type belongs to.")
                .validate(OneOf(&crate::cloud::registry::BLOCK_NAMES)),
        )
        .attr(Attribute::string("name").required().describe(
            "The machine type as the cloud names it, e.g. \
                        `Standard_NC24ads_A100_v4`, `a2-highgpu-1g`, `p4d.24xlarge`.",
        ))
        .attr(
            Attribute::string("gpu_model")
                .computed()
                .describe("The provider's GPU model id, e.g. `A100-80GB`."),
        )
        .attr(
            Attribute::string("gpu_name")
                .computed()
                .describe("NVIDIA's name for the GPU."),
        )
        .attr(
            Attribute::number("gpu_count")
                .computed()
                .describe("GPUs per machine."),
        )
        .attr(
            Attribute::number("gpu_memory_mb")
                .computed()
                .describe("Memory per GPU in MiB, as `nvidia-smi` reports it where known."),
        )
        .attr(
            Attribute::bool("mig_capable")
                .computed()
                .describe("Whether the GPU supports Multi-Instance GPU partitions."),
        )
        .attr(
            Attribute::string("compute_capability")
                .computed()
                .describe("CUDA compute capability, e.g. `8.0`."),
        )
        .attr(
            Attribute::string("gpu_product")
                .computed()
                .describe("The `nvidia.com/gpu.product` node label GPU feature discovery sets."),
        )
        .attr(
            Attribute::nested("mig_profiles", Nesting::List, profile)
                .computed()
                .describe("The MIG profiles of the GPU; empty when it has none."),
        ),
    )
}

tfplugin::object! {
    /// One entry of `mig_profiles`.
    struct MigProfile {
        name: String,
        instances_per_gpu: u32,
        memory_mb: u32,
        compute_share: String,
        aks_gpu_instance_profile: Option<String>,
        gke_partition_size: bool,
    }
}

tfplugin::object! {
    /// The arguments.
    struct Args {
        cloud: String,
        name: String,
    }
}

tfplugin::object! {
    /// The whole data source.
    struct MachineType {
        cloud: String,
        name: String,
        gpu_model: String,
        gpu_name: String,
        gpu_count: u32,
        gpu_memory_mb: u32,
        mig_capable: bool,
        compute_capability: String,
        gpu_product: String,
        mig_profiles: Vec<MigProfile>,
    }
}

impl MachineType {
    fn of(args: Args, mt: &gpu::MachineType) -> MachineType {
        let gpu = mt.gpu;
        MachineType {
            gpu_model: gpu.id.into(),
            gpu_name: gpu.marketing_name.into(),
            gpu_count: mt.gpu_count,
            gpu_memory_mb: gpu.memory_mib,
            mig_capable: gpu.mig_capable(),
            compute_capability: gpu.compute_capability_string(),
            gpu_product: mt.gpu_product().into(),
            mig_profiles: gpu
                .mig_profiles
                .iter()
                .map(|p| MigProfile {
                    name: p.name.into(),
                    instances_per_gpu: p.max_instances,
                    memory_mb: p.memory_mib,
                    compute_share: gpu::compute_share(gpu, p),
                    aks_gpu_instance_profile: p.aks.map(|a| a.as_str().into()),
                    gke_partition_size: p.gke && gpu.gke_accelerator.is_some(),
                })
                .collect(),
            cloud: args.cloud,
            name: args.name,
        }
    }
}

#[async_trait]
impl DataSource for MachineTypeDataSource {
    fn type_name(&self) -> &'static str {
        "fracgpu_machine_type"
    }

    fn schema(&self) -> Schema {
        schema()
    }

    fn validate(&self, config: &Value, diags: &mut Diagnostics) {
        if let Some(a) = Args::from_value(config).or_report_mismatch(diags) {
            lookup(&a.cloud, &a.name, diags);
        }
    }

    async fn read(&self, config: &Value, diags: &mut Diagnostics) -> Value {
        let Some(args) = Args::from_value(config).or_report(diags) else {
            return Value::Null;
        };
        match lookup(&args.cloud, &args.name, diags) {
            Some(mt) => MachineType::of(args, mt).to_value(),
            None => Value::Null,
        }
    }
}

fn lookup(cloud: &str, name: &str, diags: &mut Diagnostics) -> Option<&'static gpu::MachineType> {
    let rename = [(Field::MachineType, "name")];
    let cloud = match Cloud::parse(cloud) {
        Ok(c) => c,
        Err(e) => {
            diags.push(domain_diagnostic(&e, &rename));
            return None;
        }
    };
    match gpu::machine_type(cloud, name) {
        Ok(mt) => Some(mt),
        Err(e) => {
            diags.push(domain_diagnostic(&e, &rename));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_names_what_the_schema_declares() {
        let block = schema().block;
        assert_eq!(MachineType::attribute_names(), block.names());
        let profiles = block.attribute("mig_profiles").unwrap();
        let mut names: Vec<&str> = profiles
            .nested
            .as_ref()
            .unwrap()
            .1
            .iter()
            .map(|a| a.name.as_str())
            .collect();
        names.sort_unstable();
        assert_eq!(MigProfile::attribute_names(), names);
    }
}
