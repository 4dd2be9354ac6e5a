//! Running many captures: file discovery, parallel jobs with a deterministic order, reports.

use crate::checks::{compare, observed, rewind_check, run_checks_with, Check};
use crate::driver::{history_digest, replay_history, Options, Run};
use salvage_journal::Journal;
use salvage_recovery::compaction::{Hooks, NoHooks};
use salvage_recovery::summarizer::Summarizer;
use salvage_store::{Options as StoreOptions, Store};
use salvage_types::capture::{Capture, CaptureError, Outcome};
use salvage_types::Clock;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// One capture's report (the `--json` shape of `cli.md`).
#[derive(Debug, Clone, Serialize)]
pub struct CaptureReport {
    /// Capture id.
    pub id: String,
    /// File.
    pub file: String,
    /// Outcome.
    pub outcome: Outcome,
    /// Recovery attempts after the first rejection.
    pub attempts: u32,
    /// Rung that succeeded.
    pub rung: Option<u8>,
    /// Body size of every request, attempt 0 first.
    pub request_bytes: Vec<u64>,
    /// Estimated tokens of every request.
    pub estimated_tokens: Vec<u64>,
    /// Real (BPE) tokens of every request that reached the provider.
    pub real_tokens: Vec<Option<u64>>,
    /// Whether `expect` was met (`None` without `expect`).
    pub expect_met: Option<bool>,
    /// What differs from `expect`.
    pub expect_diffs: Vec<String>,
    /// The checks.
    pub checks: Vec<Check>,
    /// The journal session.
    pub session: Option<String>,
    /// Messages for people.
    pub messages: Vec<String>,
    /// The outcome to bless into `expect` (the observed outcome fields, the expected events kept).
    #[serde(skip)]
    pub blessed: Option<salvage_types::capture::Expect>,
    /// What still differs with `blessed` as the expectation: the hand-written expected events
    /// `--bless` keeps.
    #[serde(skip)]
    pub blessed_diffs: Vec<String>,
}

impl CaptureReport {
    /// True when every check holds and the expectation (if any) is met.
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.ok) && self.expect_met != Some(false)
    }

    /// After `--bless` wrote [`CaptureReport::blessed`] into the capture: the run is judged
    /// against that expectation (the outcome fields now hold; expected events may still not), and
    /// each way the old one differed is kept as a message, for review.
    pub fn accept_blessed(&mut self) {
        if self.blessed.is_none() {
            return;
        }
        for d in std::mem::take(&mut self.expect_diffs) {
            self.messages.push(format!("blessed (was: {d})"));
        }
        self.expect_diffs = std::mem::take(&mut self.blessed_diffs);
        self.expect_met = Some(self.expect_diffs.is_empty());
    }
}

/// Every `*.json` under the paths (folders recursively), sorted, or the unreadable path.
pub fn discover(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            walk(p, &mut out)?;
        } else if p.is_file() {
            out.push(p.clone());
        } else {
            // Named for what it is: a FIFO or a device is not "missing".
            return Err(match std::fs::metadata(p) {
                Ok(m) => format!(
                    "{}: {}, not a capture file or folder",
                    p.display(),
                    salvage_types::input::describe(&m.file_type())
                ),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    format!("{}: no such file or folder", p.display())
                }
                Err(e) => format!("{}: {e}", p.display()),
            });
        }
    }
    Ok(out)
}

/// The captures under a folder, in order. A link to a folder inside it is not followed (as `find`
/// and ripgrep do by default): a link back up the tree replayed the same captures dozens of
/// times, and one to `/` walked the whole file system (adversarial review of the CLI, finding
/// 2). A link to a file is read; a folder given on the command line is walked even when it is a
/// link.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for p in entries {
        let link = std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink());
        if p.is_dir() {
            if !link {
                walk(&p, out)?;
            }
        } else if p.extension().is_some_and(|e| e == "json") {
            // A FIFO or device among them is a failed row of the run (read refuses it).
            out.push(p);
        }
    }
    Ok(())
}

