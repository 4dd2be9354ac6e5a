//! Deterministic realistic synthetic data for benchmarks and large captures: prose, source code,
//! JSON tool output and logs from a seed (not repeated strings, which compress unrealistically
//! well), agent sessions of any size, and captures built from them.

/// A small xorshift generator (deterministic across platforms).
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A value below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        let n = u64::try_from(n.max(1)).unwrap_or(u64::MAX);
        usize::try_from(self.next_u64().checked_rem(n).unwrap_or(0)).unwrap_or(0)
    }

    /// `base` plus a value below `n`.
    fn between(&mut self, base: usize, n: usize) -> usize {
        base.saturating_add(self.below(n))
    }

    /// One of `xs` (the first kind of `T` when `xs` is empty).
    fn pick<T: Copy + Default>(&mut self, xs: &[T]) -> T {
        xs.get(self.below(xs.len())).copied().unwrap_or_default()
    }
}

const WORDS: &[&str] = &[
    "the",
    "request",
    "gateway",
    "rejected",
    "because",
    "body",
    "size",
    "exceeded",
    "limit",
    "we",
    "compact",
    "history",
    "and",
    "retry",
    "with",
    "smaller",
    "payload",
    "model",
    "context",
    "window",
    "tokens",
    "summary",
    "tool",
    "result",
    "file",
    "read",
    "lines",
    "function",
    "returns",
    "error",
    "when",
    "database",
    "is",
    "locked",
    "test",
    "fails",
    "intermittently",
    "under",
    "load",
    "after",
    "merge",
    "build",
    "broke",
    "fix",
    "applied",
    "configuration",
    "proxy",
    "corporate",
    "network",
    "timeout",
    "session",
    "journal",
    "archive",
    "verified",
];
const IDENTS: &[&str] = &[
    "conn", "store", "history", "budget", "weight", "result", "msg", "idx", "keep", "archive", "key", "cap",
    "attempt", "rung", "report", "buf", "len", "offset", "limit", "ctx", "err", "value", "items", "node",
];

fn prose(r: &mut Rng, out: &mut String) {
    let n = r.between(8, 20);
    for i in 0..n {
        let w = r.pick(WORDS);
        if i == 0 {
            let mut c = w.chars();
            if let Some(f) = c.next() {
                out.extend(f.to_uppercase());
                out.push_str(c.as_str());
            }
        } else {
            out.push_str(w);
        }
        out.push(if i.saturating_add(1) == n { '.' } else { ' ' });
    }
    out.push_str(if r.below(4) == 0 { "\n\n" } else { " " });
}

fn code(r: &mut Rng, out: &mut String) {
    let f = r.pick(IDENTS);
    let a = r.pick(IDENTS);
    out.push_str(&format!("fn {f}_{}(&mut self, {a}: usize) -> Result<u64, Error> {{\n", r.below(100)));
    for _ in 0..r.between(2, 6) {
        let x = r.pick(IDENTS);
        let y = r.pick(IDENTS);
        match r.below(4) {
            0 => out.push_str(&format!(
                "    let {x} = self.{y}.get({a}).ok_or(Error::Missing({}))?;\n",
                r.below(999)
            )),
            1 => out.push_str(&format!(
                "    if {x}.len() > {} {{\n        return Err(Error::TooLarge);\n    }}\n",
                r.below(100_000)
            )),
            2 => out.push_str(&format!("    // {} {} {}\n", r.pick(WORDS), r.pick(WORDS), r.pick(WORDS))),
            _ => out.push_str(&format!("    self.{x}.push({y} + {});\n", r.below(64))),
        }
    }
    out.push_str("    Ok(0)\n}\n\n");
}

fn json(r: &mut Rng, out: &mut String) {
    out.push_str(&format!(
        "{{\"id\": \"{:016x}\", \"path\": \"src/{}/{}.rs\", \"line\": {}, \"status\": \"{}\", \"bytes\": {}, \"message\": \"{} {} {}\"}}\n",
        r.next_u64(),
        r.pick(IDENTS),
        r.pick(IDENTS),
        r.below(5000),
        r.pick(&["ok", "error", "skipped", "timeout"]),
        r.below(1 << 20),
        r.pick(WORDS),
        r.pick(WORDS),
        r.pick(WORDS)
    ));
}

fn log(r: &mut Rng, out: &mut String) {
    out.push_str(&format!(
        "2026-11-{:02}T{:02}:{:02}:{:02}.{:03}Z {} [{}] {} {} {} req={:08x} took={}ms\n",
        r.between(1, 28),
        r.below(24),
        r.below(60),
        r.below(60),
        r.below(1000),
        r.pick(&["INFO", "WARN", "ERROR", "DEBUG"]),
        r.pick(IDENTS),
        r.pick(WORDS),
        r.pick(WORDS),
        r.pick(WORDS),
        r.next_u64() as u32,
        r.below(3000)
    ));
}

