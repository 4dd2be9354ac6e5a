//! `salvage proxy` end to end: the official Anthropic and OpenAI Python SDKs (pinned, in a virtual
//! environment under `target/proxy-venv`, or `SALVAGE_PROXY_PYTHON`) talk to the real binary in
//! front of a loopback upstream that enforces a body cap and answers with real error bodies.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use salvage_journal::Journal;
use salvage_proxy::loopback;
use salvage_types::event::EventBody;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

fn root() -> PathBuf {
    salvage_testkit::python::root()
}

/// The Python with the official SDKs: `SALVAGE_PROXY_PYTHON`, else a venv under `target/` created
/// on first use from `testdata/proxy/requirements.txt`.
fn python() -> PathBuf {
    static PY: OnceLock<PathBuf> = OnceLock::new();
    PY.get_or_init(|| {
        salvage_testkit::python::python(
            "SALVAGE_PROXY_PYTHON",
            "proxy-venv",
            "import anthropic, openai",
            "testdata/proxy/requirements.txt",
        )
        .unwrap_or_else(|e| panic!("{e}"))
    })
    .clone()
}

#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
struct Seen {
    status: Option<u16>,
    raw_sha: Option<String>,
    raw_len: Option<u64>,
    text: Option<String>,
    error: Option<String>,
}

fn sdk(spec: serde_json::Value) -> Seen {
    let o = Command::new(python())
        .arg(root().join("testdata/proxy/sdk_client.py"))
        .arg(spec.to_string())
        .output()
        .expect("python runs");
    assert!(o.status.success(), "sdk_client failed: {}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)))
}

struct ProxyProc {
    child: Child,
    url: String,
}

impl ProxyProc {
    fn start(upstream: &str, db: &Path, extra: &[&str]) -> ProxyProc {
        let mut child = Command::new(env!("CARGO_BIN_EXE_salvage"))
            .args(["proxy", "--listen", "127.0.0.1:0", "--upstream", upstream, "--db"])
            .arg(db)
            .args(extra)
            .env("CHATCLI_MAX_RECOVERY_ATTEMPTS", "3")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("salvage proxy starts");
        let mut line = String::new();
        let out = child.stdout.take().expect("stdout");
        std::io::BufReader::new(out).read_line(&mut line).expect("first line");
        // "listening on http://127.0.0.1:PORT -> UPSTREAM"
        let url = line.split_whitespace().nth(2).expect("address").to_string();
        assert!(url.starts_with("http://127.0.0.1:"), "{line}");
        ProxyProc { child, url }
    }

    /// SIGTERM, then wait: the proxy journals every finished turn before it exits.
    fn stop(mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let st = self.child.wait().expect("proxy exits");
        assert!(st.success(), "proxy exit: {st:?}");
    }
}

impl Drop for ProxyProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime")
}

/// A plain-HTTP loopback upstream enforcing `cap` (on its own runtime), its URL, and a temporary
/// folder holding the journal's path. The runtime and the folder live as long as the value.
struct Setup {
    _rt: tokio::runtime::Runtime,
    up: loopback::Upstream,
    upstream: String,
    dir: tempfile::TempDir,
    db: std::path::PathBuf,
}

fn plain_upstream(cap: usize) -> Setup {
    let rt = runtime();
    let up = rt.block_on(loopback::start(cap, None)).expect("upstream");
    let upstream = format!("http://{}", up.addr);
    let dir = tempfile::tempdir().expect("tmp");
    let db = dir.path().join("s.db");
    Setup { _rt: rt, up, upstream, dir, db }
}

fn base_url(proxy_or_upstream: &str, which: &str) -> String {
    match which {
        "anthropic" => proxy_or_upstream.to_string(),
        _ => format!("{proxy_or_upstream}/v1"),
    }
}

fn events(db: &Path) -> Vec<(String, Vec<EventBody>)> {
    let j = Journal::open(db, &Default::default()).expect("journal");
    j.sessions()
        .expect("sessions")
        .into_iter()
        .map(|s| {
            (s.id.clone(), j.events(&s.id, 0, 10_000).expect("events").into_iter().map(|e| e.body).collect())
        })
        .collect()
}

#[test]
fn help_names_the_client_environment_variables() {
    let o = Command::new(env!("CARGO_BIN_EXE_salvage")).args(["proxy", "--help"]).output().expect("runs");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("ANTHROPIC_BASE_URL=http://127.0.0.1:8787"), "{text}");
    assert!(text.contains("OPENAI_BASE_URL=http://127.0.0.1:8787/v1"), "{text}");
}