/// Reads every capture first, so a bad file stops the run before any work (exit 2).
pub fn load_all(files: &[PathBuf]) -> Result<Vec<(PathBuf, Capture)>, CaptureError> {
    load_all_with(files, &salvage_types::capture::Limits::default())
}

/// [`load_all`] under the given ceilings.
pub fn load_all_with(
    files: &[PathBuf],
    limits: &salvage_types::capture::Limits,
) -> Result<Vec<(PathBuf, Capture)>, CaptureError> {
    files
        .iter()
        .map(|f| salvage_types::capture::read_capture_with(f, limits).map(|c| (f.clone(), c)))
        .collect()
}

/// 64 unpredictable bits (hex) for a session id: the standard library's random hasher keys
/// (seeded from the operating system) over the process id and the capture's index.
pub fn session_nonce(index: usize) -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_usize(index);
    format!("{:016x}", h.finish())
}

/// Replays one capture into a journal and checks it. The capture's history is handed to the
/// engine for the run rather than copied (peak memory: one copy of a hostile history fewer), and
/// is read back from the session's first event before the checks, verified against the BLAKE3 of
/// the history that went in; when the replay itself fails, the capture is left without it.
#[allow(clippy::too_many_arguments)]
pub fn run_one(
    file: &Path,
    capture: &mut Capture,
    journal: &mut Journal,
    summarizer: &mut dyn Summarizer,
    hooks: &mut dyn Hooks,
    session: String,
    start: chrono::DateTime<chrono::Utc>,
    keep_session: bool,
    rung3_keep: usize,
    clock: &dyn Clock,
) -> Result<CaptureReport, String> {
    let input = std::mem::take(&mut capture.history);
    let digest = history_digest(&input);
    let opts = Options { summarizer, hooks, start, session, rung3_keep, clock };
    let run: Run =
        replay_history(capture, input, journal, opts).map_err(|e| format!("{}: {e}", file.display()))?;
    // The check that restores histories runs before the input history is back in memory.
    let rewind = rewind_check(&run, journal);
    capture.history = input_back(journal, &run, &digest).map_err(|e| format!("{}: {e}", file.display()))?;
    let max = salvage_types::Config::from_env(&capture.settings).max_recovery_attempts;
    let checks = run_checks_with(&run, capture, journal, max, clock, rewind);
    let (met, diffs) = match &capture.expect {
        Some(e) => {
            let (m, d) = compare(e, &run, journal);
            (Some(m), d)
        }
        None => (None, Vec::new()),
    };
    let mut blessed = observed(&run);
    blessed.events = capture.expect.as_ref().map(|e| e.events.clone()).unwrap_or_default();
    // Its outcome fields are the observed ones: only expected events can still differ.
    let blessed_diffs =
        if blessed.events.is_empty() { Vec::new() } else { compare(&blessed, &run, journal).1 };
    Ok(CaptureReport {
        id: capture.id.clone(),
        file: file.display().to_string(),
        outcome: run.outcome,
        attempts: run.attempts,
        rung: run.rung,
        request_bytes: run.sent.iter().map(|s| s.bytes).collect(),
        estimated_tokens: run.sent.iter().map(|s| s.estimated_tokens).collect(),
        real_tokens: run.sent.iter().map(|s| s.real_tokens).collect(),
        expect_met: met,
        expect_diffs: diffs,
        checks,
        session: keep_session.then(|| run.session.clone()),
        messages: run.messages.clone(),
        blessed: Some(blessed),
        blessed_diffs,
    })
}

/// The input history of a run, restored from its session's first event and checked against the
/// digest of the history the engine was given.
fn input_back(
    journal: &Journal,
    run: &Run,
    digest: &[u8; 32],
) -> Result<Vec<salvage_types::Message>, String> {
    let v = journal
        .view_at(&run.session, run.started)
        .map_err(|e| format!("the input history from the journal's first event: {e}"))?;
    if &history_digest(&v.history) != digest {
        return Err(format!(
            "the journal's first event (seq {}) does not restore the capture's history",
            run.started
        ));
    }
    Ok(v.history)
}

