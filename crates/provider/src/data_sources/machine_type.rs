//! `fracgpu_machine_type`: what GPUs a machine type carries and how they can be partitioned.

use async_trait::async_trait;

use crate::model::domain_diagnostic;
use gpu::{self, Cloud, Field};
use tfplugin::api::DataSource;
use tfplugin::schema::{Attribute, Block, Nesting, Schema};
use tfplugin::validators::OneOf;
use tfplugin::{Diagnostics, Value};

pub struct MachineTypeDataSource;

pub fn schema() -> Schema {
    let profile = vec![
        Attribute::string("name").computed().describe("MIG profile name, e.g. `1g.10gb`."),
        Attribute::number("instances_per_gpu").computed().describe("How many instances of this profile one GPU holds."),
        Attribute::number("memory_mb").computed().describe("Memory of one instance, in MiB."),
        Attribute::string("compute_share").computed().describe("Share of the GPU's streaming multiprocessors, e.g. `1/7`."),
        Attribute::string("aks_gpu_instance_profile")
            .computed()
            .describe("The AKS `gpuInstanceProfile` that creates this profile (`MIG1g`...), or null when AKS cannot express it."),
        Attribute::bool("gke_partition_size").computed().describe("Whether GKE accepts this profile as `gpu_partition_size`."),
    ];
    Schema::new(
        0,
        Block::new("The GPUs of a cloud machine type (VM size, instance type) and the MIG profiles they can be split into, from the provider's catalog.")
            .attr(Attribute::string("cloud").required().describe("The cloud the machine type belongs to.").validate(OneOf(&["aks", "gke", "eks"])))
            .attr(
                Attribute::string("name")
                    .required()
                    .describe("The machine type as the cloud names it, e.g. `Standard_NC24ads_A100_v4`, `a2-highgpu-1g`, `p4d.24xlarge`."),
            )
            .attr(Attribute::string("gpu_model").computed().describe("The provider's GPU model id, e.g. `A100-80GB`."))
            .attr(Attribute::string("gpu_name").computed().describe("NVIDIA's name for the GPU."))
            .attr(Attribute::number("gpu_count").computed().describe("GPUs per machine."))
            .attr(Attribute::number("gpu_memory_mb").computed().describe("Memory per GPU in MiB, as `nvidia-smi` reports it where known."))
            .attr(Attribute::bool("mig_capable").computed().describe("Whether the GPU supports Multi-Instance GPU partitions."))
            .attr(Attribute::string("compute_capability").computed().describe("CUDA compute capability, e.g. `8.0`."))
            .attr(Attribute::string("gpu_product").computed().describe("The `nvidia.com/gpu.product` node label GPU feature discovery sets."))
            .attr(Attribute::nested("mig_profiles", Nesting::List, profile).computed().describe("The MIG profiles of the GPU; empty when it has none.")),
    )
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
        if let (Some(cloud), Some(name)) =
            (config.get("cloud").as_str(), config.get("name").as_str())
        {
            lookup(cloud, name, diags);
        }
    }

    async fn read(&self, config: &Value, diags: &mut Diagnostics) -> Value {
        let (Some(cloud), Some(name)) = (config.get("cloud").as_str(), config.get("name").as_str())
        else {
            return Value::Null;
        };
        let Some(mt) = lookup(cloud, name, diags) else {
            return Value::Null;
        };
        let gpu = mt.gpu;
        let profiles = gpu
            .mig_profiles
            .iter()
            .map(|p| {
                Value::object([
                    ("name", p.name.into()),
                    ("instances_per_gpu", Value::int(p.max_instances.into())),
                    ("memory_mb", Value::int(p.memory_mib.into())),
                    ("compute_share", gpu::compute_share(gpu, p).into()),
                    (
                        "aks_gpu_instance_profile",
                        Value::opt_string(p.aks.map(|a| a.as_str())),
                    ),
                    (
                        "gke_partition_size",
                        Value::Bool(p.gke && gpu.gke_accelerator.is_some()),
                    ),
                ])
            })
            .collect();
        Value::object([
            ("cloud", cloud.into()),
            ("name", name.into()),
            ("gpu_model", gpu.id.into()),
            ("gpu_name", gpu.marketing_name.into()),
            ("gpu_count", Value::int(mt.gpu_count.into())),
            ("gpu_memory_mb", Value::int(gpu.memory_mib.into())),
            ("mig_capable", Value::Bool(gpu.mig_capable())),
            ("compute_capability", gpu.compute_capability_string().into()),
            ("gpu_product", mt.gpu_product().into()),
            ("mig_profiles", Value::List(profiles)),
        ])
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
