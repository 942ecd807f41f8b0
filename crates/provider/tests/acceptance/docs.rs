//! The committed docs/ must be exactly what the schemas and examples render. To regenerate:
//! `FRACGPU_WRITE_DOCS=1 cargo test --test acceptance docs::`.

use std::path::Path;

#[test]
fn committed_docs_match_the_schemas() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let provider = fracgpu::provider::FracGpu::new();
    let pages = fracgpu::docs::pages(root, provider.as_ref())
        .expect("every documented item has its example");
    let write = std::env::var("FRACGPU_WRITE_DOCS").is_ok_and(|v| v == "1");
    let mut stale = Vec::new();
    for page in &pages {
        let path = root.join(&page.path);
        if write {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &page.content).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(page.content.as_str()) {
            stale.push(page.path.clone());
        }
    }
    // No page may outlive what it documents.
    for dir in [
        "docs/data-sources",
        "docs/list-resources",
        "docs/resources",
        "docs/functions",
        "docs/guides",
    ] {
        for entry in std::fs::read_dir(root.join(dir))
            .into_iter()
            .flatten()
            .flatten()
        {
            let rel = format!("{dir}/{}", entry.file_name().to_string_lossy());
            if !pages.iter().any(|p| p.path == rel) {
                stale.push(format!("{rel} (documents nothing)"));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "docs/ is out of date: {stale:?}. Run `FRACGPU_WRITE_DOCS=1 cargo test --test acceptance docs::` and commit the result."
    );
}

/// The bar the docs set for the node pool: every argument a user sets says its unit where it has
/// one, its default, and whether changing it replaces the pool or applies in place (the
/// `timeouts` block changes nothing in the cloud and is left out).
#[test]
fn every_node_pool_argument_says_its_default_and_how_a_change_applies() {
    use tfplugin::schema::{Attribute, Block, PlanModifier};

    fn walk(b: &Block, path: &str, out: &mut Vec<String>) {
        for a in &b.attributes {
            check(a, &format!("{path}{}", a.name), out);
        }
        for nb in &b.blocks {
            if nb.name != "timeouts" {
                walk(&nb.block, &format!("{path}{}.", nb.name), out);
            }
        }
    }
    fn check(a: &Attribute, path: &str, out: &mut Vec<String>) {
        if !a.optional {
            return;
        }
        let d = a.description.to_lowercase();
        if !d.contains("default") {
            out.push(format!("{path}: no default"));
        }
        if !a.has(PlanModifier::RequiresReplace)
            && !d.contains("in place")
            && !d.contains("replace")
        {
            out.push(format!(
                "{path}: does not say whether a change replaces the pool"
            ));
        }
        let numeric = matches!(a.ty, tfplugin::Type::Number);
        let unit = [
            "gb", "mib", "mb", "nodes", "gpu", "replicas", "count", "clients",
        ];
        if numeric && !unit.iter().any(|u| d.contains(u) || path.contains(u)) {
            out.push(format!("{path}: a number without its unit"));
        }
    }

    let provider = fracgpu::provider::FracGpu::new();
    let pool = tfplugin::api::Provider::resources(provider.as_ref())
        .into_iter()
        .find(|r| r.type_name() == "fracgpu_nodepool")
        .expect("the node pool resource");
    let mut missing = Vec::new();
    walk(&pool.schema().block, "", &mut missing);
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}
