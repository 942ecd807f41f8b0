//! Compiles proto/ with protox (a protobuf compiler in Rust), so a build needs no `protoc`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "../../proto/tfplugin6.proto",
        "../../proto/plugin.proto",
        "../../proto/health.proto",
    ];
    for f in files {
        println!("cargo:rerun-if-changed={f}");
    }
    let descriptors = protox::compile(files, ["../../proto"])?;
    tonic_prost_build::configure()
        .build_client(true) // the protocol tests speak to the server as terraform would
        .build_server(true)
        .compile_fds(descriptors)?;
    Ok(())
}
