"""Round trips a request does not need (issue 17): the pool pings only a connection that may be stale,
and a search that opens its transaction commits it in its own pipeline."""

from __future__ import annotations

import time

import psycopg
from psycopg.pq import TransactionStatus
from sqlalchemy import text

from ultron.memory.schemas import UploadRequest
from ultron.tenancy import local_actor


def _count_pings(hub, monkeypatch) -> list[int]:  # type: ignore[no-untyped-def]
    dialect = hub.db.engine.dialect
    pings: list[int] = []
    real = dialect.do_ping

    def counted(dbapi_conn):  # type: ignore[no-untyped-def]
        pings.append(1)
        return real(dbapi_conn)

    monkeypatch.setattr(dialect, "do_ping", counted)
    return pings


def _backend_pid(hub) -> int:  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        return int(s.execute(text("SELECT pg_backend_pid()")).scalar_one())


def test_a_connection_back_in_use_at_once_is_not_pinged(hub, monkeypatch):
    hub.db.engine.dispose()  # every connection new to the check
    pings = _count_pings(hub, monkeypatch)
    pids = {_backend_pid(hub) for _ in range(6)}
    # The pool's pre-ping sent a `SELECT 1` at each of the six checkouts; now only the new connection's
    # first checkout is pinged.
    assert len(pids) == 1 and len(pings) == 1


def test_a_connection_the_server_ended_is_replaced_without_an_error(hub, db_url, monkeypatch):
    pings = _count_pings(hub, monkeypatch)
    pid = _backend_pid(hub)
    before = len(pings)
    # The server ends the pooled session (as a restart or idle_session_timeout does) between two uses.
    with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone() == (True,)
        # wait until the backend is gone, so its FATAL message has been sent
        gone = "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = %s"
        deadline = time.monotonic() + 10
        while not admin.execute(gone, (pid,)).fetchone()[0]:
            assert time.monotonic() < deadline, "the terminated backend did not exit"
            time.sleep(0.01)
    # The socket has its FATAL message to read: the checkout pings, the ping fails, the pool reconnects.
    new_pid = _backend_pid(hub)
    assert new_pid != pid and len(pings) > before


def test_a_search_that_opens_its_transaction_ends_it_in_its_pipeline(hub):
    with hub.db.session() as s:
        actor = local_actor(s)
        hub.memory.upload(
            s, actor, UploadRequest(content="pgbouncer drops prepared statements in transaction mode")
        )
    with hub.db.session() as s:  # the first search of a tenant reads its walk rule and settings first
        hub.memory.search(s, actor, "pgbouncer")
    with hub.db.session() as s:
        raw = s.connection().connection.driver_connection
        assert raw.info.transaction_status == TransactionStatus.IDLE
        # serendipity off: on a thin result list it reads old memories after the search, a transaction of
        # its own
        results = hub.memory.search(s, actor, "pgbouncer prepared statements", serendipity=False)
        assert results
        # The COMMIT went with the search: nothing is left for the session's commit to send, and the
        # search's settings ended with the transaction.
        assert raw.info.transaction_status == TransactionStatus.IDLE
        assert s.execute(text("SHOW plan_cache_mode")).scalar_one() == "auto"
        assert s.execute(text("SHOW enable_sort")).scalar_one() == "on"


def test_a_search_inside_a_transaction_leaves_it_open_and_uncommitted(hub):
    with hub.db.session() as s:
        actor = local_actor(s)
    s = hub.db._sessions()
    try:
        hub.memory.upload(s, actor, UploadRequest(content="redis evicts keys under maxmemory allkeys-lru"))
        raw = s.connection().connection.driver_connection
        assert raw.info.transaction_status == TransactionStatus.INTRANS
        assert hub.memory.search(s, actor, "redis maxmemory eviction")
        # Still the upload's transaction, settings put back: the search committed nothing of it.
        assert raw.info.transaction_status == TransactionStatus.INTRANS
        assert s.execute(text("SHOW plan_cache_mode")).scalar_one() == "auto"
        s.rollback()
    finally:
        s.close()
    with hub.db.session() as s2:
        assert not hub.memory.search(s2, actor, "redis maxmemory eviction")


def _statements(hub):  # type: ignore[no-untyped-def]
    from sqlalchemy import event

    sent: list[str] = []

    def count(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
        sent.append(statement)

    event.listen(hub.db.engine, "before_cursor_execute", count)
    return sent, lambda: event.remove(hub.db.engine, "before_cursor_execute", count)


def test_a_request_is_authenticated_in_one_statement(hub):
    """A key (or the open hub's local agent, once it exists) resolves to its agent, its tenant and its
    groups in one statement: the key-less path sent five (two INSERTs among them) on every request, the
    key path two (measured: ~23 % of an open hub's search over HTTP)."""
    from ultron.groups.service import add_member, create_group
    from ultron.tenancy import authenticate, create_agent

    with hub.db.session() as s:
        first = local_actor(s)  # creates the tenant and the agent
        info, key = create_agent(s, "bob")
        for name in ("ops", "db"):
            create_group(s, first, name)
            add_member(s, first, name, "bob")
    with hub.db.session() as s:
        sent, stop = _statements(hub)
        try:
            local = local_actor(s)
            n_local = len(sent)
            bob = authenticate(s, key)
            n_key = len(sent) - n_local
        finally:
            stop()
    assert (n_local, n_key) == (1, 1)
    assert local == first and local.is_admin
    assert (bob.agent_id, bob.agent_name, bob.tenant_name, bob.groups) == (
        info.id,
        "bob",
        "default",
        ("db", "ops"),
    )
    assert not bob.is_admin


def test_authentication_opens_no_transaction_and_leaves_the_pool_transactional(hub):
    """`Database.autocommit_session` (a request's authentication): the statement runs with no BEGIN and
    no COMMIT around it; the pooled connection goes back transactional, so the request's own unit of
    work still rolls back whole."""
    hub.db.engine.dispose()  # one pooled connection, used by both scopes below
    with hub.db.autocommit_session() as s:
        local_actor(s)
        raw = s.connection().connection.driver_connection
        assert raw.autocommit and raw.info.transaction_status == TransactionStatus.IDLE
    with hub.db.session() as s:
        raw = s.connection().connection.driver_connection
        assert not raw.autocommit
        s.execute(text("CREATE TEMP TABLE scratch_auth (x int)"))
        s.execute(text("INSERT INTO scratch_auth VALUES (1)"))
        assert raw.info.transaction_status == TransactionStatus.INTRANS
        s.rollback()
        assert s.execute(text("SELECT to_regclass('pg_temp.scratch_auth')")).scalar() is None
