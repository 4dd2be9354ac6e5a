//! Interleaved measurement: baseline and workload alternate (A B A B …) over several rounds in
//! one process, and the medians are compared, so machine noise hits both alike.

use std::time::{Duration, Instant};

/// The medians of one interleaved measurement.
#[derive(Debug, Clone, Copy)]
pub struct Pair {
    /// Median time of the baseline.
    pub baseline: Duration,
    /// Median time of the workload.
    pub ours: Duration,
}

impl Pair {
    /// Baseline time over ours: above 1 means ours is faster (use for throughput targets).
    pub fn speed_ratio(&self) -> f64 {
        self.baseline.as_secs_f64() / self.ours.as_secs_f64().max(1e-12)
    }

    /// Ours over baseline time: below 1 means ours is cheaper (use for cost targets).
    pub fn cost_ratio(&self) -> f64 {
        self.ours.as_secs_f64() / self.baseline.as_secs_f64().max(1e-12)
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Runs `baseline` and `ours` alternately for `rounds` rounds (after one warm-up each); the first
/// failure ends the measurement and is returned, so a workload that errors can never be timed as a fast one.
pub fn try_interleave(
    rounds: usize,
    mut baseline: impl FnMut() -> anyhow::Result<()>,
    mut ours: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<Pair> {
    baseline()?;
    ours()?;
    let mut a = Vec::with_capacity(rounds);
    let mut b = Vec::with_capacity(rounds);
    for _ in 0..rounds.max(1) {
        let t = Instant::now();
        baseline()?;
        a.push(t.elapsed());
        let t = Instant::now();
        ours()?;
        b.push(t.elapsed());
    }
    Ok(Pair { baseline: median(a), ours: median(b) })
}

/// Times a workload that can fail: the median of `rounds` runs; the first error is returned.
pub fn try_time(rounds: usize, mut f: impl FnMut() -> anyhow::Result<()>) -> anyhow::Result<Duration> {
    f()?;
    let mut v = Vec::with_capacity(rounds);
    for _ in 0..rounds.max(1) {
        let t = Instant::now();
        f()?;
        v.push(t.elapsed());
    }
    Ok(median(v))
}

/// The growth exponent `k` of `cost ≈ c · sizeᵏ`: the least-squares slope of ln(cost) over
/// ln(size). 1 is linear, 2 quadratic. `None` with fewer than two distinct positive sizes.
pub fn fit_exponent(points: &[(f64, f64)]) -> Option<f64> {
    let logs: Vec<(f64, f64)> =
        points.iter().filter(|(x, y)| *x > 0.0 && *y > 0.0).map(|(x, y)| (x.ln(), y.ln())).collect();
    let n = logs.len() as f64;
    if logs.len() < 2 {
        return None;
    }
    let mx = logs.iter().map(|p| p.0).sum::<f64>() / n;
    let my = logs.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = logs.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = logs.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (sxx > 0.0).then(|| sxy / sxx)
}

/// A child process's peak memory and wall time, measured by GNU time (`getrusage` of the
/// child: its maximum resident set size).
#[derive(Debug, Clone, Copy)]
pub struct ChildRun {
    /// Maximum resident set size in bytes.
    pub peak: u64,
    /// Wall time from spawn to exit.
    pub wall: Duration,
}

/// Runs `program args…` under `/usr/bin/time`, failing unless it exits 0 (its stderr ends the
/// error), and returns its peak RSS and wall time.
pub fn run_child(program: &std::path::Path, args: &[&std::ffi::OsStr]) -> anyhow::Result<ChildRun> {
    let report = tempfile::NamedTempFile::new()?;
    let t = Instant::now();
    let out = std::process::Command::new("/usr/bin/time")
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(report.path())
        .arg(program)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output()
        .map_err(|e| anyhow::anyhow!("/usr/bin/time (GNU time measures the child's max RSS): {e}"))?;
    let wall = t.elapsed();
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(3).collect();
        anyhow::bail!(
            "{} exited with {}: {}",
            program.file_name().unwrap_or_default().to_string_lossy(),
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
        );
    }
    let text = std::fs::read_to_string(report.path())?;
    let kb: u64 = text
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .ok_or_else(|| anyhow::anyhow!("GNU time reported no max RSS: {text:?}"))?;
    Ok(ChildRun { peak: kb * 1024, wall })
}

/// The frames of the `-wal` of the SQLite file at `db` (0 when there is none): the frames of its
/// current generation, those whose salts are the header's (a checkpoint that restarts the log
/// changes the salts and writes over the old frames from the start). Each frame is one page a
/// commit wrote, so the difference over a workload during which no checkpoint restarts the log
/// (checkpoints off, or a fresh file) is the pages it wrote: a count that does not depend on the
/// machine's load as its time does.
pub fn wal_frames(db: &std::path::Path) -> u64 {
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    let Ok(bytes) = std::fs::read(std::path::Path::new(&wal)) else { return 0 };
    let Some(header) = bytes.get(..32) else { return 0 };
    let page = header.get(8..12).map_or(0, |b| b.iter().fold(0usize, |n, x| n << 8 | usize::from(*x)));
    let salts = header.get(16..24);
    let frames = bytes.get(32..).unwrap_or_default().chunks_exact(page + 24);
    frames.take_while(|f| f.get(8..16) == salts).count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fit_recovers_the_exponent_of_a_power_law() {
        let pts = |k: f64| [1.0, 5.0, 10.0, 25.0, 50.0].map(|x: f64| (x, 0.003 * x.powf(k)));
        for k in [1.0, 1.5, 2.0] {
            let got = fit_exponent(&pts(k)).unwrap_or(f64::NAN);
            assert!((got - k).abs() < 1e-9, "fit {got} for exponent {k}");
        }
        // The ratio of endpoints hides a bend the fit sees: flat, then quadratic at the end.
        let bent = [(1.0, 1.0), (5.0, 1.0), (10.0, 1.0), (25.0, 25.0), (50.0, 100.0)];
        assert!(fit_exponent(&bent).unwrap_or(0.0) > 1.1);
        assert_eq!(fit_exponent(&[(1.0, 1.0)]), None);
    }

    #[test]
    fn a_failing_side_fails_the_measurement() {
        let mut n = 0;
        let r = try_interleave(
            3,
            || Ok(()),
            || {
                n += 1;
                if n == 2 {
                    anyhow::bail!("boom")
                } else {
                    Ok(())
                }
            },
        );
        assert_eq!(r.map(|_| ()).map_err(|e| e.to_string()), Err("boom".to_string()));
        assert!(try_time(3, || anyhow::bail!("no")).is_err());
    }

    #[test]
    fn a_child_that_fails_fails_its_measurement() {
        let sh = std::path::Path::new("/bin/sh");
        let bad = run_child(sh, &["-c".as_ref(), "echo nope >&2; exit 3".as_ref()]);
        let msg = bad.map(|_| ()).map_err(|e| e.to_string()).err().unwrap_or_default();
        assert!(msg.contains("nope"), "{msg}");
        let ok = run_child(
            sh,
            &["-c".as_ref(), "head -c 50000000 /dev/zero | tail -c 1 >/dev/null; exit 0".as_ref()],
        );
        assert!(ok.map(|r| r.peak > 0).unwrap_or(false));
    }

    #[test]
    fn wal_frames_counts_the_frames_sqlite_reports() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("w.db");
        assert_eq!(wal_frames(&path), 0, "no -wal yet");
        let conn = rusqlite::Connection::open(&path)?;
        conn.query_row("PRAGMA journal_mode=WAL", [], |_| Ok(()))?;
        conn.pragma_update(None, "wal_autocheckpoint", 0)?;
        conn.execute_batch("CREATE TABLE t (b BLOB)")?;
        for n in [10usize, 3000, 20_000] {
            conn.execute("INSERT INTO t VALUES (?1)", [vec![7u8; n]])?;
            // A passive checkpoint reports the frames in the log and leaves the log as it is.
            let log: i64 = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get(1))?;
            assert_eq!(wal_frames(&path), u64::try_from(log)?, "after a {n}-byte row");
        }
        Ok(())
    }
}
