//! A problem with a pool's declaration, as the renderer and the provisioners find it: on the
//! argument it names, never a Terraform type, so that every check stays pure. The resource's
//! model turns each into a diagnostic on that argument. Both sides use it, so it has a module of
//! its own.

use gpu::DomainError;

/// A problem with the declaration, on the argument it names (a dotted path such as `limit_gpus`,
/// or a domain error that names its own field).
#[derive(Clone, Debug, PartialEq)]
pub enum Problem {
    Argument {
        attribute: &'static str,
        summary: &'static str,
        detail: String,
    },
    Domain(DomainError),
}

pub(crate) fn problem(attribute: &'static str, summary: &'static str, detail: String) -> Problem {
    Problem::Argument {
        attribute,
        summary,
        detail,
    }
}