#[test]
fn sdk_responses_are_byte_identical_through_the_proxy_and_every_turn_is_journaled() {
    let Setup { _rt, up: _up, upstream, dir: _dir, db } = plain_upstream(1 << 20);
    let proxy = ProxyProc::start(&upstream, &db, &[]);
    let mut n = 0;
    for which in ["anthropic", "openai", "openai-responses"] {
        for stream in [false, true] {
            let spec = |base: &str| {
                serde_json::json!({"sdk": which, "base_url": base_url(base, which), "stream": stream, "raw": true,
                    "size": 20_000, "session": format!("{which}-{stream}")})
            };
            let direct = sdk(spec(&upstream));
            let via = sdk(spec(&proxy.url));
            assert_eq!(direct.status, Some(200), "{which} stream={stream}: {direct:?}");
            assert_eq!(direct, via, "{which} stream={stream}: the client must see the same bytes");
            // And the parsed call works through the proxy.
            let mut p = spec(&proxy.url);
            p["raw"] = false.into();
            let parsed = sdk(p);
            assert!(parsed.text.as_deref().is_some_and(|t| t.starts_with("Done: ")), "{which}: {parsed:?}");
            n += 2;
        }
    }
    proxy.stop();
    let sessions = events(&db);
    assert_eq!(sessions.len(), 6, "one session per conversation");
    let mut turns = 0;
    for (id, evs) in &sessions {
        let responses: Vec<&EventBody> =
            evs.iter().filter(|e| matches!(e, EventBody::ResponseReceived { .. })).collect();
        turns += responses.len();
        assert!(
            responses.iter().all(|e| matches!(
                e,
                EventBody::ResponseReceived {
                    stop_reason: salvage_types::capture::StopReason::EndTurn,
                    output_tokens: Some(_)
                }
            ) || (id == "openai-true"
                && matches!(e, EventBody::ResponseReceived { .. }))),
            "{id}: {responses:?}"
        );
        // Usage is recorded when the response carries it (an OpenAI chat stream only with
        // stream_options.include_usage).
        let usage = evs
            .iter()
            .any(|e| matches!(e, EventBody::RequestSent { accepted: true, real_tokens: Some(_), .. }));
        assert!(usage || id == "openai-true", "{id}: usage recorded");
    }
    assert_eq!(turns, n, "every turn is journaled");
    // The reply was rebuilt from the stream and is the last message of the session.
    let j = Journal::open(&db, &Default::default()).expect("journal");
    let head = j.head("anthropic-true").expect("head");
    assert!(
        head.history.last().is_some_and(|m| m.content.starts_with("Done: ")),
        "{:?}",
        head.history.last()
    );
    // Credentials never reach the database.
    let bytes = std::fs::read(&db).expect("db");
    assert!(
        !bytes.windows(12).any(|w| w == b"sk-test-KEY\0" || w.starts_with(b"sk-ant-test")),
        "a key was journaled"
    );
}

fn replay(capture: &Path, dir: &Path) -> serde_json::Value {
    let o = Command::new(env!("CARGO_BIN_EXE_salvage"))
        .args(["replay", "--json", "--db"])
        .arg(dir.join("replay.db"))
        .arg(capture)
        .output()
        .expect("replay runs");
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)))
}

