//! The HTTP side: accept a client request, relay it to the upstream (HTTP or HTTPS) unchanged and
//! as it arrives (its frames kept by reference for the journal, [`crate::spool`]), relay the
//! response frame by frame while a parser reads along, and hand the turn to the writer. On a
//! failure: read the request whole, classify, capture, and with `--recover` climb the ladder and
//! retry.

use crate::assemble::Assembler;
use crate::record::{Cut, Reserve, Turn, Writer, SESSION_HEADER};
use crate::recover::{Next, Recovery, Rejection};
use crate::route::{self, Api};
use crate::spool::{BodyError, Outgoing, Spool};
use bytes::Bytes;
use chrono::Utc;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
pub use hyper::Uri;
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use salvage_journal::HistoryChange;
use salvage_recovery::classify::{classify, FailureInput};
use salvage_recovery::session::SessionState;
use salvage_types::capture::Failure;
use salvage_types::event::EventBody;
use salvage_types::{history_weight, Config};
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::net::TcpListener;

/// What the proxy was asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    /// The upstream base URL (`https://api.anthropic.com`, `http://127.0.0.1:9000/prefix`).
    pub upstream: Uri,
    /// The API of every request (else from its path).
    pub api: Option<Api>,
    /// Recover recoverable failures and retry.
    pub recover: bool,
    /// The `CHATCLI_*` configuration (attempts, keep, tool budget).
    pub config: Config,
    /// Extra trusted roots for an HTTPS upstream (DER), besides the bundled ones.
    pub extra_roots: Vec<Vec<u8>>,
    /// Request bodies larger than this are refused with 413 by the proxy itself.
    pub max_request_bytes: usize,
    /// The `CHATCLI_*` settings as given (recorded by the engine with a recovery).
    pub settings: std::collections::BTreeMap<String, String>,
}

/// Why the proxy could not start or relay.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The upstream URL is not usable.
    #[error("--upstream {0}: {1}")]
    Upstream(String, String),
    /// A certificate was refused.
    #[error("--upstream-ca: {0}")]
    Certificate(String),
    /// Listening failed.
    #[error("listen: {0}")]
    Listen(std::io::Error),
    /// The upstream failed at the transport level; the client's connection is dropped like the
    /// upstream's was.
    #[error("upstream transport: {0}")]
    Transport(String),
}

/// The body the proxy answers with.
pub type ProxyBody = BoxBody<Bytes, hyper::Error>;

type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Outgoing>;

struct State {
    options: Options,
    client: HttpsClient,
    writer: Option<Writer>,
    sessions: Mutex<HashMap<String, SessionState>>,
    log: Box<dyn Fn(&str) + Send + Sync>,
}

/// A proxy ready to serve.
#[derive(Clone)]
pub struct Proxy {
    state: Arc<State>,
}

/// The hop-by-hop headers (RFC 9110 section 7.6.1), never relayed.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(hyper::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|s| s.trim().to_ascii_lowercase()).collect::<Vec<_>>())
        .filter_map(|s| HeaderName::from_bytes(s.as_bytes()).ok())
        .collect();
    for n in named {
        headers.remove(n);
    }
    for h in HOP_BY_HOP {
        headers.remove(*h);
    }
}

/// The TLS client configuration: the bundled web roots plus `extra` (DER certificates).
pub fn tls_config(extra: &[Vec<u8>]) -> Result<rustls::ClientConfig, ProxyError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    for der in extra {
        roots
            .add(rustls::pki_types::CertificateDer::from(der.clone()))
            .map_err(|e| ProxyError::Certificate(e.to_string()))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ProxyError::Certificate(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// Reads the certificates of a PEM file (for `--upstream-ca`), as DER.
pub fn read_pem_certificates(pem: &[u8]) -> Result<Vec<Vec<u8>>, ProxyError> {
    use rustls::pki_types::pem::PemObject;
    let certs: Result<Vec<_>, _> = rustls::pki_types::CertificateDer::pem_slice_iter(pem).collect();
    let certs = certs.map_err(|e| ProxyError::Certificate(format!("not a PEM certificate file: {e}")))?;
    if certs.is_empty() {
        return Err(ProxyError::Certificate("no certificate in the file".into()));
    }
    Ok(certs.into_iter().map(|c| c.as_ref().to_vec()).collect())
}

/// The text of an error and its sources (`client error (SendRequest): connection reset by peer`).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut parts = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(s) = cur {
        let t = s.to_string();
        if !parts.iter().any(|p| p.contains(&t)) {
            parts.push(t);
        }
        cur = s.source();
    }
    parts.join(": ")
}

