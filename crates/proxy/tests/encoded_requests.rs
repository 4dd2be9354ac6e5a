//! Request bodies the client content-encodes (the Codex CLI sends its Responses requests
//! zstd-compressed with `content-encoding: zstd`): relayed as they are, read decoded for the
//! journal, the classifier and recovery, and a retry the proxy builds goes out as plain JSON
//! without the client's `content-encoding`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use salvage_journal::Journal;
use salvage_proxy::loopback;
use salvage_proxy::record::{Writer, WriterOptions};
use salvage_proxy::{Options, Proxy};
use std::io::BufReader;
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

/// What the upstream received: each request's `content-encoding` and body.
type Received = Arc<Mutex<Vec<(Option<String>, Vec<u8>)>>>;

/// An upstream rejecting a body over `cap` bytes as nginx does, answering the others with a
/// Responses JSON body; it records what it received.
async fn upstream(cap: usize, received: Received) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            let received = received.clone();
            tokio::spawn(async move {
                let mut r = tokio::io::BufReader::new(s);
                let (mut len, mut coding) = (0usize, None);
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).await.unwrap_or(0) == 0 {
                        return;
                    }
                    let lower = line.to_ascii_lowercase();
                    if let Some(v) = lower.strip_prefix("content-length:") {
                        len = v.trim().parse().expect("length");
                    }
                    if let Some(v) = lower.strip_prefix("content-encoding:") {
                        coding = Some(v.trim().to_string());
                    }
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0u8; len];
                r.read_exact(&mut body).await.expect("body");
                received.lock().expect("lock").push((coding, body));
                let out = if len > cap {
                    format!("HTTP/1.1 413 Request Entity Too Large\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{}", loopback::NGINX_413.len(), loopback::NGINX_413)
                } else {
                    let a = r#"{"id":"resp_1","status":"completed","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"done"}]}],"usage":{"input_tokens":7,"output_tokens":1}}"#;
                    format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{a}", a.len())
                };
                r.get_mut().write_all(out.as_bytes()).await.expect("answer");
                let _ = r.get_mut().shutdown().await;
            });
        }
    });
    addr
}

/// A Responses request of 30 turns of about 4 KB each, zstd-compressed (the body is text that
/// does not repeat, so it stays larger than the cap compressed).
fn compressed_conversation() -> (Vec<u8>, Vec<u8>) {
    let mut seed = 7u64;
    let mut words = |n: usize| -> String {
        (0..n)
            .map(|_| {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                format!("{:x}", seed >> 40)
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut input: Vec<serde_json::Value> = (0..30)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            serde_json::json!({"role": role, "content": format!("turn {i}: {}", words(600))})
        })
        .collect();
    input.push(serde_json::json!({"role": "user", "content": "TASK: compressed request"}));
    let plain = serde_json::to_vec(
        &serde_json::json!({"model": "gpt-5", "instructions": "be brief", "input": input}),
    )
    .expect("json");
    let zstd = zstd::encode_all(plain.as_slice(), 3).expect("zstd");
    (plain, zstd)
}

fn proxy(
    rt: &tokio::runtime::Runtime,
    up: SocketAddr,
    recover: bool,
    db: &std::path::Path,
) -> (Proxy, SocketAddr) {
    let writer = Writer::start(
        Journal::open(db, &Default::default()).expect("journal"),
        WriterOptions { captures: None, settings: Default::default(), keep: None },
        Box::new(|_| {}),
    )
    .expect("writer");
    let options = Options {
        recover,
        max_request_bytes: 1 << 24,
        ..Options::new(format!("http://{up}").parse().expect("uri"))
    };
    let proxy = Proxy::new(options, Some(writer), Box::new(|_| {})).expect("proxy");
    let listener = rt.block_on(tokio::net::TcpListener::bind(("127.0.0.1", 0))).expect("bind");
    let addr = listener.local_addr().expect("addr");
    rt.spawn(proxy.clone().serve(listener));
    (proxy, addr)
}

#[test]
fn a_compressed_request_is_relayed_as_it_is_journaled_decoded_and_recovered_in_plain_json() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("rt");
    let (plain, zstd) = compressed_conversation();
    let cap = zstd.len() - 1;
    let received = Received::default();
    let up = rt.block_on(upstream(cap, received.clone()));
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("j.db");
    let (proxy, addr) = proxy(&rt, up, true, &db);
    let mut c = BufReader::new(TcpStream::connect(addr).expect("connect"));
    let (status, text) = loopback::exchange(
        &mut c,
        "/v1/responses",
        &[("content-encoding", "zstd"), ("x-salvage-session", "codex")],
        &zstd,
    )
    .expect("exchange");
    assert_eq!(status, 200, "recovered: {}", String::from_utf8_lossy(&text));
    let got = received.lock().expect("lock").clone();
    assert_eq!(
        got.first(),
        Some(&(Some("zstd".to_string()), zstd.clone())),
        "attempt 0 is the client's bytes"
    );
    let (coding, retry) = got.last().expect("a retry");
    assert_eq!(coding, &None, "a retry is plain JSON");
    let retry: serde_json::Value = serde_json::from_slice(retry).expect("the retry is JSON");
    assert_eq!(retry["instructions"], "be brief");
    // An accepted compressed request (read by the journal writer, not on the request path).
    let small =
        serde_json::to_vec(&serde_json::json!({"model": "gpt-5", "input": "a small compressed task"}))
            .expect("json");
    let mut c = BufReader::new(TcpStream::connect(addr).expect("connect"));
    let headers = [("content-encoding", "zstd"), ("x-salvage-session", "codex-ok")];
    let (status, _) = loopback::exchange(
        &mut c,
        "/v1/responses",
        &headers,
        &zstd::encode_all(small.as_slice(), 3).expect("zstd"),
    )
    .expect("exchange");
    assert_eq!(status, 200);
    // The journal holds the conversations as the client sent them, decoded.
    proxy.flush();
    let j = Journal::open(&db, &Default::default()).expect("reopen");
    let first = j.view_at("codex", 1).expect("the session's start").history;
    let sent: serde_json::Value = serde_json::from_slice(&plain).expect("json");
    assert_eq!(first.len(), 32, "{first:?}");
    assert_eq!(first.last().map(|m| m.content.as_str()), sent["input"][30]["content"].as_str());
    let ok = j.head("codex-ok").expect("the accepted turn is journaled").history;
    let contents: Vec<&str> = ok.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(contents, ["a small compressed task", "done"]);
}
