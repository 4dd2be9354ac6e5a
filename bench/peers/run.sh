#!/usr/bin/env bash
# Peers side by side: LangGraph's SQLite checkpointer, the OpenAI Agents SDK's SQLiteSession and
# LangChain's trim_messages against salvage's journal and rung 2, on the same histories, in one
# run. Creates its own virtual environment (network needed once, for the installs); runs offline
# after that.
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=target/peers-venv
if [ ! -x "$VENV/bin/python" ]; then python3 -m venv "$VENV"; fi
"$VENV/bin/python" -c "import langgraph.checkpoint.sqlite, langchain_core, agents.memory" 2>/dev/null || "$VENV/bin/pip" install -q -r bench/peers/requirements.txt
cargo build --release --locked -q -p salvage-bench
exec "$VENV/bin/python" bench/peers/peers.py --ours target/release/salvage-bench "$@"
