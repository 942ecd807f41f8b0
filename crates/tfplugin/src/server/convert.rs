//! Conversions between the generated protobuf types and the `tf` model. The only place where
//! both meet.

use super::proto::tfplugin6 as pb;
use crate::api::FunctionSignature;
use crate::schema::{Attribute, Block, Nesting, Schema};
use crate::{
    AttrPath, CodecError, Diagnostic, Diagnostics, Severity, Step, Type, Value, json, msgpack,
};

/// Decodes a DynamicValue against the schema's type; empty means null.
pub(crate) fn decode(dv: Option<&pb::DynamicValue>, ty: &Type) -> Result<Value, CodecError> {
    match dv {
        Some(d) if !d.msgpack.is_empty() => msgpack::decode(&d.msgpack, ty),
        Some(d) if !d.json.is_empty() => json::decode(&d.json, ty),
        _ => Ok(Value::Null),
    }
}

pub(crate) fn encode(v: &Value, ty: &Type) -> Result<pb::DynamicValue, CodecError> {
    Ok(pb::DynamicValue {
        msgpack: msgpack::encode(v, ty)?,
        json: Vec::new(),
    })
}

pub(crate) fn path(p: &AttrPath) -> pb::AttributePath {
    use pb::attribute_path::step::Selector;
    pb::AttributePath {
        steps: p
            .0
            .iter()
            .map(|s| pb::attribute_path::Step {
                selector: Some(match s {
                    Step::Attr(a) => Selector::AttributeName(a.clone()),
                    Step::Key(k) => Selector::ElementKeyString(k.clone()),
                    Step::Index(i) => Selector::ElementKeyInt(*i),
                }),
            })
            .collect(),
    }
}

fn diagnostic(d: &Diagnostic) -> pb::Diagnostic {
    pb::Diagnostic {
        severity: match d.severity {
            Severity::Error => pb::diagnostic::Severity::Error,
            Severity::Warning => pb::diagnostic::Severity::Warning,
        } as i32,
        summary: d.summary.clone(),
        detail: d.detail.clone(),
        attribute: d.path.as_ref().filter(|p| !p.0.is_empty()).map(path),
    }
}

pub(crate) fn diagnostics(d: &Diagnostics) -> Vec<pb::Diagnostic> {
    d.0.iter().map(diagnostic).collect()
}

/// A protocol-level decoding problem as an error diagnostic (terraform sent something that does
/// not fit the schema: a version mismatch, never user input).
pub(crate) fn codec_diag(what: &str, e: &CodecError) -> Diagnostics {
    Diagnostic::error(
        "Invalid value from terraform",
        format!(
            "The provider could not decode the {what}: {e}. This is a bug or a \
            terraform/provider version mismatch; please report it."
        ),
    )
    .into()
}

pub(crate) fn schema(s: &Schema) -> pb::Schema {
    pb::Schema {
        version: s.version,
        block: Some(block(&s.block, s.version)),
    }
}

fn block(b: &Block, version: i64) -> pb::schema::Block {
    pb::schema::Block {
        version,
        attributes: b.attributes.iter().map(attribute).collect(),
        block_types: b
            .blocks
            .iter()
            .map(|nb| pb::schema::NestedBlock {
                type_name: nb.name.clone(),
                block: Some(block(&nb.block, version)),
                nesting: match nb.nesting {
                    Nesting::Single => pb::schema::nested_block::NestingMode::Single,
                    Nesting::List => pb::schema::nested_block::NestingMode::List,
                    Nesting::Set => pb::schema::nested_block::NestingMode::Set,
                    Nesting::Map => pb::schema::nested_block::NestingMode::Map,
                } as i32,
                min_items: nb.min_items,
                max_items: nb.max_items,
            })
            .collect(),
        description: b.description.clone(),
        description_kind: pb::StringKind::Markdown as i32,
        deprecated: b.deprecated,
    }
}

fn attribute(a: &Attribute) -> pb::schema::Attribute {
    let description = match &a.deprecated {
        Some(msg) => format!("{} **Deprecated**: {msg}", a.description),
        None => a.description.clone(),
    };
    pb::schema::Attribute {
        name: a.name.clone(),
        // A nested attribute carries its shape in nested_type and no type bytes.
        r#type: if a.nested.is_some() {
            Vec::new()
        } else {
            a.ty.to_json_bytes()
        },
        nested_type: a
            .nested
            .as_ref()
            .map(|(nesting, attrs)| pb::schema::Object {
                attributes: attrs.iter().map(attribute).collect(),
                nesting: match nesting {
                    Nesting::Single => pb::schema::object::NestingMode::Single,
                    Nesting::List => pb::schema::object::NestingMode::List,
                    Nesting::Set => pb::schema::object::NestingMode::Set,
                    Nesting::Map => pb::schema::object::NestingMode::Map,
                } as i32,
                ..Default::default()
            }),
        description,
        required: a.required,
        optional: a.optional,
        computed: a.computed,
        sensitive: a.sensitive,
        description_kind: pb::StringKind::Markdown as i32,
        deprecated: a.deprecated.is_some(),
        write_only: false,
    }
}

pub(crate) fn function(sig: &FunctionSignature) -> pb::Function {
    pb::Function {
        parameters: sig
            .parameters
            .iter()
            .map(|p| pb::function::Parameter {
                name: p.name.to_string(),
                r#type: p.ty.to_json_bytes(),
                allow_null_value: false,
                allow_unknown_values: false,
                description: p.description.to_string(),
                description_kind: pb::StringKind::Markdown as i32,
            })
            .collect(),
        variadic_parameter: None,
        r#return: Some(pb::function::Return {
            r#type: sig.returns.to_json_bytes(),
        }),
        summary: sig.summary.to_string(),
        description: sig.description.to_string(),
        description_kind: pb::StringKind::Markdown as i32,
        deprecation_message: String::new(),
    }
}
