//! The `--state` file: a world written so that a crash leaves the old file or the new one, never a
//! torn one, and read back on start. Apart from the handle, which decides when to write, because
//! the kube emulator's persistence (stack.rs) writes its snapshots the same way.

use std::path::{Path, PathBuf};

use crate::world::World;

#[derive(Debug)]
pub enum SandboxError {
    Io(PathBuf, std::io::Error),
    Corrupt(PathBuf, serde_json::Error),
}

impl std::fmt::Display for SandboxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SandboxError::Io(p, e) => write!(f, "{}: {e}", p.display()),
            SandboxError::Corrupt(p, e) => {
                write!(f, "{}: not a sandbox state file: {e}", p.display())
            }
        }
    }
}

impl std::error::Error for SandboxError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SandboxError::Io(_, e) => Some(e),
            SandboxError::Corrupt(_, e) => Some(e),
        }
    }
}

/// The world a state file holds.
pub(crate) fn read_world(path: &Path) -> Result<World, SandboxError> {
    let text = std::fs::read(path).map_err(|e| SandboxError::Io(path.to_path_buf(), e))?;
    serde_json::from_slice(&text).map_err(|e| SandboxError::Corrupt(path.to_path_buf(), e))
}

/// Write `bytes` to `path` so that a reader (or a crash) sees either the old or the new file, never a
/// torn one: write a temporary file beside it, flush it to disk, then rename over the target.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "state".into());
    let tmp = dir.join(format!(".{name}.tmp{}", std::process::id()));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}
