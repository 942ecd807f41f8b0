//! `scripts/release` on the test build of the provider (`--binary`, so no release build here): the
//! files it writes are the ones the Terraform Registry names, its zips are reproducible, real
//! terraform installs the zip offline from a filesystem mirror in both of its layouts (checking it
//! against the SHA256SUMS entry as a `zh:` hash) and the installed binary serves a plan, and a
//! GPG-signed run verifies with gpg.

use crate::common::terraform::{VERSION, Workspace};
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

const PROVIDER: &str = "terraform-provider-fracgpu";
const BINARY: &str = env!("CARGO_BIN_EXE_terraform-provider-fracgpu");

/// Go's OS_ARCH of this machine, as terraform names it.
fn platform() -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => panic!("no Go name known here for {other}"),
    };
    format!("{}_{arch}", std::env::consts::OS)
}

fn zip_name() -> String {
    format!("{PROVIDER}_{VERSION}_{}.zip", platform())
}
fn manifest_name() -> String {
    format!("{PROVIDER}_{VERSION}_manifest.json")
}
fn sums_name() -> String {
    format!("{PROVIDER}_{VERSION}_SHA256SUMS")
}
fn member_name() -> String {
    format!("{PROVIDER}_v{VERSION}")
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs scripts/release with these arguments and extra environment, never inheriting a signing key
/// from the caller's environment.
fn release(args: &[&str], env: &[(&str, &str)]) -> Run {
    let script = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("scripts/release");
    let mut cmd = Command::new(&script);
    cmd.args(args).env_remove("GPG_FINGERPRINT");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("could not run {}: {e}", script.display()));
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn release_ok(args: &[&str], env: &[(&str, &str)]) -> Run {
    let run = release(args, env);
    assert_eq!(
        run.code, 0,
        "scripts/release {args:?} failed:\n{}\n{}",
        run.stdout, run.stderr
    );
    run
}

fn sha256_hex(data: &[u8]) -> String {
    // aws-lc's SHA-256, reached through rustls: a different implementation than the script's.
    let suite = rustls::crypto::aws_lc_rs::cipher_suite::TLS13_AES_128_GCM_SHA256;
    let digest = suite.tls13().unwrap().common.hash_provider.hash(data);
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// The lines of a SHA256SUMS file as (hash, file name), in file order.
fn parse_sums(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(|line| {
            let (hash, name) = line
                .split_once("  ")
                .unwrap_or_else(|| panic!("not a `HASH  NAME` line: {line:?}"));
            (hash.to_string(), name.to_string())
        })
        .collect()
}

fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// One member of a zip archive, read with our own parser of the format (central directory, local
/// header, raw deflate), so that the test does not trust the tool that wrote it.
struct ZipMember {
    name: String,
    made_by_unix: bool,
    mode: u32,
    dos_time: (u16, u16),
    data: Vec<u8>,
}

fn read_zip(bytes: &[u8]) -> Vec<ZipMember> {
    let u16_at = |at: usize| u16::from_le_bytes(bytes[at..at + 2].try_into().unwrap());
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    let eocd = (0..=bytes.len() - 22)
        .rev()
        .find(|&at| u32_at(at) == 0x0605_4b50)
        .expect("end of central directory record");
    let entries = u16_at(eocd + 10) as usize;
    let mut at = u32_at(eocd + 16) as usize;
    let mut members = Vec::new();
    for _ in 0..entries {
        assert_eq!(u32_at(at), 0x0201_4b50, "central directory entry at {at}");
        let made_by = u16_at(at + 4);
        let method = u16_at(at + 10);
        let dos_time = (u16_at(at + 12), u16_at(at + 14));
        let crc = u32_at(at + 16);
        let compressed = u32_at(at + 20) as usize;
        let size = u32_at(at + 24) as usize;
        let name_len = u16_at(at + 28) as usize;
        let extra_len = u16_at(at + 30) as usize;
        let comment_len = u16_at(at + 32) as usize;
        let external = u32_at(at + 38);
        let local = u32_at(at + 42) as usize;
        let name = String::from_utf8(bytes[at + 46..at + 46 + name_len].to_vec()).unwrap();
        at += 46 + name_len + extra_len + comment_len;

        assert_eq!(u32_at(local), 0x0403_4b50, "local header of {name}");
        let start = local + 30 + u16_at(local + 26) as usize + u16_at(local + 28) as usize;
        let raw = &bytes[start..start + compressed];
        let data = match method {
            0 => raw.to_vec(),
            8 => {
                let mut out = Vec::with_capacity(size);
                flate2::read::DeflateDecoder::new(raw)
                    .read_to_end(&mut out)
                    .unwrap();
                out
            }
            other => panic!("{name}: compression method {other}"),
        };
        assert_eq!(data.len(), size, "{name}: uncompressed size");
        let mut check = flate2::Crc::new();
        check.update(&data);
        assert_eq!(check.sum(), crc, "{name}: CRC-32");
        members.push(ZipMember {
            name,
            made_by_unix: made_by >> 8 == 3,
            mode: external >> 16,
            dos_time,
            data,
        });
    }
    members
}

/// The hashes terraform recorded for the provider in .terraform.lock.hcl.
fn locked_hashes(ws: &Workspace) -> Vec<String> {
    let lock = std::fs::read_to_string(ws.dir.join(".terraform.lock.hcl")).unwrap();
    assert!(
        lock.contains("provider \"registry.terraform.io/fracgpu/fracgpu\"")
            && lock.contains(&format!("version     = \"{VERSION}\"")),
        "{lock}"
    );
    lock.split('"')
        .filter(|s| s.starts_with("h1:") || s.starts_with("zh:"))
        .map(str::to_string)
        .collect()
}

fn main_tf() -> String {
    format!(
        r#"terraform {{
  required_providers {{
    fracgpu = {{
      source  = "fracgpu/fracgpu"
      version = "{VERSION}"
    }}
  }}
}}

data "fracgpu_machine_type" "this" {{
  cloud = "aks"
  name  = "Standard_NC48ads_A100_v4"
}}

output "gpu_model" {{
  value = data.fracgpu_machine_type.this.gpu_model
}}

output "slices" {{
  value = provider::fracgpu::slices_for(4000, 15360, 10)
}}
"#
    )
}

