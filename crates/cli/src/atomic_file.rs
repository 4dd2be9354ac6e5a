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
///
/// A `path` that is a symlink is written through: the file it resolves to is replaced (the link
/// stays). A `path` (or link target) that exists and is not a regular file (a FIFO, a device, a
/// folder, a socket) is refused before anything is written, as renaming over it would replace
/// the node itself.
pub fn write_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let target = destination(path)?;
    let path = target.as_path();
    let dir = folder_of(path);
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    remove_stale(&dir, &name);
    #[cfg(unix)]
    let mode = {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).map(|m| m.permissions().mode() & 0o7777).unwrap_or(0o600)
    };
    // tempfile creates the file 0600 with O_EXCL and deletes it when dropped unpersisted (an
    // error, a panic); only a kill leaves it, for `remove_stale` to find.
    let tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}.{}.", std::process::id()))
        .suffix(SUFFIX)
        .tempfile_in(&dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        tmp.as_file().set_permissions(std::fs::Permissions::from_mode(mode))?;
    }
    fill_file(tmp.as_file(), fill)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    // The rename itself is durable once the folder is synced (best effort: not every platform
    // can open a folder).
    if let Ok(d) = std::fs::File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// The file a write to `path` replaces: `path` itself, or where its symlinks lead (a dangling
/// link's target is created); an error when that exists and is not a regular file.
fn destination(path: &Path) -> std::io::Result<PathBuf> {
    let mut p = path.to_path_buf();
    // As many links as Linux follows (ELOOP past 40).
    for _ in 0..40 {
        let meta = match std::fs::symlink_metadata(&p) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                refuse_database(&p, path)?;
                return Ok(p);
            }
            Err(e) => return Err(e),
            Ok(m) => m,
        };
        let ft = meta.file_type();
        if ft.is_symlink() {
            let to = std::fs::read_link(&p)?;
            p = match p.parent() {
                Some(d) if to.is_relative() => d.join(to),
                _ => to,
            };
            continue;
        }
        if ft.is_file() {
            refuse_database(&p, path)?;
            return Ok(p);
        }
        let via = if p == path { String::new() } else { format!(" (where {} leads)", path.display()) };
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "{}{via} is {}, not a regular file: it is not replaced (write to standard output and redirect it instead)",
                p.display(),
                salvage_types::input::describe(&ft)
            ),
        ));
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("{}: too many levels of symbolic links", path.display()),
    ))
}

/// Checks before any work that a write to `path` can be made: what [`write_with`] refuses (not a
/// regular file, a database) and a folder that does not exist, so a command fails before it
/// changes anything (a `--bless`, a journal, an archive) rather than after.
pub fn check(path: &Path) -> std::io::Result<()> {
    let target = destination(path)?;
    let dir = folder_of(&target);
    match std::fs::metadata(&dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} is not a folder", dir.display()),
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("the folder {} does not exist", dir.display()),
        )),
        Err(e) => Err(e),
    }
}

/// The folder a file at `path` is in (`.` for a bare name).
fn folder_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// An output never replaces a SQLite database, nor the `-wal`, `-shm` or `-journal` file beside
/// one: `-o` given the `--db` path (by mistake, or through a link) replaced the journal with a
/// capture or a page and exited 0, every session lost (adversarial review of the CLI, finding 1).
/// The test is the file's content (SQLite's header), so it holds whatever the path looks like.
fn refuse_database(p: &Path, asked: &Path) -> std::io::Result<()> {
    let via = if p == asked { String::new() } else { format!(" (where {} leads)", asked.display()) };
    let refuse = |what: String| {
        Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{}{via} is {what}: an output never replaces it (choose another path)", p.display()),
        ))
    };
    if is_sqlite(p) {
        return refuse("a SQLite database".into());
    }
    let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    for side in ["-wal", "-shm", "-journal"] {
        if let Some(base) = name.strip_suffix(side) {
            let db = p.with_file_name(base);
            if is_sqlite(&db) {
                return refuse(format!("the {side} file of the SQLite database {}", db.display()));
            }
        }
    }
    Ok(())
}