/// Builds one summarizer per capture (recorded summaries are per capture).
pub type MakeSummarizer<'a> = dyn Fn(&Capture) -> Result<Box<dyn Summarizer>, String> + Sync + 'a;

/// Where runs journal.
#[derive(Debug, Clone)]
pub enum Target {
    /// A database file.
    File(PathBuf),
    /// In memory, discarded (`--no-journal`).
    Memory,
}

/// Runs captures on `jobs` threads; reports come back in input order. `make_summarizer` builds
/// one summarizer per capture (recorded summaries are per capture). `clock` dates the run (the
/// sessions' start) and the archive. Each capture lends its history to its run (see
/// [`run_one`]): it holds it again once its report is in.
pub fn run_all(
    captures: &mut [(PathBuf, Capture)],
    target: &Target,
    jobs: usize,
    make_summarizer: &MakeSummarizer<'_>,
    progress: &(dyn Fn(usize, usize, &str) + Sync),
    rung3_keep: usize,
    clock: &dyn Clock,
) -> Result<Vec<CaptureReport>, String> {
    let order = largest_first(captures);
    let total = captures.len();
    let slots: Vec<Mutex<&mut (PathBuf, Capture)>> = captures.iter_mut().map(Mutex::new).collect();
    let pool = Pool {
        captures: &slots,
        target,
        make_summarizer,
        progress,
        rung3_keep,
        clock,
        started: chrono::DateTime::<chrono::Utc>::from(clock.now()),
        order,
        next: AtomicUsize::new(0),
        done: AtomicUsize::new(0),
        results: Mutex::new((0..total).map(|_| None).collect()),
    };
    // The calling thread is one of the workers: with one job nothing is spawned, so the run
    // allocates in the same heap the captures were parsed in (a thread of its own gets a malloc
    // arena of its own, and the parsed history freed in one arena is not reused by the other:
    // about 8 MB more peak RSS for a 10 MB history).
    std::thread::scope(|s| {
        for _ in 1..jobs.max(1).min(total.max(1)) {
            s.spawn(|| pool.work());
        }
        pool.work();
    });
    let results = pool.results.into_inner().map_err(|_| "a replay thread panicked".to_string())?;
    results
        .into_iter()
        .enumerate()
        .map(|(i, r)| r.unwrap_or_else(|| Err(format!("capture {i} was not run"))))
        .collect()
}

/// Capture indices, largest history first, so one big capture does not finish last on a single
/// thread.
fn largest_first(captures: &[(PathBuf, Capture)]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..captures.len()).collect();
    order.sort_by_key(|&i| {
        std::cmp::Reverse(captures.get(i).map(|c| salvage_types::history_weight(&c.1.history)))
    });
    order
}

/// What the replay threads share: the work (each capture behind its own lock, taken by one
/// thread), the next capture to take, and the result slots.
struct Pool<'a, 'c> {
    captures: &'a [Mutex<&'c mut (PathBuf, Capture)>],
    target: &'a Target,
    make_summarizer: &'a MakeSummarizer<'a>,
    progress: &'a (dyn Fn(usize, usize, &str) + Sync),
    rung3_keep: usize,
    clock: &'a dyn Clock,
    started: chrono::DateTime<chrono::Utc>,
    order: Vec<usize>,
    next: AtomicUsize,
    done: AtomicUsize,
    results: Mutex<Vec<Option<Result<CaptureReport, String>>>>,
}

