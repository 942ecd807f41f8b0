//! Shared by the benchmarks: each headline figure is also appended, as one JSON line, to the file
//! named by `FRACGPU_BENCH_FIGURES`, so that `scripts/bench` can print the figures of one run side
//! by side. Without the variable nothing is written.

use std::io::Write;

/// Records one figure: a stable key, the label shown in the table, the value, its unit and a note.
pub fn record(key: &str, label: &str, value: f64, unit: &str, note: &str) {
    let Some(path) = std::env::var_os("FRACGPU_BENCH_FIGURES") else {
        return;
    };
    let line = serde_json::json!({
        "key": key, "label": label, "value": value, "unit": unit, "note": note,
    });
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .expect("the figures file opens");
    writeln!(f, "{line}").expect("the figures file takes a line");
}
