//! The client's request body on its way upstream: every frame is relayed as it arrives (the
//! upstream sees the first bytes before the last ones have reached the proxy) while a
//! reference-counted handle to it is kept for what needs the whole body later — the journal
//! writer (off the request path) and, on a failure, the classifier, the capture and recovery.
//! Nothing is copied on the way: the kept frames are the frames relayed.
//!
//! The body is capped: past the cap the relay fails (the upstream request is abandoned) and the
//! proxy answers 413 itself. If the upstream stops reading before the end (a gateway rejects
//! early), the rest of the client's body is handed back so a failure can still be read whole.

use crate::budget::{Budget, Charge};
use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use tokio::sync::Notify;

/// Why the whole request body is not available.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// It is larger than the cap.
    #[error("length limit exceeded ({0} bytes)")]
    TooLarge(usize),
    /// The client's connection failed while sending it.
    #[error("{0}")]
    Client(String),
    /// It was not read to its end (the upstream answered before; the rest was not kept).
    #[error("not read to its end")]
    Unfinished,
    /// Keeping it would take the proxy over its budget of request bytes in flight.
    #[error("{0}")]
    OverBudget(crate::budget::OverBudget),
}

/// How far the body has been read.
#[derive(Debug, Default)]
enum End {
    /// Still arriving.
    #[default]
    Open,
    /// Read to its end.
    Complete,
    /// Stopped with an error.
    Failed(BodyError),
    /// The upstream stopped reading: the rest, still with the client.
    Handed(Option<Incoming>),
}

#[derive(Debug, Default)]
struct State {
    chunks: Vec<Bytes>,
    len: usize,
    end: End,
    /// The bytes the kept body holds of the proxy's budget, given back when the last handle to
    /// it is dropped.
    charge: Charge,
}

impl State {
    /// Keeps `data`, taking what it adds beyond the bytes already charged from `budget`.
    fn keep(&mut self, budget: Option<&Budget>, data: Bytes) -> Result<(), BodyError> {
        let len = self.len.saturating_add(data.len());
        if let Some(b) = budget {
            let more = len.saturating_sub(self.charge.bytes());
            b.grow(&mut self.charge, more).map_err(BodyError::OverBudget)?;
        }
        self.len = len;
        self.chunks.push(data);
        Ok(())
    }
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    changed: Notify,
    /// The budget the kept bytes are charged to (none: not counted).
    budget: Option<Budget>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the state half-written (every update is
        // one assignment or push), so a poisoned lock is still read.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn end(&self, end: End) {
        let mut s = self.lock();
        if matches!(s.end, End::Open) {
            s.end = end;
        }
        drop(s);
        self.changed.notify_one();
    }
}

/// The kept request body (cheap to clone: a handle).
#[derive(Debug, Clone, Default)]
pub struct Kept {
    shared: Arc<Shared>,
}

impl Kept {
    /// A body already whole (a retry's, a test's).
    pub fn whole(body: Bytes) -> Kept {
        let k = Kept::default();
        {
            let mut s = k.shared.lock();
            s.len = body.len();
            s.chunks.push(body);
            s.end = End::Complete;
        }
        k
    }

    /// The bytes kept so far.
    pub fn len(&self) -> usize {
        self.shared.lock().len
    }

    /// Nothing kept yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Why the body could not be relayed (over the cap, the client broke off), if it could not.
    pub fn failure(&self) -> Option<BodyError> {
        match &self.shared.lock().end {
            End::Failed(e) => Some(e.clone()),
            End::Open | End::Complete | End::Handed(_) => None,
        }
    }

    /// The whole body when it has been read to its end (without waiting): one contiguous copy is
    /// made the first time for a body that arrived in several frames, then it is shared.
    pub fn complete(&self) -> Result<Bytes, BodyError> {
        let mut s = self.shared.lock();
        match &s.end {
            End::Complete => Ok(contiguous(&mut s)),
            End::Failed(e) => Err(e.clone()),
            End::Open | End::Handed(_) => Err(BodyError::Unfinished),
        }
    }

