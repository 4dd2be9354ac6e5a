//! The texts salvage itself inserts into a history, so that every module can tell them from what
//! a person wrote without importing the module that inserts them (the ladder inserts the notice,
//! the task rule and the engine recognise it).

/// The notice inserted after the system messages when a rung drops messages.
pub const COMPACTION_NOTICE: &str = "[Context was automatically compacted due to size limits. Previous conversation history has been summarized. Continue from where you left off.]";
