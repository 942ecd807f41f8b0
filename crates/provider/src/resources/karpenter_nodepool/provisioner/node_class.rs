//! What a provisioner must say for a pool to be rendered for it ([`Provisioner`]), and what its
//! block of `fracgpu_karpenter_nodepool` must say for the pool to be declared for it
//! ([`ProvisionerKind`]). A provisioner is a Karpenter cloud provider: it makes nodes for the
//! core NodePool and NodeOverlay of kubernetes-sigs/karpenter (the same API for every one of
//! them, [`NODE_POOL`] and [`NODE_OVERLAY`]), from a node class of its own API, and it knows the
//! GPUs of its cloud's instance types by well-known labels of its own. Those differences are
//! all the renderer asks of it.

use std::fmt::Debug;
use std::sync::Arc;

use gpu::{Cloud, GpuModel, MachineType, SharingMode};
use serde_json::{Value as J, json};
use tfplugin::schema::Block;
use tfplugin::{DecodeError, Value};

use super::super::problem::Problem;

/// An object kind of a Karpenter API: its `apiVersion` (`group/version`) and `kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApiKind {
    pub api_version: &'static str,
    pub kind: &'static str,
}

impl ApiKind {
    /// The API group, as a `nodeClassRef` names it.
    pub fn group(&self) -> &'static str {
        self.api_version
            .split_once('/')
            .map_or(self.api_version, |(group, _)| group)
    }
}

/// Karpenter's NodePool, served alike by every provisioner.
pub const NODE_POOL: ApiKind = ApiKind {
    api_version: "karpenter.sh/v1",
    kind: "NodePool",
};

/// Karpenter's NodeOverlay (alpha, behind its `NodeOverlay` feature gate).
pub const NODE_OVERLAY: ApiKind = ApiKind {
    api_version: "karpenter.sh/v1alpha1",
    kind: "NodeOverlay",
};

/// A requirement of a NodePool's template or an overlay (a Kubernetes node selector
/// requirement): `values` left out when empty, as `Exists` takes none.
pub fn req(key: &str, op: &str, values: &[String]) -> J {
    if values.is_empty() {
        json!({"key": key, "operator": op})
    } else {
        json!({"key": key, "operator": op, "values": values})
    }
}

/// A node class the pool refers to, or one it makes under its own name.
#[derive(Clone, Debug, PartialEq)]
pub enum NodeClass<T> {
    Existing(String),
    Made(T),
}

/// The GPU a pool asks for, as the renderer found it in the provisioner's catalog.
pub struct GpuChoice<'a> {
    pub gpu: &'static GpuModel,
    /// The instance types of the provisioner's cloud that carry this GPU.
    pub machines: &'a [&'static MachineType],
    /// The GPU counts the pool allows, sorted, each once.
    pub counts: &'a [u32],
}

/// What a provisioner must say for a pool's objects to be rendered for it: one implementation
/// per provisioner, holding the node class the pool names or makes.
pub trait Provisioner: Debug + Send + Sync {
    /// The catalog whose instance types its Karpenter chooses from.
    fn cloud(&self) -> Cloud;

    /// Whether requirements can pin `gpu`: its Karpenter labels the instance types that carry it
    /// with values the provider knows.
    fn pins(&self, _gpu: &GpuModel) -> bool {
        true
    }

    /// What it cannot do with the pool's sharing, a problem on the argument.
    fn sharing_problem(&self, _sharing: &SharingMode) -> Option<Problem> {
        None
    }

    /// Whether its nodes' host runs the device plugin, set up by the node class's user data: no
    /// device plugin config or MIG manager label then.
    fn host_device_plugin(&self) -> bool {
        false
    }

    /// The user data that sets the host's device plugin up; a problem names what the node class
    /// cannot do.
    fn user_data(
        &self,
        _sharing: &SharingMode,
        _gpu: &GpuModel,
    ) -> Result<Option<String>, Problem> {
        Ok(None)
    }

    /// The well-known label of an instance type's GPU count, which the requirements and each
    /// overlay select by.
    fn gpu_count_label(&self) -> &'static str;

    /// The requirements that pin the GPU, before the count's, the capacity type's and the OS's.
    fn gpu_requirements(&self, choice: &GpuChoice<'_>) -> Vec<J>;

    /// Its node class's API.
    fn node_class_api(&self) -> ApiKind;

    /// The node class the pool names, or the spec of the one it makes (with the user data, when
    /// there is some).
    fn node_class(&self, user_data: Option<&str>) -> NodeClass<J>;
}

/// A provisioner's block of `fracgpu_karpenter_nodepool` (`eks`, `aks`): its schema, how it reads,
/// and the provisioner it declares. One unit struct per provisioner, listed in the registry.
pub trait ProvisionerKind: Sync {
    /// The block's name.
    fn block_name(&self) -> &'static str;

    /// Where a pool of this provisioner runs, as `terraform query` lists it.
    fn title(&self) -> &'static str;

    /// The block as the schema declares it.
    fn block(&self) -> Block;

    /// The block's value in the form its typed model writes it, or why it does not read.
    fn decode(&self, block: &Value) -> Result<Value, DecodeError>;

    /// What the block's typed model reads, for the test that holds it to the schema.
    fn shape(&self) -> tfplugin::shape::Shape;

    /// The provisioner a block that reads declares; None when it names no node class (the
    /// schema's checks report that).
    fn provisioner(&self, block: &Value) -> Option<Arc<dyn Provisioner>>;
}
