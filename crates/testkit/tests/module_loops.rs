//! No module imports a module that imports it back, directly or through others (DESIGN.md, habit
//! 12), checked on every crate of the workspace by the `cargo test` that CI runs.
//!
//! Why a checker of our own: `cargo modules dependencies --acyclic` answers the same question, but
//! cargo-modules compiles rust-analyzer's crates, many minutes on a 2-core machine and again on
//! every CI run on a clean machine. This one reads the sources with `syn`, which the workspace
//! already depends on for its proc macros (one more build of it, seconds), and runs in about a
//! second.
//!
//! What it reads. Each target of a crate (its lib.rs, its main.rs, the files of src/bin/) is a
//! tree of its own. Files map to modules as rustc maps them: `mod x;` in a crate root or a mod.rs
//! is `<x>.rs` or `<x>/mod.rs` beside it, in any other `<foo>.rs` it is under `<foo>/`; `#[path]`
//! is taken from the declaring file's folder (or the inline modules' folders inside an inline
//! module); an inline `mod x { }` is a module of its own.
//!
//! What is an edge. Module M depends on N when M's code names something of N: a `use` (every leaf
//! of a braced tree; a glob is an edge to the module it opens), or any path in M's items, types,
//! expressions, patterns, attributes and macro bodies. A path that starts with `crate::`,
//! `super::`, `self::`, a child module or a name M imports is resolved as Rust 2021 resolves it, to
//! the deepest module it names. A name that a module only re-exports is followed to where the
//! re-export points: `crate::World` is an edge to the module that defines `World`, while the
//! re-export `pub use world::World` in the root is itself an edge from the root to `world`. A
//! `mod x;` declaration is not an edge, nor is a `use` that imports a module by name (what the code
//! then names through it is); paths into other crates and to local bindings are not either. So a
//! mod.rs that only re-exports is a facade that others see through.
//!
//! Test code is left out. A `#[cfg(test)] mod tests` child that uses its parent's items is the
//! normal Rust pattern, and the tests/ and benches/ folders are crates of their own that only use
//! the public API; so every module or item whose cfg needs `test` is a leaf left out of the graph,
//! with everything inside it. Everything else counts, including a parent's mod.rs that calls into
//! a child that uses the parent's own items through `super::`: that is a loop, and the fix is to
//! move the shared items into a module of their own.
//!
//! A loop is a strongly connected component of more than one module. Each is listed as a chain
//! that passes through all its modules, with one offending reference (file:line) per edge.
//! `cargo test -p fracgpu-testkit --test module_loops -- --nocapture` prints, per crate, the
//! number of modules, edges and loops; with FRACGPU_MODULE_EDGES=<crate> (as printed, e.g.
//! `sandbox`) it also lists that crate's every edge, for untangling one.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

#[test]
fn no_module_imports_a_module_that_imports_it_back() {
    let root = repo_root();
    // Per crate: the loops of all its targets, listed.
    let mut found: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (krate, target, file) in targets(&root) {
        let tree = Tree::load(&Disk, &file).unwrap_or_else(|e| panic!("{e}"));
        let graph = tree.graph();
        let loops = graph.loops();
        let label = match target.as_str() {
            "lib" => krate.clone(),
            bin => format!("{krate} (bin {bin})"),
        };
        println!(
            "{label}: {} modules, {} edges, {} loops",
            tree.modules.len(),
            graph.edges.len(),
            loops.len()
        );
        if std::env::var("FRACGPU_MODULE_EDGES").is_ok_and(|c| c == label) {
            for (&(from, to), line) in &graph.edges {
                let file = tree.modules[from].file.strip_prefix(&root).unwrap();
                let (from, to) = (tree.name(from), tree.name(to));
                println!("    {from} -> {to}   ({}:{line})", file.display());
            }
        }
        found.entry(krate).or_default().extend(
            loops
                .iter()
                .map(|l| format!("{label}: {}", graph.describe(&tree, l, &root))),
        );
    }
    let mut failures = String::new();
    // No crate may have one.
    for (krate, loops) in &found {
        if !loops.is_empty() {
            failures.push_str(&format!("{krate} has {} module loops:\n", loops.len()));
            for l in loops {
                failures.push_str(l);
            }
        }
    }
    assert!(
        failures.is_empty(),
        "modules that import a module that imports them back (DESIGN.md, habit 12):\n{failures}"
    );
}

