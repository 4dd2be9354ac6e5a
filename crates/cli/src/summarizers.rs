//! Building a summarizer from its route name: `builtin`, `recorded`, `cmd:PROGRAM`, `mcp:SERVER`.

use salvage_adapters::mcp::{default_config_files, find_server, McpSummarizer};
use salvage_adapters::process::CommandSummarizer;
use salvage_recovery::summarizer::{Builtin, Recorded, Summarizer};
use std::path::Path;

/// The summarizer for a route; `recorded` replays `recorded` (then falls back to the built-in).
pub fn build(
    route: &str,
    cwd: &Path,
    home: Option<&Path>,
    recorded: &[String],
) -> Result<Box<dyn Summarizer>, String> {
    match route {
        "builtin" => Ok(Box::new(Builtin)),
        "recorded" => Ok(Box::new(Recorded::new(recorded.to_vec()))),
        r => {
            if let Some(p) = r.strip_prefix("cmd:").filter(|p| !p.trim().is_empty()) {
                Ok(Box::new(CommandSummarizer::new(p)))
            } else if let Some(name) = r.strip_prefix("mcp:").filter(|n| !n.trim().is_empty()) {
                let cfg = find_server(name, &default_config_files(cwd, home));
                Ok(Box::new(McpSummarizer::new(name, cfg)))
            } else {
                Err(format!("--summarizer: {r:?} is not builtin, recorded, cmd:PROGRAM or mcp:SERVER"))
            }
        }
    }
}