/// A dependency lock file pinning this version of the provider to one hash.
fn lock_file(hash: &str) -> String {
    format!(
        "provider \"registry.terraform.io/fracgpu/fracgpu\" {{\n  version     = \"{VERSION}\"\n  constraints = \"{VERSION}\"\n  hashes = [\n    \"{hash}\",\n  ]\n}}\n"
    )
}

/// `terraform init` from the mirror, then a plan whose outputs only the provider can compute.
fn init_and_plan(ws: &Workspace) {
    let init = ws.init();
    assert!(
        init.stdout
            .contains(&format!("Installing fracgpu/fracgpu v{VERSION}")),
        "{}",
        init.text()
    );
    ws.ok(&["plan", "-no-color", "-input=false", "-out=tfplan"]);
    let plan = ws.ok(&["show", "-json", "-no-color", "tfplan"]);
    let plan: serde_json::Value = serde_json::from_str(&plan.stdout).unwrap();
    let outputs = &plan["planned_values"]["outputs"];
    assert_eq!(outputs["gpu_model"]["value"], "A100-80GB", "{plan}");
    assert_eq!(outputs["slices"]["value"], 3, "{plan}");
}

#[test]
fn release_files_install_from_packed_and_unpacked_mirrors_and_serve() {
    let tmp = tempfile::tempdir().unwrap();
    let dist = tmp.path().join("dist");
    let run = release_ok(&["--binary", BINARY, "--out", dist.to_str().unwrap()], &[]);

    // Exactly the files the registry names, and a summary that names them.
    let mut expected = vec![zip_name(), manifest_name(), sums_name()];
    expected.sort();
    assert_eq!(file_names(&dist), expected);
    for name in &expected {
        assert!(run.stdout.contains(name.as_str()), "{}", run.stdout);
    }

    // SHA256SUMS covers the zip and the manifest, sorted, with their real hashes.
    let sums = std::fs::read_to_string(dist.join(sums_name())).unwrap();
    let sums = parse_sums(&sums);
    let names: Vec<&str> = sums.iter().map(|(_, n)| n.as_str()).collect();
    let mut covered = vec![zip_name(), manifest_name()];
    covered.sort();
    assert_eq!(names, covered, "the zip and the manifest, in name order");
    for (hash, name) in &sums {
        assert_eq!(
            *hash,
            sha256_hex(&std::fs::read(dist.join(name)).unwrap()),
            "{name}"
        );
    }
    let zip_sum = sums
        .iter()
        .find(|(_, n)| *n == zip_name())
        .unwrap()
        .0
        .clone();

    // The manifest is the repository's, which declares protocol 6.
    let manifest = std::fs::read(dist.join(manifest_name())).unwrap();
    let repo_manifest = std::fs::read(
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .join("terraform-registry-manifest.json"),
    )
    .unwrap();
    assert_eq!(manifest, repo_manifest);
    let manifest: serde_json::Value = serde_json::from_slice(&manifest).unwrap();
    assert_eq!(
        manifest,
        serde_json::json!({"version": 1, "metadata": {"protocol_versions": ["6.0"]}})
    );

    // The zip holds the binary alone, under the registry's name, executable, with a fixed time.
    let zip = std::fs::read(dist.join(zip_name())).unwrap();
    let members = read_zip(&zip);
    assert_eq!(members.len(), 1);
    let member = &members[0];
    assert_eq!(member.name, member_name());
    assert!(member.made_by_unix, "the mode is only honoured from Unix");
    assert_eq!(member.mode, 0o100755, "{:o}", member.mode);
    assert_eq!(member.dos_time, (0, (1 << 5) | 1), "1980-01-01 00:00:00");
    assert!(
        member.data == std::fs::read(BINARY).unwrap(),
        "the zipped binary is the given one"
    );

    // Packed layout: HOSTNAME/NAMESPACE/TYPE/terraform-provider-TYPE_VERSION_OS_ARCH.zip.
    let packed = tmp.path().join("packed");
    let dir = packed.join("registry.terraform.io/fracgpu/fracgpu");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(dist.join(zip_name()), dir.join(zip_name())).unwrap();
    // A first init records the h1: hash of what it installed (terraform 1.11 records zh: hashes only
    // for packages from a registry, whose signed SHA256SUMS lists them).
    let ws = Workspace::with_mirror(&main_tf(), &packed);
    ws.init();
    let hashes = locked_hashes(&ws);
    let h1: Vec<String> = hashes
        .iter()
        .filter(|h| h.starts_with("h1:"))
        .cloned()
        .collect();
    assert_eq!(h1.len(), 1, "{hashes:?}");
    for zh in hashes.iter().filter(|h| h.starts_with("zh:")) {
        assert_eq!(*zh, format!("zh:{zip_sum}"));
    }
    let installed = ws.dir.join(format!(
        ".terraform/providers/registry.terraform.io/fracgpu/fracgpu/{VERSION}/{}/{}",
        platform(),
        member_name()
    ));
    assert!(std::fs::read(&installed).unwrap() == member.data);
    let mode = std::fs::metadata(&installed).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o755, "{mode:o}");

    // A lock file holding only the SHA256SUMS entry as a zh: hash (what a user gets from the
    // registry) accepts the zip: terraform's zh: is the zip's SHA-256. The installed binary serves.
    let ws = Workspace::with_mirror(&main_tf(), &packed);
    ws.write(".terraform.lock.hcl", &lock_file(&format!("zh:{zip_sum}")));
    init_and_plan(&ws);
    let mut recorded = locked_hashes(&ws);
    recorded.sort();
    assert_eq!(recorded, [h1[0].clone(), format!("zh:{zip_sum}")]);

    // Any other zh: hash refuses it, so the check above is a real one.
    let mut wrong = zip_sum.into_bytes();
    wrong[0] = if wrong[0] == b'0' { b'1' } else { b'0' };
    let wrong = String::from_utf8(wrong).unwrap();
    let ws = Workspace::with_mirror(&main_tf(), &packed);
    ws.write(".terraform.lock.hcl", &lock_file(&format!("zh:{wrong}")));
    let init = ws.run(&["init", "-no-color", "-input=false"]);
    assert_eq!(init.code, 1, "{}", init.text());
    // terraform wraps this message; its words are checked without the line breaks.
    let words = init.text().split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("doesn't match any of the checksums previously recorded"),
        "{}",
        init.text()
    );

    // Unpacked layout: HOSTNAME/NAMESPACE/TYPE/VERSION/OS_ARCH/, with the zip's member in it.
    let unpacked = tmp.path().join("unpacked");
    let dir = unpacked.join(format!(
        "registry.terraform.io/fracgpu/fracgpu/{VERSION}/{}",
        platform()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let extracted = dir.join(&member.name);
    std::fs::write(&extracted, &member.data).unwrap();
    std::fs::set_permissions(
        &extracted,
        std::fs::Permissions::from_mode(member.mode & 0o7777),
    )
    .unwrap();
    let ws = Workspace::with_mirror(&main_tf(), &unpacked);
    init_and_plan(&ws);
    let unpacked_hashes = locked_hashes(&ws);
    assert_eq!(
        unpacked_hashes,
        [h1[0].clone()],
        "the same package's h1: hash, and no zh: without a zip"
    );
}

#[test]
fn zips_are_reproducible_and_a_signed_run_verifies_with_gpg() {
    let tmp = tempfile::tempdir().unwrap();

    // The same bytes under another name with another modification time package identically.
    let copy = tmp.path().join("provider");
    std::fs::copy(BINARY, &copy).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&copy)
        .unwrap()
        .set_modified(
            std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_234_567_890),
        )
        .unwrap();
    let a = tmp.path().join("a");
    release_ok(
        &[
            "--binary",
            copy.to_str().unwrap(),
            "--out",
            a.to_str().unwrap(),
        ],
        &[],
    );

    let Some(gpg) = Gpg::new(tmp.path()) else {
        let b = tmp.path().join("b");
        release_ok(&["--binary", BINARY, "--out", b.to_str().unwrap()], &[]);
        assert_same_release(&a, &b);
        return;
    };
    let key = gpg.generate_key();
    let gnupghome = [("GNUPGHOME", gpg.home.to_str().unwrap())];

    // A key gpg does not have stops the script before it writes anything.
    let none = tmp.path().join("none");
    let run = release(
        &[
            "--binary",
            BINARY,
            "--out",
            none.to_str().unwrap(),
            "--sign",
            "NO-SUCH-KEY",
        ],
        &gnupghome,
    );
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("gpg has no secret key NO-SUCH-KEY"),
        "{}",
        run.stderr
    );
    assert!(!none.exists());

    let b = tmp.path().join("b");
    let run = release_ok(
        &[
            "--binary",
            BINARY,
            "--out",
            b.to_str().unwrap(),
            "--sign",
            &key,
        ],
        &[("GNUPGHOME", gpg.home.to_str().unwrap())],
    );
    assert!(
        !run.stderr.contains("warning"),
        "an RSA key draws no warning:\n{}",
        run.stderr
    );
    assert_same_release(&a, &b);

    let sig_name = format!("{}.sig", sums_name());
    let mut expected = vec![zip_name(), manifest_name(), sums_name(), sig_name.clone()];
    expected.sort();
    assert_eq!(file_names(&b), expected);
    assert!(run.stdout.contains(&sig_name), "{}", run.stdout);

    // A binary OpenPGP packet (the tag byte's high bit is set), not ASCII armour, which terraform
    // and the registry refuse.
    let sig = b.join(&sig_name);
    let first = std::fs::read(&sig).unwrap()[0];
    assert!(first & 0x80 != 0, "first byte {first:#04x}");

    let sums = b.join(sums_name());
    let status = gpg.verify(&sig, &sums);
    assert!(
        status.contains(&format!("[GNUPG:] VALIDSIG {key}")),
        "the signature is the key's:\n{status}"
    );
    // And it signs these exact sums: one changed byte fails verification.
    let tampered = tmp.path().join("tampered");
    let mut bytes = std::fs::read(&sums).unwrap();
    bytes[0] = if bytes[0] == b'0' { b'1' } else { b'0' };
    std::fs::write(&tampered, bytes).unwrap();
    let status = gpg.verify(&sig, &tampered);
    assert!(
        status.contains("[GNUPG:] BADSIG") && !status.contains("VALIDSIG"),
        "{status}"
    );
}

