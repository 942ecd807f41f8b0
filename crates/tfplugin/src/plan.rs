//! The plan framework: from terraform's proposed new state to the planned state, following the
//! rules terraform enforces (PlanResourceChange in hashicorp/terraform's
//! docs/resource-instance-change-lifecycle.md):
//! - on create, computed attributes the configuration leaves null become unknown;
//! - on update, unchanged objects keep their prior computed values (no spurious "known after
//!   apply"); a changed object gets unknown computed values except where the schema declares
//!   `use_state_for_unknown`;
//! - attributes with a declared default whose configuration is null are planned with it, so the
//!   plan shows the value the object will have (and an imported object read back with it plans
//!   empty);
//! - attributes declared `requires_replace` whose value changes are reported as replace paths.
//!
//! Also the `timeouts` block shared by resources.

use std::time::Duration;

use super::diag::{AttrPath, Diagnostic, Diagnostics};
use super::schema::{Attribute, Block, Nesting, PlanModifier, Validator};
use super::value::Value;

/// A plan as the resource's hook sees and adjusts it.
pub struct Planned {
    /// The planned state: unknown where the apply decides.
    pub state: Value,
    /// The attributes whose change replaces the object.
    pub requires_replace: Vec<AttrPath>,
}

/// The planned state before the resource's own plan hook runs. Replacement is decided after the
/// hook (see [`replace_paths`]), once defaults of optional+computed attributes are filled in.
pub fn plan(block: &Block, prior: &Value, proposed: &Value, config: &Value) -> Planned {
    let mut state = proposed.clone();
    let create = prior.is_null();
    // Computed attributes the configuration leaves null start from their prior value (terraform
    // proposes null for some of them, e.g. nested attributes), so only what the user controls
    // decides whether the object changes.
    if !create {
        walk(block, prior, &mut state, config, &|old, _| old.clone());
    }
    if create || state != *prior {
        // A `use_state_for_unknown` attribute keeps its prior value, null included: it is settled
        // once the object exists.
        walk(block, prior, &mut state, config, &|old, a| {
            let keep = !create && a.has(PlanModifier::UseStateForUnknown);
            if keep { old.clone() } else { Value::UNKNOWN }
        });
    }
    apply_defaults(block, &mut state, config);
    Planned {
        state,
        requires_replace: Vec::new(),
    }
}

/// Sets every attribute with a default whose configuration is null to the default, in nested
/// blocks too (for each block the configuration has).
fn apply_defaults(block: &Block, planned: &mut Value, config: &Value) {
    if !planned.is_known() || planned.is_null() {
        return;
    }
    for a in &block.attributes {
        if let (Some(default), Some(slot)) = (&a.default, planned.get_mut(&a.name))
            && config.get(&a.name).is_null()
        {
            *slot = default.clone();
        }
    }
    for b in &block.blocks {
        let cfg = config.get(&b.name);
        let Some(slot) = planned.get_mut(&b.name) else {
            continue;
        };
        match b.nesting {
            Nesting::Single => apply_defaults(&b.block, slot, cfg),
            Nesting::List | Nesting::Set => {
                if let Value::List(items) | Value::Set(items) = slot {
                    for (i, item) in items.iter_mut().enumerate() {
                        let cfg_i = cfg.elements().get(i).unwrap_or(&Value::Null);
                        apply_defaults(&b.block, item, cfg_i);
                    }
                }
            }
            Nesting::Map => {}
        }
    }
}