impl Pool<'_, '_> {
    /// One thread: opens its journal, then replays captures until none is left. A journal that
    /// does not open is the result of the capture the thread would have taken.
    fn work(&self) {
        let mut journal = match self.open_journal() {
            Ok(j) => j,
            Err(e) => {
                // The capture this thread would have taken fails with the reason.
                let k = self.next.fetch_add(1, Ordering::SeqCst);
                if let Some(&i) = self.order.get(k) {
                    self.store(i, Err(e));
                }
                return;
            }
        };
        loop {
            let k = self.next.fetch_add(1, Ordering::SeqCst);
            let Some(&i) = self.order.get(k) else { break };
            let Some(slot) = self.captures.get(i) else { continue };
            let Ok(mut held) = slot.lock() else {
                self.store(i, Err(format!("capture {i}: a replay thread panicked")));
                continue;
            };
            let (file, capture) = &mut **held;
            let r = self.replay_one(i, file, capture, &mut journal);
            self.store(i, r);
            let n = self.done.fetch_add(1, Ordering::SeqCst).saturating_add(1);
            (self.progress)(n, self.captures.len(), &capture.id);
        }
    }

    /// A worker's journal. Its restores (the checks') decode on the worker's own thread: the
    /// pool already runs a worker per job, and a restore that spread over every core would hold
    /// the stored bytes of a history beside its decoded messages, in other threads' heaps.
    fn open_journal(&self) -> Result<Journal, String> {
        let journal = match self.target {
            Target::File(p) => {
                Store::open(p, &StoreOptions::default()).map(Journal::from_store).map_err(|e| e.to_string())
            }
            Target::Memory => Journal::in_memory().map_err(|e| e.to_string()),
        };
        journal.map(|j| j.with_decode_threads(1))
    }

    /// Replays capture `i` into its own session.
    fn replay_one(
        &self,
        i: usize,
        file: &Path,
        capture: &mut Capture,
        journal: &mut Journal,
    ) -> Result<CaptureReport, String> {
        // Unique per run: two replays in the same millisecond, or two captures sharing an id,
        // never write into each other's session.
        let session =
            format!("{}@{}-{}", capture.id, self.started.format("%Y%m%dT%H%M%S%.3fZ"), session_nonce(i));
        let mut s = (self.make_summarizer)(capture)?;
        run_one(
            file,
            capture,
            journal,
            s.as_mut(),
            &mut NoHooks,
            session,
            self.started,
            matches!(self.target, Target::File(_)),
            self.rung3_keep,
            self.clock,
        )
    }

    fn store(&self, i: usize, r: Result<CaptureReport, String>) {
        if let Some(slot) = self.results.lock().as_mut().ok().and_then(|res| res.get_mut(i)) {
            *slot = Some(r);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

    use super::*;
    use salvage_recovery::summarizer::Builtin;

    /// The history read back must be the one that went in: a state of the session that is not
    /// (the final one, after rung 3) or a digest of another history is refused.
    #[test]
    fn the_input_comes_back_only_when_it_is_the_input() {
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/corpus/rung3-keep-four.json");
        let c = salvage_types::capture::read_capture(&file).unwrap();
        let clock = salvage_types::FixedClock::at_ms(1_700_000_000_000);
        let mut j = Journal::in_memory().unwrap();
        let (mut s, mut h) = (Builtin, NoHooks);
        let opts = Options {
            summarizer: &mut s,
            hooks: &mut h,
            start: chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap(),
            session: "lent".into(),
            rung3_keep: salvage_recovery::ladder::RUNG3_KEEP,
            clock: &clock,
        };
        let digest = history_digest(&c.history);
        let mut run = replay_history(&c, c.history.clone(), &mut j, opts).unwrap();
        assert_eq!(input_back(&j, &run, &digest).unwrap(), c.history);
        assert!(input_back(&j, &run, &[0; 32]).is_err(), "another history's digest");
        run.started = j.head(&run.session).unwrap().seq;
        assert_ne!(j.head(&run.session).unwrap().history, c.history, "rung 3 rewrote the history");
        let e = input_back(&j, &run, &digest).unwrap_err();
        assert!(e.contains("does not restore the capture's history"), "{e}");
    }
}
