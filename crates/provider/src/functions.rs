//! Provider-defined functions (terraform >= 1.8): `provider::fracgpu::<name>(...)`.

use std::sync::Arc;

use gpu::{self, MigStrategy, SharingMode};
use tfplugin::api::{Function, FunctionError, FunctionSignature, Parameter};
use tfplugin::{Type, Value};

pub fn all() -> Vec<Arc<dyn Function>> {
    vec![
        Arc::new(MigProfiles),
        Arc::new(SlicesFor),
        Arc::new(DevicePluginConfig),
    ]
}

fn arg_error(argument: usize, text: impl Into<String>) -> FunctionError {
    FunctionError {
        argument: Some(argument),
        text: text.into(),
    }
}

/// A whole, non-negative number argument.
fn count_arg(args: &[Value], i: usize, name: &str) -> Result<u64, FunctionError> {
    let n = args
        .get(i)
        .and_then(Value::as_number)
        .ok_or_else(|| arg_error(i, format!("{name} is required")))?;
    n.as_i64()
        .and_then(|v| u64::try_from(v).ok())
        .ok_or_else(|| {
            arg_error(
                i,
                format!("{name} must be a whole number of at least 0, not {n}"),
            )
        })
}

fn profile_type() -> Type {
    Type::object([
        ("name", Type::String),
        ("instances_per_gpu", Type::Number),
        ("memory_mb", Type::Number),
        ("compute_share", Type::String),
    ])
}

pub struct MigProfiles;

impl Function for MigProfiles {
    fn name(&self) -> &'static str {
        "mig_profiles"
    }
    fn signature(&self) -> FunctionSignature {
        FunctionSignature {
            parameters: vec![Parameter {
                name: "gpu_model",
                ty: Type::String,
                description: "A GPU model id (`A100-40GB`) or GKE accelerator name \
                    (`nvidia-tesla-a100`).",
            }],
            returns: Type::list(profile_type()),
            summary: "The MIG profiles of a GPU model",
            description: "Returns the MIG profiles the GPU can be partitioned into, each with the \
                number of instances one GPU holds, the memory of one instance in MiB and its share \
                of the GPU's compute. Empty for GPUs without MIG.",
        }
    }
    fn call(&self, args: &[Value]) -> Result<Value, FunctionError> {
        let id = args
            .first()
            .and_then(Value::as_str)
            .ok_or_else(|| arg_error(0, "gpu_model is required"))?;
        let gpu =
            gpu::gpu_model(id).map_err(|e| arg_error(0, format!("{}: {}", e.summary, e.detail)))?;
        Ok(Value::List(
            gpu.mig_profiles
                .iter()
                .map(|p| {
                    Value::object([
                        ("name", p.name.into()),
                        ("instances_per_gpu", Value::int(p.max_instances.into())),
                        ("memory_mb", Value::int(p.memory_mib.into())),
                        ("compute_share", gpu::compute_share(gpu, p).into()),
                    ])
                })
                .collect(),
        ))
    }
}

pub struct SlicesFor;

impl Function for SlicesFor {
    fn name(&self) -> &'static str {
        "slices_for"
    }
    fn signature(&self) -> FunctionSignature {
        FunctionSignature {
            parameters: vec![
                Parameter {
                    name: "gpu_memory_mb",
                    ty: Type::Number,
                    description: "GPU memory the workload needs, in MiB.",
                },
                Parameter {
                    name: "gpu_total_memory_mb",
                    ty: Type::Number,
                    description: "Memory of one GPU, in MiB.",
                },
                Parameter {
                    name: "replicas",
                    ty: Type::Number,
                    description: "Time-slicing replicas per GPU.",
                },
            ],
            returns: Type::Number,
            summary: "Time-sliced replicas a workload must request for its memory",
            description: "The smallest number of slices of a GPU cut into `replicas` whose memory \
                share holds `gpu_memory_mb`: 4000 MiB on a 15360 MiB T4 cut in 10 takes 3 slices.",
        }
    }
    fn call(&self, args: &[Value]) -> Result<Value, FunctionError> {
        let need = count_arg(args, 0, "gpu_memory_mb")?;
        let total = count_arg(args, 1, "gpu_total_memory_mb")?;
        let replicas = count_arg(args, 2, "replicas")?;
        let replicas =
            u32::try_from(replicas).map_err(|_| arg_error(2, "replicas is too large"))?;
        let argument = |field: gpu::Field| match field {
            gpu::Field::WorkloadMemory => 0,
            _ if total == 0 => 1,
            _ => 2,
        };
        gpu::slices_for(need, total, replicas)
            .map(|n| Value::int(n.into()))
            .map_err(|e| arg_error(argument(e.field), e.detail))
    }
}

pub struct DevicePluginConfig;

