//! Schemas: attributes, nested attributes and nested blocks, the type each produces, and the
//! validators and plan behaviour declared on them (like terraform-plugin-framework: plan
//! behaviour lives in the schema as small reusable pieces, not in each resource).

use std::sync::Arc;

use super::diag::{AttrPath, Diagnostics};
use super::types::Type;
use super::value::Value;

/// Checks one known, non-null attribute value. Validators never see null or unknown values.
pub trait Validator: Send + Sync {
    /// Adds an error diagnostic at `path` for a value the attribute refuses.
    fn validate(&self, value: &Value, path: &AttrPath, diags: &mut Diagnostics);
    /// One sentence for the generated docs, e.g. "One of `read`, `write`."
    fn describe(&self) -> String;
}

/// Checks relations between the attributes and blocks of one block (exactly one of, conflicts).
pub trait BlockValidator: Send + Sync {
    /// Adds an error diagnostic (on `path` or one of its attributes) for a block the relation
    /// refuses.
    fn validate(&self, block: &Value, path: &AttrPath, diags: &mut Diagnostics);
}

/// What a change of an attribute means for the plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlanModifier {
    /// A change destroys and re-creates the object (`# forces replacement`).
    RequiresReplace,
    /// A computed value that never changes once set: keep the prior value instead of unknown.
    UseStateForUnknown,
}

/// How often a nested block or nested attribute's object appears, and how it is addressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nesting {
    /// One object, addressed by the name alone.
    Single,
    /// Objects in order, addressed by index.
    List,
    /// Objects without order.
    Set,
    /// Objects by string key.
    Map,
}

/// An attribute of a block: its type, whether the user or the provider sets it, how it is
/// checked, planned and documented.
#[derive(Clone)]
pub struct Attribute {
    /// The name configurations use.
    pub name: String,
    /// The type of its value.
    pub ty: Type,
    /// Set for nested attributes: the nesting and the inner attributes (the type above is derived).
    pub nested: Option<(Nesting, Vec<Attribute>)>,
    /// Markdown, for terraform's and the registry's docs.
    pub description: String,
    /// The configuration must set it.
    pub required: bool,
    /// The configuration may set it.
    pub optional: bool,
    /// The provider sets it (when the configuration does not, for an optional one).
    pub computed: bool,
    /// Terraform hides it in plans and output.
    pub sensitive: bool,
    /// Why and how to stop using it, shown when a configuration sets it.
    pub deprecated: Option<String>,
    /// Checks of a known, non-null value.
    pub validators: Vec<Arc<dyn Validator>>,
    /// What a change means for the plan.
    pub modifiers: Vec<PlanModifier>,
    /// The value an optional + computed attribute is planned with when the configuration leaves
    /// it null (see [`plan`](crate::plan::plan)).
    pub default: Option<Value>,
}

impl Attribute {
    /// An attribute of `ty`, neither required, optional nor computed yet.
    pub fn new(name: &str, ty: Type) -> Attribute {
        Attribute {
            name: name.to_string(),
            ty,
            nested: None,
            description: String::new(),
            required: false,
            optional: false,
            computed: false,
            sensitive: false,
            deprecated: None,
            validators: Vec::new(),
            modifiers: Vec::new(),
            default: None,
        }
    }
    /// A string attribute.
    pub fn string(name: &str) -> Attribute {
        Attribute::new(name, Type::String)
    }
    /// A number attribute.
    pub fn number(name: &str) -> Attribute {
        Attribute::new(name, Type::Number)
    }
    /// A bool attribute.
    pub fn bool(name: &str) -> Attribute {
        Attribute::new(name, Type::Bool)
    }
    /// An attribute whose value is an object (or list/set/map of objects) of `attributes`.
    pub fn nested(name: &str, nesting: Nesting, attributes: Vec<Attribute>) -> Attribute {
        let obj = Type::Object(
            attributes
                .iter()
                .map(|a| (a.name.clone(), a.ty.clone()))
                .collect(),
        );
        let ty = match nesting {
            Nesting::Single => obj,
            Nesting::List => Type::list(obj),
            Nesting::Set => Type::set(obj),
            Nesting::Map => Type::map(obj),
        };
        Attribute {
            nested: Some((nesting, attributes)),
            ..Attribute::new(name, ty)
        }
    }
    /// The configuration must set it.
    pub fn required(mut self) -> Self {
        self.required = true;
        self
    }
    /// The configuration may set it.
    pub fn optional(mut self) -> Self {
        self.optional = true;
        self
    }
    /// The provider sets it.
    pub fn computed(mut self) -> Self {
        self.computed = true;
        self
    }
    /// Hidden in plans and output.
    pub fn sensitive(mut self) -> Self {
        self.sensitive = true;
        self
    }
    /// Deprecated, with what to use instead.
    pub fn deprecated(mut self, message: &str) -> Self {
        self.deprecated = Some(message.to_string());
        self
    }
    /// Its description, in Markdown.
    pub fn describe(mut self, markdown: &str) -> Self {
        self.description = markdown.to_string();
        self
    }
    /// One more check of its value.
    pub fn validate(mut self, v: impl Validator + 'static) -> Self {
        self.validators.push(Arc::new(v));
        self
    }
    /// Plans `value` whenever the configuration leaves the attribute null, so the plan shows the
    /// value the object will have, and drift away from it is repaired. Only for optional +
    /// computed attributes (terraform refuses a planned value it was not told about otherwise).
    pub fn default_value(mut self, value: Value) -> Self {
        debug_assert!(
            self.optional && self.computed,
            "{}: a default needs optional + computed",
            self.name
        );
        self.default = Some(value);
        self
    }

