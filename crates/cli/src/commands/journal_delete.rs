//! `salvage journal delete` and `salvage journal prune`: whole sessions go, single events never
//! do; the blobs only they referenced become evictable by `salvage ccr gc`.

use crate::exit::{Failure, Outcome};
use crate::output::{table, Output};
use salvage_journal::lookup::SessionFilter;
use salvage_journal::Journal;
use serde_json::json;

/// How long an `incomplete` session is taken for a run in progress, which `prune` keeps.
pub const IN_FLIGHT_MINUTES: i64 = 10;

/// What `prune` selects.
pub struct PrunePlan {
    /// Created before this RFC 3339 time.
    pub before: Option<String>,
    /// With this outcome.
    pub outcome: Option<String>,
    /// Title containing this.
    pub title: Option<String>,
    /// Keep the newest N of the matches.
    pub keep: Option<usize>,
    /// List only.
    pub dry_run: bool,
}

/// Deletes the sessions and reports what went.
pub fn delete(
    j: &mut Journal,
    ids: &[String],
    reason: &str,
    now: chrono::DateTime<chrono::Utc>,
    as_json: bool,
    out: &mut Output,
) -> Outcome {
    let d = j.delete_sessions(ids, reason, now).map_err(|e| match e {
        salvage_journal::JournalError::NoSession(_) => Failure::Input(e.to_string()),
        other => Failure::Problem(other.to_string()),
    })?;
    if as_json {
        out.json(&json!(d))?;
    } else {
        out.line(&format!(
            "deleted {} session(s), {} event(s), {} message(s) no longer used; {} CCR blob(s) released \
             (`salvage ccr gc --max-age-days 0` evicts unreferenced blobs past the grace period)",
            d.sessions.len(),
            d.events,
            d.messages,
            d.unreferenced_blobs
        ))?;
    }
    Ok(())
}

/// Selects the sessions of the plan and deletes them (or lists them with `dry_run`).
pub fn prune(
    j: &mut Journal,
    plan: &PrunePlan,
    now: chrono::DateTime<chrono::Utc>,
    as_json: bool,
    out: &mut Output,
) -> Outcome {
    let filter = SessionFilter { since: None, outcome: plan.outcome.clone(), title: plan.title.clone() };
    let mut matches = j.sessions_filtered(&filter).map_err(|e| Failure::Problem(e.to_string()))?;
    if let Some(before) = &plan.before {
        matches.retain(|(s, _)| s.created_at.as_str() < before.as_str());
    }
    if let Some(keep) = plan.keep {
        // Oldest first: keep the last `keep`.
        let n = matches.len().saturating_sub(keep);
        matches.truncate(n);
    }
    // A session that reads `incomplete` may be a run still writing it (a replay in progress
    // reads so until its `run_ended`): one created in the last minutes is kept, and said so.
    // Before, `prune --outcome incomplete` deleted a running replay's session under it
    // (re-review, finding 9).
    let since = now.checked_sub_signed(chrono::TimeDelta::minutes(IN_FLIGHT_MINUTES)).unwrap_or(now);
    let recent = salvage_journal::rfc3339(&since);
    let (in_flight, matches): (Vec<_>, Vec<_>) = matches.into_iter().partition(|(s, o)| {
        *o == Some(salvage_journal::lookup::INCOMPLETE) && s.created_at.as_str() >= recent.as_str()
    });
    if !in_flight.is_empty() {
        eprintln!(
            "journal prune: kept {} incomplete session(s) created in the last {IN_FLIGHT_MINUTES} minutes: a run may still be writing them",
            in_flight.len()
        );
    }
    let ids: Vec<String> = matches.iter().map(|(s, _)| s.id.clone()).collect();
    if plan.dry_run {
        if as_json {
            out.json(&json!({"dry_run": true, "sessions": ids}))?;
        } else {
            let mut rows = vec![vec!["WOULD DELETE".to_string(), "CREATED".into(), "OUTCOME".into()]];
            rows.extend(
                matches
                    .iter()
                    .map(|(s, o)| vec![s.id.clone(), s.created_at.clone(), o.unwrap_or("-").to_string()]),
            );
            out.put(&table(&rows))?;
            out.line(&format!("{} session(s) would be deleted (--dry-run)", ids.len()))?;
        }
        return Ok(());
    }
    delete(j, &ids, "prune", now, as_json, out)
}
