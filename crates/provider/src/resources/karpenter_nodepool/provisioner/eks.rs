//! Karpenter on EKS (aws/karpenter-provider-aws): the `eks` block, which names an `EC2NodeClass`
//! (karpenter.k8s.aws/v1) or makes one, and how its Karpenter knows an instance type's GPUs.
//!
//! Facts followed, with their sources:
//! - Karpenter's well-known GPU labels on AWS: `karpenter.k8s.aws/instance-gpu-{name,count,
//!   memory,manufacturer}`, the name in lower case and the memory in MiB as EC2 reports them
//!   (aws/karpenter-provider-aws website/content/en/docs/reference/instance-types.md, v1.14.1).
//! - Bottlerocket's NVIDIA variants run the device plugin on the host and read
//!   `settings.kubelet-device-plugins.nvidia`, never the ConfigMap (`gpu::bottlerocket` has the
//!   settings, the releases that brought each and their sources).

use std::collections::BTreeMap;
use std::sync::Arc;

use gpu::{Cloud, GpuModel, MigStrategy, SharingMode};
use serde_json::{Value as J, json};
use tfplugin::object::{FromValue, Known, SingleBlock, ToValue};
use tfplugin::schema::{Attribute, Block};
use tfplugin::validators::{ExactlyOneOf, OneOf};
use tfplugin::{DecodeError, Type, Value};

use super::super::problem::{Problem, problem};
use super::node_class::{ApiKind, GpuChoice, NodeClass, Provisioner, ProvisionerKind, req};

/// The AMI families the `eks` block's node class takes.
const AMI_FAMILIES: &[&str] = &["al2023", "bottlerocket"];

/// The AMI families a GPU EC2NodeClass can use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AmiFamily {
    /// AL2023 NVIDIA: the driver on the AMI, the device plugin from the GPU operator.
    Al2023,
    /// Bottlerocket NVIDIA: driver and device plugin on the host, set up by its settings.
    Bottlerocket,
}

impl AmiFamily {
    pub fn parse(s: &str) -> Option<AmiFamily> {
        match s {
            "al2023" => Some(AmiFamily::Al2023),
            "bottlerocket" => Some(AmiFamily::Bottlerocket),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            AmiFamily::Al2023 => "al2023",
            AmiFamily::Bottlerocket => "bottlerocket",
        }
    }
}

/// An EC2NodeClass the pool makes.
#[derive(Clone, Debug, PartialEq)]
pub struct Ec2Class {
    /// The IAM role of the nodes (Karpenter makes the instance profile).
    pub role: String,
    pub subnet_tags: BTreeMap<String, String>,
    pub security_group_tags: BTreeMap<String, String>,
    pub ami_family: AmiFamily,
    /// `latest` or a pinned version such as `v1.34.0` (Bottlerocket) or `v20240807` (AL2023).
    pub ami_version: String,
}

/// Karpenter on EKS, with an EC2NodeClass.
#[derive(Clone, Debug, PartialEq)]
pub struct Aws(pub NodeClass<Ec2Class>);

impl Aws {
    /// The Bottlerocket version the pool's nodes run, when it makes a Bottlerocket node class.
    fn bottlerocket(&self) -> Option<&str> {
        match &self.0 {
            NodeClass::Made(c) if c.ami_family == AmiFamily::Bottlerocket => Some(&c.ami_version),
            _ => None,
        }
    }
}

/// The AWS name and memory (MiB) of a catalog GPU, as Karpenter labels EC2 instance types.
fn aws_gpu(gpu: &GpuModel) -> Option<(&'static str, u32)> {
    Some(match gpu.id {
        "T4" => ("t4", 16384),
        "A10G" => ("a10g", 22888),
        "L4" => ("l4", 22888),
        "L40S" => ("l40s", 45776),
        "A100-40GB" => ("a100", 40960),
        "A100-80GB" => ("a100", 81920),
        "H100-80GB" => ("h100", 81920),
        "H200-141GB" => ("h200", 144384),
        "B200" => ("b200", 183359),
        _ => return None,
    })
}

