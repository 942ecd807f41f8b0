#![no_main]
// terraform's JSON values (state, raw state): decode never panics.
use libfuzzer_sys::fuzz_target;

#[path = "types.rs"]
mod types;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, bytes)) = data.split_first() else {
        return;
    };
    let _ = tfplugin::json::decode(bytes, &types::pick(selector));
});