/// True when the file at `p` starts with SQLite's header.
fn is_sqlite(p: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 16];
    std::fs::File::open(p).and_then(|mut f| f.read_exact(&mut head)).is_ok() && &head == b"SQLite format 3\0"
}

/// Bytes a [`Handoff`] gathers before handing them to the writing thread.
const CHUNK: usize = 1 << 20;
/// What the writing thread has written is made durable every this many bytes (by a third
/// thread, see [`fill_file`]), so that the final sync has only the tail left to wait for.
const SYNC_EVERY: usize = 16 << 20;

/// Runs `fill` into `file`. `fill` serializes on this thread while another one writes the full
/// chunks to the file: the two overlap instead of taking turns. Every [`SYNC_EVERY`] bytes the
/// writing thread asks a third one to sync what is written so far, and goes on writing while
/// the disk catches up (a sync on the writing thread stalled it, and the serializer behind it,
/// for the disk's time: 20-90 ms of a 56 MB import). Where no thread can be started, a buffered
/// writer on this thread does it all (and a writer without a syncing thread syncs nothing
/// before the caller's final sync).
fn fill_file(
    file: &std::fs::File,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    std::thread::scope(|scope| {
        let (full_tx, full_rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(2);
        let (free_tx, free_rx) = std::sync::mpsc::channel::<Vec<u8>>();
        // One waiting request at most: a sync that has not started yet covers what was written
        // since it was asked for too.
        let (sync_tx, sync_rx) = std::sync::mpsc::sync_channel::<()>(1);
        let syncer = move || -> std::io::Result<()> {
            for () in sync_rx {
                file.sync_data()?;
            }
            Ok(())
        };
        let syncing = std::thread::Builder::new().name("sync".into()).spawn_scoped(scope, syncer).ok();
        let sync_tx = syncing.as_ref().map(|_| sync_tx);
        let writer = move || -> std::io::Result<()> {
            let mut unsynced = 0usize;
            for mut chunk in full_rx {
                let mut f = file;
                f.write_all(&chunk)?;
                unsynced = unsynced.saturating_add(chunk.len());
                if unsynced >= SYNC_EVERY {
                    if let Some(tx) = &sync_tx {
                        let _ = tx.try_send(());
                    }
                    unsynced = 0;
                }
                chunk.clear();
                // The buffer goes back to be filled again (its pages are already mapped).
                let _ = free_tx.send(chunk);
            }
            Ok(())
        };
        let joined = |h: std::thread::ScopedJoinHandle<'_, std::io::Result<()>>, what: &str| {
            h.join().unwrap_or_else(|_| Err(std::io::Error::other(format!("the {what} thread failed"))))
        };
        let Ok(thread) = std::thread::Builder::new().name("write".into()).spawn_scoped(scope, writer) else {
            let mut f = file;
            let mut w = std::io::BufWriter::with_capacity(1 << 16, &mut f);
            fill(&mut w)?;
            return w.flush();
        };
        let mut w = Handoff { buf: Vec::with_capacity(CHUNK), full: full_tx, free: free_rx };
        let filled = fill(&mut w).and_then(|()| w.flush());
        // Dropping the sender ends the writer's loop, and the writer's end the syncer's.
        drop(w);
        let written = joined(thread, "writing");
        let synced = syncing.map_or(Ok(()), |h| joined(h, "syncing"));
        // The writer's own error first: a fill that failed because the writer had stopped only
        // echoes it.
        written.and(synced).and(filled)
    })
}

/// The [`Write`] side of [`fill_file`]: gathers bytes into chunks and hands each full one to
/// the writing thread.
struct Handoff {
    buf: Vec<u8>,
    full: std::sync::mpsc::SyncSender<Vec<u8>>,
    free: std::sync::mpsc::Receiver<Vec<u8>>,
}

impl Handoff {
    fn send(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let next = self.free.try_recv().unwrap_or_else(|_| Vec::with_capacity(CHUNK));
        let chunk = std::mem::replace(&mut self.buf, next);
        let stopped = || std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the writing thread stopped");
        self.full.send(chunk).map_err(|_| stopped())
    }
}

