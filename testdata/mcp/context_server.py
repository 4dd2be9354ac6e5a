"""A small MCP server for salvage's tests, built with the official MCP Python SDK.

It exposes one tool, `context_compact(segment, budget_chars, instruction)`, that returns a
deterministic extractive summary of the segment (the lines that mention files, commands and
errors), within `budget_chars`. SALVAGE_TEST_MCP_MODE=empty|error|slow makes it misbehave so the
client's fallback to the built-in summarizer can be tested.
"""

import os
import re
import time

from mcp.server.mcpserver import MCPServer

server = MCPServer("salvage-test-context-engine")


@server.tool()
def context_compact(segment: str, budget_chars: int, instruction: str) -> str:
    """Summarize a conversation segment within budget_chars."""
    mode = os.environ.get("SALVAGE_TEST_MCP_MODE", "")
    if mode == "empty":
        return ""
    if mode == "error":
        raise RuntimeError("context engine unavailable")
    if mode == "slow":
        time.sleep(float(os.environ.get("SALVAGE_TEST_MCP_SLEEP", "30")))
    files, commands, errors = [], [], []
    for line in segment.splitlines():
        for path in re.findall(r"[\w./-]+\.(?:rs|toml|sql|md|py|go|js|ts)\b", line):
            if path not in files:
                files.append(path)
        if "calls run_command" in line or "calls bash" in line:
            commands.append(line.strip()[:160])
        low = line.lower()
        if ("error" in low or "failed" in low or "panicked" in low) and len(errors) < 10:
            errors.append(line.strip()[:200])
    out = ["## Summary (mcp context engine)", f"- segment of {len(segment)} chars"]
    if files:
        out.append("## Files")
        out += [f"- {f}" for f in files[:30]]
    if commands:
        out.append("## Commands")
        out += [f"- {c}" for c in dict.fromkeys(commands)][:20]
    if errors:
        out.append("## Errors")
        out += [f"- {e}" for e in dict.fromkeys(errors)][:10]
    text = "\n".join(out)
    return text[: max(200, int(budget_chars))]


if __name__ == "__main__":
    server.run("stdio")
