//! Scaling curves: the ladder, the pipeline and replay against history size (1–50 MB), and
//! restore against session length (1k–100k events). Each curve's growth is the exponent `k` of
//! `cost ≈ c · sizeᵏ` fitted by least squares on log-log over every point (not a ratio of its
//! endpoints, which hides a bend in the middle); the target is `k ≤ 1.1`. The ladder and the
//! pipeline archive into CCR, the product path. A timed run that fails fails its curve. Each
//! curve is rendered as an SVG plot into `target/bench/`.

use crate::harness::{fit_exponent, try_time};
use crate::ladder::{pipeline_once, rung3, Stores};
use crate::{Plan, Row};
use chrono::{TimeZone, Utc};
use salvage_journal::{HistoryChange, Journal, NewEvent};
use salvage_recovery::ladder;
use salvage_replay::synth::{agent_history, large_capture};
use salvage_types::event::EventBody;
use salvage_types::Message;
use std::path::Path;

/// One curve: `(size, seconds)` points.
struct Curve {
    name: &'static str,
    unit: &'static str,
    points: Vec<(f64, f64)>,
    /// The first failure of a timed run: the curve fails.
    failed: Option<String>,
}

impl Curve {
    fn new(name: &'static str, unit: &'static str) -> Self {
        Curve { name, unit, points: vec![], failed: None }
    }

    /// The growth exponent fitted over every point (least squares on log-log): 1 is linear.
    fn growth(&self) -> Option<f64> {
        fit_exponent(&self.points)
    }

    /// Adds the point at `x` unless the curve already failed; a failure stops the curve.
    fn measure(&mut self, x: f64, f: impl FnOnce() -> anyhow::Result<std::time::Duration>) {
        if self.failed.is_some() {
            return;
        }
        match f() {
            Ok(t) => self.points.push((x, t.as_secs_f64())),
            Err(e) => self.failed = Some(format!("at {x}: {e:#}")),
        }
    }
}

