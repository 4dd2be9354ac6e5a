//! A body's message list converted on every core, for the formats whose messages are read each
//! on its own (Anthropic Messages, Bedrock Converse: [`crate::conv::SystemBeside`]). The result —
//! messages, the first error in list order, what is left of the value budget — is the one a
//! single thread gets; only the time differs.
//!
//! Design note (import time): converting a 50 MB Anthropic body's 5 800 messages took 70 ms on
//! one thread while the other core idled (a fifth of the import). The list is cut into runs of
//! consecutive items, each waiting in a slot; every thread takes the next slot until none is
//! left, so a thread that starts late or is slowed leaves its share to the others.
//!
//! The value budget ([`crate::within_value_budget`], per thread) is what makes reading order
//! matter: an argument string is parsed only while the file's allowance lasts. Each thread starts
//! from the allowance left before the list; when what they spent together fits in it, every
//! decision was the one the single thread makes (a text parsed on a thread fits in what the
//! single thread has left then, which is no less than the allowance less everything spent; a
//! text refused found less left than the single thread would, whose earlier spending includes
//! this thread's), so the results stand. When it does not fit (a JSON bomb in arguments), the
//! list is read again on this thread alone.

use crate::conv::ReadMessage;
use crate::shape::finish;
use crate::Cx;
use salvage_types::capture::{CaptureError, RequestFormat};
use salvage_types::message::Message;
use serde_json::Value;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// From this many items a list is converted on several threads.
const PARALLEL_FROM: usize = 256;
/// At most this many threads convert a list.
const MAX_WORKERS: usize = 4;
/// Runs per thread: enough that a thread whose runs cost more is not left last.
const RUNS_PER_WORKER: usize = 8;

/// A run's messages (or its first error), once a thread converted it.
type Slot = Mutex<Option<Result<Vec<Message>, CaptureError>>>;

/// How one item of the list is turned into messages.
pub(crate) struct Reader<'a> {
    pub cx: &'a Cx<'a>,
    /// The list's key, for the items' paths (`messages[3]`).
    pub key: &'a str,
    pub read: ReadMessage,
    pub format: RequestFormat,
    pub default: fn(&Message) -> (Value, bool),
}

impl Reader<'_> {
    /// The messages of `items`, the first of which is item `first` of the list.
    fn run(&self, items: &[Value], first: usize) -> Result<Vec<Message>, CaptureError> {
        let mut out = Vec::with_capacity(items.len());
        for (i, m) in items.iter().enumerate() {
            let path = format!("{}[{}]", self.key, first.saturating_add(i));
            for d in (self.read)(self.cx, m, &path)? {
                out.push(finish(d, self.format, self.default));
            }
        }
        Ok(out)
    }
}

