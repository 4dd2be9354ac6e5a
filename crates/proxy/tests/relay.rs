//! The relay under load and at its limits: the request goes upstream as it arrives, a body over
//! the cap is refused by the proxy, and a journal that falls behind holds the writer's queue within
//! its bytes (the clients wait) instead of growing it.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use salvage_journal::Journal;
use salvage_proxy::loopback;
use salvage_proxy::record::{Writer, WriterOptions, Written};
use salvage_proxy::{Options, Proxy};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

fn options(upstream: SocketAddr, max_request_bytes: usize) -> Options {
    Options { max_request_bytes, ..Options::new(format!("http://{upstream}").parse().expect("uri")) }
}

/// Starts `proxy` on 127.0.0.1 on `rt`, returning its address.
fn serve(rt: &tokio::runtime::Runtime, proxy: Proxy) -> SocketAddr {
    let listener = rt.block_on(tokio::net::TcpListener::bind(("127.0.0.1", 0))).expect("bind");
    let addr = listener.local_addr().expect("addr");
    rt.spawn(proxy.serve(listener));
    addr
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime")
}

/// An Anthropic Messages body of about `size` bytes, one conversation whatever the size.
fn body(size: usize) -> Vec<u8> {
    let text = "y".repeat(size);
    serde_json::to_vec(&serde_json::json!({"model": "claude-sonnet-4-5", "max_tokens": 8, "system": "relay test",
        "messages": [{"role": "user", "content": "start"}, {"role": "assistant", "content": "ok"}, {"role": "user", "content": text}]}))
    .expect("json")
}

fn status_of(conn: &mut BufReader<TcpStream>) -> u16 {
    let mut line = String::new();
    conn.read_line(&mut line).expect("status line");
    line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

#[test]
fn the_request_goes_upstream_before_the_client_has_sent_all_of_it() {
    let rt = runtime();
    // An upstream that says when the first body byte arrived, and answers once it has all.
    let listener = rt.block_on(tokio::net::TcpListener::bind(("127.0.0.1", 0))).expect("bind");
    let up = listener.local_addr().expect("addr");
    let first_byte = Arc::new(tokio::sync::Notify::new());
    let seen = first_byte.clone();
    rt.spawn(async move {
        let (s, _) = listener.accept().await.expect("accept");
        let mut r = tokio::io::BufReader::new(s);
        let mut len = 0usize;
        loop {
            let mut line = String::new();
            r.read_line(&mut line).await.expect("head");
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().expect("length");
            }
            if line == "\r\n" {
                break;
            }
        }
        let mut one = [0u8; 1];
        r.read_exact(&mut one).await.expect("first body byte");
        seen.notify_one();
        let mut rest = vec![0u8; len - 1];
        r.read_exact(&mut rest).await.expect("rest of the body");
        let answer = br#"{"content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}"#;
        let head = format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n", answer.len());
        r.get_mut().write_all(head.as_bytes()).await.expect("answer");
        r.get_mut().write_all(answer).await.expect("answer");
    });
    let proxy = Proxy::new(options(up, 1 << 20), None, Box::new(|_| {})).expect("proxy");
    let addr = serve(&rt, proxy);
    let b = body(50_000);
    let (first, second) = b.split_at(b.len() / 2);
    let mut c = TcpStream::connect(addr).expect("connect");
    write!(c, "POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n", b.len())
        .expect("head");
    c.write_all(first).expect("first half");
    // The second half is sent only once the upstream has bytes of the first: a proxy that waited
    // for the whole body would never forward any.
    let arrived =
        rt.block_on(async { tokio::time::timeout(Duration::from_secs(10), first_byte.notified()).await });
    assert!(arrived.is_ok(), "the upstream saw nothing of a half-sent body");
    c.write_all(second).expect("second half");
    let mut conn = BufReader::new(c);
    assert_eq!(status_of(&mut conn), 200);
}

