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
    h.finalize().to_hex()[..len * 2].to_string()
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

/// The session as an OTLP/JSON `ExportTraceServiceRequest`.
pub fn session_traces(journal: &Journal, session: &str) -> Result<Value, JournalError> {
    let mut events: Vec<StoredEvent> = Vec::new();
    journal.for_each_event(session, |e| {
        events.push(e.clone());
        Ok(())
    })?;
    let head = journal.version(session)?;
    let links: Vec<(u64, Option<u64>)> = events.iter().map(|e| (e.seq, e.parent)).collect();
    let abandoned = crate::branches::abandoned(&links, head);
    let title =
        journal.sessions()?.into_iter().find(|s| s.id == session).map(|s| s.title).unwrap_or_default();
    let trace_id = id_hex(&["salvage-trace", session], 16);
    let root_id = id_hex(&["salvage-span", session, "0"], 8);
    let (mut provider, mut model) = (String::from("unknown"), String::new());
    let mut spans: Vec<Span> = Vec::new();
    let mut root_events: Vec<Value> = Vec::new();
    let mut compactions = 0u64;
    for (k, e) in events.iter().enumerate() {
        let end = events.get(k + 1).map(|x| x.ts.clone()).unwrap_or_else(|| e.ts.clone());
        let mut span = |name: String, kind: u8, attributes: Vec<Value>, status: Option<(u8, String)>| {
            let mut attributes = attributes;
            attributes.push(n("salvage.event.seq", e.seq));
            if abandoned.contains(&e.seq) {
                attributes.push(b("salvage.branch.abandoned", true));
            }
            spans.push(Span {
                seq: e.seq,
                name,
                kind,
                start: e.ts.clone(),
                end: end.clone(),
                attributes,
                status,
            });
        };
        match &e.body {
            EventBody::SessionStarted { provider: p, model: m, context_window, cap, .. } => {
                provider = p.clone().unwrap_or_else(|| "unknown".into());
                model = m.clone().unwrap_or_default();
                let mut a = vec![s("salvage.event.kind", "session_started")];
                if let Some(w) = context_window {
                    a.push(n("salvage.context_window_tokens", *w));
                }
                if let Some(c) = cap {
                    a.push(n("salvage.payload.cap_bytes", *c));
                }
                root_events.push(
                    json!({"name": "salvage.session_started", "timeUnixNano": nanos(&e.ts), "attributes": a}),
                );
            }
            EventBody::RequestSent {
                attempt,
                bytes,
                estimated_tokens,
                real_tokens,
                accepted,
                history_digest,
            } => {
                let mut a = vec![
                    s("gen_ai.operation.name", "chat"),
                    s("gen_ai.provider.name", provider.clone()),
                    s("gen_ai.system", provider.clone()),
                    s("gen_ai.request.model", model.clone()),
                    s("gen_ai.conversation.id", session),
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
                match events.get(k + 1).map(|x| &x.body) {
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
                span(format!("chat {model}").trim().to_string(), KIND_CLIENT, a, status);
            }
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
                    s("gen_ai.conversation.id", session),
                    n("salvage.recovery.attempt", u64::from(*attempt)),
                    n("salvage.recovery.rung", u64::from(*rung)),
                    s("salvage.recovery.outcome", outcome.to_string()),
                    n("salvage.recovery.before_bytes", *before_bytes),
                    n("salvage.recovery.after_bytes", *after_bytes),
                    n("salvage.recovery.before_messages", *before_messages),
                    n("salvage.recovery.after_messages", *after_messages),
                    n("salvage.recovery.archived", archived.len() as u64),
                ];
                span(format!("salvage.recovery rung {rung}"), KIND_INTERNAL, a, None);
            }
            EventBody::Compaction { trigger, level, outcome, backoff_skip, route, cost, .. } => {
                compactions += 1;
                let mut a = vec![
                    s("gen_ai.conversation.id", session),
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
                span(format!("salvage.compaction level {level}"), KIND_INTERNAL, a, None);
            }
            other => {
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
                root_events.push(json!({
                    "name": format!("salvage.{}", other.kind()),
                    "timeUnixNano": nanos(&e.ts),
                    "attributes": a,
                }));
            }
        }
    }
    let first = events.first().map(|e| e.ts.clone()).unwrap_or_default();
    let last = events.last().map(|e| e.ts.clone()).unwrap_or_default();
    let requests = spans.iter().filter(|x| x.kind == KIND_CLIENT).count() as u64;
    let mut root_attrs = vec![
        s("gen_ai.operation.name", "invoke_agent"),
        s("gen_ai.provider.name", provider.clone()),
        s("gen_ai.request.model", model.clone()),
        s("gen_ai.conversation.id", session),
        s("salvage.session.title", title.clone()),
        n("salvage.session.events", head),
        n("salvage.session.requests", requests),
        n("salvage.session.compactions", compactions),
    ];
    if let Some(o) = crate::lookup::outcome_of(&events) {
        root_attrs.push(s("salvage.outcome", o));
    }
    let root_status = match crate::lookup::outcome_of(&events) {
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
        "events": root_events,
        "status": {"code": root_status},
    })];
    for x in spans {
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
        if let Some((code, message)) = x.status {
            v["status"] = if message.is_empty() {
                json!({"code": code})
            } else {
                json!({"code": code, "message": message})
            };
        }
        out_spans.push(v);
    }
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
