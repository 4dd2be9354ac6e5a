//! `--recover` does not depend on journaling: a proxy that records nothing (`--no-journal`, no
//! captures) still recovers a recoverable failure.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use salvage_proxy::loopback;
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
fn recovery_runs_without_a_journal() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("rt");
    let cap = 150_000;
    let up = rt.block_on(loopback::start(cap, None)).expect("upstream");
    let options = Options {
        recover: true,
        max_request_bytes: 1 << 24,
        ..Options::new(format!("http://{}", up.addr).parse().expect("uri"))
    };
    // No writer: nothing is journaled or captured.
    let proxy = Proxy::new(options, None, Box::new(|_| {})).expect("proxy");
    let listener = rt.block_on(tokio::net::TcpListener::bind(("127.0.0.1", 0))).expect("bind");
    let addr = listener.local_addr().expect("addr");
    rt.spawn(proxy.serve(listener));
    let body = long_conversation();
    assert!(body.len() > cap);
    let mut c = BufReader::new(TcpStream::connect(addr).expect("connect"));
    let (status, text) =
        loopback::exchange(&mut c, "/v1/messages", &[("x-test-mode", "413")], &body).expect("exchange");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&text));
    let sizes = up.seen.sizes();
    assert!(sizes.len() >= 2 && sizes.last().is_some_and(|s| *s <= cap), "retried smaller: {sizes:?}");
}