/// A pinned version below `min` (both `vMAJOR.MINOR.PATCH`); `latest` is never below.
fn below(version: &str, min: (u32, u32, u32)) -> bool {
    let parse = |s: &str| -> Option<(u32, u32, u32)> {
        let mut it = s.trim_start_matches('v').split('.').map(|p| p.parse().ok());
        Some((it.next()??, it.next()??, it.next().flatten().unwrap_or(0)))
    };
    parse(version).is_some_and(|v| v < min)
}

/// Bottlerocket's device plugin settings for a sharing mode, as TOML user data; an error names
/// what the pinned Bottlerocket version cannot do.
fn bottlerocket_settings(
    sharing: &SharingMode,
    gpu: &GpuModel,
    version: &str,
) -> Result<Option<String>, Problem> {
    if let SharingMode::Mig { strategy, .. } = sharing
        && *strategy != MigStrategy::Single
    {
        return Err(problem(
            "mig.strategy",
            "MIG strategy not supported on Bottlerocket",
            "Bottlerocket's device plugin supports MIG with the `single` strategy only \
            (bottlerocket-os/bottlerocket#4483). Set mig.strategy = \"single\", or use \
            eks.node_class.ami_family = \"al2023\", where the GPU operator's MIG manager \
            supports `mixed`."
                .to_string(),
        ));
    }
    gpu::bottlerocket::check_sharing(sharing).map_err(Problem::Domain)?;
    if let Some((min, what)) = gpu::bottlerocket::min_version(sharing)
        && below(version, min)
    {
        return Err(problem(
            "eks.node_class.ami_version",
            "Bottlerocket version too old",
            format!(
                "Bottlerocket {version} has no {what} setting for its NVIDIA device plugin; \
                it came in {}.{}.{}. Pin that version or later, or use `latest`.",
                min.0, min.1, min.2
            ),
        ));
    }
    Ok(gpu::bottlerocket::settings(sharing, gpu))
}

impl Provisioner for Aws {
    fn cloud(&self) -> Cloud {
        Cloud::Eks
    }

    fn pins(&self, gpu: &GpuModel) -> bool {
        aws_gpu(gpu).is_some()
    }

    fn host_device_plugin(&self) -> bool {
        self.bottlerocket().is_some()
    }

    fn user_data(&self, sharing: &SharingMode, gpu: &GpuModel) -> Result<Option<String>, Problem> {
        match self.bottlerocket() {
            Some(version) => bottlerocket_settings(sharing, gpu, version),
            None => Ok(None),
        }
    }

    fn gpu_count_label(&self) -> &'static str {
        "karpenter.k8s.aws/instance-gpu-count"
    }

    fn gpu_requirements(&self, choice: &GpuChoice<'_>) -> Vec<J> {
        let (name, memory) = aws_gpu(choice.gpu).unwrap_or_default();
        vec![
            req(
                "karpenter.k8s.aws/instance-gpu-manufacturer",
                "In",
                &["nvidia".into()],
            ),
            req(
                "karpenter.k8s.aws/instance-gpu-name",
                "In",
                &[name.to_string()],
            ),
            // The name alone does not tell an A100 of 40 GB from one of 80 GB.
            req(
                "karpenter.k8s.aws/instance-gpu-memory",
                "In",
                &[memory.to_string()],
            ),
        ]
    }

    fn node_class_api(&self) -> ApiKind {
        ApiKind {
            api_version: "karpenter.k8s.aws/v1",
            kind: "EC2NodeClass",
        }
    }

    fn node_class(&self, user_data: Option<&str>) -> NodeClass<J> {
        let c = match &self.0 {
            NodeClass::Existing(name) => return NodeClass::Existing(name.clone()),
            NodeClass::Made(c) => c,
        };
        let mut spec = json!({
            "role": c.role,
            "amiSelectorTerms": [{"alias": format!("{}@{}", c.ami_family.as_str(), c.ami_version)}],
            "subnetSelectorTerms": [{"tags": c.subnet_tags}],
            "securityGroupSelectorTerms": [{"tags": c.security_group_tags}],
        });
        if let Some(u) = user_data {
            spec["userData"] = json!(u);
        }
        NodeClass::Made(spec)
    }
}