#[test]
fn a_body_over_the_cap_is_refused_by_the_proxy_with_or_without_a_length() {
    let rt = runtime();
    let up = rt.block_on(loopback::start(usize::MAX, None)).expect("upstream");
    let proxy = Proxy::new(options(up.addr, 10_000), None, Box::new(|_| {})).expect("proxy");
    let addr = serve(&rt, proxy);
    // With a content-length: refused before anything is relayed.
    let mut c = BufReader::new(TcpStream::connect(addr).expect("connect"));
    let (status, text) = loopback::exchange(&mut c, "/v1/messages", &[], &body(20_000)).expect("exchange");
    assert_eq!(status, 413, "{}", String::from_utf8_lossy(&text));
    // Chunked: refused when the count passes the cap, mid-relay (to an upstream that reads on and
    // never answers, so only the proxy can).
    let sink = rt.block_on(tokio::net::TcpListener::bind(("127.0.0.1", 0))).expect("bind");
    let sink_addr = sink.local_addr().expect("addr");
    rt.spawn(async move {
        while let Ok((mut s, _)) = sink.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                while s.read(&mut buf).await.is_ok_and(|n| n > 0) {}
            });
        }
    });
    let proxy = Proxy::new(options(sink_addr, 10_000), None, Box::new(|_| {})).expect("proxy");
    let addr = serve(&rt, proxy);
    let mut s = TcpStream::connect(addr).expect("connect");
    s.write_all(b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n")
        .expect("head");
    let b = body(20_000);
    for chunk in b.chunks(4096) {
        if write!(s, "{:x}\r\n", chunk.len())
            .and_then(|()| s.write_all(chunk))
            .and_then(|()| s.write_all(b"\r\n"))
            .is_err()
        {
            break;
        }
    }
    let _ = s.write_all(b"0\r\n\r\n");
    let mut conn = BufReader::new(s);
    assert_eq!(status_of(&mut conn), 413);
    let mut rest = String::new();
    let _ = conn.read_to_string(&mut rest);
    assert!(rest.contains("request body: length limit exceeded"), "{rest}");
    // The upstream never received the body refused with its length.
    assert!(up.seen.sizes().is_empty(), "{:?}", up.seen.sizes());
}

