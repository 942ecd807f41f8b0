//! The one error of the codec, apart from `mod.rs` so that the encoder and the decoder, which
//! `mod.rs` re-exports, need nothing from it.

/// Why bytes are no value of the type, or a value does not fit its type: what is wrong, in words.
#[derive(Debug, Clone, PartialEq)]
pub struct CodecError(pub String);

impl std::fmt::Display for CodecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for CodecError {}

pub(super) fn err<T>(msg: impl Into<String>) -> Result<T, CodecError> {
    Err(CodecError(msg.into()))
}