/// The workspace's root, two folders above this crate.
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root")
}

/// (crate folder name, target, root file) of every library and binary under crates/*/src.
fn targets(root: &Path) -> Vec<(String, String, PathBuf)> {
    let mut out = Vec::new();
    let mut crates: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .expect("crates/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("src").is_dir())
        .collect();
    crates.sort();
    for dir in crates {
        let krate = dir.file_name().unwrap().to_string_lossy().into_owned();
        let src = dir.join("src");
        for (target, name) in [("lib", "lib"), ("main", "main")] {
            let file = src.join(name).with_extension("rs");
            if file.is_file() {
                out.push((krate.clone(), target.to_string(), file));
            }
        }
        if let Ok(bins) = std::fs::read_dir(src.join("bin")) {
            let mut bins: Vec<PathBuf> = bins.filter_map(|e| e.ok().map(|e| e.path())).collect();
            bins.sort();
            for b in bins {
                let file = if b.is_dir() {
                    b.join("main").with_extension("rs")
                } else {
                    b.clone()
                };
                let name = b.file_stem().unwrap().to_string_lossy().into_owned();
                out.push((krate.clone(), name, file));
            }
        }
    }
    assert!(!out.is_empty(), "no crate found under {}", root.display());
    out
}

/// Where the checker reads sources from: the disk, or a tree in memory for its own tests.
trait Source {
    fn read(&self, path: &Path) -> Option<String>;
}

struct Disk;

impl Source for Disk {
    fn read(&self, path: &Path) -> Option<String> {
        std::fs::read_to_string(path).ok()
    }
}

impl Source for BTreeMap<PathBuf, String> {
    fn read(&self, path: &Path) -> Option<String> {
        self.get(path).cloned()
    }
}

struct Module {
    /// Names from the crate root (empty for the root).
    path: Vec<String>,
    /// The file that holds it (for an inline module, the file it is written in).
    file: PathBuf,
    parent: Option<usize>,
    children: BTreeMap<String, usize>,
    /// Names of the items it defines.
    items: BTreeSet<String>,
    /// Its own top-level `use` leaves, through which its names resolve.
    imports: Vec<Import>,
    /// Every path its code names.
    refs: Vec<Ref>,
}

struct Import {
    /// The name it brings in; None for a glob or `as _`.
    name: Option<String>,
    glob: bool,
    path: Vec<String>,
}

struct Ref {
    path: Vec<String>,
    line: usize,
    /// From a `use`, where one segment may name a module; elsewhere a lone name is a value or a
    /// type, never a module.
    in_use: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Found {
    Module(usize),
    /// An item that lives in this module (or that this crate only sees through it).
    Item(usize),
}

impl Found {
    fn module(self) -> usize {
        match self {
            Found::Module(m) | Found::Item(m) => m,
        }
    }
}

struct Tree {
    modules: Vec<Module>,
}

impl Tree {
    fn load(src: &dyn Source, root_file: &Path) -> Result<Tree, String> {
        let mut tree = Tree {
            modules: Vec::new(),
        };
        let items = parse(src, root_file)?;
        tree.modules.push(Module::new(Vec::new(), root_file, None));
        let dir = root_file.parent().unwrap_or(Path::new(""));
        tree.fill(src, 0, &items, dir, dir, root_file)?;
        Ok(tree)
    }

    /// Reads the items of module `m`. `child_dir` is where its `mod x;` files are, `path_base`
    /// what a `#[path]` is relative to.
    fn fill(
        &mut self,
        src: &dyn Source,
        m: usize,
        items: &[syn::Item],
        child_dir: &Path,
        path_base: &Path,
        file: &Path,
    ) -> Result<(), String> {
        let mut collector = Collector::default();
        for item in items {
            if needs_test(item_attrs(item)) {
                continue;
            }
            let syn::Item::Mod(im) = item else {
                if let syn::Item::Use(u) = item {
                    for leaf in use_leaves(&u.tree) {
                        self.modules[m].imports.push(Import {
                            name: leaf.name,
                            glob: leaf.glob,
                            path: leaf.path,
                        });
                    }
                }
                if let Some(name) = defined_name(item) {
                    self.modules[m].items.insert(name);
                }
                collector.visit_item(item);
                continue;
            };
            let name = im.ident.to_string();
            let mut path = self.modules[m].path.clone();
            path.push(name.clone());
            let dir = child_dir.join(&name);
            match &im.content {
                Some((_, inner)) => {
                    let child = self.add(Module::new(path, file, Some(m)), m, &name);
                    self.fill(src, child, inner, &dir, &dir, file)?;
                }
                None => {
                    let (child_file, grand_dir) = match path_attr(&im.attrs) {
                        Some(p) => {
                            let f = path_base.join(p);
                            let d = if f.file_name().is_some_and(|n| n == "mod.rs") {
                                f.parent().unwrap_or(Path::new("")).to_path_buf()
                            } else {
                                f.with_extension("")
                            };
                            (f, d)
                        }
                        None => {
                            let flat = child_dir.join(format!("{name}.rs"));
                            let nested = dir.join("mod.rs");
                            let f = if src.read(&flat).is_some() {
                                flat
                            } else {
                                nested
                            };
                            (f, dir.clone())
                        }
                    };
                    let inner = parse(src, &child_file).map_err(|e| {
                        format!("{e} (module {name} declared in {})", file.display())
                    })?;
                    let child = self.add(Module::new(path, &child_file, Some(m)), m, &name);
                    let base = child_file.parent().unwrap_or(Path::new("")).to_path_buf();
                    self.fill(src, child, &inner, &grand_dir, &base, &child_file)?;
                }
            }
        }
        self.modules[m].refs.extend(collector.refs);
        Ok(())
    }

    fn add(&mut self, module: Module, parent: usize, name: &str) -> usize {
        self.modules.push(module);
        let id = self.modules.len() - 1;
        self.modules[parent].children.insert(name.to_string(), id);
        id
    }

    fn name(&self, m: usize) -> String {
        let p = &self.modules[m].path;
        if p.is_empty() {
            "crate".into()
        } else {
            format!("crate::{}", p.join("::"))
        }
    }

    /// What `path`, written in module `from`, names.
    fn resolve(
        &self,
        from: usize,
        path: &[String],
        seen: &mut BTreeSet<(usize, String)>,
    ) -> Option<Found> {
        let (first, mut rest) = path.split_first()?;
        let start = match first.as_str() {
            "crate" => Found::Module(0),
            "self" => Found::Module(from),
            "super" => {
                let mut m = self.modules[from].parent?;
                while rest.first().is_some_and(|s| s == "super") {
                    m = self.modules[m].parent?;
                    rest = &rest[1..];
                }
                Found::Module(m)
            }
            "Self" => return None,
            name => self.member(from, name, seen)?,
        };
        let mut cur = start;
        for seg in rest {
            let Found::Module(m) = cur else { break };
            if seg == "*" || seg == "self" {
                break;
            }
            cur = self.member(m, seg, seen).unwrap_or(Found::Item(m));
        }
        Some(cur)
    }

    /// What `name` is in module `m`: a child, an item of its own, or what one of its imports
    /// brings in (explicit imports first, then globs, as Rust shadows them). None when this crate
    /// does not know it (another crate, the prelude, a local binding).
    fn member(&self, m: usize, name: &str, seen: &mut BTreeSet<(usize, String)>) -> Option<Found> {
        // `seen` holds the lookups under way, so imports that go round (two globs of each other)
        // end instead of recursing forever.
        let key = (m, name.to_string());
        if !seen.insert(key.clone()) {
            return None;
        }
        let found = self.member_of(m, name, seen);
        seen.remove(&key);
        found
    }

    fn member_of(
        &self,
        m: usize,
        name: &str,
        seen: &mut BTreeSet<(usize, String)>,
    ) -> Option<Found> {
        let module = &self.modules[m];
        if let Some(&c) = module.children.get(name) {
            return Some(Found::Module(c));
        }
        if module.items.contains(name) {
            return Some(Found::Item(m));
        }
        if let Some(imp) = module
            .imports
            .iter()
            .find(|i| i.name.as_deref() == Some(name))
        {
            // An import from another crate lives here as far as this crate is concerned.
            return Some(self.resolve(m, &imp.path, seen).unwrap_or(Found::Item(m)));
        }
        for imp in module.imports.iter().filter(|i| i.glob) {
            if let Some(Found::Module(g)) = self.resolve(m, &imp.path, seen)
                && let Some(found) = self.member(g, name, seen)
            {
                return Some(found);
            }
        }
        None
    }

    fn graph(&self) -> Graph {
        let mut edges: BTreeMap<(usize, usize), usize> = BTreeMap::new();
        for (m, module) in self.modules.iter().enumerate() {
            for r in &module.refs {
                let found = self.resolve(m, &r.path, &mut BTreeSet::new());
                let to = match found {
                    // A lone name outside a `use` is a value or a type, never a module.
                    Some(Found::Module(_)) if r.path.len() == 1 && !r.in_use => continue,
                    // Importing a module by name uses nothing yet: what the code then names
                    // through it is resolved, and counted, where it is named.
                    Some(Found::Module(_)) if r.in_use && !r.path.ends_with(&["*".to_string()]) => {
                        continue;
                    }
                    Some(f) => f.module(),
                    None => continue,
                };
                if to != m {
                    let line = edges.entry((m, to)).or_insert(r.line);
                    *line = (*line).min(r.line);
                }
            }
        }
        Graph {
            nodes: self.modules.len(),
            edges,
        }
    }
}

impl Module {
    fn new(path: Vec<String>, file: &Path, parent: Option<usize>) -> Module {
        Module {
            path,
            file: file.to_path_buf(),
            parent,
            children: BTreeMap::new(),
            items: BTreeSet::new(),
            imports: Vec::new(),
            refs: Vec::new(),
        }
    }
}

fn parse(src: &dyn Source, file: &Path) -> Result<Vec<syn::Item>, String> {
    let text = src
        .read(file)
        .ok_or_else(|| format!("{}: cannot read", file.display()))?;
    syn::parse_file(&text)
        .map(|f| f.items)
        .map_err(|e| format!("{}: {e}", file.display()))
}

/// Gathers the paths that a module's own items name (not its child modules', which are modules of
/// their own, nor test-only code).
#[derive(Default)]
struct Collector {
    refs: Vec<Ref>,
}

impl<'ast> Visit<'ast> for Collector {
    fn visit_item(&mut self, i: &'ast syn::Item) {
        if !needs_test(item_attrs(i)) {
            syn::visit::visit_item(self, i);
        }
    }

    fn visit_item_mod(&mut self, _: &'ast syn::ItemMod) {}

    fn visit_impl_item(&mut self, i: &'ast syn::ImplItem) {
        let attrs = match i {
            syn::ImplItem::Const(c) => &c.attrs,
            syn::ImplItem::Fn(f) => &f.attrs,
            syn::ImplItem::Type(t) => &t.attrs,
            syn::ImplItem::Macro(m) => &m.attrs,
            _ => return syn::visit::visit_impl_item(self, i),
        };
        if !needs_test(attrs) {
            syn::visit::visit_impl_item(self, i);
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        for leaf in use_leaves(&u.tree) {
            self.refs.push(Ref {
                path: leaf.path,
                line: leaf.line,
                in_use: true,
            });
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.leading_colon.is_none()
            && let Some(first) = p.segments.first()
        {
            self.refs.push(Ref {
                path: p.segments.iter().map(|s| s.ident.to_string()).collect(),
                line: first.ident.span().start().line,
                in_use: false,
            });
        }
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        syn::visit::visit_macro(self, m);
        macro_paths(m.tokens.clone(), &mut self.refs);
    }
}

/// Paths of two or more segments in a macro's tokens, which syn leaves unparsed (in a
/// `macro_rules!` body, `$crate::x` is read as `crate::x`).
fn macro_paths(tokens: proc_macro2::TokenStream, out: &mut Vec<Ref>) {
    use proc_macro2::{Spacing, TokenTree};
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let is_sep = |i: usize| {
        matches!((tokens.get(i), tokens.get(i + 1)),
            (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
                if a.as_char() == ':' && a.spacing() == Spacing::Joint && b.as_char() == ':')
    };
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            TokenTree::Group(g) => {
                macro_paths(g.stream(), out);
                i += 1;
            }
            TokenTree::Ident(first) if !(i >= 2 && is_sep(i - 2)) => {
                let mut path = vec![first.to_string()];
                let mut j = i + 1;
                while is_sep(j) {
                    match tokens.get(j + 2) {
                        Some(TokenTree::Ident(next)) => {
                            path.push(next.to_string());
                            j += 3;
                        }
                        _ => break,
                    }
                }
                if path.len() > 1 {
                    out.push(Ref {
                        path,
                        line: first.span().start().line,
                        in_use: false,
                    });
                }
                i = j.max(i + 1);
            }
            _ => i += 1,
        }
    }
}

struct UseLeaf {
    path: Vec<String>,
    name: Option<String>,
    glob: bool,
    line: usize,
}

/// The leaves of a `use` tree, each with its whole path (`use a::{b, c::*}` is `a::b` and
/// `a::c::*`). A path from the extern prelude (`::x`) has none that matter here.
fn use_leaves(tree: &syn::UseTree) -> Vec<UseLeaf> {
    fn walk(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<UseLeaf>) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                walk(&p.tree, prefix, out);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let (path, name) = leaf(prefix, &n.ident);
                let line = n.ident.span().start().line;
                out.push(UseLeaf {
                    path,
                    name,
                    glob: false,
                    line,
                });
            }
            syn::UseTree::Rename(r) => {
                let (path, _) = leaf(prefix, &r.ident);
                let name = (r.rename != "_").then(|| r.rename.to_string());
                let line = r.ident.span().start().line;
                out.push(UseLeaf {
                    path,
                    name,
                    glob: false,
                    line,
                });
            }
            syn::UseTree::Glob(g) => {
                let mut path = prefix.clone();
                path.push("*".into());
                out.push(UseLeaf {
                    path,
                    name: None,
                    glob: true,
                    line: g.star_token.span.start().line,
                });
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    walk(t, prefix, out);
                }
            }
        }
    }
    /// `use a::b::{self}` names `a::b`.
    fn leaf(prefix: &[String], ident: &syn::Ident) -> (Vec<String>, Option<String>) {
        if ident == "self" {
            (prefix.to_vec(), prefix.last().cloned())
        } else {
            let mut path = prefix.to_vec();
            path.push(ident.to_string());
            (path, Some(ident.to_string()))
        }
    }
    let mut out = Vec::new();
    walk(tree, &mut Vec::new(), &mut out);
    out
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item::*;
    match item {
        Const(i) => &i.attrs,
        Enum(i) => &i.attrs,
        ExternCrate(i) => &i.attrs,
        Fn(i) => &i.attrs,
        ForeignMod(i) => &i.attrs,
        Impl(i) => &i.attrs,
        Macro(i) => &i.attrs,
        Mod(i) => &i.attrs,
        Static(i) => &i.attrs,
        Struct(i) => &i.attrs,
        Trait(i) => &i.attrs,
        TraitAlias(i) => &i.attrs,
        Type(i) => &i.attrs,
        Union(i) => &i.attrs,
        Use(i) => &i.attrs,
        _ => &[],
    }
}

