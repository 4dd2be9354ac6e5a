//! Finding sessions: an id given by unique prefix, by its run stamp, or as `latest`, and the
//! filters of `journal sessions` (created since, outcome, title).

use crate::error::{sql, stored_u64};
use crate::{Journal, JournalError, SessionInfo};
use salvage_types::event::EventBody;

/// The word that names the most recently created session.
pub const LATEST: &str = "latest";

/// How a session ended, derived from its events with the spelling of `replay --json`
/// (`recovered`, `failed_fast`, `exhausted`, `not_recoverable`, `no_failure`), or `incomplete`;
/// `None` while no request was sent.
///
/// `incomplete`: the session records the end of its runs (its `session_started` is of version 4
/// or later) and its last rejection was followed by neither an accepted request nor a
/// `run_ended` event: the run was cut short (a process killed, a full disk, a damaged file) and
/// its outcome is unknown. Before, such a session read `exhausted` and `journal verify` accepted
/// it. A session of an earlier version has no `run_ended` events; its outcome is derived from its
/// requests alone, as it always was.
pub fn outcome_of(events: &[crate::StoredEvent]) -> Option<&'static str> {
    let mut sent = false;
    let mut rejected = false;
    let mut accepted = false;
    let mut fail_fast = false;
    let mut not_recoverable = false;
    let mut ends_runs = false;
    // A rejection not yet answered by an accepted request or the end of its run.
    let mut open = false;
    for e in events {
        match &e.body {
            EventBody::SessionStarted { .. } => ends_runs = e.kind_version >= 4,
            EventBody::RequestSent { accepted: a, .. } => {
                sent = true;
                if *a {
                    accepted = true;
                    open = false;
                } else {
                    rejected = true;
                    open = true;
                }
            }
            EventBody::RunEnded { .. } => open = false,
            EventBody::FloorDiagnosis { verdict, .. }
                if *verdict == salvage_types::event::FloorVerdict::FailFast =>
            {
                fail_fast = true
            }
            EventBody::ProviderError { class, .. } if !class.recoverable() => not_recoverable = true,
            _ => {}
        }
    }
    if !sent {
        return None;
    }
    if ends_runs && open {
        return Some(INCOMPLETE);
    }
    Some(match (accepted, rejected) {
        (true, false) => "no_failure",
        (true, true) => "recovered",
        (false, _) if not_recoverable => "not_recoverable",
        (false, _) if fail_fast => "failed_fast",
        (false, _) => "exhausted",
    })
}

/// The outcome of a session whose last run was cut short ([`outcome_of`]).
pub const INCOMPLETE: &str = "incomplete";

/// For a writer that journals a finished turn in one append (the proxy): when the turn's events
/// leave a rejection open (no accepted request and no `run_ended` after it: the failure was
/// passed to the client, recovery off or not possible), the outcome its closing `run_ended`
/// records, derived as [`outcome_of`] derives a session's; `None` when the turn is closed.
pub fn unended_run<'a>(
    bodies: impl IntoIterator<Item = &'a EventBody>,
) -> Option<salvage_types::capture::Outcome> {
    use salvage_types::capture::Outcome;
    let (mut open, mut fail_fast, mut not_recoverable) = (false, false, false);
    for b in bodies {
        match b {
            EventBody::RequestSent { accepted, .. } => open = !*accepted,
            EventBody::RunEnded { .. } => open = false,
            EventBody::FloorDiagnosis { verdict, .. }
                if *verdict == salvage_types::event::FloorVerdict::FailFast =>
            {
                fail_fast = true
            }
            EventBody::ProviderError { class, .. } if !class.recoverable() => not_recoverable = true,
            _ => {}
        }
    }
    open.then_some(if not_recoverable {
        Outcome::NotRecoverable
    } else if fail_fast {
        Outcome::FailedFast
    } else {
        Outcome::Exhausted
    })
}

