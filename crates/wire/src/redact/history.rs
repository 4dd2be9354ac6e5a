//! A history's messages redacted on every core: each message is redacted on its own, so runs
//! of consecutive messages go to threads and their counts are added up. The result (texts and
//! counts) is the one a single thread gets.

use super::{add, redact_message, Counts};
use salvage_types::Message;

/// Redacts every message of a history.
pub fn redact_history(history: &mut [Message], counts: &mut Counts) {
    let workers = std::thread::available_parallelism().map_or(1, usize::from).min(MAX_WORKERS);
    let bytes = history.iter().fold(0usize, |n, m| n.saturating_add(m.content.len()));
    if workers < 2 || bytes < PARALLEL_FROM {
        history.iter_mut().for_each(|m| redact_message(m, counts));
        return;
    }
    // The history is cut into many runs (the cost of a byte varies along it), each waiting in
    // a slot; every thread — the helpers and this one — takes the next slot until none is
    // left. A helper that could not be started, or starts late, leaves its share to the others;
    // no run is skipped or done twice.
    let share = bytes.checked_div(workers.saturating_mul(RUNS_PER_WORKER)).unwrap_or(bytes);
    let slots: Vec<std::sync::Mutex<Option<&mut [Message]>>> =
        split_by_content(history, share).into_iter().map(|r| std::sync::Mutex::new(Some(r))).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let work = |counts: &mut Counts| {
        while let Some(slot) = slots.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) {
            let run = slot.lock().ok().and_then(|mut s| s.take());
            run.into_iter().flatten().for_each(|m| redact_message(m, counts));
        }
    };
    std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..workers)
            .filter_map(|_| {
                let job = || {
                    let mut counts = Counts::new();
                    work(&mut counts);
                    counts
                };
                std::thread::Builder::new().name("redact".into()).spawn_scoped(scope, job).ok()
            })
            .collect();
        work(counts);
        for h in helpers {
            match h.join() {
                Ok(c) => c.into_iter().for_each(|(k, n)| add(counts, k, n)),
                // Redaction does not panic (nothing in it indexes or unwraps); if it did, the
                // panic goes on as it would have on this thread.
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
    });
}

/// At most this many threads redact a history.
const MAX_WORKERS: usize = 4;
/// Runs per thread: enough that a thread whose runs cost more per byte is not left last.
const RUNS_PER_WORKER: usize = 8;
/// Below this much content a history is redacted on the calling thread alone: starting
/// threads would cost more than they save.
const PARALLEL_FROM: usize = 4 << 20;

/// `history` cut into runs of consecutive messages holding about `share` bytes of content each.
fn split_by_content(history: &mut [Message], share: usize) -> Vec<&mut [Message]> {
    let mut runs = Vec::new();
    let mut rest = history;
    while !rest.is_empty() {
        let mut taken = 0usize;
        let mut n = 0usize;
        for m in rest.iter() {
            n = n.saturating_add(1);
            taken = taken.saturating_add(m.content.len());
            if taken >= share {
                break;
            }
        }
        let len = rest.len();
        let (run, tail) = std::mem::take(&mut rest).split_at_mut(n.min(len));
        runs.push(run);
        rest = tail;
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;
    use salvage_types::message::ToolCall;

    /// About `bytes` of messages, every seventh holding a key of its own (in its text or in a
    /// tool call's arguments).
    fn history(bytes: usize) -> Vec<Message> {
        let filler = "the build log goes on and on; nothing secret here. ".repeat(200);
        let mut out = Vec::new();
        let mut size = 0;
        let mut i = 0;
        while size < bytes {
            let key = format!("sk-ant-api03-{i:0>24}");
            let mut m = Message::user(format!("{filler} message {i}"));
            if i % 7 == 0 {
                m.content.push_str(&format!(" key {key}"));
            } else if i % 7 == 3 {
                m = Message::assistant("calling");
                m.tool_calls.push(ToolCall {
                    id: format!("call_{i}"),
                    kind: "function".into(),
                    name: "run".into(),
                    arguments: serde_json::json!({"env": {"ANTHROPIC_API_KEY": key}}),
                });
            }
            size += m.content.len();
            out.push(m);
            i += 1;
        }
        out
    }

    #[test]
    fn a_large_history_is_redacted_as_one_thread_does_it() {
        let original = history(PARALLEL_FROM * 2);
        let mut alone = original.clone();
        let mut alone_counts = Counts::new();
        alone.iter_mut().for_each(|m| redact_message(m, &mut alone_counts));
        let mut shared = original.clone();
        let mut shared_counts = Counts::new();
        redact_history(&mut shared, &mut shared_counts);
        let keys = original.iter().enumerate().filter(|(i, _)| i % 7 == 0 || i % 7 == 3).count() as u64;
        assert_eq!(alone_counts.values().sum::<u64>(), keys, "{alone_counts:?}");
        assert_eq!(shared_counts, alone_counts);
        assert!(shared == alone, "the texts differ from a single thread's");
        assert!(!serde_json::to_string(&shared).unwrap_or_default().contains("sk-ant-api03-"));
    }

    #[test]
    fn runs_cover_every_message_once_in_order() {
        let mut h = history(PARALLEL_FROM);
        let n = h.len();
        let contents: Vec<String> = h.iter().map(|m| m.content.clone()).collect();
        for share in [0, 1, 10_000, PARALLEL_FROM / 3, usize::MAX] {
            let runs = split_by_content(&mut h, share);
            assert!(runs.iter().all(|r| !r.is_empty()), "share {share}: an empty run");
            let seen: Vec<String> = runs.iter().flat_map(|r| r.iter().map(|m| m.content.clone())).collect();
            assert_eq!(seen, contents, "share {share}");
            // Every run but the last holds at least `share` bytes.
            let total: usize = contents.iter().map(String::len).sum();
            let most = total.checked_div(share).map_or(n, |r| r + 1);
            assert!(runs.len() <= most, "share {share}: {} runs", runs.len());
        }
    }
}
