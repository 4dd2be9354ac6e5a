//! The journal's event vocabulary: every kind of `storage.md`, each with a `kind` name and a
//! `kind_version`, serialized as JSON (`{"kind": "...", ...fields}`). A snapshot test locks each
//! kind's shape.

use crate::class::ErrorClass;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Summarizer usage.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cost {
    /// Summarizer calls.
    #[serde(default)]
    pub calls: u64,
    /// Input tokens (or characters for engines without a tokenizer).
    #[serde(default)]
    pub input_tokens: u64,
    /// Output tokens.
    #[serde(default)]
    pub output_tokens: u64,
}

impl Cost {
    /// Adds another cost.
    pub fn add(&mut self, other: &Cost) {
        self.calls = self.calls.saturating_add(other.calls);
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
    }
}

crate::string_enum! {
    /// The floor diagnosis's verdict (behaviour spec section 3).
    pub enum FloorVerdict {
        /// The base is well under the rejected size.
        Ok => "ok",
        /// The base is at least three quarters of the rejected size: warn and go on.
        Warn => "warn",
        /// The base meets the rejected size: compaction cannot help.
        FailFast => "fail_fast",
    }
}

/// A setting whose value was invalid, so its default stands (behaviour spec section 10).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InvalidSetting {
    /// The variable, e.g. `CHATCLI_MAX_RECOVERY_ATTEMPTS`.
    pub name: String,
    /// The raw value as given.
    pub raw: String,
    /// Why it is invalid and what is used instead.
    pub why: String,
}

crate::string_enum! {
    /// How a compaction, attempt or hook ended.
    pub enum StepOutcome {
        /// The history was rewritten.
        Applied => "applied",
        /// Nothing changed, or the result was rejected: no undo snapshot.
        Skipped => "skipped",
        /// It failed (the history is untouched).
        Failed => "failed",
    }
}

crate::string_enum! {
    /// What started a compaction.
    pub enum Trigger {
        /// The per-turn budget check.
        Auto => "auto",
        /// `/compact`.
        Manual => "manual",
        /// The recovery ladder.
        Recovery => "recovery",
    }
}

