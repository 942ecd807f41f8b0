//! The deliveries: how the configs reach the device plugin. Each is a file of this folder whose
//! settings implement [`Lifecycle`] (`life`), listed once in [`deliveries!`] below; adding one
//! is that file, its `mod` line and its line in the list. Everything that needs "every delivery"
//! (the schema's blocks and the `delivery` attribute, reading a configuration's blocks, the check
//! that the chosen delivery has its block and no other block is set) goes through [`kinds`];
//! everything that needs "this delivery" calls [`Delivery::life`]. What the deliveries share
//! lives in modules of its own: `takeover` (the private state's records), `values` (the device
//! plugin's values inside a chart's), `release` (a Helm release upgraded with them), `gitops` (an
//! object a GitOps controller renders from) and `operator` (what the GPU operator reads).

mod argocd;
mod cluster_policy;
mod flux;
mod found;
mod gitops;
mod helm;
mod life;
mod nvidia_device_plugin;
mod operator;
mod release;
mod takeover;
mod values;

use std::sync::LazyLock;

use tfplugin::object::{DecodeError, Decoded, FromValue, Parts, SingleBlock, ToValue};
use tfplugin::schema::Block;
use tfplugin::{AttrPath, Diagnostic, Diagnostics, Value};

pub(crate) use found::Found;
pub(super) use life::{At, Lifecycle, Placement, Reload, Writing};
pub(super) use operator::refuse_dra_stack;
pub(super) use takeover::Takeover;
pub use values::DEFAULT_VALUES_PATH;
#[cfg(test)]
pub(super) use {argocd::ArgoArgs, flux::FluxArgs, helm::HelmArgs};

use crate::cluster::{Cluster, KubeError};
use life::About;

/// Declares [`Delivery`], one variant per line (the variant, then the settings type that
/// implements [`Lifecycle`]), with its dispatch and [`kinds`]. The first line is the default.
macro_rules! deliveries {
    ($($variant:ident($settings:ty)),+ $(,)?) => {
        /// A delivery, with its settings.
        #[derive(Clone, Debug, PartialEq)]
        pub(super) enum Delivery {
            $($variant($settings)),+
        }

        impl Delivery {
            /// Its life, whichever delivery it is.
            pub(super) fn life(&self) -> &dyn Lifecycle {
                match self {
                    $(Delivery::$variant(s) => s),+
                }
            }

            fn name(&self) -> &'static str {
                match self {
                    $(Delivery::$variant(_) => <$settings>::about().name),+
                }
            }

            /// Its block as a state holds it (a list of one).
            fn block_value(&self) -> Value {
                match self {
                    $(Delivery::$variant(s) => SingleBlock(Some(s.clone())).to_value()),+
                }
            }
        }

        static KINDS: LazyLock<Vec<Kind>> = LazyLock::new(|| {
            vec![$(Kind {
                about: <$settings>::about(),
                read: |parts, config| {
                    let name = <$settings>::about().name;
                    let block = parts.field::<SingleBlock<$settings>>(config, name)?;
                    Some(block.0.map(Delivery::$variant))
                },
                bare: || Delivery::$variant(<$settings>::default()),
                shape: <$settings as tfplugin::shape::Shaped>::shape,
                placement: <$settings>::placement,
                imported: |namespace, object| {
                    Delivery::$variant(<$settings>::imported(namespace, object))
                },
                discover: |c| <$settings>::discover(c),
            }),+]
        });
    };
}

deliveries! {
    ClusterPolicy(cluster_policy::ClusterPolicy),
    Helm(helm::HelmArgs),
    ArgoCd(argocd::ArgoArgs),
    Flux(flux::FluxArgs),
    NvidiaDevicePlugin(nvidia_device_plugin::NvidiaDevicePluginArgs),
}

