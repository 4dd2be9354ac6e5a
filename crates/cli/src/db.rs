//! Which database file a command uses: `--db PATH`, else `SALVAGE_DB`, else `.salvage/salvage.db`.

use crate::exit::Failure;
use salvage_store::{Options, Store};
use std::path::PathBuf;

/// The default database path under the current directory.
pub const DEFAULT_DB: &str = ".salvage/salvage.db";

/// The `--db` option shared by every command that touches the database.
#[derive(clap::Args, Debug, Clone)]
pub struct DbArgs {
    /// The SQLite file (created on first use).
    #[arg(long, value_name = "PATH", env = "SALVAGE_DB", default_value = DEFAULT_DB, global = true)]
    pub db: PathBuf,
}

impl DbArgs {
    /// Opens (creating) the database.
    pub fn open(&self) -> Result<Store, Failure> {
        Store::open(&self.db, &Options::default()).map_err(Failure::input)
    }

    /// Opens an existing database, refusing to create one (for read-only commands).
    pub fn open_existing(&self) -> Result<Store, Failure> {
        if !self.db.exists() {
            return Err(Failure::Input(format!(
                "{}: no such database (pass --db PATH or set SALVAGE_DB)",
                self.db.display()
            )));
        }
        self.open()
    }
}
