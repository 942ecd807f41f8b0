//! What a typed model (`object!`) reads, told as data, so that a test can hold the model to the
//! schema block it decodes: the same names, the same types, and flags that agree. A model that
//! drifts from its schema fails at run time, on the first plan that sends what the model did not
//! expect (a plain `u32` for an optional attribute fails on null; a `Known` for an optional one
//! reads an unknown as absent); [`check`] finds it in `cargo test` instead.
//!
//! The rules follow from how terraform fills a value (the plugin protocol's "resource
//! instance change lifecycle"): a required attribute is never null; an optional one is null when
//! the configuration does not set it; a computed one is null in a configuration and in the
//! proposed new state of a create, and set in a state by the provider.

use std::collections::BTreeMap;

use crate::object::{Known, MaybeUnknown, SingleBlock};
use crate::schema::{Attribute, Block, Nesting};
use crate::{Type, Value};

/// What a model's field reads.
#[derive(Clone, Debug, PartialEq)]
pub struct Shape {
    /// The kind of value.
    pub kind: Kind,
    /// It reads null.
    pub null: bool,
    /// What it does with an unknown.
    pub unknown: Unknown,
}

/// What a field does with an unknown value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Unknown {
    /// The model fails to read (a plan's unknown leaves the whole model unread).
    Fails,
    /// It reads as absent, as null would (`Known`).
    Absent,
    /// It reads as unknown (`MaybeUnknown`, `Value`).
    Kept,
}

/// Which values a model reads: a state's, where everything is known, or a configuration's and a
/// plan's, where the provider's attributes are unknown until it knows them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Reads {
    /// A state: the model stands for the whole block, every attribute.
    State,
    /// A configuration or plan: the model reads the attributes it names (the arguments).
    Plan,
}

/// The kind of value a field reads.
#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    /// A bool.
    Bool,
    /// A number.
    Number,
    /// A string.
    String,
    /// Any value, carried as it is.
    Any,
    /// A list or set of elements of one shape.
    List(Box<Shape>),
    /// Values by string key.
    Map(Box<Shape>),
    /// A model's attributes by name.
    Object(BTreeMap<String, Shape>),
    /// A block of at most one object.
    Single(Box<Shape>),
}

impl Shape {
    /// A value that is always there and known.
    pub fn plain(kind: Kind) -> Shape {
        Shape {
            kind,
            null: false,
            unknown: Unknown::Fails,
        }
    }
}

/// A type whose values a model reads; `object!` implements it for every model.
pub trait Shaped {
    /// What it reads.
    fn shape() -> Shape;
}

macro_rules! plain {
    ($($t:ty => $k:expr),* $(,)?) => {
        $(impl Shaped for $t {
            fn shape() -> Shape {
                Shape::plain($k)
            }
        })*
    };
}

plain! {
    String => Kind::String,
    bool => Kind::Bool,
    i64 => Kind::Number,
    u32 => Kind::Number,
    u64 => Kind::Number,
}

impl Shaped for Value {
    fn shape() -> Shape {
        Shape {
            kind: Kind::Any,
            null: true,
            unknown: Unknown::Kept,
        }
    }
}

impl<T: Shaped> Shaped for Option<T> {
    fn shape() -> Shape {
        Shape {
            null: true,
            ..T::shape()
        }
    }
}

impl<T: Shaped> Shaped for Known<T> {
    fn shape() -> Shape {
        Shape {
            null: true,
            unknown: Unknown::Absent,
            ..T::shape()
        }
    }
}

impl<T: Shaped> Shaped for MaybeUnknown<T> {
    fn shape() -> Shape {
        Shape {
            unknown: Unknown::Kept,
            ..T::shape()
        }
    }
}

impl<T: Shaped> Shaped for Vec<T> {
    fn shape() -> Shape {
        Shape::plain(Kind::List(Box::new(T::shape())))
    }
}

