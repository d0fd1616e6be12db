"""A psycopg pipeline that opens the transaction without a round trip of its own.

psycopg starts a transaction on a connection's first statement by sending BEGIN; in pipeline mode it then
sends a Sync and waits for the server's answer before queueing anything else, so a pipeline that opens its
transaction costs two round trips, not one (measured in stop 27: a single upload's dedup probe is sent this
way). `transaction_pipeline` sends the BEGIN itself, as the pipeline's first statement: the connection is
switched to autocommit while idle (psycopg then adds no BEGIN of its own), and back to its transactional
mode once the pipeline has ended, with the transaction open as psycopg would have left it. The server runs
the same statements in the same order in the same transaction; what is saved is the wait.

Switching back uses psycopg's private `_autocommit` flag: its public setter refuses while a transaction is
open, and the state it would refuse is exactly the state psycopg itself is in after its own BEGIN. Where
that flag is not there (another psycopg), the plain pipeline is used and nothing changes but the cost.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from psycopg.pq import TransactionStatus


def _opens_cheaply(raw: Any) -> bool:
    return (
        not raw.autocommit
        and raw.info.transaction_status == TransactionStatus.IDLE
        and isinstance(getattr(raw, "_autocommit", None), bool)
    )


@contextmanager
def transaction_pipeline(raw: Any) -> Iterator[None]:
    """`with raw.pipeline():`, the transaction's BEGIN (when the connection is idle) sent with the rest."""
    if not _opens_cheaply(raw):
        with raw.pipeline():
            yield
        return
    raw.autocommit = True  # idle: allowed
    try:
        with raw.pipeline():
            raw.execute("BEGIN")
            yield
    finally:
        # In the transaction now (or in its failed state, or idle if BEGIN never ran): the connection is
        # transactional again, as psycopg's own BEGIN leaves it; a COMMIT or ROLLBACK ends it as usual.
        raw._autocommit = False
        assert not raw.autocommit
