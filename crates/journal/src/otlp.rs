//! Exporting a session as OpenTelemetry traces in OTLP/JSON (`ExportTraceServiceRequest`), so a
//! fleet's sessions land in any OTLP backend. Attribute names follow the GenAI semantic
//! conventions (`gen_ai.*`) for requests, usage and the conversation id; recovery and compaction
//! carry `salvage.*` attributes.
//!
//! One trace per session: a root `invoke_agent` span, a `chat` client span per request sent
//! (attempt, bytes, tokens, accepted or the error it met), an internal span per recovery attempt
//! and compaction, and span events on the root for the rest (cap learned, checkpoints, rewinds…).
//! Ids are derived from the session id and event sequence, so exporting twice gives the same ids.

use crate::{Journal, JournalError, StoredEvent};
use salvage_types::event::EventBody;
use serde_json::{json, Value};
use std::collections::BTreeSet;

const KIND_INTERNAL: u8 = 1;
const KIND_CLIENT: u8 = 3;
const STATUS_OK: u8 = 1;
const STATUS_ERROR: u8 = 2;

fn id_hex(parts: &[&str], len: usize) -> String {
    let mut h = blake3::Hasher::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update(&[0]);
    }
    let hex = h.finalize().to_hex();
    hex.get(..len.saturating_mul(2)).unwrap_or(hex.as_str()).to_string()
}

fn nanos(ts: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(ts)
        .ok()
        .and_then(|t| t.timestamp_nanos_opt())
        .map(|n| n.max(0).to_string())
        .unwrap_or_else(|| "0".into())
}

/// An OTLP `KeyValue` with a string value.
fn s(key: &str, v: impl Into<String>) -> Value {
    json!({"key": key, "value": {"stringValue": v.into()}})
}

/// An OTLP `KeyValue` with an int value (a JSON string, as int64 is in proto3 JSON).
fn n(key: &str, v: u64) -> Value {
    json!({"key": key, "value": {"intValue": v.to_string()}})
}

fn b(key: &str, v: bool) -> Value {
    json!({"key": key, "value": {"boolValue": v}})
}

fn arr(key: &str, vs: &[&str]) -> Value {
    let values: Vec<Value> = vs.iter().map(|v| json!({"stringValue": v})).collect();
    json!({"key": key, "value": {"arrayValue": {"values": values}}})
}

struct Span {
    seq: u64,
    name: String,
    kind: u8,
    start: String,
    end: String,
    attributes: Vec<Value>,
    status: Option<(u8, String)>,
}

/// The spans and root events of a session, built one event at a time.
struct Trace<'a> {
    session: &'a str,
    abandoned: BTreeSet<u64>,
    provider: String,
    model: String,
    spans: Vec<Span>,
    root_events: Vec<Value>,
    compactions: u64,
}