impl Proxy {
    /// Builds the proxy; `writer` journals turns (none: relay only); `log` receives one line per
    /// notable event (a failure, a recovery).
    pub fn new(
        options: Options,
        writer: Option<Writer>,
        log: Box<dyn Fn(&str) + Send + Sync>,
    ) -> Result<Proxy, ProxyError> {
        let up = &options.upstream;
        let scheme = up.scheme_str().unwrap_or("");
        if scheme != "http" && scheme != "https" || up.authority().is_none() {
            return Err(ProxyError::Upstream(
                up.to_string(),
                "expected http://HOST[:PORT] or https://…".into(),
            ));
        }
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        http.enforce_http(false);
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls_config(&options.extra_roots)?)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let client = Client::builder(TokioExecutor::new()).build(https);
        Ok(Proxy {
            state: Arc::new(State { options, client, writer, sessions: Mutex::new(HashMap::new()), log }),
        })
    }

    /// Serves connections from `listener` until the future is dropped.
    pub async fn serve(self, listener: TcpListener) -> Result<(), ProxyError> {
        loop {
            let (stream, _) = listener.accept().await.map_err(ProxyError::Listen)?;
            let _ = stream.set_nodelay(true);
            let st = self.state.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| handle(st.clone(), req));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    }

    /// Waits until every finished turn is journaled.
    pub fn flush(&self) {
        if let Some(w) = &self.state.writer {
            w.flush();
        }
    }
}

fn full(b: Bytes) -> ProxyBody {
    Full::new(b).map_err(|never| match never {}).boxed()
}

fn upstream_uri(base: &Uri, req: &Uri) -> Result<Uri, ProxyError> {
    let prefix = base.path().trim_end_matches('/');
    let pq = req.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let s = format!(
        "{}://{}{}{}",
        base.scheme_str().unwrap_or("http"),
        base.authority().map(|a| a.as_str()).unwrap_or(""),
        prefix,
        pq
    );
    s.parse().map_err(|e: hyper::http::uri::InvalidUri| ProxyError::Upstream(s.clone(), e.to_string()))
}

fn plain(status: StatusCode, text: &str) -> Response<ProxyBody> {
    let mut r = Response::new(full(Bytes::from(text.to_string())));
    *r.status_mut() = status;
    r
}

async fn send(
    st: &State,
    method: &hyper::Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: Outgoing,
) -> Result<Response<Incoming>, String> {
    let mut req = Request::new(body);
    *req.method_mut() = method.clone();
    *req.uri_mut() = uri.clone();
    *req.headers_mut() = headers.clone();
    st.client.request(req).await.map_err(|e| error_chain(&e))
}

/// The proxy's own answer to a request body it could not relay: 413 over the cap, 400 when the
/// client's connection failed while sending it.
fn refused(e: &BodyError) -> Response<ProxyBody> {
    let status = match e {
        BodyError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
        BodyError::Client(_) | BodyError::Unfinished => StatusCode::BAD_REQUEST,
    };
    plain(status, &format!("salvage proxy: request body: {e}"))
}

