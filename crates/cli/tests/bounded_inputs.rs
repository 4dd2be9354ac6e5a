//! Hostile inputs every reader refuses the same way (exit 2, one error naming the file, nothing
//! written): JSON bombs under `import --from auto` (findings 04), and devices, FIFOs and endless
//! streams given to the commands that read a file or stdin (finding 10). Each run is held under
//! `ulimit -v` (a reader that builds the bomb or reads `/dev/zero` to the end fails with an
//! allocation error instead of passing) and killed after 20 s (a reader blocked on a FIFO fails
//! instead of hanging the suite). And outputs: `-o` and `--bless` write through symlinks and
//! refuse to replace a FIFO (finding 07).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Address space allowed to a run, in KiB.
const VMEM_KB: u64 = 600_000;

/// `salvage ARGS` in `dir` under the address-space ceiling, stdin from `stdin` (else closed);
/// killed after 20 s. Returns (exit code, stdout, stderr); a killed run has no exit code.
fn run(dir: &Path, args: &[&str], stdin: Option<&Path>) -> (Option<i32>, String, String) {
    let mut c = Command::new("sh");
    // Standard input is bounded by the capture ceiling: a small one keeps `< /dev/zero` short.
    c.env("SALVAGE_MAX_CAPTURE", "64MB");
    c.arg("-c")
        .arg(format!("ulimit -v {VMEM_KB} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_salvage"))
        .args(args)
        .current_dir(dir)
        .env("SALVAGE_DB", dir.join("x.db"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    match stdin {
        Some(p) => c.stdin(std::fs::File::open(p).unwrap()),
        None => c.stdin(Stdio::null()),
    };
    let mut child = c.spawn().unwrap();
    // Drained on threads, so a chatty child never blocks on a full pipe.
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut so, &mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut se, &mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (status.and_then(|s| s.code()), out.join().unwrap(), err.join().unwrap())
}

/// Asserts a refusal: exit 2, one `salvage: error:` line containing every one of `needles`.
fn refused(dir: &Path, args: &[&str], stdin: Option<&Path>, needles: &[&str]) {
    let (code, _, err) = run(dir, args, stdin);
    assert_eq!(code, Some(2), "{args:?} (stdin {stdin:?}): {err}");
    assert!(err.lines().any(|l| l.starts_with("salvage: error:")), "{args:?}: {err}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: {n:?} not in {err}");
    }
}

/// `n` zeros as a JSON array's items: 2 bytes a value, about 36 bytes a value once parsed.
fn zeros(n: usize) -> String {
    let mut s = String::with_capacity(n * 2);
    for i in 0..n {
        if i > 0 {
            s.push(',');
        }
        s.push('0');
    }
    s
}

/// Finding 04: `--from auto` detected the format by parsing the whole file before the bomb scan
/// the importers run: a 30 MB body of 15 M zeros (over 1 GB once parsed) is now refused by the
/// scan before detection, as under `--from openai`, and so is a JSON Lines transcript whose
/// first line is the bomb.
#[test]
fn auto_detection_refuses_a_bomb_before_parsing_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let junk = zeros(15_000_000);
    std::fs::write(
        d.join("zeros.json"),
        format!(r#"{{"model":"m","messages":[{{"role":"user","content":"x"}}],"junk":[{junk}]}}"#),
    )
    .unwrap();
    std::fs::write(
        d.join("zeros.jsonl"),
        format!(
            "{{\"sessionId\":\"s\",\"uuid\":\"u1\",\"type\":\"user\",\"junk\":[{junk}]}}\n{{\"sessionId\":\"s\",\"uuid\":\"u2\",\"type\":\"user\"}}\n"
        ),
    )
    .unwrap();
    drop(junk);
    for file in ["zeros.json", "zeros.jsonl"] {
        for from in ["auto", "openai"] {
            let args = ["import", "--from", from, file, "--status", "413", "-o", "out.json"];
            refused(d, &args, None, &[file, "JSON values", "refused before parsing"]);
            assert!(!d.join("out.json").exists(), "{args:?}: nothing written");
        }
    }
    // A body of the same size that is no bomb is still imported under the same ceiling.
    std::fs::write(
        d.join("long.json"),
        format!(r#"{{"model":"m","messages":[{{"role":"user","content":"{}"}}]}}"#, "x".repeat(30 << 20)),
    )
    .unwrap();
    let (code, _, err) = run(d, &["import", "long.json", "--status", "413", "-o", "out.json"], None);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("detected openai"), "{err}");
}

/// Finding 10: `ccr put`, `apply`, `replay --baseline` and the stdin of `classify`, `apply` and
/// `ccr put -` read through the bounded reader of `import` and `replay`: a device or a FIFO is
/// refused before it is read (nothing blocks), standard input stops at SALVAGE_MAX_CAPTURE, and
/// a baseline's JSON is scanned for a bomb before it is parsed.
#[test]
fn every_reader_refuses_devices_fifos_and_endless_streams() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    assert!(Command::new("mkfifo").arg(d.join("fifo")).status().unwrap().success());
    let capture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/corpus/auth-401.json");
    let c = capture.to_str().unwrap();
    for (node, kind) in [("/dev/zero", "character device"), ("fifo", "FIFO")] {
        let not_regular = [node, kind, "not a regular file"];
        refused(d, &["ccr", "put", node], None, &not_regular);
        refused(d, &["apply", "rung1", node], None, &not_regular);
        refused(d, &["replay", c, "--no-journal", "--baseline", node], None, &not_regular);
        // A capture that is a FIFO or a device is named for what it is, not "no such file".
        refused(d, &["replay", node, "--no-journal"], None, &[node, kind, "not a capture file"]);
    }
    // Inside a folder it is a failed row (memory_cli.rs), named for what it is, with no hint at a
    // flag replay does not have.
    std::fs::create_dir(d.join("folder")).unwrap();
    assert!(Command::new("mkfifo").arg(d.join("folder/x.json")).status().unwrap().success());
    let (code, out, err) = run(d, &["replay", "folder", "--no-journal"], None);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(out.contains("x.json") && out.contains("a FIFO, not a regular file"), "{out}");
    assert!(!out.contains("--allow-special") && !err.contains("--allow-special"), "{out}{err}");
    // import has the flag, and says so.
    refused(d, &["import", "fifo"], None, &["FIFO", "give --allow-special"]);
    let zero = Path::new("/dev/zero");
    let over = ["<stdin>", "over the", "limit"];
    refused(d, &["classify"], Some(zero), &over);
    refused(d, &["apply", "rung1"], Some(zero), &over);
    refused(d, &["apply", "rung1", "-"], Some(zero), &over);
    refused(d, &["ccr", "put", "-"], Some(zero), &over);

    std::fs::write(d.join("bb.json"), format!(r#"{{"captures":[],"junk":[{}]}}"#, zeros(15_000_000)))
        .unwrap();
    refused(d, &["replay", c, "--no-journal", "--baseline", "bb.json"], None, &["bb.json", "JSON values"]);

    // Regular files and bounded stdin still work.
    std::fs::write(d.join("blob.txt"), b"archived text").unwrap();
    let (code, out, err) = run(d, &["ccr", "put", "blob.txt"], None);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("ccr:"), "{out}");
    std::fs::write(d.join("failure.json"), br#"{"status":413,"message":"413 Payload Too Large"}"#).unwrap();
    let (code, out, err) = run(d, &["classify"], Some(&d.join("failure.json")));
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("payload"), "{out}");
}

/// Finding 07: `import -o` onto a FIFO is refused (exit 2, the FIFO kept, nothing read from it or
/// written); onto a symlink it writes the link's target; `replay --bless` on a symlinked capture
/// blesses the real capture and keeps the link.
#[test]
fn outputs_write_through_symlinks_and_refuse_fifos() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata");
    let body = root.join("samples/anthropic/messages-redacted-thinking.json");
    let b = body.to_str().unwrap();
    assert!(Command::new("mkfifo").arg(d.join("fifo")).status().unwrap().success());
    refused(
        d,
        &["import", b, "--status", "413", "-o", "fifo"],
        None,
        &["fifo", "a FIFO", "not a regular file"],
    );
    assert!(std::fs::symlink_metadata(d.join("fifo")).unwrap().file_type().is_fifo());

    std::fs::write(d.join("real.json"), b"keep me").unwrap();
    std::os::unix::fs::symlink("real.json", d.join("link.json")).unwrap();
    let (code, _, err) = run(d, &["import", b, "--status", "413", "-o", "link.json"], None);
    assert_eq!(code, Some(0), "{err}");
    assert!(std::fs::symlink_metadata(d.join("link.json")).unwrap().file_type().is_symlink());
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("real.json")).unwrap()).unwrap();
    assert_eq!(written["format"], "salvage.capture/1");

    std::fs::create_dir_all(d.join("real")).unwrap();
    std::fs::create_dir_all(d.join("corpus")).unwrap();
    let mut c: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("corpus/axios-413-sentence.json")).unwrap()).unwrap();
    c["expect"] = serde_json::json!({"outcome": "exhausted"});
    std::fs::write(d.join("real/c.json"), c.to_string()).unwrap();
    std::os::unix::fs::symlink("../real/c.json", d.join("corpus/c.json")).unwrap();
    let (code, _, err) = run(d, &["replay", "corpus", "--bless"], None);
    assert_eq!(code, Some(0), "{err}");
    assert!(std::fs::symlink_metadata(d.join("corpus/c.json")).unwrap().file_type().is_symlink());
    let blessed: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("real/c.json")).unwrap()).unwrap();
    assert_ne!(
        blessed["expect"]["outcome"], "exhausted",
        "the real capture is blessed: {}",
        blessed["expect"]
    );
}