#[test]
fn a_slow_journal_holds_the_queue_within_its_bytes_and_the_clients_wait() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("journal.db");
    let journal = Journal::open(&db, &Default::default()).expect("journal");
    // Another connection holds the write lock: the writer waits on SQLite (its busy timeout is
    // 30 s), as a journal on a slow disk would.
    let blocker = Journal::open(&db, &Default::default()).expect("second connection");
    blocker.conn().execute_batch("BEGIN EXCLUSIVE").expect("lock");
    let written = Arc::new(AtomicUsize::new(0));
    let w = written.clone();
    let queue = 350_000;
    let writer = Writer::with_queue(
        journal,
        WriterOptions { captures: None, settings: Default::default(), keep: None },
        Box::new(move |r| {
            assert!(matches!(r, Written::Turn { .. }), "{r:?}");
            w.fetch_add(1, Ordering::SeqCst);
        }),
        queue,
    )
    .expect("writer");
    let rt = runtime();
    let up = rt.block_on(loopback::start(usize::MAX, None)).expect("upstream");
    let proxy = Proxy::new(options(up.addr, 1 << 20), Some(writer.clone()), Box::new(|_| {})).expect("proxy");
    let addr = serve(&rt, proxy.clone());
    // One client, 12 turns of ~100 KB one after the other, each on a new connection.
    let done = Arc::new(AtomicUsize::new(0));
    let d = done.clone();
    let client = std::thread::spawn(move || {
        let b = body(100_000);
        for _ in 0..12 {
            let mut c = BufReader::new(TcpStream::connect(addr).expect("connect"));
            let (status, _) = loopback::exchange(&mut c, "/v1/messages", &[], &b).expect("exchange");
            assert_eq!(status, 200);
            d.fetch_add(1, Ordering::SeqCst);
        }
    });
    let most = Arc::new(Mutex::new(0usize));
    let sample = |for_: Duration| {
        let t = Instant::now();
        while t.elapsed() < for_ {
            let q = writer.queued_bytes();
            let mut m = most.lock().expect("lock");
            *m = (*m).max(q);
            drop(m);
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    sample(Duration::from_millis(1500));
    let held = done.load(Ordering::SeqCst);
    sample(Duration::from_millis(500));
    assert_eq!(written.load(Ordering::SeqCst), 0, "the journal is locked");
    assert!(held < 12, "every turn went through while the journal was stuck");
    assert_eq!(done.load(Ordering::SeqCst), held, "a client went on while the queue was full");
    assert!(writer.queued_bytes() > 200_000, "the queue filled: {}", writer.queued_bytes());
    // The journal catches up: every turn is written and every client is answered.
    blocker.conn().execute_batch("COMMIT").expect("unlock");
    client.join().expect("client");
    // The last turn may still be waiting for room when its client has read the answer.
    let t = Instant::now();
    while written.load(Ordering::SeqCst) < 12 && t.elapsed() < Duration::from_secs(30) {
        proxy.flush();
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(written.load(Ordering::SeqCst), 12);
    assert!(*most.lock().expect("lock") <= queue, "queued {} > {queue}", *most.lock().expect("lock"));
    assert_eq!(writer.queued_bytes(), 0);
    let j = Journal::open(&db, &Default::default()).expect("reopen");
    let sessions = j.sessions().expect("sessions");
    assert_eq!(sessions.len(), 1);
    let events = j.events(&sessions[0].id, 0, 1000).expect("events");
    assert_eq!(events.iter().filter(|e| e.kind == "request_sent").count(), 12);
}

#[test]
fn an_unreachable_upstream_is_a_502_that_says_why() {
    let rt = runtime();
    // A port nothing listens on: bound, then closed.
    let closed = std::net::TcpListener::bind(("127.0.0.1", 0)).expect("bind");
    let up = closed.local_addr().expect("addr");
    drop(closed);
    let dir = tempfile::tempdir().expect("dir");
    let journal = Journal::open(&dir.path().join("j.db"), &Default::default()).expect("journal");
    let writer = Writer::start(
        journal,
        WriterOptions {
            captures: Some(dir.path().join("captures")),
            settings: Default::default(),
            keep: None,
        },
        Box::new(|_| {}),
    )
    .expect("writer");
    let proxy = Proxy::new(options(up, 1 << 20), Some(writer), Box::new(|_| {})).expect("proxy");
    let addr = serve(&rt, proxy.clone());
    // A turn and a request that is not one: the client hears that the upstream could not be
    // reached, and where, instead of an empty reply.
    for path in ["/v1/messages", "/v1/models"] {
        let mut c = BufReader::new(TcpStream::connect(addr).expect("connect"));
        let (status, text) = loopback::exchange(&mut c, path, &[], &body(100)).expect("an answer");
        let text = String::from_utf8_lossy(&text);
        assert_eq!(status, 502, "{path}: {text}");
        assert!(text.contains(&up.to_string()) && text.contains("refused"), "{path}: {text}");
    }
    // The turn's failure is still journaled and captured.
    proxy.flush();
    let j = Journal::open(&dir.path().join("j.db"), &Default::default()).expect("reopen");
    let sessions = j.sessions().expect("sessions");
    assert_eq!(sessions.len(), 1);
    let events = j.events(&sessions[0].id, 0, 100).expect("events");
    assert!(events.iter().any(|e| e.kind == "provider_error"), "{events:?}");
    assert_eq!(std::fs::read_dir(dir.path().join("captures")).expect("captures").count(), 1);
    // The session's start records the request besides its messages, so an export is the
    // request as the client sent it.
    let exported = j.export_capture(&sessions[0].id).expect("export");
    let request = exported.request.expect("the request part is journaled");
    assert_eq!(request.format, salvage_types::capture::RequestFormat::Anthropic);
    assert!(request.fields.contains_key("max_tokens"), "{:?}", request.fields);
}

#[test]
fn trailers_reach_a_client_that_accepts_them() {
    let rt = runtime();
    // An upstream that sends a trailer field when, and only when, the request says it takes them.
    let listener = rt.block_on(tokio::net::TcpListener::bind(("127.0.0.1", 0))).expect("bind");
    let up = listener.local_addr().expect("addr");
    rt.spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut r = tokio::io::BufReader::new(s);
                let (mut len, mut te) = (0usize, false);
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).await.unwrap_or(0) == 0 {
                        return;
                    }
                    let lower = line.to_ascii_lowercase();
                    if let Some(v) = lower.strip_prefix("content-length:") {
                        len = v.trim().parse().expect("length");
                    }
                    te |= lower.starts_with("te:") && lower.contains("trailers");
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0u8; len];
                r.read_exact(&mut body).await.expect("body");
                let answer = r#"{"content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn"}"#;
                let trailer = if te { "x-checksum: abc\r\n" } else { "" };
                let out = format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\ntrailer: x-checksum\r\nconnection: close\r\n\r\n{:x}\r\n{answer}\r\n0\r\n{trailer}\r\n", answer.len());
                r.get_mut().write_all(out.as_bytes()).await.expect("answer");
                let _ = r.get_mut().shutdown().await;
            });
        }
    });
    let dir = tempfile::tempdir().expect("dir");
    let journal = Journal::open(&dir.path().join("j.db"), &Default::default()).expect("journal");
    let writer = Writer::start(
        journal,
        WriterOptions { captures: None, settings: Default::default(), keep: None },
        Box::new(|_| {}),
    )
    .expect("writer");
    for writer in [None, Some(writer)] {
        let proxy = Proxy::new(options(up, 1 << 20), writer, Box::new(|_| {})).expect("proxy");
        let addr = serve(&rt, proxy);
        let mut c = TcpStream::connect(addr).expect("connect");
        let b = body(100);
        write!(c, "POST /v1/messages HTTP/1.1\r\nhost: x\r\nte: trailers\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n", b.len())
            .expect("head");
        c.write_all(&b).expect("body");
        let mut answer = String::new();
        c.read_to_string(&mut answer).expect("answer");
        assert!(answer.to_ascii_lowercase().contains("\r\n0\r\nx-checksum: abc\r\n\r\n"), "{answer}");
    }
}

