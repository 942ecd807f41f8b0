//! Registry-style documentation generated from the schemas and the examples, so the docs, the
//! examples and the code cannot disagree. `tests/acceptance/docs.rs` fails when the committed
//! pages differ from what this renders, and rewrites them when FRACGPU_WRITE_DOCS=1.

use std::fmt::Write as _;
use std::path::Path;

use tfplugin::Type;
use tfplugin::api::{
    Action, DataSource, Function, IdentitySchema, ListResource, Provider, Resource,
};
use tfplugin::schema::{Attribute, Block, Nesting, Schema};

pub struct Page {
    /// Relative to the repository root, e.g. `docs/data-sources/workload.md`.
    pub path: String,
    pub content: String,
}

fn type_name(t: &Type) -> String {
    match t {
        Type::Bool => "Boolean".into(),
        Type::Number => "Number".into(),
        Type::String => "String".into(),
        Type::Dynamic => "Dynamic".into(),
        Type::List(e) => format!("List of {}", type_name(e)),
        Type::Set(e) => format!("Set of {}", type_name(e)),
        Type::Map(e) => format!("Map of {}", type_name(e)),
        Type::Object(_) => "Object".into(),
        Type::Tuple(_) => "Tuple".into(),
    }
}

fn nesting_name(n: Nesting) -> &'static str {
    match n {
        Nesting::Single => "Single",
        Nesting::List => "List",
        Nesting::Set => "Set",
        Nesting::Map => "Map",
    }
}

fn attribute_line(out: &mut String, a: &Attribute, anchor: &str) {
    let kind = match &a.nested {
        Some((n, _)) => format!("Attributes {}", nesting_name(*n)),
        None => type_name(&a.ty),
    };
    let mut notes = Vec::new();
    if a.sensitive {
        notes.push("Sensitive".to_string());
    }
    if let Some(d) = &a.deprecated {
        notes.push(format!("Deprecated: {d}"));
    }
    for v in &a.validators {
        notes.push(v.describe());
    }
    if a.has(tfplugin::schema::PlanModifier::RequiresReplace) {
        notes.push("Changing it replaces the resource.".into());
    }
    let _ = write!(out, "- `{}` ({kind}) {}", a.name, a.description);
    if !notes.is_empty() {
        let _ = write!(out, " {}", notes.join(" "));
    }
    if a.nested.is_some() {
        let _ = write!(
            out,
            " (see [below for nested schema](#nestedatt--{anchor}{}))",
            a.name
        );
    }
    out.push('\n');
}

/// Renders a block's attributes and nested blocks grouped as Required / Optional / Read-Only,
/// then the nested schemas.
fn block_schema(out: &mut String, b: &Block, anchor: &str) {
    type Pick = fn(&Attribute) -> bool;
    let groups: [(&str, Pick); 3] = [
        ("Required", |a| a.required),
        ("Optional", |a| a.optional),
        ("Read-Only", |a| a.computed && !a.optional && !a.required),
    ];
    for (title, pick) in groups {
        let attrs: Vec<&Attribute> = b.attributes.iter().filter(|a| pick(a)).collect();
        let blocks: Vec<_> = if title == "Optional" {
            b.blocks.iter().collect()
        } else {
            Vec::new()
        };
        if attrs.is_empty() && blocks.is_empty() {
            continue;
        }
        let _ = writeln!(out, "### {title}\n");
        for a in attrs {
            attribute_line(out, a, anchor);
        }
        for nb in blocks {
            let max = if nb.max_items > 0 {
                format!(", Max: {}", nb.max_items)
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "- `{}` (Block {}{max}) {} (see [below for nested \
                    schema](#nestedblock--{anchor}{}))",
                nb.name,
                nesting_name(nb.nesting),
                nb.block.description,
                nb.name
            );
        }
        out.push('\n');
    }
    for a in &b.attributes {
        if let Some((_, inner)) = &a.nested {
            let _ = writeln!(
                out,
                "<a id=\"nestedatt--{anchor}{}\"></a>\n### Nested Schema for `{}{}`\n",
                a.name,
                anchor.replace("--", "."),
                a.name
            );
            let nested = Block {
                attributes: inner.clone(),
                ..Block::default()
            };
            block_schema_flat(out, &nested, &format!("{anchor}{}--", a.name));
        }
    }
    for nb in &b.blocks {
        let _ = writeln!(
            out,
            "<a id=\"nestedblock--{anchor}{}\"></a>\n### Nested Schema for `{}{}`\n",
            nb.name,
            anchor.replace("--", "."),
            nb.name
        );
        block_schema_flat(out, &nb.block, &format!("{anchor}{}--", nb.name));
    }
}