/// One event's domain content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum EventBody {
    /// A session began.
    SessionStarted {
        /// Provider.
        provider: Option<String>,
        /// Model.
        model: Option<String>,
        /// Context window in tokens.
        context_window: Option<u64>,
        /// Settings in force (`CHATCLI_*` as strings).
        settings: BTreeMap<String, String>,
        /// The payload cap configured at the start.
        cap: Option<u64>,
        /// Settings that were invalid (their default stands), reported once.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        invalid_settings: Vec<InvalidSetting>,
        /// What the session's first request carried besides its messages (a replayed capture's
        /// `request` part: format, tools, parameters, provider blocks), so that an export of the
        /// session is the request as sent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request: Option<Box<crate::capture::Request>>,
    },
    /// Messages were appended (the history delta carries them).
    MessageAppended {
        /// How many.
        count: u64,
    },
    /// A request was sent.
    RequestSent {
        /// Attempt number (0 = first try).
        attempt: u32,
        /// Body bytes.
        bytes: u64,
        /// Tokens the client estimated.
        estimated_tokens: u64,
        /// Tokens the provider counted.
        real_tokens: Option<u64>,
        /// BLAKE3 (16 hex) of the history sent.
        history_digest: String,
        /// Whether it was accepted.
        accepted: bool,
    },
    /// The provider or gateway rejected a request.
    ProviderError {
        /// HTTP status.
        status: Option<u16>,
        /// Error text.
        message: String,
        /// Transport error.
        transport: Option<String>,
        /// Rejected size, when annotated.
        rejected_bytes: Option<u64>,
        /// The classification.
        class: ErrorClass,
        /// Why.
        reason: String,
    },
    /// One recovery attempt (a rung of the ladder).
    RecoveryAttempt {
        /// Attempt number (1-based).
        attempt: u32,
        /// Rung 1, 2 or 3.
        rung: u8,
        /// Applied, skipped (no-op) or failed.
        outcome: StepOutcome,
        /// Weight before.
        before_bytes: u64,
        /// Weight after.
        after_bytes: u64,
        /// Messages before.
        before_messages: u64,
        /// Messages after.
        after_messages: u64,
        /// Short keys archived.
        archived: Vec<String>,
    },
    /// The payload cap was learned or assumed.
    CapLearned {
        /// The new cap.
        cap: u64,
        /// The cap before.
        previous: Option<u64>,
        /// The rejected size it came from.
        rejected: Option<u64>,
        /// The message shown.
        message: String,
    },
    /// The floor diagnosis ran.
    FloorDiagnosis {
        /// `ok`, `warn` or `fail_fast`.
        verdict: FloorVerdict,
        /// Bytes of the smallest possible request.
        floor_bytes: u64,
        /// The rejected size.
        rejected: u64,
        /// What the base is made of (`system_prompt`, `tool_definitions_and_envelope`, `task`),
        /// bytes each.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        parts: BTreeMap<String, u64>,
    },
    /// The payload notice was appended.
    NoticeInjected {},
    /// Microcompact of old tool results.
    Microcompact {
        /// Results cut to a preview.
        truncated: u64,
        /// Results cleared to a one-line stub.
        summarized: u64,
        /// Bytes freed.
        freed_bytes: u64,
    },
    /// Repeated reads replaced by stubs.
    Dedup {
        /// Reads stubbed.
        stubbed: u64,
        /// Bytes freed.
        freed_bytes: u64,
    },
    /// Pre-flight (behaviour spec section 3): the history against the cap before the request.
    Preflight {
        /// History weight.
        history_bytes: u64,
        /// The payload cap in force.
        cap: Option<u64>,
        /// The compaction ratio forced, in percent (40), when the history is over 85 % of the cap.
        forced_ratio_percent: Option<u64>,
        /// No cap and a history over 2.5 MB: the once-per-session warning.
        warn_no_cap: bool,
    },
    /// Old skill blocks collapsed.
    SkillAging {
        /// Skills collapsed.
        collapsed: u64,
    },
    /// A compaction (auto, manual or recovery).
    Compaction {
        /// What started it.
        trigger: Trigger,
        /// Level reached (1 trim, 2 summarize, 3 emergency).
        level: u8,
        /// Applied or skipped.
        outcome: StepOutcome,
        /// Level 2 was skipped by the back-off.
        backoff_skip: bool,
        /// Summarizer route (`builtin`, `recorded`, `cmd:…`, `mcp:…`).
        route: Option<String>,
        /// Summarizer usage.
        cost: Cost,
        /// The client that compacted, for a compaction read from its session file
        /// (`claude-code`, `codex`); absent for salvage's own (kind version 2).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<String>,
        /// The client's token count before compacting, when its file says (kind version 2).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pre_tokens: Option<u64>,
        /// The CCR key (16 hex) of the archived pre-compaction history, JSON (kind version 2).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        archived: Option<String>,
    },
    /// One summary attempt and the quality gate's verdict.
    SummaryAttempt {
        /// Try number (1 or 2).
        attempt: u32,
        /// Passed the gate.
        passed: bool,
        /// Why it failed, if it did.
        reason: Option<String>,
        /// Summary length.
        chars: u64,
    },
    /// The provider applied context edits; stubs were mirrored locally.
    ContextEdit {
        /// Tool uses cleared.
        cleared_tool_uses: u64,
        /// Input tokens cleared.
        cleared_tokens: u64,
        /// Stubs written into the local history.
        stubs: u64,
    },
    /// `max_tokens` was raised after an output-limit stop.
    TokenEscalation {
        /// The limit before.
        from: u64,
        /// The limit now.
        to: u64,
        /// Escalations used.
        used: u32,
    },
    /// A hook ran.
    HookFired {
        /// Hook name.
        name: String,
        /// `PreCompact` or `PostCompact`.
        event: String,
        /// Applied (ran), failed or timed out (skipped).
        outcome: StepOutcome,
        /// What went wrong.
        error: Option<String>,
        /// How long it took.
        millis: u64,
    },
    /// A named point to rewind to.
    Checkpoint {
        /// Its name.
        name: String,
    },
    /// The state was set back to an earlier event (the event's parent is the target).
    Rewind {
        /// The target event.
        target: u64,
        /// `undo`, `rewind` or `restore`.
        reason: String,
    },
    /// CCR content was cleared.
    Redaction {
        /// Full keys redacted.
        keys: Vec<String>,
        /// Secrets replaced, by kind.
        counts: BTreeMap<String, u64>,
    },
    /// A response was appended (the delta carries it).
    ResponseReceived {
        /// Stop reason.
        stop_reason: crate::capture::StopReason,
        /// Output tokens.
        output_tokens: Option<u64>,
    },
    /// A turn's recovery run ended: the engine's last record before it stops. A session whose
    /// `session_started` is of version 4 or later records one at the end of every run, so a
    /// rejection followed by neither an accepted request nor this event is a run that was cut
    /// short (a process killed, a disk full), not an exhausted one.
    RunEnded {
        /// How the run ended.
        outcome: crate::capture::Outcome,
    },
}