fn captures(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|r| {
            r.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn failures_pass_through_unchanged_and_their_captures_replay_to_the_same_class() {
    let cap = 150_000;
    let Setup { _rt, up: _up, upstream, dir, db } = plain_upstream(cap);
    let caps = dir.path().join("captures");
    let proxy = ProxyProc::start(&upstream, &db, &["--captures", caps.to_str().expect("utf-8")]);
    let cases = [
        ("anthropic", "413", false, 200_000, "payload_too_large"),
        ("anthropic", "overflow", true, 200_000, "context_overflow"),
        ("openai", "waf", false, 200_000, "waf_rejection"),
        ("openai", "reset", false, 600_000, "likely_payload"),
    ];
    for (i, (which, mode, stream, size, class)) in cases.iter().enumerate() {
        let spec = |base: &str| {
            serde_json::json!({"sdk": which, "base_url": base_url(base, which), "stream": stream, "mode": mode,
                "size": size, "session": format!("fail-{mode}")})
        };
        let direct = sdk(spec(&upstream));
        let via = sdk(spec(&proxy.url));
        assert!(direct.status != Some(200), "{mode}: the upstream must reject: {direct:?}");
        if *mode == "reset" {
            // The connection drops as the upstream's did (the exact wording is the client's).
            assert!(via.error.as_deref().is_some_and(|e| e.contains("Connection")), "{via:?}");
        } else {
            assert_eq!(direct, via, "{mode}: the client sees the upstream's rejection unchanged");
        }
        // Wait for the writer to write the capture.
        let t0 = std::time::Instant::now();
        while captures(&caps).len() < i + 1 && t0.elapsed().as_secs() < 20 {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let files = captures(&caps);
        let file = files
            .iter()
            .find(|f| f.to_string_lossy().contains(&format!("fail-{mode}")))
            .unwrap_or_else(|| panic!("{mode}: no capture in {files:?}"));
        let text = std::fs::read_to_string(file).expect("capture");
        #[cfg(unix)]
        {
            // Owner-only, as every output: captures hold conversations.
            use std::os::unix::fs::PermissionsExt;
            let perm = |p: &Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
            assert_eq!((perm(&caps), perm(file)), (0o700, 0o600), "{mode}: capture permissions");
        }
        assert!(
            !text.contains("sk-ant-test-KEY") && !text.contains("sk-test-KEY"),
            "no credentials in captures"
        );
        let out = replay(file, dir.path());
        let row = &out["captures"][0];
        let fidelity = row["checks"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["name"] == "fidelity"))
            .cloned()
            .unwrap_or_default();
        assert_eq!(fidelity["ok"], true, "{mode}: {row:#}");
        assert!(
            fidelity["detail"]
                .as_str()
                .is_some_and(|d| d.contains(&format!("simulated rejection is {class}"))),
            "{mode}: {fidelity}"
        );
        assert!(
            row["checks"].as_array().is_some_and(|c| c.iter().all(|c| c["ok"] == true)),
            "{mode}: {row:#}"
        );
    }
    proxy.stop();
    let j = Journal::open(&db, &Default::default()).expect("journal");
    for (id, evs) in events(&db) {
        assert!(
            evs.iter().any(|e| matches!(e, EventBody::ProviderError { .. })),
            "{id}: the failure is journaled"
        );
        // The turn ended when its failure went back to the client: the journal says how, not
        // `incomplete` (a run cut short).
        assert!(matches!(evs.last(), Some(EventBody::RunEnded { .. })), "{id}: {evs:#?}");
        assert_eq!(j.session_outcome(&id).expect("outcome"), Some("exhausted"), "{id}");
    }
}

#[test]
fn with_recover_the_sdk_call_succeeds_and_the_journal_shows_the_rung() {
    let cap = 150_000;
    let Setup { _rt, up, upstream, dir, db } = plain_upstream(cap);
    let proxy = ProxyProc::start(
        &upstream,
        &db,
        &["--recover", "--captures", dir.path().join("c").to_str().expect("utf-8")],
    );
    let cases = [
        ("anthropic", "413", false, 400_000),
        ("anthropic", "overflow", true, 400_000),
        ("openai", "waf", true, 400_000),
        ("openai", "reset", false, 700_000),
        ("openai-responses", "413", false, 400_000),
    ];
    for (which, mode, stream, size) in cases {
        let session = format!("recover-{which}-{mode}");
        let r =
            sdk(serde_json::json!({"sdk": which, "base_url": base_url(&proxy.url, which), "stream": stream,
            "mode": mode, "size": size, "session": session}));
        assert_eq!(r.status, Some(200), "{which} {mode}: {r:?}");
        assert!(r.text.as_deref().is_some_and(|t| t.starts_with("Done: ")), "{which} {mode}: {r:?}");
    }
    proxy.stop();
    let sizes = up.seen.sizes();
    assert!(
        sizes.iter().filter(|s| **s <= cap).count() >= cases.len(),
        "retries went out smaller: {sizes:?}"
    );
    for (id, evs) in events(&db) {
        let rung = evs.iter().find_map(|e| match e {
            EventBody::RecoveryAttempt {
                rung, outcome: salvage_types::event::StepOutcome::Applied, ..
            } => Some(*rung),
            _ => None,
        });
        assert!(rung.is_some(), "{id}: a rung applied: {evs:#?}");
        assert!(
            evs.iter()
                .any(|e| matches!(e, EventBody::RequestSent { accepted: true, attempt, .. } if *attempt > 0)),
            "{id}"
        );
        // The reply, then the end of the run the proxy writes with the turn.
        let n = evs.len();
        assert!(matches!(evs.get(n.wrapping_sub(2)), Some(EventBody::ResponseReceived { .. })), "{id}");
        assert_eq!(
            evs.last(),
            Some(&EventBody::RunEnded { outcome: salvage_types::capture::Outcome::Recovered }),
            "{id}"
        );
    }
    let j = Journal::open(&db, &Default::default()).expect("journal");
    for (id, _) in events(&db) {
        assert_eq!(j.session_outcome(&id).expect("outcome"), Some("recovered"), "{id}");
    }
    // What the rungs dropped is archived in the same database and resolves.
    let o = Command::new(env!("CARGO_BIN_EXE_salvage"))
        .args(["journal", "verify", "--db"])
        .arg(&db)
        .output()
        .expect("verify");
    assert!(o.status.success(), "journal verify: {}", String::from_utf8_lossy(&o.stdout));
}

#[test]
fn a_tls_upstream_is_trusted_through_upstream_ca() {
    let rt = runtime();
    let key = rcgen::KeyPair::generate().expect("key");
    let params = rcgen::CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
        .expect("params");
    let cert = params.self_signed(&key).expect("cert");
    let dir = tempfile::tempdir().expect("tmp");
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, cert.pem()).expect("write ca");
    let der = rustls::pki_types::CertificateDer::from(cert.der().to_vec());
    let pk = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).expect("key der");
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(vec![der], pk)
        .expect("server config");
    let up = rt.block_on(loopback::start(1 << 20, Some(std::sync::Arc::new(server)))).expect("upstream");
    let upstream = format!("https://localhost:{}", up.addr.port());
    let db = dir.path().join("s.db");
    let proxy = ProxyProc::start(&upstream, &db, &["--upstream-ca", ca.to_str().expect("utf-8")]);
    for stream in [false, true] {
        let r = sdk(
            serde_json::json!({"sdk": "anthropic", "base_url": proxy.url, "stream": stream, "size": 5_000, "session": format!("tls-{stream}")}),
        );
        assert_eq!(r.status, Some(200), "{r:?}");
        assert!(r.text.as_deref().is_some_and(|t| t.starts_with("Done: ")), "{r:?}");
    }
    proxy.stop();
    assert_eq!(events(&db).len(), 2);
    // Without the CA the certificate is refused: the client is told so by a 502.
    let proxy = ProxyProc::start(&upstream, &dir.path().join("t.db"), &[]);
    let r = sdk(serde_json::json!({"sdk": "anthropic", "base_url": proxy.url, "size": 500}));
    assert_eq!(r.status, Some(502), "{r:?}");
    assert!(r.error.as_deref().is_some_and(|e| e.contains("certificate")), "{r:?}");
    proxy.stop();
}