/// Nested schemas list their groups in bold rather than as headings, like the registry does.
fn block_schema_flat(out: &mut String, b: &Block, anchor: &str) {
    let mut inner = String::new();
    block_schema(&mut inner, b, anchor);
    out.push_str(
        &inner
            .replace("### Required\n", "Required:\n")
            .replace("### Optional\n", "Optional:\n")
            .replace("### Read-Only\n", "Read-Only:\n"),
    );
}

fn read_example(root: &Path, rel: &str) -> Result<String, String> {
    std::fs::read_to_string(root.join(rel)).map_err(|e| format!("{rel}: {e}"))
}

fn frontmatter(title: &str, description: &str) -> String {
    let first = description.lines().next().unwrap_or("").replace('"', "'");
    format!("---\npage_title: \"{title}\"\nsubcategory: \"\"\ndescription: |-\n  {first}\n---\n\n")
}

fn schema_page(kind: &str, full_name: &str, schema: &Schema, example: &str) -> String {
    let mut out = frontmatter(
        &format!("{full_name} ({kind}) - fracgpu"),
        &schema.block.description,
    );
    let _ = writeln!(
        out,
        "# {full_name} ({kind})\n\n{}\n\n## Example Usage\n\n```terraform\n{}```\n\n## Schema\n",
        schema.block.description, example
    );
    block_schema(&mut out, &schema.block, "");
    out.trim_end().to_string() + "\n"
}

fn data_source_page(root: &Path, ds: &dyn DataSource) -> Result<Page, String> {
    let name = ds.type_name();
    let example = read_example(
        root,
        &format!("examples/data-sources/{name}/data-source.tf"),
    )?;
    Ok(Page {
        path: format!(
            "docs/data-sources/{}.md",
            name.trim_start_matches("fracgpu_")
        ),
        content: schema_page("Data Source", name, &ds.schema(), &example),
    })
}

fn resource_page(root: &Path, r: &dyn Resource) -> Result<Page, String> {
    let name = r.type_name();
    let dir = format!("examples/resources/{name}");
    let example = read_example(root, &format!("{dir}/resource.tf"))?;
    let mut content = schema_page("Resource", name, &r.schema(), &example);
    if let Some(identity) = r.identity_schema() {
        identity_section(&mut content, &identity);
    }
    let import = read_example(root, &format!("{dir}/import.sh"));
    let by_identity = read_example(root, &format!("{dir}/import-by-identity.hcl"));
    if import.is_ok() || by_identity.is_ok() {
        content.push_str("\n## Import\n");
    }
    if let Ok(import) = import {
        content.push_str(&format!(
            "\nImport is supported using the following syntax:\n\n```shell\n{import}```\n"
        ));
    }
    if let Ok(blocks) = by_identity {
        content.push_str(&format!(
            "\nWith terraform 1.12 and later, an `import` block can name the \
            object by its identity instead:\n\n```terraform\n{blocks}```\n"
        ));
    }
    Ok(Page {
        path: format!("docs/resources/{}.md", name.trim_start_matches("fracgpu_")),
        content,
    })
}

/// The identity a resource keeps beside its state (terraform 1.12 and later), as the registry
/// shows it: the attributes an import by identity requires, then the optional ones.
fn identity_section(out: &mut String, identity: &IdentitySchema) {
    out.push_str(
        "\n## Identity Schema\n\nThe attributes that name one object for as long as it \
        lives: terraform keeps them beside the state, `import` blocks can name the object by them, \
        and `terraform query` returns them.\n",
    );
    for (title, required) in [("Required", true), ("Optional", false)] {
        let attrs: Vec<_> = identity
            .attributes
            .iter()
            .filter(|a| a.required_for_import == required)
            .collect();
        if attrs.is_empty() {
            continue;
        }
        let _ = writeln!(out, "\n### {title}\n");
        for a in attrs {
            let _ = writeln!(
                out,
                "- `{}` ({}) {}",
                a.name,
                type_name(&a.ty),
                a.description
            );
        }
    }
}