/// The messages of every item of `items`, in order, or the first item's error.
pub(crate) fn messages(reader: &Reader<'_>, items: &[Value]) -> Result<Vec<Message>, CaptureError> {
    let workers = std::thread::available_parallelism().map_or(1, usize::from).min(MAX_WORKERS);
    if workers < 2 || items.len() < PARALLEL_FROM {
        return reader.run(items, 0);
    }
    let allowance = crate::value_budget();
    let size = items.len().div_ceil(workers.saturating_mul(RUNS_PER_WORKER)).max(1);
    let slots: Vec<Slot> = items.chunks(size).map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    // Takes runs until none is left; returns what this thread spent of the value budget.
    let work = || {
        crate::set_value_budget_left(allowance);
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(slot) = slots.get(i) else { break };
            let at = i.saturating_mul(size);
            let run = items.get(at..).unwrap_or_default();
            let done = reader.run(run.get(..size).unwrap_or(run), at);
            if let Ok(mut s) = slot.lock() {
                *s = Some(done);
            }
        }
        allowance.saturating_sub(crate::value_budget())
    };
    let spent = std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..workers)
            .filter_map(|_| std::thread::Builder::new().name("convert".into()).spawn_scoped(scope, work).ok())
            .collect();
        let mine = work();
        helpers.into_iter().fold(mine, |n, h| match h.join() {
            Ok(spent) => n.saturating_add(spent),
            // Conversion does not panic (nothing in it indexes or unwraps); if it did, the
            // panic goes on as it would have on this thread.
            Err(panic) => std::panic::resume_unwind(panic),
        })
    });
    let alone = || {
        crate::set_value_budget_left(allowance);
        reader.run(items, 0)
    };
    if spent > allowance {
        // The threads' decisions may differ from one thread's: read again, in order.
        return alone();
    }
    crate::set_value_budget_left(allowance.saturating_sub(spent));
    let mut out = Vec::with_capacity(items.len());
    for slot in slots {
        match slot.into_inner().ok().flatten() {
            Some(done) => out.extend(done?),
            // Every slot is filled before the threads end (a lock is poisoned only by a panic,
            // which went on above); read again rather than lose a run.
            None => return alone(),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::Draft;
    use serde_json::json;

    /// An item `{"args": TEXT}` becomes one message whose `tool_call_id` says whether TEXT was within the value
    /// budget (the decision an argument string gets); `{"fail": true}` is an error.
    fn read(cx: &Cx<'_>, v: &Value, path: &str) -> Result<Vec<Draft>, CaptureError> {
        if v.get("fail").is_some() {
            return Err(cx.err(path, "refused"));
        }
        let text = v.get("args").and_then(Value::as_str).unwrap_or_default();
        let verdict = if crate::within_value_budget(text) { "parsed" } else { "kept" };
        // Not the content, which `finish` takes from the template's text slots.
        let mut msg = Message::user("");
        msg.tool_call_id = Some(format!("{path} {verdict}"));
        Ok(vec![Draft { msg, template: Value::Null, join: false }])
    }

    fn reader<'a>(cx: &'a Cx<'a>) -> Reader<'a> {
        Reader {
            cx,
            key: "messages",
            read,
            format: RequestFormat::Anthropic,
            default: |_| (Value::Null, false),
        }
    }

    /// The messages and the budget left, from `budget` on: on threads, and on one.
    fn both(items: &[Value], budget: usize) -> [(Result<Vec<Message>, String>, usize); 2] {
        let cx = Cx { file: "body.json" };
        let r = reader(&cx);
        let go = |f: &dyn Fn() -> Result<Vec<Message>, CaptureError>| {
            crate::set_value_budget_left(budget);
            (f().map_err(|e| e.to_string()), crate::value_budget())
        };
        [go(&|| messages(&r, items)), go(&|| r.run(items, 0))]
    }

    #[test]
    fn a_long_list_converts_as_one_thread_does() {
        let items: Vec<Value> = (0..3000).map(|i| json!({"args": format!("[{i}, [{i}]]")})).collect();
        let [par, one] = both(&items, usize::MAX / 2);
        assert_eq!(par, one);
        let msgs = par.0.unwrap();
        assert_eq!(msgs.len(), 3000);
        assert_eq!(msgs[2999].tool_call_id.as_deref(), Some("messages[2999] parsed"));
        // Four values an item (two arrays, two numbers), all spent.
        assert_eq!(par.1, usize::MAX / 2 - 12000);
    }

    #[test]
    fn the_budget_running_out_midway_gives_the_single_threads_verdicts() {
        // Each item's text holds 1 001 values; the budget lasts for 2 000 of the 3 000 items,
        // so the last third is kept as text, where a thread starting from the whole budget
        // would parse its share. (Texts long enough that the helper threads start while there
        // is work left.)
        let text = format!("[{}]", vec!["1"; 1000].join(","));
        let items: Vec<Value> = (0..3000).map(|_| json!({"args": text})).collect();
        let [par, one] = both(&items, 2000 * 1001 + 50);
        assert_eq!(par, one);
        let msgs = par.0.unwrap();
        assert_eq!(msgs[1999].tool_call_id.as_deref(), Some("messages[1999] parsed"));
        assert_eq!(msgs[2000].tool_call_id.as_deref(), Some("messages[2000] kept"));
        assert_eq!(par.1, 50);
    }

    #[test]
    fn the_first_error_in_list_order_is_the_one_reported() {
        let mut items: Vec<Value> = (0..3000).map(|i| json!({"args": format!("{i}")})).collect();
        items[2900] = json!({"fail": true});
        items[1234] = json!({"fail": true});
        let [par, one] = both(&items, usize::MAX / 2);
        assert_eq!(par.0, one.0);
        let err = par.0.unwrap_err();
        assert!(err.contains("messages[1234]"), "{err}");
    }
}