#[cfg(unix)]
#[test]
fn a_burst_of_connections_past_the_descriptor_limit_does_not_stop_the_proxy() {
    let Setup { _rt, up: _up, upstream, dir: _dir, db } = plain_upstream(1 << 20);
    // The proxy runs with few file descriptors (as under a low `ulimit -n`).
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -n 48 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_salvage"))
        .args(["proxy", "--listen", "127.0.0.1:0", "--upstream", &upstream, "--no-journal"])
        .arg("--db")
        .arg(&db)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("salvage proxy starts");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("first line");
    let addr = line.split_whitespace().nth(2).and_then(|u| u.strip_prefix("http://")).expect("address");
    let addr: std::net::SocketAddr = addr.parse().expect("socket address");
    // More connections at once than the proxy has descriptors for.
    let burst: Vec<std::net::TcpStream> =
        (0..80).filter_map(|_| std::net::TcpStream::connect(addr).ok()).collect();
    std::thread::sleep(std::time::Duration::from_millis(300));
    drop(burst);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let alive = child.try_wait().expect("status").is_none();
    let mut c = std::io::BufReader::new(std::net::TcpStream::connect(addr).expect("the proxy still listens"));
    let (status, _) = loopback::exchange(&mut c, "/v1/messages", &[], b"{}").expect("an answer");
    let _ = child.kill();
    let out = child.wait_with_output().expect("output");
    assert!(alive, "the proxy exited: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(status, 200);
}
