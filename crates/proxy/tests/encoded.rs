//! Responses the upstream content-encodes (as provider CDNs do for a client that accepts gzip, br
//! or zstd): the client gets the encoded bytes unchanged, and the proxy reads a decoded copy, so
//! the turn is journaled as accepted with its reply, and an encoded rejection is classified.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use salvage_journal::Journal;
use salvage_proxy::loopback;
use salvage_proxy::record::{Writer, WriterOptions};
use salvage_proxy::{Options, Proxy};
use salvage_types::event::EventBody;
use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

fn gzip(b: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(b).expect("gzip");
    e.finish().expect("gzip")
}

const REPLY: &str = r#"{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"the answer, decoded"}],"stop_reason":"end_turn","usage":{"input_tokens":21,"output_tokens":4}}"#;
const OVERFLOW: &str = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 250000 tokens > 200000 maximum"}}"#;

fn sse() -> String {
    let events = [
        r#"{"type":"message_start","message":{"usage":{"input_tokens":33,"output_tokens":1}}}"#,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"streamed, "}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"decoded"}}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}"#,
    ];
    events.iter().map(|e| format!("data: {e}\n\n")).collect()
}

/// The response of each mode: status, content type, gzip-encoded body.
fn answer(mode: &str) -> (u16, &'static str, Vec<u8>) {
    match mode {
        "json" => (200, "application/json", gzip(REPLY.as_bytes())),
        "sse" => (200, "text/event-stream", gzip(sse().as_bytes())),
        _ => (400, "application/json", gzip(OVERFLOW.as_bytes())),
    }
}

/// An upstream answering every request with the gzip-encoded response of its `x-test-mode`.
async fn upstream() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut r = tokio::io::BufReader::new(s);
                loop {
                    let (mut len, mut mode) = (0usize, String::new());
                    loop {
                        let mut line = String::new();
                        if r.read_line(&mut line).await.unwrap_or(0) == 0 {
                            return;
                        }
                        let lower = line.to_ascii_lowercase();
                        if let Some(v) = lower.strip_prefix("content-length:") {
                            len = v.trim().parse().expect("length");
                        }
                        if let Some(v) = lower.strip_prefix("x-test-mode:") {
                            mode = v.trim().to_string();
                        }
                        if line == "\r\n" {
                            break;
                        }
                    }
                    let mut body = vec![0u8; len];
                    r.read_exact(&mut body).await.expect("body");
                    let (status, kind, b) = answer(&mode);
                    let head = format!("HTTP/1.1 {status} X\r\ncontent-type: {kind}\r\ncontent-encoding: gzip\r\ncontent-length: {}\r\n\r\n", b.len());
                    r.get_mut().write_all(head.as_bytes()).await.expect("head");
                    r.get_mut().write_all(&b).await.expect("body");
                }
            });
        }
    });
    addr
}

#[test]
fn encoded_answers_reach_the_client_unchanged_and_are_journaled_decoded() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("rt");
    let up = rt.block_on(upstream());
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("j.db");
    let writer = Writer::start(
        Journal::open(&db, &Default::default()).expect("journal"),
        WriterOptions { captures: None, settings: Default::default(), keep: None },
        Box::new(|_| {}),
    )
    .expect("writer");
    let options =
        Options { max_request_bytes: 1 << 20, ..Options::new(format!("http://{up}").parse().expect("uri")) };
    let proxy = Proxy::new(options, Some(writer), Box::new(|_| {})).expect("proxy");
    let listener = rt.block_on(tokio::net::TcpListener::bind(("127.0.0.1", 0))).expect("bind");
    let addr = listener.local_addr().expect("addr");
    rt.spawn(proxy.clone().serve(listener));
    for mode in ["json", "sse", "overflow"] {
        let body = serde_json::json!({"model": "claude-sonnet-4-5", "max_tokens": 8, "system": "encoded",
            "messages": [{"role": "user", "content": format!("mode {mode}")}]});
        let mut c = BufReader::new(TcpStream::connect(addr).expect("connect"));
        let headers = [("x-test-mode", mode), ("x-salvage-session", mode), ("accept-encoding", "gzip")];
        let (status, got) =
            loopback::exchange(&mut c, "/v1/messages", &headers, &serde_json::to_vec(&body).expect("json"))
                .expect("exchange");
        let (want_status, _, want) = answer(mode);
        assert_eq!((status, got), (want_status, want), "{mode}: the encoded bytes, unchanged");
    }
    proxy.flush();
    let j = Journal::open(&db, &Default::default()).expect("reopen");
    let bodies = |s: &str| -> Vec<EventBody> {
        j.events(s, 0, 100).expect("events").into_iter().map(|e| e.body).collect()
    };
    for (session, text, tokens) in [("json", "the answer, decoded", 21), ("sse", "streamed, decoded", 33)] {
        let events = bodies(session);
        assert!(
            events.iter().any(|e| matches!(e, EventBody::RequestSent { accepted: true, real_tokens: Some(t), .. } if *t == tokens)),
            "{session}: accepted, with the tokens counted: {events:?}"
        );
        let head = j.head(session).expect("head");
        assert_eq!(head.history.last().map(|m| m.content.as_str()), Some(text), "{session}");
    }
    let events = bodies("overflow");
    assert!(
        events.iter().any(|e| matches!(
            e,
            EventBody::ProviderError { class: salvage_types::ErrorClass::ContextOverflow, .. }
        )),
        "an encoded overflow is classified as one: {events:?}"
    );
}