fn svg(c: &Curve, path: &Path) -> std::io::Result<()> {
    let (w, h, pad) = (640.0, 400.0, 60.0);
    let max_x = c.points.iter().map(|p| p.0).fold(0.0, f64::max).max(1e-9);
    let max_y = c.points.iter().map(|p| p.1).fold(0.0, f64::max).max(1e-12);
    let sx = |x: f64| pad + x / max_x * (w - 2.0 * pad);
    let sy = |y: f64| h - pad - y / max_y * (h - 2.0 * pad);
    let mut s = format!("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
    s += &format!(
        "<text x=\"{pad}\" y=\"24\" font-size=\"15\">{} — fitted exponent {:.2} (1 = linear)</text>\n",
        c.name,
        c.growth().unwrap_or(f64::NAN)
    );
    s += &format!("<line x1=\"{pad}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/><line x1=\"{pad}\" y1=\"{pad}\" x2=\"{pad}\" y2=\"{}\" stroke=\"black\"/>\n", h - pad, w - pad, h - pad, h - pad);
    // The linear reference through the first point.
    if let Some(&(x0, y0)) = c.points.first() {
        let y1 = y0 * max_x / x0.max(1e-12);
        s += &format!(
            "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#bbb\" stroke-dasharray=\"4\"/>\n",
            sx(x0),
            sy(y0),
            sx(max_x),
            sy(y1.min(max_y * 1.5))
        );
    }
    let pts: Vec<String> = c.points.iter().map(|(x, y)| format!("{:.1},{:.1}", sx(*x), sy(*y))).collect();
    s += &format!(
        "<polyline fill=\"none\" stroke=\"#1f6feb\" stroke-width=\"2\" points=\"{}\"/>\n",
        pts.join(" ")
    );
    for (x, y) in &c.points {
        s += &format!("<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"#1f6feb\"/><text x=\"{:.1}\" y=\"{:.1}\">{:.1} ms</text>\n", sx(*x), sy(*y), sx(*x) + 4.0, sy(*y) - 6.0, y * 1e3);
        s += &format!(
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{x}</text>\n",
            sx(*x),
            h - pad + 18.0
        );
    }
    s += &format!(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n</svg>\n",
        w / 2.0,
        h - 12.0,
        c.unit
    );
    std::fs::write(path, s)
}

fn ts(n: u64) -> chrono::DateTime<Utc> {
    Utc.timestamp_millis_opt(1_764_000_000_000 + i64::try_from(n).unwrap_or(0)).single().unwrap_or_default()
}

/// Runs the curves and writes the plots.
pub fn run(plan: &Plan) -> anyhow::Result<Vec<Row>> {
    let mut curves = size_curves(plan)?;
    curves.push(restore_curve(plan)?);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench");
    std::fs::create_dir_all(&dir)?;
    let mut rows = Vec::new();
    for c in &curves {
        let file = dir.join(format!(
            "{}.svg",
            c.name.split_whitespace().take(3).collect::<Vec<_>>().join("-").replace(['(', ')', ','], "")
        ));
        svg(c, &file)?;
        rows.push(curve_row(c, &file));
    }
    Ok(rows)
}

/// The ladder, the pipeline and replay against history size.
fn size_curves(plan: &Plan) -> anyhow::Result<Vec<Curve>> {
    let sizes: &[usize] = if plan.scale < 1.0 { &[1, 5, 10] } else { &[1, 5, 10, 25, 50] };
    let mut ladder_c = Curve::new("rung 3 with shrink, archiving into CCR", "history MB");
    let mut pipe_c =
        Curve::new("compaction pipeline (microcompact, trim, level 3), archiving into CCR", "history MB");
    let mut replay_c = Curve::new("replay of a synthetic capture", "history MB");
    let dir = tempfile::tempdir()?;
    for &mb in sizes {
        let h: Vec<Message> = agent_history(mb << 20, 90 + mb as u64);
        let rounds = plan.rounds.min(5);
        let mut stores = Stores::open(dir.path(), &format!("rung{mb}-"), rounds + 1)?;
        ladder_c.measure(mb as f64, || try_time(rounds, || rung3(&h, Some(stores.take()?))));
        let rounds = plan.rounds.min(3);
        let mut stores = Stores::open(dir.path(), &format!("pipe{mb}-"), rounds + 1)?;
        pipe_c.measure(mb as f64, || try_time(rounds, || pipeline_once(&h, Some(stores.take()?))));
        drop(h);
        replay_point(&mut replay_c, mb, dir.path())?;
    }
    Ok(vec![ladder_c, pipe_c, replay_c])
}

/// One replay of a synthetic capture of `mb` MB, journaled into a file.
fn replay_point(curve: &mut Curve, mb: usize, dir: &Path) -> anyhow::Result<()> {
    let capture = large_capture(mb << 20, 300 + mb as u64, salvage_types::capture::RejectStyle::Http413);
    // Journals opened beforehand, one per run, as files: the replay writes what it does live.
    let mut journals = (0..2)
        .map(|i| Journal::open(&dir.join(format!("replay{mb}-{i}.db")), &Default::default()))
        .collect::<Result<Vec<_>, _>>()?
        .into_iter();
    curve.measure(mb as f64, || {
        try_time(1, || {
            let mut j = journals.next().ok_or_else(|| anyhow::anyhow!("out of journals"))?;
            let mut s = salvage_recovery::summarizer::Builtin;
            let opts = salvage_replay::driver::Options {
                summarizer: &mut s,
                hooks: &mut salvage_recovery::compaction::NoHooks,
                start: ts(0),
                session: "s".into(),
                rung3_keep: ladder::RUNG3_KEEP,
                clock: &salvage_types::SystemClock,
            };
            std::hint::black_box(salvage_replay::driver::replay(&capture, &mut j, opts)?);
            Ok(())
        })
    });
    Ok(())
}

/// Restore against session length.
fn restore_curve(plan: &Plan) -> anyhow::Result<Curve> {
    let lengths: &[u64] = if plan.scale < 1.0 { &[1_000, 10_000] } else { &[1_000, 10_000, 100_000] };
    let mut restore_c = Curve::new("restore at the last event", "session events");
    for &n in lengths {
        let store = session_of(n)?;
        let last = store.version("s")?;
        // A fresh handle: no in-memory head, the fold starts from the nearest snapshot.
        restore_c.measure(n as f64, || {
            try_time(plan.rounds.min(5), || {
                std::hint::black_box(store.state_at("s", last - 1)?);
                Ok(())
            })
        });
    }
    Ok(restore_c)
}

/// An in-memory journal holding one session of `n` events: mostly requests, with a message
/// appended every tenth event (up to 1,000 messages).
fn session_of(n: u64) -> anyhow::Result<Journal> {
    let mut j = Journal::in_memory()?;
    j.start_session("s", "", NewEvent::new("e0", ts(0), EventBody::MessageAppended { count: 0 }))?;
    let mut batch = Vec::new();
    for k in 1..n {
        let e = if k % 10 == 0 && k / 10 <= 1000 {
            NewEvent::new(format!("e{k}"), ts(k), EventBody::MessageAppended { count: 1 }).with_history(
                HistoryChange::Append(vec![Message::user(format!("message {k}: {}", "x".repeat(200)))]),
            )
        } else {
            NewEvent::new(
                format!("e{k}"),
                ts(k),
                EventBody::RequestSent {
                    attempt: 0,
                    bytes: k,
                    estimated_tokens: k,
                    real_tokens: None,
                    history_digest: String::new(),
                    accepted: true,
                },
            )
        };
        batch.push(e);
        if batch.len() == 1000 {
            j.append("s", None, std::mem::take(&mut batch))?;
        }
    }
    j.append("s", None, batch)?;
    Ok(j)
}

/// A curve's row: its fitted exponent against the target, or why it has none.
fn curve_row(c: &Curve, file: &Path) -> Row {
    let detail =
        c.points.iter().map(|(x, y)| format!("{x}: {:.1} ms", y * 1e3)).collect::<Vec<_>>().join(", ");
    let workload = format!("scaling: {} (vs {})", c.name, c.unit);
    match (&c.failed, c.growth()) {
        (Some(e), _) => {
            Row::failed(&workload, "linear growth (exponent 1)", "<= 1.1", &anyhow::anyhow!("{e}"))
        }
        (None, None) => Row::failed(
            &workload,
            "linear growth (exponent 1)",
            "<= 1.1",
            &anyhow::anyhow!("fewer than two points"),
        ),
        (None, Some(k)) => Row {
            workload,
            baseline: "linear growth (exponent 1)".into(),
            ratio: k,
            target: "<= 1.1 (exponent)".into(),
            met: k <= 1.1,
            detail: format!("fitted exponent {k:.2}; {detail}; plot {}", file.display()),
        },
    }
}
