//! Why a value does not read as a model: [`DecodeError`] (where, what was expected, what was
//! found) and the diagnostics it becomes, and [`Decoded`], what a handler does with a result.

use std::fmt;

use crate::diag::{AttrPath, Diagnostic, Diagnostics, Step};
use crate::value::Value;

/// What a value held where it did not fit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// Not known yet: normal in a plan.
    Unknown,
    /// Null where the model needs a value.
    Null,
    /// A value of another type or shape, described without its content when that is text
    /// (which may be a secret), e.g. "a string", "the number 2.5", "a list of 2".
    Other(String),
}

impl fmt::Display for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Found::Unknown => f.write_str("unknown"),
            Found::Null => f.write_str("null"),
            Found::Other(d) => f.write_str(d),
        }
    }
}

/// Why a value does not read as a model: where (the attribute path from the decoded value),
/// what the model expected there, and what was found.
#[derive(Clone, Debug, PartialEq)]
pub struct DecodeError {
    path: AttrPath,
    expected: &'static str,
    found: Found,
}

impl DecodeError {
    /// `v` read as something it is not: null, unknown, or another shape, at the value itself
    /// (the callers that hold it add their steps with [`DecodeError::under`]).
    pub fn new(expected: &'static str, v: &Value) -> DecodeError {
        let found = if !v.is_known() {
            Found::Unknown
        } else if v.is_null() {
            Found::Null
        } else {
            Found::Other(describe(v))
        };
        DecodeError {
            path: AttrPath::root(),
            expected,
            found,
        }
    }

    /// This error as the value that holds the one decoded sees it: `step` leads to it.
    pub fn under(mut self, step: Step) -> DecodeError {
        self.path.0.insert(0, step);
        self
    }

    /// The path of the attribute that did not fit, from the value decoded.
    pub fn path(&self) -> &AttrPath {
        &self.path
    }

    /// What the model expected there.
    pub fn expected(&self) -> &'static str {
        self.expected
    }

    /// What the value held there.
    pub fn found(&self) -> &Found {
        &self.found
    }

    /// Only not known yet: what a plan expects of a configuration, and no mismatch.
    pub fn is_unknown(&self) -> bool {
        self.found == Found::Unknown
    }

    /// The attribute as a detail names it; None for the decoded value itself.
    fn attribute(&self) -> Option<String> {
        (!self.path.0.is_empty()).then(|| format!("`{}`", self.path))
    }

    fn located(&self, d: Diagnostic) -> Diagnostic {
        if self.path.0.is_empty() {
            d
        } else {
            d.at(self.path.clone())
        }
    }

    /// The error diagnostic for a configuration or plan, which terraform checked against the
    /// schema: whatever does not fit is the provider's bug, so the detail says to report it.
    pub fn diagnostic(&self) -> Diagnostic {
        let detail = match self.found {
            Found::Unknown => format!(
                "{} is still unknown where the provider needs {} known. Terraform knows every \
                    value of the configuration at apply, so this is a bug in the provider's plan; \
                    please report it with this message.",
                self.attribute().unwrap_or_else(|| "The object".to_string()),
                self.expected
            ),
            _ => format!(
                "{} should be {}, but is {}. Terraform checked this value against the provider's \
                    schema, so the schema and the provider's model of it disagree: this is a bug \
                    in the provider; please report it with this message.",
                self.attribute().unwrap_or_else(|| "The object".to_string()),
                self.expected,
                self.found
            ),
        };
        self.located(Diagnostic::error("Unexpected value", detail))
    }

    /// The error diagnostic for a stored state, which another provider version may have
    /// written: the detail gives the fixes, the last being `reimport` (e.g. "re-import the pool
    /// (`terraform import` with its cloud ID)").
    pub fn state_diagnostic(&self, reimport: &str) -> Diagnostic {
        let detail = format!(
            "The state's {} should be {}, but is {}: another version of the provider wrote this \
                state, or it was edited by hand. Run `terraform apply -refresh-only` with the \
                provider version that wrote it, or {reimport}.",
            self.attribute().unwrap_or_else(|| "object".to_string()),
            self.expected,
            self.found
        );
        self.located(Diagnostic::error("Unreadable state", detail))
    }

    /// Of two errors in one value, the one to report: the first mismatch, else the first
    /// unknown.
    pub(super) fn worse(self, other: DecodeError) -> DecodeError {
        if self.is_unknown() && !other.is_unknown() {
            other
        } else {
            self
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.path.0.is_empty() {
            "value".to_string()
        } else {
            self.path.to_string()
        };
        write!(f, "{at}: expected {}, found {}", self.expected, self.found)
    }
}

impl std::error::Error for DecodeError {}

/// For a configuration or plan; see [`DecodeError::diagnostic`].
impl From<DecodeError> for Diagnostic {
    fn from(e: DecodeError) -> Diagnostic {
        e.diagnostic()
    }
}

/// A value's type and shape for a diagnostic; the text of a string is left out, as it may be
/// a secret.
fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Unknown(_) => "unknown".to_string(),
        Value::Bool(b) => format!("the bool {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(_) => "a string".to_string(),
        Value::List(v) => format!("a list of {}", v.len()),
        Value::Set(v) => format!("a set of {}", v.len()),
        Value::Tuple(v) => format!("a tuple of {}", v.len()),
        Value::Map(_) => "a map".to_string(),
        Value::Object(_) => "an object".to_string(),
        Value::Dynamic(_, inner) => describe(inner),
    }
}

/// What a handler does with a decoding result: the model, or `None` with the diagnostics the
/// rules of the module call for.
pub trait Decoded<T> {
    /// For a value that must fit whole (a plan at apply, a data source's configuration at
    /// read): `None` with an error diagnostic for any failure, an unknown included.
    fn or_report(self, diags: &mut Diagnostics) -> Option<T>;
    /// For a value read at plan time (a configuration in validation, a plan): `None` quietly
    /// while part of it is unknown, with an error diagnostic for a mismatch.
    fn or_report_mismatch(self, diags: &mut Diagnostics) -> Option<T>;
    /// For a stored state: `None` with [`DecodeError::state_diagnostic`].
    fn or_report_state(self, diags: &mut Diagnostics, reimport: &str) -> Option<T>;
}

impl<T> Decoded<T> for Result<T, DecodeError> {
    fn or_report(self, diags: &mut Diagnostics) -> Option<T> {
        self.map_err(|e| diags.push(e.diagnostic())).ok()
    }

    fn or_report_mismatch(self, diags: &mut Diagnostics) -> Option<T> {
        self.map_err(|e| {
            if !e.is_unknown() {
                diags.push(e.diagnostic());
            }
        })
        .ok()
    }

    fn or_report_state(self, diags: &mut Diagnostics, reimport: &str) -> Option<T> {
        self.map_err(|e| diags.push(e.state_diagnostic(reimport)))
            .ok()
    }
}
