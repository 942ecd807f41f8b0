//! The device plugin's values inside a chart's Helm values, shared by the deliveries that write
//! values (`helm`, `argocd`, `flux`): what this resource owns there ([`Desired::helm_owned`]),
//! the record of what was there before and the changes that write it or give it back
//! ([`ValuesTaken`]), how the chart reads them back ([`ChartConfig`]), and the names its
//! templates do not quote. Reading and writing a dotted path of a values tree is
//! `cluster::values`'.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use tfplugin::schema::Attribute;
use tfplugin::validators::Matches;
use tfplugin::{AttrPath, Diagnostic, Diagnostics};

use super::super::desired::Desired;
use super::takeover::Record;
use crate::cluster::{self as k, values};

/// Where the operator chart keeps the device plugin's values, unless a block says otherwise.
pub const DEFAULT_VALUES_PATH: &str = "devicePlugin";
const VALUES_PATH_RE: &str = r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$";
const VALUES_PATH_HINT: &str =
    "dotted value keys such as devicePlugin or gpu-operator.devicePlugin";

/// A block's `values_path` attribute, checked for dotted keys.
pub(super) fn values_path_attribute(description: &str) -> Attribute {
    Attribute::string("values_path")
        .optional()
        .describe(description)
        .validate(Matches::new(VALUES_PATH_RE, VALUES_PATH_HINT))
}

impl Desired {
    /// The operator chart's values this resource sets, as (dotted path, value): the whole
    /// `config` under `values_path`, and the MIG strategy beside it when one is set.
    pub(crate) fn helm_owned(&self, values_path: &str) -> Vec<(String, Value)> {
        let data: serde_json::Map<String, Value> = self
            .data()
            .into_iter()
            .map(|(k, v)| (k, v.into()))
            .collect();
        let mut config = json!({"create": true, "name": self.name, "data": data});
        if let Some(d) = &self.default {
            config["default"] = d.clone().into();
        }
        let mut owned = vec![(format!("{values_path}.config"), config)];
        if let Some(m) = &self.mig_strategy {
            owned.push((mig_strategy_path(values_path), json!(m)));
        }
        owned
    }

    /// The same as one values tree, for the `helm_values` attribute.
    pub(crate) fn helm_values(&self, values_path: &str) -> Value {
        let mut root = json!({});
        for (path, v) in self.helm_owned(values_path) {
            values::set_value_at(&mut root, &path, Some(v));
        }
        root
    }
}

/// `mig.strategy` beside the `devicePlugin` values (`x.devicePlugin` -> `x.mig.strategy`).
pub(super) fn mig_strategy_path(values_path: &str) -> String {
    match values_path.rsplit_once('.') {
        Some((parent, _)) => format!("{parent}.mig.strategy"),
        None => "mig.strategy".to_string(),
    }
}

/// What a values delivery took over: dotted value path -> the value the user had there before
/// the first write (None: the user had none, so the chart's default comes back). Kept under
/// `helm` whichever delivery wrote it (the key of the days when only the `helm` delivery kept one).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub(super) struct ValuesTaken(BTreeMap<String, Option<Value>>);

impl Record for ValuesTaken {
    const KEY: &'static str = "helm";
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The changes one write makes to a values tree, in order, by dotted path: set (Some) or
/// removed (None).
pub(super) struct Changes {
    pub set: Vec<(String, Option<Value>)>,
    /// Paths this resource set before and sets no more, back to what the user had there: to
    /// drop from the record once the write is done.
    pub released: Vec<String>,
}

impl ValuesTaken {
    /// The changes that write `owned` over the user's values `before`. What the user had at each
    /// owned path is recorded first, so that a write cut short still leaves the record for
    /// destroy: on a first write (a create) it is theirs; on a later one it was already ours
    /// (a config made before the provider kept this record).
    pub(super) fn changes(
        &mut self,
        owned: &[(String, Value)],
        before: &Value,
        first: bool,
    ) -> Changes {
        let mut set = Vec::new();
        for (path, v) in owned {
            self.0.entry(path.clone()).or_insert_with(|| {
                if first {
                    values::value_at(before, path).cloned()
                } else {
                    None
                }
            });
            set.push((path.clone(), Some(v.clone())));
        }
        let released: Vec<String> = self
            .0
            .iter()
            .filter(|(path, _)| !owned.iter().any(|(p, _)| p == *path))
            .map(|(path, prior)| {
                set.push((path.clone(), prior.clone()));
                path.clone()
            })
            .collect();
        Changes { set, released }
    }

    /// Once a write is done, its released paths are the user's again.
    pub(super) fn forget(&mut self, released: &[String]) {
        for path in released {
            self.0.remove(path);
        }
    }

