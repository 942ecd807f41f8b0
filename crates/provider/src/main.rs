//! The Terraform plugin binary: parse flags, serve the provider.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--version" || a == "-version") {
        println!("terraform-provider-fracgpu {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    let debug = args.iter().any(|a| a == "--debug" || a == "-debug");
    if let Some(unknown) = args
        .iter()
        .find(|a| !matches!(a.as_str(), "--debug" | "-debug"))
    {
        eprintln!(
            "Unknown argument {unknown:?}. Usage: terraform-provider-fracgpu [--debug | --version]"
        );
        return ExitCode::from(2);
    }
    tfplugin::server::log::init(&["tfplugin", "fracgpu", "terraform_provider_fracgpu"]);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("Could not start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let provider = fracgpu::provider::FracGpu::new();
    match runtime.block_on(tfplugin::server::serve(
        provider,
        tfplugin::server::Options {
            debug,
            address: "registry.terraform.io/fracgpu/fracgpu",
        },
    )) {
        Ok(()) => {
            // Leave at once: background tasks (open streams) must not hold the process.
            runtime.shutdown_timeout(std::time::Duration::from_millis(100));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{}", e.0);
            ExitCode::FAILURE
        }
    }
}
