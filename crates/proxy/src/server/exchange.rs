//! One client request, from its arrival to its answer. A request that is not a turn (another path,
//! or no journal) is relayed as it is. A turn's body goes upstream as it arrives; an accepted
//! response is relayed (`tee.rs`); a rejection is read whole, the request is parsed and
//! classified, and either passed to the client (journaled, captured) or, with `--recover` and a
//! recoverable class, handed to the engine, which retries until an answer or its bound.

use super::http::{
    accepts_trailers, error_chain, full, over_budget, refused, send, strip_hop_by_hop, unreachable,
    upstream_uri,
};
use super::tee::{relay, Finish};
use super::{ProxyBody, ProxyError, State};
use crate::assemble::Assembler;
use crate::decode::{decode_whole, decoded_request, Coding};
use crate::record::{Turn, Writer, SESSION_HEADER};
use crate::recover::{Next, Recovery, Rejection};
use crate::route::{self, Api, Parsed};
use crate::spool::{Kept, Outgoing, Spool};
use bytes::Bytes;
use chrono::Utc;
use http_body_util::BodyExt;
use hyper::body::{Body, Incoming};
use hyper::header::HeaderMap;
use hyper::{Method, Request, Response, Uri};
use salvage_journal::HistoryChange;
use salvage_recovery::classify::{classify, FailureInput};
use salvage_types::capture::Failure;
use salvage_types::event::EventBody;
use salvage_types::history_weight;
use std::sync::Arc;

/// Where a request goes and what it is.
struct Head {
    method: Method,
    uri: Uri,
    /// The headers relayed (hop-by-hop ones, the host, the length and the session header removed).
    headers: HeaderMap,
    session_header: Option<String>,
    /// The API when the request is a turn.
    api: Option<Api>,
    /// The client's product (from its user agent).
    client: Option<String>,
}

