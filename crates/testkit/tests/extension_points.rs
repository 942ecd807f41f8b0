//! The CONTRIBUTING checklists say which files adding a target, a provisioner, an action or a
//! delivery touches; this holds the code to it. For each kind of extension, the paths that name
//! one of its members (a target's module or `gpu::Cloud` variant, a provisioner's module, an
//! action's module, a delivery's module) may appear only in the files the checklist names: the
//! member's own folder or file and its registry. Anywhere else, adding the next member would mean
//! editing that file too, and the checklist would be wrong.
//!
//! What it reads: the provider crate's production code (items whose cfg needs `test` left out, as
//! the other layout checks do), every path of every `use` and expression, by its segments.

use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// One kind of extension: the pairs of adjacent path segments that name a member, and the files
/// (under `crates/provider/src/`, a folder ending in `/`) allowed to say them.
struct Extension {
    what: &'static str,
    names: &'static [(&'static str, &'static str)],
    allowed: &'static [&'static str],
}

const EXTENSIONS: &[Extension] = &[
    Extension {
        what: "a target (CONTRIBUTING: \"Add a cloud\")",
        names: &[
            ("cloud", "aks"),
            ("cloud", "gke"),
            ("cloud", "eks"),
            ("Cloud", "Aks"),
            ("Cloud", "Gke"),
            ("Cloud", "Eks"),
        ],
        allowed: &[
            "cloud/aks/",
            "cloud/gke/",
            "cloud/eks/",
            "cloud/registry.rs",
            "cloud/pool.rs",
            "cloud/mod.rs",
            // The provisioners are per cloud by nature: each says which catalog it reads.
            "resources/karpenter_nodepool/provisioner/",
            // The one rule set every provisioner's sharing is checked with (named there).
            "resources/karpenter_nodepool/render/mod.rs",
        ],
    },
    Extension {
        what: "a provisioner (CONTRIBUTING: \"Adding a provisioner\")",
        names: &[("provisioner", "eks"), ("provisioner", "nap")],
        allowed: &["resources/karpenter_nodepool/provisioner/"],
    },
    Extension {
        what: "an action (CONTRIBUTING: \"Add an action\")",
        names: &[
            ("actions", "mig_reconfigure"),
            ("actions", "device_plugin_rollout"),
        ],
        allowed: &["actions/"],
    },
    Extension {
        what: "a delivery (CONTRIBUTING: \"Adding a delivery\")",
        names: &[
            ("delivery", "cluster_policy"),
            ("delivery", "helm"),
            ("delivery", "argocd"),
            ("delivery", "flux"),
            ("delivery", "nvidia_device_plugin"),
            ("Delivery", "ClusterPolicy"),
            ("Delivery", "Helm"),
            ("Delivery", "ArgoCd"),
            ("Delivery", "Flux"),
            ("Delivery", "NvidiaDevicePlugin"),
        ],
        allowed: &["resources/device_plugin_config/delivery/"],
    },
];

#[test]
fn only_the_files_a_checklist_names_name_its_members() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../provider/src");
    let src = src.canonicalize().expect("crates/provider/src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    let mut failures = String::new();
    for path in files {
        let rel = path
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let text = std::fs::read_to_string(&path).unwrap();
        let file = syn::parse_file(&text).unwrap_or_else(|e| panic!("{rel}: {e}"));
        let mut paths = Paths::default();
        paths.visit_file(&file);
        for ext in EXTENSIONS {
            if ext.allowed.iter().any(|a| allowed(&rel, a)) {
                continue;
            }
            for (segments, line) in &paths.found {
                let hit = segments
                    .windows(2)
                    .find(|w| ext.names.iter().any(|(a, b)| w[0] == *a && w[1] == *b));
                if let Some(w) = hit {
                    failures.push_str(&format!(
                        "  {rel}:{line} names {} `{}::{}`\n",
                        ext.what, w[0], w[1]
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "code outside the files its checklist names names a member; move it to the member's \
         folder or its registry, or say the file in the checklist and here:\n{failures}"
    );
}

#[test]
fn the_check_sees_paths_in_uses_and_expressions_and_leaves_tests_out() {
    let text = "use crate::cloud::aks::Aks;\nfn f() { let c = gpu::Cloud::Eks; }\n\
                #[cfg(test)]\nmod tests { use crate::cloud::gke::X; }\n";
    let file = syn::parse_file(text).unwrap();
    let mut p = Paths::default();
    p.visit_file(&file);
    let found: Vec<String> = p.found.iter().map(|(s, _)| s.join("::")).collect();
    assert!(
        found.contains(&"crate::cloud::aks::Aks".to_string()),
        "{found:?}"
    );
    assert!(found.contains(&"gpu::Cloud::Eks".to_string()), "{found:?}");
    assert!(!found.iter().any(|f| f.contains("gke")), "{found:?}");
}

fn allowed(rel: &str, rule: &str) -> bool {
    if rule.ends_with('/') {
        rel.starts_with(rule)
    } else {
        rel == rule
    }
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
        } else if p.extension().is_some_and(|e| e == "rs") && !p.ends_with("tests.rs") {
            out.push(p);
        }
    }
}

/// Every path of the production code: its segments and its line.
#[derive(Default)]
struct Paths {
    found: Vec<(Vec<String>, usize)>,
}

fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.meta
                .require_list()
                .is_ok_and(|l| l.tokens.to_string().starts_with("test"))
    })
}

impl Paths {
    /// The leaves of a `use` tree, each as a whole path.
    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => self.leaf(prefix, &n.ident),
            syn::UseTree::Rename(r) => self.leaf(prefix, &r.ident),
            // A glob names the module it opens (no line of its own to point at).
            syn::UseTree::Glob(_) => self.found.push((prefix.clone(), 0)),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }

    fn leaf(&mut self, prefix: &[String], ident: &syn::Ident) {
        let mut all = prefix.to_vec();
        all.push(ident.to_string());
        self.found.push((all, ident.span().start().line));
    }
}

impl<'a> Visit<'a> for Paths {
    fn visit_item(&mut self, item: &'a syn::Item) {
        let attrs: &[syn::Attribute] = match item {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Use(u) => &u.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Const(c) => &c.attrs,
            _ => &[],
        };
        if is_test(attrs) {
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_item_use(&mut self, u: &'a syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &u.tree);
    }

    fn visit_path(&mut self, p: &'a syn::Path) {
        let segments = p.segments.iter().map(|s| s.ident.to_string()).collect();
        let line = p
            .segments
            .first()
            .map_or(0, |s| s.ident.span().start().line);
        self.found.push((segments, line));
        syn::visit::visit_path(self, p);
    }
}
