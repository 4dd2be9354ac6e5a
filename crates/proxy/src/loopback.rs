//! A provider stand-in on 127.0.0.1 for tests and benchmarks: answers Anthropic Messages, OpenAI
//! chat and Responses requests (JSON or SSE, deterministic from the request), enforces a body cap
//! and rejects over it as real gateways and providers do, selected per request by the
//! `x-test-mode` header: `413` (nginx's HTML page), `overflow` (Anthropic's `prompt is too long`
//! JSON), `waf` (an HTML block page with 403), `reset` (the connection is reset). Optionally over
//! TLS. Also a minimal HTTP/1.1 client for the benchmark. Never binds anything but loopback.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use tokio::io::{
    AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader as TokioBufReader,
};
use tokio::net::TcpListener;

/// nginx's 413 page, byte for byte.
pub const NGINX_413: &str = "<html>\r\n<head><title>413 Request Entity Too Large</title></head>\r\n<body>\r\n<center><h1>413 Request Entity Too Large</h1></center>\r\n<hr><center>nginx/1.24.0</center>\r\n</body>\r\n</html>\r\n";

/// A corporate WAF's block page.
pub const WAF_PAGE: &str = "<!DOCTYPE html>\n<html><head><title>Access Denied</title></head><body><h1>Request blocked</h1><p>This request was blocked by the security policy of your organisation's web application firewall.</p></body></html>\n";

/// What the upstream saw: the body size of every request, in order.
#[derive(Debug, Clone, Default)]
pub struct Seen(Arc<Mutex<Vec<usize>>>);

impl Seen {
    /// The body sizes so far.
    pub fn sizes(&self) -> Vec<usize> {
        self.0.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

/// A running loopback upstream.
pub struct Upstream {
    /// Its address (127.0.0.1).
    pub addr: SocketAddr,
    /// What it saw.
    pub seen: Seen,
}

/// Starts an upstream on 127.0.0.1 (a free port) on the current tokio runtime; bodies over `cap`
/// bytes are rejected in the request's mode. With `tls`, it speaks HTTPS.
pub async fn start(cap: usize, tls: Option<Arc<rustls::ServerConfig>>) -> std::io::Result<Upstream> {
    let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    let seen = Seen::default();
    let s = seen.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            let seen = s.clone();
            let tls = tls.clone();
            tokio::spawn(async move {
                match tls {
                    None => serve_plain(stream, cap, seen).await,
                    Some(cfg) => {
                        if let Ok(tls) = tokio_rustls::TlsAcceptor::from(cfg).accept(stream).await {
                            let _ = serve(tls, cap, seen, None).await;
                        }
                    }
                }
            });
        }
    });
    Ok(Upstream { addr, seen })
}

async fn serve_plain(stream: tokio::net::TcpStream, cap: usize, seen: Seen) {
    // Keep a handle to set SO_LINGER 0 for a reset.
    let std = stream.into_std().ok();
    let Some(std) = std else { return };
    let Ok(clone) = std.try_clone() else { return };
    let Ok(stream) = tokio::net::TcpStream::from_std(std) else { return };
    // On a reset the stream and its clone are dropped here with SO_LINGER 0: the peer gets RST.
    let _ = serve(stream, cap, seen, Some(&clone)).await;
}

fn socket_linger_zero(s: &std::net::TcpStream) {
    // SO_LINGER 0 makes close() send RST; tokio exposes it on its own stream type.
    if let Ok(c) = s.try_clone() {
        let _ = c.set_nonblocking(true);
        if let Ok(t) = tokio::net::TcpStream::from_std(c) {
            #[allow(deprecated)]
            let _ = t.set_linger(Some(std::time::Duration::ZERO));
        }
    }
}

struct Reset;

/// One request as the stand-in reads it.
struct Asked {
    path: String,
    /// The body's length.
    len: usize,
    /// `x-test-mode` (`ok` when absent).
    mode: String,
    /// `x-test-stream-bytes`: the length of a long streamed answer.
    stream_bytes: usize,
    /// The body asks for a stream.
    stream: bool,
}

/// Reads the next request (none: the connection ended).
async fn read_request<R: AsyncBufReadExt + Unpin>(r: &mut R) -> Option<Asked> {
    let mut asked = Asked { path: String::new(), len: 0, mode: "ok".into(), stream_bytes: 0, stream: false };
    let mut first = true;
    loop {
        let mut line = String::new();
        match r.read_line(&mut line).await {
            Ok(0) | Err(_) => return None,
            Ok(_) => {}
        }
        if line == "\r\n" || line == "\n" {
            break;
        }
        let lower = line.to_ascii_lowercase();
        if first {
            asked.path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
            first = false;
        }
        if let Some(v) = lower.strip_prefix("content-length:") {
            asked.len = v.trim().parse().unwrap_or(0);
        }
        if let Some(v) = lower.strip_prefix("x-test-stream-bytes:") {
            asked.stream_bytes = v.trim().parse().unwrap_or(0);
        }
        if let Some(v) = lower.strip_prefix("x-test-mode:") {
            asked.mode = v.trim().to_string();
        }
    }
    let mut body = vec![0u8; asked.len];
    r.read_exact(&mut body).await.ok()?;
    asked.stream = body.windows(13).any(|w| w == b"\"stream\":true" || w == b"\"stream\": tru");
    Some(asked)
}