impl Head {
    fn of(st: &State, parts: &hyper::http::request::Parts) -> Result<Head, ProxyError> {
        let uri = upstream_uri(&st.options.upstream, &parts.uri)?;
        let mut headers = parts.headers.clone();
        strip_hop_by_hop(&mut headers);
        if accepts_trailers(&parts.headers) {
            headers.insert(hyper::header::TE, hyper::header::HeaderValue::from_static("trailers"));
        }
        headers.remove(hyper::header::HOST);
        headers.remove(hyper::header::CONTENT_LENGTH);
        let session_header = headers.remove(SESSION_HEADER).and_then(|v| v.to_str().ok().map(str::to_string));
        let api = if parts.method == Method::POST {
            st.options.api.or_else(|| Api::from_path(parts.uri.path()))
        } else {
            None
        };
        let client = parts
            .headers
            .get(hyper::header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .and_then(|ua| ua.split_whitespace().next())
            .map(str::to_string);
        Ok(Head { method: parts.method.clone(), uri, headers, session_header, api, client })
    }

    /// Scheme and host of the upstream (for capture titles).
    fn upstream(&self) -> String {
        format!(
            "{}://{}",
            self.uri.scheme_str().unwrap_or("http"),
            self.uri.authority().map(|a| a.as_str()).unwrap_or("")
        )
    }
}

/// Serves one client request.
pub(super) async fn handle(
    st: Arc<State>,
    req: Request<Incoming>,
) -> Result<Response<ProxyBody>, ProxyError> {
    let started = Utc::now();
    let (parts, incoming) = req.into_parts();
    let max = st.options.max_request_bytes;
    if incoming.size_hint().lower() > max as u64 {
        return Ok(refused(&crate::spool::BodyError::TooLarge(max)));
    }
    let head = Head::of(&st, &parts)?;
    // A turn is recorded, or recovered, or both.
    let turn_of = head.api.filter(|_| st.writer.is_some() || st.options.recover);
    if let Some(w) = turn_of.and(st.writer.as_ref()) {
        // A journal that fell behind holds new turns back rather than queueing without bound.
        w.not_full().await;
    }
    // The body goes upstream as it arrives; a turn keeps its frames for the journal and recovery,
    // within the budget of request bytes in flight: its declared length is taken first (waiting
    // a bounded time for room), what arrives beyond it as it arrives.
    let (spool, body) = if turn_of.is_some() {
        let declared = usize::try_from(incoming.size_hint().lower()).unwrap_or(usize::MAX).min(max);
        match st.budget.take(declared).await {
            Ok(charge) => Spool::budgeted(incoming, max, st.budget.clone(), charge),
            Err(over) => {
                (st.log)(&format!("request refused: {over}"));
                return Ok(over_budget(&over));
            }
        }
    } else {
        Spool::new(incoming, max, false)
    };
    let Some(api) = turn_of else {
        // Not a turn (or neither journaled nor recovered): relayed as it is.
        return match send(&st, &head.method, &head.uri, &head.headers, Outgoing::Relayed(spool)).await {
            Ok(resp) => Ok(relay(resp, None)),
            Err(e) => match body.failure() {
                Some(b) => Ok(refused(&b)),
                None if e.connect => Ok(unreachable(&head.uri, &e.message)),
                None => Err(ProxyError::Transport(e.message)),
            },
        };
    };
    let mut turn = Turn::relayed(api, body.clone(), started);
    turn.session_header = head.session_header.clone();
    turn.coding =
        Coding::of(parts.headers.get(hyper::header::CONTENT_ENCODING).and_then(|v| v.to_str().ok()));
    turn.client = head.client.clone();
    turn.upstream = head.upstream();
    let writer = st.writer.clone();
    Exchange { st, head, api, writer, body, turn }.run(spool).await
}

/// What one request upstream came to.
enum Sent {
    /// A success (or informational, or redirect): relayed.
    Accepted(Response<Incoming>),
    /// The client's body could not be relayed: the proxy's own answer.
    Refused(Response<ProxyBody>),
    /// A rejection, with the response to pass to the client (none: the upstream's connection broke
    /// after the request was sent; the proxy's own 502 when the upstream could not be reached).
    Rejected(Rejection, Option<Response<ProxyBody>>),
}

/// A turn being served.
struct Exchange {
    st: Arc<State>,
    head: Head,
    api: Api,
    /// Where the turn goes (none: nothing is journaled, the turn is only recovered).
    writer: Option<Writer>,
    /// The client's body, kept.
    body: Kept,
    turn: Turn,
}

impl Exchange {
    async fn run(mut self, spool: Spool) -> Result<Response<ProxyBody>, ProxyError> {
        self.turn.attempt_zero();
        let (rejection, passthrough) = match self.send(Outgoing::Relayed(spool)).await {
            Sent::Accepted(resp) => return Ok(self.accepted(resp)),
            Sent::Refused(r) => return Ok(r),
            Sent::Rejected(r, p) => (r, p),
        };
        // A failure: parse the request (once), classify, journal, capture, maybe recover.
        self.parse_request().await;
        let Some(parsed) = self.turn.parsed.take() else {
            return passthrough.ok_or(ProxyError::Transport(rejection.message));
        };
        let recoverable = self.classify(&rejection, &parsed);
        if !(self.st.options.recover && recoverable) {
            // The turn keeps the request as sent, for the journal and the capture: no copy.
            self.turn.parsed = Some(parsed);
            return self.finish_failure(passthrough, rejection).await;
        }
        // The engine takes the turn from here: attempt 0's record is its own. It changes its
        // own copy of the request; the turn keeps the request as sent.
        self.turn.steps.pop();
        self.turn.parsed = Some(parsed.clone());
        self.recover(parsed, rejection, passthrough).await
    }

    /// Sends `out` upstream and reads a rejection whole.
    async fn send(&self, out: Outgoing) -> Sent {
        let h = &self.head;
        let result = send(&self.st, &h.method, &h.uri, &h.headers, out).await;
        if let Some(e) = self.body.failure() {
            // The client's body was over the cap or broke off: nothing was relayed whole.
            return Sent::Refused(refused(&e));
        }
        match result {
            Ok(resp)
                if resp.status().is_success()
                    || resp.status().is_informational()
                    || resp.status().is_redirection() =>
            {
                Sent::Accepted(resp)
            }
            Ok(resp) => rejected(resp).await,
            // Never reached: the client is told so. Cut off after sending: its connection drops
            // as the upstream's did.
            Err(t) => {
                let answer = t.connect.then(|| unreachable(&h.uri, &t.message));
                Sent::Rejected(transport(t.message), answer)
            }
        }
    }

