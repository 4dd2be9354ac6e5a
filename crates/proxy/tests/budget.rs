//! The budget of request bytes in flight: a request it has no room for is answered 503 with a
//! `retry-after` and a JSON error naming the budget, and the bytes come back once a request ends.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use salvage_journal::Journal;
use salvage_proxy::record::{Writer, WriterOptions};
use salvage_proxy::{Options, Proxy};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

const BUDGET: usize = 100_000;

/// An upstream that says when a request's head has arrived, then reads its body and answers.
fn upstream(rt: &tokio::runtime::Runtime) -> (SocketAddr, mpsc::Receiver<()>) {
    let listener = rt.block_on(tokio::net::TcpListener::bind(("127.0.0.1", 0))).expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (arrived, heads) = mpsc::channel();
    rt.spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            let arrived = arrived.clone();
            tokio::spawn(async move {
                let mut r = tokio::io::BufReader::new(s);
                let (mut len, mut chunked) = (0usize, false);
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).await.unwrap_or(0) == 0 {
                        return;
                    }
                    let lower = line.to_ascii_lowercase();
                    if let Some(v) = lower.strip_prefix("content-length:") {
                        len = v.trim().parse().expect("length");
                    }
                    chunked |= lower.starts_with("transfer-encoding:") && lower.contains("chunked");
                    if line == "\r\n" {
                        break;
                    }
                }
                let _ = arrived.send(());
                if chunked {
                    // To the last chunk (the test's chunks hold no line break).
                    loop {
                        let mut line = String::new();
                        if r.read_line(&mut line).await.unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "0\r\n" {
                            let _ = r.read_line(&mut line).await;
                            break;
                        }
                    }
                } else {
                    let mut body = vec![0u8; len];
                    if r.read_exact(&mut body).await.is_err() {
                        return;
                    }
                }
                let answer = r#"{"id":"m","type":"message","role":"assistant","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}"#;
                let out = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                    answer.len()
                );
                let _ = r.get_mut().write_all(out.as_bytes()).await;
                let _ = r.get_mut().shutdown().await;
            });
        }
    });
    (addr, heads)
}

fn start(rt: &tokio::runtime::Runtime, up: SocketAddr) -> (Proxy, SocketAddr) {
    let options = Options {
        max_request_bytes: 1 << 24,
        request_budget: BUDGET,
        // A request that does not fit is answered at once: the test waits on nothing.
        budget_wait: Duration::ZERO,
        ..Options::new(format!("http://{up}").parse().expect("uri"))
    };
    let writer =
        Writer::start(Journal::in_memory().expect("journal"), WriterOptions::default(), Box::new(|_| {}))
            .expect("writer");
    let proxy = Proxy::new(options, Some(writer), Box::new(|_| {})).expect("proxy");
    let listener = rt.block_on(tokio::net::TcpListener::bind(("127.0.0.1", 0))).expect("bind");
    let addr = listener.local_addr().expect("addr");
    rt.spawn(proxy.clone().serve(listener));
    (proxy, addr)
}

/// An Anthropic Messages body of `size` bytes.
fn body(size: usize) -> Vec<u8> {
    let head = r#"{"model":"m","max_tokens":8,"messages":[{"role":"user","content":""#;
    let tail = r#""}]}"#;
    let mut b = head.as_bytes().to_vec();
    b.resize(size - tail.len(), b'x');
    b.extend_from_slice(tail.as_bytes());
    b
}

/// Reads one response: status, headers (lower-cased names), body.
fn response(c: &mut BufReader<TcpStream>) -> (u16, Vec<(String, String)>, String) {
    let mut line = String::new();
    c.read_line(&mut line).expect("status line");
    let status = line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        c.read_line(&mut h).expect("header");
        if h == "\r\n" || h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let len = headers.iter().find(|(k, _)| k == "content-length").and_then(|(_, v)| v.parse().ok());
    let mut text = String::new();
    match len {
        Some(n) => {
            let mut b = vec![0u8; n];
            c.read_exact(&mut b).expect("body");
            text = String::from_utf8_lossy(&b).into_owned();
        }
        None => {
            let _ = c.read_to_string(&mut text);
        }
    }
    (status, headers, text)
}

fn post(addr: SocketAddr, body: &[u8]) -> (u16, Vec<(String, String)>, String) {
    let mut c = BufReader::new(TcpStream::connect(addr).expect("connect"));
    let head = format!(
        "POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    c.get_mut().write_all(head.as_bytes()).expect("head");
    c.get_mut().write_all(body).expect("body");
    response(&mut c)
}

fn assert_over_budget(status: u16, headers: &[(String, String)], text: &str) {
    assert_eq!(status, 503, "{text}");
    assert!(headers.iter().any(|(k, v)| k == "retry-after" && v.parse::<u64>().is_ok()), "{headers:?}");
    let json: serde_json::Value = serde_json::from_str(text).expect("a JSON error");
    assert_eq!(json["budget"]["request_bytes_in_flight"], BUDGET, "{text}");
    assert!(json["error"]["message"].as_str().is_some_and(|m| m.contains("--request-budget")), "{text}");
}

#[test]
fn a_request_over_the_budget_in_flight_is_a_503_and_the_budget_comes_back() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("rt");
    let (up, heads) = upstream(&rt);
    let (proxy, addr) = start(&rt, up);
    let big = body(80_000);
    // The first request is in flight: its head has reached the upstream, its body not all yet.
    let mut first = BufReader::new(TcpStream::connect(addr).expect("connect"));
    let head = format!(
        "POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        big.len()
    );
    first.get_mut().write_all(head.as_bytes()).expect("head");
    first.get_mut().write_all(&big[..1000]).expect("start of the body");
    heads.recv_timeout(Duration::from_secs(60)).expect("the first request reached the upstream");
    assert_eq!(proxy.request_bytes_held(), big.len());
    // A second as large does not fit beside it.
    let (status, headers, text) = post(addr, &big);
    assert_over_budget(status, &headers, &text);
    // The first is served.
    first.get_mut().write_all(&big[1000..]).expect("rest of the body");
    let (status, _, text) = response(&mut first);
    assert_eq!(status, 200, "{text}");
    // Once it is written, its bytes are back and the next one is served.
    let deadline = Instant::now() + Duration::from_secs(60);
    while proxy.request_bytes_held() > 0 && Instant::now() < deadline {
        proxy.flush();
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(proxy.request_bytes_held(), 0);
    let (status, _, text) = post(addr, &big);
    assert_eq!(status, 200, "{text}");
    // More than the whole budget never fits.
    let (status, headers, text) = post(addr, &body(BUDGET + 1));
    assert_over_budget(status, &headers, &text);
}

#[test]
fn a_body_of_unknown_length_that_outgrows_the_budget_is_a_503() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("rt");
    let (up, _heads) = upstream(&rt);
    let (proxy, addr) = start(&rt, up);
    let mut c = BufReader::new(TcpStream::connect(addr).expect("connect"));
    let big = body(BUDGET * 2);
    let mut req = b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
    for piece in big.chunks(16_384) {
        req.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        req.extend_from_slice(piece);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    // The proxy may answer before it has read all of it.
    let _ = c.get_mut().write_all(&req);
    let (status, headers, text) = response(&mut c);
    assert_over_budget(status, &headers, &text);
    let deadline = Instant::now() + Duration::from_secs(60);
    while proxy.request_bytes_held() > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(proxy.request_bytes_held(), 0, "the bytes of the cut body are given back");
}
