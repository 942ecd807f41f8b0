//! AKS node auto-provisioning (Karpenter run by AKS, Azure/karpenter-provider-azure): the `aks`
//! block, which names an `AKSNodeClass` (karpenter.azure.com/v1beta1) or makes one, and how its
//! Karpenter knows a VM size's GPUs.
//!
//! Facts followed, with their sources:
//! - Karpenter's well-known GPU labels on Azure: `karpenter.azure.com/sku-gpu-{name,count,
//!   manufacturer}`, the name being the accelerator part of the VM size
//!   (`Standard_NC24ads_A100_v4` -> `A100`), absent when the size names none
//!   (Azure/karpenter-provider-azure pkg/providers/instancetype/instancetype.go
//!   `setRequirementsGPU`).
//! - NAP does not pass a MIG profile to the nodes it makes (Azure/karpenter-provider-azure
//!   pkg/providers/imagefamily/customscriptsbootstrap/provisionclientbootstrap.go: "Unsupported
//!   as of now (MIG)").

use std::sync::Arc;

use gpu::{Cloud, SharingMode};
use serde_json::{Value as J, json};
use tfplugin::object::{FromValue, Known, SingleBlock, ToValue};
use tfplugin::schema::{Attribute, Block};
use tfplugin::validators::{ExactlyOneOf, OneOf};
use tfplugin::{DecodeError, Value};

use super::super::problem::{Problem, problem};
use super::node_class::{ApiKind, GpuChoice, NodeClass, Provisioner, ProvisionerKind, req};

/// The image families the `aks` block's node class takes.
const IMAGE_FAMILIES: &[&str] = &["Ubuntu2204", "Ubuntu", "AzureLinux"];

/// An AKSNodeClass the pool makes.
#[derive(Clone, Debug, PartialEq)]
pub struct AksClass {
    /// `Ubuntu2204`, `Ubuntu`, `AzureLinux`.
    pub image_family: String,
}

/// AKS node auto-provisioning, with an AKSNodeClass.
#[derive(Clone, Debug, PartialEq)]
pub struct Nap(pub NodeClass<AksClass>);

/// The accelerator part of an Azure VM size (`Standard_NC4as_T4_v3` -> `T4`), as the Azure
/// provider's size parser reads it: the segment between the size and the version, if any.
fn azure_accelerator(size: &str) -> Option<&str> {
    let parts: Vec<&str> = size.split('_').collect();
    match parts.as_slice() {
        [_, _, acc, version] if version.starts_with('v') => Some(acc),
        _ => None,
    }
}

impl Provisioner for Nap {
    fn cloud(&self) -> Cloud {
        Cloud::Aks
    }

    fn sharing_problem(&self, sharing: &SharingMode) -> Option<Problem> {
        matches!(sharing, SharingMode::Mig { .. }).then(|| {
            problem(
                "mig",
                "MIG not supported by node auto-provisioning",
                "AKS node auto-provisioning does not pass a GPU instance profile to the nodes it \
                makes (Azure/karpenter-provider-azure, provisionclientbootstrap.go: \"Unsupported \
                as of now (MIG)\"), so its nodes would have whole GPUs. Use time_slicing or mps \
                here, or a fracgpu_nodepool on AKS with a mig block."
                    .to_string(),
            )
        })
    }