    /// A change replaces the object ([`PlanModifier::RequiresReplace`]).
    pub fn requires_replace(mut self) -> Self {
        self.modifiers.push(PlanModifier::RequiresReplace);
        self
    }
    /// Keeps its prior value in a plan ([`PlanModifier::UseStateForUnknown`]).
    pub fn use_state_for_unknown(mut self) -> Self {
        self.modifiers.push(PlanModifier::UseStateForUnknown);
        self
    }
    /// Whether the plan modifier is declared.
    pub fn has(&self, m: PlanModifier) -> bool {
        self.modifiers.contains(&m)
    }
}

/// A block nested in another (`config { ... }`), with how often it may appear.
#[derive(Clone)]
pub struct NestedBlock {
    /// The block's name in configurations.
    pub name: String,
    /// How its objects are held.
    pub nesting: Nesting,
    /// What it contains.
    pub block: Block,
    /// The fewest objects terraform accepts (0: none needed).
    pub min_items: i64,
    /// The most objects terraform accepts (0: no limit).
    pub max_items: i64,
}

impl NestedBlock {
    /// The type of its value in the enclosing object.
    pub fn ty(&self) -> Type {
        let obj = self.block.ty();
        match self.nesting {
            Nesting::Single => obj,
            Nesting::List => Type::list(obj),
            Nesting::Set => Type::set(obj),
            Nesting::Map => Type::map(obj),
        }
    }
}

/// A block: the attributes and nested blocks of one object, and the checks across them.
#[derive(Clone, Default)]
pub struct Block {
    /// Markdown, for the docs.
    pub description: String,
    /// Shown as deprecated where a configuration uses it.
    pub deprecated: bool,
    /// Its attributes, in the order the docs list them.
    pub attributes: Vec<Attribute>,
    /// Its nested blocks.
    pub blocks: Vec<NestedBlock>,
    /// Checks across its attributes and blocks.
    pub validators: Vec<Arc<dyn BlockValidator>>,
}

impl Block {
    /// An empty block with its description.
    pub fn new(description: &str) -> Block {
        Block {
            description: description.to_string(),
            ..Block::default()
        }
    }
    /// One more attribute.
    pub fn attr(mut self, a: Attribute) -> Self {
        self.attributes.push(a);
        self
    }
    /// Several attributes, in order.
    pub fn attrs(mut self, a: impl IntoIterator<Item = Attribute>) -> Self {
        self.attributes.extend(a);
        self
    }
    /// One more nested block, any number of times.
    pub fn block(mut self, name: &str, nesting: Nesting, block: Block) -> Self {
        self.blocks.push(NestedBlock {
            name: name.to_string(),
            nesting,
            block,
            min_items: 0,
            max_items: 0,
        });
        self
    }
    /// A block that may appear at most once (terraform's "list, max 1" convention, which keeps
    /// `block[0].attr` addressing and works with every terraform version).
    pub fn single_block(mut self, name: &str, block: Block) -> Self {
        self.blocks.push(NestedBlock {
            name: name.to_string(),
            nesting: Nesting::List,
            block,
            min_items: 0,
            max_items: 1,
        });
        self
    }
    /// One more check across its attributes and blocks.
    pub fn validate(mut self, v: impl BlockValidator + 'static) -> Self {
        self.validators.push(Arc::new(v));
        self
    }