fn list_resource_page(root: &Path, l: &dyn ListResource) -> Result<Page, String> {
    let name = l.type_name();
    let example = read_example(
        root,
        &format!("examples/list-resources/{name}/list-resource.tfquery.hcl"),
    )?;
    let schema = l.schema();
    let mut out = frontmatter(
        &format!("{name} (List Resource) - fracgpu"),
        &schema.block.description,
    );
    let _ = writeln!(
        out,
        "# {name} (List Resource)\n\n{}\n\nA list resource is read by `terraform query` (terraform \
            1.14 and later) from the `list` blocks of `.tfquery.hcl` files; `terraform query \
            -generate-config-out=FILE` writes a resource and an `import` block for each object it \
            finds. See the guide [Adopting existing GPU \
            pools](../guides/adopting-existing-gpu-pools.md).\n\n## Example \
            Usage\n\n```terraform\n{example}```\n\n## Schema\n\nThe arguments of the `list` \
            block's `config` block.\n",
        schema.block.description
    );
    block_schema(&mut out, &schema.block, "");
    Ok(Page {
        path: format!(
            "docs/list-resources/{}.md",
            name.trim_start_matches("fracgpu_")
        ),
        content: out.trim_end().to_string() + "\n",
    })
}

fn action_page(root: &Path, a: &dyn Action) -> Result<Page, String> {
    let name = a.type_name();
    let example = read_example(root, &format!("examples/actions/{name}/action.tf"))?;
    Ok(Page {
        path: format!("docs/actions/{}.md", name.trim_start_matches("fracgpu_")),
        content: schema_page("Action", name, &a.schema(), &example),
    })
}

fn function_page(root: &Path, f: &dyn Function) -> Result<Page, String> {
    let name = f.name();
    let sig = f.signature();
    let example = read_example(root, &format!("examples/functions/{name}/function.tf"))?;
    let params: Vec<String> = sig
        .parameters
        .iter()
        .map(|p| format!("{} {}", p.name, type_name(&p.ty).to_lowercase()))
        .collect();
    let mut out = frontmatter(&format!("{name} function - fracgpu"), sig.summary);
    let _ = writeln!(
        out,
        "# function: {name}\n\n{}\n\n## Example Usage\n\n```terraform\n{}```\n\n## \
            Signature\n\n```text\n{name}({}) {}\n```\n\n## Arguments\n",
        sig.description,
        example,
        params.join(", "),
        type_name(&sig.returns).to_lowercase()
    );
    for (i, p) in sig.parameters.iter().enumerate() {
        let _ = writeln!(
            out,
            "{}. `{}` ({}) {}",
            i + 1,
            p.name,
            type_name(&p.ty),
            p.description
        );
    }
    Ok(Page {
        path: format!("docs/functions/{name}.md"),
        content: out.trim_end().to_string() + "\n",
    })
}

fn index_page(root: &Path, provider: &dyn Provider) -> Result<Page, String> {
    let example = read_example(root, "examples/provider/provider.tf")?;
    let schema = provider.schema();
    let mut out = frontmatter("Provider: fracgpu", &schema.block.description);
    let _ = writeln!(
        out,
        "# fracgpu Provider\n\n{}\n\nThe provider validates every sharing setup at plan time \
            against its GPU catalog (see the [GPU catalog guide](guides/gpu-catalog.md)).\n\n## \
            Example Usage\n\n```terraform\n{}```\n\n## Schema\n",
        schema.block.description, example
    );
    block_schema(&mut out, &schema.block, "");
    Ok(Page {
        path: "docs/index.md".into(),
        content: out.trim_end().to_string() + "\n",
    })
}

fn catalog_page() -> Page {
    let mut out = frontmatter(
        "GPU catalog - fracgpu",
        "The machine types, GPUs and MIG profiles the provider knows.",
    );
    out.push_str(
        "# GPU catalog\n\nThe machine types, GPU models and MIG profiles the provider \
        validates against, generated from its catalog. Memory figures marked `nvidia-smi` are what \
        the driver reports; `nominal` ones are the marketing size. A pool can describe a machine \
        type missing here with `gpu_model` and `gpu_count`.\n\n",
    );
    out.push_str(&gpu::catalog_markdown());
    Page {
        path: "docs/guides/gpu-catalog.md".into(),
        content: out.trim_end().to_string() + "\n",
    }
}