    fn gpu_count_label(&self) -> &'static str {
        "karpenter.azure.com/sku-gpu-count"
    }

    fn gpu_requirements(&self, choice: &GpuChoice<'_>) -> Vec<J> {
        let mut r = vec![req(
            "karpenter.azure.com/sku-gpu-manufacturer",
            "In",
            &["nvidia".into()],
        )];
        // The accelerator name pins the GPU when every size of this GPU names one that no size
        // of another GPU shares; else the sizes themselves do.
        let names: Vec<Option<&str>> = choice
            .machines
            .iter()
            .map(|m| azure_accelerator(m.name))
            .collect();
        let shared = gpu::machine_types_of(Cloud::Aks).any(|m| {
            !std::ptr::eq(m.gpu, choice.gpu)
                && azure_accelerator(m.name).is_some_and(|a| names.contains(&Some(a)))
        });
        let mut accels: Vec<String> = names.iter().flatten().map(|a| a.to_string()).collect();
        accels.sort();
        accels.dedup();
        if names.iter().all(Option::is_some) && !shared {
            r.push(req("karpenter.azure.com/sku-gpu-name", "In", &accels));
        } else {
            let sizes: Vec<String> = choice
                .machines
                .iter()
                .filter(|m| choice.counts.contains(&m.gpu_count))
                .map(|m| m.name.to_string())
                .collect();
            r.push(req("node.kubernetes.io/instance-type", "In", &sizes));
        }
        r
    }

    fn node_class_api(&self) -> ApiKind {
        ApiKind {
            api_version: "karpenter.azure.com/v1beta1",
            kind: "AKSNodeClass",
        }
    }

    // `None`: the GPU operator installs the driver, so any GPU size may be chosen
    // (pkg/apis/v1beta1/aksnodeclass.go, GPUModeNone).
    fn node_class(&self, _user_data: Option<&str>) -> NodeClass<J> {
        match &self.0 {
            NodeClass::Existing(name) => NodeClass::Existing(name.clone()),
            NodeClass::Made(c) => {
                NodeClass::Made(json!({"imageFamily": c.image_family, "gpu": {"mode": "None"}}))
            }
        }
    }
}

tfplugin::object! {
    /// `aks.node_class`.
    pub struct AksClassArgs {
        pub image_family: Known<String>,
    }
}

tfplugin::object! {
    /// The `aks` block.
    pub struct AksArgs {
        pub node_class_name: Option<String>,
        pub node_class: SingleBlock<AksClassArgs>,
    }
}

/// The `aks` block.
pub struct AksBlock;

impl ProvisionerKind for AksBlock {
    fn block_name(&self) -> &'static str {
        "aks"
    }

    fn title(&self) -> &'static str {
        "AKS node auto-provisioning"
    }

    fn block(&self) -> Block {
        let aks_class = Block::new(
            "An `AKSNodeClass` the pool makes under its own name, with `gpu.mode = None`: the \
            GPU operator installs the driver, as it does for the operator's device plugin.",
        )
        .attr(
            Attribute::string("image_family")
                .optional()
                .computed()
                .describe("`Ubuntu2204`, `Ubuntu` or `AzureLinux`. Default `Ubuntu2204`.")
                .validate(OneOf(IMAGE_FAMILIES))
                .default_value(Value::string("Ubuntu2204")),
        );
        Block::new(
            "AKS node auto-provisioning (Karpenter run by AKS): name an `AKSNodeClass` of your \
            own, or let the pool make one. MIG is refused here: node auto-provisioning passes no \
            GPU instance profile to the nodes it makes.",
        )
        .attr(
            Attribute::string("node_class_name")
                .optional()
                .describe("An existing `AKSNodeClass`; the pool never changes or deletes it."),
        )
        .single_block("node_class", aks_class)
        .validate(ExactlyOneOf(&["node_class_name", "node_class"]))
    }

    fn decode(&self, block: &Value) -> Result<Value, DecodeError> {
        AksArgs::from_value(block).map(|a| a.to_value())
    }

    fn shape(&self) -> tfplugin::shape::Shape {
        <AksArgs as tfplugin::shape::Shaped>::shape()
    }

    fn provisioner(&self, block: &Value) -> Option<Arc<dyn Provisioner>> {
        let a = AksArgs::from_value(block).ok()?;
        let class = match (&a.node_class_name, &*a.node_class) {
            (Some(n), _) => NodeClass::Existing(n.clone()),
            (None, Some(c)) => NodeClass::Made(AksClass {
                image_family: c
                    .image_family
                    .0
                    .clone()
                    .unwrap_or_else(|| "Ubuntu2204".into()),
            }),
            // The schema's ExactlyOneOf reports it.
            (None, None) => return None,
        };
        Some(Arc::new(Nap(class)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_models_name_what_the_block_declares() {
        let block = AksBlock.block();
        assert_eq!(AksArgs::attribute_names(), block.names());
        assert_eq!(
            AksClassArgs::attribute_names(),
            block.nested_block("node_class").unwrap().block.names()
        );
    }
}
