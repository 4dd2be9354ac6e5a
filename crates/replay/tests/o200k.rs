//! The replay's own o200k counter (`salvage_replay::o200k`) counts exactly what tiktoken-rs's
//! `o200k_base` `encode_ordinary` does: on every text of the corpus, a synthetic agent session,
//! and adversarial text (every special token's text, long runs of one class, unicode of every
//! plane, combining marks, contractions, pieces whose merges tie).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // tests may panic

use salvage_replay::o200k::count;
use salvage_types::message::Message;
use std::path::PathBuf;

fn reference(text: &str) -> u64 {
    tiktoken_rs::o200k_base_singleton().encode_ordinary(text).len() as u64
}

/// Every text the simulated provider counts in a history.
fn texts(history: &[Message]) -> Vec<String> {
    let mut out = Vec::new();
    for m in history {
        out.push(m.content.clone());
        for c in &m.tool_calls {
            out.push(c.name.clone());
            out.push(c.arguments.to_string());
        }
        out.extend(m.system_parts.iter().map(|p| p.text.clone()));
    }
    out
}

fn assert_same(what: &str, text: &str) {
    assert_eq!(count(text), reference(text), "{what}: {:?}", text.chars().take(80).collect::<String>());
}

#[test]
fn corpus_texts_count_as_tiktoken_counts_them() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/corpus");
    let files = salvage_replay::corpus::discover(&[dir]).unwrap();
    let captures = salvage_replay::corpus::load_all(&files).unwrap();
    assert!(captures.len() > 50, "the corpus is there");
    let mut n = 0;
    for (file, c) in &captures {
        for t in texts(&c.history) {
            assert_same(&file.display().to_string(), &t);
            n += 1;
        }
    }
    assert!(n > 1000, "{n} texts");
}

#[test]
fn a_synthetic_session_counts_as_tiktoken_counts_it() {
    let history = salvage_replay::synth::agent_history(2 << 20, 3);
    for t in texts(&history) {
        assert_same("synthetic", &t);
    }
}

#[test]
fn special_tokens_text_counts_as_ordinary_text() {
    let mut specials: Vec<&str> =
        tiktoken_rs::o200k_harmony_singleton().special_tokens().into_iter().collect();
    specials.extend(tiktoken_rs::o200k_base_singleton().special_tokens());
    specials.sort_unstable();
    specials.dedup();
    assert!(specials.contains(&"<|endoftext|>") && specials.contains(&"<|endofprompt|>"));
    for s in &specials {
        assert_same("special", s);
        assert_same("special in text", &format!("before {s}after\n{s}{s} <|{s}|>"));
    }
    assert_same("all specials", &specials.concat());
}

/// A deterministic generator of code points (no `rand` in this crate's tree).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u32 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) as u32
    }

    fn text(&mut self, len: usize, alphabet: &[char]) -> String {
        (0..len).map(|_| alphabet[self.next() as usize % alphabet.len()]).collect()
    }
}

#[test]
fn adversarial_text_counts_as_tiktoken_counts_it() {
    let runs = [
        "a".repeat(100_000),
        "A".repeat(20_000),
        " ".repeat(50_000) + "x",
        "\n".repeat(20_000) + "  \t \r\n  y",
        "7".repeat(10_001),
        "!?".repeat(30_000),
        "ab".repeat(40_000),
        "的".repeat(30_000),
        "e\u{301}".repeat(5_000),
        "👩\u{200d}👩\u{200d}👧".repeat(2_000),
        "\u{feff}\u{200b}\u{2028}\u{85}".repeat(1_000),
        "I'LL don't WE'VE they're she'S it'd you'M 'S's ''''".repeat(200),
        "x = foo(bar[3]); // ünïcödé\r\n\tif (a<=b) { return \"ok\"; }\n".repeat(500),
    ];
    for r in &runs {
        assert_same("run", r);
    }
    let mut g = Lcg(7);
    // Small alphabets make long words whose merges tie and cascade.
    for alphabet in ["abcde", "ab", "th e", "0123456789 ", "aA1 .,\n", "éèêëē"] {
        let chars: Vec<char> = alphabet.chars().collect();
        for len in [1, 2, 3, 17, 499, 500, 501, 5_000, 60_000] {
            assert_same(alphabet, &g.text(len, &chars));
        }
    }
    // Code points from every plane (surrogates skipped).
    let every: Vec<char> = (0..40_000).filter_map(|_| char::from_u32(g.next() % 0x11_0000)).collect();
    assert_same("every plane", &every.iter().collect::<String>());
    let mixed: Vec<char> = "aZ9 \n\t!é中🙂\u{301}'".chars().collect();
    for len in [10, 1_000, 100_000] {
        assert_same("mixed", &g.text(len, &mixed));
    }
}

/// A thread other than the first to count uses a pattern of its own (the shared one's scratch
/// pool serves other threads through a lock): it counts exactly as tiktoken does too.
#[test]
fn another_thread_counts_as_tiktoken_counts() {
    let history = salvage_replay::synth::agent_history(64 * 1024, 11);
    let all = texts(&history);
    // This thread counts first, so the spawned one is never the first to count.
    let here: Vec<u64> = all.iter().map(|t| count(t)).collect();
    let there = std::thread::spawn(move || all.iter().map(|t| (count(t), reference(t))).collect::<Vec<_>>())
        .join()
        .unwrap();
    for (h, (t, r)) in here.iter().zip(&there) {
        assert_eq!(t, r, "the second thread's count");
        assert_eq!(h, r, "this thread's count");
    }
}
