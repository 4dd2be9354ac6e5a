//! `--no-journal --captures DIR` over a long run: the in-memory journal keeps only the
//! conversations written last, and the captures of those are what an unbounded journal gives.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use salvage_journal::Journal;
use salvage_proxy::loopback;
use salvage_proxy::record::{Keep, Writer, WriterOptions, QUEUE_BYTES};
use salvage_proxy::{Options, Proxy};
use std::io::BufReader;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;

/// The upstream rejects bodies over this with a 413: the third turn of a conversation and later.
const CAP: usize = 5000;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime")
}

/// A proxy in front of a loopback upstream, capturing into `captures` with an in-memory journal
/// that keeps within `keep` (none: everything).
struct Running {
    _rt: tokio::runtime::Runtime,
    up: loopback::Upstream,
    proxy: Proxy,
    writer: Writer,
    addr: SocketAddr,
}

fn start(captures: &Path, keep: Option<Keep>) -> Running {
    let rt = runtime();
    let up = rt.block_on(loopback::start(CAP, None)).expect("upstream");
    let options = Options {
        max_request_bytes: 1 << 24,
        ..Options::new(format!("http://{}", up.addr).parse().expect("uri"))
    };
    let journal = Journal::in_memory().expect("journal");
    let writer = Writer::with_queue(
        journal,
        WriterOptions { captures: Some(captures.to_path_buf()), settings: Default::default(), keep },
        Box::new(|_| {}),
        QUEUE_BYTES,
    )
    .expect("writer");
    let proxy = Proxy::new(options, Some(writer.clone()), Box::new(|_| {})).expect("proxy");
    let listener = rt.block_on(tokio::net::TcpListener::bind(("127.0.0.1", 0))).expect("bind");
    let addr = listener.local_addr().expect("addr");
    rt.spawn(proxy.clone().serve(listener));
    Running { _rt: rt, up, proxy, writer, addr }
}

/// The Anthropic Messages body of turn `turns` of conversation `name` (its history so far, each
/// message about 2 KB).
fn body(name: &str, turns: usize) -> Vec<u8> {
    let mut m =
        vec![serde_json::json!({"role": "user", "content": format!("task {name}: {}", "x".repeat(2000))})];
    for t in 1..turns {
        m.push(serde_json::json!({"role": "assistant", "content": format!("answer {t} of {name}")}));
        m.push(serde_json::json!({"role": "user", "content": format!("more {t} of {name}: {}", "y".repeat(2000))}));
    }
    serde_json::to_vec(
        &serde_json::json!({"model": "claude-sonnet-4-5", "max_tokens": 8, "system": "S", "messages": m}),
    )
    .expect("json")
}

/// Sends turn `turns` of conversation `name`: from the third on, the upstream answers it with a
/// 413 (a failure, captured).
fn turn(r: &Running, name: &str, turns: usize) {
    let mut c = BufReader::new(TcpStream::connect(r.addr).expect("connect"));
    let b = body(name, turns);
    let (status, text) = loopback::exchange(&mut c, "/v1/messages", &[], &b).expect("exchange");
    assert_eq!(status, if b.len() > CAP { 413 } else { 200 }, "{}", String::from_utf8_lossy(&text));
    assert_eq!(b.len() > CAP, turns >= 3, "turn {turns} is {} bytes", b.len());
}