fn defined_name(item: &syn::Item) -> Option<String> {
    use syn::Item::*;
    let ident = match item {
        Const(i) => &i.ident,
        Enum(i) => &i.ident,
        ExternCrate(i) => i.rename.as_ref().map_or(&i.ident, |(_, r)| r),
        Fn(i) => &i.sig.ident,
        Macro(i) => i.ident.as_ref()?,
        Static(i) => &i.ident,
        Struct(i) => &i.ident,
        Trait(i) => &i.ident,
        TraitAlias(i) => &i.ident,
        Type(i) => &i.ident,
        Union(i) => &i.ident,
        _ => return None,
    };
    Some(ident.to_string())
}

/// Whether a `#[cfg(..)]` among `attrs` holds only when compiling tests.
fn needs_test(attrs: &[syn::Attribute]) -> bool {
    fn implies_test(meta: &syn::Meta) -> bool {
        match meta {
            syn::Meta::Path(p) => p.is_ident("test"),
            syn::Meta::List(l) => {
                let Ok(args) = l.parse_args_with(
                    syn::punctuated::Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated,
                ) else {
                    return false;
                };
                if l.path.is_ident("all") {
                    args.iter().any(implies_test)
                } else if l.path.is_ident("any") {
                    !args.is_empty() && args.iter().all(implies_test)
                } else {
                    false
                }
            }
            syn::Meta::NameValue(_) => false,
        }
    }
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && a.parse_args::<syn::Meta>().is_ok_and(|m| implies_test(&m))
    })
}

fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

struct Graph {
    nodes: usize,
    /// (from, to) -> the line of the first reference in `from`'s file.
    edges: BTreeMap<(usize, usize), usize>,
}

impl Graph {
    fn out(&self, m: usize) -> impl Iterator<Item = usize> + '_ {
        self.edges
            .range((m, 0)..=(m, usize::MAX))
            .map(|(&(_, to), _)| to)
    }

    /// The strongly connected components of more than one module (Tarjan), each sorted.
    fn loops(&self) -> Vec<Vec<usize>> {
        struct State {
            index: Vec<Option<usize>>,
            low: Vec<usize>,
            on_stack: Vec<bool>,
            stack: Vec<usize>,
            next: usize,
            out: Vec<Vec<usize>>,
        }
        fn visit(g: &Graph, v: usize, s: &mut State) {
            s.index[v] = Some(s.next);
            s.low[v] = s.next;
            s.next += 1;
            s.stack.push(v);
            s.on_stack[v] = true;
            for w in g.out(v) {
                match s.index[w] {
                    None => {
                        visit(g, w, s);
                        s.low[v] = s.low[v].min(s.low[w]);
                    }
                    Some(i) if s.on_stack[w] => s.low[v] = s.low[v].min(i),
                    Some(_) => {}
                }
            }
            if Some(s.low[v]) == s.index[v] {
                let mut scc = Vec::new();
                while let Some(w) = s.stack.pop() {
                    s.on_stack[w] = false;
                    scc.push(w);
                    if w == v {
                        break;
                    }
                }
                if scc.len() > 1 {
                    scc.sort_unstable();
                    s.out.push(scc);
                }
            }
        }
        let mut s = State {
            index: vec![None; self.nodes],
            low: vec![0; self.nodes],
            on_stack: vec![false; self.nodes],
            stack: Vec::new(),
            next: 0,
            out: Vec::new(),
        };
        for v in 0..self.nodes {
            if s.index[v].is_none() {
                visit(self, v, &mut s);
            }
        }
        s.out.sort();
        s.out
    }

    /// A closed chain through every module of `scc`, as modules joined by edges.
    fn chain(&self, scc: &[usize]) -> Vec<usize> {
        let members: BTreeSet<usize> = scc.iter().copied().collect();
        let path = |from: usize, to: usize| -> Vec<usize> {
            let mut prev: BTreeMap<usize, usize> = BTreeMap::new();
            let mut queue = VecDeque::from([from]);
            while let Some(v) = queue.pop_front() {
                for w in self.out(v).filter(|w| members.contains(w)) {
                    if w != from && !prev.contains_key(&w) {
                        prev.insert(w, v);
                        queue.push_back(w);
                    }
                }
                if prev.contains_key(&to) {
                    break;
                }
            }
            let mut steps = vec![to];
            let mut at = to;
            while let Some(&p) = prev.get(&at) {
                if p == from {
                    break;
                }
                steps.push(p);
                at = p;
            }
            steps.reverse();
            steps
        };
        let start = scc[0];
        let mut chain = vec![start];
        let mut seen = BTreeSet::from([start]);
        for &v in &scc[1..] {
            if seen.contains(&v) {
                continue;
            }
            for step in path(*chain.last().unwrap(), v) {
                seen.insert(step);
                chain.push(step);
            }
        }
        chain.extend(path(*chain.last().unwrap(), start));
        chain
    }

    fn describe(&self, tree: &Tree, scc: &[usize], root: &Path) -> String {
        let names: Vec<String> = scc.iter().map(|&m| tree.name(m)).collect();
        let mut s = format!("loop of {} modules: {}\n", scc.len(), names.join(", "));
        for pair in self.chain(scc).windows(2) {
            let (from, to) = (pair[0], pair[1]);
            let file = &tree.modules[from].file;
            let file = file.strip_prefix(root).unwrap_or(file);
            s.push_str(&format!(
                "    {} -> {}   ({}:{})\n",
                tree.name(from),
                tree.name(to),
                file.display(),
                self.edges[&(from, to)]
            ));
        }
        s
    }
}

