"""Round trips a pipeline spends on its transaction (issue 36, stop 27): psycopg's BEGIN waits for a Sync of
its own in pipeline mode, so an upload's dedup probe paid two round trips and a search three. Counted by
the Syncs psycopg queues, each one a wait for the server; behaviour, not timing (timing is `ultron bench`)."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors
from psycopg._pipeline_base import BasePipeline
from psycopg.pq import TransactionStatus
from sqlalchemy import text

from ultron.db.pipeline import transaction_pipeline
from ultron.memory.schemas import UploadRequest
from ultron.tenancy import local_actor


@pytest.fixture()
def syncs(monkeypatch):  # type: ignore[no-untyped-def]
    """How many Syncs psycopg's pipelines queue: each is a round trip waited for."""
    count = [0]
    real = BasePipeline._enqueue_sync

    def counted(self):  # type: ignore[no-untyped-def]
        count[0] += 1
        return real(self)

    monkeypatch.setattr(BasePipeline, "_enqueue_sync", counted)
    return count


@pytest.fixture()
def conn(db_url):  # type: ignore[no-untyped-def]
    with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://")) as c:
        c.execute("CREATE TABLE t (x int)")
        c.commit()
        yield c


def test_the_pipeline_opens_its_transaction_in_its_one_round_trip(conn, syncs):
    with conn.pipeline():  # psycopg's own: BEGIN, then a Sync for it, then the pipeline's
        conn.execute("INSERT INTO t VALUES (1)")
    assert syncs[0] == 2
    conn.rollback()
    syncs[0] = 0
    with transaction_pipeline(conn):
        conn.execute("INSERT INTO t VALUES (2)")
        conn.execute("SELECT set_config('statement_timeout', '1234', true)")
    assert syncs[0] == 1
    # One transaction, still open and the connection's own again: a local setting holds, a rollback
    # undoes the insert, and the connection is transactional as psycopg would have left it.
    assert conn.info.transaction_status == TransactionStatus.INTRANS
    assert not conn.autocommit
    assert conn.execute("SHOW statement_timeout").fetchone() == ("1234ms",)
    conn.rollback()
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)
    assert conn.execute("SHOW statement_timeout").fetchone() == ("0",)
    conn.commit()
    # and committed when committed
    with transaction_pipeline(conn):
        conn.execute("INSERT INTO t VALUES (3)")
    conn.commit()
    assert conn.info.transaction_status == TransactionStatus.IDLE
    assert conn.execute("SELECT x FROM t").fetchall() == [(3,)]


def test_a_failed_statement_leaves_the_connection_transactional_and_usable(conn):
    with pytest.raises(errors.UndefinedTable), transaction_pipeline(conn):
        conn.execute("INSERT INTO t VALUES (1)")
        conn.execute("INSERT INTO missing VALUES (1)")
    assert not conn.autocommit
    assert conn.info.transaction_status == TransactionStatus.INERROR
    conn.rollback()
    conn.execute("INSERT INTO t VALUES (4)")  # a transaction psycopg opens, as before
    assert conn.info.transaction_status == TransactionStatus.INTRANS
    conn.commit()
    assert conn.execute("SELECT x FROM t").fetchall() == [(4,)]


def test_inside_a_transaction_it_is_a_plain_pipeline(conn, syncs):
    conn.execute("INSERT INTO t VALUES (5)")
    syncs[0] = 0
    with transaction_pipeline(conn):
        conn.execute("INSERT INTO t VALUES (6)")
    assert syncs[0] == 1 and not conn.autocommit
    conn.rollback()
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)


def test_an_upload_and_a_search_wait_for_the_server_once_each_and_the_commit(hub, syncs):
    with hub.db.session() as s:
        actor = local_actor(s)
        hub.memory.upload(s, actor, UploadRequest(content="warm-up: the tenant's policy and walk rule read"))
        hub.memory.search(s, actor, "warm-up")
    syncs[0] = 0
    with hub.db.session() as s:
        hub.memory.upload(
            s, actor, UploadRequest(content="gunicorn workers killed by the OOM killer at 2 GiB")
        )
        raw = s.connection().connection.driver_connection
        # the probe's pipeline: one Sync (was two: psycopg's BEGIN waited for its own)
        assert syncs[0] == 1
        assert raw.info.transaction_status == TransactionStatus.INTRANS and not raw.autocommit
    with hub.db.session() as s:  # the upload committed
        assert s.execute(text("SELECT count(*) FROM memories WHERE content LIKE 'gunicorn%'")).scalar() == 1
    syncs[0] = 0
    with hub.db.session() as s:
        assert hub.memory.search(s, actor, "gunicorn OOM killer", serendipity=False)
        # the search's pipeline: one Sync, no BEGIN and no COMMIT of its own (was three Syncs)
        assert syncs[0] == 1
        raw = s.connection().connection.driver_connection
        assert raw.info.transaction_status == TransactionStatus.IDLE and not raw.autocommit
        assert s.execute(text("SHOW plan_cache_mode")).scalar_one() == "auto"