/// What the registry knows of a delivery before there is a value of it.
struct Kind {
    about: About,
    /// Its block from a configuration's object, read with the object's other parts: None when
    /// it does not read, Some(None) when it is not set.
    read: fn(&mut Parts, &Value) -> Option<Option<Delivery>>,
    /// The delivery without settings (for one without a block).
    bare: fn() -> Delivery,
    placement: fn(&Value) -> Result<Placement, DecodeError>,
    /// Its settings as an import ID names them (see [`Lifecycle::imported`]).
    imported: fn(&str, &str) -> Delivery,
    /// What its block's model reads, for the test that holds it to the schema.
    shape: fn() -> tfplugin::shape::Shape,
    /// What it writes on a cluster (see [`Lifecycle::discover`]).
    discover: Discover,
}

/// [`Lifecycle::discover`] of one delivery.
type Discover = for<'a> fn(
    &'a Cluster,
) -> std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Vec<Found>, KubeError>> + Send + 'a>,
>;

/// Every config the cluster's plugins read, in `c`, as the deliveries find them (one per
/// ConfigMap: see `found`); None after an error about the cluster at large.
pub(crate) async fn found(c: &Cluster, diags: &mut Diagnostics) -> Option<Vec<Found>> {
    let mut all = Vec::new();
    for k in kinds() {
        let got = (k.discover)(c).await;
        all.extend(found::kept(k.about.name, got, diags).ok()?);
    }
    Some(found::one_per_configmap(all))
}

/// Every delivery, in the order of the list: the schema's, the checks'.
fn kinds() -> &'static [Kind] {
    &KINDS
}

/// The delivery a configuration gets without `delivery`.
pub(super) fn default_name() -> &'static str {
    kinds()[0].about.name
}

/// The values of `delivery`.
pub(super) fn names() -> &'static [&'static str] {
    static NAMES: LazyLock<Vec<&'static str>> =
        LazyLock::new(|| kinds().iter().map(|k| k.about.name).collect());
    &NAMES
}

/// The `delivery` attribute's list of deliveries: "`cluster_policy` (...), `helm` (...) or
/// `flux` (...)".
pub(super) fn summaries() -> String {
    let all: Vec<&str> = kinds().iter().map(|k| k.about.summary).collect();
    match all.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// The blocks of the deliveries that have one, by name, for the schema.
pub(super) fn blocks() -> impl Iterator<Item = (&'static str, Block)> {
    kinds()
        .iter()
        .filter_map(|k| Some((k.about.name, (k.about.block.as_ref()?.schema)())))
}

/// What an import ID of the form `<name>:<namespace>/<object>/<configmap>` sets: the block of
/// delivery `name` naming the object. None when `name` is not a delivery with a block.
pub(super) fn imported(name: &str, namespace: &str, object: &str) -> Option<Blocks> {
    let k = kinds()
        .iter()
        .find(|k| k.about.name == name && k.about.block.is_some())?;
    Some(Blocks(vec![(k.imported)(namespace, object)]))
}

/// The forms an import ID takes, one per delivery with a block, for the diagnostic and the
/// docs: "`helm:<namespace>/<release>/<configmap>`".
pub(super) fn import_forms() -> Vec<String> {
    kinds()
        .iter()
        .filter_map(|k| {
            Some(format!(
                "`{}:{}`",
                k.about.name,
                k.about.block.as_ref()?.import_id
            ))
        })
        .collect()
}

/// The kind `name` picks: unset, or a name this provider does not know (which validation
/// refuses), is the default.
fn kind(name: Option<&str>) -> &'static Kind {
    let name = name.unwrap_or(default_name());
    kinds()
        .iter()
        .find(|k| k.about.name == name)
        .unwrap_or(&kinds()[0])
}

/// The delivery blocks a configuration sets, each read as its delivery's settings.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Blocks(Vec<Delivery>);

impl Blocks {
    pub(super) fn attribute_names() -> Vec<&'static str> {
        kinds()
            .iter()
            .filter(|k| k.about.block.is_some())
            .map(|k| k.about.name)
            .collect()
    }

    fn get(&self, name: &str) -> Option<&Delivery> {
        self.0.iter().find(|d| d.name() == name)
    }
}

