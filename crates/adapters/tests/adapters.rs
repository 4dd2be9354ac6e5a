//! The adapters against real processes and sockets: the MCP summarizer talks to a real MCP
//! server (the official Python SDK, `testdata/mcp/`), the command summarizer to a real program,
//! and hooks run real commands and POST to a real local HTTP listener.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use salvage_adapters::hooks::ConfiguredHooks;
use salvage_adapters::mcp::{call_context_compact, find_server, McpSummarizer, ServerConfig};
use salvage_adapters::process::CommandSummarizer;
use salvage_recovery::archive::{Archive, Archiver, MemoryArchive};
use salvage_recovery::compaction::{compact, CompactionState, HookCall, Hooks, Io, NoHooks, NoMemory, Plan};
use salvage_recovery::summarizer::{Cancel, SummarizeError, Summarizer, SummaryRequest};
use salvage_types::event::{StepOutcome, Trigger};
use salvage_types::{history_weight, Message};
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

fn root() -> PathBuf {
    salvage_testkit::python::root()
}

/// The Python with the official MCP SDK: `SALVAGE_MCP_PYTHON`, else a venv under `target/`
/// created on first use from `testdata/mcp/requirements.txt`.
fn mcp_python() -> PathBuf {
    static PY: OnceLock<PathBuf> = OnceLock::new();
    PY.get_or_init(|| {
        salvage_testkit::python::python(
            "SALVAGE_MCP_PYTHON",
            "mcp-venv",
            "import mcp.server.mcpserver",
            "testdata/mcp/requirements.txt",
        )
        .unwrap_or_else(|e| panic!("{e}"))
    })
    .clone()
}

fn server(mode: &str) -> ServerConfig {
    let mut env = std::collections::BTreeMap::new();
    env.insert("SALVAGE_TEST_MCP_MODE".to_string(), mode.to_string());
    env.insert("SALVAGE_TEST_MCP_SLEEP".to_string(), "20".to_string());
    ServerConfig {
        command: mcp_python().display().to_string(),
        args: vec!["context_server.py".into()],
        env,
        cwd: Some(root().join("testdata/mcp")),
    }
}

fn session() -> Vec<Message> {
    serde_json::from_slice(&std::fs::read(root().join("testdata/sessions/agent-200.json")).unwrap()).unwrap()
}

fn request() -> SummaryRequest {
    SummaryRequest {
        segment: vec![Message::user("fix it")],
        rendered: "[assistant] reading crates/store/src/lib.rs\n  → calls run_command({\"command\":\"cargo test\"})\n[tool] error: database is locked\n".into(),
        budget_chars: 2000,
        instruction: "summarize".into(),
    }
}

fn compact_with(
    s: &mut dyn Summarizer,
    budget: u64,
) -> (Vec<Message>, MemoryArchive, salvage_recovery::compaction::Outcome) {
    let h = session();
    let mut mem = MemoryArchive::new();
    let cancel = Cancel::new();
    let lookup = |_: &str| None;
    let mut status = |_: salvage_recovery::compaction::Phase, _: &str| {};
    let o = {
        let mut io = Io {
            archiver: Archiver::new(Some(&mut mem as &mut dyn Archive)),
            lookup: &lookup,
            summarizer: s,
            hooks: &mut NoHooks,
            memory: &mut NoMemory,
            status: &mut status,
            cancel: &cancel,
        };
        compact(
            &h,
            &Plan { budget, trigger: Trigger::Manual, min_keep_recent: 6, summarizer_window_chars: 400_000 },
            &mut CompactionState::default(),
            &mut io,
        )
        .unwrap()
    };
    (h, mem, o)
}

fn assert_good(h: &[Message], out: &[Message], mem: &MemoryArchive, budget: u64) {
    assert!(history_weight(out) <= budget);
    assert!(salvage_recovery::pairing::is_valid(out));
    assert!(out.iter().any(|m| m.content == h.last().unwrap().content), "task kept");
    for m in out {
        for k in salvage_types::ccr_key::find_markers(&m.content) {
            assert!(mem.get(k).is_some(), "marker {k} resolves");
        }
    }
}

