//! The provider waits in one place: `crates/provider/src/operation.rs` (`poll_until`, `retry`,
//! `OpCtx::sleep`), which every wait goes through so that each ends at its `timeouts` deadline
//! with a diagnostic naming what it waited for, and at once when terraform stops the provider.
//! A hand-written sleep elsewhere in the provider's production code would wait past both; this
//! test refuses one. (`crates/provider/src/bounded.rs` holds a deadline timer, not a loop.) Test
//! code is everything from a file's first `#[cfg(test)]` on, and the files of `tests` modules.

use std::path::{Path, PathBuf};

/// The files that may call tokio's or std's sleep, and why.
const ALLOWED: &[(&str, &str)] = &[
    ("operation.rs", "the one wait loop and its sleep"),
    ("bounded.rs", "the deadline timer of a bounded future"),
];

#[test]
fn the_provider_sleeps_only_through_its_wait_helper() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../provider/src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    assert!(!files.is_empty(), "no source under {}", src.display());
    let mut found = Vec::new();
    for path in files {
        let rel = path
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let test_file = rel.ends_with("tests.rs") || rel.split('/').any(|c| c == "tests");
        if test_file || ALLOWED.iter().any(|(f, _)| *f == rel) {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let production = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (i, line) in production.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            if code.contains("sleep(") || code.contains("sleep_until(") {
                found.push(format!("  {rel}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "wait through crate::operation (poll_until, retry or OpCtx::sleep) instead:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_allowed_files_exist_and_sleep() {
    // A stale entry would let the next file of that name through.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../provider/src");
    for (file, why) in ALLOWED {
        assert!(!why.is_empty());
        let text = std::fs::read_to_string(src.join(file))
            .unwrap_or_else(|_| panic!("ALLOWED names {file}, which does not exist"));
        assert!(
            text.contains("sleep"),
            "{file} no longer sleeps: remove it from ALLOWED"
        );
    }
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().filter_map(Result::ok) {
        let p = e.path();
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}
