//! The house stays small as it grows: no production file over 650 lines, no function over 100
//! lines, checked on every crate of the workspace by the `cargo test` that CI runs, as
//! `module_loops` checks imports.
//!
//! What counts. Production code is every `.rs` file under `crates/*/src` and every item in it,
//! except test code: an item whose `cfg` needs `test` (`#[cfg(test)] mod tests { .. }`, or a
//! `#[cfg(test)] mod tests;` and the files under it). A file's size is its lines minus the lines of
//! its test items. A function's size runs from its `fn` line to its closing brace, free functions,
//! methods and trait methods with a body alike (a function inside a function counts on its own and
//! within its parent).
//!
//! Why these limits. Past them a reader needs the file's outline to find anything, and a function
//! holds several steps that each deserve a name. The only exceptions are declarative tables
//! (a schema, a table of columns): long because they list, not because they do several things.
//! Each is named in [`TABLES`] with the reason; a new one needs a line there and a reviewer.
//!
//! No function anywhere in the workspace, tests included, is allowed clippy's
//! `too_many_arguments`: a long list of arguments gets a struct that names them.
//!
//! `cargo test -p fracgpu-testkit --test house_sizes -- --nocapture` prints the largest files and
//! functions of the workspace.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use syn::spanned::Spanned;
use syn::visit::Visit;

const MAX_FILE_LINES: usize = 650;
const MAX_FN_LINES: usize = 100;

/// Functions that are declarative tables (file under crates/, function name, why).
const TABLES: &[(&str, &str, &str)] = &[
    (
        "provider/src/resources/karpenter_nodepool/schema.rs",
        "schema",
        "the resource's schema: one entry per attribute and block",
    ),
    (
        "provider/src/resources/nodepool/schema.rs",
        "schema",
        "the resource's schema: one entry per attribute and block",
    ),
    (
        "sandbox/src/kube/table.rs",
        "table",
        "kubectl's columns per kind, as the server's Table responses list them",
    ),
];

#[test]
fn no_production_file_over_650_lines_and_no_function_over_100() {
    let root = repo_root();
    let (files, fns) = measure(&root);
    let mut failures = String::new();
    for (lines, file) in files.iter().rev().take_while(|(n, _)| *n > MAX_FILE_LINES) {
        failures.push_str(&format!(
            "  {file}: {lines} production lines (at most {MAX_FILE_LINES})\n"
        ));
    }
    for (lines, file, name, at) in fns.iter().rev() {
        if *lines <= MAX_FN_LINES {
            break;
        }
        if TABLES.iter().any(|(f, n, _)| f == file && n == name) {
            continue;
        }
        failures.push_str(&format!(
            "  {file}:{at} fn {name}: {lines} lines (at most {MAX_FN_LINES})\n"
        ));
    }
    println!("largest production files:");
    for (lines, file) in files.iter().rev().take(10) {
        println!("  {lines:5} {file}");
    }
    println!("longest functions:");
    for (lines, file, name, at) in fns.iter().rev().take(10) {
        println!("  {lines:5} {file}:{at} {name}");
    }
    assert!(
        failures.is_empty(),
        "split these by meaning (CONTRIBUTING.md, \"Layout\"):\n{failures}"
    );
}

/// A function that needs eight arguments needs a struct that says what they are, in tests too.
#[test]
fn no_function_is_allowed_too_many_arguments() {
    let crates = repo_root().join("crates");
    let mut sources = Vec::new();
    walk(&crates, &mut sources);
    let lint = ["clippy", "::", "too_many_arguments"].concat();
    let found: Vec<String> = sources
        .iter()
        .filter(|p| !p.components().any(|c| c.as_os_str() == "target"))
        .filter(|p| std::fs::read_to_string(p).is_ok_and(|t| t.contains(&lint)))
        .map(|p| p.strip_prefix(&crates).unwrap().display().to_string())
        .collect();
    assert!(found.is_empty(), "allow({lint}) in: {found:?}");
}

#[test]
fn every_table_named_exists_and_is_long() {
    // A stale exception would hide the next function of that name.
    let (_, fns) = measure(&repo_root());
    for (file, name, why) in TABLES {
        assert!(!why.is_empty());
        let found = fns.iter().find(|(_, f, n, _)| f == file && n == name);
        let Some((lines, ..)) = found else {
            panic!("TABLES names {file} fn {name}, which does not exist");
        };
        assert!(
            *lines > MAX_FN_LINES,
            "TABLES names {file} fn {name}, which is {lines} lines: remove it from TABLES"
        );
    }
}

