//! The provisioners `fracgpu_karpenter_nodepool` can write for, in one list: adding one is a file
//! beside this one with its [`Provisioner`] and its [`ProvisionerKind`], and one line in
//! [`PROVISIONERS`]. The schema's blocks, the arguments' model and `terraform query`'s names
//! iterate here; the renderer asks the provisioner a pool declares.

use std::sync::{Arc, LazyLock};

use tfplugin::object::{FromValue, ToValue};
use tfplugin::{DecodeError, Step, Value};

use super::eks::EksBlock;
use super::nap::AksBlock;
use super::node_class::{Provisioner, ProvisionerKind};

/// Every provisioner, in the order the schema lists their blocks.
pub const PROVISIONERS: [&dyn ProvisionerKind; 2] = [&EksBlock, &AksBlock];

/// The names of the provisioners' blocks, in [`PROVISIONERS`]' order, for the schema's
/// exactly-one-of.
pub static BLOCK_NAMES: LazyLock<Vec<&'static str>> =
    LazyLock::new(|| PROVISIONERS.iter().map(|p| p.block_name()).collect());

/// The provisioner block of a `fracgpu_karpenter_nodepool` value (one of `eks`, `aks`), as a
/// field of a typed model: the kind and the block's value as its model writes it. Decodes like a
/// block of at most one of each: unknown, or a block its kind cannot read, fails the model.
#[derive(Clone, Default)]
pub struct ProvisionerBlock(pub Option<(&'static dyn ProvisionerKind, Value)>);

impl ProvisionerBlock {
    /// The names of the attributes it stands for, as the schema declares them.
    pub fn attribute_names() -> Vec<&'static str> {
        BLOCK_NAMES.clone()
    }

    /// The block `kind` declares, with `block` as its value.
    pub fn of(kind: &'static dyn ProvisionerKind, block: Value) -> ProvisionerBlock {
        ProvisionerBlock(Some((kind, block)))
    }

    pub fn kind(&self) -> Option<&'static dyn ProvisionerKind> {
        self.0.as_ref().map(|(k, _)| *k)
    }

    /// The provisioner the block declares; None without a block, or when it names no node
    /// class.
    pub fn provisioner(&self) -> Option<Arc<dyn Provisioner>> {
        let (kind, block) = self.0.as_ref()?;
        kind.provisioner(block)
    }
}

impl std::fmt::Debug for ProvisionerBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Some((k, b)) => write!(f, "ProvisionerBlock({}: {b:?})", k.block_name()),
            None => f.write_str("ProvisionerBlock(none)"),
        }
    }
}

impl PartialEq for ProvisionerBlock {
    fn eq(&self, other: &ProvisionerBlock) -> bool {
        match (&self.0, &other.0) {
            (Some((a, x)), Some((b, y))) => a.block_name() == b.block_name() && x == y,
            (None, None) => true,
            _ => false,
        }
    }
}

/// One block of at most one per provisioner, each read by its kind's model.
impl tfplugin::shape::Shaped for ProvisionerBlock {
    fn shape() -> tfplugin::shape::Shape {
        tfplugin::shape::blocks(
            PROVISIONERS
                .iter()
                .map(|k| (k.block_name(), k.shape()))
                .collect(),
        )
    }
}

impl FromValue for ProvisionerBlock {
    const EXPECTED: &'static str = "a block of at most one";

    fn from_value(v: &Value) -> Result<ProvisionerBlock, DecodeError> {
        let mut found = None;
        for kind in PROVISIONERS {
            let name = kind.block_name();
            let list = v.get(name);
            let under = |e: DecodeError| e.under(Step::Attr(name.to_string()));
            if !list.is_known() {
                return Err(under(DecodeError::new(Self::EXPECTED, list)));
            }
            match list.elements() {
                [] => {}
                [one] => {
                    let block = kind
                        .decode(one)
                        .map_err(|e| under(e.under(Step::Index(0))))?;
                    found = found.or(Some((kind, block)));
                }
                _ => return Err(under(DecodeError::new(Self::EXPECTED, list))),
            }
        }
        Ok(ProvisionerBlock(found))
    }
}

impl ToValue for ProvisionerBlock {
    fn to_value(&self) -> Value {
        Value::object(PROVISIONERS.iter().map(|kind| {
            let here = self
                .0
                .as_ref()
                .filter(|(k, _)| k.block_name() == kind.block_name());
            (
                kind.block_name(),
                Value::List(here.map(|(_, b)| b.clone()).into_iter().collect()),
            )
        }))
    }
}
