//! What the GPU operator's chart does with the values this provider hands it, learnt from the
//! chart itself (NVIDIA gpu-operator v25.10.1) and from how helm renders charts:
//! - Its ClusterPolicy template writes `devicePlugin.config.name` and `.default` without quotes
//!   (`templates/clusterpolicy.yaml`: `name: {{ .Values.devicePlugin.config.name }}`), and so does
//!   the ConfigMap template for the name. Helm parses the rendered text with sigs.k8s.io/yaml, a
//!   fork of go-yaml v2 (YAML 1.1 resolution, `resolve.go`): a value such as `10`, `on` or `0x1F`
//!   becomes a number or a boolean there, and the API server refuses the object ("in body must
//!   be of type string"); `null` or `~` silently becomes no value. [`unquoted_kind`] tells which.
//! - A wrapping chart renders a subchart only while the dependency's `condition` holds
//!   (helm's pkg/chartutil/dependencies.go: the first of the comma-separated paths that holds a
//!   boolean in the parent's values decides; none, and the dependency is enabled). The release
//!   stores the chart's `metadata.dependencies` with the disabled ones already left out (seen
//!   with helm 3.17 and 4.1), so [`disabled_subchart`] compares them with what the chart itself
//!   declares (`helm show chart`) to tell before an upgrade that a `values_path` names a
//!   subchart that renders nothing.

use serde_json::Value;

use super::helm::Release;
use super::values::value_at;

/// What YAML 1.1 (go-yaml v2) reads an unquoted plain scalar as, when not a string: "a
/// boolean", "an integer", "a number" or "null". Seen with helm 3.17 and 4.1 rendering the
/// chart and a v1.34 API server validating it: every form below is refused there, or dropped.
pub fn unquoted_kind(s: &str) -> Option<&'static str> {
    const BOOLS: &[&str] = &[
        "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "true", "True", "TRUE", "false",
        "False", "FALSE", "on", "On", "ON", "off", "Off", "OFF",
    ];
    if BOOLS.contains(&s) {
        return Some("a boolean");
    }
    if ["", "~", "null", "Null", "NULL"].contains(&s) {
        return Some("null");
    }
    let unsigned = s.strip_prefix(['+', '-']).unwrap_or(s);
    let digits = |t: &str, radix: u32| {
        !t.is_empty()
            && t.chars().any(|c| c.is_digit(radix))
            && t.chars().all(|c| c == '_' || c.is_digit(radix))
    };
    let integer = [("0x", 16), ("0o", 8), ("0b", 2)]
        .iter()
        .any(|(p, r)| unsigned.strip_prefix(p).is_some_and(|t| digits(t, *r)))
        || digits(unsigned, 10);
    if integer {
        return Some("an integer");
    }
    // Floats: digits with a point and/or an exponent (`1.5`, `.5`, `1e3`, `1.0E-2`).
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(i) => (&unsigned[..i], Some(&unsigned[i + 1..])),
        None => (unsigned, None),
    };
    let exponent_ok = exponent.is_none_or(|e| digits(e.strip_prefix(['+', '-']).unwrap_or(e), 10));
    let mantissa_ok = match mantissa.split_once('.') {
        Some((a, b)) => {
            (a.is_empty() || digits(a, 10))
                && (b.is_empty() || digits(b, 10))
                && (!a.is_empty() || !b.is_empty())
        }
        None => exponent.is_some() && digits(mantissa, 10),
    };
    if mantissa_ok && exponent_ok {
        return Some("a number");
    }
    if [".inf", ".Inf", ".INF", ".nan", ".NaN", ".NAN"].contains(&unsigned) {
        return Some("a number");
    }
    None
}

/// A subchart the release's chart declares and does not render: (alias or name, the condition
/// path that is false).
#[derive(Clone, Debug, PartialEq)]
pub struct Disabled {
    pub subchart: String,
    pub condition: String,
    /// The dependencies that do render, by alias or name.
    pub enabled: Vec<String>,
}

/// The key a dependency is known by in its parent's values: its alias, else its name.
fn dependency_key(d: &Value) -> Option<String> {
    let alias = d
        .get("alias")
        .and_then(Value::as_str)
        .filter(|a| !a.is_empty());
    alias
        .or_else(|| d.get("name").and_then(Value::as_str))
        .map(str::to_string)
}