/// The fence language of an included file, by its extension.
fn fence_language(rel: &str) -> &'static str {
    match rel.rsplit('.').next() {
        Some("tf" | "hcl") => "terraform",
        Some("yml" | "yaml") => "yaml",
        Some("sh") => "shell",
        Some("json") => "json",
        _ => "text",
    }
}

/// Per GPU model, what each sharing mode gives a workload: the MIG instances of the smallest and
/// largest profiles, and the memory share of 4 and 10 time-slicing replicas or MPS clients.
fn sharing_comparison() -> String {
    let mut out = String::from(
        "| GPU | Memory (MiB) | MIG, smallest profile | MIG, largest profile | 4 slices or MPS \
            clients | 10 slices or MPS clients |\n|---|---|---|---|---|---|\n",
    );
    for g in gpu::all_gpu_models() {
        // `+me` variants are the same size as their base profile and no cloud API can ask for them.
        let profiles: Vec<_> = g
            .mig_profiles
            .iter()
            .filter(|p| !p.name.ends_with("+me"))
            .collect();
        let mig = |p: Option<&&gpu::MigProfile>| {
            p.map_or("no MIG".to_string(), |p| {
                format!("`{}`: {} x {} MiB", p.name, p.max_instances, p.memory_mib)
            })
        };
        let smallest = profiles.iter().min_by_key(|p| p.memory_mib);
        let largest = profiles.iter().max_by_key(|p| p.memory_mib);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} MiB each | {} MiB each |",
            g.id,
            g.memory_mib,
            mig(smallest),
            mig(largest),
            g.memory_mib / 4,
            g.memory_mib / 10
        );
    }
    out
}

/// A written guide from `templates/guides/NAME.md`. A line that is exactly
/// `{{ include "RELATIVE/PATH" }}` becomes a fenced block holding that file, so the HCL a guide
/// shows is the HCL a test applies; `{{ gpu_catalog }}` becomes the catalog's tables and `{{ sharing_comparison }}` a table of what
/// each sharing mode gives a workload on each GPU.
fn guide_page(root: &Path, rel: &str) -> Result<Page, String> {
    let template = read_example(root, rel)?;
    let mut out = String::with_capacity(template.len() * 2);
    for line in template.lines() {
        let directive = line
            .trim()
            .strip_prefix("{{")
            .and_then(|l| l.strip_suffix("}}"))
            .map(str::trim);
        match directive {
            Some("gpu_catalog") => out.push_str(&gpu::catalog_markdown()),
            Some("sharing_comparison") => out.push_str(&sharing_comparison()),
            Some(d) if d.starts_with("include ") => {
                let path = d["include ".len()..].trim().trim_matches('"');
                let body = read_example(root, path)
                    .map_err(|e| format!("{rel}: include of a missing file: {e}"))?;
                let _ = writeln!(out, "```{}\n{}```", fence_language(path), body);
            }
            Some(d) => return Err(format!("{rel}: unknown directive {{{{ {d} }}}}")),
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    let name = Path::new(rel)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(Page {
        path: format!("docs/guides/{name}"),
        content: out.trim_end().to_string() + "\n",
    })
}

/// Every documentation page, rendered from the provider's registry, the examples and the guide
/// templates under `root`.
pub fn pages(root: &Path, provider: &dyn Provider) -> Result<Vec<Page>, String> {
    let mut pages = vec![index_page(root, provider)?, catalog_page()];
    let mut guides: Vec<String> = std::fs::read_dir(root.join("templates/guides"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .collect();
    guides.sort();
    for g in guides {
        pages.push(guide_page(root, &format!("templates/guides/{g}"))?);
    }
    for r in provider.resources() {
        pages.push(resource_page(root, r.as_ref())?);
    }
    for ds in provider.data_sources() {
        pages.push(data_source_page(root, ds.as_ref())?);
    }
    for l in provider.list_resources() {
        pages.push(list_resource_page(root, l.as_ref())?);
    }
    for a in provider.actions() {
        pages.push(action_page(root, a.as_ref())?);
    }
    for f in provider.functions() {
        pages.push(function_page(root, f.as_ref())?);
    }
    Ok(pages)
}
