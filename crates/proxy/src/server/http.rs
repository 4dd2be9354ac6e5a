//! The HTTP plumbing of the proxy: hop-by-hop headers, the upstream URI of a request, sending
//! upstream, error texts, and the proxy's own short answers.

use super::{ProxyBody, ProxyError, State};
use crate::spool::{BodyError, Outgoing};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::{Request, Response, StatusCode, Uri};

/// The hop-by-hop headers (RFC 9110 section 7.6.1), never relayed. `trailer` is not one: it
/// announces the trailer fields of the message, which are relayed.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "transfer-encoding",
    "upgrade",
];

/// Whether a request's `te` accepts trailer fields (the proxy relays them, so it asks the upstream
/// for them in turn).
pub(super) fn accepts_trailers(headers: &HeaderMap) -> bool {
    headers.get_all(hyper::header::TE).iter().filter_map(|v| v.to_str().ok()).any(|v| {
        v.split(',').any(|t| t.split(';').next().is_some_and(|t| t.trim().eq_ignore_ascii_case("trailers")))
    })
}

/// Removes the hop-by-hop headers and those the `connection` header names.
pub(super) fn strip_hop_by_hop(headers: &mut HeaderMap) {
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

/// The text of an error and its sources (`client error (SendRequest): connection reset by peer`).
pub(super) fn error_chain(e: &dyn std::error::Error) -> String {
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

/// A whole body.
pub(super) fn full(b: Bytes) -> ProxyBody {
    Full::new(b).map_err(|never| match never {}).boxed()
}

/// The upstream URI of a request: the upstream's scheme, host and path prefix, the request's path
/// and query.
pub(super) fn upstream_uri(base: &Uri, req: &Uri) -> Result<Uri, ProxyError> {
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

/// Why a request upstream got no response.
#[derive(Debug, Clone)]
pub(super) struct Unanswered {
    /// The error and its causes.
    pub message: String,
    /// No connection to the upstream could be made (refused, DNS, TLS handshake): nothing was
    /// sent, so there is no upstream behaviour to mirror and the proxy answers 502 itself.
    pub connect: bool,
}

/// Sends one request upstream.
pub(super) async fn send(
    st: &State,
    method: &hyper::Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: Outgoing,
) -> Result<Response<Incoming>, Unanswered> {
    let mut req = Request::new(body);
    *req.method_mut() = method.clone();
    *req.uri_mut() = uri.clone();
    *req.headers_mut() = headers.clone();
    st.client.request(req).await.map_err(|e| Unanswered { message: error_chain(&e), connect: e.is_connect() })
}

/// The proxy's answer when the upstream could not be reached: 502 naming where and why.
pub(super) fn unreachable(uri: &Uri, why: &str) -> Response<ProxyBody> {
    let place =
        format!("{}://{}", uri.scheme_str().unwrap_or("http"), uri.authority().map_or("", |a| a.as_str()));
    plain(StatusCode::BAD_GATEWAY, &format!("salvage proxy: upstream {place} unreachable: {why}\n"))
}

/// The proxy's own answer to a request body it could not relay: 413 over the cap, 400 when the
/// client's connection failed while sending it.
pub(super) fn refused(e: &BodyError) -> Response<ProxyBody> {
    let status = match e {
        BodyError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
        BodyError::Client(_) | BodyError::Unfinished => StatusCode::BAD_REQUEST,
        BodyError::OverBudget(over) => return over_budget(over),
    };
    plain(status, &format!("salvage proxy: request body: {e}"))
}

/// The proxy's answer to a request its budget of request bytes in flight has no room for: 503,
/// `retry-after`, and a JSON error (in the shape of the providers' own) naming the budget.
pub(super) fn over_budget(over: &crate::budget::OverBudget) -> Response<ProxyBody> {
    let body = serde_json::json!({
        "type": "error",
        "error": {
            "type": "overloaded_error",
            "message": format!("salvage proxy: {over}; retry later"),
        },
        "budget": {"request_bytes_in_flight": over.total, "wanted": over.wanted},
    });
    let mut r = Response::new(full(Bytes::from(body.to_string())));
    *r.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    let h = r.headers_mut();
    h.insert(hyper::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    h.insert(hyper::header::RETRY_AFTER, HeaderValue::from(crate::budget::RETRY_AFTER_SECS));
    r
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
