//! A Responses conversation the client chains with `previous_response_id` (the provider keeps the
//! earlier turns; each request carries only the new input) is one session, and its history is
//! what the model is given: the earlier turns and their replies, then the new input.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use salvage_journal::Journal;
use salvage_proxy::loopback;
use salvage_proxy::record::{Writer, WriterOptions};
use salvage_proxy::{Options, Proxy};
use std::io::BufReader;
use std::net::TcpStream;

#[test]
fn a_chained_responses_conversation_is_one_session_with_the_whole_history() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("rt");
    // The stand-in answers every Responses request as response `resp_1`.
    let up = rt.block_on(loopback::start(usize::MAX, None)).expect("upstream");
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("j.db");
    let writer = Writer::start(
        Journal::open(&db, &Default::default()).expect("journal"),
        WriterOptions { captures: None, settings: Default::default(), keep: None },
        Box::new(|_| {}),
    )
    .expect("writer");
    let options = Options {
        max_request_bytes: 1 << 20,
        ..Options::new(format!("http://{}", up.addr).parse().expect("uri"))
    };
    let proxy = Proxy::new(options, Some(writer), Box::new(|_| {})).expect("proxy");
    let listener = rt.block_on(tokio::net::TcpListener::bind(("127.0.0.1", 0))).expect("bind");
    let addr = listener.local_addr().expect("addr");
    rt.spawn(proxy.clone().serve(listener));
    let first = serde_json::json!({"model": "gpt-5", "instructions": "be brief", "input": "first question"});
    let second = serde_json::json!({"model": "gpt-5", "instructions": "be brief", "previous_response_id": "resp_1",
        "input": [{"role": "user", "content": "a follow-up"}], "stream": true});
    let mut replies = Vec::new();
    for body in [first, second] {
        let body = serde_json::to_vec(&body).expect("json");
        let mut c = BufReader::new(TcpStream::connect(addr).expect("connect"));
        let (status, _) = loopback::exchange(&mut c, "/v1/responses", &[], &body).expect("exchange");
        assert_eq!(status, 200);
        replies.push(format!("Done: {} bytes received.", body.len()));
        // The next request is sent once this turn is journaled, as a client sends it after the
        // answer.
        proxy.flush();
    }
    let j = Journal::open(&db, &Default::default()).expect("reopen");
    let sessions = j.sessions().expect("sessions");
    assert_eq!(sessions.len(), 1, "{:?}", sessions.iter().map(|s| &s.title).collect::<Vec<_>>());
    let history = j.head(&sessions[0].id).expect("head").history;
    let got: Vec<(&str, &str)> = history.iter().map(|m| (m.role.as_str(), m.content.as_str())).collect();
    assert_eq!(
        got,
        [
            ("system", "be brief"),
            ("user", "first question"),
            ("assistant", replies[0].as_str()),
            ("user", "a follow-up"),
            ("assistant", replies[1].as_str()),
        ]
    );
}
