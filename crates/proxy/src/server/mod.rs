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
    /// The recovery state of each session the proxy recovered in (cap, notice, budget).
    sessions: Mutex<HashMap<String, SessionState>>,
    log: Box<dyn Fn(&str) + Send + Sync>,
}

impl State {
    /// Keeps the recovery state a session ended a turn with.
    fn remember(&self, key: &str, session: SessionState) {
        if let Ok(mut m) = self.sessions.lock() {
            m.insert(key.to_string(), session);
        }
    }

    /// The recovery state of a session (a new one: the configured cap).
    fn recalled(&self, key: &str) -> SessionState {
        self.sessions
            .lock()
            .ok()
            .and_then(|m| m.get(key).cloned())
            .unwrap_or_else(|| SessionState::with_cap(self.options.config.max_payload))
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
        Ok(Proxy {
            state: Arc::new(State { options, client, writer, sessions: Mutex::new(HashMap::new()), log }),
        })
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

    /// Waits until every finished turn is journaled.
    pub fn flush(&self) {
        if let Some(w) = &self.state.writer {
            w.flush();
        }
    }
}
