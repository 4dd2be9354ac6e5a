//! `salvage journal redact`: picks the messages (by the event that inserted them, or by hash
//! prefix), builds their replacements, commits them with a redaction event, then checkpoints the
//! write-ahead log so the old bytes leave it too.

use crate::commands::journal::problem;
use crate::exit::{Failure, Outcome};
use crate::output::Output;
use crate::terminal::escape;
use salvage_journal::state::hex;
use salvage_journal::Journal;
use salvage_types::message::Message;
use salvage_wire::redact::Counts;

/// A message's content hash.
type Hash = [u8; 32];

/// `salvage journal redact`: picks the messages, builds their replacements, commits them with a
/// redaction event, then checkpoints the write-ahead log so the old bytes leave it too.
pub fn redact(
    j: &mut Journal,
    session: &str,
    message: &[String],
    at: Option<(u64, Option<usize>)>,
    whole: bool,
    now: chrono::DateTime<chrono::Utc>,
    out: &mut Output,
) -> Outcome {
    let head = j.version(session).map_err(problem)?;
    let mut chosen: Vec<Hash> = Vec::new();
    if let Some((seq, index)) = at {
        chosen.extend(picked_at(j, session, seq, index)?);
    }
    if !message.is_empty() {
        chosen.extend(picked_by_hash(j, session, message)?);
    }
    chosen.sort_unstable();
    chosen.dedup();
    let current = j.messages_by_hash(session, head, &chosen).map_err(problem)?;
    let before = current.clone();
    let (redactions, counts) = replacements(&chosen, current, whole);
    let body = salvage_types::event::EventBody::Redaction {
        keys: chosen.iter().map(|h| format!("message:{}", hex(h))).collect(),
        counts: counts.clone(),
    };
    let id = format!("redact-{session}-{}", now.timestamp_nanos_opt().unwrap_or(0));
    let a = j
        .redact_messages(session, &redactions, salvage_journal::NewEvent::new(id, now, body.clone()))
        .map_err(problem)?;
    // A message is stored once for every session that holds it: each of them records the
    // redaction in its own chain, or its history would change with nothing in its log.
    let others = sessions_holding(j, session, &chosen)?;
    for other in &others {
        let id = format!("redact-{other}-{}", now.timestamp_nanos_opt().unwrap_or(0));
        j.append(other, None, vec![salvage_journal::NewEvent::new(id, now, body.clone())])
            .map_err(problem)?;
    }
    // Copies the session's events archived, looked for after the redaction: the message's own
    // blob is cleared by now and is no copy to clear.
    let copies = archived_copies(j, session, &before);
    // The old page images stay in the write-ahead log until a checkpoint copies the zeroed pages
    // back and truncates it.
    let busy: i64 = j
        .conn()
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))
        .map_err(|e| Failure::Problem(format!("checkpoint: {e}")))?;
    out.line(&format!(
        "event {}: redacted {} message(s) of session {} ({})",
        a.seq,
        chosen.len(),
        escape(session),
        salvage_wire::redact::describe(&counts)
    ))?;
    if !others.is_empty() {
        out.line(&format!(
            "also recorded in {} other session(s) holding the same stored message(s): {}",
            others.len(),
            others.iter().map(|s| escape(s)).collect::<Vec<_>>().join(", ")
        ))?;
    }
    if !copies.is_empty() {
        // The journal's rows are cleared; copies the recovery archived (a transcript of dropped
        // messages, a cut message's original) are CCR blobs the session references.
        eprintln!(
            "warning: the redacted content is also archived in CCR blob(s) {}: `salvage ccr redact KEY` clears each (a transcript blob holds the other dropped messages too)",
            copies.join(", ")
        );
    }
    if busy != 0 {
        eprintln!("warning: another process holds the database open: the old bytes leave the write-ahead log at its next checkpoint");
    }
    Ok(())
}

