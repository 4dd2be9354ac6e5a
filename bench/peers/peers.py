"""Times LangGraph's SQLite checkpointer, the OpenAI Agents SDK's SQLiteSession and LangChain's
trim_messages against salvage on the same histories, and prints the ratios (their time / ours).
Run through bench/peers/run.sh."""
import argparse, asyncio, json, os, random, sqlite3, subprocess, sys, tempfile, time, uuid

from agents.memory import SQLiteSession

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, trim_messages
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.sqlite import SqliteSaver

WORDS = "the request gateway rejected body size limit we compact history retry smaller payload model context window tokens summary tool result file read".split()


def text(n, r):
    out = []
    while sum(len(w) + 1 for w in out) < n:
        out.append(r.choice(WORDS))
    return " ".join(out)[:n]


def history(turns, size, seed):
    r = random.Random(seed)
    h = [{"role": "system", "content": "You are a coding agent. " + text(2000, r)}]
    for t in range(turns):
        h.append({"role": "user", "content": text(200, r)})
        h.append({"role": "assistant", "content": text(size, r)})
    return h


def to_lc(h):
    kinds = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
    return [kinds[m["role"]](content=m["content"]) for m in h]


def connect(path):
    """A connection with the pragmas salvage's store uses (WAL, synchronous=NORMAL)."""
    conn = sqlite3.connect(path, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def theirs_checkpoints(h, path):
    """Per turn: write a checkpoint holding the messages so far, then restore it on a cold handle
    (a fresh connection and saver, as salvage's side opens a fresh read-only journal)."""
    conn = connect(path)
    saver = SqliteSaver(conn)
    saver.setup()
    msgs = to_lc(h)
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    write = restore = 0.0
    for i in range(1, len(msgs) + 1):
        ckpt = empty_checkpoint()
        ckpt["id"] = str(uuid.uuid6()) if hasattr(uuid, "uuid6") else str(uuid.uuid1())
        ckpt["channel_values"] = {"messages": msgs[:i]}
        ckpt["channel_versions"] = {"messages": i}
        t = time.perf_counter()
        config = saver.put(config, ckpt, {"source": "loop", "step": i}, {"messages": i})
        write += time.perf_counter() - t
        t = time.perf_counter()
        cold = connect(path)
        got = SqliteSaver(cold).get_tuple(config)
        cold.close()
        restore += time.perf_counter() - t
        assert len(got.checkpoint["channel_values"]["messages"]) == i
    conn.close()
    return write, restore, len(msgs)


class SessionSamePragmas(SQLiteSession):
    """The Agents SDK's SQLite session with salvage's pragmas: it sets WAL itself; synchronous is
    set to NORMAL here, as on every other side of this script."""

    @staticmethod
    def _configure_connection(conn):
        SQLiteSession._configure_connection(conn)
        conn.execute("PRAGMA synchronous=NORMAL")


async def theirs_session(h, path):
    """Per message: add it to an Agents SDK SQLiteSession (its append-only item log), then read the
    whole conversation back through a fresh session object (a new connection: cold)."""
    session = SessionSamePragmas("t", path)
    write = restore = 0.0
    for i, m in enumerate(h, start=1):
        t = time.perf_counter()
        await session.add_items([m])
        write += time.perf_counter() - t
        t = time.perf_counter()
        cold = SessionSamePragmas("t", path)
        got = await cold.get_items()
        cold.close()
        restore += time.perf_counter() - t
        assert len(got) == i and got[-1] == m
    session.close()
    return write, restore


def theirs_trim(h, keep, rounds):
    msgs = to_lc(h)
    best = None
    for _ in range(rounds):
        t = time.perf_counter()
        out = trim_messages(msgs, max_tokens=keep + 1, token_counter=len, strategy="last", include_system=True, start_on="human")
        d = time.perf_counter() - t
        best = d if best is None else min(best, d)
    return best, len(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True)
    ap.add_argument("--turns", type=int, default=300)
    ap.add_argument("--size", type=int, default=1500)
    a = ap.parse_args()
    h = history(a.turns, a.size, 7)
    with tempfile.TemporaryDirectory() as d:
        hist = os.path.join(d, "history.json")
        with open(hist, "w") as f:
            json.dump(h, f)
        tw, tr, n = theirs_checkpoints(h, os.path.join(d, "lg.db"))
        sw, sr = asyncio.run(theirs_session(h, os.path.join(d, "agents.db")))
        tt, kept = theirs_trim(h, 10, 20)
        out = subprocess.run([a.ours, "--peer", hist], check=True, capture_output=True, text=True).stdout
        ours = json.loads(out)
    print(f"{n} messages, {a.turns} turns; per turn: write a checkpoint/append the turn, then restore it on a cold handle (WAL, synchronous=NORMAL on both sides)")
    # The guide's targets are against LangGraph and trim_messages; the Agents SDK session (a third
    # peer: a plain item log, no chain, no snapshots) is shown beside them for information.
    rows = [
        ("checkpoint write per turn", tw / n, ours["append_s"] / n, 25),
        ("checkpoint restore per turn", tr / n, ours["restore_s"] / n, 10),
        ("truncate to the last 10 (trim_messages vs rung 2)", tt, ours["rung2_s"], 20),
        ("Agents SDK SQLiteSession add_items per message", sw / n, ours["append_s"] / n, None),
        ("Agents SDK SQLiteSession get_items, cold, per message", sr / n, ours["restore_s"] / n, None),
    ]
    print(f"{'workload':54} {'theirs':>12} {'ours':>12} {'ratio':>8} {'target':>8}  met")
    for name, t, o, target in rows:
        r = t / max(o, 1e-12)
        want = "(info)" if target is None else f">= {target}x"
        met = "-" if target is None else ("yes" if r >= target else "NO")
        print(f"{name:54} {t * 1e6:10.1f}us {o * 1e6:10.1f}us {r:7.1f}x {want:>8}  {met}")
    print(f"(trim kept {kept} messages; rung 2 kept {ours['rung2_kept']})")


if __name__ == "__main__":
    main()