    /// The object type a value of this block has.
    pub fn ty(&self) -> Type {
        let mut attrs: std::collections::BTreeMap<String, Type> = self
            .attributes
            .iter()
            .map(|a| (a.name.clone(), a.ty.clone()))
            .collect();
        for b in &self.blocks {
            attrs.insert(b.name.clone(), b.ty());
        }
        Type::Object(attrs)
    }

    /// The names of its attributes and blocks, sorted: what a typed model of it must name.
    pub fn names(&self) -> Vec<&str> {
        let mut n: Vec<&str> = self
            .attributes
            .iter()
            .map(|a| a.name.as_str())
            .chain(self.blocks.iter().map(|b| b.name.as_str()))
            .collect();
        n.sort_unstable();
        n
    }

    /// The attribute of that name.
    pub fn attribute(&self, name: &str) -> Option<&Attribute> {
        self.attributes.iter().find(|a| a.name == name)
    }
    /// The nested block of that name.
    pub fn nested_block(&self, name: &str) -> Option<&NestedBlock> {
        self.blocks.iter().find(|b| b.name == name)
    }
}

/// A versioned schema: a later version can keep the old schema function to decode old states.
#[derive(Clone)]
pub struct Schema {
    /// Raised with every change of shape; a state of a lower version is upgraded.
    pub version: i64,
    /// The top-level block.
    pub block: Block,
}

impl Schema {
    /// The schema of `block` at `version`.
    pub fn new(version: i64, block: Block) -> Schema {
        Schema { version, block }
    }
    /// The object type of a value of this schema (configuration, plan, state).
    pub fn ty(&self) -> Type {
        self.block.ty()
    }
}

/// Runs every attribute and block validator over a configuration value. Null and unknown
/// values are skipped: they are checked again at apply time when they are known.
pub(crate) fn validate_config(
    block: &Block,
    value: &Value,
    path: &AttrPath,
    diags: &mut Diagnostics,
) {
    if value.is_null_or_unknown() {
        return;
    }
    for v in &block.validators {
        v.validate(value, path, diags);
    }
    for a in &block.attributes {
        validate_attribute(a, value.get(&a.name), &path.with_attr(&a.name), diags);
    }
    for b in &block.blocks {
        let v = value.get(&b.name);
        let p = path.with_attr(&b.name);
        match b.nesting {
            Nesting::Single => validate_config(&b.block, v, &p, diags),
            Nesting::List | Nesting::Set => {
                for (i, item) in v.elements().iter().enumerate() {
                    validate_config(&b.block, item, &p.with_index(i), diags);
                }
            }
            Nesting::Map => {
                for (k, item) in v.entries().into_iter().flatten() {
                    validate_config(&b.block, item, &p.with_key(k), diags);
                }
            }
        }
    }
}

fn validate_attribute(a: &Attribute, v: &Value, path: &AttrPath, diags: &mut Diagnostics) {
    if v.is_null_or_unknown() {
        return;
    }
    for val in &a.validators {
        val.validate(v, path, diags);
    }
    if let Some((nesting, inner)) = &a.nested {
        let each = |obj: &Value, p: &AttrPath, diags: &mut Diagnostics| {
            for ia in inner {
                validate_attribute(ia, obj.get(&ia.name), &p.with_attr(&ia.name), diags);
            }
        };
        match nesting {
            Nesting::Single => each(v, path, diags),
            Nesting::List | Nesting::Set => {
                for (i, item) in v.elements().iter().enumerate() {
                    each(item, &path.with_index(i), diags);
                }
            }
            Nesting::Map => {
                for (k, item) in v.entries().into_iter().flatten() {
                    each(item, &path.with_key(k), diags);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_types_follow_nesting() {
        let b = Block::new("")
            .attr(Attribute::string("name").required())
            .attr(Attribute::nested(
                "rules",
                Nesting::List,
                vec![
                    Attribute::string("key").required(),
                    Attribute::string("effect").required(),
                ],
            ))
            .single_block(
                "disk",
                Block::new("").attr(Attribute::string("profile").required()),
            )
            .block(
                "config",
                Nesting::Set,
                Block::new("").attr(Attribute::number("n").optional()),
            );
        let expected = Type::object([
            ("name", Type::String),
            (
                "rules",
                Type::list(Type::object([
                    ("effect", Type::String),
                    ("key", Type::String),
                ])),
            ),
            (
                "disk",
                Type::list(Type::object([("profile", Type::String)])),
            ),
            ("config", Type::set(Type::object([("n", Type::Number)]))),
        ]);
        assert_eq!(b.ty(), expected);
    }
}
