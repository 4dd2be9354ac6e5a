//! The reducer: a session's state as a fold over its events along the parent chain.

use crate::JournalError;
use salvage_types::event::{Cost, EventBody, StepOutcome};
use serde::{Deserialize, Serialize};

/// BLAKE3 of a message's stored JSON.
pub type MsgHash = [u8; 32];

/// Bump when the fold or a snapshot row's layout changes: snapshots of other versions are ignored
/// (they are disposable). Version 2: a delta row's state lists only the hashes after its base.
pub const REDUCER_VERSION: i64 = 2;

/// A history change: replace `remove` hashes at `at` with `insert`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Delta {
    /// Where the splice starts.
    pub at: usize,
    /// How many hashes it removes.
    pub remove: usize,
    /// The hashes it inserts (hex).
    pub insert: Vec<String>,
}

impl Delta {
    /// The hashes it inserts; a malformed one is corruption of event `seq` of `session`.
    pub fn hashes(&self, session: &str, seq: u64) -> Result<Vec<MsgHash>, JournalError> {
        self.insert
            .iter()
            .map(|h| {
                unhex(h).ok_or_else(|| {
                    JournalError::corrupt(session, seq, format!("bad message hash {h:?} in delta"))
                })
            })
            .collect()
    }
}

/// The smallest single splice turning `old` into `new` (common prefix and suffix kept); `None`
/// when they are equal. In-place edits that leave the last message unchanged are caught too.
pub fn diff(old: &[MsgHash], new: &[MsgHash]) -> Option<Delta> {
    if old == new {
        return None;
    }
    let p = old.iter().zip(new).take_while(|(a, b)| a == b).count();
    // p ≤ both lengths (it counts pairs), and s ≤ the shorter length minus p (it takes that many).
    let max_s = old.len().min(new.len()).saturating_sub(p);
    let s = old.iter().rev().zip(new.iter().rev()).take(max_s).take_while(|(a, b)| a == b).count();
    let inserted = new.get(p..new.len().saturating_sub(s)).unwrap_or_default();
    Some(Delta {
        at: p,
        remove: old.len().saturating_sub(p).saturating_sub(s),
        insert: inserted.iter().map(hex).collect(),
    })
}

/// Lowercase hex of a hash.
pub fn hex(h: &MsgHash) -> String {
    blake3::Hash::from_bytes(*h).to_hex().to_string()
}

/// Parses 64 hex characters (either case).
pub fn unhex(s: &str) -> Option<MsgHash> {
    unhex_bytes(s.as_bytes())
}

/// Each byte's value as a hex digit (either case), or `0xff`.
// Evaluated at compile time: an index out of range would fail the build, never a run.
#[allow(clippy::indexing_slicing)]
const HEX_DIGIT: [u8; 256] = {
    let mut t = [0xffu8; 256];
    let mut i = 0u8;
    while i < 10 {
        t[(b'0' + i) as usize] = i;
        i += 1;
    }
    let mut i = 0u8;
    while i < 6 {
        t[(b'a' + i) as usize] = 10 + i;
        t[(b'A' + i) as usize] = 10 + i;
        i += 1;
    }
    t
};

/// [`unhex`] over bytes: a table lookup per digit and one validity check at the end (a snapshot
/// state lists every message hash in hex; parsing them digit by digit with an early exit per
/// digit was a tenth of a cold restore).
fn unhex_bytes(s: &[u8]) -> Option<MsgHash> {
    if s.len() != 64 {
        return None;
    }
    let digit = |b: &u8| HEX_DIGIT.get(usize::from(*b)).copied().unwrap_or(0xff);
    let mut out = [0u8; 32];
    let mut bad = 0u8;
    for (o, pair) in out.iter_mut().zip(s.chunks_exact(2)) {
        let (hi, lo) = match pair {
            [a, b] => (digit(a), digit(b)),
            _ => (0xff, 0xff),
        };
        bad |= hi | lo;
        *o = hi.wrapping_shl(4) | (lo & 0x0f);
    }
    // Every digit is below 16; the marker of a non-digit has its high bits set.
    (bad & 0xf0 == 0).then_some(out)
}

/// Everything a session remembers, as of one event.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// The history as message hashes, repeats kept in order.
    #[serde(with = "hashes")]
    pub history: Vec<MsgHash>,
    /// The payload cap in force.
    pub cap: Option<u64>,
    /// The payload notice was injected.
    pub notice_injected: bool,
    /// Applied compactions.
    pub compactions: u64,
    /// Compactions that reached level 3.
    pub level3: u64,
    /// Summarizer usage.
    pub summarizer: Cost,
    /// Tool uses cleared by provider-side context editing.
    pub context_edits: u64,
    /// Events whose state an undo restores, most recent last (one per history rewrite).
    pub undo: Vec<u64>,
    /// Named checkpoints: `(name, seq)`.
    pub checkpoints: Vec<(String, u64)>,
}