/// The checker on trees in memory, so that it cannot pass by seeing nothing. File names are given
/// without their extension, which `tree` adds.
mod checker {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> (Tree, Graph) {
        let src: BTreeMap<PathBuf, String> = files
            .iter()
            .map(|(name, text)| {
                (
                    Path::new("src").join(name).with_extension("rs"),
                    text.to_string(),
                )
            })
            .collect();
        let tree = Tree::load(&src, &Path::new("src").join("lib").with_extension("rs"))
            .unwrap_or_else(|e| panic!("{e}"));
        let graph = tree.graph();
        (tree, graph)
    }

    fn loops(files: &[(&str, &str)]) -> Vec<Vec<String>> {
        let (tree, graph) = tree(files);
        graph
            .loops()
            .iter()
            .map(|l| l.iter().map(|&m| tree.name(m)).collect())
            .collect()
    }

    fn edges(files: &[(&str, &str)]) -> Vec<(String, String, usize)> {
        let (tree, graph) = tree(files);
        graph
            .edges
            .iter()
            .map(|(&(a, b), &line)| (tree.name(a), tree.name(b), line))
            .collect()
    }

    #[test]
    fn finds_a_loop_through_a_macro_and_a_nested_use() {
        let files = [
            ("lib", "mod a;\nmod b;\nmod c;\n"),
            (
                "a",
                "use crate::{b::{self, Helper}, c};\npub fn f() -> Helper { b::g() }\n",
            ),
            ("b", "pub struct Helper;\npub fn g() -> Helper { Helper }\n"),
            (
                "c",
                "pub fn h() {\n    println!(\"{:?}\", crate::b::g2());\n}\n",
            ),
        ];
        assert!(loops(&files).is_empty());
        let mut looped = files;
        looped[2] = (
            "b",
            "pub struct Helper;\npub fn g() -> Helper {\n    super::c::h();\n    Helper\n}\n",
        );
        looped[3] = (
            "c",
            "pub fn h() {\n    println!(\"{:?}\", crate::a::f());\n}\n",
        );
        assert_eq!(
            loops(&looped),
            vec![vec!["crate::a", "crate::b", "crate::c"]]
        );
        let (tree, graph) = tree(&looped);
        let text = graph.describe(&tree, &graph.loops()[0], Path::new(""));
        for expected in [
            "crate::a -> crate::b   (src/a.rs:1)",
            "crate::b -> crate::c   (src/b.rs:3)",
            "crate::c -> crate::a   (src/c.rs:2)",
        ] {
            assert!(text.contains(expected), "{expected} in\n{text}");
        }
    }

