//! `salvage ccr stats|verify|gc|put|redact`: the archive behind @recall.

use crate::db::{DbArgs, WithDb};
use crate::exit::{Failure, Outcome};
use crate::output::{table, Output};
use salvage_ccr::{Ccr, Retention};
use salvage_types::Clock;
use salvage_types::{format_bytes, ByteSize};
use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `salvage ccr`.
pub type Args = WithDb<Sub>;

/// The subcommands of `salvage ccr`.
#[derive(clap::Subcommand)]
pub enum Sub {
    /// Archive size, entries and compression ratio.
    Stats {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Decode and hash every blob; exit 1 naming each bad one.
    Verify {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Evict unreferenced blobs by age and capacity (blobs referenced by a journal are kept).
    Gc {
        /// Keep the archive under this size (e.g. 512MB).
        #[arg(long, value_name = "SIZE")]
        max_bytes: Option<String>,
        /// Evict blobs not read for this many days.
        #[arg(long, value_name = "DAYS")]
        max_age_days: Option<u64>,
        /// Never evict blobs younger than this many seconds.
        #[arg(long, value_name = "SECS", default_value_t = 600)]
        grace_secs: u64,
        /// Report what would be evicted without deleting.
        #[arg(long)]
        dry_run: bool,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Archive a file ('-' for stdin) and print its marker.
    Put {
        /// The file.
        file: PathBuf,
    },
    /// Clear a blob's content, keeping its key (for secrets that reached the archive).
    Redact {
        /// The key or marker.
        key: String,
    },
}

/// Runs the command.
pub fn run(
    args: Args,
    env: &std::collections::BTreeMap<String, String>,
    clock: &dyn Clock,
    out: &mut Output,
) -> Outcome {
    match args.command {
        Sub::Stats { json } => stats(&args.db, json, clock, out),
        Sub::Verify { json } => verify(&args.db, json, clock, out),
        Sub::Gc { max_bytes, max_age_days, grace_secs, dry_run, json } => {
            let policy = retention(max_bytes, max_age_days, grace_secs, dry_run)?;
            gc(&args.db, &policy, json, clock, out)
        }
        Sub::Put { file } => {
            put(&args.db, &file, crate::db::ceilings(env)?.capture.max_file_bytes, clock, out)
        }
        Sub::Redact { key } => redact(&args.db, &key, clock, out),
    }
}

/// `ccr stats`.
fn stats(db: &DbArgs, json: bool, clock: &dyn Clock, out: &mut Output) -> Outcome {
    let store = db.open_read()?;
    let ccr = Ccr::new(store.conn(), clock);
    let s = ccr.stats().map_err(crate::db::failure)?;
    if json {
        let mut v = json!(s);
        v["ratio"] = json!(s.ratio());
        out.json(&v)?;
    } else {
        out.put(&table(&[
            vec!["entries".into(), s.entries.to_string()],
            vec!["original".into(), format_bytes(s.raw_bytes)],
            vec!["stored".into(), format_bytes(s.stored_bytes)],
            vec!["ratio".into(), format!("{:.2}×", s.ratio())],
            vec!["referenced".into(), s.referenced.to_string()],
            vec!["redacted".into(), s.redacted.to_string()],
        ]))?;
    }
    Ok(())
}

/// `ccr verify`: exit 1 when a blob is corrupt.
fn verify(db: &DbArgs, json: bool, clock: &dyn Clock, out: &mut Output) -> Outcome {
    let store = db.open_read()?;
    let ccr = Ccr::new(store.conn(), clock);
    let r = ccr.verify().map_err(crate::db::failure)?;
    if json {
        out.json(&json!({
            "checked": r.checked,
            "redacted": r.redacted,
            "bad": r.bad.iter().map(|(k, why)| json!({"key": k, "problem": why})).collect::<Vec<_>>(),
        }))?;
    } else {
        for (k, why) in &r.bad {
            out.line(&format!("BAD  ccr:{k}  {why}"))?;
        }
        out.line(&format!("{} checked, {} redacted, {} bad", r.checked, r.redacted, r.bad.len()))?;
    }
    if r.bad.is_empty() {
        Ok(())
    } else {
        Err(Failure::Problem(format!("{} corrupt blob(s); first: ccr:{}", r.bad.len(), r.bad[0].0)))
    }
}

/// The `ccr gc` policy from its flags; at least one limit is required.
fn retention(
    max_bytes: Option<String>,
    max_age_days: Option<u64>,
    grace_secs: u64,
    dry_run: bool,
) -> Result<Retention, Failure> {
    let max_bytes = match max_bytes {
        None => None,
        Some(t) => Some(
            ByteSize::parse(&t)
                .ok_or_else(|| Failure::Input(format!("--max-bytes: {t:?} is not a size such as 512MB")))?
                .0,
        ),
    };
    if max_bytes.is_none() && max_age_days.is_none() {
        return Err(Failure::Input("gc needs --max-bytes SIZE and/or --max-age-days DAYS".into()));
    }
    Ok(Retention {
        max_bytes,
        max_age: max_age_days.map(|d| Duration::from_secs(d.saturating_mul(86_400))),
        grace: Duration::from_secs(grace_secs),
        dry_run,
    })
}

/// `ccr gc`.
fn gc(db: &DbArgs, policy: &Retention, json: bool, clock: &dyn Clock, out: &mut Output) -> Outcome {
    // A dry run only counts what would go: it writes nothing, not even a schema into an empty file.
    let store = if policy.dry_run { db.open_read()? } else { db.open_existing()? };
    let ccr = Ccr::new(store.conn(), clock);
    let r = ccr.gc(policy).map_err(crate::db::failure)?;
    if json {
        out.json(&json!(r))?;
    } else {
        out.line(&format!(
            "{} {} blob(s), {} freed; {} kept by journal references; {} remain",
            if policy.dry_run { "would evict" } else { "evicted" },
            r.evicted,
            format_bytes(r.freed_bytes),
            r.kept_referenced,
            r.remaining
        ))?;
    }
    Ok(())
}

/// `ccr put FILE`.
/// FILE is read as a capture is: a regular file (or stdin), at most SALVAGE_MAX_CAPTURE bytes.
fn put(db: &DbArgs, file: &std::path::Path, limit: u64, clock: &dyn Clock, out: &mut Output) -> Outcome {
    let (bytes, _) = crate::commands::read_input_file(file, limit)?;
    let store = db.open()?;
    let ccr = Ccr::new(store.conn(), clock);
    let p = ccr.put(&bytes).map_err(crate::db::failure)?;
    out.line(&p.key.marker())?;
    if !p.collisions.is_empty() {
        eprintln!(
            "warning: another archived content shares the marker prefix {}; recall it by its full key {}",
            p.key.short(),
            p.key.hex()
        );
    }
    Ok(())
}

/// `ccr redact KEY`: zeroes the blob, records the redaction in every journal session that
/// references it, and checkpoints the write-ahead log.
fn redact(db: &DbArgs, key: &str, clock: &dyn Clock, out: &mut Output) -> Outcome {
    let keys = salvage_ccr::recall::extract_keys(key);
    let [k] = keys.as_slice() else {
        return Err(Failure::Input(if keys.len() > 1 {
            format!("{}: {} keys given; redact takes one at a time", crate::terminal::escape(key), keys.len())
        } else {
            format!("{}: {}", crate::terminal::escape(key), salvage_ccr::recall::MALFORMED)
        }));
    };
    let store = db.open_existing()?;
    // A blob that holds a journal message is that message's only copy: clearing it here would
    // leave every session holding the message unable to restore. `journal redact` replaces the
    // message's content instead and records it in the session's chain.
    let target = Ccr::new(store.conn(), clock).resolve(k).map_err(crate::db::failure)?;
    let message: Option<[u8; 32]> = store
        .conn()
        .prepare("SELECT hash FROM messages WHERE ccr_key = ?1 LIMIT 1")
        .and_then(|mut st| st.query_map([&target.0[..]], |r| r.get(0))?.next().transpose())
        .map_err(crate::db::failure)?;
    let mut j = salvage_journal::Journal::from_store(store);
    if let Some(hash) = message {
        let hex = salvage_types::CcrKey(hash).hex();
        // No session is named "": every session holding the message.
        let sessions = crate::commands::journal_redact::sessions_holding(&j, "", &[hash])?;
        let session = sessions.first().map_or("SESSION", String::as_str);
        return Err(Failure::Input(format!(
            "ccr:{}: holds journal message {hex} (session(s) {}); clearing it would leave them unable to restore: redact it with `salvage journal redact {} --message {hex}`",
            target.hex(),
            match sessions.len() {
                0 => "none".to_string(),
                n if n <= 3 => sessions.join(", "),
                n => format!(
                    "{} and {} more",
                    sessions.iter().take(3).cloned().collect::<Vec<_>>().join(", "),
                    n.saturating_sub(3)
                ),
            },
            crate::terminal::escape(session)
        )));
    }
    let full = Ccr::new(j.conn(), clock).redact(k).map_err(crate::db::failure)?;
    // Every journal session that references the blob records the redaction.
    let sessions = j.sessions_referencing(&full).map_err(crate::db::failure)?;
    let now = crate::commands::now(clock);
    for s in &sessions {
        let body =
            salvage_types::event::EventBody::Redaction { keys: vec![full.hex()], counts: Default::default() };
        let id = format!("redact-{}-{s}-{}", full.short(), now.timestamp_nanos_opt().unwrap_or(0));
        j.append(s, None, vec![salvage_journal::NewEvent::new(id, now, body)]).map_err(crate::db::failure)?;
    }
    // secure_delete zeroed the old pages; a checkpoint copies them over the file and
    // truncates the write-ahead log, which still holds the old page images.
    let busy: i64 = j
        .conn()
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))
        .map_err(|e| Failure::Problem(format!("checkpoint: {e}")))?;
    if busy != 0 {
        eprintln!("warning: another process holds the database open: the old bytes leave the write-ahead log at its next checkpoint");
    }
    out.line(&format!(
        "redacted ccr:{} (key kept; recorded in {} journal session(s))",
        full.hex(),
        sessions.len()
    ))?;
    Ok(())
}
