//! The provisioning targets the provider knows, in one list: adding a target is a folder under
//! `cloud/` with its [`Target`] descriptor and one line in [`TARGETS`] (and its variant of
//! [`Location`]). Everything that needs "every target" (the blocks of a schema, an import ID that
//! fits one of them, the identity's attributes) iterates here; everything that needs "this
//! target" gets it from a [`Cloud`] or a [`Location`].

use std::collections::BTreeMap;
use std::sync::Arc;

use gpu::Cloud;
use tfplugin::object::{FromValue, ToValue};
use tfplugin::{AttrPath, DecodeError, Diagnostic, Diagnostics, Step, Value};

use super::aks::Aks;
use super::eks::Eks;
use super::error::CloudError;
use super::gke::Gke;
use super::pool::{Location, NodePools};
use super::target::{Scope, Target, TargetSettings};

/// Every target, in the order schemas, identities and docs list them.
pub const TARGETS: [&dyn Target; 3] = [&Aks, &Gke, &Eks];

/// The descriptor of a cloud.
pub fn target(cloud: Cloud) -> &'static dyn Target {
    TARGETS
        .iter()
        .copied()
        .find(|t| t.cloud() == cloud)
        .expect("every cloud of gpu::Cloud has a target")
}

/// The names of the targets' blocks, in [`TARGETS`]' order, for the schemas' exactly-one-of
/// (which takes a constant; the test below holds it to the list).
pub const BLOCK_NAMES: [&str; TARGETS.len()] = ["aks", "gke", "eks"];

impl Location {
    /// The cloud a location is on.
    pub fn cloud(&self) -> Cloud {
        match self {
            Location::Aks { .. } => Cloud::Aks,
            Location::Gke { .. } => Cloud::Gke,
            Location::Eks { .. } => Cloud::Eks,
        }
    }

    pub fn target(&self) -> &'static dyn Target {
        target(self.cloud())
    }

    /// The ID a pool of this name has here (the cloud's own, as in `Pool::id`), known before
    /// the cloud is asked.
    pub fn pool_id(&self, name: &str) -> String {
        self.target().pool_id(self, name)
    }

    /// The cluster, in a sentence.
    pub fn describe(&self) -> String {
        self.target().describe(self)
    }
}

/// Every target's settings: the provider block's, with the environment's and the sandbox's
/// defaults; nothing here derives Debug, so no log line can print a credential.
#[derive(Clone, Default)]
pub struct CloudSettings {
    /// Base URL of a fracgpu sandbox that stands in for every cloud.
    pub sandbox: Option<String>,
    targets: BTreeMap<Cloud, Arc<dyn TargetSettings>>,
}

impl CloudSettings {
    /// From the provider's configuration: each target's block (`azure`, `google`, `aws`) read by
    /// its descriptor.
    pub fn from_config(config: &Value, sandbox: Option<String>) -> CloudSettings {
        let targets = TARGETS
            .iter()
            .map(|t| {
                let block = config.get(t.provider_block_name()).elements().first();
                let block = block.cloned().unwrap_or(Value::Null);
                (t.cloud(), t.settings(&block, sandbox.as_deref()))
            })
            .collect();
        CloudSettings { sandbox, targets }
    }

    /// Settings in which every target has `scope` as its default: validation runs before the
    /// provider is configured, and reports a missing default at plan time instead.
    pub fn with_scope(scope: &str) -> CloudSettings {
        let targets = TARGETS
            .iter()
            .map(|t| (t.cloud(), t.settings_with_scope(scope)))
            .collect();
        CloudSettings {
            sandbox: None,
            targets,
        }
    }

    /// A target's settings (a configuration without its block: the environment's alone).
    pub fn of(&self, cloud: Cloud) -> Arc<dyn TargetSettings> {
        self.targets
            .get(&cloud)
            .cloned()
            .unwrap_or_else(|| target(cloud).settings(&Value::Null, self.sandbox.as_deref()))
    }

