//! Atomic, owner-only file writes for `-o FILE`, `--bless` and exports.
//!
//! The bytes go to a temporary file beside the target (so the rename stays on one file system),
//! which is synced and renamed over the target: a reader never sees half a file. A new file is
//! readable by its owner only (0600, whatever the umask); a replaced file keeps its mode, so
//! `--bless` never loosens a capture's permissions. A temporary file left by a process that was
//! killed mid-write is removed by the next write to the same folder.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Marks our temporary files: `.{name}.{pid}.{random}.salvage-tmp`.
const SUFFIX: &str = ".salvage-tmp";

/// Writes `bytes` to `path` atomically (see the module documentation).
pub fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_with(path, |w| w.write_all(bytes))
}

/// Writes what `fill` streams into its writer (buffered) to `path` atomically, so large output
/// is never held in memory as a whole. An error of `fill` leaves the target untouched.
pub fn write_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    remove_stale(&dir, &name);
    #[cfg(unix)]
    let mode = {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).map(|m| m.permissions().mode() & 0o7777).unwrap_or(0o600)
    };
    // tempfile creates the file 0600 with O_EXCL and deletes it when dropped unpersisted (an
    // error, a panic); only a kill leaves it, for `remove_stale` to find.
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}.{}.", std::process::id()))
        .suffix(SUFFIX)
        .tempfile_in(&dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        tmp.as_file().set_permissions(std::fs::Permissions::from_mode(mode))?;
    }
    {
        let mut w = std::io::BufWriter::with_capacity(1 << 16, &mut tmp);
        fill(&mut w)?;
        w.flush()?;
    }
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    // The rename itself is durable once the folder is synced (best effort: not every platform
    // can open a folder).
    if let Ok(d) = std::fs::File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Removes temporary files for `name` in `dir` whose writer is gone: its process id no longer
/// runs (where `/proc` tells), or, elsewhere, the file is over an hour old.
fn remove_stale(dir: &Path, name: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let prefix = format!(".{name}.");
    for e in entries.flatten() {
        let file = e.file_name();
        let Some(file) = file.to_str() else { continue };
        let Some(rest) = file.strip_prefix(&prefix).and_then(|r| r.strip_suffix(SUFFIX)) else {
            continue;
        };
        let Some(pid) = rest.split('.').next().and_then(|p| p.parse::<u32>().ok()) else { continue };
        if pid == std::process::id() {
            continue;
        }
        let gone = if Path::new("/proc/self").exists() {
            !Path::new(&format!("/proc/{pid}")).exists()
        } else {
            e.metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age.as_secs() > 3600)
        };
        if gone {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn new_files_are_owner_only_and_replaced_files_keep_their_mode() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.json");
        write(&p, b"one").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).map(|m| m.permissions().mode() & 0o777).unwrap_or(0);
        assert_eq!(mode(&p), 0o600);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        write(&p, b"two").unwrap();
        assert_eq!((mode(&p), std::fs::read(&p).ok()), (0o640, Some(b"two".to_vec())));
        // A dead writer's temporary file goes; a live one's stays.
        let stale = dir.path().join(format!(".out.json.{}.abc{SUFFIX}", u32::MAX - 1));
        let live = dir.path().join(format!(".out.json.1.abc{SUFFIX}"));
        std::fs::write(&stale, b"x").unwrap();
        std::fs::write(&live, b"x").unwrap();
        write(&p, b"three").unwrap();
        assert!(!stale.exists() && live.exists());
    }
}