    /// The whole body when it has been read to its end, handed over: the handle keeps only its
    /// length from then on (reading it again is [`BodyError::Unfinished`]). The frames are made
    /// one contiguous body (a copy only when there are several) and released, so the caller
    /// holds the only copy and can drop it as soon as it has read it (the journal writer parses
    /// it and frees it before it builds the history).
    pub fn take_whole(&self) -> Result<Bytes, BodyError> {
        let mut s = self.shared.lock();
        match &s.end {
            End::Complete => {
                let whole = contiguous(&mut s);
                s.chunks = Vec::new();
                s.end = End::Handed(None);
                Ok(whole)
            }
            End::Failed(e) => Err(e.clone()),
            End::Open | End::Handed(_) => Err(BodyError::Unfinished),
        }
    }

    /// The frames of the whole body when it has been read to its end (without waiting or copying:
    /// the frames relayed).
    pub fn frames(&self) -> Result<Vec<Bytes>, BodyError> {
        let s = self.shared.lock();
        match &s.end {
            End::Complete => Ok(s.chunks.clone()),
            End::Failed(e) => Err(e.clone()),
            End::Open | End::Handed(_) => Err(BodyError::Unfinished),
        }
    }

    /// The whole body, waiting for it to be read to its end; the part the upstream did not read is
    /// read here, within `max` bytes in all.
    pub async fn read_whole(&self, max: usize) -> Result<Bytes, BodyError> {
        loop {
            let notified = self.shared.changed.notified();
            let rest = {
                let mut s = self.shared.lock();
                match &mut s.end {
                    End::Complete => return Ok(contiguous(&mut s)),
                    End::Failed(e) => return Err(e.clone()),
                    End::Handed(rest) => rest.take(),
                    End::Open => None,
                }
            };
            match rest {
                Some(rest) => return self.finish_reading(rest, max).await,
                None if matches!(self.shared.lock().end, End::Handed(None)) => {
                    return Err(BodyError::Unfinished)
                }
                None => notified.await,
            }
        }
    }

    async fn finish_reading(&self, mut rest: Incoming, max: usize) -> Result<Bytes, BodyError> {
        loop {
            match rest.frame().await {
                None => {
                    self.shared.lock().end = End::Complete;
                    return self.complete();
                }
                Some(Err(e)) => {
                    let e = BodyError::Client(e.to_string());
                    self.shared.lock().end = End::Failed(e.clone());
                    return Err(e);
                }
                Some(Ok(frame)) => {
                    let Ok(data) = frame.into_data() else { continue };
                    let mut s = self.shared.lock();
                    if s.len.saturating_add(data.len()) > max {
                        s.end = End::Failed(BodyError::TooLarge(max));
                        return Err(BodyError::TooLarge(max));
                    }
                    if let Err(e) = s.keep(self.shared.budget.as_ref(), data) {
                        s.end = End::Failed(e.clone());
                        return Err(e);
                    }
                }
            }
        }
    }
}

/// The kept frames as one `Bytes` (kept so, so that the copy is made once).
fn contiguous(s: &mut State) -> Bytes {
    match s.chunks.as_slice() {
        [] => Bytes::new(),
        [one] => one.clone(),
        many => {
            let mut all = BytesMut::with_capacity(s.len);
            for c in many {
                all.extend_from_slice(c);
            }
            let all = all.freeze();
            s.chunks = vec![all.clone()];
            all
        }
    }
}

/// The body relayed upstream: the client's frames as they come, counted against the cap, and
/// (when `keep`) kept for [`Kept`].
#[derive(Debug)]
pub struct Spool {
    inner: Option<Incoming>,
    shared: Arc<Shared>,
    keep: bool,
    max: usize,
    seen: usize,
}

