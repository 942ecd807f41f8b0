//! `fracgpu-sandbox`: local emulators of the cloud and Kubernetes APIs, and the quick-start demo.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("demo") => match fracgpu::demo::run() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("demo failed: {}", e.0);
                ExitCode::FAILURE
            }
        },
        _ => {
            eprintln!("Usage: fracgpu-sandbox demo");
            ExitCode::from(2)
        }
    }
}