impl Trace<'_> {
    /// A span for event `e`, lasting until the next event (`end`).
    fn span(
        &mut self,
        e: &StoredEvent,
        end: &str,
        name: String,
        kind: u8,
        mut attributes: Vec<Value>,
        status: Option<(u8, String)>,
    ) {
        attributes.push(n("salvage.event.seq", e.seq));
        if self.abandoned.contains(&e.seq) {
            attributes.push(b("salvage.branch.abandoned", true));
        }
        self.spans.push(Span {
            seq: e.seq,
            name,
            kind,
            start: e.ts.clone(),
            end: end.to_string(),
            attributes,
            status,
        });
    }

    fn event(&mut self, e: &StoredEvent, next: Option<&StoredEvent>) {
        let end = next.map(|x| x.ts.as_str()).unwrap_or(e.ts.as_str());
        match &e.body {
            EventBody::SessionStarted { provider: p, model: m, context_window, cap, .. } => {
                self.provider = p.clone().unwrap_or_else(|| "unknown".into());
                self.model = m.clone().unwrap_or_default();
                let mut a = vec![s("salvage.event.kind", "session_started")];
                if let Some(w) = context_window {
                    a.push(n("salvage.context_window_tokens", *w));
                }
                if let Some(c) = cap {
                    a.push(n("salvage.payload.cap_bytes", *c));
                }
                self.root_events.push(
                    json!({"name": "salvage.session_started", "timeUnixNano": nanos(&e.ts), "attributes": a}),
                );
            }
            EventBody::RequestSent { .. } => self.request(e, next, end),
            EventBody::RecoveryAttempt {
                attempt,
                rung,
                outcome,
                before_bytes,
                after_bytes,
                before_messages,
                after_messages,
                archived,
            } => {
                let a = vec![
                    s("gen_ai.conversation.id", self.session),
                    n("salvage.recovery.attempt", u64::from(*attempt)),
                    n("salvage.recovery.rung", u64::from(*rung)),
                    s("salvage.recovery.outcome", outcome.to_string()),
                    n("salvage.recovery.before_bytes", *before_bytes),
                    n("salvage.recovery.after_bytes", *after_bytes),
                    n("salvage.recovery.before_messages", *before_messages),
                    n("salvage.recovery.after_messages", *after_messages),
                    n("salvage.recovery.archived", u64::try_from(archived.len()).unwrap_or(u64::MAX)),
                ];
                self.span(e, end, format!("salvage.recovery rung {rung}"), KIND_INTERNAL, a, None);
            }
            EventBody::Compaction { trigger, level, outcome, backoff_skip, route, cost, .. } => {
                self.compactions = self.compactions.saturating_add(1);
                let mut a = vec![
                    s("gen_ai.conversation.id", self.session),
                    s("salvage.compaction.trigger", trigger.to_string()),
                    n("salvage.compaction.level", u64::from(*level)),
                    s("salvage.compaction.outcome", outcome.to_string()),
                    b("salvage.compaction.backoff_skip", *backoff_skip),
                    n("salvage.summarizer.calls", cost.calls),
                    n("salvage.summarizer.input_tokens", cost.input_tokens),
                    n("salvage.summarizer.output_tokens", cost.output_tokens),
                ];
                if let Some(r) = route {
                    a.push(s("salvage.summarizer.route", r.clone()));
                }
                self.span(e, end, format!("salvage.compaction level {level}"), KIND_INTERNAL, a, None);
            }
            other => self.root_event(e, other),
        }
    }

    /// A `chat` client span for a request sent, with the response or error that followed it.
    fn request(&mut self, e: &StoredEvent, next: Option<&StoredEvent>, end: &str) {
        let EventBody::RequestSent {
            attempt,
            bytes,
            estimated_tokens,
            real_tokens,
            accepted,
            history_digest,
        } = &e.body
        else {
            return;
        };
        let mut a = vec![
            s("gen_ai.operation.name", "chat"),
            s("gen_ai.provider.name", self.provider.clone()),
            s("gen_ai.system", self.provider.clone()),
            s("gen_ai.request.model", self.model.clone()),
            s("gen_ai.conversation.id", self.session),
            n("gen_ai.usage.input_tokens", real_tokens.unwrap_or(*estimated_tokens)),
            n("salvage.request.attempt", u64::from(*attempt)),
            n("salvage.request.bytes", *bytes),
            n("salvage.request.estimated_tokens", *estimated_tokens),
            b("salvage.request.accepted", *accepted),
            s("salvage.request.history_digest", history_digest.clone()),
        ];
        if let Some(r) = real_tokens {
            a.push(n("salvage.request.real_tokens", *r));
        }
        let mut status = Some((STATUS_OK, String::new()));
        match next.map(|x| &x.body) {
            Some(EventBody::ProviderError { status: code, class, message, .. }) if !accepted => {
                a.push(s("error.type", class.to_string()));
                if let Some(c) = code {
                    a.push(n("http.response.status_code", u64::from(*c)));
                }
                status = Some((STATUS_ERROR, message.chars().take(200).collect()));
            }
            Some(EventBody::ResponseReceived { stop_reason, output_tokens }) if *accepted => {
                a.push(arr("gen_ai.response.finish_reasons", &[stop_reason.as_str()]));
                if let Some(t) = output_tokens {
                    a.push(n("gen_ai.usage.output_tokens", *t));
                }
            }
            _ if !accepted => status = Some((STATUS_ERROR, "rejected".into())),
            _ => {}
        }
        let name = format!("chat {}", self.model).trim().to_string();
        self.span(e, end, name, KIND_CLIENT, a, status);
    }

    /// Any other event: a span event on the root.
    fn root_event(&mut self, e: &StoredEvent, other: &EventBody) {
        let mut a = vec![s("salvage.event.kind", other.kind()), n("salvage.event.seq", e.seq)];
        match other {
            EventBody::CapLearned { cap, previous, .. } => {
                a.push(n("salvage.payload.cap_bytes", *cap));
                if let Some(p) = previous {
                    a.push(n("salvage.payload.previous_cap_bytes", *p));
                }
            }
            EventBody::Rewind { target, reason } => {
                a.push(n("salvage.rewind.target", *target));
                a.push(s("salvage.rewind.reason", reason.clone()));
            }
            EventBody::Checkpoint { name } => a.push(s("salvage.checkpoint.name", name.clone())),
            _ => {}
        }
        a.push(s("salvage.event.summary", other.summary()));
        self.root_events.push(json!({
            "name": format!("salvage.{}", other.kind()),
            "timeUnixNano": nanos(&e.ts),
            "attributes": a,
        }));
    }
}