async fn handle(st: Arc<State>, req: Request<Incoming>) -> Result<Response<ProxyBody>, ProxyError> {
    let started = Utc::now();
    let (parts, incoming) = req.into_parts();
    let max = st.options.max_request_bytes;
    if incoming.size_hint().lower() > max as u64 {
        return Ok(refused(&BodyError::TooLarge(max)));
    }
    let uri = upstream_uri(&st.options.upstream, &parts.uri)?;
    let mut headers = parts.headers.clone();
    strip_hop_by_hop(&mut headers);
    headers.remove(hyper::header::HOST);
    headers.remove(hyper::header::CONTENT_LENGTH);
    let session_header = headers.remove(SESSION_HEADER).and_then(|v| v.to_str().ok().map(str::to_string));
    let api = if parts.method == hyper::Method::POST {
        st.options.api.or_else(|| Api::from_path(parts.uri.path()))
    } else {
        None
    };
    let turn_of = api.zip(st.writer.clone());
    if let Some((_, w)) = &turn_of {
        // A journal that fell behind holds new turns back rather than queueing without bound.
        w.not_full().await;
    }
    // The body goes upstream as it arrives; a turn keeps its frames for the journal.
    let (spool, body) = Spool::new(incoming, max, turn_of.is_some());
    let Some((api, writer)) = turn_of else {
        // Not a turn (or no journal): relayed as it is.
        return match send(&st, &parts.method, &uri, &headers, Outgoing::Relayed(spool)).await {
            Ok(resp) => Ok(relay(resp, None)),
            Err(e) => match body.failure() {
                Some(b) => Ok(refused(&b)),
                None => Err(ProxyError::Transport(e)),
            },
        };
    };
    let mut spool = Some(spool);
    let mut turn = Turn::relayed(api, body.clone(), started);
    turn.session_header = session_header;
    turn.client = parts
        .headers
        .get(hyper::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .and_then(|ua| ua.split_whitespace().next())
        .map(str::to_string);
    turn.upstream = format!(
        "{}://{}",
        uri.scheme_str().unwrap_or("http"),
        uri.authority().map(|a| a.as_str()).unwrap_or("")
    );
    let mut recovery: Option<Recovery> = None;
    let mut session_key: Option<String> = None;
    // The body of a retry (none: the client's, relayed).
    let mut outgoing: Option<Bytes> = None;
    let mut attempt = 0u32;
    let mut pending: Option<(Rejection, Option<Response<ProxyBody>>)> = None;
    let mut continue_with_engine = false;
    loop {
        // Attempt 0 is completed by the writer from the body (its size) and the parsed history;
        // a retry's record comes from the engine (when it is rejected) or from its request (when
        // it is accepted).
        if recovery.is_none() && pending.is_none() {
            turn.step(
                EventBody::RequestSent {
                    attempt,
                    bytes: 0,
                    estimated_tokens: 0,
                    real_tokens: None,
                    history_digest: String::new(),
                    accepted: false,
                },
                HistoryChange::None,
                Vec::new(),
            );
        }
        let (rejection, passthrough) = match pending.take() {
            Some(p) => p,
            None => {
                let out = match (spool.take(), &outgoing) {
                    (Some(s), None) => Outgoing::Relayed(s),
                    (_, retry) => Outgoing::Whole(retry.clone()),
                };
                let result = send(&st, &parts.method, &uri, &headers, out).await;
                if let Some(e) = body.failure() {
                    // The client's body was over the cap or broke off: nothing was relayed whole.
                    return Ok(refused(&e));
                }
                match result {
                    Ok(resp)
                        if resp.status().is_success()
                            || resp.status().is_informational()
                            || resp.status().is_redirection() =>
                    {
                        let sse = resp
                            .headers()
                            .get(hyper::header::CONTENT_TYPE)
                            .and_then(|v| v.to_str().ok())
                            .is_some_and(|c| c.contains("text/event-stream"));
                        let encoded = resp
                            .headers()
                            .get(hyper::header::CONTENT_ENCODING)
                            .and_then(|v| v.to_str().ok())
                            .is_some_and(|c| !c.eq_ignore_ascii_case("identity"));
                        if !encoded {
                            turn.response = Some(Assembler::new(api, sse));
                        }
                        if let Some(r) = &recovery {
                            let sent = outgoing.as_ref().map_or(0, Bytes::len) as u64;
                            if let Some(e) = r.sent_step(sent) {
                                turn.step(e, HistoryChange::None, Vec::new());
                            }
                            if let (Some(k), Ok(mut m)) = (&session_key, st.sessions.lock()) {
                                m.insert(k.clone(), r.session());
                            }
                        }
                        return Ok(relay(resp, Some(Finish { turn, writer })));
                    }
                    Ok(resp) => {
                        let status = resp.status();
                        let (rparts, rbody) = resp.into_parts();
                        match rbody.collect().await {
                            Ok(b) => {
                                let b = b.to_bytes();
                                let text = String::from_utf8_lossy(&b).into_owned();
                                let size = crate::capture::reported_size(&text);
                                (
                                    Rejection {
                                        status: Some(status.as_u16()),
                                        message: text,
                                        transport: None,
                                        rejected_bytes: size,
                                    },
                                    Some(Response::from_parts(rparts, full(b))),
                                )
                            }
                            Err(e) => {
                                let t = error_chain(&e);
                                (
                                    Rejection {
                                        status: None,
                                        message: t.clone(),
                                        transport: Some(t),
                                        rejected_bytes: None,
                                    },
                                    None,
                                )
                            }
                        }
                    }
                    Err(t) => (
                        Rejection {
                            status: None,
                            message: t.clone(),
                            transport: Some(t),
                            rejected_bytes: None,
                        },
                        None,
                    ),
                }
            }
        };
        // A failure: parse the request (once), classify, journal, capture, maybe recover.
        if turn.parsed.is_none() {
            match body.read_whole(max).await {
                Ok(whole) => match route::parse(api, &whole) {
                    Ok(p) => turn.parsed = Some(p),
                    Err(e) => {
                        (st.log)(&format!("request body not read as a history ({e}); relayed unrecorded"))
                    }
                },
                Err(e) => (st.log)(&format!("request body not read whole ({e}); relayed unrecorded")),
            }
        }
        let Some(parsed) = turn.parsed.clone() else {
            return match passthrough {
                Some(r) => Ok(r),
                None => Err(ProxyError::Transport(rejection.message)),
            };
        };
        if let Some(r) = recovery.as_mut() {
            // The engine classifies and records the rejection of its own request.
            let log = |line: &str| (st.log)(line);
            match r.next(&rejection, &mut turn, &log) {
                Ok(Next::Retry(b)) => {
                    attempt = r.attempts();
                    (st.log)(&format!("attempt {attempt}: retrying with {} bytes", b.len()));
                    outgoing = Some(Bytes::from(b));
                    continue;
                }
                Ok(Next::GiveUp(why)) => (st.log)(&format!("recovery ended: {why}")),
                Err(e) => (st.log)(&format!("recovery failed: {e}")),
            }
            if let (Some(k), Ok(mut m)) = (&session_key, st.sessions.lock()) {
                m.insert(k.clone(), r.session());
            }
            return finish_failure(turn, writer, passthrough, rejection).await;
        }
        let failure = Failure {
            status: rejection.status,
            message: rejection.message.clone(),
            transport: rejection.transport.clone(),
            rejected_request_bytes: rejection.rejected_bytes,
        };
        let input = FailureInput::new(failure, history_weight(&parsed.history));
        let c = classify(&input);
        if turn.failure.is_none() {
            turn.failure = Some((input.failure, c.class));
        }
        let what = rejection.status.map(|s| format!("HTTP {s}")).unwrap_or_else(|| rejection.message.clone());
        (st.log)(&format!(
            "attempt {attempt}: {what} → {} ({})",
            c.class,
            if c.recoverable { "recoverable" } else { "not recoverable" }
        ));
        if st.options.recover && c.recoverable {
            // The engine takes the turn from here: attempt 0's record is its own.
            turn.steps.pop();
            let key = crate::record::session_id(turn.session_header.as_deref(), &parsed.history);
            let state = st
                .sessions
                .lock()
                .ok()
                .and_then(|m| m.get(&key).cloned())
                .unwrap_or_else(|| SessionState::with_cap(st.options.config.max_payload));
            session_key = Some(key);
            recovery = Some(Recovery::new(
                api,
                parsed.request.clone(),
                parsed.history.clone(),
                st.options.config.clone(),
                state,
                st.options.settings.clone(),
            ));
            continue_with_engine = true;
        } else {
            turn.step(
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
        if continue_with_engine {
            continue_with_engine = false;
            pending = Some((rejection, passthrough));
            continue;
        }
        return finish_failure(turn, writer, passthrough, rejection).await;
    }
}

async fn finish_failure(
    turn: Turn,
    writer: Writer,
    passthrough: Option<Response<ProxyBody>>,
    rejection: Rejection,
) -> Result<Response<ProxyBody>, ProxyError> {
    writer.send(turn).await;
    match passthrough {
        Some(r) => {
            let (mut p, b) = r.into_parts();
            strip_hop_by_hop(&mut p.headers);
            Ok(Response::from_parts(p, b))
        }
        None => Err(ProxyError::Transport(rejection.message)),
    }
}

/// What to do when a relayed response ends.
struct Finish {
    turn: Turn,
    writer: Writer,
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

fn relay(resp: Response<Incoming>, finish: Option<Finish>) -> Response<ProxyBody> {
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

/// The `HeaderValue` of a session id (for clients and tests that set it).
pub fn session_header_value(id: &str) -> Option<HeaderValue> {
    HeaderValue::from_str(id).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_paths_join() {
        let base: Uri = "https://example.invalid/api/".parse().expect("uri");
        let req: Uri = "/v1/messages?beta=true".parse().expect("uri");
        assert_eq!(
            upstream_uri(&base, &req).expect("joins").to_string(),
            "https://example.invalid/api/v1/messages?beta=true"
        );
    }

    #[test]
    fn hop_by_hop_headers_are_dropped() {
        let mut h = HeaderMap::new();
        h.insert("connection", HeaderValue::from_static("keep-alive, x-foo"));
        h.insert("x-foo", HeaderValue::from_static("1"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert("x-api-key", HeaderValue::from_static("k"));
        strip_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key("x-api-key"));
    }
}
