//! The requests the writer read last, so that the next turn of a conversation is not read again
//! from its start.
//!
//! Design decision: the turns of one conversation repeat its history (an agent's next request is
//! the last one plus the reply and a new message; a retry or a regenerate is the same request
//! again), and reading a request (parsing it into the message model, then serializing and hashing
//! every message to key it as the journal does) cost the writer most of a turn, all of it again
//! for the part it had read the turn before. The writer keeps the latest request of each of the
//! most recent sessions, bounded in bytes: a body that is byte for byte one it holds (BLAKE3 of
//! the frames as relayed, not copied into one buffer) is neither copied nor parsed again, and a history that begins with the one its session sent last
//! has only its new messages keyed (the digest's hasher goes on from where the last one stopped).
//! A request is still parsed whole when it is new: the parse is what proves it is a history, and
//! the importers read a request as one document.

use super::{session_id, Keyed};
use crate::route::{self, Api, Parsed};
use bytes::Bytes;
use std::collections::VecDeque;
use std::sync::Arc;

/// The request bodies the cache holds at most, in bytes (each entry weighs its body).
pub const CACHE_BYTES: usize = 32 << 20;
/// The sessions it holds at most.
pub const CACHE_SESSIONS: usize = 64;

/// A request as the writer read it.
#[derive(Debug, Clone)]
pub struct Read {
    /// Its session.
    pub session: String,
    /// The request as a history.
    pub parsed: Arc<Parsed>,
    /// Its messages keyed.
    pub keyed: Arc<Keyed>,
}

#[derive(Debug)]
struct Entry {
    api: Api,
    body: [u8; 32],
    len: usize,
    header: Option<String>,
    read: Read,
}

/// The latest request of each recent session (most recent last).
#[derive(Debug, Default)]
pub struct Recent {
    entries: VecDeque<Entry>,
    bytes: usize,
    /// None is kept (the turn-by-turn path).
    off: bool,
    /// The responses journaled last, which a Responses request may continue.
    pub chains: super::chain::Chains,
}

impl Recent {
    /// A cache that keeps nothing: every request is read afresh.
    pub fn off() -> Recent {
        Recent { off: true, ..Recent::default() }
    }

    /// Reads a request body of `api` (its frames, as relayed) sent with the session header
    /// `header`. The frames are made one contiguous body only to be parsed.
    pub fn read(&mut self, api: Api, header: Option<&str>, frames: &[Bytes]) -> Result<Read, String> {
        let whole = match frames {
            [one] => one.clone(),
            many => Bytes::from(many.concat()),
        };
        self.read_body(api, header, whole)
    }

    /// [`Recent::read`] of a body handed over whole: a body that has to be parsed is freed before
    /// its history is built ([`route::parse_owned`]), so a large request costs the writer its
    /// parsed tree and its history, not also its bytes.
    pub fn read_body(&mut self, api: Api, header: Option<&str>, body: Bytes) -> Result<Read, String> {
        if self.off {
            let parsed = route::parse_owned(api, body)?;
            let keyed = Keyed::of(&parsed.history);
            let session = session_id(header, &parsed.history);
            return Ok(Read { session, parsed: Arc::new(parsed), keyed: Arc::new(keyed) });
        }
        let len = body.len();
        let hash = *blake3::hash(&body).as_bytes();
        let same = |e: &Entry| e.api == api && e.header.as_deref() == header;
        if let Some(i) = self.entries.iter().position(|e| same(e) && e.body == hash) {
            let read = self.entries.get(i).map(|e| e.read.clone());
            self.touch(i);
            return read.ok_or_else(|| "the request cache lost an entry".to_string());
        }
        let parsed = route::parse_owned(api, body)?;
        let session = session_id(header, &parsed.history);
        let last = self.entries.iter().position(|e| same(e) && e.read.session == session);
        let keyed = match last.and_then(|i| self.entries.get(i)) {
            Some(e) => e.read.keyed.extend(&e.read.parsed.history, &parsed.history),
            None => Keyed::of(&parsed.history),
        };
        if let Some(i) = last {
            self.remove(i);
        }
        let read = Read { session, parsed: Arc::new(parsed), keyed: Arc::new(keyed) };
        self.insert(Entry { api, body: hash, len, header: header.map(str::to_string), read: read.clone() });
        Ok(read)
    }

    /// Moves entry `i` to the most recent place.
    fn touch(&mut self, i: usize) {
        if let Some(e) = self.entries.remove(i) {
            self.entries.push_back(e);
        }
    }

    fn remove(&mut self, i: usize) {
        if let Some(e) = self.entries.remove(i) {
            self.bytes = self.bytes.saturating_sub(e.len);
        }
    }

    /// Keeps `e`, dropping the least recent entries beyond the bounds (a body larger than the
    /// whole cache is not kept).
    fn insert(&mut self, e: Entry) {
        if e.len > CACHE_BYTES {
            return;
        }
        self.bytes = self.bytes.saturating_add(e.len);
        self.entries.push_back(e);
        while self.bytes > CACHE_BYTES || self.entries.len() > CACHE_SESSIONS {
            match self.entries.pop_front() {
                Some(old) => self.bytes = self.bytes.saturating_sub(old.len),
                None => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(messages: &[(&str, &str)]) -> Vec<u8> {
        let m: Vec<_> = messages.iter().map(|(r, c)| serde_json::json!({"role": r, "content": c})).collect();
        serde_json::to_vec(&serde_json::json!({"model": "m", "max_tokens": 8, "system": "S", "messages": m}))
            .unwrap_or_default()
    }

    #[test]
    fn a_request_read_through_the_cache_is_read_as_afresh() {
        let first = body(&[("user", "task")]);
        let again = first.clone();
        let longer = body(&[("user", "task"), ("assistant", "ok"), ("user", "more")]);
        let edited = body(&[("user", "task"), ("assistant", "edited"), ("user", "more")]);
        let other = body(&[("user", "other task"), ("assistant", "ok")]);
        let other_header = body(&[("user", "task")]);
        let mut cache = Recent::default();
        let mut fresh = Recent::off();
        let api = Api::AnthropicMessages;
        for (b, header) in [
            (&first, None),
            (&again, None),
            (&longer, None),
            (&edited, None),
            (&other, None),
            (&other_header, Some("s2")),
        ] {
            // The same body in one frame and in several.
            let one = [Bytes::copy_from_slice(b)];
            let (x, y) = b.split_at(b.len() / 2);
            let two = [Bytes::copy_from_slice(x), Bytes::copy_from_slice(y)];
            let (a, f) =
                (cache.read(api, header, &two).expect("read"), fresh.read(api, header, &one).expect("read"));
            assert_eq!(a.session, f.session);
            assert_eq!(a.parsed.history, f.parsed.history);
            assert_eq!(a.parsed.request, f.parsed.request);
            assert_eq!(a.keyed, f.keyed);
        }
        assert!(cache.read(api, None, &[Bytes::from_static(b"{\"messages\": 3}")]).is_err());
    }

    #[test]
    fn the_cache_stays_within_its_sessions() {
        let mut cache = Recent::default();
        for i in 0..CACHE_SESSIONS + 10 {
            let b = body(&[("user", &format!("task {i}"))]);
            cache.read(Api::AnthropicMessages, None, &[Bytes::from(b)]).expect("read");
        }
        assert_eq!(cache.entries.len(), CACHE_SESSIONS);
        assert!(cache.bytes <= CACHE_BYTES);
    }
}
