//! `salvage recall KEY_OR_MARKER...`: print archived originals.

use crate::db::DbArgs;
use crate::exit::{Failure, Outcome};
use crate::output::Output;
use salvage_ccr::recall::{extract_keys, recall_all, render, MALFORMED};
use salvage_ccr::CcrError;
use salvage_types::Clock;

/// Arguments of `salvage recall`.
#[derive(clap::Args)]
#[command(
    after_help = "Accepts <<ccr:KEY>>, <ccr:KEY>, ccr:KEY, a bare key (16 to 64 hex characters), or JSON such as {\"keys\": [...]}.\nOne key prints the original bytes unchanged; several print labelled sections.\nExit 1 when a key is not found, corrupt or redacted."
)]
pub struct Args {
    /// Keys or markers (each argument may hold several).
    #[arg(required = true, value_name = "KEY_OR_MARKER")]
    keys: Vec<String>,
    #[command(flatten)]
    db: DbArgs,
}

/// Runs the command.
pub fn run(
    args: Args,
    env: &std::collections::BTreeMap<String, String>,
    clock: &dyn Clock,
    out: &mut Output,
) -> Outcome {
    let max = crate::db::ceilings(env)?.max_recall_bytes;
    let mut keys: Vec<String> = Vec::new();
    for a in &args.keys {
        let found = extract_keys(a);
        if found.is_empty() {
            return Err(Failure::Input(format!("{a:?}: {MALFORMED}")));
        }
        for k in found {
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    let store = args.db.open_read()?;
    // A blob over the limit is refused from its recorded length, before it is read.
    let ccr = salvage_ccr::Ccr::new(store.conn(), clock).with_max_blob_bytes(max);
    let results = recall_all(&ccr, &keys);
    // A blob refused for its size counts with its recorded length, so the message is the one
    // for the whole output.
    let total: u64 = results
        .iter()
        .filter_map(|r| match &r.result {
            Ok(b) => Some(b.len() as u64),
            Err(CcrError::TooLarge { len, .. }) => Some(*len),
            Err(_) => None,
        })
        .fold(0u64, u64::saturating_add);
    if total > max {
        return Err(Failure::Problem(format!(
            "recall output of {} is over the {} limit (SALVAGE_MAX_RECALL)",
            salvage_types::format_bytes(total),
            salvage_types::format_bytes(max)
        )));
    }
    // A single key that fails prints nothing on stdout (so `recall K > file` never writes an
    // error into the file); several keys print labelled sections, failures included.
    if results.len() > 1 || results.iter().all(|r| r.result.is_ok()) {
        out.put_bytes(&render(&results))?;
    }
    let failed: Vec<String> = results
        .iter()
        .filter_map(|r| match &r.result {
            Ok(_) => None,
            Err(CcrError::NotFound { .. }) if results.len() > 1 => Some(format!("{}: not found", r.key)),
            Err(e) => Some(e.to_string()),
        })
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Failure::Problem(failed.join("; ")))
    }
}
