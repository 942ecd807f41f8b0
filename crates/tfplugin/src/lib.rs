//! Terraform's plugin protocol and data model, independent of the product: it knows nothing of
//! what a provider manages, only what terraform asks of any provider.
//!
//! - The data model: values and types, their msgpack and JSON codecs, attribute paths and
//!   diagnostics, schemas with their validators, and the plan framework.
//! - [`api`]: what a provider, resource, data source and function answer; handlers see only
//!   these values and diagnostics, never a protobuf type.
//! - [`server`]: the go-plugin handshake and AutoMTLS, the tfplugin6 gRPC service and go-plugin's
//!   companion services, and the conversions between protobuf messages and the model.

#![warn(missing_docs)]

pub mod api;
pub mod diag;
pub mod json;
pub mod msgpack;
pub mod object;
pub mod plan;
#[cfg(test)]
mod properties;
pub mod schema;
pub mod server;
pub mod shape;
pub mod types;
pub mod validators;
pub mod value;

pub use diag::{AttrPath, Diagnostic, Diagnostics, Severity, Step};
pub use msgpack::CodecError;
pub use object::DecodeError;
pub use schema::{Attribute, Block, Nesting, Schema};
pub use types::Type;
pub use value::{Number, Value};
