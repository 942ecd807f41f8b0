//! Links the provider binary on Linux as a position-dependent executable (`-no-pie`): the code
//! stays position-independent, but the linker fixes its addresses, so the dynamic loader has no
//! relocations to apply when terraform starts the provider (about 48,000 relative relocations in
//! a PIE of this size, about 200 without; terraform starts the provider two or three times per
//! command, and the benchmark `foundation` measures the start). Terraform and the providers
//! written in Go are linked the same way. What it costs: the executable's own code and data load
//! at a fixed address (shared libraries, stack and heap are still randomised).
fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo::rustc-link-arg-bin=terraform-provider-fracgpu=-no-pie");
    }
}