#[test]
fn the_measure_leaves_test_code_out_and_counts_methods() {
    let text = "fn a() {\n    1;\n}\n\nimpl X {\n    fn b(&self) {\n        2;\n        3;\n    }\n}\n\
                \n#[cfg(test)]\nmod tests {\n    fn c() {\n        4;\n    }\n}\n#[cfg(test)]\nmod more;\n";
    let file = syn::parse_file(text).unwrap();
    let mut m = Measure::default();
    m.visit_file(&file);
    let mut found: Vec<(String, usize)> = m.fns.iter().map(|(n, l, _)| (n.clone(), *l)).collect();
    found.sort();
    assert_eq!(found, vec![("a".to_string(), 3), ("b".to_string(), 4)]);
    assert_eq!(m.test_lines, 8);
    assert_eq!(
        m.test_modules,
        vec!["more".to_string()].into_iter().collect()
    );
}

/// The workspace's root, two folders above this crate.
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root")
}

type FileSize = (usize, String);
type FnSize = (usize, String, String, usize);

/// Production lines per file and lines per function, each sorted ascending.
fn measure(root: &Path) -> (Vec<FileSize>, Vec<FnSize>) {
    let crates = root.join("crates");
    let mut sources = Vec::new();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&crates)
        .expect("crates/")
        .filter_map(|e| e.ok().map(|e| e.path().join("src")))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for d in &dirs {
        walk(d, &mut sources);
    }
    assert!(!sources.is_empty(), "no source under {}", crates.display());
    // First pass: the files that are test modules (declared `#[cfg(test)] mod x;`), and below.
    let mut parsed = Vec::new();
    let mut test_roots: BTreeSet<PathBuf> = BTreeSet::new();
    for path in sources {
        let text = std::fs::read_to_string(&path).unwrap();
        let file = syn::parse_file(&text)
            .unwrap_or_else(|e| panic!("{} does not parse: {e}", path.display()));
        let mut m = Measure::default();
        m.visit_file(&file);
        for name in &m.test_modules {
            let dir = children_dir(&path);
            test_roots.insert(dir.join(format!("{name}.rs")));
            test_roots.insert(dir.join(name));
        }
        parsed.push((path, text.lines().count(), m));
    }
    let mut files = Vec::new();
    let mut fns = Vec::new();
    for (path, lines, m) in parsed {
        if test_roots.iter().any(|t| path.starts_with(t)) {
            continue;
        }
        let rel = path
            .strip_prefix(&crates)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        files.push((lines - m.test_lines, rel.clone()));
        for (name, n, at) in m.fns {
            fns.push((n, rel.clone(), name, at));
        }
    }
    files.sort();
    fns.sort();
    (files, fns)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// Where `mod x;` in this file looks for x: beside a crate root or mod.rs, else in the folder
/// named after the file (as rustc maps modules to files).
fn children_dir(file: &Path) -> PathBuf {
    let parent = file.parent().unwrap().to_path_buf();
    match file.file_stem().and_then(|s| s.to_str()) {
        Some("mod" | "lib" | "main") => parent,
        Some(stem) if parent.ends_with("bin") => parent.join(stem),
        Some(stem) => parent.join(stem),
        None => parent,
    }
}

/// One file's functions (name, lines, first line) and test code.
#[derive(Default)]
struct Measure {
    fns: Vec<(String, usize, usize)>,
    /// Lines of the items whose cfg needs `test`.
    test_lines: usize,
    /// Modules declared without a body under a test cfg: their files are test code.
    test_modules: BTreeSet<String>,
}

impl Measure {
    fn function(&mut self, name: &syn::Ident, sig: Span, body: &syn::Block) {
        let (from, to) = (sig.start().line, body.brace_token.span.close().end().line);
        self.fns.push((name.to_string(), to - from + 1, from));
    }
}

type Span = proc_macro2::Span;

/// Whether the attributes make the item test code: `#[cfg(test)]`, or a cfg whose every branch
/// needs test (`all(test, ..)`).
fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.meta.require_list().is_ok_and(|l| {
                let t = l.tokens.to_string();
                t == "test" || t.starts_with("all (test") || t.starts_with("all(test")
            })
    })
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        _ => &[],
    }
}

impl<'a> Visit<'a> for Measure {
    fn visit_item(&mut self, item: &'a syn::Item) {
        let attrs = item_attrs(item);
        if is_test(attrs) {
            let start = attrs
                .first()
                .map_or(item.span().start().line, |a| a.span().start().line);
            self.test_lines += item.span().end().line - start + 1;
            if let syn::Item::Mod(m) = item
                && m.content.is_none()
            {
                self.test_modules.insert(m.ident.to_string());
            }
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_item_fn(&mut self, f: &'a syn::ItemFn) {
        self.function(&f.sig.ident, f.sig.span(), &f.block);
        syn::visit::visit_item_fn(self, f);
    }

    fn visit_impl_item_fn(&mut self, f: &'a syn::ImplItemFn) {
        if is_test(&f.attrs) {
            return;
        }
        self.function(&f.sig.ident, f.sig.span(), &f.block);
        syn::visit::visit_impl_item_fn(self, f);
    }

    fn visit_trait_item_fn(&mut self, f: &'a syn::TraitItemFn) {
        if let Some(body) = &f.default {
            self.function(&f.sig.ident, f.sig.span(), body);
        }
        syn::visit::visit_trait_item_fn(self, f);
    }
}