    /// Destroy: every path this resource owns (`owned`) or recorded, back to what the user had
    /// there; removed where there is no record (an imported config), so the chart's defaults
    /// come back.
    pub(super) fn give_back(&self, owned: Vec<(String, Value)>) -> Vec<(String, Option<Value>)> {
        let mut paths: Vec<String> = owned.into_iter().map(|(p, _)| p).collect();
        paths.extend(self.0.keys().cloned());
        paths.sort();
        paths.dedup();
        paths
            .into_iter()
            .map(|p| {
                let prior = self.0.get(&p).cloned().flatten();
                (p, prior)
            })
            .collect()
    }
}

/// Applies changes to a values tree.
pub(super) fn apply(tree: &mut Value, changes: &[(String, Option<Value>)]) {
    for (path, v) in changes {
        values::set_value_at(tree, path, v.clone());
    }
}

// ---------------------------------------------------------------------------------------------
// Documents read back

/// The device plugin's `config` values of the operator chart (`<values_path>.config`), as the
/// values a GitOps object holds give them. Read as the chart's templates read them: a value of
/// another type (or values that are no map) is as good as unset, and so is an empty name.
#[derive(Debug, Default, PartialEq, serde::Deserialize)]
#[serde(default)]
pub(super) struct ChartConfig {
    #[serde(deserialize_with = "lenient")]
    create: Option<bool>,
    #[serde(deserialize_with = "lenient")]
    name: Option<String>,
    #[serde(deserialize_with = "lenient")]
    default: Option<String>,
    #[serde(deserialize_with = "lenient")]
    data: Option<BTreeMap<String, serde_json::Value>>,
}

/// A value of the type asked for, else none.
fn lenient<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    let v = <serde_json::Value as serde::Deserialize>::deserialize(d)?;
    Ok(serde_json::from_value(v).ok())
}

impl ChartConfig {
    pub(super) fn of(values: &serde_json::Value) -> ChartConfig {
        <ChartConfig as serde::Deserialize>::deserialize(values).unwrap_or_default()
    }

    /// Whether the chart makes the ConfigMap (only then does it point the operator at it).
    pub(super) fn created(&self) -> bool {
        self.create == Some(true)
    }

    pub(super) fn name(&self) -> Option<String> {
        self.name.clone().filter(|s| !s.is_empty())
    }

    pub(super) fn default_config(&self) -> Option<String> {
        self.default.clone().filter(|s| !s.is_empty())
    }

    /// The configs, by name; an entry that is no text is none.
    pub(super) fn data(&self) -> BTreeMap<String, String> {
        self.data
            .iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
            .collect()
    }
}

/// With a chart rendering the ClusterPolicy, `name` and `default_config` pass through a template
/// that does not quote them (see `cluster::chart`): one that YAML reads as anything but a string
/// is refused here, at plan time, rather than by the API server in the middle of `helm upgrade`.
/// Delivered as they are, not quoted for the template: a quote inside the value would become
/// part of the name the day the chart quotes it itself. The ConfigMap's keys are safe (the chart
/// writes them with `toYaml`), so config names need no check.
pub(super) fn names_stay_strings(d: &Desired, diags: &mut Diagnostics) -> bool {
    let mut ok = true;
    let checks = [
        ("name", Some(d.name.as_str()), "devicePlugin.config.name"),
        (
            "default_config",
            d.default.as_deref(),
            "devicePlugin.config.default",
        ),
    ];
    for (attr, value, key) in checks {
        let Some((v, kind)) = value.and_then(|v| Some((v, k::chart::unquoted_kind(v)?))) else {
            continue;
        };
        let effect = if kind == "null" {
            "so the ClusterPolicy gets no value there at all".to_string()
        } else {
            format!(
                "so the API server refuses the ClusterPolicy (\"{}: in body must be of type \
                    string\") in the middle of the upgrade",
                key.replace("devicePlugin", "spec.devicePlugin")
            )
        };
        diags.push(
            Diagnostic::error(
                "Name the chart would not keep a string",
                format!(
                    "{attr} is {v:?}: the GPU operator chart writes {key} into its \
                    ClusterPolicy without quotes (templates/clusterpolicy.yaml of gpu-operator \
                    v25.10.1), where YAML reads {v} as {kind}, {effect}. Choose a name YAML reads \
                    as a string, e.g. \"ts-{v}\", or use delivery = \"cluster_policy\", which \
                    writes the pointer itself."
                ),
            )
            .at(AttrPath::attr(attr)),
        );
        ok = false;
    }
    ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chart_values_read_as_the_chart_reads_them() {
        let c = ChartConfig::of(&serde_json::json!({
            "create": true,
            "name": "cfg",
            "default": "",
            "data": {"a": "text", "b": 3},
            "other": {"ignored": true},
        }));
        assert!(c.created());
        assert_eq!(c.name().as_deref(), Some("cfg"));
        assert_eq!(c.default_config(), None, "empty is unset");
        assert_eq!(
            c.data(),
            BTreeMap::from([("a".to_string(), "text".to_string())])
        );
        let odd = ChartConfig::of(&serde_json::json!({"create": "true", "name": 1, "data": []}));
        assert!(!odd.created());
        assert_eq!(odd.name(), None);
        assert!(odd.data().is_empty());
        assert_eq!(
            ChartConfig::of(&serde_json::json!("x")),
            ChartConfig::default()
        );
    }
}
