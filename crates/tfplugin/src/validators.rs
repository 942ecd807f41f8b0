//! Reusable validators. Each one checks a known, non-null value and reports with the attribute
//! path, a fixed summary and a detail that names the fix.

use super::diag::{AttrPath, Diagnostic, Diagnostics};
use super::schema::{BlockValidator, Validator};
use super::value::Value;

/// The value must be one of a fixed set of strings.
pub struct OneOf(pub &'static [&'static str]);

impl Validator for OneOf {
    fn validate(&self, value: &Value, path: &AttrPath, diags: &mut Diagnostics) {
        let Some(s) = value.as_str() else { return };
        if !self.0.contains(&s) {
            diags.push(
                Diagnostic::error(
                    "Invalid attribute value",
                    format!("{path} is {s:?}; it must be one of: {}.", quoted(self.0)),
                )
                .at(path.clone()),
            );
        }
    }
    fn describe(&self) -> String {
        format!(
            "One of {}.",
            self.0
                .iter()
                .map(|s| format!("`{s}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

/// An integer within an inclusive range.
pub struct IntBetween(pub i64, pub i64);

impl Validator for IntBetween {
    fn validate(&self, value: &Value, path: &AttrPath, diags: &mut Diagnostics) {
        let Some(n) = value.as_number() else { return };
        match n.as_i64() {
            Some(i) if (self.0..=self.1).contains(&i) => {}
            Some(i) => diags.push(
                Diagnostic::error(
                    "Value out of range",
                    format!(
                        "{path} is {i}; it must be between {} and {} inclusive.",
                        self.0, self.1
                    ),
                )
                .at(path.clone()),
            ),
            None => diags.push(
                Diagnostic::error(
                    "Value must be a whole number",
                    format!("{path} is {n}; use a whole number."),
                )
                .at(path.clone()),
            ),
        }
    }
    fn describe(&self) -> String {
        format!("Between {} and {}.", self.0, self.1)
    }
}

/// A string matching a regular expression (anchored by the caller's pattern).
pub struct Matches {
    pattern: String,
    /// Compiled on first use: a provider process builds every schema before it serves, and most
    /// processes never validate the attribute (compiling all patterns up front was a tenth of the
    /// time to the handshake).
    re: std::sync::OnceLock<regex_lite::Regex>,
    /// What a valid value looks like, in words, for the diagnostic.
    pub what: &'static str,
}

impl Matches {
    /// `pattern` is a constant of the program; an invalid one is a bug, caught when debug builds
    /// (the tests) construct the schema, so a release build degrades it to a pattern that matches
    /// nothing rather than panicking.
    pub fn new(pattern: &str, what: &'static str) -> Matches {
        debug_assert!(
            regex_lite::Regex::new(pattern).is_ok(),
            "invalid pattern {pattern:?}"
        );
        Matches {
            pattern: pattern.to_string(),
            re: std::sync::OnceLock::new(),
            what,
        }
    }

    fn re(&self) -> &regex_lite::Regex {
        self.re.get_or_init(|| {
            regex_lite::Regex::new(&self.pattern)
                .unwrap_or_else(|_| regex_lite::Regex::new("[^\\s\\S]").expect("literal"))
        })
    }
}

impl Validator for Matches {
    fn validate(&self, value: &Value, path: &AttrPath, diags: &mut Diagnostics) {
        let Some(s) = value.as_str() else { return };
        if !self.re().is_match(s) {
            diags.push(
                Diagnostic::error(
                    "Invalid attribute value",
                    format!("{path} is {s:?}; it must be {}.", self.what),
                )
                .at(path.clone()),
            );
        }
    }
    fn describe(&self) -> String {
        format!("Must be {}.", self.what)
    }
}

fn quoted(items: &[&str]) -> String {
    items
        .iter()
        .map(|s| format!("{s:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// An attribute or block is "set" when it is known, non-null, and for a block list, non-empty.
/// An unknown one is undecided: a `dynamic` block whose `for_each` reads a module variable is
/// unknown while Terraform validates the module, and the same check runs again at plan time
/// with the value known, so the validators below count only what is decided.
fn is_set(v: &Value) -> bool {
    match v {
        Value::Null | Value::Unknown(_) => false,
        Value::List(items) | Value::Set(items) => !items.is_empty(),
        _ => true,
    }
}

/// Exactly one of the named attributes or blocks must be set.
pub struct ExactlyOneOf(pub &'static [&'static str]);

impl BlockValidator for ExactlyOneOf {
    fn validate(&self, block: &Value, path: &AttrPath, diags: &mut Diagnostics) {
        let set: Vec<&str> = self
            .0
            .iter()
            .copied()
            .filter(|n| is_set(block.get(n)))
            .collect();
        let names = self
            .0
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ");
        let undecided = self.0.iter().any(|n| !block.get(n).is_known());
        match set.len() {
            1 => {}
            0 if undecided => {}
            0 => diags.push(
                Diagnostic::error(
                    "Missing required argument",
                    format!("Exactly one of {names} must be set; none is."),
                )
                .at(if path.0.is_empty() {
                    AttrPath::attr(self.0[0])
                } else {
                    path.clone()
                }),
            ),
            _ => diags.push(
                Diagnostic::error(
                    "Conflicting arguments",
                    format!(
                        "Exactly one of {names} must be set; {} are. Keep one.",
                        set.join(" and ")
                    ),
                )
                .at(path.with_attr(set[1])),
            ),
        }
    }
}

/// The named attributes or blocks may not be set together.
pub struct ConflictsWith(pub &'static [&'static str]);

impl BlockValidator for ConflictsWith {
    fn validate(&self, block: &Value, path: &AttrPath, diags: &mut Diagnostics) {
        let set: Vec<&str> = self
            .0
            .iter()
            .copied()
            .filter(|n| is_set(block.get(n)))
            .collect();
        if set.len() > 1 {
            diags.push(
                Diagnostic::error(
                    "Conflicting arguments",
                    format!(
                        "{} cannot be set together; keep one of them.",
                        set.join(" and ")
                    ),
                )
                .at(path.with_attr(set[1])),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(v: &dyn Validator, value: Value) -> Diagnostics {
        let mut d = Diagnostics::new();
        v.validate(&value, &AttrPath::attr("x"), &mut d);
        d
    }

    #[test]
    fn value_validators() {
        assert!(run(&OneOf(&["ash", "oak"]), "ash".into()).is_empty());
        let d = run(&OneOf(&["ash", "oak"]), "yew".into());
        assert!(d.0[0].detail.contains("\"ash\", \"oak\""), "{d:?}");
        assert_eq!(d.0[0].path, Some(AttrPath::attr("x")));
        assert!(run(&IntBetween(2, 48), Value::int(48)).is_empty());
        assert!(run(&IntBetween(2, 48), Value::int(49)).has_errors());
        assert!(run(&IntBetween(2, 48), Value::Number(crate::Number::Float(2.5))).has_errors());
        let m = Matches::new("^[a-z][a-z0-9]{0,11}$", "lowercase letters and digits");
        assert!(run(&m, "name1".into()).is_empty());
        assert!(run(&m, "Name".into()).0[0].detail.contains("lowercase"));
    }

    #[test]
    fn block_validators() {
        let one = ExactlyOneOf(&["ash", "oak"]);
        let mut d = Diagnostics::new();
        let both = Value::object([
            ("ash", Value::List(vec![Value::Object(Default::default())])),
            ("oak", Value::List(vec![Value::Object(Default::default())])),
        ]);
        one.validate(&both, &AttrPath::root(), &mut d);
        assert_eq!(d.0[0].path, Some(AttrPath::attr("oak")));
        let mut d = Diagnostics::new();
        let none = Value::object([("ash", Value::List(vec![])), ("oak", Value::Null)]);
        one.validate(&none, &AttrPath::root(), &mut d);
        assert!(d.0[0].detail.contains("none is"));
        let mut d = Diagnostics::new();
        one.validate(
            &Value::object([("ash", Value::UNKNOWN)]),
            &AttrPath::root(),
            &mut d,
        );
        assert!(d.is_empty());
        // Dynamic blocks of a module: all unknown while validating, decided at plan time.
        let mut d = Diagnostics::new();
        let dynamic = Value::object([
            ("ash", Value::UNKNOWN),
            ("oak", Value::UNKNOWN),
            ("elm", Value::UNKNOWN),
        ]);
        ExactlyOneOf(&["ash", "oak", "elm"]).validate(&dynamic, &AttrPath::root(), &mut d);
        ConflictsWith(&["ash", "oak", "elm"]).validate(&dynamic, &AttrPath::root(), &mut d);
        assert!(d.is_empty(), "{d:?}");
        // A known conflict is still one, whatever else is unknown.
        let mut d = Diagnostics::new();
        let two = Value::object([
            ("ash", Value::List(vec![Value::Object(Default::default())])),
            ("oak", Value::List(vec![Value::Object(Default::default())])),
            ("elm", Value::UNKNOWN),
        ]);
        ConflictsWith(&["ash", "oak", "elm"]).validate(&two, &AttrPath::root(), &mut d);
        assert_eq!(d.0.len(), 1, "{d:?}");
    }
}
