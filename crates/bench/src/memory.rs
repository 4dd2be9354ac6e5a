//! `salvage import` and `salvage replay` as users run them, each a child process measured by its
//! max RSS (its exit status read: a child that fails fails its row): import of a 50 MB request
//! body (time against serde_json parsing that body, peak memory against the body), and peak
//! memory on hostile shapes within the ceilings — a JSON bomb of small objects inside tool-call
//! arguments, one 60 MB line — for both commands.

use crate::harness::{run_child, try_interleave};
use crate::replay::salvage_exe;
use crate::{Plan, Row};
use salvage_types::capture::RequestFormat;
use serde_json::json;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

const MB: f64 = 1024.0 * 1024.0;

fn mb(n: u64) -> String {
    format!("{:.1} MB", n as f64 / MB)
}

/// `salvage import` of a body into a capture written to `out`.
fn import(body: &Path, from: &str, out: &Path) -> anyhow::Result<crate::harness::ChildRun> {
    let exe = salvage_exe()?;
    let args: [&OsStr; 9] = [
        "import".as_ref(),
        "--from".as_ref(),
        from.as_ref(),
        body.as_os_str(),
        "--status".as_ref(),
        "413".as_ref(),
        "--message".as_ref(),
        "413 Payload Too Large".as_ref(),
        "-o".as_ref(),
    ];
    let mut all: Vec<&OsStr> = args.to_vec();
    all.push(out.as_os_str());
    run_child(&exe, &all)
}

/// `salvage replay` of one capture, journaling into a fresh database in `dir`.
fn replay(capture: &Path, dir: &Path) -> anyhow::Result<crate::harness::ChildRun> {
    let exe = salvage_exe()?;
    let db = tempfile::Builder::new().suffix(".db").tempfile_in(dir)?.into_temp_path();
    std::fs::remove_file(&db)?;
    let r = run_child(
        &exe,
        &[
            "replay".as_ref(),
            capture.as_os_str(),
            "--jobs".as_ref(),
            "1".as_ref(),
            "--db".as_ref(),
            db.as_os_str(),
        ],
    );
    for ext in ["", "-wal", "-shm"] {
        let _ignored = std::fs::remove_file(format!("{}{ext}", db.display()));
    }
    r
}

/// A peak-memory row for `salvage replay` of the capture `make` writes into a temporary folder
/// (it returns the file and the size the target is relative to): met when the peak is at most
/// `factor` times that size plus `plus` bytes.
pub fn replay_peak(
    workload: &str,
    baseline: &str,
    factor: f64,
    plus: u64,
    make: impl FnOnce(&Path) -> anyhow::Result<(PathBuf, u64)>,
) -> Row {
    let target = if plus == 0 { format!("<= {factor}x") } else { format!("<= {factor}x + {}", mb(plus)) };
    let measured = (|| -> anyhow::Result<Row> {
        let dir = tempfile::tempdir()?;
        let (file, size) = make(dir.path())?;
        let run = replay(&file, dir.path())?;
        Ok(child_row(workload, baseline, &target, &run, size, (factor, plus)))
    })();
    measured.unwrap_or_else(|e| Row::failed(workload, baseline, &target, &e))
}

/// The row of one child run's peak against `factor × size + plus`, its wall time as the detail.
fn child_row(
    workload: &str,
    baseline: &str,
    target: &str,
    run: &crate::harness::ChildRun,
    size: u64,
    (factor, plus): (f64, u64),
) -> Row {
    let wall = format!("{:.2} s", run.wall.as_secs_f64());
    peak_row(workload, baseline, target, run.peak, size, factor, plus, &wall)
}

#[allow(clippy::too_many_arguments)]
fn peak_row(
    workload: &str,
    baseline: &str,
    target: &str,
    peak: u64,
    size: u64,
    factor: f64,
    plus: u64,
    extra: &str,
) -> Row {
    Row {
        workload: workload.into(),
        baseline: baseline.into(),
        ratio: peak as f64 / size.max(1) as f64,
        target: target.into(),
        met: peak as f64 <= factor * size as f64 + plus as f64,
        detail: format!("peak RSS {} for {} ({extra})", mb(peak), mb(size)),
    }
}

/// A realistic agent session of about `bytes` as an Anthropic Messages body.
fn agent_body(bytes: usize) -> anyhow::Result<Vec<u8>> {
    let history = salvage_replay::synth::agent_history(bytes, 77);
    let request = salvage_wire::bare_request(RequestFormat::Anthropic, Some("claude-sonnet-4-5"));
    Ok(serde_json::to_vec(&salvage_wire::request_body(&request, &history))?)
}

/// An OpenAI chat body whose one tool call carries `bytes` of `[{},{},…]` as its arguments.
fn bomb_body(bytes: usize) -> anyhow::Result<Vec<u8>> {
    let mut args = String::with_capacity(bytes + 2);
    args.push('[');
    while args.len() + 4 < bytes {
        args.push_str("{},");
    }
    args.push_str("{}]");
    Ok(serde_json::to_vec(&json!({
        "model": "gpt-4o",
        "messages": [
            {"role": "user", "content": "Build the index."},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "write_index", "arguments": args}}
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "written"},
            {"role": "user", "content": "Now check it."}
        ]
    }))?)
}