    #[test]
    fn a_parent_calling_a_child_that_uses_the_parents_items_is_a_loop() {
        let files = [
            ("lib", "mod cloud;\n"),
            (
                "cloud/mod",
                "mod routes;\npub struct Pool;\npub fn serve() { routes::get(); }\n",
            ),
            (
                "cloud/routes",
                "use super::Pool;\npub fn get() -> Option<Pool> { None }\n",
            ),
        ];
        assert_eq!(
            loops(&files),
            vec![vec!["crate::cloud", "crate::cloud::routes"]]
        );
        // The fix: the shared item in a module of its own, re-exported where it was.
        let fixed = [
            ("lib", "mod cloud;\n"),
            (
                "cloud/mod",
                "mod pool;\nmod routes;\npub use pool::Pool;\npub fn serve() { routes::get(); }\n",
            ),
            ("cloud/pool", "pub struct Pool;\n"),
            (
                "cloud/routes",
                "use super::Pool;\npub fn get() -> Option<Pool> { None }\n",
            ),
        ];
        assert!(loops(&fixed).is_empty());
        assert!(
            edges(&fixed).contains(&(
                "crate::cloud::routes".into(),
                "crate::cloud::pool".into(),
                1
            )),
            "a name re-exported by the parent resolves to where it is defined: {:?}",
            edges(&fixed)
        );
    }