impl Write for Handoff {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(bytes);
        if self.buf.len() >= CHUNK {
            self.send()?;
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.send()
    }
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

    /// Finding 07: a symlink is written through (its target replaced, the link kept); a FIFO or
    /// a folder, named directly or through a link, is refused and left as it was.
    #[test]
    fn symlinks_are_written_through_and_other_nodes_refused() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join("real")).unwrap();
        std::fs::write(d.join("real/c.json"), b"old").unwrap();
        std::os::unix::fs::symlink("real/c.json", d.join("link")).unwrap();
        std::os::unix::fs::symlink("link", d.join("link2")).unwrap();
        write(&d.join("link2"), b"new").unwrap();
        assert!(std::fs::symlink_metadata(d.join("link")).unwrap().file_type().is_symlink());
        assert!(std::fs::symlink_metadata(d.join("link2")).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read(d.join("real/c.json")).unwrap(), b"new");
        // A dangling link: its target is created.
        std::os::unix::fs::symlink("real/made.json", d.join("dangling")).unwrap();
        write(&d.join("dangling"), b"made").unwrap();
        assert_eq!(std::fs::read(d.join("real/made.json")).unwrap(), b"made");
        assert!(std::fs::symlink_metadata(d.join("dangling")).unwrap().file_type().is_symlink());

        let fifo = d.join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        std::os::unix::fs::symlink("fifo", d.join("to-fifo")).unwrap();
        for (p, kind) in
            [(fifo.clone(), "a FIFO"), (d.join("to-fifo"), "a FIFO"), (d.join("real"), "a folder")]
        {
            let e = write(&p, b"x").unwrap_err();
            assert!(e.to_string().contains(kind) && e.to_string().contains("not a regular file"), "{e}");
        }
        use std::os::unix::fs::FileTypeExt;
        assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo(), "the FIFO is kept");
        assert!(std::fs::symlink_metadata(d.join("to-fifo")).unwrap().file_type().is_symlink());
        let left: Vec<_> = std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert!(!left.iter().any(|n| n.to_string_lossy().ends_with(SUFFIX)), "{left:?}");

        // A loop of links is an error, not a hang.
        std::os::unix::fs::symlink("loop-b", d.join("loop-a")).unwrap();
        std::os::unix::fs::symlink("loop-a", d.join("loop-b")).unwrap();
        assert!(write(&d.join("loop-a"), b"x").is_err());
    }

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

    /// Lines `from..to`, each naming its number: a lost, repeated or reordered chunk shows.
    fn lines(from: usize, to: usize) -> Vec<u8> {
        (from..to).flat_map(|i| format!("line {i:>9} of the output\n").into_bytes()).collect()
    }

    #[test]
    fn large_output_arrives_whole_and_in_order_and_a_failed_fill_leaves_the_target() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("big.json");
        // Over the sync interval, in writes of every size (one byte to several chunks).
        // The last bytes come in writes of one byte, so they sit in a chunk that is not full.
        let mut expected = lines(0, (SYNC_EVERY + 3 * CHUNK) / 30);
        let body = expected.len();
        expected.extend_from_slice(b"end\n");
        let sizes = [1, 7, 4096, CHUNK - 1, 3 * CHUNK + 5, 100];
        write_with(&p, |w| {
            let mut at = 0;
            for size in sizes.iter().cycle() {
                let end = (at + size).min(body);
                w.write_all(&expected[at..end])?;
                at = end;
                if at == body {
                    break;
                }
            }
            expected[body..].iter().try_for_each(|b| w.write_all(&[*b]))
        })
        .unwrap();
        assert!(std::fs::read(&p).unwrap() == expected, "the file differs from what was written");
        // A fill that fails after several chunks went to the writing thread: the target keeps
        // its old bytes and no temporary file is left.
        let failed = write_with(&p, |w| {
            w.write_all(&lines(0, 3 * CHUNK / 30))?;
            Err(std::io::Error::other("the serializer failed"))
        });
        assert_eq!(failed.map_err(|e| e.to_string()), Err("the serializer failed".to_string()));
        assert!(std::fs::read(&p).unwrap() == expected, "a failed write changed the target");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["big.json"]);
    }
}