impl Journal {
    /// Resolves what a person typed to one session id: the exact id, `latest` (the most recently
    /// created), a unique prefix of an id, or a unique prefix of the part after `@` (the run stamp
    /// `replay` shows). Ambiguous or unknown input is [`JournalError::NoSession`] naming the
    /// candidates.
    pub fn resolve_session(&self, given: &str) -> Result<String, JournalError> {
        let conn = self.conn();
        if given == LATEST {
            return conn
                .query_row("SELECT id FROM sessions ORDER BY created_at DESC, rowid DESC LIMIT 1", [], |r| {
                    r.get::<_, String>(0)
                })
                .map_err(|e| match e {
                    rusqlite::Error::QueryReturnedNoRows => {
                        JournalError::NoSession("latest (the journal has no session)".into())
                    }
                    other => JournalError::Sql { op: "resolve session", source: other },
                });
        }
        let exact: bool = conn
            .prepare_cached("SELECT 1 FROM sessions WHERE id = ?1")
            .and_then(|mut st| st.exists([given]))
            .map_err(sql("resolve session"))?;
        if exact || given.is_empty() {
            return Ok(given.to_string());
        }
        let mut found = self.ids_where("substr(id, 1, length(?1)) = ?1", given)?;
        if found.is_empty() {
            let stamp = given.trim_start_matches('@');
            found = self
                .ids_where("instr(id, '@') > 0 AND substr(id, instr(id, '@') + 1, length(?1)) = ?1", stamp)?;
        }
        match found.len() {
            0 => Err(JournalError::NoSession(given.to_string())),
            1 => Ok(found.remove(0)),
            n => {
                let shown: Vec<&str> = found.iter().take(5).map(String::as_str).collect();
                Err(JournalError::NoSession(format!(
                    "{given} is ambiguous: {n} sessions match ({}{})",
                    shown.join(", "),
                    if n > 5 { ", …" } else { "" }
                )))
            }
        }
    }

    fn ids_where(&self, cond: &str, arg: &str) -> Result<Vec<String>, JournalError> {
        let mut st = self
            .conn()
            .prepare(&format!("SELECT id FROM sessions WHERE {cond} ORDER BY id LIMIT 50"))
            .map_err(sql("resolve session"))?;
        let rows = st.query_map([arg], |r| r.get::<_, String>(0)).map_err(sql("resolve session"))?;
        rows.collect::<Result<_, _>>().map_err(sql("resolve session"))
    }

    /// How a session ended (see [`outcome_of`]).
    pub fn session_outcome(&self, session: &str) -> Result<Option<&'static str>, JournalError> {
        // Only the kinds that decide it are read and decoded, with their stored versions.
        let mut st = self
            .conn()
            .prepare_cached(
                "SELECT seq, body, kind_version FROM events WHERE session_id = ?1
                 AND kind IN ('session_started', 'request_sent', 'floor_diagnosis', 'provider_error', 'run_ended')
                 ORDER BY seq",
            )
            .map_err(sql("session outcome"))?;
        let rows = st
            .query_map([session], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?, r.get::<_, i64>(2)?)))
            .map_err(sql("session outcome"))?;
        let mut events = Vec::new();
        for row in rows {
            let (seq, body, version) = row.map_err(sql("session outcome"))?;
            let seq = stored_u64(session, 0, "seq", seq)?;
            let kind_version = u32::try_from(version).map_err(|_| JournalError::Corrupt {
                session: session.to_string(),
                seq,
                problem: format!("kind_version {version} is out of range"),
            })?;
            let body: EventBody = serde_json::from_slice(&body).map_err(|e| JournalError::Corrupt {
                session: session.to_string(),
                seq,
                problem: format!("body does not decode: {e}"),
            })?;
            events.push(crate::StoredEvent {
                seq,
                event_id: String::new(),
                parent: None,
                kind: body.kind().to_string(),
                kind_version,
                ts: String::new(),
                body,
                delta: None,
            });
        }
        Ok(outcome_of(&events))
    }
}

/// The filters of `journal sessions`.
#[derive(Debug, Clone, Default)]
pub struct SessionFilter {
    /// Created at or after this RFC 3339 time.
    pub since: Option<String>,
    /// Ended with this outcome.
    pub outcome: Option<String>,
    /// The title contains this text (case-insensitive).
    pub title: Option<String>,
}

impl SessionFilter {
    /// True when nothing is filtered.
    pub fn is_empty(&self) -> bool {
        self.since.is_none() && self.outcome.is_none() && self.title.is_none()
    }
}

impl Journal {
    /// The sessions passing `filter`, oldest first, each with its derived outcome when asked.
    pub fn sessions_filtered(
        &self,
        filter: &SessionFilter,
    ) -> Result<Vec<(SessionInfo, Option<&'static str>)>, JournalError> {
        let mut out = Vec::new();
        for s in self.sessions()? {
            if let Some(since) = &filter.since {
                if s.created_at.as_str() < since.as_str() {
                    continue;
                }
            }
            if let Some(t) = &filter.title {
                if !s.title.to_lowercase().contains(&t.to_lowercase()) {
                    continue;
                }
            }
            let outcome = self.session_outcome(&s.id)?;
            if let Some(o) = &filter.outcome {
                if outcome != Some(o.as_str()) {
                    continue;
                }
            }
            out.push((s, outcome));
        }
        Ok(out)
    }
}