/// One block of at most one per delivery that has one, each read by its settings' model.
impl tfplugin::shape::Shaped for Blocks {
    fn shape() -> tfplugin::shape::Shape {
        tfplugin::shape::blocks(
            kinds()
                .iter()
                .filter(|k| k.about.block.is_some())
                .map(|k| (k.about.name, (k.shape)()))
                .collect(),
        )
    }
}

impl FromValue for Blocks {
    const EXPECTED: &'static str = "an object";
    fn from_value(v: &Value) -> Result<Self, DecodeError> {
        let mut parts = Parts::of_object(v)?;
        let read: Vec<Option<Option<Delivery>>> = kinds()
            .iter()
            .filter(|k| k.about.block.is_some())
            .map(|k| (k.read)(&mut parts, v))
            .collect();
        parts.done()?;
        Ok(Blocks(read.into_iter().flatten().flatten().collect()))
    }
}

impl ToValue for Blocks {
    fn to_value(&self) -> Value {
        let blocks = Blocks::attribute_names().into_iter().map(|name| {
            let value = self
                .get(name)
                .map_or(Value::List(vec![]), Delivery::block_value);
            (name, value)
        });
        Value::object(blocks)
    }
}

impl Delivery {
    /// The delivery `name` picks, with its settings from `blocks`; None when its block is not
    /// set.
    pub(super) fn chosen(name: Option<&str>, blocks: &Blocks) -> Option<Delivery> {
        let kind = kind(name);
        match kind.about.block {
            None => Some((kind.bare)()),
            Some(_) => blocks.get(kind.about.name).cloned(),
        }
    }

    /// The import ID of the resource that delivers the ConfigMap `namespace/name` this way:
    /// the ConfigMap's alone for a delivery without a block, else prefixed and naming the object
    /// (the inverse of [`imported`]).
    pub(super) fn import_id(&self, namespace: &str, name: &str) -> String {
        match self.life().import_object() {
            Some((ns, object)) => format!("{}:{ns}/{object}/{name}", self.name()),
            None => format!("{namespace}/{name}"),
        }
    }

    /// The same, checked: an error names a block set for a delivery that is not chosen, or the
    /// block the chosen one needs and misses.
    pub(super) fn select(
        name: Option<&str>,
        blocks: &Blocks,
        diags: &mut Diagnostics,
    ) -> Option<Delivery> {
        let chosen = name.unwrap_or(default_name());
        for k in kinds() {
            let Some(block) = &k.about.block else {
                continue;
            };
            let set = blocks.get(k.about.name).is_some();
            if set && chosen != k.about.name {
                diags.push(unused_block(k.about.name, chosen));
                return None;
            }
            if !set && chosen == k.about.name {
                diags.push(
                    Diagnostic::error(
                        format!("Missing {chosen} block"),
                        format!(
                            "delivery is \"{chosen}\" but there is no `{chosen}` block naming {}; \
                            add `{}`.",
                            block.names, block.example
                        ),
                    )
                    .at(AttrPath::attr("delivery")),
                );
                return None;
            }
        }
        Delivery::chosen(name, blocks)
    }
}

tfplugin::object! {
    /// A configuration's `delivery`, read alone.
    struct Chosen {
        delivery: Option<String>,
    }
}

/// Where the plan puts the ConfigMap, from a configuration read as little as it takes: the
/// namespace default follows the delivery even while other arguments (a node pool's config
/// YAML) are not known yet. The default while the delivery's part is unknown.
pub(super) fn placement(config: &Value, diags: &mut Diagnostics) -> Placement {
    let Some(Chosen { delivery }) = Chosen::from_value(config).or_report_mismatch(diags) else {
        return Placement::Default;
    };
    (kind(delivery.as_deref()).placement)(config)
        .or_report_mismatch(diags)
        .unwrap_or(Placement::Default)
}

/// A delivery block that the chosen delivery does not use.
fn unused_block(block: &str, delivery: &str) -> Diagnostic {
    Diagnostic::error(
        format!("Unused {block} block"),
        format!(
            "A `{block}` block is set but delivery is \"{delivery}\"; set delivery = \
            \"{block}\" or remove the block."
        ),
    )
    .at(AttrPath::attr(block))
}
