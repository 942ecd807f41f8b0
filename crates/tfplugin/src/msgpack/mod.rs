//! The msgpack encoding of values (cty's wire format, described in hashicorp/terraform's
//! docs/plugin-protocol/object-wire-format.md), driven by the schema's type in both directions.
//!
//! Encoding uses the `rmp` primitives. Decoding walks the bytes with its own bounds-checked
//! cursor over `rmp::Marker`: every length is checked against what remains before anything is
//! allocated, and nesting is bounded, so no byte string can make it panic or exhaust memory.

mod decode;
mod encode;
#[cfg(test)]
mod tests;

pub use decode::decode;
pub use encode::encode;

/// Why bytes are no value of the type, or a value does not fit its type: what is wrong, in words.
#[derive(Debug, Clone, PartialEq)]
pub struct CodecError(pub String);

impl std::fmt::Display for CodecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for CodecError {}

fn err<T>(msg: impl Into<String>) -> Result<T, CodecError> {
    Err(CodecError(msg.into()))
}