/// Sets every computed attribute whose configuration is null to `value(prior, attribute)`.
fn walk(
    block: &Block,
    prior: &Value,
    planned: &mut Value,
    config: &Value,
    value: &dyn Fn(&Value, &Attribute) -> Value,
) {
    if !planned.is_known() || planned.is_null() {
        return;
    }
    for a in &block.attributes {
        if let Some(slot) = planned.get_mut(&a.name)
            && a.computed
            && config.get(&a.name).is_null()
        {
            *slot = value(prior.get(&a.name), a);
        }
    }
    for b in &block.blocks {
        let cfg = config.get(&b.name);
        let old = prior.get(&b.name);
        let Some(slot) = planned.get_mut(&b.name) else {
            continue;
        };
        match b.nesting {
            Nesting::Single => walk(&b.block, old, slot, cfg, value),
            Nesting::List | Nesting::Set => {
                if let Value::List(items) | Value::Set(items) = slot {
                    for (i, item) in items.iter_mut().enumerate() {
                        let old_i = old.elements().get(i).unwrap_or(&Value::Null);
                        let cfg_i = cfg.elements().get(i).unwrap_or(&Value::Null);
                        walk(&b.block, old_i, item, cfg_i, value);
                    }
                }
            }
            Nesting::Map => {}
        }
    }
}

/// The attributes declared `requires_replace` whose planned value differs from the prior one
/// (an unknown planned value may differ, so it counts). A nested block that appears or
/// disappears counts when it holds such attributes.
pub(crate) fn replace_paths(block: &Block, prior: &Value, planned: &Value) -> Vec<AttrPath> {
    let mut out = Vec::new();
    if !prior.is_null() && !planned.is_null() {
        replace_walk(block, prior, planned, &AttrPath::root(), &mut out);
    }
    out
}

fn replace_walk(
    block: &Block,
    prior: &Value,
    planned: &Value,
    path: &AttrPath,
    out: &mut Vec<AttrPath>,
) {
    if !planned.is_known() {
        return;
    }
    for a in &block.attributes {
        if a.has(PlanModifier::RequiresReplace) && planned.get(&a.name) != prior.get(&a.name) {
            out.push(path.with_attr(&a.name));
        }
    }
    for b in &block.blocks {
        let p = path.with_attr(&b.name);
        let (old, new) = (prior.get(&b.name), planned.get(&b.name));
        match b.nesting {
            Nesting::Single => replace_walk(&b.block, old, new, &p, out),
            Nesting::List | Nesting::Set => {
                if old.elements().len() != new.elements().len() {
                    if block_forces_replacement(&b.block) {
                        out.push(p);
                    }
                    continue;
                }
                for (i, (o, n)) in old.elements().iter().zip(new.elements()).enumerate() {
                    replace_walk(&b.block, o, n, &p.with_index(i), out);
                }
            }
            Nesting::Map => {}
        }
    }
}

fn block_forces_replacement(block: &Block) -> bool {
    block
        .attributes
        .iter()
        .any(|a| a.has(PlanModifier::RequiresReplace))
}

// ---------------------------------------------------------------------------------------------
// timeouts

/// A resource's `timeouts` block: its operations, each with the limit it has when the block does
/// not set one.
pub struct Timeouts(pub &'static [(&'static str, Duration)]);

impl Timeouts {
    /// The block, one optional duration string per operation, each describing its default.
    pub fn block(&self) -> Block {
        let mut b = Block::new(
            "How long each operation may take before it fails, as a duration like `45m` or `1h30m`.",
        );
        for (op, default) in self.0 {
            b = b.attr(
                Attribute::string(op)
                    .optional()
                    .describe(&format!(
                        "Time limit for {op}. Default `{}`.",
                        duration_text(*default)
                    ))
                    .validate(DurationString),
            );
        }
        b
    }

    /// The limit of `operation` for a resource value: `timeouts[0].<operation>`, else its default.
    pub fn of(&self, value: &Value, operation: &str) -> Duration {
        let default = self
            .0
            .iter()
            .find(|(op, _)| *op == operation)
            .map(|(_, d)| *d)
            .expect("an operation of this timeouts block");
        value
            .get("timeouts")
            .elements()
            .first()
            .and_then(|t| t.get(operation).as_str())
            .and_then(parse_duration)
            .unwrap_or(default)
    }
}