    /// Relays an accepted response, the turn going to the writer when it ends.
    fn accepted(mut self, resp: Response<Incoming>) -> Response<ProxyBody> {
        let header =
            |name| resp.headers().get(name).and_then(|v: &hyper::header::HeaderValue| v.to_str().ok());
        let sse = header(hyper::header::CONTENT_TYPE).is_some_and(|c| c.contains("text/event-stream"));
        self.turn.accepted_status = Some(resp.status().as_u16());
        // The client gets the body as encoded; the parser reads a decoded copy (for the journal).
        self.turn.response =
            self.writer.as_ref().map(|_| match Coding::of(header(hyper::header::CONTENT_ENCODING)) {
                Some(coding) => Assembler::encoded(self.api, sse, coding),
                None => Assembler::unreadable(self.api),
            });
        relay(resp, self.writer.map(|writer| Finish { turn: self.turn, writer }))
    }

    /// Reads the request as a history into the turn (on a failure, once). The body is handed
    /// over whole and freed before its history is built (the turn keeps its length): from here
    /// on the turn's parsed request is what the journal, the capture and recovery read.
    async fn parse_request(&mut self) {
        if self.turn.parsed.is_none() {
            let whole = self.body.read_whole(self.st.options.max_request_bytes).await;
            // The copy read_whole returns is dropped: the one taken is then the only one.
            let whole = whole.map(drop).and_then(|()| self.body.take_whole());
            match whole.map_err(|e| e.to_string()).and_then(|w| decoded_request(self.turn.coding, w)) {
                Ok(whole) => match route::parse_owned(self.api, whole) {
                    Ok(p) => self.turn.parsed = Some(p),
                    Err(e) => (self.st.log)(&format!(
                        "request body not read as a history ({e}); relayed unrecorded"
                    )),
                },
                Err(e) => (self.st.log)(&format!("request body not read ({e}); relayed unrecorded")),
            }
        }
    }

    /// Classifies the rejection of the client's request, records it as the turn's failure and
    /// (unless it is recovered) its `provider_error`; true when it is recoverable.
    fn classify(&mut self, rejection: &Rejection, parsed: &Parsed) -> bool {
        let failure = Failure {
            status: rejection.status,
            message: rejection.message.clone(),
            transport: rejection.transport.clone(),
            rejected_request_bytes: rejection.rejected_bytes,
        };
        let input = FailureInput::new(failure, history_weight(&parsed.history));
        let c = classify(&input);
        if self.turn.failure.is_none() {
            self.turn.failure = Some((input.failure, c.class));
        }
        let what = rejection.status.map(|s| format!("HTTP {s}")).unwrap_or_else(|| rejection.message.clone());
        (self.st.log)(&format!(
            "attempt 0: {what} → {} ({})",
            c.class,
            if c.recoverable { "recoverable" } else { "not recoverable" }
        ));
        if !(self.st.options.recover && c.recoverable) {
            self.turn.step(
                EventBody::ProviderError {
                    status: rejection.status,
                    message: rejection.message.clone(),
                    transport: rejection.transport.clone(),
                    rejected_bytes: rejection.rejected_bytes,
                    class: c.class,
                    reason: c.reason.clone(),
                },
                HistoryChange::None,
                Vec::new(),
            );
        }
        c.recoverable
    }