/// One child span as OTLP/JSON.
fn span_json(trace_id: &str, root_id: &str, session: &str, x: Span) -> Value {
    let mut v = json!({
        "traceId": trace_id,
        "spanId": id_hex(&["salvage-span", session, &x.seq.to_string()], 8),
        "parentSpanId": root_id,
        "name": x.name,
        "kind": x.kind,
        "startTimeUnixNano": nanos(&x.start),
        "endTimeUnixNano": nanos(&x.end),
        "attributes": x.attributes,
    });
    if let (Some((code, message)), Some(obj)) = (x.status, v.as_object_mut()) {
        let status = if message.is_empty() {
            json!({"code": code})
        } else {
            json!({"code": code, "message": message})
        };
        obj.insert("status".into(), status);
    }
    v
}

/// The session as an OTLP/JSON `ExportTraceServiceRequest`.
pub fn session_traces(journal: &Journal, session: &str) -> Result<Value, JournalError> {
    let mut events: Vec<StoredEvent> = Vec::new();
    journal.for_each_event(session, |e| {
        events.push(e.clone());
        Ok(())
    })?;
    let head = journal.version(session)?;
    let links: Vec<(u64, Option<u64>)> = events.iter().map(|e| (e.seq, e.parent)).collect();
    let title =
        journal.sessions()?.into_iter().find(|s| s.id == session).map(|s| s.title).unwrap_or_default();
    let mut t = Trace {
        session,
        abandoned: crate::branches::abandoned(&links, head),
        provider: String::from("unknown"),
        model: String::new(),
        spans: Vec::new(),
        root_events: Vec::new(),
        compactions: 0,
    };
    for (e, next) in events.iter().zip(events.iter().skip(1).map(Some).chain(std::iter::once(None))) {
        t.event(e, next);
    }
    let trace_id = id_hex(&["salvage-trace", session], 16);
    let root_id = id_hex(&["salvage-span", session, "0"], 8);
    let first = events.first().map(|e| e.ts.clone()).unwrap_or_default();
    let last = events.last().map(|e| e.ts.clone()).unwrap_or_default();
    let requests =
        u64::try_from(t.spans.iter().filter(|x| x.kind == KIND_CLIENT).count()).unwrap_or(u64::MAX);
    let outcome = crate::lookup::outcome_of(&events);
    let mut root_attrs = vec![
        s("gen_ai.operation.name", "invoke_agent"),
        s("gen_ai.provider.name", t.provider.clone()),
        s("gen_ai.request.model", t.model.clone()),
        s("gen_ai.conversation.id", session),
        s("salvage.session.title", title.clone()),
        n("salvage.session.events", head),
        n("salvage.session.requests", requests),
        n("salvage.session.compactions", t.compactions),
    ];
    if let Some(o) = outcome {
        root_attrs.push(s("salvage.outcome", o));
    }
    let root_status = match outcome {
        Some("recovered" | "no_failure") => STATUS_OK,
        Some(_) => STATUS_ERROR,
        None => 0,
    };
    let mut out_spans = vec![json!({
        "traceId": trace_id,
        "spanId": root_id,
        "name": format!("invoke_agent {}", if title.is_empty() { session } else { &title }),
        "kind": KIND_INTERNAL,
        "startTimeUnixNano": nanos(&first),
        "endTimeUnixNano": nanos(&last),
        "attributes": root_attrs,
        "events": t.root_events,
        "status": {"code": root_status},
    })];
    out_spans.extend(t.spans.into_iter().map(|x| span_json(&trace_id, &root_id, session, x)));
    Ok(json!({
        "resourceSpans": [{
            "resource": {"attributes": [
                s("service.name", "salvage"),
                s("service.version", env!("CARGO_PKG_VERSION")),
            ]},
            "scopeSpans": [{
                "scope": {"name": "salvage-journal", "version": env!("CARGO_PKG_VERSION")},
                "spans": out_spans,
            }],
        }]
    }))
}
