//! The capture of a recovered turn models the tightest cap the turn showed: when recovery's
//! retries were rejected too, the cap is one byte under the smallest body rejected, not under
//! the client's first body, so that the capture's replay needs the rung the live turn needed
//! (adversarial review, finding 13: the capture modeled the first body's size and its replay
//! "recovered" with a retry the real gateway had refused).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use salvage_journal::Journal;
use salvage_proxy::loopback;
use salvage_proxy::record::{Writer, WriterOptions};
use salvage_proxy::{Options, Proxy};
use std::io::BufReader;
use std::net::TcpStream;

/// An Anthropic Messages body of 30 turns of about 10 KB each and a short task.
fn long_conversation() -> Vec<u8> {
    let mut m: Vec<serde_json::Value> = (0..30)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            serde_json::json!({"role": role, "content": format!("turn {i}: {}", "lorem ipsum ".repeat(850))})
        })
        .collect();
    m.push(serde_json::json!({"role": "user", "content": "TASK: summarise"}));
    serde_json::to_vec(
        &serde_json::json!({"model": "claude-sonnet-4-5", "max_tokens": 8, "system": "S", "messages": m}),
    )
    .expect("json")
}

#[test]
fn the_capture_models_the_smallest_body_the_turn_saw_rejected() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("rt");
    let dir = tempfile::tempdir().unwrap();
    let captures = dir.path().join("captures");
    // A cap that the client's body and the first retries exceed, so that more than one body is
    // rejected before one fits.
    let cap = 40_000;
    let up = rt.block_on(loopback::start(cap, None)).expect("upstream");
    let writer = Writer::start(
        Journal::open(&dir.path().join("j.db"), &Default::default()).expect("journal"),
        WriterOptions { captures: Some(captures.clone()), settings: Default::default(), keep: None },
        Box::new(|_| {}),
    )
    .expect("writer");
    let options = Options {
        recover: true,
        max_request_bytes: 1 << 24,
        ..Options::new(format!("http://{}", up.addr).parse().expect("uri"))
    };
    let proxy = Proxy::new(options, Some(writer), Box::new(|_| {})).expect("proxy");
    let listener = rt.block_on(tokio::net::TcpListener::bind(("127.0.0.1", 0))).expect("bind");
    let addr = listener.local_addr().expect("addr");
    rt.spawn(proxy.clone().serve(listener));
    let body = long_conversation();
    let mut c = BufReader::new(TcpStream::connect(addr).expect("connect"));
    let (status, text) =
        loopback::exchange(&mut c, "/v1/messages", &[("x-test-mode", "413")], &body).expect("exchange");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&text));
    proxy.flush();
    let sizes = up.seen.sizes();
    let (accepted, rejected) = sizes.split_last().unwrap();
    assert!(*accepted <= cap);
    assert!(rejected.len() >= 2, "a retry was rejected too: {sizes:?}");
    let smallest = *rejected.iter().min().unwrap() as u64;
    assert!(smallest < body.len() as u64);
    let files: Vec<_> = std::fs::read_dir(&captures).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let capture: serde_json::Value = serde_json::from_slice(&std::fs::read(&files[0]).unwrap()).unwrap();
    assert_eq!(capture["upstream"]["gateway"]["max_body_bytes"].as_u64(), Some(smallest - 1), "{capture:#}");
}
