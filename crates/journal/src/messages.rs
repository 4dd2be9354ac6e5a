//! The message store: each distinct message once, keyed by BLAKE3 of its JSON, inline or (when
//! larger than [`LARGE_MESSAGE`]) spilled to CCR; and loading a history's messages back.
//!
//! Message rows are verified on every read: a body that does not hash to its key is refused unless
//! `journal redact` replaced it (recorded in `message_redactions`). CCR blobs are verified by CCR's
//! own decoder, and read without refreshing their `last_access` (reads never write; the journal's
//! `ccr_refs` row keeps them from eviction).

use crate::error::{sql, stored_hash, JournalError};
use crate::open::Journal;
use crate::state::{hex, MsgHash};
use rusqlite::{params, Connection, OptionalExtension};
use salvage_ccr::{Ccr, Clock};
use salvage_types::{CcrKey, Message};
use std::collections::HashMap;

/// Messages whose JSON is larger than this are stored in CCR.
pub const LARGE_MESSAGE: usize = 256 * 1024;
/// The CCR reference owner for journal content.
pub const CCR_OWNER: &str = "journal";

/// BLAKE3 of a message's stored JSON.
pub(crate) fn message_hash(json: &[u8]) -> MsgHash {
    *blake3::hash(json).as_bytes()
}

/// The JSON a message is stored and hashed as.
pub(crate) fn message_json(m: &Message) -> Result<Vec<u8>, JournalError> {
    serde_json::to_vec(m).map_err(|e| JournalError::Invalid(e.to_string()))
}

/// A message as it is stored: its hash and its JSON, made before the write turn (both are pure
/// work on the message: another writer of the file need not wait for them).
pub(crate) fn stage_message(m: &Message) -> Result<(MsgHash, Vec<u8>), JournalError> {
    let json = message_json(m)?;
    Ok((message_hash(&json), json))
}

/// Stores a staged message (once per distinct content) and says whether this call stored it
/// (`false` when the content was stored before: it may have been redacted since, so unless
/// [`is_redacted`] says otherwise the stored row holds these very bytes, which hash to its key).
/// `hash` is the BLAKE3 of `json` ([`stage_message`]); a large message goes to CCR under that
/// same key, not hashed again.
pub(crate) fn store_staged(
    conn: &Connection,
    clock: &dyn Clock,
    hash: &MsgHash,
    json: &[u8],
) -> Result<bool, JournalError> {
    if json.len() <= LARGE_MESSAGE {
        let stored = conn
            .prepare_cached("INSERT OR IGNORE INTO messages (hash, body, ccr_key) VALUES (?1, ?2, NULL)")
            .and_then(|mut st| st.execute(params![&hash[..], json]))
            .map_err(sql("store message"))?;
        return Ok(stored == 1);
    }
    let exists = conn
        .prepare_cached("SELECT 1 FROM messages WHERE hash = ?1")
        .and_then(|mut st| st.exists([&hash[..]]))
        .map_err(sql("store message"))?;
    if exists {
        return Ok(false);
    }
    let ccr = Ccr::new(conn, clock);
    let err = |e: salvage_ccr::CcrError| JournalError::Invalid(e.to_string());
    // A message's hash is BLAKE3 of its JSON, which is its CCR key.
    let key = CcrKey(*hash);
    ccr.put_all_keyed(&[(key, json)]).map_err(err)?;
    ccr.reference(&key, CCR_OWNER).map_err(err)?;
    conn.prepare_cached("INSERT INTO messages (hash, body, ccr_key) VALUES (?1, NULL, ?2)")
        .and_then(|mut st| st.execute(params![&hash[..], &key.0[..]]))
        .map_err(sql("store message"))?;
    Ok(true)
}

/// True when `salvage journal redact` replaced the content of any message of the file.
pub(crate) fn any_redacted(conn: &Connection) -> Result<bool, JournalError> {
    conn.prepare_cached("SELECT 1 FROM message_redactions LIMIT 1")
        .and_then(|mut st| st.exists([]))
        .map_err(sql("redaction lookup"))
}