/// [`State`] as serialized, its history borrowed: a snapshot row lists only part of the history
/// and is written without a copy of the state. Same fields, names and order as [`State`].
#[derive(Serialize)]
struct Listing<'a> {
    #[serde(serialize_with = "hashes::serialize")]
    history: &'a [MsgHash],
    cap: &'a Option<u64>,
    notice_injected: bool,
    compactions: u64,
    level3: u64,
    summarizer: &'a Cost,
    context_edits: u64,
    undo: &'a [u64],
    checkpoints: &'a [(String, u64)],
}

impl State {
    /// The JSON of this state with `history` listed in place of its own (exactly what
    /// `serde_json::to_vec` writes for the state with that history).
    pub(crate) fn to_json_listing(&self, history: &[MsgHash]) -> serde_json::Result<Vec<u8>> {
        let State {
            history: _,
            cap,
            notice_injected,
            compactions,
            level3,
            summarizer,
            context_edits,
            undo,
            checkpoints,
        } = self;
        serde_json::to_vec(&Listing {
            history,
            cap,
            notice_injected: *notice_injected,
            compactions: *compactions,
            level3: *level3,
            summarizer,
            context_edits: *context_edits,
            undo,
            checkpoints,
        })
    }
}

mod hashes {
    use super::MsgHash;
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[MsgHash], s: S) -> Result<S::Ok, S::Error> {
        let mut flat = String::with_capacity(v.len().saturating_mul(64));
        for h in v {
            flat.push_str(blake3::Hash::from_bytes(*h).to_hex().as_str());
        }
        s.serialize_str(&flat)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<MsgHash>, D::Error> {
        d.deserialize_str(Flat)
    }

    /// The hex of every hash, one after another, read in place (no copy of the string).
    struct Flat;

    impl serde::de::Visitor<'_> for Flat {
        type Value = Vec<MsgHash>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a string of message hashes in hex")
        }

        fn visit_str<E: serde::de::Error>(self, flat: &str) -> Result<Vec<MsgHash>, E> {
            let bytes = flat.as_bytes();
            if !bytes.len().is_multiple_of(64) {
                return Err(E::custom("hash list length is not a multiple of 64"));
            }
            bytes
                .chunks_exact(64)
                .map(|c| super::unhex_bytes(c).ok_or_else(|| E::custom("bad hash")))
                .collect()
        }
    }
}

impl State {
    /// Applies one event (already known to continue `parent`).
    pub fn apply(
        &mut self,
        session: &str,
        seq: u64,
        parent: Option<u64>,
        body: &EventBody,
        delta: Option<&Delta>,
    ) -> Result<(), JournalError> {
        if let Some(d) = delta {
            self.splice(session, seq, parent, d, || d.hashes(session, seq))?;
        }
        self.apply_body(seq, body);
        Ok(())
    }

    /// [`State::apply`] for an event whose writer holds the hashes its delta inserts (`inserted`,
    /// the delta's `insert` decoded), so they are not parsed back from hex.
    pub(crate) fn apply_inserted(
        &mut self,
        session: &str,
        seq: u64,
        parent: Option<u64>,
        body: &EventBody,
        delta: Option<(&Delta, Vec<MsgHash>)>,
    ) -> Result<(), JournalError> {
        if let Some((d, inserted)) = delta {
            if inserted.len() != d.insert.len() {
                return Err(JournalError::Invalid(format!(
                    "session {session}, event {seq}: a delta inserting {} hashes given {}",
                    d.insert.len(),
                    inserted.len()
                )));
            }
            self.splice(session, seq, parent, d, || Ok(inserted))?;
        }
        self.apply_body(seq, body);
        Ok(())
    }

    /// Applies a history delta whose inserted hashes `insert` gives, once the delta is known to
    /// fit the history.
    fn splice(
        &mut self,
        session: &str,
        seq: u64,
        parent: Option<u64>,
        d: &Delta,
        insert: impl FnOnce() -> Result<Vec<MsgHash>, JournalError>,
    ) -> Result<(), JournalError> {
        let len = self.history.len();
        let range = d.at..d.at.saturating_add(d.remove);
        if range.end > len || d.remove > len.saturating_sub(d.at) {
            return Err(JournalError::corrupt(
                session,
                seq,
                format!("history delta at {} removing {} is outside a {len}-message history", d.at, d.remove),
            ));
        }
        self.history.splice(range, insert()?);
        if d.remove > 0 {
            if let Some(p) = parent {
                self.undo.push(p);
            }
        }
        Ok(())
    }