    /// The scope of a cloud's blocks that name none.
    pub fn default_scope(&self, cloud: Cloud) -> Option<String> {
        self.of(cloud).default_scope()
    }

    /// Builds the node pool client of a cloud.
    pub async fn connect(&self, cloud: Cloud) -> Result<Arc<dyn NodePools>, CloudError> {
        self.of(cloud).connect(self.sandbox.clone()).await
    }
}

/// The target block of a `fracgpu_nodepool` value (one of `aks`, `gke`, `eks`), as a field of a
/// typed model: the descriptor and the block's value, which the descriptor reads. Decodes like a
/// block of at most one of each: unknown, or a block its target cannot read, fails the model.
#[derive(Clone, Default)]
pub struct TargetBlock(pub Option<(&'static dyn Target, Value)>);

impl TargetBlock {
    /// The names of the attributes it stands for, as the schema declares them.
    pub fn attribute_names() -> Vec<&'static str> {
        BLOCK_NAMES.to_vec()
    }

    pub fn target(&self) -> Option<&'static dyn Target> {
        self.0.as_ref().map(|(t, _)| *t)
    }

    pub fn block(&self) -> Option<&Value> {
        self.0.as_ref().map(|(_, b)| b)
    }

    /// The block's value, to be edited where the plan fills it in.
    pub fn block_mut(&mut self) -> Option<&mut Value> {
        self.0.as_mut().map(|(_, b)| b)
    }
}

impl std::fmt::Debug for TargetBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Some((t, b)) => write!(f, "TargetBlock({}: {b:?})", t.cloud()),
            None => f.write_str("TargetBlock(none)"),
        }
    }
}

impl PartialEq for TargetBlock {
    fn eq(&self, other: &TargetBlock) -> bool {
        match (&self.0, &other.0) {
            (Some((a, x)), Some((b, y))) => a.cloud() == b.cloud() && x == y,
            (None, None) => true,
            _ => false,
        }
    }
}

/// One block of at most one per target, each read by its target's model.
impl tfplugin::shape::Shaped for TargetBlock {
    fn shape() -> tfplugin::shape::Shape {
        tfplugin::shape::blocks(
            TARGETS
                .iter()
                .map(|t| (t.cloud().as_str(), t.block_shape()))
                .collect(),
        )
    }
}

impl FromValue for TargetBlock {
    const EXPECTED: &'static str = "a block of at most one";

    fn from_value(v: &Value) -> Result<TargetBlock, DecodeError> {
        let mut found = None;
        for t in TARGETS {
            let name = t.cloud().as_str();
            let list = v.get(name);
            let under = |e: DecodeError| e.under(Step::Attr(name.to_string()));
            if !list.is_known() {
                return Err(under(DecodeError::new(Self::EXPECTED, list)));
            }
            match list.elements() {
                [] => {}
                [one] => {
                    t.decode_block(one)
                        .map_err(|e| under(e.under(Step::Index(0))))?;
                    found = found.or(Some((t, one.clone())));
                }
                _ => return Err(under(DecodeError::new(Self::EXPECTED, list))),
            }
        }
        Ok(TargetBlock(found))
    }
}

impl ToValue for TargetBlock {
    fn to_value(&self) -> Value {
        Value::object(TARGETS.iter().map(|t| {
            let here = self.0.as_ref().filter(|(x, _)| x.cloud() == t.cloud());
            (
                t.cloud().as_str(),
                Value::List(here.map(|(_, b)| b.clone()).into_iter().collect()),
            )
        }))
    }
}

