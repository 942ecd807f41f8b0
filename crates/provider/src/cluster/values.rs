//! Helm values trees, as helm reads them: a value at a dotted path (`devicePlugin.config`) read,
//! set or removed, helm's coalescing of one tree over another, and a tree rendered as YAML for
//! people. Shared by everything that holds the operator chart's values: a release (`helm`), an
//! Argo CD Application or a Flux HelmRelease (`gitops`), and what the chart makes of them
//! (`chart`); none of them rides on another's helpers.

use serde_json::Value;

/// Helm's coalescing: maps merge key by key, anything else replaces, null deletes.
pub fn merge(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                if v.is_null() {
                    b.remove(k);
                } else if let Some(slot) = b.get_mut(k) {
                    merge(slot, v);
                } else {
                    b.insert(k.clone(), v.clone());
                }
            }
        }
        (b, o) => *b = o.clone(),
    }
}

/// The value at a dotted path of a values tree (`a.b.c`), if there is one.
pub fn value_at<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .filter(|s| !s.is_empty())
        .try_fold(v, |acc, k| acc.get(k))
}

/// Sets (Some) or removes (None) the value at a dotted path, making the maps on the way; a
/// removal also drops the maps it leaves empty, so a user's values read as they were.
pub fn set_value_at(v: &mut Value, path: &str, new: Option<Value>) {
    let keys: Vec<&str> = path.split('.').filter(|s| !s.is_empty()).collect();
    let Some((last, parents)) = keys.split_last() else {
        return;
    };
    match new {
        Some(new) => {
            let mut at = v;
            for k in parents {
                if !at.is_object() {
                    *at = Value::Object(Default::default());
                }
                at = at
                    .as_object_mut()
                    .map(|m| m.entry(k.to_string()).or_insert(Value::Null))
                    .expect("an object");
            }
            if !at.is_object() {
                *at = Value::Object(Default::default());
            }
            if let Some(m) = at.as_object_mut() {
                m.insert(last.to_string(), new);
            }
        }
        None => {
            fn remove(at: &mut Value, keys: &[&str]) {
                let Some(m) = at.as_object_mut() else { return };
                match keys {
                    [] => {}
                    [k] => {
                        m.remove(*k);
                    }
                    [k, rest @ ..] => {
                        if let Some(child) = m.get_mut(*k) {
                            remove(child, rest);
                            if child.as_object().is_some_and(|c| c.is_empty()) {
                                m.remove(*k);
                            }
                        }
                    }
                }
            }
            remove(v, &keys);
        }
    }
}

/// Renders values as YAML for people (the `helm_values` attribute): multi-line strings as
/// literal blocks, everything else as plain or JSON-quoted scalars (valid YAML).
pub fn to_yaml(v: &Value) -> String {
    let mut out = String::new();
    write_yaml(v, 0, &mut out);
    out
}

fn yaml_key(k: &str) -> String {
    let plain = k.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
        && !["true", "false", "yes", "no", "on", "off", "null", "y", "n"]
            .contains(&k.to_ascii_lowercase().as_str());
    if plain {
        k.to_string()
    } else {
        Value::from(k).to_string()
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => Value::from(s.as_str()).to_string(),
        Value::Null => "null".into(),
        other => other.to_string(),
    }
}

fn write_yaml(v: &Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    let Value::Object(m) = v else {
        out.push_str(&format!("{pad}{}\n", scalar(v)));
        return;
    };
    for (k, val) in m {
        let key = yaml_key(k);
        match val {
            Value::Object(inner) if !inner.is_empty() => {
                out.push_str(&format!("{pad}{key}:\n"));
                write_yaml(val, indent + 2, out);
            }
            Value::String(s)
                if s.contains('\n')
                    && !s.starts_with(' ')
                    && !s.contains("\n\n")
                    && !s.contains('\r')
                    && !s.lines().any(|l| l.ends_with(' ')) =>
            {
                let chomp = if s.ends_with('\n') { "" } else { "-" };
                out.push_str(&format!("{pad}{key}: |{chomp}\n"));
                for line in s.lines() {
                    out.push_str(&format!("{pad}  {line}\n"));
                }
            }
            Value::Object(_) => out.push_str(&format!("{pad}{key}: {{}}\n")),
            other => out.push_str(&format!("{pad}{key}: {}\n", scalar(other))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_render_as_yaml_literal_blocks() {
        let v = json!({"devicePlugin": {"config": {"create": true, "name": "cm",
            "data": {"all": "", "ts": "version: v1\nsharing: {}\n", "10": "x"}}}});
        let y = to_yaml(&v);
        assert!(y.contains("    data:\n      \"10\": \"x\"\n      all: \"\"\n      ts: |\n        version: v1\n"), "{y}");
        let back: Value = serde_saphyr::from_str(&y).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn values_are_set_and_removed_by_dotted_path() {
        let mut v = json!({"keep": 1, "op": {"devicePlugin": {"config": {"a": 1}}, "other": 2}});
        set_value_at(&mut v, "op.devicePlugin.config", Some(json!({"b": 2})));
        set_value_at(&mut v, "op.mig.strategy", Some(json!("mixed")));
        assert_eq!(
            v,
            json!({"keep": 1, "op": {"devicePlugin": {"config": {"b": 2}}, "other": 2, "mig": {"strategy": "mixed"}}})
        );
        assert_eq!(value_at(&v, "op.mig.strategy"), Some(&json!("mixed")));
        // Removing prunes the maps it empties, and only those.
        set_value_at(&mut v, "op.devicePlugin.config", None);
        set_value_at(&mut v, "op.mig.strategy", None);
        assert_eq!(v, json!({"keep": 1, "op": {"other": 2}}));
        set_value_at(&mut v, "absent.path", None);
        assert_eq!(v, json!({"keep": 1, "op": {"other": 2}}));
        // A scalar on the way is replaced by a map.
        let mut s = json!({"a": "x"});
        set_value_at(&mut s, "a.b", Some(json!(1)));
        assert_eq!(s, json!({"a": {"b": 1}}));
    }

    #[test]
    fn merge_deletes_nulls_and_merges_maps() {
        let mut base = json!({"a": {"b": 1, "c": 2}, "d": [1]});
        merge(&mut base, &json!({"a": {"c": null, "e": 3}, "d": [2]}));
        assert_eq!(base, json!({"a": {"b": 1, "e": 3}, "d": [2]}));
    }
}
