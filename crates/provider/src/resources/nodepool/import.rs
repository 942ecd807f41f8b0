//! How a pool is named from outside: the clouds' own IDs (`terraform import`, `import { id }`)
//! and the resource identity (terraform 1.12 and later: `import { identity }`, list results),
//! which spells the same coordinates out as attributes. Both are the targets' own (each
//! descriptor's scope, coordinates and ID forms); this module only puts them side by side.

use std::sync::LazyLock;

use crate::cloud::registry::{self, TARGETS};
use crate::cloud::{Location, Target};
use crate::state::Settings;
use tfplugin::api::{IdentityAttribute, IdentitySchema};
use tfplugin::{Diagnostic, Diagnostics, Type, Value};

/// The attributes of every target beside `cloud`, `name` and `cluster`, in identity order.
fn target_attributes(t: &dyn Target) -> Vec<(&'static str, &'static str)> {
    let scope = t.scope();
    std::iter::once((scope.attr, scope.identity_description))
        .chain(
            t.coordinates()
                .iter()
                .map(|c| (c.attr, c.identity_description)),
        )
        .collect()
}

/// The values of `cloud`, in a sentence: "`aks`, `gke` or `eks`".
fn cloud_names() -> String {
    let names = registry::BLOCK_NAMES.map(|n| format!("`{n}`"));
    let (last, rest) = names.split_last().expect("targets");
    format!("{} or {last}", rest.join(", "))
}

/// The identity's attributes: the cloud, the cluster's coordinates there, and the pool's name.
/// One flat object for every target, the coordinates of the others null, so that one module
/// can import pools on any of them.
pub fn identity_schema() -> IdentitySchema {
    let attr = |name, required, description| IdentityAttribute {
        name,
        ty: Type::String,
        required_for_import: required,
        optional_for_import: !required,
        description,
    };
    static CLOUDS: LazyLock<String> = LazyLock::new(|| format!("{}.", cloud_names()));
    let mut attributes = vec![
        attr("cloud", true, CLOUDS.as_str()),
        attr("name", true, "Name of the pool (the node group on EKS)."),
        attr("cluster", true, "Name of the cluster."),
    ];
    for t in TARGETS {
        for (name, description) in target_attributes(t) {
            attributes.push(attr(name, false, description));
        }
    }
    IdentitySchema {
        version: 0,
        attributes,
    }
}

/// The identity of the pool `name` at `loc`, every attribute of the other targets null.
pub fn identity(loc: &Location, name: &str) -> Value {
    let t = loc.target();
    let (scope, coordinates, cluster) = t.parts(loc).unwrap_or_default();
    let mut attrs = vec![
        ("cloud", Value::from(t.cloud().as_str())),
        ("name", name.into()),
        ("cluster", cluster.as_str().into()),
    ];
    for other in TARGETS {
        for (attr, _) in target_attributes(other) {
            attrs.push((attr, Value::Null));
        }
    }
    let mut v = Value::object(attrs);
    let values = std::iter::once(scope).chain(coordinates);
    for ((attr, _), val) in target_attributes(t).into_iter().zip(values) {
        *v.get_mut(attr).expect("declared") = val.as_str().into();
    }
    v
}

/// Where an identity from an `import` block points, with the provider's defaults for what it
/// leaves out; what it lacks or mixes up is an error naming the attribute to set.
pub fn parse_identity(
    identity: &Value,
    settings: &Settings,
    diags: &mut Diagnostics,
) -> Option<(Location, String)> {
    let get = |k: &str| {
        identity
            .get(k)
            .as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let mut fail = |detail: String| {
        diags.push(Diagnostic::error("Invalid import identity", detail));
        None
    };
    let (Some(cloud), Some(name), Some(cluster)) = (get("cloud"), get("name"), get("cluster"))
    else {
        return fail(
            "The identity of a fracgpu_nodepool needs `cloud`, `cluster` and `name`.".into(),
        );
    };
    let Some(t) = TARGETS.iter().find(|t| t.cloud().as_str() == cloud) else {
        return fail(format!("`cloud` is {cloud:?}; use {}.", cloud_names()));
    };
    let others = TARGETS
        .iter()
        .filter(|o| o.cloud() != t.cloud())
        .flat_map(|o| target_attributes(*o));
    if let Some((k, _)) = others.into_iter().find(|(k, _)| get(k).is_some()) {
        return fail(format!(
            "`{k}` does not belong to a pool on {}; remove it.",
            t.title()
        ));
    }
    let mut coordinates = Vec::new();
    for c in t.coordinates() {
        let Some(v) = get(c.attr) else {
            return fail(format!(
                "A pool on {} needs `{}` ({}).",
                t.title(),
                c.attr,
                c.noun
            ));
        };
        coordinates.push(v);
    }
    let scope = t.scope();
    let Some(scope_value) =
        t.scope_or_default(get(scope.attr), settings.cloud.of(t.cloud()).as_ref())
    else {
        return fail(format!(
            "A pool on {} needs `{}` ({}), or the provider's `{}` or {}.",
            t.title(),
            scope.attr,
            scope.noun,
            scope.provider_attr,
            scope.env
        ));
    };
    Some((t.locate(scope_value, coordinates, cluster), name))
}

/// Parses the clouds' own IDs (see the import diagnostic for their forms).
pub fn parse_import_id(id: &str, settings: &Settings) -> Option<(Location, String)> {
    registry::parse_import_id(id, &settings.cloud)
}