    #[test]
    fn test_modules_are_left_out_and_layouts_are_followed() {
        let files = [
            (
                "lib",
                "mod world;\nmod arm;\npub use world::World;\npub use arm::Arm;\n\
                 #[cfg(test)]\nmod tests { use super::*; fn t() { arm::f(); } }\n",
            ),
            (
                "world",
                "pub struct World;\n#[cfg(test)]\nmod tests;\n#[cfg(all(test, unix))]\nfn t() { crate::arm::f(); }\n",
            ),
            // A tests file of `world` that would close a loop if it counted; never read.
            ("world/tests", "use crate::arm::*;\n"),
            (
                "arm",
                "mod ops { pub fn run() {} }\nuse crate::World;\npub struct Arm;\npub fn f(_: World) { ops::run(); self::ops::run() }\n",
            ),
        ];
        assert!(loops(&files).is_empty(), "{:?}", edges(&files));
        assert_eq!(
            edges(&files),
            vec![
                ("crate".into(), "crate::world".into(), 3),
                ("crate".into(), "crate::arm".into(), 4),
                ("crate::arm".into(), "crate::world".into(), 2),
                ("crate::arm".into(), "crate::arm::ops".into(), 4),
            ]
        );
        // A module imported by name is seen through: the edge goes to what is named through it.
        let facade = [
            ("lib", "mod world;\nmod arm;\n"),
            (
                "world",
                "use crate::arm;\npub struct World { pub aks: arm::AksWorld }\n",
            ),
            (
                "arm/mod",
                "mod routes;\nmod state;\npub use routes::serve;\npub use state::AksWorld;\n",
            ),
            ("arm/state", "pub struct AksWorld;\n"),
            ("arm/routes", "pub fn serve(_: &crate::world::World) {}\n"),
        ];
        assert!(loops(&facade).is_empty(), "{:?}", edges(&facade));
        assert!(edges(&facade).contains(&("crate::world".into(), "crate::arm::state".into(), 2)));
        // A glob is an edge to the module it opens, and what it brings in resolves through it.
        let globbed = [
            ("lib", "mod a;\nmod b;\npub fn top() { a::f() }\n"),
            ("a", "use super::*;\npub fn f() { b::g() }\n"),
            ("b", "pub fn g() {}\n"),
        ];
        assert_eq!(loops(&globbed), vec![vec!["crate", "crate::a"]]);
        assert!(edges(&globbed).contains(&("crate::a".into(), "crate::b".into(), 2)));
    }
}
