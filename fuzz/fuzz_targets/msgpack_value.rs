#![no_main]
// terraform's msgpack values: decode never panics, and whatever decodes re-encodes and decodes
// to the same value.
use libfuzzer_sys::fuzz_target;

#[path = "types.rs"]
mod types;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, bytes)) = data.split_first() else {
        return;
    };
    let ty = types::pick(selector);
    if let Ok(value) = tfplugin::msgpack::decode(bytes, &ty) {
        let again = tfplugin::msgpack::encode(&value, &ty).expect("a decoded value encodes");
        let back = tfplugin::msgpack::decode(&again, &ty).expect("our own encoding decodes");
        assert_eq!(back, value);
    }
});
