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

/// Runs `baseline` and `ours` alternately for `rounds` rounds (after one warm-up each).
pub fn interleave(rounds: usize, mut baseline: impl FnMut(), mut ours: impl FnMut()) -> Pair {
    baseline();
    ours();
    let mut a = Vec::with_capacity(rounds);
    let mut b = Vec::with_capacity(rounds);
    for _ in 0..rounds.max(1) {
        let t = Instant::now();
        baseline();
        a.push(t.elapsed());
        let t = Instant::now();
        ours();
        b.push(t.elapsed());
    }
    Pair { baseline: median(a), ours: median(b) }
}

/// Times one closure: the median of `rounds` runs.
pub fn time(rounds: usize, mut f: impl FnMut()) -> Duration {
    f();
    median(
        (0..rounds.max(1))
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed()
            })
            .collect(),
    )
}

/// [`interleave`] for closures that can fail: the first failure ends the measurement and is
/// returned, so a workload that errors can never be timed as a fast one.
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
