//! The per-session BLAKE3 hash chain over the stored bytes of each event (checked by
//! [`verify`](crate::verify)).

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
    /// BLAKE3 of the snapshot taken at this event, if one was (covered only when present, so
    /// events stored before snapshots were vouched for keep their hashes).
    pub snapshot: Option<&'a [u8; 32]>,
    /// [`blobs_digest`] of the CCR keys the event references, if it references any (covered
    /// only when present, so events stored before their links were vouched for keep their
    /// hashes).
    pub blobs: Option<&'a [u8; 32]>,
}

/// BLAKE3 of the CCR keys an event references, as a set (sorted, duplicates once): what an
/// event's `blobs_hash` holds and `verify` recomputes from its `event_blobs` rows.
pub fn blobs_digest(keys: &[[u8; 32]]) -> Option<[u8; 32]> {
    if keys.is_empty() {
        return None;
    }
    let mut sorted = keys.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut h = blake3::Hasher::new();
    h.update(b"salvage.event-blobs/1\0");
    h.update(&(sorted.len() as u64).to_le_bytes());
    for k in &sorted {
        h.update(k);
    }
    Some(*h.finalize().as_bytes())
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
    if let Some(s) = row.snapshot {
        h.update(b"snapshot");
        h.update(s);
    }
    if let Some(b) = row.blobs {
        h.update(b"blobs");
        h.update(b);
    }
    *h.finalize().as_bytes()
}