    /// Applies what an event's body changes.
    fn apply_body(&mut self, seq: u64, body: &EventBody) {
        match body {
            EventBody::SessionStarted { cap, .. } => self.cap = *cap,
            EventBody::CapLearned { cap, .. } => self.cap = Some(*cap),
            EventBody::NoticeInjected {} => self.notice_injected = true,
            EventBody::Compaction { outcome, level, cost, .. } => {
                // Counters saturate: 2^64 compactions cannot happen, and a fold never panics.
                if *outcome == StepOutcome::Applied {
                    self.compactions = self.compactions.saturating_add(1);
                    if *level >= 3 {
                        self.level3 = self.level3.saturating_add(1);
                    }
                }
                self.summarizer.add(cost);
            }
            EventBody::ContextEdit { cleared_tool_uses, .. } => {
                self.context_edits = self.context_edits.saturating_add(*cleared_tool_uses)
            }
            EventBody::Checkpoint { name } => self.checkpoints.push((name.clone(), seq)),
            EventBody::MessageAppended { .. }
            | EventBody::RequestSent { .. }
            | EventBody::ProviderError { .. }
            | EventBody::RecoveryAttempt { .. }
            | EventBody::FloorDiagnosis { .. }
            | EventBody::Microcompact { .. }
            | EventBody::Dedup { .. }
            | EventBody::SkillAging { .. }
            | EventBody::Preflight { .. }
            | EventBody::SummaryAttempt { .. }
            | EventBody::TokenEscalation { .. }
            | EventBody::HookFired { .. }
            | EventBody::Rewind { .. }
            | EventBody::Redaction { .. }
            | EventBody::ResponseReceived { .. }
            | EventBody::RunEnded { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(b: u8) -> MsgHash {
        [b; 32]
    }

    #[test]
    fn unhex_reads_what_blake3_reads_and_refuses_the_rest() {
        let base: Vec<u8> = hex(blake3::hash(b"x").as_bytes()).into_bytes();
        assert_eq!(unhex_bytes(&base), Some(*blake3::hash(b"x").as_bytes()));
        // Every byte value at the first, a middle and the last digit: the same answer as BLAKE3's
        // own parser (upper case taken, anything else refused).
        for at in [0, 31, 63] {
            for b in 0..=255u8 {
                let mut s = base.clone();
                s[at] = b;
                let want = blake3::Hash::from_hex(&s).ok().map(|h| *h.as_bytes());
                assert_eq!(unhex_bytes(&s), want, "byte {b:#x} at {at}");
            }
        }
        for len in [0, 63, 65, 128] {
            assert_eq!(unhex_bytes(&vec![b'a'; len]), None, "length {len}");
        }
        // A state's list: a string whose length is not a multiple of 64, or with a bad digit, is
        // refused.
        let list = |s: &str| {
            serde_json::from_str::<State>(&format!(
                r#"{{"history":"{s}","cap":null,"notice_injected":false,"compactions":0,"level3":0,"summarizer":{{}},"context_edits":0,"undo":[],"checkpoints":[]}}"#
            ))
        };
        let two = format!("{}{}", hex(&h(1)), hex(&h(0xab)));
        assert_eq!(list(&two).unwrap().history, vec![h(1), h(0xab)]);
        assert!(list(&two[1..]).is_err());
        assert!(list(&two.replace('b', "g")).is_err());
    }

    #[test]
    fn diff_finds_the_smallest_splice() {
        let old = vec![h(1), h(2), h(3), h(4)];
        assert_eq!(diff(&old, &old), None);
        let stub = vec![h(1), h(9), h(3), h(4)];
        let d = diff(&old, &stub).unwrap();
        assert_eq!((d.at, d.remove, d.insert.len()), (1, 1, 1));
        let appended = vec![h(1), h(2), h(3), h(4), h(5)];
        let d = diff(&old, &appended).unwrap();
        assert_eq!((d.at, d.remove, d.insert.len()), (4, 0, 1));
        // Repeats: ["ok","ok"] → ["ok","ok","ok"] is one insert, not a no-op.
        let d = diff(&[h(7), h(7)], &[h(7), h(7), h(7)]).unwrap();
        assert_eq!((d.remove, d.insert.len()), (0, 1));
        for (a, b) in [
            (old.clone(), vec![]),
            (vec![], old.clone()),
            (old.clone(), vec![h(4)]),
            (vec![h(1), h(1)], vec![h(1)]),
        ] {
            let d = diff(&a, &b).unwrap();
            let mut s = State { history: a.clone(), ..State::default() };
            s.apply("s", 2, Some(1), &EventBody::MessageAppended { count: 0 }, Some(&d)).unwrap();
            assert_eq!(s.history, b);
        }
    }

    #[test]
    fn a_listing_is_the_json_of_the_state_with_that_history() {
        // Every field away from its default, so a field left out or reordered shows.
        let state = State {
            history: vec![h(1), h(2), h(3)],
            cap: Some(7),
            notice_injected: true,
            compactions: 2,
            level3: 1,
            summarizer: Cost { calls: 1, input_tokens: 2, output_tokens: 3 },
            context_edits: 4,
            undo: vec![5, 6],
            checkpoints: vec![("a".into(), 3)],
        };
        for listed in [&state.history[..], &state.history[1..], &[][..]] {
            let want = serde_json::to_vec(&State { history: listed.to_vec(), ..state.clone() }).unwrap();
            assert_eq!(state.to_json_listing(listed).unwrap(), want);
        }
    }
}