/// Where a target block (a `fracgpu_nodepool` or query block, or a state's) places a cluster.
pub enum Located {
    At(Location),
    /// The block names no scope and the provider has no default.
    MissingScope(&'static dyn Target),
    /// No target block, or one whose coordinates are not known yet.
    Unknown,
}

/// The target block an object value holds (the one of `aks`, `gke`, `eks` with an element).
pub fn target_block(v: &Value) -> Option<(&'static dyn Target, &Value)> {
    TARGETS.iter().find_map(|t| {
        v.get(t.cloud().as_str())
            .elements()
            .first()
            .map(|b| (*t, b))
    })
}

/// What a target block writes of its cluster: the scope if it names one, the coordinates and the
/// cluster's name; None while any of them is not known yet.
fn block_parts(t: &dyn Target, block: &Value) -> Option<(Option<String>, Vec<String>, String)> {
    let text = |attr: &str| block.get(attr).as_str().map(str::to_string);
    let coordinates: Option<Vec<String>> = t.coordinates().iter().map(|c| text(c.attr)).collect();
    let scope = block.get(t.scope().attr);
    scope.is_known().then_some(())?;
    Some((text(t.scope().attr), coordinates?, text(t.cluster_attr())?))
}

/// The location a target's block names, the provider's default scope standing in for a block
/// that names none.
pub fn locate_block(t: &'static dyn Target, block: &Value, settings: &CloudSettings) -> Located {
    let Some((scope, coordinates, cluster)) = block_parts(t, block) else {
        return Located::Unknown;
    };
    match t.scope_or_default(scope, settings.of(t.cloud()).as_ref()) {
        Some(scope) => Located::At(t.locate(scope, coordinates, cluster)),
        None => Located::MissingScope(t),
    }
}

/// The location the target block of `v` (a configuration, plan or state) names.
pub fn locate(v: &Value, settings: &CloudSettings) -> Located {
    target_block(v).map_or(Located::Unknown, |(t, block)| {
        locate_block(t, block, settings)
    })
}

/// A location, or None: with an error on the scope attribute (under `prefix`) when the block
/// names no scope and the provider has no default, quietly while the block's coordinates are
/// unknown. `code` writes the names as code, as the queries' details do.
pub fn or_report(
    located: Located,
    prefix: &AttrPath,
    code: bool,
    diags: &mut Diagnostics,
) -> Option<Location> {
    match located {
        Located::At(loc) => Some(loc),
        Located::MissingScope(t) => {
            let (block, scope) = (t.cloud().as_str(), t.scope());
            let q = if code { "`" } else { "" };
            diags.push(
                Diagnostic::error(
                    format!("Missing {}", scope.what),
                    format!(
                        "Set {q}{block}.{}{q}, the provider's {q}{}{q}, or {}.",
                        scope.attr, scope.provider_attr, scope.env
                    ),
                )
                .at(prefix.with_attr(block).with_index(0).with_attr(scope.attr)),
            );
            None
        }
        Located::Unknown => None,
    }
}

/// Whether `v` holds one target block whose cluster coordinates are all known (its scope may be
/// left to the provider's default).
pub fn names_cluster(v: &Value) -> bool {
    target_block(v).is_some_and(|(t, block)| block_parts(t, block).is_some())
}

/// The pool a cloud ID names, whichever target's form it has.
pub fn parse_import_id(id: &str, settings: &CloudSettings) -> Option<(Location, String)> {
    TARGETS
        .iter()
        .find_map(|t| t.parse_import_id(id, settings.default_scope(t.cloud())))
}

/// The three forms of a pool's import ID, for the diagnostic on one that fits none.
pub fn import_id_forms() -> String {
    TARGETS
        .iter()
        .map(|t| t.import_id_form())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The scope attributes of every target: each block's scope defaults from the provider.
pub fn scopes() -> impl Iterator<Item = (&'static dyn Target, &'static Scope)> {
    TARGETS.iter().map(|t| (*t, t.scope()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cloud_has_one_target_and_its_block_name() {
        let names: Vec<&str> = TARGETS.iter().map(|t| t.cloud().as_str()).collect();
        assert_eq!(names, BLOCK_NAMES);
        for cloud in Cloud::ALL {
            assert_eq!(target(cloud).cloud(), cloud);
        }
        assert_eq!(TARGETS.len(), Cloud::ALL.len());
    }
}