/// True when `salvage journal redact` replaced this message's content.
pub(crate) fn is_redacted(conn: &Connection, hash: &MsgHash) -> Result<bool, JournalError> {
    conn.prepare_cached("SELECT 1 FROM message_redactions WHERE hash = ?1")
        .and_then(|mut st| st.exists([&hash[..]]))
        .map_err(sql("redaction lookup"))
}

/// Reads a spilled message's blob, verified by CCR's decoder, without writing anything.
pub(crate) fn read_blob(conn: &Connection, key: &CcrKey) -> Result<Vec<u8>, String> {
    type Blob = (i64, i64, Option<Vec<u8>>, Option<i64>);
    let row: Option<Blob> = conn
        .prepare_cached("SELECT codec, raw_len, data, redacted_at FROM ccr_blobs WHERE key = ?1")
        .and_then(|mut st| {
            st.query_row([&key.0[..]], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))).optional()
        })
        .map_err(|e| e.to_string())?;
    let (codec, raw_len, data, redacted) = row.ok_or("the blob is not archived")?;
    if redacted.is_some() {
        return Err("the blob was redacted".into());
    }
    let data = data.ok_or("the blob has no content")?;
    let raw_len = u64::try_from(raw_len).map_err(|_| format!("the blob's raw_len is {raw_len}"))?;
    salvage_ccr::archive::decode(key, codec, raw_len, &data, salvage_ccr::archive::DEFAULT_MAX_BLOB_BYTES)
        .map_err(|e| e.to_string())
}

/// The stored JSON of each distinct hash, fetched in one statement.
pub(crate) fn fetch_raw(
    conn: &Connection,
    session: &str,
    seq: u64,
    unique: &[MsgHash],
) -> Result<Vec<(MsgHash, Vec<u8>)>, JournalError> {
    let mut fetched = Vec::with_capacity(unique.len());
    fetch_each(conn, session, seq, unique, |h, json| {
        fetched.push((h, json));
        Ok(())
    })?;
    Ok(fetched)
}

/// Hands `each` the stored JSON of each distinct hash as its row is read (one statement).
fn fetch_each(
    conn: &Connection,
    session: &str,
    seq: u64,
    unique: &[MsgHash],
    mut each: impl FnMut(MsgHash, Vec<u8>) -> Result<(), JournalError>,
) -> Result<(), JournalError> {
    let corrupt = |problem: String| JournalError::corrupt(session, seq, problem);
    let keys: std::rc::Rc<Vec<rusqlite::types::Value>> =
        std::rc::Rc::new(unique.iter().map(|h| rusqlite::types::Value::Blob(h.to_vec())).collect());
    let mut st = conn
        .prepare_cached("SELECT m.hash, m.body, m.ccr_key FROM rarray(?1) AS k CROSS JOIN messages AS m ON m.hash = k.value")
        .map_err(sql("restore"))?;
    let mut rows = st.query([keys]).map_err(sql("restore"))?;
    while let Some(r) = rows.next().map_err(sql("restore"))? {
        let h = stored_hash(session, seq, "messages.hash", &r.get::<_, Vec<u8>>(0).map_err(sql("restore"))?)?;
        let body: Option<Vec<u8>> = r.get(1).map_err(sql("restore"))?;
        let key: Option<Vec<u8>> = r.get(2).map_err(sql("restore"))?;
        let json = match (body, key) {
            (Some(b), _) => b,
            (None, Some(k)) => {
                let key = CcrKey(stored_hash(session, seq, "messages.ccr_key", &k)?);
                read_blob(conn, &key).map_err(|e| corrupt(format!("message {} in CCR: {e}", hex(&h))))?
            }
            (None, None) => return Err(corrupt(format!("message {} has no content", hex(&h)))),
        };
        each(h, json)?;
    }
    Ok(())
}

/// A decoded message: its hash, the message, and whether its bytes match the hash.
type Decoded = (MsgHash, Message, bool);

/// One stored message decoded, and whether its bytes match its hash.
fn decode_one(h: &MsgHash, json: &[u8]) -> Result<Decoded, String> {
    let matches = message_hash(json) == *h;
    serde_json::from_slice::<Message>(json)
        .map(|m| (*h, m, matches))
        .map_err(|e| format!("message {} does not decode: {e}", hex(h)))
}