/// The sessions (but `session`) whose events insert one of the messages `chosen` (a history delta
/// lists the hex hashes of the messages it inserts).
pub(crate) fn sessions_holding(j: &Journal, session: &str, chosen: &[Hash]) -> Result<Vec<String>, Failure> {
    let mut out: Vec<String> = Vec::new();
    let mut st = j
        .conn()
        .prepare(
            "SELECT DISTINCT session_id FROM events WHERE session_id <> ?1 AND CAST(delta AS TEXT) LIKE ?2",
        )
        .map_err(|e| Failure::Problem(e.to_string()))?;
    for h in chosen {
        let pattern = format!("%{}%", hex(h));
        let rows = st
            .query_map([session, pattern.as_str()], |r| r.get::<_, String>(0))
            .and_then(|rows| rows.collect::<Result<Vec<String>, _>>())
            .map_err(|e| Failure::Problem(e.to_string()))?;
        out.extend(rows);
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// The short keys of the CCR blobs the session references that hold the content of one of
/// `messages` (as it is, or escaped inside a JSON transcript).
fn archived_copies(j: &Journal, session: &str, messages: &[Message]) -> Vec<String> {
    let needles: Vec<(Vec<u8>, Vec<u8>)> = messages
        .iter()
        .filter(|m| !m.content.is_empty())
        .map(|m| {
            let json = serde_json::to_string(&m.content).unwrap_or_default();
            let escaped = json.get(1..json.len().saturating_sub(1)).unwrap_or_default().as_bytes().to_vec();
            (m.content.as_bytes().to_vec(), escaped)
        })
        .collect();
    let Ok(keys) = j.referenced_blobs(session) else { return Vec::new() };
    let clock = salvage_types::SystemClock;
    let ccr = salvage_ccr::Ccr::new(j.conn(), &clock);
    let holds = |hay: &[u8], needle: &[u8]| hay.windows(needle.len().max(1)).any(|w| w == needle);
    keys.iter()
        .filter(|k| {
            ccr.get_key(k).is_ok_and(|b| needles.iter().any(|(raw, esc)| holds(&b, raw) || holds(&b, esc)))
        })
        .map(|k| k.short())
        .collect()
}

/// `--at SEQ [--index I]`: the message at index I of the history at event SEQ, else the
/// messages event SEQ inserted.
fn picked_at(j: &Journal, session: &str, seq: u64, index: Option<usize>) -> Result<Vec<Hash>, Failure> {
    let picked = match index {
        Some(i) => {
            let h = j.history_hashes(session, seq).map_err(problem)?;
            vec![*h.get(i).ok_or_else(|| {
                Failure::Input(format!("--index {i}: the history at event {seq} has {} message(s)", h.len()))
            })?]
        }
        None => j.inserted_hashes(session, seq).map_err(problem)?,
    };
    if picked.is_empty() {
        return Err(Failure::Input(format!("--at {seq}: event {seq} inserted no message")));
    }
    Ok(picked)
}

/// `--message HEX`: the one message of the session whose hash starts with each prefix.
fn picked_by_hash(j: &Journal, session: &str, message: &[String]) -> Result<Vec<Hash>, Failure> {
    let all: Vec<Hash> = j.history_hashes_all(session).map_err(problem)?;
    let mut chosen = Vec::with_capacity(message.len());
    for m in message {
        let m = m.trim().to_ascii_lowercase();
        if m.len() < 8 || !m.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Failure::Input(format!(
                "--message {}: a message hash is 8 to 64 hex characters",
                escape(&m)
            )));
        }
        let hits: Vec<&Hash> = all.iter().filter(|h| hex(h).starts_with(&m)).collect();
        match hits.as_slice() {
            [h] => chosen.push(**h),
            [] => {
                return Err(Failure::Input(format!(
                    "--message {m}: no message of session {} has this hash",
                    escape(session)
                )))
            }
            _ => return Err(Failure::Input(format!("--message {m}: ambiguous, give more hex characters"))),
        }
    }
    Ok(chosen)
}

/// Each chosen message with its secrets redacted, or its whole text when asked to or when no
/// rule matched; and what was redacted, counted by kind.
fn replacements(chosen: &[Hash], current: Vec<Message>, whole: bool) -> (Vec<(Hash, Message)>, Counts) {
    let mut counts = Counts::new();
    let mut redactions = Vec::with_capacity(chosen.len());
    for (h, mut m) in chosen.iter().zip(current) {
        let before = counts.values().sum::<u64>();
        salvage_wire::redact::redact_message(&mut m, &mut counts);
        if whole || counts.values().sum::<u64>() == before {
            // Nothing the rules know, or asked to: the whole text goes.
            m.content = format!("[REDACTED:message:{}]", &hex(h)[..8]);
            m.system_parts.iter_mut().for_each(|p| p.text = m.content.clone());
            m.tool_calls.iter_mut().for_each(|c| c.arguments = serde_json::json!({}));
            m.images.clear();
            m.wire = None;
            *counts.entry("message".into()).or_insert(0) += 1;
        }
        redactions.push((*h, m));
    }
    (redactions, counts)
}
