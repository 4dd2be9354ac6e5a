//! The compaction budget, the model catalog and chars-per-token calibration (behaviour spec
//! section 7).

use serde::Serialize;

/// Default characters per token.
pub const CHARS_PER_TOKEN: f64 = 4.0;

/// Which loop compacts: each has its budget ratio.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Surface {
    /// Chat: 0.75.
    Chat,
    /// Agent and coder: 0.60.
    Agent,
    /// `/compact`: 0.50.
    Manual,
    /// Pre-flight forced: 0.40.
    Preflight,
}

impl Surface {
    /// The budget ratio.
    pub fn ratio(self) -> f64 {
        match self {
            Surface::Chat => 0.75,
            Surface::Agent => 0.60,
            Surface::Manual => 0.50,
            Surface::Preflight => 0.40,
        }
    }

    /// From a capture's `client.surface`.
    pub fn parse(s: &str) -> Surface {
        match s {
            "agent" | "coder" => Surface::Agent,
            "manual" | "compact" => Surface::Manual,
            _ => Surface::Chat,
        }
    }
}

/// The byte budget: `window × ratio × chars_per_token`, never above `cap × 0.7`.
pub fn budget(window_tokens: u64, ratio: f64, chars_per_token: f64, cap: Option<u64>) -> u64 {
    let b = (window_tokens as f64 * ratio * chars_per_token).floor();
    let b = if b.is_finite() && b > 0.0 { b as u64 } else { 0 };
    match cap {
        Some(c) => b.min(c.saturating_mul(7) / 10),
        None => b,
    }
}

/// True when a history of `weight` needs compaction (strictly over budget).
pub fn needs_compaction(weight: u64, budget: u64) -> bool {
    weight > budget
}

/// A model's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ModelInfo {
    /// Context window in tokens.
    pub context_window: u64,
    /// Output cap in tokens.
    pub max_output: u64,
    /// Default `max_tokens` the client sends.
    pub default_output: u64,
}

/// The default for unknown models.
pub const DEFAULT_MODEL: ModelInfo =
    ModelInfo { context_window: 128_000, max_output: 8_192, default_output: 4_096 };

/// A small catalog of the main models (matched by substring of the model id, first match wins).
const CATALOG: &[(&str, ModelInfo)] = &[
    ("claude-opus-4", ModelInfo { context_window: 200_000, max_output: 32_000, default_output: 8_192 }),
    ("claude-sonnet-4", ModelInfo { context_window: 200_000, max_output: 64_000, default_output: 8_192 }),
    ("claude-3-7-sonnet", ModelInfo { context_window: 200_000, max_output: 64_000, default_output: 8_192 }),
    ("claude-3-5-haiku", ModelInfo { context_window: 200_000, max_output: 8_192, default_output: 4_096 }),
    ("claude-haiku-4", ModelInfo { context_window: 200_000, max_output: 64_000, default_output: 8_192 }),
    ("anthropic.claude", ModelInfo { context_window: 200_000, max_output: 64_000, default_output: 8_192 }),
    ("gpt-4.1", ModelInfo { context_window: 1_047_576, max_output: 32_768, default_output: 4_096 }),
    ("gpt-4o", ModelInfo { context_window: 128_000, max_output: 16_384, default_output: 4_096 }),
    ("gpt-5", ModelInfo { context_window: 400_000, max_output: 128_000, default_output: 8_192 }),
    ("o3", ModelInfo { context_window: 200_000, max_output: 100_000, default_output: 8_192 }),
    ("o4-mini", ModelInfo { context_window: 200_000, max_output: 100_000, default_output: 8_192 }),
    ("gemini-2.5", ModelInfo { context_window: 1_048_576, max_output: 65_536, default_output: 8_192 }),
    ("gemini-2.0", ModelInfo { context_window: 1_048_576, max_output: 8_192, default_output: 4_096 }),
    ("grok-4", ModelInfo { context_window: 256_000, max_output: 32_768, default_output: 4_096 }),
    ("grok-3", ModelInfo { context_window: 131_072, max_output: 16_384, default_output: 4_096 }),
    ("mistral-large", ModelInfo { context_window: 131_072, max_output: 8_192, default_output: 4_096 }),
    ("codestral", ModelInfo { context_window: 256_000, max_output: 8_192, default_output: 4_096 }),
    ("meta.llama3", ModelInfo { context_window: 128_000, max_output: 8_192, default_output: 2_048 }),
    ("amazon.nova", ModelInfo { context_window: 300_000, max_output: 5_000, default_output: 2_048 }),
];

/// The model's limits; `CHATCLI_CONTEXT_WINDOW` (passed as `window_override`) wins for every provider.
pub fn model_info(model: Option<&str>, window_override: Option<u64>) -> ModelInfo {
    let m = model.map(str::to_ascii_lowercase).unwrap_or_default();
    let mut info = CATALOG.iter().find(|(k, _)| m.contains(k)).map(|(_, i)| *i).unwrap_or(DEFAULT_MODEL);
    if let Some(w) = window_override {
        info.context_window = w;
    }
    info
}

/// Chars-per-token calibrated from observed usage (exponential moving average, clamped).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Calibration {
    /// The current estimate.
    pub chars_per_token: f64,
    /// Observations folded in.
    pub samples: u32,
}

impl Default for Calibration {
    fn default() -> Self {
        Calibration { chars_per_token: CHARS_PER_TOKEN, samples: 0 }
    }
}

impl Calibration {
    /// Folds in one request: `chars` of history sent, `tokens` the provider counted.
    pub fn observe(&mut self, chars: u64, tokens: u64) {
        if tokens == 0 || chars == 0 {
            return;
        }
        let ratio = (chars as f64 / tokens as f64).clamp(1.0, 8.0);
        self.chars_per_token =
            if self.samples == 0 { ratio } else { 0.7 * self.chars_per_token + 0.3 * ratio };
        self.samples = self.samples.saturating_add(1);
    }

    /// Estimated tokens for `chars`.
    pub fn tokens(&self, chars: u64) -> u64 {
        (chars as f64 / self.chars_per_token).ceil() as u64
    }
}