async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    stream: S,
    cap: usize,
    seen: Seen,
    plain: Option<&std::net::TcpStream>,
) -> Result<(), Reset> {
    let mut r = TokioBufReader::new(stream);
    while let Some(asked) = read_request(&mut r).await {
        if let Ok(mut v) = seen.0.lock() {
            v.push(asked.len);
        }
        let w = r.get_mut();
        if asked.len > cap {
            reject(w, &asked, cap, plain).await?;
            continue;
        }
        let p = asked.path.split('?').next().unwrap_or("");
        if p.ends_with("/messages") {
            answer_messages(w, &asked).await?;
        } else if p.ends_with("/chat/completions") {
            answer_chat(w, &asked).await?;
        } else if p.ends_with("/responses") {
            answer_responses(w, &asked).await?;
        } else {
            respond(w, 404, "application/json", b"{\"error\":\"not found\"}").await?;
        }
    }
    Ok(())
}

/// A body over the cap, rejected in the request's mode.
async fn reject<W: AsyncWrite + Unpin>(
    w: &mut W,
    asked: &Asked,
    cap: usize,
    plain: Option<&std::net::TcpStream>,
) -> Result<(), Reset> {
    match asked.mode.as_str() {
        "reset" if plain.is_some() => {
            if let Some(s) = plain {
                socket_linger_zero(s);
            }
            Err(Reset)
        }
        "overflow" => {
            let msg = format!("{{\"type\":\"error\",\"error\":{{\"type\":\"invalid_request_error\",\"message\":\"prompt is too long: {} tokens > {} maximum\"}},\"request_id\":\"req_loopback\"}}", asked.len / 4, cap / 4);
            respond(w, 400, "application/json", msg.as_bytes()).await
        }
        "waf" => respond(w, 403, "text/html", WAF_PAGE.as_bytes()).await,
        _ => respond(w, 413, "text/html", NGINX_413.as_bytes()).await,
    }
}

/// An Anthropic Messages answer: JSON, a short stream, or a long one (`x-test-stream-bytes`).
async fn answer_messages<W: AsyncWrite + Unpin>(w: &mut W, asked: &Asked) -> Result<(), Reset> {
    let len = asked.len;
    if asked.stream && asked.stream_bytes > 0 {
        // A long answer: about `stream_bytes` of text in 1 KB deltas, written as made (the
        // stand-in holds one event at a time, so it weighs nothing in a memory figure).
        let delta = "x".repeat(1000);
        let start = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n".to_string();
        let deltas = (0..asked.stream_bytes / 1000).map(|_| format!("event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"{delta}\"}}}}\n\n"));
        let end = "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":6}}\n\n".to_string();
        sse(w, std::iter::once(start).chain(deltas).chain(std::iter::once(end))).await
    } else if asked.stream {
        let events = [
            format!("event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{{\"input_tokens\":{},\"output_tokens\":1}}}}}}\n\n", len / 4),
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n".to_string(),
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Done: \"}}\n\n".to_string(),
            format!("event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"{len} bytes received.\"}}}}\n\n"),
            "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n".to_string(),
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":6}}\n\n".to_string(),
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n".to_string(),
        ];
        sse(w, events).await
    } else {
        let text = format!("Done: {len} bytes received.");
        let b = format!("{{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[{{\"type\":\"text\",\"text\":\"{text}\"}}],\"stop_reason\":\"end_turn\",\"stop_sequence\":null,\"usage\":{{\"input_tokens\":{},\"output_tokens\":6}}}}", len / 4);
        respond(w, 200, "application/json", b.as_bytes()).await
    }
}

/// An OpenAI chat completions answer, JSON or streamed.
async fn answer_chat<W: AsyncWrite + Unpin>(w: &mut W, asked: &Asked) -> Result<(), Reset> {
    let len = asked.len;
    if asked.stream {
        let events = [
            "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Done: \"},\"finish_reason\":null}]}\n\n".to_string(),
            format!("data: {{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"gpt-4o\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{len} bytes received.\"}},\"finish_reason\":\"stop\"}}]}}\n\n"),
            "data: [DONE]\n\n".to_string(),
        ];
        sse(w, events).await
    } else {
        let text = format!("Done: {len} bytes received.");
        let b = format!("{{\"id\":\"c1\",\"object\":\"chat.completion\",\"created\":0,\"model\":\"gpt-4o\",\"choices\":[{{\"index\":0,\"message\":{{\"role\":\"assistant\",\"content\":\"{text}\"}},\"finish_reason\":\"stop\"}}],\"usage\":{{\"prompt_tokens\":{},\"completion_tokens\":6,\"total_tokens\":{}}}}}", len / 4, (len / 4).saturating_add(6));
        respond(w, 200, "application/json", b.as_bytes()).await
    }
}

