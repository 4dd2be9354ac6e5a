//! Finding sessions: an id given by unique prefix, by its run stamp, or as `latest`, and the
//! filters of `journal sessions` (created since, outcome, title).

use crate::error::{sql, stored_u64};
use crate::{Journal, JournalError, SessionInfo};
use salvage_types::event::EventBody;

/// The word that names the most recently created session.
pub const LATEST: &str = "latest";

/// How a session ended, with the spelling of `replay --json` (`recovered`, `failed_fast`,
/// `exhausted`, `not_recoverable`, `no_failure`), or `incomplete`; `None` while no request was
/// sent.
///
/// A session whose `session_started` is of version 4 or later ends each of its runs with a
/// `run_ended` event, and reads as its last run ended: the outcome that event records. A request
/// sent after the last `run_ended` (or with none at all) is a run that never ended: the process
/// was killed, the disk filled, the file was damaged, so the session reads `incomplete`. That
/// holds after an accepted request too: an answer cut at the output limit is escalated and the
/// run goes on. Before, a session read the union of all its requests: a run cut short read
/// `exhausted`, and a later run's failure was hidden by an earlier run's recovery.
///
/// A session of an earlier version has no `run_ended` events: its outcome is derived from its
/// requests alone, as it always was.
pub fn outcome_of(events: &[crate::StoredEvent]) -> Option<&'static str> {
    let versioned = events
        .iter()
        .find(|e| matches!(e.body, EventBody::SessionStarted { .. }))
        .is_some_and(|e| e.kind_version >= 4);
    if !versioned {
        let mut all = Tally::default();
        events.iter().for_each(|e| all.see(&e.body));
        return all.outcome().map(|o| o.as_str());
    }
    let (mut last, mut in_run) = (None, false);
    for e in events {
        match &e.body {
            EventBody::RequestSent { .. } => in_run = true,
            EventBody::RunEnded { outcome } => {
                last = Some(*outcome);
                in_run = false;
            }
            _ => {}
        }
    }
    if in_run {
        return Some(INCOMPLETE);
    }
    last.map(|o| o.as_str())
}

/// The outcome of a session whose last run was cut short ([`outcome_of`]).
pub const INCOMPLETE: &str = "incomplete";

/// What the requests of a run say about how it ended.
#[derive(Debug, Default)]
struct Tally {
    sent: bool,
    accepted: bool,
    rejected: bool,
    fail_fast: bool,
    not_recoverable: bool,
}

impl Tally {
    fn see(&mut self, b: &EventBody) {
        match b {
            EventBody::RequestSent { accepted, .. } => {
                self.sent = true;
                if *accepted {
                    self.accepted = true;
                } else {
                    self.rejected = true;
                }
            }
            EventBody::FloorDiagnosis { verdict, .. }
                if *verdict == salvage_types::event::FloorVerdict::FailFast =>
            {
                self.fail_fast = true
            }
            EventBody::ProviderError { class, .. } if !class.recoverable() => self.not_recoverable = true,
            _ => {}
        }
    }

    fn outcome(&self) -> Option<salvage_types::capture::Outcome> {
        use salvage_types::capture::Outcome;
        if !self.sent {
            return None;
        }
        Some(match (self.accepted, self.rejected) {
            (true, false) => Outcome::NoFailure,
            (true, true) => Outcome::Recovered,
            (false, _) if self.not_recoverable => Outcome::NotRecoverable,
            (false, _) if self.fail_fast => Outcome::FailedFast,
            (false, _) => Outcome::Exhausted,
        })
    }
}

/// For a writer that journals a finished turn in one append (the proxy): when the turn's events
/// hold a run that no `run_ended` closes (the failure was passed to the client, the retry was
/// accepted, or no failure happened at all), the outcome its closing `run_ended` records,
/// derived from the run's requests; `None` when every run is closed or none was sent.
pub fn unended_run<'a>(
    bodies: impl IntoIterator<Item = &'a EventBody>,
) -> Option<salvage_types::capture::Outcome> {
    let mut run = Tally::default();
    for b in bodies {
        match b {
            EventBody::RunEnded { .. } => run = Tally::default(),
            b => run.see(b),
        }
    }
    run.outcome()
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
