//! The per-session BLAKE3 hash chain over the stored bytes of each event, and verification.

use crate::state::{unhex, Delta};
use crate::{sql, u, BadEvent, JournalError};
use rusqlite::{params, Connection, OptionalExtension};

/// A `messages` row: inline body or CCR key.
type StoredMessage = (Option<Vec<u8>>, Option<Vec<u8>>);

/// The fields of an event row that the chain covers.
pub struct Row<'a> {
    /// Session id.
    pub session: &'a str,
    /// Sequence number.
    pub seq: u64,
    /// Writer-chosen id.
    pub event_id: &'a str,
    /// Parent event.
    pub parent: Option<u64>,
    /// Parent-chain depth.
    pub depth: u64,
    /// Kind.
    pub kind: &'a str,
    /// Kind version.
    pub kind_version: u32,
    /// RFC 3339 time.
    pub ts: &'a str,
    /// Stored body bytes.
    pub body: &'a [u8],
    /// Stored delta bytes.
    pub delta: Option<&'a [u8]>,
}

fn field(h: &mut blake3::Hasher, b: &[u8]) {
    h.update(&(b.len() as u64).to_le_bytes());
    h.update(b);
}

/// `blake3(prev || row)`, every field length-prefixed.
pub fn link(prev: &[u8; 32], row: &Row<'_>) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    h.update(b"salvage.event/1\0");
    h.update(prev);
    field(&mut h, row.session.as_bytes());
    h.update(&row.seq.to_le_bytes());
    field(&mut h, row.event_id.as_bytes());
    match row.parent {
        Some(p) => {
            h.update(&[1]);
            h.update(&p.to_le_bytes());
        }
        None => {
            h.update(&[0]);
        }
    }
    h.update(&row.depth.to_le_bytes());
    field(&mut h, row.kind.as_bytes());
    h.update(&row.kind_version.to_le_bytes());
    field(&mut h, row.ts.as_bytes());
    field(&mut h, row.body);
    match row.delta {
        Some(d) => {
            h.update(&[1]);
            field(&mut h, d);
        }
        None => {
            h.update(&[0]);
        }
    }
    *h.finalize().as_bytes()
}