/// An OpenAI Responses answer, JSON or streamed.
async fn answer_responses<W: AsyncWrite + Unpin>(w: &mut W, asked: &Asked) -> Result<(), Reset> {
    let len = asked.len;
    let text = format!("Done: {len} bytes received.");
    let obj = format!("{{\"id\":\"resp_1\",\"object\":\"response\",\"created_at\":0,\"status\":\"completed\",\"model\":\"gpt-4o\",\"output\":[{{\"type\":\"message\",\"id\":\"m1\",\"status\":\"completed\",\"role\":\"assistant\",\"content\":[{{\"type\":\"output_text\",\"text\":\"{text}\",\"annotations\":[]}}]}}],\"parallel_tool_calls\":true,\"tool_choice\":\"auto\",\"tools\":[],\"usage\":{{\"input_tokens\":{},\"output_tokens\":6,\"total_tokens\":{}}}}}", len / 4, (len / 4).saturating_add(6));
    if asked.stream {
        let events = [
            "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"m1\",\"output_index\":0,\"content_index\":0,\"delta\":\"Done: \",\"sequence_number\":1}\n\n".to_string(),
            format!("event: response.output_text.delta\ndata: {{\"type\":\"response.output_text.delta\",\"item_id\":\"m1\",\"output_index\":0,\"content_index\":0,\"delta\":\"{len} bytes received.\",\"sequence_number\":2}}\n\n"),
            format!("event: response.completed\ndata: {{\"type\":\"response.completed\",\"sequence_number\":3,\"response\":{obj}}}\n\n"),
        ];
        sse(w, events).await
    } else {
        respond(w, 200, "application/json", obj.as_bytes()).await
    }
}

async fn respond<W: AsyncWrite + Unpin>(
    w: &mut W,
    status: u16,
    ctype: &str,
    body: &[u8],
) -> Result<(), Reset> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        413 => "Request Entity Too Large",
        _ => "",
    };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\nx-request-id: req_loopback\r\n\r\n",
        body.len()
    );
    let mut out = head.into_bytes();
    out.extend_from_slice(body);
    w.write_all(&out).await.map_err(|_| Reset)?;
    w.flush().await.map_err(|_| Reset)
}

async fn sse<W: AsyncWrite + Unpin>(
    w: &mut W,
    events: impl IntoIterator<Item = String>,
) -> Result<(), Reset> {
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\ncache-control: no-cache\r\n\r\n";
    w.write_all(head.as_bytes()).await.map_err(|_| Reset)?;
    for e in events {
        w.write_all(format!("{:x}\r\n{e}\r\n", e.len()).as_bytes()).await.map_err(|_| Reset)?;
        w.flush().await.map_err(|_| Reset)?;
    }
    w.write_all(b"0\r\n\r\n").await.map_err(|_| Reset)?;
    w.flush().await.map_err(|_| Reset)
}

/// One HTTP/1.1 exchange on a kept-alive connection (for the benchmark): sends a POST and reads
/// the whole response (content-length or chunked), returning the status and body.
pub fn exchange(
    conn: &mut BufReader<TcpStream>,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<(u16, Vec<u8>)> {
    let mut out = Vec::new();
    let status = exchange_into(conn, path, headers, body, &mut |b| out.extend_from_slice(b))?;
    Ok((status, out))
}

/// Like [`exchange`], handing the response body to `sink` piece by piece instead of keeping it.
pub fn exchange_into(
    conn: &mut BufReader<TcpStream>,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    sink: &mut dyn FnMut(&[u8]),
) -> std::io::Result<u16> {
    let mut req = format!(
        "POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    let s = conn.get_mut();
    s.write_all(req.as_bytes())?;
    s.write_all(body)?;
    let mut line = String::new();
    conn.read_line(&mut line)?;
    let status: u16 = line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let (mut len, mut chunked) = (None, false);
    loop {
        let mut h = String::new();
        if conn.read_line(&mut h)? == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "closed in the headers"));
        }
        if h == "\r\n" {
            break;
        }
        let l = h.to_ascii_lowercase();
        if let Some(v) = l.strip_prefix("content-length:") {
            len = v.trim().parse::<usize>().ok();
        }
        if l.starts_with("transfer-encoding:") && l.contains("chunked") {
            chunked = true;
        }
    }
    let mut buf = vec![0u8; 64 * 1024];
    let mut copy = |conn: &mut BufReader<TcpStream>, mut n: usize| -> std::io::Result<()> {
        while n > 0 {
            let k = n.min(buf.len());
            let part = buf.get_mut(..k).unwrap_or_default();
            conn.read_exact(part)?;
            sink(part);
            n = n.saturating_sub(k);
        }
        Ok(())
    };
    if chunked {
        loop {
            let mut size = String::new();
            conn.read_line(&mut size)?;
            let n = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16).unwrap_or(0);
            copy(conn, n)?;
            let mut crlf = [0u8; 2];
            conn.read_exact(&mut crlf)?;
            if n == 0 {
                break;
            }
        }
    } else if let Some(n) = len {
        copy(conn, n)?;
    }
    Ok(status)
}