impl<T: Shaped> Shaped for BTreeMap<String, T> {
    fn shape() -> Shape {
        Shape::plain(Kind::Map(Box::new(T::shape())))
    }
}

impl<T: Shaped> Shaped for SingleBlock<T> {
    fn shape() -> Shape {
        Shape {
            null: true,
            ..Shape::plain(Kind::Single(Box::new(T::shape())))
        }
    }
}

/// The attributes of a model: its own fields, then those of the models it flattens.
pub fn object(fields: Vec<(&'static str, Shape)>, flattened: Vec<Shape>) -> Shape {
    let mut all: BTreeMap<String, Shape> = fields
        .into_iter()
        .map(|(n, s)| (n.to_string(), s))
        .collect();
    for f in flattened {
        if let Kind::Object(m) = f.kind {
            all.extend(m);
        }
    }
    Shape::plain(Kind::Object(all))
}

/// Blocks of at most one, each read by its own model: a field that stands for several blocks of
/// which a value holds one (a target's, a provisioner's).
pub fn blocks(each: Vec<(&'static str, Shape)>) -> Shape {
    let fields = each
        .into_iter()
        .map(|(name, model)| {
            let single = Shape {
                null: true,
                ..Shape::plain(Kind::Single(Box::new(model)))
            };
            (name, single)
        })
        .collect();
    object(fields, Vec::new())
}

/// Where a model disagrees with the block it reads (`at` names the block in the messages):
/// names, types and flags; nothing when they agree.
pub fn check(at: &str, block: &Block, model: &Shape, reads: Reads) -> Vec<String> {
    let mut out = Vec::new();
    let Kind::Object(fields) = &model.kind else {
        out.push(format!("{at}: the model is not an object model"));
        return out;
    };
    let mut seen = Vec::new();
    for a in &block.attributes {
        let path = format!("{at}.{}", a.name);
        seen.push(a.name.as_str());
        match fields.get(&a.name) {
            Some(f) => {
                check_type(&path, &a.ty, f, &mut out);
                check_flags(&path, a, f, reads, &mut out);
            }
            None if reads == Reads::State => {
                out.push(format!("{path}: in the schema, not in the model"));
            }
            None => {}
        }
    }
    for b in &block.blocks {
        let path = format!("{at}.{}", b.name);
        seen.push(b.name.as_str());
        let Some(f) = fields.get(&b.name) else {
            if reads == Reads::State {
                out.push(format!("{path}: in the schema, not in the model"));
            }
            continue;
        };
        let single = b.nesting == Nesting::Single || b.max_items == 1;
        match (&f.kind, single) {
            (Kind::Any, _) => {}
            (Kind::Single(inner), true) => out.extend(check(&path, &b.block, inner, reads)),
            (Kind::List(inner), false) => out.extend(check(&path, &b.block, inner, reads)),
            (k, _) => out.push(format!(
                "{path}: a block of {}, but the model reads {}",
                if single { "at most one" } else { "many" },
                describe(k)
            )),
        }
    }
    for name in fields.keys() {
        if !seen.contains(&name.as_str()) {
            out.push(format!("{at}.{name}: in the model, not in the schema"));
        }
    }
    out
}

/// Whether the field reads what terraform may send for the attribute. An unknown may come in
/// any attribute a configuration sets from another resource; whether a model fails on it (and is
/// read again once known), keeps it or reads it as unset is the model's choice, not checked.
fn check_flags(path: &str, a: &Attribute, f: &Shape, reads: Reads, out: &mut Vec<String>) {
    if a.required && f.null && f.unknown == Unknown::Fails {
        out.push(format!(
            "{path}: required, but the model has it optional (`Option`)"
        ));
    }
    let null_when_unset = (a.optional && !a.computed) || (a.computed && reads == Reads::Plan);
    if null_when_unset && !f.null {
        out.push(format!(
            "{path}: null while unset (in a configuration{}), but the model fails on null",
            if a.computed { " and a create plan" } else { "" }
        ));
    }
}

/// Whether the field reads values of the attribute's type.
fn check_type(path: &str, ty: &Type, f: &Shape, out: &mut Vec<String>) {
    let agree = match (ty, &f.kind) {
        (_, Kind::Any) => true,
        (Type::Bool, Kind::Bool) | (Type::Number, Kind::Number) | (Type::String, Kind::String) => {
            true
        }
        (Type::List(t) | Type::Set(t), Kind::List(e)) | (Type::Map(t), Kind::Map(e)) => {
            check_type(&format!("{path}[*]"), t, e, out);
            true
        }
        (Type::Object(attrs), Kind::Object(fields)) => {
            for (name, t) in attrs {
                match fields.get(name) {
                    Some(e) => check_type(&format!("{path}.{name}"), t, e, out),
                    None => out.push(format!("{path}.{name}: in the schema, not in the model")),
                }
            }
            for name in fields.keys().filter(|n| !attrs.contains_key(*n)) {
                out.push(format!("{path}.{name}: in the model, not in the schema"));
            }
            true
        }
        _ => false,
    };
    if !agree {
        out.push(format!(
            "{path}: of type {ty:?}, but the model reads {}",
            describe(&f.kind)
        ));
    }
}

fn describe(k: &Kind) -> &'static str {
    match k {
        Kind::Bool => "a bool",
        Kind::Number => "a number",
        Kind::String => "a string",
        Kind::Any => "any value",
        Kind::List(_) => "a list",
        Kind::Map(_) => "a map",
        Kind::Object(_) => "an object",
        Kind::Single(_) => "a block of at most one",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::object! {
        struct Inner {
            a: u32,
        }
    }

    crate::object! {
        struct Model {
            name: String,
            size: Option<u32>,
            id: Known<String>,
            inner: SingleBlock<Inner>,
        }
    }

    crate::object! {
        struct Shaped2 {
            plain: String,
        }
        flatten {
            model: Model,
        }
    }

    fn block() -> Block {
        let inner = Block::new("").attr(Attribute::number("a").required());
        Block::new("")
            .attr(Attribute::string("name").required())
            .attr(Attribute::number("size").optional())
            .attr(Attribute::string("id").computed())
            .single_block("inner", inner)
    }

    #[test]
    fn a_model_that_agrees_passes() {
        for reads in [Reads::State, Reads::Plan] {
            assert_eq!(
                check("m", &block(), &Model::shape(), reads),
                Vec::<String>::new()
            );
        }
    }

    #[test]
    fn each_disagreement_is_named() {
        let mut b = block();
        b.attributes[0].ty = Type::Number;
        b.attributes[1].optional = false;
        b.attributes[1].required = true;
        b.attributes[2].computed = false;
        b.attributes[2].optional = true;
        b.attributes.push(Attribute::bool("extra").optional());
        b.blocks[0].max_items = 0;
        b.attributes.push(Attribute::string("plain").optional());
        let found = check("m", &b, &Shaped2::shape(), Reads::Plan);
        assert_eq!(
            found,
            vec![
                "m.name: of type Number, but the model reads a string",
                "m.size: required, but the model has it optional (`Option`)",
                "m.plain: null while unset (in a configuration), but the model fails on null",
                "m.inner: a block of many, but the model reads a block of at most one",
            ]
        );
        // A state's model stands for every attribute; a plan's reads the ones it names.
        let found = check("m", &b, &Shaped2::shape(), Reads::State);
        assert!(found.contains(&"m.extra: in the schema, not in the model".to_string()));
        // A computed attribute is null in a create plan, set in a state.
        let mut b = block();
        b.attributes[0] = Attribute::string("name").computed();
        let found = check("m", &b, &Model::shape(), Reads::Plan);
        assert_eq!(
            found,
            vec![
                "m.name: null while unset (in a configuration and a create plan), but the model \
                  fails on null"
            ]
        );
        assert_eq!(
            check("m", &b, &Model::shape(), Reads::State),
            Vec::<String>::new()
        );
    }
}