#[test]
fn the_in_memory_journal_keeps_only_the_latest_sessions() {
    let dir = tempfile::tempdir().expect("dir");
    let keep = Keep { sessions: 8, bytes: u64::MAX };
    let r = start(dir.path(), Some(keep));
    let mut pages = Vec::new();
    for round in 0..3 {
        for i in 0..40 {
            let name = format!("{round}-{i}");
            let turns = if i % 10 == 0 { 3 } else { 2 };
            for t in 1..=turns {
                turn(&r, &name, t);
            }
        }
        r.proxy.flush();
        let held = r.writer.held().expect("held");
        assert!(held.sessions <= keep.sessions as u64, "round {round}: {held:?}");
        // Each session holds its start, three requests and answers: a handful of events, and its
        // seven messages (two for each turn after the first, one started it).
        assert!(held.events <= 20 * keep.sessions as u64, "round {round}: {held:?}");
        assert!(held.messages <= 7 * keep.sessions as u64, "round {round}: {held:?}");
        assert_eq!(held.deleted, 0, "round {round}: {held:?}");
        pages.push(held.pages);
    }
    // The database does not grow with the conversations once it holds its bound: the pages the
    // dropped sessions freed are written again.
    assert!(pages[2] <= pages[0].saturating_mul(2), "pages per 40 conversations: {pages:?}");
    // Every failure was captured.
    assert_eq!(std::fs::read_dir(dir.path()).expect("captures").count(), 12);
}

/// The captures of one scenario: conversations the bounded journal has dropped come and go
/// between the turns of the ones it keeps.
fn scenario(keep: Option<Keep>) -> Vec<(String, serde_json::Value)> {
    let dir = tempfile::tempdir().expect("dir");
    let r = start(dir.path(), keep);
    turn(&r, "A", 1);
    turn(&r, "B1", 1);
    turn(&r, "A", 2);
    turn(&r, "B2", 1);
    turn(&r, "A", 3);
    for i in 0..20 {
        let name = format!("C{i}");
        turn(&r, &name, 1);
        turn(&r, &name, 2);
        if i % 7 == 3 {
            turn(&r, &name, 3);
        }
    }
    // Conversations after others were dropped: a failure mid-way, and at the first request.
    turn(&r, "D", 1);
    turn(&r, "D", 2);
    turn(&r, "D", 3);
    turn(&r, "E", 3);
    // And the conversations written last, again.
    turn(&r, "C19", 3);
    turn(&r, "D", 4);
    r.proxy.flush();
    if let Some(k) = keep {
        let held = r.writer.held().expect("held");
        assert!(held.sessions <= k.sessions as u64, "{held:?}");
    }
    let mut out: Vec<(String, serde_json::Value)> = std::fs::read_dir(dir.path())
        .expect("captures")
        .map(|e| {
            let e = e.expect("entry");
            // The upstream's address (in the title) is the run's own.
            let text = std::fs::read_to_string(e.path())
                .expect("capture")
                .replace(&format!("http://{}", r.up.addr), "http://UPSTREAM");
            (e.file_name().to_string_lossy().into_owned(), serde_json::from_str(&text).expect("json"))
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn captures_after_other_sessions_were_dropped_are_as_with_every_session_kept() {
    let bounded = scenario(Some(Keep { sessions: 4, bytes: u64::MAX }));
    let unbounded = scenario(None);
    assert_eq!(bounded.len(), 8, "{:?}", bounded.iter().map(|c| &c.0).collect::<Vec<_>>());
    let names = |cs: &[(String, serde_json::Value)]| cs.iter().map(|c| c.0.clone()).collect::<Vec<_>>();
    assert_eq!(names(&bounded), names(&unbounded));
    for (b, u) in bounded.iter().zip(&unbounded) {
        assert!(b.1 == u.1, "{} differs", b.0);
    }
}

#[test]
fn a_journal_over_its_bytes_drops_its_oldest_sessions() {
    let dir = tempfile::tempdir().expect("dir");
    let keep = Keep { sessions: 1000, bytes: 256 << 10 };
    let r = start(dir.path(), Some(keep));
    for i in 0..60 {
        turn(&r, &format!("{i}"), 2);
    }
    r.proxy.flush();
    let held = r.writer.held().expect("held");
    // Each conversation stores about 4 KB: 60 of them are more than 256 KiB.
    assert!(held.bytes_in_use <= keep.bytes, "{held:?}");
    assert!(held.sessions > 0 && held.sessions < 60, "{held:?}");
}