/// A whole number of hours, minutes or seconds in Go's duration notation (`45m`, `2h`, `90s`).
fn duration_text(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        s if s > 0 && s % 3600 == 0 => format!("{}h", s / 3600),
        s if s > 0 && s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// Parses durations in the notation terraform users know from Go (`90s`, `45m`, `1h30m`, `500ms`).
fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        if digits == 0 {
            return None;
        }
        let n: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let secs = match &rest[..unit_len] {
            "ms" => n / 1000.0,
            "s" => n,
            "m" => n * 60.0,
            "h" => n * 3600.0,
            _ => return None,
        };
        total += Duration::try_from_secs_f64(secs).ok()?;
        rest = &rest[unit_len..];
    }
    Some(total)
}

struct DurationString;

impl Validator for DurationString {
    fn validate(&self, value: &Value, path: &AttrPath, diags: &mut Diagnostics) {
        let Some(s) = value.as_str() else { return };
        if parse_duration(s).is_none() {
            diags.push(
                Diagnostic::error(
                    "Invalid duration",
                    format!(
                        "{path} is {s:?}; write a duration such as \"90s\", \"45m\" or \
                        \"1h30m\" (units ms, s, m, h)."
                    ),
                )
                .at(path.clone()),
            );
        }
    }
    fn describe(&self) -> String {
        "Written like `90s`, `45m` or `1h30m`.".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Attribute;

    fn schema() -> Block {
        Block::new("")
            .attr(Attribute::string("id").computed().use_state_for_unknown())
            .attr(Attribute::string("name").required().requires_replace())
            .attr(Attribute::number("count").optional())
            .attr(Attribute::string("status").computed())
            .attr(Attribute::number("size").optional().computed())
            .single_block(
                "disk",
                Block::new("").attr(Attribute::string("profile").required().requires_replace()),
            )
    }

    fn obj(
        id: Value,
        name: &str,
        count: i64,
        status: Value,
        size: Value,
        disk: Option<&str>,
    ) -> Value {
        let disk = Value::List(
            disk.map(|p| vec![Value::object([("profile", Value::string(p))])])
                .unwrap_or_default(),
        );
        Value::object([
            ("id", id),
            ("name", name.into()),
            ("count", Value::int(count)),
            ("status", status),
            ("size", size),
            ("disk", disk),
        ])
    }

    #[test]
    fn create_marks_computed_unknown() {
        let cfg = obj(Value::Null, "a", 1, Value::Null, Value::Null, None);
        let p = plan(&schema(), &Value::Null, &cfg, &cfg);
        assert_eq!(p.state.get("id"), &Value::UNKNOWN);
        assert_eq!(p.state.get("status"), &Value::UNKNOWN);
        assert_eq!(p.state.get("size"), &Value::UNKNOWN);
        assert!(p.requires_replace.is_empty());
    }

    #[test]
    fn unchanged_update_keeps_prior_values() {
        let prior = obj(
            "x".into(),
            "a",
            1,
            "ok".into(),
            Value::int(5),
            Some("small"),
        );
        let cfg = obj(Value::Null, "a", 1, Value::Null, Value::Null, Some("small"));
        let p = plan(&schema(), &prior, &prior, &cfg);
        assert_eq!(p.state, prior);
        assert!(p.requires_replace.is_empty());
    }

    #[test]
    fn changed_update_unknowns_computed_but_keeps_stable_ones() {
        let prior = obj("x".into(), "a", 1, "ok".into(), Value::int(5), None);
        let proposed = obj("x".into(), "a", 2, "ok".into(), Value::int(5), None);
        let cfg = obj(Value::Null, "a", 2, Value::Null, Value::int(5), None);
        let p = plan(&schema(), &prior, &proposed, &cfg);
        assert_eq!(p.state.get("id").as_str(), Some("x"));
        assert_eq!(p.state.get("status"), &Value::UNKNOWN);
        // Set in config: stays what the user wrote.
        assert_eq!(p.state.get("size").as_i64(), Some(5));
        assert!(p.requires_replace.is_empty());
    }

    #[test]
    fn replacement_paths() {
        let prior = obj(
            "x".into(),
            "a",
            1,
            "ok".into(),
            Value::int(5),
            Some("small"),
        );
        let proposed = obj(
            "x".into(),
            "b",
            1,
            "ok".into(),
            Value::int(5),
            Some("large"),
        );
        let p = plan(&schema(), &prior, &proposed, &proposed);
        assert_eq!(
            replace_paths(&schema(), &prior, &p.state),
            vec![
                AttrPath::attr("name"),
                AttrPath::attr("disk").with_index(0).with_attr("profile")
            ]
        );
        // Removing a block with replace-forcing attributes replaces too.
        let proposed = obj("x".into(), "a", 1, "ok".into(), Value::int(5), None);
        let p = plan(&schema(), &prior, &proposed, &proposed);
        assert_eq!(
            replace_paths(&schema(), &prior, &p.state),
            vec![AttrPath::attr("disk")]
        );
        // Nothing is replaced on create.
        assert!(replace_paths(&schema(), &Value::Null, &p.state).is_empty());
    }

    #[test]
    fn defaults_fill_what_the_configuration_leaves_null_in_blocks_too() {
        let block = Block::new("")
            .attr(
                Attribute::bool("spot")
                    .optional()
                    .computed()
                    .default_value(Value::Bool(false)),
            )
            .single_block(
                "mig",
                Block::new("")
                    .attr(Attribute::string("profile").required())
                    .attr(
                        Attribute::string("strategy")
                            .optional()
                            .computed()
                            .default_value("mixed".into()),
                    ),
            );
        let mig = |strategy: Value| {
            Value::List(vec![Value::object([
                ("profile", "1g.5gb".into()),
                ("strategy", strategy),
            ])])
        };
        let cfg = Value::object([("spot", Value::Null), ("mig", mig(Value::Null))]);
        let p = plan(&block, &Value::Null, &cfg, &cfg);
        assert_eq!(p.state.get("spot"), &Value::Bool(false));
        assert_eq!(
            p.state.get("mig").elements()[0].get("strategy").as_str(),
            Some("mixed")
        );
        // A value the user wrote stays; drift from the default (an imported object) is planned away.
        let prior = Value::object([("spot", Value::Bool(true)), ("mig", mig("single".into()))]);
        let cfg = Value::object([("spot", Value::Null), ("mig", mig("single".into()))]);
        let p = plan(&block, &prior, &cfg, &cfg);
        assert_eq!(p.state.get("spot"), &Value::Bool(false));
        assert_eq!(
            p.state.get("mig").elements()[0].get("strategy").as_str(),
            Some("single")
        );
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("45m"), Some(Duration::from_secs(2700)));
        assert_eq!(parse_duration("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        for bad in ["", "10", "m", "1x", "-1s", "1h 30m"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
        let v = Value::object([(
            "timeouts",
            Value::List(vec![Value::object([("create", "2m".into())])]),
        )]);
        const T: Timeouts = Timeouts(&[
            ("create", Duration::from_secs(1)),
            ("delete", Duration::from_secs(3600)),
        ]);
        assert_eq!(T.of(&v, "create"), Duration::from_secs(120));
        assert_eq!(T.of(&v, "delete"), Duration::from_secs(3600));
        assert_eq!(T.of(&Value::Null, "create"), Duration::from_secs(1));
        // Each attribute names its default in the notation it accepts.
        let block = T.block();
        let described: Vec<_> = block
            .attributes
            .iter()
            .map(|a| (a.name.as_str(), a.description.as_str()))
            .collect();
        assert_eq!(
            described,
            [
                ("create", "Time limit for create. Default `1s`."),
                ("delete", "Time limit for delete. Default `1h`.")
            ]
        );
        for (d, text) in [(45 * 60, "45m"), (120, "2m"), (90, "90s"), (7200, "2h")] {
            assert_eq!(duration_text(Duration::from_secs(d)), text);
            assert_eq!(parse_duration(text), Some(Duration::from_secs(d)));
        }
    }
}
