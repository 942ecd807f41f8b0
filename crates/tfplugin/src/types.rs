//! Terraform's type system as it travels on the wire: the JSON type notation of cty
//! (`"string"`, `["list","number"]`, `["object",{"a":"bool"}]`, ...).

use std::collections::BTreeMap;
use std::fmt;

/// A cty type. `Dynamic` is the pseudo-type that accepts any value and carries the concrete
/// type alongside the value on the wire.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    /// `true` or `false`.
    Bool,
    /// An arbitrary-precision number.
    Number,
    /// Unicode text.
    String,
    /// Any value, its type travelling with it.
    Dynamic,
    /// Ordered elements of one type.
    List(Box<Type>),
    /// Unordered, distinct elements of one type.
    Set(Box<Type>),
    /// Values of one type by string key.
    Map(Box<Type>),
    /// Named attributes, each of its own type.
    Object(BTreeMap<String, Type>),
    /// Ordered elements, each of its own type.
    Tuple(Vec<Type>),
}

/// Nesting deeper than this is refused when parsing a type from untrusted bytes.
const MAX_TYPE_DEPTH: usize = 64;

impl Type {
    /// A list of `t`.
    pub fn list(t: Type) -> Type {
        Type::List(Box::new(t))
    }
    /// A set of `t`.
    pub fn set(t: Type) -> Type {
        Type::Set(Box::new(t))
    }
    /// A map of `t`.
    pub fn map(t: Type) -> Type {
        Type::Map(Box::new(t))
    }
    /// An object of the named attribute types.
    pub fn object<I: IntoIterator<Item = (S, Type)>, S: Into<String>>(attrs: I) -> Type {
        Type::Object(attrs.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }

    /// The JSON notation terraform expects in schemas and dynamic values.
    fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match self {
            Type::Bool => J::from("bool"),
            Type::Number => J::from("number"),
            Type::String => J::from("string"),
            Type::Dynamic => J::from("dynamic"),
            Type::List(t) => J::Array(vec!["list".into(), t.to_json()]),
            Type::Set(t) => J::Array(vec!["set".into(), t.to_json()]),
            Type::Map(t) => J::Array(vec!["map".into(), t.to_json()]),
            Type::Object(attrs) => J::Array(vec![
                "object".into(),
                J::Object(
                    attrs
                        .iter()
                        .map(|(k, t)| (k.clone(), t.to_json()))
                        .collect(),
                ),
            ]),
            Type::Tuple(elems) => J::Array(vec![
                "tuple".into(),
                J::Array(elems.iter().map(Type::to_json).collect()),
            ]),
        }
    }

    pub(crate) fn to_json_bytes(&self) -> Vec<u8> {
        // Serializing a serde_json::Value into a Vec cannot fail.
        serde_json::to_vec(&self.to_json()).unwrap_or_default()
    }

    pub(crate) fn from_json_bytes(bytes: &[u8]) -> Result<Type, String> {
        let v: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| format!("type is not JSON: {e}"))?;
        Type::from_json(&v, 0)
    }

    fn from_json(v: &serde_json::Value, depth: usize) -> Result<Type, String> {
        use serde_json::Value as J;
        if depth > MAX_TYPE_DEPTH {
            return Err("type nesting is too deep".into());
        }
        match v {
            J::String(s) => match s.as_str() {
                "bool" => Ok(Type::Bool),
                "number" => Ok(Type::Number),
                "string" => Ok(Type::String),
                "dynamic" => Ok(Type::Dynamic),
                other => Err(format!("unknown primitive type {other:?}")),
            },
            J::Array(parts) if parts.len() >= 2 => {
                let kind = parts[0].as_str().ok_or("type kind must be a string")?;
                let inner = |i: usize| Type::from_json(&parts[i], depth + 1);
                match kind {
                    "list" => Ok(Type::list(inner(1)?)),
                    "set" => Ok(Type::set(inner(1)?)),
                    "map" => Ok(Type::map(inner(1)?)),
                    // An object type may carry a third element listing optional attributes
                    // (type constraints only); the attribute types are all we need.
                    "object" => {
                        let attrs = parts[1]
                            .as_object()
                            .ok_or("object attributes must be a map")?;
                        let mut out = BTreeMap::new();
                        for (k, t) in attrs {
                            out.insert(k.clone(), Type::from_json(t, depth + 1)?);
                        }
                        Ok(Type::Object(out))
                    }
                    "tuple" => {
                        let elems = parts[1].as_array().ok_or("tuple elements must be a list")?;
                        let elems = elems
                            .iter()
                            .map(|t| Type::from_json(t, depth + 1))
                            .collect::<Result<_, _>>()?;
                        Ok(Type::Tuple(elems))
                    }
                    other => Err(format!("unknown type kind {other:?}")),
                }
            }
            _ => Err(format!("not a type: {v}")),
        }
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.to_json())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_notation_round_trips() {
        let t = Type::object([
            ("a", Type::list(Type::String)),
            ("b", Type::map(Type::set(Type::Number))),
            ("c", Type::Tuple(vec![Type::Bool, Type::Dynamic])),
        ]);
        let bytes = t.to_json_bytes();
        assert_eq!(
            String::from_utf8(bytes.clone()).unwrap(),
            r#"["object",{"a":["list","string"],"b":["map",["set","number"]],"c":["tuple",["bool","dynamic"]]}]"#
        );
        assert_eq!(Type::from_json_bytes(&bytes).unwrap(), t);
    }

    #[test]
    fn optional_attribute_marker_is_accepted() {
        let t = Type::from_json_bytes(br#"["object",{"a":"string"},["a"]]"#).unwrap();
        assert_eq!(t, Type::object([("a", Type::String)]));
    }

    #[test]
    fn bad_types_are_errors() {
        for bad in [&b"\"float\""[..], b"[\"list\"]", b"{}", b"[1,2]", b"\xff"] {
            assert!(Type::from_json_bytes(bad).is_err(), "{bad:?}");
        }
        let deep = "[\"list\",".repeat(200) + "\"string\"" + &"]".repeat(200);
        assert!(Type::from_json_bytes(deep.as_bytes()).is_err());
    }
}