/// Whether the first key of `values_path` names a dependency the chart declares (`declared`:
/// the `dependencies` of its Chart.yaml) and the release does not render, because its condition
/// is false in the values the release runs with; None when it renders or is no dependency.
pub fn disabled_subchart(
    release: &Release,
    declared: &Value,
    values_path: &str,
) -> Option<Disabled> {
    let first = values_path.split('.').next()?;
    let rendered: Vec<String> = release
        .chart_dependencies
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(dependency_key)
        .collect();
    if rendered.iter().any(|r| r == first) {
        return None;
    }
    let dep = declared
        .as_array()?
        .iter()
        .find(|d| dependency_key(d).as_deref() == Some(first))?;
    let values = release.effective_values();
    let condition = false_condition(dep, &values).unwrap_or_else(|| {
        // Left out for another reason (tags): name what the chart says.
        dep.get("condition")
            .and_then(Value::as_str)
            .unwrap_or("its tags")
            .to_string()
    });
    Some(Disabled {
        subchart: first.to_string(),
        condition,
        enabled: rendered,
    })
}

/// The condition path that switches a dependency off, None when it renders.
fn false_condition(dep: &Value, values: &Value) -> Option<String> {
    let condition = dep.get("condition").and_then(Value::as_str)?;
    for path in condition
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        match value_at(values, path) {
            Some(Value::Bool(true)) => return None,
            Some(Value::Bool(false)) => return Some(path.to_string()),
            // Helm looks at the next path when one holds no boolean.
            _ => continue,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scalars_yaml_reads_as_other_than_strings() {
        // Each seen refused (or dropped) by a real API server after helm rendered it.
        for (s, kind) in [
            ("yes", "a boolean"),
            ("on", "a boolean"),
            ("N", "a boolean"),
            ("TRUE", "a boolean"),
            ("10", "an integer"),
            ("0x1F", "an integer"),
            ("0o17", "an integer"),
            ("017", "an integer"),
            ("0b101", "an integer"),
            ("1_000", "an integer"),
            ("+1", "an integer"),
            ("1e3", "a number"),
            (".5", "a number"),
            ("1.0", "a number"),
            ("null", "null"),
            ("~", "null"),
        ] {
            assert_eq!(unquoted_kind(s), Some(kind), "{s}");
        }
        // Seen to stay strings.
        for s in [
            "ts-10",
            "2001-12-14",
            "1:20",
            "time-sliced-10",
            "a100",
            "10g",
            "0x",
            "1.2.3",
            "e3",
            "yess",
            "mig-1g.5gb",
        ] {
            assert_eq!(unquoted_kind(s), None, "{s}");
        }
    }

    fn release(deps: Value, values: Value) -> Release {
        Release {
            name: "r".into(),
            namespace: "ns".into(),
            revision: 1,
            status: "deployed".into(),
            chart: "wrapper".into(),
            chart_version: "1".into(),
            config: values,
            chart_values: json!({"clusterType": {"azureAks": false, "awsEks": false}}),
            chart_dependencies: deps,
            manifest: String::new(),
        }
    }

    #[test]
    fn a_subchart_whose_condition_is_false_is_found() {
        let declared = json!([
            {"name": "gpu-operator", "alias": "azure-aks-gpu-operator", "condition": "clusterType.azureAks"},
            {"name": "gpu-operator", "alias": "aws-eks-gpu-operator", "condition": "missing.path, clusterType.awsEks"},
            {"name": "other"},
        ]);
        // What helm 3 and 4 store: the enabled ones, named by their alias.
        let stored = json!([
            {"name": "azure-aks-gpu-operator", "alias": "azure-aks-gpu-operator", "condition": "clusterType.azureAks", "enabled": true},
            {"name": "other", "enabled": true},
        ]);
        let r = release(stored, json!({"clusterType": {"azureAks": true}}));
        let off = |path| disabled_subchart(&r, &declared, path);
        assert_eq!(off("azure-aks-gpu-operator.devicePlugin"), None);
        assert_eq!(
            off("aws-eks-gpu-operator.devicePlugin"),
            Some(Disabled {
                subchart: "aws-eks-gpu-operator".into(),
                condition: "clusterType.awsEks".into(),
                enabled: vec!["azure-aks-gpu-operator".into(), "other".into()],
            })
        );
        assert_eq!(off("other.devicePlugin"), None);
        assert_eq!(off("devicePlugin"), None, "the chart's own values");
    }
}
