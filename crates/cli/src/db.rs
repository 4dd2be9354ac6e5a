//! Which database file a command uses: `--db PATH`, else `SALVAGE_DB`, else `.salvage/salvage.db`.

use crate::exit::Failure;
use salvage_store::{Options, Store};
use std::path::PathBuf;

/// The database file this command opened, for errors found after the open (a damaged page, a
/// table gone) to name it.
static OPENED: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// A database error found after the open, as the CLI reports it. Damage (SQLite's "malformed",
/// "not a database", a table or column gone: a file damaged or changed behind salvage's back) is
/// unreadable input: exit 2 naming the file. Anything else is a problem the command found (exit
/// 1). Before, damage found by a read exited 1 without naming the file, and commands disagreed
/// (review of the CLI, finding 5).
pub fn failure(e: impl std::error::Error + 'static) -> Failure {
    if is_damage(&e) {
        let file = OPENED.get().map(|p| crate::terminal::escape(&p.display().to_string()).into_owned());
        return Failure::Input(match file {
            Some(f) => format!("{f}: {e} (the database is damaged or was changed outside salvage)"),
            None => format!("{e} (the database is damaged or was changed outside salvage)"),
        });
    }
    Failure::Problem(e.to_string())
}

/// True when `e` or a cause of it is SQLite reporting a damaged or foreign file.
fn is_damage(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(x) = cur {
        if let Some(r) = x.downcast_ref::<rusqlite::Error>() {
            match r {
                rusqlite::Error::SqliteFailure(f, msg) => {
                    use rusqlite::ErrorCode as C;
                    if matches!(f.code, C::DatabaseCorrupt | C::NotADatabase) {
                        return true;
                    }
                    let m = msg.as_deref().unwrap_or_default();
                    if m.starts_with("no such table")
                        || m.starts_with("no such column")
                        || m.contains("has no column named")
                    {
                        return true;
                    }
                }
                rusqlite::Error::InvalidColumnType(..) => return true,
                _ => {}
            }
        }
        cur = x.source();
    }
    false
}

/// The default database path under the current directory.
pub const DEFAULT_DB: &str = ".salvage/salvage.db";

/// The `--db` option shared by every command that touches the database.
#[derive(clap::Args, Debug, Clone)]
pub struct DbArgs {
    /// The SQLite file (created on first use).
    #[arg(long, value_name = "PATH", env = "SALVAGE_DB", default_value = DEFAULT_DB, global = true)]
    pub db: PathBuf,
}

/// A command made of subcommands that all take `--db` (`salvage ccr …`, `salvage journal …`).
#[derive(clap::Args)]
pub struct WithDb<S: clap::Subcommand> {
    /// The subcommand.
    #[command(subcommand)]
    pub command: S,
    /// The database.
    #[command(flatten)]
    pub db: DbArgs,
}

impl DbArgs {
    /// The path, refused when it is not a plain file path: `--db` never takes an SQLite URI
    /// (`file:…`), `:memory:` or an empty name, which SQLite would read differently from the file
    /// system.
    fn path(&self) -> Result<&std::path::Path, Failure> {
        let text = self.db.to_string_lossy();
        if text.is_empty() {
            return Err(Failure::Input("--db: the path is empty".into()));
        }
        if text == ":memory:" || text.starts_with("file:") {
            return Err(Failure::Input(format!(
                "--db: {}: a file path is expected, not an SQLite URI or name (write ./{} for a file of that name; --no-journal for an in-memory run)",
                crate::terminal::escape(&text),
                crate::terminal::escape(&text)
            )));
        }
        Ok(&self.db)
    }

    /// Opens (creating) the database. Only the default folder `.salvage/` is created: a `--db`
    /// whose folder is missing is an error naming that folder.
    pub fn open(&self) -> Result<Store, Failure> {
        let path = self.path()?;
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            if !parent.is_dir() && path != std::path::Path::new(DEFAULT_DB) {
                return Err(Failure::Input(format!(
                    "{}: the folder {} does not exist (salvage creates only the default .salvage/; create it first)",
                    crate::terminal::escape(&path.display().to_string()),
                    crate::terminal::escape(&parent.display().to_string())
                )));
            }
        }
        let _ = OPENED.set(path.to_path_buf());
        Store::open(path, &Options::default()).map_err(Failure::input)
    }

    fn require_existing(&self) -> Result<&std::path::Path, Failure> {
        let path = self.path()?;
        if !path.exists() {
            return Err(Failure::Input(format!(
                "{}: no such database (pass --db PATH or set SALVAGE_DB)",
                crate::terminal::escape(&path.display().to_string())
            )));
        }
        Ok(path)
    }

    /// Opens an existing database for writing, refusing to create one.
    pub fn open_existing(&self) -> Result<Store, Failure> {
        let path = self.require_existing()?;
        let _ = OPENED.set(path.to_path_buf());
        Store::open(path, &Options { create: false, ..Options::default() }).map_err(Failure::input)
    }

    /// Opens an existing database for reading only: the file is not changed (no journal-mode
    /// switch, no identity stamp), and a file the user cannot write is still readable.
    pub fn open_read(&self) -> Result<Store, Failure> {
        let path = self.require_existing()?;
        let _ = OPENED.set(path.to_path_buf());
        Store::open(path, &Options::read_only()).map_err(Failure::input)
    }
}

/// The input ceilings from the environment: `SALVAGE_MAX_CAPTURE`, `SALVAGE_MAX_MESSAGE`,
/// `SALVAGE_MAX_HISTORY`, `SALVAGE_MAX_RECALL` (sizes such as `64MB`).
pub struct Ceilings {
    /// Capture ceilings.
    pub capture: salvage_types::capture::Limits,
    /// Bytes `salvage recall` prints at most.
    pub max_recall_bytes: u64,
}

/// Reads the ceilings; an invalid value is a usage error naming the variable.
pub fn ceilings(env: &std::collections::BTreeMap<String, String>) -> Result<Ceilings, Failure> {
    let get = |name: &str, default: u64| -> Result<u64, Failure> {
        match env.get(name).filter(|v| !v.trim().is_empty()) {
            None => Ok(default),
            Some(v) => salvage_types::ByteSize::parse(v)
                .map(|b| b.0)
                .ok_or_else(|| Failure::Input(format!("{name}: {v:?} is not a size such as 64MB"))),
        }
    };
    let d = salvage_types::capture::Limits::default();
    Ok(Ceilings {
        capture: salvage_types::capture::Limits {
            max_file_bytes: get("SALVAGE_MAX_CAPTURE", d.max_file_bytes)?,
            max_message_bytes: get("SALVAGE_MAX_MESSAGE", d.max_message_bytes)?,
            max_history_bytes: get("SALVAGE_MAX_HISTORY", d.max_history_bytes)?,
        },
        max_recall_bytes: get("SALVAGE_MAX_RECALL", 256 << 20)?,
    })
}
