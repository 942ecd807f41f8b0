//! Terraform's data model, independent of the wire protocol and of the product: values and
//! types, their msgpack and JSON codecs, attribute paths and diagnostics, schemas with their
//! validators, and the plan framework.

pub mod api;
pub mod diag;
pub mod json;
pub mod msgpack;
pub mod plan;
pub mod schema;
pub mod types;
pub mod validators;
pub mod value;

pub use diag::{AttrPath, Diagnostic, Diagnostics, Severity, Step};
pub use msgpack::CodecError;
pub use schema::{Attribute, Block, Nesting, Schema};
pub use types::Type;
pub use value::{Number, Value};