/// The sharing modes the function accepts, as written in its `mode` argument.
const MODES: &[&str] = &[
    "none",
    "time-slicing",
    "time-slicing-renamed",
    "mps",
    "mig-single",
    "mig-mixed",
];

impl Function for DevicePluginConfig {
    fn name(&self) -> &'static str {
        "device_plugin_config"
    }
    fn signature(&self) -> FunctionSignature {
        FunctionSignature {
            parameters: vec![
                Parameter {
                    name: "mode",
                    ty: Type::String,
                    description: "`none`, `time-slicing`, `time-slicing-renamed` (advertise \
                        `nvidia.com/gpu.shared`), `mps`, `mig-single` or `mig-mixed`.",
                },
                Parameter {
                    name: "replicas",
                    ty: Type::Number,
                    description: "Replicas per GPU for time-slicing and MPS (2 to 48); 0 for the \
                        other modes.",
                },
            ],
            returns: Type::String,
            summary: "The NVIDIA device plugin config document for one sharing mode",
            description: "Renders the YAML the NVIDIA device plugin reads (version v1) for one \
                sharing mode, exactly as `fracgpu_nodepool` and `fracgpu_device_plugin_config` \
                render it, e.g. to paste into the GPU operator's Helm values.",
        }
    }
    fn call(&self, args: &[Value]) -> Result<Value, FunctionError> {
        let mode = args
            .first()
            .and_then(Value::as_str)
            .ok_or_else(|| arg_error(0, "mode is required"))?;
        let replicas = count_arg(args, 1, "replicas")?;
        let replicas =
            u32::try_from(replicas).map_err(|_| arg_error(1, "replicas is too large"))?;
        let sharing = match mode {
            "none" => SharingMode::None,
            "time-slicing" | "time-slicing-renamed" => SharingMode::TimeSlicing {
                replicas,
                rename_by_default: mode == "time-slicing-renamed",
                fail_requests_greater_than_one: false,
            },
            "mps" => SharingMode::mps(replicas),
            "mig-single" | "mig-mixed" => SharingMode::Mig {
                profile: String::new(),
                strategy: if mode == "mig-single" {
                    MigStrategy::Single
                } else {
                    MigStrategy::Mixed
                },
                gke_sharing: None,
            },
            other => {
                return Err(arg_error(
                    0,
                    format!(
                        "{other:?} is not a sharing mode; use one of {}",
                        MODES.join(", ")
                    ),
                ));
            }
        };
        if replicas != 0 && matches!(sharing, SharingMode::None | SharingMode::Mig { .. }) {
            return Err(arg_error(
                1,
                format!("mode {mode:?} takes no replicas; pass 0"),
            ));
        }
        gpu::device_plugin_config_yaml(&sharing)
            .map(Value::String)
            .map_err(|e| arg_error(1, e.detail))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_for_names_the_bad_argument() {
        let call =
            |a: i64, b: i64, c: i64| SlicesFor.call(&[Value::int(a), Value::int(b), Value::int(c)]);
        assert_eq!(call(4000, 15360, 10), Ok(Value::int(3)));
        assert_eq!(call(0, 15360, 10).unwrap_err().argument, Some(0));
        assert_eq!(call(4000, 0, 10).unwrap_err().argument, Some(1));
        assert_eq!(call(4000, 15360, 0).unwrap_err().argument, Some(2));
        assert_eq!(call(-1, 15360, 10).unwrap_err().argument, Some(0));
    }

    #[test]
    fn mig_profiles_of_a_gpu() {
        let v = MigProfiles.call(&["nvidia-tesla-a100".into()]).unwrap();
        assert_eq!(v.elements()[0].get("name").as_str(), Some("1g.5gb"));
        assert_eq!(v.elements()[0].get("instances_per_gpu").as_i64(), Some(7));
        assert_eq!(
            MigProfiles.call(&["T4".into()]).unwrap(),
            Value::List(vec![])
        );
        assert_eq!(
            MigProfiles.call(&["V100".into()]).unwrap_err().argument,
            Some(0)
        );
    }

    #[test]
    fn device_plugin_config_renders_what_the_plugin_reads() {
        let yaml = DevicePluginConfig
            .call(&["time-slicing".into(), Value::int(10)])
            .unwrap();
        let parsed = gpu::device_plugin::parse(yaml.as_str().unwrap()).unwrap();
        assert_eq!(parsed.sharing.unwrap().resources[0].replicas, 10);
        assert_eq!(
            DevicePluginConfig
                .call(&["time-slicing".into(), Value::int(1)])
                .unwrap_err()
                .argument,
            Some(1)
        );
        assert_eq!(
            DevicePluginConfig
                .call(&["slicing".into(), Value::int(2)])
                .unwrap_err()
                .argument,
            Some(0)
        );
        assert_eq!(
            DevicePluginConfig
                .call(&["mig-mixed".into(), Value::int(3)])
                .unwrap_err()
                .argument,
            Some(1)
        );
    }
}