    /// Climbs the ladder: the engine answers each rejection with a smaller body to retry, until
    /// one is accepted or the engine gives up (then the last rejection goes to the client).
    async fn recover(
        mut self,
        parsed: Parsed,
        mut rejection: Rejection,
        mut passthrough: Option<Response<ProxyBody>>,
    ) -> Result<Response<ProxyBody>, ProxyError> {
        let key = crate::record::session_id(self.turn.session_header.as_deref(), &parsed.history);
        let parsed_weight = history_weight(&parsed.history);
        // A retry is the proxy's own plain JSON, whatever the client's body was encoded in.
        self.head.headers.remove(hyper::header::CONTENT_ENCODING);
        let o = &self.st.options;
        let mut r = Recovery::new(
            self.api,
            parsed.request,
            parsed.history,
            o.config.clone(),
            self.st.recalled(&key),
            o.settings.clone(),
        );
        loop {
            let st = self.st.clone();
            let log = |line: &str| (st.log)(line);
            let retry = match r.next(&rejection, &mut self.turn, &log) {
                Ok(Next::Retry(b)) => Bytes::from(b),
                Ok(Next::GiveUp(why)) => {
                    log(&format!("recovery ended: {why}"));
                    break;
                }
                Err(e) => {
                    log(&format!("recovery failed: {e}"));
                    break;
                }
            };
            log(&format!("attempt {}: retrying with {} bytes", r.attempts(), retry.len()));
            let sent = retry.len() as u64;
            match self.send(Outgoing::Whole(Some(retry))).await {
                Sent::Accepted(resp) => {
                    if let Some(e) = r.sent_step(sent) {
                        self.turn.step(e, HistoryChange::None, Vec::new());
                    }
                    self.st.remember(&key, r.session());
                    return Ok(self.accepted(resp));
                }
                Sent::Refused(resp) => return Ok(resp),
                Sent::Rejected(again, p) => {
                    if rejected_for_size(&again, parsed_weight) {
                        self.turn.rejected_retries.push(sent);
                    }
                    (rejection, passthrough) = (again, p);
                }
            }
        }
        self.st.remember(&key, r.session());
        self.finish_failure(passthrough, rejection).await
    }

    /// Queues the failed turn and passes the upstream's answer on (a transport failure drops the
    /// client's connection as the upstream's was).
    async fn finish_failure(
        self,
        passthrough: Option<Response<ProxyBody>>,
        rejection: Rejection,
    ) -> Result<Response<ProxyBody>, ProxyError> {
        if let Some(w) = &self.writer {
            w.send(self.turn).await;
        }
        passthrough.ok_or(ProxyError::Transport(rejection.message))
    }
}

/// True when a rejection is one for the request's size (payload-class), for a request whose
/// history weighs at most `weight`.
fn rejected_for_size(r: &Rejection, weight: u64) -> bool {
    use salvage_types::class::ErrorClass;
    let failure = Failure {
        status: r.status,
        message: r.message.clone(),
        transport: r.transport.clone(),
        rejected_request_bytes: r.rejected_bytes,
    };
    matches!(
        classify(&FailureInput::new(failure, weight)).class,
        ErrorClass::PayloadTooLarge | ErrorClass::WafRejection | ErrorClass::LikelyPayload
    )
}

/// A transport failure as a rejection.
fn transport(t: String) -> Rejection {
    Rejection { status: None, message: t.clone(), transport: Some(t), rejected_bytes: None }
}

/// A rejection read whole (its body is the message; a size it reports is kept).
async fn rejected(resp: Response<Incoming>) -> Sent {
    let status = resp.status();
    let (mut parts, body) = resp.into_parts();
    // Whatever becomes of it (passed on as it is, or after a failed recovery), it is relayed.
    strip_hop_by_hop(&mut parts.headers);
    match body.collect().await {
        Ok(b) => {
            let b = b.to_bytes();
            // Read as the client would read it: decoded (the client still gets it as it came).
            let coding =
                Coding::of(parts.headers.get(hyper::header::CONTENT_ENCODING).and_then(|v| v.to_str().ok()));
            let plain = coding.and_then(|c| decode_whole(c, &b, crate::assemble::MAX_JSON_COPY));
            let text = String::from_utf8_lossy(plain.as_deref().unwrap_or(&b)).into_owned();
            let size = crate::capture::reported_size(&text);
            let r = Rejection {
                status: Some(status.as_u16()),
                message: text,
                transport: None,
                rejected_bytes: size,
            };
            Sent::Rejected(r, Some(Response::from_parts(parts, full(b))))
        }
        Err(e) => Sent::Rejected(transport(error_chain(&e)), None),
    }
}