/// Writes `expect: {outcome: exhausted}` into the capture at `path`.
fn expect_exhausted(path: &Path) -> anyhow::Result<()> {
    let mut c: serde_json::Value = serde_json::from_slice(&std::fs::read(path)?)?;
    let o = c.as_object_mut().ok_or_else(|| anyhow::anyhow!("the capture is not an object"))?;
    o.insert("expect".into(), json!({"outcome": "exhausted"}));
    std::fs::write(path, serde_json::to_vec(&c)?)?;
    Ok(())
}

/// An Anthropic body on one line whose tool result is `bytes` of text.
fn long_line_body(bytes: usize) -> anyhow::Result<Vec<u8>> {
    let log = salvage_replay::synth::mixed(bytes, 9);
    Ok(serde_json::to_vec(&json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 8192,
        "messages": [
            {"role": "user", "content": "Read the build log."},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "build.log"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": log}]},
            {"role": "assistant", "content": "The log is long; the failure is near the end."},
            {"role": "user", "content": "Fix it."}
        ]
    }))?)
}

/// Runs the import and hostile-shape workloads.
pub fn run(plan: &Plan) -> anyhow::Result<Vec<Row>> {
    let mut rows = import_body(plan);
    for (name, from, make) in [
        ("a JSON bomb of small objects in tool-call arguments", "openai", bomb_body as fn(usize) -> _),
        ("one 60 MB line", "anthropic", long_line_body),
    ] {
        let size = if name.contains("bomb") { 48 << 20 } else { 60_000_000 };
        let (plus, factor) = (64 << 20, 4.0);
        let target = format!("<= {factor}x + {}", mb(plus));
        let dir = tempfile::tempdir()?;
        let body = dir.path().join("body.json");
        let capture = dir.path().join("capture.json");
        let written = make(size).and_then(|b| Ok(std::fs::write(&body, b)?));
        let import_row = format!("peak memory, salvage import of {name}");
        let row = written.and_then(|()| {
            let run = import(&body, from, &capture)?;
            let size = std::fs::metadata(&body)?.len();
            Ok(child_row(&import_row, "body file size", &target, &run, size, (factor, plus)))
        });
        let imported = row.is_ok();
        rows.push(row.unwrap_or_else(|e| Row::failed(&import_row, "body file size", &target, &e)));
        // No rung can cut a tool call's arguments, so the bomb's replay is exhausted by design;
        // the capture says so, as a corpus capture would, and its replay then exits 0 (the
        // convergence check fails an exhausted run that was not expected).
        let imported = imported && (!name.contains("bomb") || expect_exhausted(&capture).is_ok());
        let replay_row = format!("peak memory, salvage replay of {name}");
        rows.push(if imported {
            replay_peak(&replay_row, "capture file size", factor, plus, |_| {
                Ok((capture.clone(), std::fs::metadata(&capture)?.len()))
            })
        } else {
            Row::failed(
                &replay_row,
                "capture file size",
                &target,
                &anyhow::anyhow!("the import before it failed"),
            )
        });
    }
    Ok(rows)
}

/// Import of a 50 MB body: time against serde_json parsing it (both read the file), and peak
/// memory against its size.
fn import_body(plan: &Plan) -> Vec<Row> {
    let (time_row, mem_row) =
        ("import of a 50 MB request body (salvage import)", "peak memory, import of a 50 MB request body");
    let measured = (|| -> anyhow::Result<Vec<Row>> {
        let dir = tempfile::tempdir()?;
        let body = dir.path().join("body.json");
        let out = dir.path().join("capture.json");
        std::fs::write(&body, agent_body(50 << 20)?)?;
        let size = std::fs::metadata(&body)?.len();
        let mut peak = 0u64;
        let pair = try_interleave(
            plan.rounds.clamp(3, 5) - 2,
            || {
                let bytes = std::fs::read(&body)?;
                let v: serde_json::Value = serde_json::from_slice(&bytes)?;
                std::hint::black_box(v);
                Ok(())
            },
            || {
                peak = peak.max(import(&body, "anthropic", &out)?.peak);
                Ok(())
            },
        )?;
        Ok(vec![
            Row::at_most(
                time_row,
                "read + serde_json parse of the body",
                pair.cost_ratio(),
                2.0,
                format!(
                    "{:.0} ms vs {:.0} ms parse ({})",
                    pair.ours.as_secs_f64() * 1e3,
                    pair.baseline.as_secs_f64() * 1e3,
                    mb(size)
                ),
            ),
            peak_row(mem_row, "body file size", "<= 3x", peak, size, 3.0, 0, "max over the timed runs"),
        ])
    })();
    measured.unwrap_or_else(|e| {
        vec![
            Row::failed(time_row, "read + serde_json parse of the body", "<= 2x", &e),
            Row::failed(mem_row, "body file size", "<= 3x", &e),
        ]
    })
}