tfplugin::object! {
    /// `eks.node_class`.
    pub struct Ec2ClassArgs {
        pub role: String,
        pub subnet_tags: BTreeMap<String, String>,
        pub security_group_tags: BTreeMap<String, String>,
        pub ami_family: Known<String>,
        pub ami_version: Known<String>,
    }
}

tfplugin::object! {
    /// The `eks` block.
    pub struct EksArgs {
        pub node_class_name: Option<String>,
        pub node_class: SingleBlock<Ec2ClassArgs>,
    }
}

/// The `eks` block.
pub struct EksBlock;

impl EksBlock {
    fn ec2_class() -> Block {
        Block::new(
            "An `EC2NodeClass` the pool makes under its own name. Its user data carries \
            Bottlerocket's device plugin settings when the AMI family is `bottlerocket`.",
        )
        .attr(
            Attribute::string("role")
                .required()
                .describe("IAM role of the nodes; Karpenter makes their instance profile."),
        )
        .attr(
            Attribute::new("subnet_tags", Type::map(Type::String))
                .required()
                .describe("Tags that select the nodes' subnets, e.g. `karpenter.sh/discovery`."),
        )
        .attr(
            Attribute::new("security_group_tags", Type::map(Type::String))
                .required()
                .describe("Tags that select the nodes' security groups."),
        )
        .attr(
            Attribute::string("ami_family")
                .optional()
                .computed()
                .describe(
                    "`al2023` (the NVIDIA AMI: driver on the image, device plugin from the GPU \
                    operator) or `bottlerocket` (driver and device plugin on the host, configured \
                    by Bottlerocket's settings, never the operator's ConfigMap). Default `al2023`.",
                )
                .validate(OneOf(AMI_FAMILIES))
                .default_value(Value::string("al2023")),
        )
        .attr(
            Attribute::string("ami_version")
                .optional()
                .computed()
                .describe(
                    "`latest` or a pinned version, e.g. `v20251209` (AL2023) or `v1.54.0` \
                    (Bottlerocket). Default `latest`.",
                )
                .default_value(Value::string("latest")),
        )
    }
}

impl ProvisionerKind for EksBlock {
    fn block_name(&self) -> &'static str {
        "eks"
    }

    fn title(&self) -> &'static str {
        "EKS Karpenter"
    }

    fn block(&self) -> Block {
        Block::new(
            "Karpenter on EKS: name an `EC2NodeClass` of your own, or let the pool make one.",
        )
        .attr(
            Attribute::string("node_class_name")
                .optional()
                .describe("An existing `EC2NodeClass`; the pool never changes or deletes it."),
        )
        .single_block("node_class", EksBlock::ec2_class())
        .validate(ExactlyOneOf(&["node_class_name", "node_class"]))
    }

    fn decode(&self, block: &Value) -> Result<Value, DecodeError> {
        EksArgs::from_value(block).map(|a| a.to_value())
    }

    fn shape(&self) -> tfplugin::shape::Shape {
        <EksArgs as tfplugin::shape::Shaped>::shape()
    }

    fn provisioner(&self, block: &Value) -> Option<Arc<dyn Provisioner>> {
        let e = EksArgs::from_value(block).ok()?;
        let class = match (&e.node_class_name, &*e.node_class) {
            (Some(n), _) => NodeClass::Existing(n.clone()),
            (None, Some(c)) => NodeClass::Made(Ec2Class {
                role: c.role.clone(),
                subnet_tags: c.subnet_tags.clone(),
                security_group_tags: c.security_group_tags.clone(),
                ami_family: c
                    .ami_family
                    .0
                    .as_deref()
                    .and_then(AmiFamily::parse)
                    .unwrap_or(AmiFamily::Al2023),
                ami_version: c.ami_version.0.clone().unwrap_or_else(|| "latest".into()),
            }),
            // The schema's ExactlyOneOf reports it.
            (None, None) => return None,
        };
        Some(Arc::new(Aws(class)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_models_name_what_the_block_declares() {
        let block = EksBlock.block();
        assert_eq!(EksArgs::attribute_names(), block.names());
        assert_eq!(
            Ec2ClassArgs::attribute_names(),
            block.nested_block("node_class").unwrap().block.names()
        );
    }
}
