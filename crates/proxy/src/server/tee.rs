//! The response body as relayed to the client: frames pass through as they arrive while the
//! response parser reads along; when it ends (or breaks off) the turn goes to the writer.

use super::http::{error_chain, strip_hop_by_hop};
use super::ProxyBody;
use crate::record::{Cut, Reserve, Turn, Writer};
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::Response;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};

/// What to do when a relayed response ends.
pub(super) struct Finish {
    /// The turn, to be completed with how the response ended.
    pub turn: Turn,
    /// Where it goes.
    pub writer: Writer,
}

impl Finish {
    /// Queues the turn from where no one can wait for room: on the runtime when there is one.
    fn send_later(self) {
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(async move { self.writer.send(self.turn).await });
            }
            Err(_) => self.writer.send_reserved(self.turn, None),
        }
    }
}

/// The client's response: the upstream's, hop-by-hop headers dropped, its body relayed (and read
/// for the turn when there is one).
pub(super) fn relay(resp: Response<Incoming>, finish: Option<Finish>) -> Response<ProxyBody> {
    let (mut parts, body) = resp.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    let body = match finish {
        None => body.boxed(),
        Some(f) => Tee { inner: body, finish: Some(f), room: None }.boxed(),
    };
    Response::from_parts(parts, body)
}

/// The response body as relayed: frames pass through as they arrive while the parser reads them.
/// At the end the turn goes to the writer; when its queue is full, the end of the response waits
/// for room (the client has every byte but the end of the stream).
struct Tee {
    inner: Incoming,
    finish: Option<Finish>,
    /// The wait for room (in a mutex only to make the body `Sync`; polled through `&mut`).
    room: Option<Mutex<Reserve>>,
}

impl Tee {
    /// The response ended (`cut`: or broke off): queue the turn now if there is room.
    fn ended(&mut self, cut: Option<Cut>) -> bool {
        let Some(f) = self.finish.as_mut() else { return true };
        f.turn.cut = cut;
        let weight = f.turn.weight();
        match f.writer.try_reserve(weight) {
            Some(room) => {
                if let Some(f) = self.finish.take() {
                    f.writer.send_reserved(f.turn, Some(room));
                }
                true
            }
            None => {
                self.room = Some(Mutex::new(f.writer.reserve(weight)));
                false
            }
        }
    }

    /// Waits for room for the turn, then queues it.
    fn poll_room(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some(room) = self.room.as_mut() else { return Poll::Ready(()) };
        let room = room.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner);
        match room.as_mut().poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(room) => {
                self.room = None;
                if let Some(f) = self.finish.take() {
                    f.writer.send_reserved(f.turn, room);
                }
                Poll::Ready(())
            }
        }
    }
}

impl Body for Tee {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = &mut *self;
        if this.room.is_some() {
            return this.poll_room(cx).map(|()| None);
        }
        if this.finish.is_none() {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(d), Some(f)) = (frame.data_ref(), this.finish.as_mut()) {
                    if let Some(a) = f.turn.response.as_mut() {
                        a.feed_bytes(d);
                    }
                }
                if this.inner.is_end_stream() {
                    // Queued now when there is room; otherwise the next poll waits for it.
                    this.ended(None);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                if let Some(mut f) = this.finish.take() {
                    f.turn.cut = Some(Cut::Upstream(error_chain(&e)));
                    f.send_later();
                }
                Poll::Ready(Some(Err(e)))
            }
            Poll::Ready(None) => {
                if this.ended(None) {
                    Poll::Ready(None)
                } else {
                    this.poll_room(cx).map(|()| None)
                }
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.finish.is_none() && self.room.is_none() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Tee {
    fn drop(&mut self) {
        if let Some(mut f) = self.finish.take() {
            // Gone before the end: the client left (a turn whose room was being waited for ended).
            if self.room.is_none() && !self.inner.is_end_stream() {
                f.turn.cut = Some(Cut::Client);
            }
            f.send_later();
        }
    }
}