/// Which kind of text.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// Sentences.
    Prose,
    /// Rust-like source.
    Code,
    /// JSON lines of tool output.
    Json,
    /// Log lines.
    Log,
}

/// About `n` bytes of one kind of text (exactly `n`, cut on a char boundary; all ASCII).
pub fn text(kind: Kind, n: usize, seed: u64) -> String {
    let mut r = Rng::new(seed);
    let mut out = String::with_capacity(n.saturating_add(256));
    while out.len() < n {
        match kind {
            Kind::Prose => prose(&mut r, &mut out),
            Kind::Code => code(&mut r, &mut out),
            Kind::Json => json(&mut r, &mut out),
            Kind::Log => log(&mut r, &mut out),
        }
    }
    out.truncate(n);
    out
}

/// Mixed text: each item a different kind.
pub fn mixed(n: usize, seed: u64) -> String {
    let kind = match seed % 4 {
        0 => Kind::Prose,
        1 => Kind::Code,
        2 => Kind::Json,
        _ => Kind::Log,
    };
    text(kind, n, seed)
}

/// A realistic agent session of about `bytes` of history weight: a system prompt, a task, then
/// turns of assistant text, native tool calls and tool results of every kind (some large).
pub fn agent_history(bytes: usize, seed: u64) -> Vec<salvage_types::Message> {
    use salvage_types::message::{Message, ToolCall};
    let mut r = Rng::new(seed);
    let mut h = vec![
        Message::system(text(Kind::Prose, 6_000, seed)),
        Message::user(
            "Fix the failing integration test in crates/store and make CI green again.".to_string(),
        ),
    ];
    let mut total = 6_100usize;
    let mut call = 0u64;
    while total < bytes {
        match r.below(6) {
            0 => {
                let m = Message::user(text(Kind::Prose, r.between(80, 600), r.next_u64()));
                total = total.saturating_add(m.content.len());
                h.push(m);
            }
            1 | 2 => {
                let m = Message::assistant(text(Kind::Prose, r.between(200, 3_000), r.next_u64()));
                total = total.saturating_add(m.content.len());
                h.push(m);
            }
            _ => {
                let n = r.between(1, 3);
                let mut a = Message::assistant(String::new());
                let mut results = Vec::new();
                for _ in 0..n {
                    call = call.saturating_add(1);
                    let id = format!("toolu_{call:06}");
                    let kind = match r.below(4) {
                        0 => Kind::Code,
                        1 => Kind::Json,
                        2 => Kind::Log,
                        _ => Kind::Prose,
                    };
                    let size =
                        if r.below(10) == 0 { r.between(40_000, 200_000) } else { r.between(500, 8_000) };
                    a.tool_calls.push(ToolCall {
                        id: id.clone(),
                        kind: "function".into(),
                        name: r.pick(&["read_file", "run_command", "grep"]).into(),
                        arguments: serde_json::json!({"path": format!("src/{}.rs", r.below(500)), "offset": r.below(900)}),
                    });
                    results.push(Message::tool(id, text(kind, size, r.next_u64())));
                }
                total = total.saturating_add(n.saturating_mul(60));
                h.push(a);
                for m in results {
                    total = total.saturating_add(m.content.len());
                    h.push(m);
                }
            }
        }
    }
    h
}

/// A synthetic capture of about `bytes` of history: an agent session that a gateway with a
/// `max_body_bytes` cap of a quarter of its size rejects in `style`.
pub fn large_capture(
    bytes: usize,
    seed: u64,
    style: salvage_types::capture::RejectStyle,
) -> salvage_types::Capture {
    use salvage_types::capture::*;
    let history = agent_history(bytes, seed);
    let cap = (bytes as u64 / 4).max(64 * 1024);
    Capture {
        format: CAPTURE_FORMAT.to_string(),
        id: format!("synthetic-{}mb-{seed}", bytes >> 20),
        title: Some(format!(
            "synthetic {} agent session rejected by a {} gateway",
            salvage_types::format_bytes(bytes as u64),
            style.as_str()
        )),
        client: Some(ClientInfo { name: "salvage".into(), surface: Some("agent".into()) }),
        provider: Some("anthropic".into()),
        model: Some("claude-sonnet-4-5".into()),
        settings: [("CHATCLI_CONTEXT_WINDOW".to_string(), "4000000".to_string())].into(),
        request: None,
        history,
        failure: Failure {
            status: None,
            message: String::new(),
            transport: None,
            rejected_request_bytes: None,
        },
        upstream: Upstream {
            gateway: Some(Gateway {
                max_body_bytes: Some(cap),
                rejects_with: style,
                reports_request_size: true,
            }),
            model: Some(ModelSpec {
                context_window_tokens: Some(200_000),
                overflow_style: Some(OverflowStyle::Anthropic),
                max_output_tokens: None,
            }),
            context_editing: None,
            responses: Vec::new(),
        },
        recorded: Recorded::default(),
        expect: None,
    }
}
