//! Exporting a session: as JSONL (one event per line) and as a capture of its head state.

use crate::{Journal, JournalError, StoredEvent};
use salvage_types::capture::{Capture, ClientInfo, Failure, Recorded, Upstream, CAPTURE_FORMAT};
use salvage_types::event::EventBody;
use serde_json::json;

/// One event as a JSON line.
pub fn event_json(e: &StoredEvent) -> serde_json::Value {
    json!({
        "seq": e.seq,
        "event_id": e.event_id,
        "parent": e.parent,
        "kind": e.kind,
        "kind_version": e.kind_version,
        "ts": e.ts,
        "body": e.body,
        "delta": e.delta,
    })
}

impl Journal {
    /// Calls `f` on every event of a session in order, reading them a page at a time.
    pub fn for_each_event(
        &self,
        session: &str,
        mut f: impl FnMut(&StoredEvent) -> Result<(), JournalError>,
    ) -> Result<(), JournalError> {
        let mut after = 0;
        loop {
            let page = self.events(session, after, 1000)?;
            let Some(last) = page.last() else { return Ok(()) };
            after = last.seq;
            for e in &page {
                f(e)?;
            }
        }
    }

    /// Every event of a session, one JSON object per line.
    pub fn export_jsonl(&self, session: &str) -> Result<String, JournalError> {
        self.export_jsonl_upto(session, u64::MAX)
    }

    /// The events up to and including `at`, one JSON object per line.
    pub fn export_jsonl_upto(&self, session: &str, at: u64) -> Result<String, JournalError> {
        let mut out = String::new();
        self.for_each_event(session, |e| {
            if e.seq > at {
                return Ok(());
            }
            let mut line = event_json(e);
            // Self-contained: the messages a delta inserts travel with it.
            if let Some(d) = &e.delta {
                let hashes = d.hashes(session, e.seq)?;
                let msgs = crate::messages::load_messages(
                    self.conn(),
                    session,
                    e.seq,
                    &hashes,
                    self.decode_threads,
                )?;
                if let Some(obj) = line.as_object_mut() {
                    obj.insert("messages".into(), serde_json::json!(msgs));
                }
            }
            out.push_str(&line.to_string());
            out.push('\n');
            Ok(())
        })?;
        Ok(out)
    }

    /// The session's head state as a capture: its history, the settings it started with, and
    /// the last provider error it saw.
    pub fn export_capture(&self, session: &str) -> Result<Capture, JournalError> {
        let v = self.version(session)?;
        self.export_capture_at(session, v)
    }

    /// The session's state after event `at` as a capture (the settings it started with, the last
    /// provider error up to that event).
    pub fn export_capture_at(&self, session: &str, at: u64) -> Result<Capture, JournalError> {
        let head = self.view_at(session, at)?;
        let info = self.sessions()?.into_iter().find(|s| s.id == session);
        let mut capture = Capture {
            format: CAPTURE_FORMAT.to_string(),
            id: session.to_string(),
            title: info.map(|i| i.title).filter(|t| !t.is_empty()),
            client: Some(ClientInfo { name: "salvage".into(), surface: None }),
            provider: None,
            model: None,
            settings: Default::default(),
            request: None,
            history: head.history,
            failure: Failure::default(),
            upstream: Upstream::default(),
            recorded: Recorded::default(),
            expect: None,
        };
        let mut started = None;
        self.for_each_event(session, |e| {
            if e.seq > at {
                return Ok(());
            }
            match &e.body {
                EventBody::SessionStarted { provider, model, settings, request, .. } => {
                    capture.provider.clone_from(provider);
                    capture.model.clone_from(model);
                    capture.settings.clone_from(settings);
                    capture.request = request.as_deref().cloned();
                    started = Some(e.seq);
                }
                EventBody::ProviderError { status, message, transport, rejected_bytes, .. } => {
                    capture.failure = Failure {
                        status: *status,
                        message: message.clone(),
                        transport: transport.clone(),
                        rejected_request_bytes: *rejected_bytes,
                    };
                }
                _ => {}
            }
            Ok(())
        })?;
        // The size of the body as sent holds for the history it was sent with, not for a later
        // (compacted, grown) one: an export of another history leaves it to be measured.
        // Nor for the same messages once a redaction replaced one's stored content (its hash
        // stays: the history compares equal, its bytes do not).
        if let (Some(r), Some(s)) = (capture.request.as_mut(), started) {
            let now = self.history_hashes(session, at)?;
            let mut redacted = false;
            for h in &now {
                redacted = redacted || crate::messages::is_redacted(self.conn(), h)?;
            }
            if redacted || (s != at && self.history_hashes(session, s)? != now) {
                r.bytes = None;
            }
        }
        Ok(capture)
    }
}