/// The error the relayed body ends with (the upstream request is abandoned).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl Spool {
    /// Relays `body` within `max` bytes; with `keep`, the frames are kept for the returned handle.
    pub fn new(body: Incoming, max: usize, keep: bool) -> (Spool, Kept) {
        let kept = Kept::default();
        let spool = Spool { inner: Some(body), shared: kept.shared.clone(), keep, max, seen: 0 };
        (spool, kept)
    }

    /// Relays `body` within `max` bytes, keeping its frames within `budget`: `charge` is what the
    /// request already took (its declared length); frames beyond it take more as they arrive, and
    /// the body fails when there is no room for them.
    pub fn budgeted(body: Incoming, max: usize, budget: Budget, charge: Charge) -> (Spool, Kept) {
        let state = State { charge, ..State::default() };
        let shared = Shared { state: Mutex::new(state), changed: Notify::new(), budget: Some(budget) };
        let kept = Kept { shared: Arc::new(shared) };
        let spool = Spool { inner: Some(body), shared: kept.shared.clone(), keep: true, max, seen: 0 };
        (spool, kept)
    }
}

impl Body for Spool {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        let Some(inner) = this.inner.as_mut() else { return Poll::Ready(None) };
        match Pin::new(inner).poll_frame(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(None) => {
                this.inner = None;
                this.shared.end(End::Complete);
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(e))) => {
                this.inner = None;
                let err = BodyError::Client(e.to_string());
                this.shared.end(End::Failed(err));
                Poll::Ready(Some(Err(Box::new(e))))
            }
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(d) = frame.data_ref() {
                    this.seen = this.seen.saturating_add(d.len());
                    if this.seen > this.max {
                        this.inner = None;
                        let err = BodyError::TooLarge(this.max);
                        this.shared.end(End::Failed(err.clone()));
                        return Poll::Ready(Some(Err(Box::new(err))));
                    }
                    if this.keep {
                        let kept = this.shared.lock().keep(this.shared.budget.as_ref(), d.clone());
                        if let Err(err) = kept {
                            this.inner = None;
                            this.shared.end(End::Failed(err.clone()));
                            return Poll::Ready(Some(Err(Box::new(err))));
                        }
                    }
                }
                if this.inner.as_ref().is_none_or(Body::is_end_stream) {
                    // The last frame: the body is whole even if it is never polled again.
                    this.shared.end(End::Complete);
                }
                Poll::Ready(Some(Ok(frame)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.as_ref().map(Body::size_hint).unwrap_or_else(|| SizeHint::with_exact(0))
    }
}

impl Drop for Spool {
    fn drop(&mut self) {
        // The upstream stopped reading (it answered early, or failed): the rest stays readable.
        let rest = self.inner.take().filter(|b| !b.is_end_stream());
        match rest {
            Some(rest) => self.shared.end(End::Handed(Some(rest))),
            None => self.shared.end(End::Complete),
        }
    }
}

/// A whole body or a relayed one: what the proxy sends upstream.
#[derive(Debug)]
pub enum Outgoing {
    /// The client's body as it arrives (attempt 0, and every request that is not a turn).
    Relayed(Spool),
    /// A body the proxy built (a retry).
    Whole(Option<Bytes>),
}

impl Body for Outgoing {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            Outgoing::Relayed(s) => Pin::new(s).poll_frame(cx),
            Outgoing::Whole(b) => Poll::Ready(b.take().filter(|b| !b.is_empty()).map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Outgoing::Relayed(s) => s.is_end_stream(),
            Outgoing::Whole(b) => b.as_ref().is_none_or(Bytes::is_empty),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Outgoing::Relayed(s) => s.size_hint(),
            Outgoing::Whole(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_taken_whole_is_held_only_by_its_taker() {
        let kept = Kept::whole(Bytes::from(vec![7u8; 1000]));
        let other = kept.clone();
        let whole = kept.take_whole().expect("whole");
        // The handles keep its length only: the bytes can be freed (or made a Vec without a
        // copy) by whoever took them.
        assert!(whole.is_unique());
        assert_eq!((whole.len(), other.len()), (1000, 1000));
        assert_eq!(other.frames(), Err(BodyError::Unfinished));
        assert_eq!(other.take_whole(), Err(BodyError::Unfinished));
    }
}
