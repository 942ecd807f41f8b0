//! Attribute paths and diagnostics: how problems reach the user, pointing at the attribute.

use std::fmt;

/// One step of an attribute path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// An attribute or nested block of an object.
    Attr(String),
    /// An element of a map, by key.
    Key(String),
    /// An element of a list, by position (a block nested as a list included).
    Index(i64),
}

/// A path into a configuration value, e.g. `rule[0].port` or `labels["team"]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AttrPath(pub Vec<Step>);

impl AttrPath {
    /// The object itself.
    pub fn root() -> AttrPath {
        AttrPath(Vec::new())
    }
    /// A top-level attribute.
    pub fn attr(name: &str) -> AttrPath {
        AttrPath(vec![Step::Attr(name.to_string())])
    }
    /// A path from dotted attribute names, e.g. `"disk.size"`; a numeric segment is a list
    /// index (a block nested as a list is addressed `block[0].attr`).
    pub fn parse(dotted: &str) -> AttrPath {
        AttrPath(
            dotted
                .split('.')
                .filter(|s| !s.is_empty())
                .map(|s| match s.parse::<i64>() {
                    Ok(i) => Step::Index(i),
                    Err(_) => Step::Attr(s.to_string()),
                })
                .collect(),
        )
    }
    /// This path, then an attribute of the object it leads to.
    pub fn with_attr(&self, name: &str) -> AttrPath {
        let mut p = self.clone();
        p.0.push(Step::Attr(name.to_string()));
        p
    }
    pub(crate) fn with_key(&self, key: &str) -> AttrPath {
        let mut p = self.clone();
        p.0.push(Step::Key(key.to_string()));
        p
    }
    /// This path, then an element of the list it leads to.
    pub fn with_index(&self, i: usize) -> AttrPath {
        let mut p = self.clone();
        p.0.push(Step::Index(i as i64));
        p
    }
}

impl fmt::Display for AttrPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, step) in self.0.iter().enumerate() {
            match step {
                Step::Attr(a) if i == 0 => write!(f, "{a}")?,
                Step::Attr(a) => write!(f, ".{a}")?,
                Step::Key(k) => write!(f, "[{k:?}]")?,
                Step::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

/// How terraform takes a diagnostic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// The operation failed; terraform stops.
    Error,
    /// Shown, and the operation goes on.
    Warning,
}

/// A problem for the user, pointing at the attribute at fault where there is one.
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// A short fixed sentence, e.g. "Invalid port range".
    pub summary: String,
    /// The cause and the fix, listing valid values where there are few.
    pub detail: String,
    /// The attribute at fault; terraform shows the configuration line that sets it.
    pub path: Option<AttrPath>,
}

impl Diagnostic {
    /// An error not yet tied to an attribute (see [`Diagnostic::at`]).
    pub fn error(summary: impl Into<String>, detail: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            summary: summary.into(),
            detail: detail.into(),
            path: None,
        }
    }
    /// A warning not yet tied to an attribute.
    pub fn warning(summary: impl Into<String>, detail: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(summary, detail)
        }
    }
    /// The same diagnostic on the attribute at `path`.
    pub fn at(mut self, path: AttrPath) -> Diagnostic {
        self.path = Some(path);
        self
    }
}

/// The diagnostics of one call, in the order they were found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    /// None yet.
    pub fn new() -> Diagnostics {
        Diagnostics(Vec::new())
    }
    /// Adds one after those found before.
    pub fn push(&mut self, d: Diagnostic) {
        self.0.push(d);
    }
    /// Adds those of another call (e.g. an operation's own) after these.
    pub fn extend(&mut self, other: Diagnostics) {
        self.0.extend(other.0);
    }
    /// Whether any is an error, so the operation failed.
    pub fn has_errors(&self) -> bool {
        self.0.iter().any(|d| d.severity == Severity::Error)
    }
    /// Whether there is none, not even a warning.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<Diagnostic> for Diagnostics {
    fn from(d: Diagnostic) -> Diagnostics {
        Diagnostics(vec![d])
    }
}

impl IntoIterator for Diagnostics {
    type Item = Diagnostic;
    type IntoIter = std::vec::IntoIter<Diagnostic>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_print_like_terraform_addresses() {
        let p = AttrPath::attr("rule").with_index(0).with_attr("port");
        assert_eq!(p.to_string(), "rule[0].port");
        assert_eq!(
            AttrPath::attr("labels").with_key("team").to_string(),
            "labels[\"team\"]"
        );
        assert_eq!(
            AttrPath::parse("disk.0.size"),
            AttrPath::attr("disk").with_index(0).with_attr("size")
        );
    }
}