/// An upstream answering every request (read to its content-length) with `answer`, then closing.
fn canned_upstream(rt: &tokio::runtime::Runtime, answer: &'static str) -> SocketAddr {
    let listener = rt.block_on(tokio::net::TcpListener::bind(("127.0.0.1", 0))).expect("bind");
    let up = listener.local_addr().expect("addr");
    rt.spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut r = tokio::io::BufReader::new(s);
                let mut len = 0usize;
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).await.unwrap_or(0) == 0 {
                        return;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().expect("length");
                    }
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0u8; len];
                r.read_exact(&mut body).await.expect("body");
                r.get_mut().write_all(answer.as_bytes()).await.expect("answer");
                let _ = r.get_mut().shutdown().await;
            });
        }
    });
    up
}

#[test]
fn a_rejection_of_a_body_that_is_not_a_history_loses_its_hop_by_hop_headers_too() {
    let rt = runtime();
    let up = canned_upstream(
        &rt,
        "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 14\r\nkeep-alive: timeout=5\r\nx-hop: 1\r\nconnection: x-hop\r\n\r\n{\"error\":\"no\"}",
    );
    let dir = tempfile::tempdir().expect("dir");
    let journal = Journal::open(&dir.path().join("j.db"), &Default::default()).expect("journal");
    let writer = Writer::start(
        journal,
        WriterOptions { captures: None, settings: Default::default(), keep: None },
        Box::new(|_| {}),
    )
    .expect("writer");
    let proxy = Proxy::new(options(up, 1 << 20), Some(writer), Box::new(|_| {})).expect("proxy");
    let addr = serve(&rt, proxy);
    for body in [&b"not a JSON body"[..], &body(100)[..]] {
        let mut c = TcpStream::connect(addr).expect("connect");
        write!(c, "POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n", body.len())
            .expect("head");
        c.write_all(body).expect("body");
        let mut conn = BufReader::new(c);
        let mut head = String::new();
        loop {
            let mut line = String::new();
            conn.read_line(&mut line).expect("head");
            if line == "\r\n" || line.is_empty() {
                break;
            }
            head.push_str(&line.to_ascii_lowercase());
        }
        assert!(head.starts_with("http/1.1 400"), "{head}");
        assert!(!head.contains("keep-alive") && !head.contains("x-hop"), "{head}");
    }
}
