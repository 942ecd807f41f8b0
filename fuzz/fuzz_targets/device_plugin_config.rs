#![no_main]
// The NVIDIA device plugin config parser, which reads what a cluster holds: never panics, and a
// config it accepts renders to a document it parses back to the same config.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(config) = gpu::device_plugin::parse(text) {
        if let Ok(rendered) = config.render() {
            let back = gpu::device_plugin::parse(&rendered).expect("a rendered config parses");
            assert_eq!(back, config);
        }
    }
});