impl EventBody {
    /// The `session_started` of a session begun outside a turn (an import, a test): its provider
    /// and model, and nothing configured (no context window, settings, cap or invalid setting).
    pub fn session_started(provider: Option<String>, model: Option<String>) -> Self {
        EventBody::SessionStarted {
            provider,
            model,
            context_window: None,
            settings: BTreeMap::new(),
            cap: None,
            invalid_settings: Vec::new(),
            request: None,
        }
    }

    /// Every kind of the vocabulary, in declaration order.
    pub const KINDS: &'static [&'static str] = &[
        "session_started",
        "message_appended",
        "request_sent",
        "provider_error",
        "recovery_attempt",
        "cap_learned",
        "floor_diagnosis",
        "notice_injected",
        "microcompact",
        "dedup",
        "preflight",
        "skill_aging",
        "compaction",
        "summary_attempt",
        "context_edit",
        "token_escalation",
        "hook_fired",
        "checkpoint",
        "rewind",
        "redaction",
        "response_received",
        "run_ended",
    ];

    /// The kind's name (the `kind` field).
    pub fn kind(&self) -> &'static str {
        match self {
            EventBody::SessionStarted { .. } => "session_started",
            EventBody::MessageAppended { .. } => "message_appended",
            EventBody::RequestSent { .. } => "request_sent",
            EventBody::ProviderError { .. } => "provider_error",
            EventBody::RecoveryAttempt { .. } => "recovery_attempt",
            EventBody::CapLearned { .. } => "cap_learned",
            EventBody::FloorDiagnosis { .. } => "floor_diagnosis",
            EventBody::NoticeInjected {} => "notice_injected",
            EventBody::Microcompact { .. } => "microcompact",
            EventBody::Dedup { .. } => "dedup",
            EventBody::Preflight { .. } => "preflight",
            EventBody::SkillAging { .. } => "skill_aging",
            EventBody::Compaction { .. } => "compaction",
            EventBody::SummaryAttempt { .. } => "summary_attempt",
            EventBody::ContextEdit { .. } => "context_edit",
            EventBody::TokenEscalation { .. } => "token_escalation",
            EventBody::HookFired { .. } => "hook_fired",
            EventBody::Checkpoint { .. } => "checkpoint",
            EventBody::Rewind { .. } => "rewind",
            EventBody::Redaction { .. } => "redaction",
            EventBody::ResponseReceived { .. } => "response_received",
            EventBody::RunEnded { .. } => "run_ended",
        }
    }

    /// The kind's format version: bump it (and keep reading the old one) when a shape changes.
    pub fn kind_version(&self) -> u32 {
        match self {
            // v2: `invalid_settings` (optional; v1 bodies read as an empty list); v3: `request`
            // (optional; earlier bodies read as none); v4: no new field, but the session's recovery
            // runs each end with a `run_ended` event (a session of an earlier version has none,
            // and its outcome is derived from its requests alone).
            EventBody::SessionStarted { .. } => 4,
            // v2: a typed verdict and the `parts` of the base (optional; v1 bodies read as none).
            EventBody::FloorDiagnosis { .. } => 2,
            // v2: `by`, `pre_tokens`, `archived` (optional; v1 bodies read unchanged).
            EventBody::Compaction { .. } => 2,
            _ => 1,
        }
    }

    /// One line for a timeline, e.g. `recovery attempt 2 rung 2: 4.2 MB → 1.1 MB, 3 archived`.
    pub fn summary(&self) -> String {
        use crate::bytesize::format_bytes as b;
        match self {
            EventBody::SessionStarted { provider, model, .. } => format!(
                "session started ({} {})",
                provider.as_deref().unwrap_or("?"),
                model.as_deref().unwrap_or("?")
            ),
            EventBody::MessageAppended { count } => format!("{count} message(s) appended"),
            EventBody::RequestSent { attempt, bytes, estimated_tokens, real_tokens, accepted, .. } => {
                request_summary(*attempt, *bytes, *estimated_tokens, *real_tokens, *accepted)
            }
            EventBody::ProviderError { status, class, reason, .. } => format!(
                "error {}: {class} ({reason})",
                status.map(|s| s.to_string()).unwrap_or_else(|| "transport".into())
            ),
            EventBody::RecoveryAttempt { attempt, rung, outcome, .. } if *outcome != StepOutcome::Applied => {
                format!("recovery attempt {attempt} rung {rung}: {outcome}")
            }
            EventBody::RecoveryAttempt { attempt, rung, before_bytes, after_bytes, archived, .. } => format!(
                "recovery attempt {attempt} rung {rung}: {} → {}, {} archived",
                b(*before_bytes),
                b(*after_bytes),
                archived.len()
            ),
            EventBody::CapLearned { message, .. } => message.clone(),
            EventBody::FloorDiagnosis { verdict, floor_bytes, rejected, .. } => {
                format!("floor {verdict}: base {} vs rejected {}", b(*floor_bytes), b(*rejected))
            }
            EventBody::NoticeInjected {} => "payload notice injected".into(),
            EventBody::Microcompact { truncated, summarized, freed_bytes } => {
                format!(
                    "🗜 microcompact: {truncated} truncated, {summarized} summarized, {} freed",
                    b(*freed_bytes)
                )
            }
            EventBody::Dedup { stubbed, freed_bytes } => {
                format!("dedup: {stubbed} repeated read(s) stubbed, {} freed", b(*freed_bytes))
            }
            EventBody::Preflight { history_bytes, cap, forced_ratio_percent, warn_no_cap } => {
                preflight_summary(*history_bytes, *cap, *forced_ratio_percent, *warn_no_cap)
            }
            EventBody::SkillAging { collapsed } => format!("skill aging: {collapsed} collapsed"),
            EventBody::Compaction { trigger, level, outcome, by: None, .. } => {
                format!("compaction ({trigger}) level {level}: {outcome}")
            }
            EventBody::Compaction { trigger, outcome, by: Some(by), pre_tokens, archived, .. } => format!(
                "compaction ({trigger}) by {by}: {outcome}{}{}",
                pre_tokens.map(|t| format!(", {t} tokens before")).unwrap_or_default(),
                archived
                    .as_deref()
                    .map(|k| format!(", pre-compaction history <<ccr:{k}>>"))
                    .unwrap_or_default()
            ),
            EventBody::SummaryAttempt { attempt, passed, reason, .. } => {
                let verdict = if *passed {
                    "passed the gate".to_string()
                } else {
                    format!("rejected ({})", reason.as_deref().unwrap_or("?"))
                };
                format!("summary attempt {attempt}: {verdict}")
            }
            EventBody::ContextEdit { cleared_tool_uses, stubs, .. } => {
                format!("provider cleared {cleared_tool_uses} tool use(s); {stubs} stub(s) mirrored")
            }
            EventBody::TokenEscalation { from, to, used } => {
                format!("max_tokens {from} → {to} (escalation {used})")
            }
            EventBody::HookFired { name, event, outcome, .. } => format!("hook {name} ({event}): {outcome}"),
            EventBody::Checkpoint { name } => format!("checkpoint {name:?}"),
            EventBody::Rewind { target, reason } => format!("{reason} to event {target}"),
            EventBody::Redaction { keys, counts } => {
                format!("redaction: {} blob(s), {} secret(s)", keys.len(), counts.values().sum::<u64>())
            }
            EventBody::ResponseReceived { stop_reason, .. } => format!("response ({stop_reason})"),
            EventBody::RunEnded { outcome } => format!("run ended: {outcome}"),
        }
    }
}

/// The summary line of a request sent.
fn request_summary(attempt: u32, bytes: u64, estimated: u64, real: Option<u64>, accepted: bool) -> String {
    format!(
        "request (attempt {attempt}) {} · ~{estimated} tokens est{} · {}",
        crate::bytesize::format_bytes(bytes),
        real.map(|t| format!(" / {t} real")).unwrap_or_default(),
        if accepted { "accepted" } else { "rejected" }
    )
}

/// The summary line of a recovery attempt; `(before, after)` are the weights.
/// The summary line of a pre-flight check.
fn preflight_summary(history: u64, cap: Option<u64>, forced: Option<u64>, warn_no_cap: bool) -> String {
    use crate::bytesize::format_bytes as b;
    match (cap, forced) {
        (Some(c), Some(r)) => format!(
            "pre-flight: history {} over 85% of the cap {} — compaction ratio forced to {r}%",
            b(history),
            b(c)
        ),
        (Some(c), None) => format!("pre-flight: history {} within the cap {}", b(history), b(c)),
        (None, _) if warn_no_cap => format!("pre-flight: history {} and no cap set — warned", b(history)),
        (None, _) => format!("pre-flight: history {}, no cap", b(history)),
    }
}