fn assert_same_release(a: &Path, b: &Path) {
    for name in [zip_name(), manifest_name(), sums_name()] {
        assert!(
            std::fs::read(a.join(&name)).unwrap() == std::fs::read(b.join(&name)).unwrap(),
            "{name} differs between two runs on the same binary"
        );
    }
}

/// gpg with a keyring of its own in a temporary GNUPGHOME; its agent is stopped on drop.
struct Gpg {
    home: PathBuf,
}

impl Gpg {
    fn new(tmp: &Path) -> Option<Gpg> {
        crate::common::tools::require(crate::common::tools::Tool::Gpg)?;
        let home = tmp.join("gnupg");
        std::fs::create_dir(&home).unwrap();
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
        Some(Gpg { home })
    }

    fn gpg(&self, args: &[&str]) -> std::process::Output {
        Command::new("gpg")
            .args(["--batch", "--no-tty"])
            .args(args)
            .env("GNUPGHOME", &self.home)
            .output()
            .unwrap()
    }

    /// An RSA signing key without passphrase (the registry refuses ECC keys); its fingerprint.
    fn generate_key(&self) -> String {
        let out = self.gpg(&[
            "--passphrase",
            "",
            "--quick-gen-key",
            "fracgpu release test <release-test@example.invalid>",
            "rsa2048",
            "sign",
            "never",
        ]);
        assert!(
            out.status.success(),
            "gpg --quick-gen-key: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let out = self.gpg(&["--with-colons", "--list-secret-keys"]);
        let listing = String::from_utf8_lossy(&out.stdout).into_owned();
        listing
            .lines()
            .find_map(|l| l.strip_prefix("fpr:"))
            .and_then(|l| l.split(':').find(|f| f.len() == 40))
            .unwrap_or_else(|| panic!("no fingerprint in:\n{listing}"))
            .to_string()
    }

    /// gpg's machine-readable status lines for verifying `sig` over `file`.
    fn verify(&self, sig: &Path, file: &Path) -> String {
        let out = self.gpg(&[
            "--status-fd",
            "1",
            "--verify",
            sig.to_str().unwrap(),
            file.to_str().unwrap(),
        ]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Gpg {
    fn drop(&mut self) {
        let _ = Command::new("gpgconf")
            .args(["--kill", "all"])
            .env("GNUPGHOME", &self.home)
            .output();
    }
}

#[test]
fn a_target_that_is_not_installed_is_a_clear_error() {
    let triple = "powerpc64le-unknown-linux-gnu";
    let sysroot = Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .unwrap();
    let sysroot = String::from_utf8(sysroot.stdout).unwrap();
    if Path::new(sysroot.trim())
        .join("lib/rustlib")
        .join(triple)
        .exists()
    {
        eprintln!("SKIPPED: the Rust target {triple} is installed on this machine");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("dist");
    let run = release(&["--target", triple, "--out", out.to_str().unwrap()], &[]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains(&format!("rustup target add {triple}")),
        "{}",
        run.stderr
    );
    assert!(!out.exists(), "nothing is written before the build");

    // A triple with no Go name is refused by name, too.
    let run = release(
        &[
            "--target",
            "wasm32-unknown-unknown",
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .contains("no Go OS/ARCH is known for the Rust target wasm32-unknown-unknown"),
        "{}",
        run.stderr
    );
}