#[test]
fn mcp_client_talks_to_a_real_server() {
    let text =
        call_context_compact(&server(""), &request(), Duration::from_secs(60), &Cancel::new()).unwrap();
    assert!(text.contains("crates/store/src/lib.rs") && text.contains("database is locked"), "{text}");
    // A timeout past what the clock can represent is no limit, not an overflow.
    let text = call_context_compact(&server(""), &request(), Duration::MAX, &Cancel::new()).unwrap();
    assert!(text.contains("database is locked"), "{text}");
    // In the pipeline, on the 200-message session.
    let mut s = McpSummarizer::new("ctx", Ok(server("")));
    let (h, mem, o) = compact_with(&mut s, 150_000);
    assert_good(&h, &o.history, &mem, 150_000);
    assert!(o.history.iter().any(|m| m.meta.is_summary && m.content.contains("(mcp context engine)")));
    assert_eq!(s.route(), "mcp:ctx");
}

#[test]
fn mcp_falls_back_to_builtin_on_error_empty_timeout_and_missing_server() {
    for (mode, timeout, why) in
        [("error", 60, "context_compact"), ("empty", 60, "empty answer"), ("slow", 2, "timed out")]
    {
        let mut s = McpSummarizer::new("ctx", Ok(server(mode)));
        s.timeout = Duration::from_secs(timeout);
        let started = std::time::Instant::now();
        let a = s.summarize(&request(), &Cancel::new()).unwrap();
        assert!(!a.text.is_empty(), "{mode}: the built-in answered");
        assert!(
            s.route().contains("fell back to builtin") && s.route().contains(why),
            "{mode}: {}",
            s.route()
        );
        assert!(started.elapsed() < Duration::from_secs(timeout + 15), "{mode}: bounded");
    }
    let cfg = find_server("nope", &[root().join("testdata/mcp/mcp.json")]);
    assert!(cfg.is_err());
    let mut s = McpSummarizer::new("nope", cfg);
    assert!(s.summarize(&request(), &Cancel::new()).is_ok());
    assert!(find_server("ctx", &[root().join("testdata/mcp/mcp.json")]).is_ok());
}

#[test]
fn command_summarizer_runs_a_real_program_with_a_timeout() {
    let prog = "python3 -c 'import json,sys; d=json.load(sys.stdin); print(\"## Summary\\n- \" + str(len(d[\"segment\"])) + \" messages summarized by an external program\\n- budget \" + str(d[\"budget_chars\"]) + \" chars\\n- task: fix the flaky store test\")'";
    let mut s = CommandSummarizer::new(prog);
    let (h, mem, o) = compact_with(&mut s, 150_000);
    assert_good(&h, &o.history, &mem, 150_000);
    assert!(o
        .history
        .iter()
        .any(|m| m.meta.is_summary && m.content.contains("summarized by an external program")));
    let mut slow = CommandSummarizer::new("sleep 10");
    slow.timeout = Duration::from_millis(300);
    assert!(matches!(slow.summarize(&request(), &Cancel::new()), Err(SummarizeError::Timeout(_))));
    let mut bad = CommandSummarizer::new("exit 3");
    assert!(matches!(bad.summarize(&request(), &Cancel::new()), Err(SummarizeError::Failed(_))));
}