/// Checks one session; returns the events checked and the first bad one.
pub fn verify_session(conn: &Connection, session: &str) -> Result<(u64, Option<BadEvent>), JournalError> {
    let bad = |seq: u64, problem: String| Some(BadEvent { session: session.to_string(), seq, problem });
    let (head_seq, head_hash): (i64, Vec<u8>) = conn
        .query_row("SELECT head_seq, head_hash FROM sessions WHERE id = ?1", [session], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .map_err(sql("verify"))?;
    let mut st = conn
        .prepare(
            "SELECT seq, event_id, parent, depth, kind, kind_version, ts, body, delta, prev_hash, hash
             FROM events WHERE session_id = ?1 ORDER BY seq",
        )
        .map_err(sql("verify"))?;
    let mut rows = st.query([session]).map_err(sql("verify"))?;
    let mut prev = [0u8; 32];
    let mut expected_seq = 1u64;
    let mut depths: Vec<u64> = Vec::new();
    let mut lens: Vec<usize> = Vec::new();
    let mut n = 0u64;
    let mut msg_st =
        conn.prepare("SELECT body, ccr_key FROM messages WHERE hash = ?1").map_err(sql("verify"))?;
    let mut blob_st = conn
        .prepare("SELECT b.blob_key, c.id IS NOT NULL FROM event_blobs b LEFT JOIN ccr_blobs c ON c.key = b.blob_key WHERE b.session_id = ?1 AND b.seq = ?2")
        .map_err(sql("verify"))?;
    let mut checked_msgs = std::collections::HashSet::new();
    while let Some(r) = rows.next().map_err(sql("verify"))? {
        n += 1;
        let seq = u(r.get(0).map_err(sql("verify"))?);
        let event_id: String = r.get(1).map_err(sql("verify"))?;
        let parent: Option<i64> = r.get(2).map_err(sql("verify"))?;
        let parent = parent.map(u);
        let depth = u(r.get(3).map_err(sql("verify"))?);
        let kind: String = r.get(4).map_err(sql("verify"))?;
        let kv: i64 = r.get(5).map_err(sql("verify"))?;
        let ts: String = r.get(6).map_err(sql("verify"))?;
        let body: Vec<u8> = r.get(7).map_err(sql("verify"))?;
        let delta: Option<Vec<u8>> = r.get(8).map_err(sql("verify"))?;
        let prev_hash: Vec<u8> = r.get(9).map_err(sql("verify"))?;
        let hash: Vec<u8> = r.get(10).map_err(sql("verify"))?;
        if seq != expected_seq {
            return Ok((
                n,
                bad(
                    expected_seq,
                    format!("event {expected_seq} is missing (found {seq} next): the sequence has a gap"),
                ),
            ));
        }
        if prev_hash != prev {
            return Ok((
                n,
                bad(
                    seq,
                    "link to the previous event does not match (an event was removed, reordered or edited)"
                        .into(),
                ),
            ));
        }
        let row = Row {
            session,
            seq,
            event_id: &event_id,
            parent,
            depth,
            kind: &kind,
            kind_version: u32::try_from(kv).unwrap_or(0),
            ts: &ts,
            body: &body,
            delta: delta.as_deref(),
        };
        let computed = crate::hash_chain::link(&prev, &row);
        if computed[..] != hash[..] {
            return Ok((n, bad(seq, "hash does not match the stored bytes (the event was edited)".into())));
        }
        // Parent link: an earlier event, and the depth follows from it.
        let want_depth = match parent {
            None => 0,
            Some(p) if p >= 1 && p < seq => depths[usize::try_from(p - 1).unwrap_or(0)] + 1,
            Some(p) => return Ok((n, bad(seq, format!("parent {p} is not an earlier event")))),
        };
        if depth != want_depth {
            return Ok((
                n,
                bad(seq, format!("depth {depth} does not follow from parent (expected {want_depth})")),
            ));
        }
        let decoded: Result<salvage_types::event::EventBody, _> = serde_json::from_slice(&body);
        match decoded {
            Ok(b) if b.kind() == kind => {}
            Ok(b) => {
                return Ok((
                    n,
                    bad(seq, format!("kind column {kind:?} disagrees with the body ({})", b.kind())),
                ))
            }
            Err(e) => return Ok((n, bad(seq, format!("body does not decode: {e}")))),
        }
        // The history delta: well-formed, within bounds, every message present and matching its hash.
        let parent_len = match parent {
            None => 0,
            Some(p) => lens[usize::try_from(p - 1).unwrap_or(0)],
        };
        let mut len = parent_len;
        if let Some(d) = &delta {
            let d: Delta = match serde_json::from_slice(d) {
                Ok(d) => d,
                Err(e) => return Ok((n, bad(seq, format!("history delta does not decode: {e}")))),
            };
            if d.at + d.remove > parent_len {
                return Ok((n, bad(seq, "history delta is outside the parent's history".into())));
            }
            len = parent_len - d.remove + d.insert.len();
            for h in &d.insert {
                let Some(hash) = unhex(h) else {
                    return Ok((n, bad(seq, format!("bad message hash {h:?}"))));
                };
                if !checked_msgs.insert(hash) {
                    continue;
                }
                let row: Option<StoredMessage> = msg_st
                    .query_row([&hash[..]], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()
                    .map_err(sql("verify"))?;
                match row {
                    Some((Some(b), _)) if blake3::hash(&b).as_bytes() == &hash => {}
                    Some((Some(_), _)) if crate::is_redacted(conn, &hash)? => {}
                    Some((Some(_), _)) => {
                        return Ok((n, bad(seq, format!("message {h} does not match its hash"))))
                    }
                    Some((None, Some(k))) => {
                        let exists: bool = conn
                            .query_row("SELECT 1 FROM ccr_blobs WHERE key = ?1", [&k], |_| Ok(true))
                            .optional()
                            .map_err(sql("verify"))?
                            .unwrap_or(false);
                        if !exists {
                            return Ok((
                                n,
                                bad(seq, format!("message {h} lives in CCR but its blob is gone")),
                            ));
                        }
                    }
                    _ => return Ok((n, bad(seq, format!("message {h} is missing")))),
                }
            }
        }
        for b in blob_st
            .query_map(params![session, crate::i(seq)], |r| {
                Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, bool>(1)?))
            })
            .map_err(sql("verify"))?
        {
            let (key, present) = b.map_err(sql("verify"))?;
            if !present {
                let hexkey: String = key.iter().map(|x| format!("{x:02x}")).collect();
                return Ok((n, bad(seq, format!("referenced CCR blob {hexkey} does not resolve"))));
            }
        }
        depths.push(depth);
        lens.push(len);
        prev = crate::to32(&hash);
        expected_seq += 1;
    }
    if n == 0 {
        return Ok((
            0,
            bad(0, "the session has no events: it cannot be restored (its start was interrupted)".into()),
        ));
    }
    if u(head_seq) != expected_seq - 1 {
        return Ok((n, bad(expected_seq, format!("the session says it has {head_seq} events but {} are stored (the last ones were removed)", expected_seq - 1))));
    }
    if head_hash != prev {
        return Ok((
            n,
            bad(expected_seq - 1, "the session's chain head does not match its last event".into()),
        ));
    }
    Ok((n, None))
}
