//! A comment or a doc that names a Rust file that is not there sends its reader nowhere, and such
//! names go stale without anyone noticing whenever a file moves. This fails listing each one.
//!
//! What it reads: the files git tracks that people read as text: `.rs` files (their comments: what
//! follows the first `//` of a line that is not a URL's), `.md`, `.toml` and `.sh` files,
//! everything under scripts/, templates/ and docs/, and .ci/run.
//!
//! What a reference is: a word that ends in `.rs` and is made of letters, digits, `_`, `-`, `.` and
//! `/`, such as `<name>.rs` or `<dir>/<name>.rs`; the word ends there when the next character is not
//! one of those or is a `.` that ends a sentence. These are not references: a word right after `*`,
//! `<..>`, `{..}` or `$` (a pattern or a placeholder), a word after `:` (part of a URL), a word
//! followed by `/` (a folder or a host, as in docs.rs/), and the bare conventional names lib.rs,
//! main.rs, mod.rs and build.rs, which name the convention, not one file.
//!
//! Where it may be: a reference holds when git tracks a file at that path taken relative to the
//! referring file's folder, to its crate's src/, to its crate's root (the nearest folder above the
//! referring file with a Cargo.toml), or to the repository root.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

#[test]
fn every_rust_file_named_in_a_comment_or_doc_exists() {
    let root = repo_root();
    let tracked = tracked_files(&root);
    let set: BTreeSet<&str> = tracked.iter().map(String::as_str).collect();
    let mut dangling = Vec::new();
    let mut checked = 0;
    for file in tracked.iter().filter(|f| scanned(f)) {
        let Ok(text) = std::fs::read_to_string(root.join(file)) else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            let text = if file.ends_with(".rs") {
                match comment(line) {
                    Some(c) => c,
                    None => continue,
                }
            } else {
                line
            };
            for r in references(text) {
                checked += 1;
                if !resolves(file, &r, &set) {
                    dangling.push(format!("{file}:{}: {r}", n + 1));
                }
            }
        }
    }
    println!("{checked} references to Rust files checked");
    assert!(
        dangling.is_empty(),
        "comments and docs that name a Rust file that does not exist (fix the name, or say it \
         without one):\n{}",
        dangling.join("\n")
    );
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root")
}

/// The files git tracks, as paths from the repository root. Under CI a checkout without git fails
/// here rather than passing on nothing.
fn tracked_files(root: &Path) -> Vec<String> {
    let out = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(root)
        .output()
        .expect("git ls-files: git must be on the PATH");
    assert!(out.status.success(), "git ls-files failed: {out:?}");
    let files: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .split('\0')
        .filter(|f| !f.is_empty())
        .map(str::to_string)
        .collect();
    assert!(
        files.iter().any(|f| f == "Cargo.toml"),
        "git ls-files listed no Cargo.toml at {}",
        root.display()
    );
    files
}

/// The comment of a line of Rust: what follows the first `//` that is not a URL's.
fn comment(line: &str) -> Option<&str> {
    line.match_indices("//")
        .find(|(i, _)| !line[..*i].ends_with(':'))
        .map(|(i, _)| &line[i + 2..])
}

fn scanned(file: &str) -> bool {
    [".rs", ".md", ".toml", ".sh"]
        .iter()
        .any(|ext| file.ends_with(ext))
        || ["scripts/", "templates/", "docs/"]
            .iter()
            .any(|dir| file.starts_with(dir))
        || file == ".ci/run"
}

/// The words of `text` that name a Rust file (see the rules above).
fn references(text: &str) -> Vec<String> {
    let is_word = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/');
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i + 3 <= chars.len() {
        if chars[i..i + 3] != ['.', 'r', 's'] {
            i += 1;
            continue;
        }
        let end = i + 3;
        let next = chars.get(end).copied();
        let ends = match next {
            None => true,
            Some('.') => chars.get(end + 1).is_none_or(|c| !is_word(*c)),
            Some(c) => !is_word(c),
        };
        if !ends {
            i += 1;
            continue;
        }
        let mut start = i;
        while start > 0 && is_word(chars[start - 1]) {
            start -= 1;
        }
        let word: String = chars[start..end].iter().collect();
        let before = start.checked_sub(1).map(|b| chars[b]);
        let word = word.trim_start_matches(['/', '-']);
        let name = word.rsplit('/').next().unwrap_or(word);
        let placeholder = matches!(before, Some('*' | '>' | '}' | '$' | ':'));
        let convention =
            word == name && ["lib.rs", "main.rs", "mod.rs", "build.rs"].contains(&name);
        if !placeholder && !convention && name.len() > 3 && !name.starts_with('.') {
            out.push(word.to_string());
        }
        i = end;
    }
    out
}

/// Whether `reference`, written in `file`, names a tracked file.
fn resolves(file: &str, reference: &str, tracked: &BTreeSet<&str>) -> bool {
    let dir = parent(file);
    let mut crate_root = dir;
    while !crate_root.is_empty() && !tracked.contains(join(crate_root, "Cargo.toml").as_str()) {
        crate_root = parent(crate_root);
    }
    [
        dir.to_string(),
        join(crate_root, "src"),
        crate_root.to_string(),
        String::new(),
    ]
    .iter()
    .filter_map(|base| normalize(&join(base, reference)))
    .any(|p| tracked.contains(p.as_str()))
}

fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(d, _)| d)
}

fn join(dir: &str, rest: &str) -> String {
    if dir.is_empty() {
        rest.to_string()
    } else {
        format!("{dir}/{rest}")
    }
}

/// `a/./b/../c` as `a/c`; None when it climbs out of the repository.
fn normalize(path: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for p in path.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

/// The rules on their own, so that the test cannot pass by finding nothing.
mod rules {
    use super::*;

    #[test]
    fn what_counts_as_a_reference() {
        let text = "see tests/common/tools.rs, and `x.rs`. Not *.rs, <name>.rs, {n}.rs, \
                    https://example.org/a/b.rs, docs.rs/syn, mod.rs, rstrip() or foo.rsx; \
                    but src/mod.rs and ./y.rs are";
        assert_eq!(
            references(text),
            ["tests/common/tools.rs", "x.rs", "src/mod.rs", "./y.rs"]
        );
    }

    #[test]
    fn comments_of_rust_lines() {
        assert_eq!(
            comment("let u = \"https://x\"; // see a.md"),
            Some(" see a.md")
        );
        assert_eq!(comment("//! the crate"), Some("! the crate"));
        assert_eq!(comment("let u = \"https://x/b.rs\";"), None);
    }

    #[test]
    fn where_a_reference_may_be() {
        let tracked: BTreeSet<&str> = [
            "Cargo.toml",
            "crates/k/Cargo.toml",
            "crates/k/src/a/b.rs",
            "crates/k/src/c.rs",
            "crates/k/tests/t/main.rs",
            "scripts/x.rs",
        ]
        .into_iter()
        .collect();
        let from = "crates/k/src/a/mod.rs";
        for found in ["b.rs", "c.rs", "tests/t/main.rs", "scripts/x.rs", "../c.rs"] {
            assert!(resolves(from, found, &tracked), "{found}");
        }
        for missing in ["t/main.rs", "d.rs", "../../../../../x.rs", "src/b.rs"] {
            assert!(!resolves(from, missing, &tracked), "{missing}");
        }
    }
}