fn decode_chunk(chunk: &[(MsgHash, Vec<u8>)]) -> Result<Vec<Decoded>, String> {
    chunk.iter().map(|(h, json)| decode_one(h, json)).collect()
}

/// The threads a restore decodes on by default: every core (up to 8), as restores are
/// latency-sensitive and the rows independent.
fn default_decode_threads() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).min(8)
}

/// Verifies and decodes on `threads` threads (0: the default, every core). The core count is
/// asked only for many rows: the answer costs a few file reads (cgroup quotas) every time, more
/// than decoding the few messages a restore through a snapshot loads.
fn decode_all(fetched: &[(MsgHash, Vec<u8>)], threads: usize) -> Vec<Result<Vec<Decoded>, String>> {
    if fetched.len() < 128 {
        return vec![decode_chunk(fetched)];
    }
    let threads = if threads == 0 { default_decode_threads() } else { threads };
    if threads <= 1 {
        return vec![decode_chunk(fetched)];
    }
    let size = fetched.len().div_ceil(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = fetched.chunks(size).map(|c| s.spawn(move || decode_chunk(c))).collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("a decoder thread panicked".into())))
            .collect()
    })
}

/// Loads and verifies the messages with these hashes, in order (repeats decoded once), decoding
/// on `threads` threads (0: every core). A body that does not match its hash is accepted only for a message
/// recorded as redacted. On one thread each row is decoded as it is read and its stored bytes
/// dropped at once; on more, every row's bytes are read first, then decoded in parallel.
pub(crate) fn load_messages(
    conn: &Connection,
    session: &str,
    seq: u64,
    hashes: &[MsgHash],
    threads: usize,
) -> Result<Vec<Message>, JournalError> {
    let corrupt = |problem: String| JournalError::corrupt(session, seq, problem);
    let mut unique: Vec<MsgHash> = hashes.to_vec();
    unique.sort_unstable();
    unique.dedup();
    let mut decoded: HashMap<MsgHash, Message> = HashMap::with_capacity(unique.len());
    let mut keep = |(h, m, matches): Decoded| -> Result<(), JournalError> {
        if !matches && !is_redacted(conn, &h)? {
            return Err(corrupt(format!("message {} does not match its hash", hex(&h))));
        }
        decoded.insert(h, m);
        Ok(())
    };
    if threads == 1 {
        fetch_each(conn, session, seq, &unique, |h, json| keep(decode_one(&h, &json).map_err(corrupt)?))?;
    } else {
        let fetched = fetch_raw(conn, session, seq, &unique)?;
        for part in decode_all(&fetched, threads) {
            for d in part.map_err(corrupt)? {
                keep(d)?;
            }
        }
    }
    assemble(session, seq, hashes, decoded)
}

/// The history listing `hashes`, from their decoded messages: each handed over without a copy,
/// cloned only for repeats.
pub(crate) fn assemble(
    session: &str,
    seq: u64,
    hashes: &[MsgHash],
    mut decoded: HashMap<MsgHash, Message>,
) -> Result<Vec<Message>, JournalError> {
    let corrupt = |problem: String| JournalError::corrupt(session, seq, problem);
    let mut remaining: HashMap<MsgHash, usize> = HashMap::with_capacity(decoded.len());
    for h in hashes {
        let n = remaining.entry(*h).or_insert(0);
        *n = n.saturating_add(1); // at most hashes.len(), which is a usize
    }
    let mut out = Vec::with_capacity(hashes.len());
    for h in hashes {
        let missing = || corrupt(format!("message {} is missing", hex(h)));
        let left = remaining.get_mut(h).ok_or_else(missing)?;
        *left = left.saturating_sub(1);
        let m = if *left == 0 { decoded.remove(h) } else { decoded.get(h).cloned() };
        out.push(m.ok_or_else(missing)?);
    }
    Ok(out)
}

impl Journal {
    /// The stored messages with these hashes, in order (errors name `session` and `seq`).
    pub fn messages_by_hash(
        &self,
        session: &str,
        seq: u64,
        hashes: &[MsgHash],
    ) -> Result<Vec<Message>, JournalError> {
        load_messages(self.conn(), session, seq, hashes, self.decode_threads)
    }
}
