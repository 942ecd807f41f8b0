//! The committed docs/ must be exactly what the schemas and examples render. To regenerate:
//! `FRACGPU_WRITE_DOCS=1 cargo test --test docs`.

use std::path::Path;

#[test]
fn committed_docs_match_the_schemas() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
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
        "docs/ is out of date: {stale:?}. Run `FRACGPU_WRITE_DOCS=1 cargo test --test docs` and commit the result."
    );
}
