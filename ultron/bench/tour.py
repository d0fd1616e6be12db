"""`ultron demo`: the product in a minute, in a fresh store of its own.

It opens a new data dir (embedded Postgres; never the user's ~/.ultron nor ULTRON_DATABASE_URL), stores a
small mixed set through the real services (coding errors from `ultron.bench.demo`, a chat export, an agent
session log), lets the worker's steps turn the chat and the session into memories, then prints three
searches and a brief. The data dir is kept, so `ultron serve --data-dir DIR` shows it in the dashboard.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ultron.bench.demo import DEMO_MEMORIES

# Coding errors and the lessons around them; the correction is pinned, so the brief has a must-know.
CODING = [DEMO_MEMORIES[i] for i in (0, 1, 4, 5, 6, 9, 13, 15)]
PINNED = 2  # index in CODING: "Correction: the staging database is on port 5433"
# One agent session (OpenAI messages): a failing test, the diagnosis, the fix, the passing run.
SESSION = "\n".join(
    [
        '{"role": "user", "content": "The payments test test_refund_rounding fails after upgrading to '
        'Python 3.12, can you fix it?"}',
        '{"role": "assistant", "content": "Running the failing test first.", "tool_calls": [{"id": "c1", '
        '"type": "function", "function": {"name": "pytest", "arguments": "{\\"args\\": '
        '\\"tests/test_payments.py\\"}"}}]}',
        '{"role": "tool", "tool_call_id": "c1", "content": "FAILED tests/test_payments.py::'
        "test_refund_rounding - AssertionError: Decimal('10.01') != Decimal('10.00')\"}",
        '{"role": "assistant", "content": "round() on floats changed behaviour; the refund code should '
        'quantize a Decimal with ROUND_HALF_EVEN.", "tool_calls": [{"id": "c2", "type": "function", '
        '"function": {"name": "edit_file", "arguments": "{\\"path\\": \\"payments/refund.py\\"}"}}]}',
        '{"role": "tool", "tool_call_id": "c2", "content": "payments/refund.py updated"}',
        '{"role": "assistant", "content": "Re-running the tests.", "tool_calls": [{"id": "c3", "type": '
        '"function", "function": {"name": "pytest", "arguments": "{\\"args\\": \\"tests\\"}"}}]}',
        '{"role": "tool", "tool_call_id": "c3", "content": "48 passed in 1.92s"}',
        '{"role": "assistant", "content": "Fixed: refunds quantize Decimal(\'0.01\') with ROUND_HALF_EVEN; '
        'all 48 tests pass."}',
        '{"role": "user", "content": "Great, that works now."}',
    ]
)
# A chat export: conversations separated by "---", each ending in the user's thanks (a completed task).
CHAT = """User: Our nginx returns 413 Request Entity Too Large on file uploads over 1 MB.
Assistant: Raise client_max_body_size in the server block, e.g. client_max_body_size 50m; then reload nginx.
User: Thanks, it worked: uploads of 20 MB pass now.
---
User: How do I make pytest stop at the first failure and show the local variables?
Assistant: Use pytest -x -l; add --pdb to drop into the debugger on the failure.
User: Perfect, -x -l is what I needed.
"""
SEARCHES = (
    "postgres refused connections when the containers started",
    "rounding test fails after upgrading python",
    "nginx rejects large uploads",
)
BRIEF_TASK = "deploy the worker to the staging cluster"


def fresh_data_dir(requested: str | None) -> Path:
    """A new empty folder for the demo's store: `requested` if it is new or empty, else a temp folder."""
    if requested is None:
        return Path(tempfile.mkdtemp(prefix="ultron-demo-"))
    path = Path(requested).expanduser()
    if path.exists() and any(path.iterdir()):
        raise ValueError(
            f"{path} is not empty: the demo fills a fresh store only (name a new folder, or omit --data-dir)"
        )
    path.mkdir(parents=True, exist_ok=True)
    return path


def run_demo(settings: Any, data_dir: Path, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Fill the store at `data_dir`, print what a user sees; returns the figures (for tests)."""
    # start-up: the hub and the SDK load only when the demo runs, not when the CLI builds its parser
    from ultron.hub import Hub
    from ultron.sdk import Ultron

    started = time.monotonic()
    say(f"Ultron demo: a fresh store in {data_dir} (your own store is not touched)")
    hub = Hub.open(settings)
    try:
        # The key-less local agent: no key is created, so `ultron serve` on this store runs open on
        # loopback and its dashboard needs no sign-in.
        client = Ultron(hub=hub)
        records = [client.upload_memory(**fields) for fields in CODING]
        client.pin_memory(records[PINNED].id)
        chat_file = data_dir / "team-chats.txt"
        chat_file.write_text(CHAT, encoding="utf-8")
        client.import_history("text", chat_file)
        session_file = data_dir / "payments-session.jsonl"
        session_file.write_text(SESSION + "\n", encoding="utf-8")
        client.ingest([session_file])
        client.process_trajectories()  # what the worker would do in the background: segment, extract
        stats = client.get_memory_stats()
        say(
            f"stored {len(CODING)} coding errors, a chat export and an agent session log: "
            f"{stats.total} memories after dedup and extraction"
        )
        searches: dict[str, list[str]] = {}
        for query in SEARCHES:
            say(f'\nsearch "{query}"')
            # Only confident matches: a demo that shows unrelated results teaches the wrong thing.
            hits = [h for h in client.search_memories(query, limit=3) if h.confidence == "high"]
            searches[query] = [hit.record.summary_l0 for hit in hits]
            for hit in hits:
                say(f"  {hit.similarity_score:.2f}  {hit.record.summary_l0}")
            if not hits:
                say("  (no confident match)")
        brief = client.brief(task=BRIEF_TASK, max_tokens=300)
        say(f'\nbrief for "{BRIEF_TASK}" ({brief.tokens} tokens):')
        for item in brief.items:
            say(f"  [{item.section}] {item.text}")
        say(
            f"\ndone in {time.monotonic() - started:.0f} s. Browse it: ultron serve --data-dir {data_dir} "
            f"(then open the URL it prints); remove it: rm -rf {data_dir}"
        )
        return {"memories": stats.total, "searches": searches, "brief": [i.text for i in brief.items]}
    finally:
        hub.close()
