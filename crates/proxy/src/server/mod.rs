//! The HTTP side: accept a client request, relay it to the upstream (HTTP or HTTPS) unchanged and
//! as it arrives (its frames kept by reference for the journal, [`crate::spool`]), relay the
//! response frame by frame while a parser reads along, and hand the turn to the writer. On a
//! failure: read the request whole, classify, capture, and with `--recover` climb the ladder and
//! retry.
//!
//! `http.rs` holds the plumbing (headers, URIs, the proxy's own answers), `exchange.rs` one client
//! request from its arrival to its answer, `tee.rs` the relayed response body that hands the turn
//! to the writer when it ends.

mod exchange;
mod http;
mod tee;

use crate::record::Writer;
use bytes::Bytes;
pub use http::session_header_value;
use http_body_util::combinators::BoxBody;
pub use hyper::Uri;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use salvage_recovery::session::SessionState;
use salvage_types::Config;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::net::TcpListener;

/// What the proxy was asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    /// The upstream base URL (`https://api.anthropic.com`, `http://127.0.0.1:9000/prefix`).
    pub upstream: Uri,
    /// The API of every request (else from its path).
    pub api: Option<crate::route::Api>,
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
    /// The bytes of request bodies the proxy keeps at once, across every request in flight
    /// ([`crate::budget`]; `--request-budget`).
    pub request_budget: usize,
    /// How long a request waits for room in that budget before it is answered 503.
    pub budget_wait: std::time::Duration,
}

impl Options {
    /// The defaults for an upstream: relay and record only (no recovery), the path's API, the
    /// default configuration and settings, the bundled roots, 256 MiB bodies and the default
    /// request budget.
    pub fn new(upstream: Uri) -> Options {
        Options {
            upstream,
            api: None,
            recover: false,
            config: Config::from_env(&Default::default()),
            extra_roots: Vec::new(),
            max_request_bytes: crate::decode::MAX_DECODED_REQUEST,
            settings: Default::default(),
            request_budget: crate::budget::DEFAULT_BYTES,
            budget_wait: crate::budget::DEFAULT_WAIT,
        }
    }
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

type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, crate::spool::Outgoing>;

/// What every request of one proxy shares.
struct State {
    options: Options,
    client: HttpsClient,
    writer: Option<Writer>,
    /// The request bytes kept at once.
    budget: crate::budget::Budget,
    /// The recovery state of the sessions the proxy recovered in last (cap, notice, budget).
    sessions: Mutex<Recovered>,
    log: Box<dyn Fn(&str) + Send + Sync>,
}

impl State {
    /// Keeps the recovery state a session ended a turn with.
    fn remember(&self, key: &str, session: SessionState) {
        if let Ok(mut m) = self.sessions.lock() {
            m.remember(key, session);
        }
    }

    /// The recovery state of a session (a new one: the configured cap).
    fn recalled(&self, key: &str) -> SessionState {
        self.sessions
            .lock()
            .ok()
            .and_then(|m| m.recalled(key))
            .unwrap_or_else(|| SessionState::with_cap(self.options.config.max_payload))
    }
}

/// The recovery states the proxy keeps at most: those of the sessions it recovered in last.
pub const RECOVERED_SESSIONS: usize = 1024;

/// The recovery state of the sessions recovered in last, at most [`RECOVERED_SESSIONS`] of them:
/// a session the proxy has not recovered in for that many others starts again from the
/// configured cap, as after a restart (what it learnt is learnt again from its next rejection).
#[derive(Debug, Default)]
struct Recovered {
    /// Each session's state and when it was last remembered.
    states: HashMap<String, (u64, SessionState)>,
    clock: u64,
}

impl Recovered {
    fn remember(&mut self, key: &str, session: SessionState) {
        self.clock = self.clock.saturating_add(1);
        self.states.insert(key.to_string(), (self.clock, session));
        if self.states.len() > RECOVERED_SESSIONS {
            // Down to three quarters, the least recently remembered first (one sort per quarter
            // of the bound, not one per session).
            let mut ages: Vec<u64> = self.states.values().map(|(t, _)| *t).collect();
            ages.sort_unstable();
            let cut = ages.get(RECOVERED_SESSIONS / 4).copied().unwrap_or(0);
            self.states.retain(|_, (t, _)| *t >= cut);
        }
    }

    fn recalled(&self, key: &str) -> Option<SessionState> {
        self.states.get(key).map(|(_, s)| s.clone())
    }

    fn len(&self) -> usize {
        self.states.len()
    }
}

/// A proxy ready to serve.
#[derive(Clone)]
pub struct Proxy {
    state: Arc<State>,
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
        let budget = crate::budget::Budget::new(options.request_budget, options.budget_wait);
        let state = State { options, client, writer, budget, sessions: Mutex::default(), log };
        Ok(Proxy { state: Arc::new(state) })
    }

    /// Serves connections from `listener` until the future is dropped. A failed accept does not
    /// stop the proxy: a connection reset before it was accepted is skipped, and running out of
    /// file descriptors under a burst of connections is logged once and accepting resumes shortly.
    pub async fn serve(self, listener: TcpListener) -> Result<(), ProxyError> {
        let mut failing = false;
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => {
                    failing = false;
                    stream
                }
                Err(e) => {
                    use std::io::ErrorKind::{ConnectionAborted, ConnectionReset, Interrupted};
                    if matches!(e.kind(), ConnectionAborted | ConnectionReset | Interrupted) {
                        // That connection is gone; the next one is accepted at once.
                        continue;
                    }
                    if !failing {
                        (self.state.log)(&format!("accept: {e} (accepting again shortly)"));
                    }
                    failing = true;
                    // Out of descriptors or memory: give the connections being served time to end.
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let st = self.state.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| exchange::handle(st.clone(), req));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    }

    /// The sessions whose recovery state the proxy keeps (at most [`RECOVERED_SESSIONS`]).
    pub fn recovered_sessions(&self) -> usize {
        self.state.sessions.lock().map(|m| m.len()).unwrap_or(0)
    }

    /// The bytes of request bodies the proxy holds now, of its budget ([`Options::request_budget`]).
    pub fn request_bytes_held(&self) -> usize {
        self.state.budget.total().saturating_sub(self.state.budget.available())
    }

    /// Waits until every finished turn is journaled.
    pub fn flush(&self) {
        if let Some(w) = &self.state.writer {
            w.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recovery_states_kept_are_the_latest() {
        let mut r = Recovered::default();
        for i in 0..RECOVERED_SESSIONS * 3 {
            r.remember(&format!("s{i}"), SessionState::with_cap(Some(i as u64)));
            assert!(r.len() <= RECOVERED_SESSIONS);
        }
        let last = RECOVERED_SESSIONS * 3 - 1;
        assert_eq!(r.recalled(&format!("s{last}")).and_then(|s| s.cap), Some(last as u64));
        assert!(r.recalled("s0").is_none());
        // One remembered again is recent again.
        r.remember("s0", SessionState::with_cap(Some(7)));
        for i in 0..RECOVERED_SESSIONS / 2 {
            r.remember(&format!("t{i}"), SessionState::default());
        }
        assert_eq!(r.recalled("s0").and_then(|s| s.cap), Some(7));
    }
}
