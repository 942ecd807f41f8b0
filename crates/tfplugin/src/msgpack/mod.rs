//! The msgpack encoding of values (cty's wire format, described in hashicorp/terraform's
//! docs/plugin-protocol/object-wire-format.md), driven by the schema's type in both directions.
//!
//! Encoding uses the `rmp` primitives. Decoding walks the bytes with its own bounds-checked
//! cursor over `rmp::Marker`: every length is checked against what remains before anything is
//! allocated, and nesting is bounded, so no byte string can make it panic or exhaust memory.

mod decode;
mod encode;
mod error;
#[cfg(test)]
mod tests;

pub use decode::decode;
pub use encode::encode;
pub use error::CodecError;