#[test]
fn command_and_http_hooks_run_and_failures_never_block() {
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("seen.txt");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = vec![0u8; 65536];
        let mut got = Vec::new();
        loop {
            let n = s.read(&mut buf).unwrap_or(0);
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&got);
            if let Some(i) = text.find("\r\n\r\n") {
                let len: usize = text
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length: ")
                            .map(|v| v.trim().parse().unwrap())
                    })
                    .unwrap_or(0);
                if got.len() >= i + 4 + len {
                    break;
                }
            }
        }
        s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").unwrap();
        String::from_utf8(got).unwrap()
    });
    let cfg = serde_json::json!({"hooks": [
        {"name": "record", "event": "PostCompact", "type": "command", "command": format!("cat > {0}; echo \" $CHATCLI_HOOK_EVENT $CHATCLI_HOOK_TRIGGER $CHATCLI_HOOK_OUTCOME $CHATCLI_HOOK_SESSION\" >> {0}", seen.display())},
        {"name": "notify", "event": "PostCompact", "type": "http", "url": format!("http://127.0.0.1:{port}/hook")},
        {"name": "broken", "event": "PostCompact", "type": "command", "command": "exit 7"},
        {"name": "slow", "event": "PostCompact", "type": "command", "command": "sleep 10", "timeout": 200},
        {"name": "off", "event": "PostCompact", "type": "command", "command": "exit 1", "enabled": false},
        {"name": "pre", "event": "PreCompact", "type": "command", "command": "true"}
    ]});
    std::fs::create_dir_all(dir.path().join(".chatcli")).unwrap();
    std::fs::write(dir.path().join(".chatcli/hooks.json"), cfg.to_string()).unwrap();
    // The payload is dated by the injected clock, not the wall clock.
    let clock = salvage_types::FixedClock::at_ms(1_700_000_000_123);
    let files = salvage_adapters::hooks::default_files(dir.path(), None);
    let mut hooks = ConfiguredHooks::load(&files, "sess-1", "/work", &clock);
    let started = std::time::Instant::now();
    let results = hooks.fire(&HookCall {
        event: "PostCompact",
        trigger: Trigger::Recovery,
        outcome: Some(StepOutcome::Skipped),
    });
    assert!(started.elapsed() < Duration::from_secs(5), "a slow hook is cut off at its timeout");
    let by: std::collections::HashMap<_, _> = results.iter().map(|r| (r.name.as_str(), r)).collect();
    assert_eq!(results.len(), 4, "disabled and other-event hooks do not run");
    assert_eq!(by["record"].outcome, StepOutcome::Applied);
    assert_eq!(by["notify"].outcome, StepOutcome::Applied, "{:?}", by["notify"].error);
    assert_eq!(by["broken"].outcome, StepOutcome::Failed);
    assert!(by["slow"].error.as_deref().unwrap().contains("timed out"));
    let text = std::fs::read_to_string(&seen).unwrap();
    let v: serde_json::Value = serde_json::from_str(
        text.lines().next().unwrap().rsplit_once('}').map(|(a, _)| format!("{a}}}")).as_deref().unwrap(),
    )
    .unwrap();
    assert_eq!(
        (v["type"].as_str(), v["trigger"].as_str(), v["outcome"].as_str(), v["sessionId"].as_str()),
        (Some("PostCompact"), Some("recovery"), Some("skipped"), Some("sess-1"))
    );
    assert_eq!(v["timestamp"].as_str(), Some("2023-11-14T22:13:20.123+00:00"), "{v}");
    assert!(text.contains("PostCompact recovery skipped sess-1"), "{text}");
    let req = server.join().unwrap();
    assert!(req.starts_with("POST /hook"), "{req}");
    assert!(req.contains("\"outcome\":\"skipped\""));
}

#[test]
fn run_shell_bounds_stdout_keeps_the_spawn_error_and_cancels() {
    use salvage_adapters::process::{run_shell, RunError, MAX_STDOUT_BYTES};
    // More than the bound on stdout: refused, and the child still finishes (it is drained).
    let over = format!("head -c {} /dev/zero", MAX_STDOUT_BYTES + 1);
    match run_shell(&over, b"", &[], Duration::from_secs(60), None) {
        Err(RunError::OutputTooLarge(n)) => assert_eq!(n, MAX_STDOUT_BYTES),
        other => panic!("expected OutputTooLarge, got {:?}", other.map(|v| v.len())),
    }
    // Exactly the bound is fine.
    let at = format!("head -c {MAX_STDOUT_BYTES} /dev/zero");
    let out = run_shell(&at, b"", &[], Duration::from_secs(60), None).unwrap();
    assert_eq!(out.len() as u64, MAX_STDOUT_BYTES);
    // Stdin reaches the program and its output comes back.
    assert_eq!(run_shell("cat", b"ping", &[], Duration::from_secs(10), None).unwrap(), b"ping");
    // A cancelled run stops long before its timeout.
    let cancel = Cancel::new();
    cancel.cancel();
    let t = std::time::Instant::now();
    let e = run_shell("sleep 30", b"", &[], Duration::from_secs(60), Some(&cancel)).unwrap_err();
    assert!(matches!(e, RunError::Cancelled), "{e}");
    assert!(t.elapsed() < Duration::from_secs(20));
    // A timeout kills the child.
    let e = run_shell("sleep 30", b"", &[], Duration::from_millis(200), None).unwrap_err();
    assert!(matches!(e, RunError::Timeout(_)), "{e}");
    assert_eq!(e.to_string(), "timed out after 200 ms");
    // A failing exit keeps its code and stderr.
    let e = run_shell("echo nope >&2; exit 3", b"", &[], Duration::from_secs(10), None).unwrap_err();
    assert_eq!(e.to_string(), "exited with 3: nope");
}

#[test]
fn a_spawn_failure_keeps_the_io_error_as_its_source() {
    use salvage_adapters::process::RunError;
    let e = RunError::Spawn(std::io::Error::new(std::io::ErrorKind::NotFound, "no sh"));
    let source = std::error::Error::source(&e).expect("a source");
    assert_eq!(source.to_string(), "no sh");
    assert_eq!(e.to_string(), "cannot start: no sh");
}
